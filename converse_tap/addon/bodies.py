"""Bodies that are not streams but that mitmproxy streamed all the same (`stream_large_bodies`, or another addon
that set `stream = True`): the proxy relays their chunks as they come and hands them on (taps.BodyTap); the worker
gathers them here, up to `max_body`, and reads the body whole at its end, as if mitmproxy had kept it.

What they hold counts in the worker's budget for open streams (worker.MAX_HELD): past it, the largest give up
their body, and their row says so (`response_body_not_kept:worker_buffer_full`); so do the texts of the rows an
open stream has made so far (`row_bytes`, given up by `drop_texts`)."""

from __future__ import annotations

from typing import Any


def incomplete(lost: bool | str) -> str:
    """The note for a tapped response the worker did not get whole: `lost` is True when the proxy's backlog was
    full, or why else (`stream_replaced`: an addon after ours set its own `stream`, and the chunks went there)."""
    return f"capture_incomplete:{lost if isinstance(lost, str) else 'recorder_backlog'}"


class Gathered:
    __slots__ = ("body", "head", "note", "req")

    def __init__(self, req: tuple[Any, ...], head: tuple[Any, ...]) -> None:
        self.req = req
        self.head = head
        self.body: bytearray | None = bytearray()
        self.note = ""  # why the body is not read (given up for the worker's budget)

    @property
    def held(self) -> int:
        return len(self.body) if self.body is not None else 0

    def add(self, chunk: bytes, max_body: int) -> int:
        """Keep a chunk; the bytes now held more (or fewer: a body past `max_body` is let go, its size comes at
        the end)."""
        if self.body is None:
            return 0
        if len(self.body) + len(chunk) > max_body:
            freed = len(self.body)
            self.body = None
            return -freed
        self.body += chunk
        return len(chunk)

    def shed(self) -> int:
        freed = self.held
        self.body = None
        self.note = "response_body_not_kept:worker_buffer_full"
        return freed

    def response(self, resp_end: tuple[Any, ...], size: int, lost: bool | str) -> tuple[tuple[Any, ...], str]:
        """The response as `Worker._exchange` takes it (head, end time, body, size), and a note for its row."""
        ts_end = resp_end[0]
        if lost:  # chunks the proxy could not hand on: the body is not whole, so not read
            return (*self.head, ts_end, None, size), incomplete(lost)
        if self.note:
            return (*self.head, ts_end, None, size), self.note
        body = bytes(self.body) if self.body is not None else b""  # b"" and a larger size: too large, said
        return (*self.head, ts_end, body, size), ""


def row_bytes(row: dict[str, Any]) -> int:
    """What a message row of an open stream holds until the stream ends: its text and stored envelope."""
    return len(row.get("text") or "") + len(row.get("envelope_json") or "")


_KEPT_TEXT = 1024  # texts up to this long are kept when an open stream's rows give up theirs


def drop_texts(row: dict[str, Any]) -> int:
    """A message row without its long text and stored envelope (`text_length` still says how long it was);
    the number of characters given up."""
    dropped = 0
    for column in ("text", "envelope_json"):
        n = len(row.get(column) or "")
        if n > _KEPT_TEXT:
            row[column] = None
            row["anomalies"].append(f"{column}_not_kept:worker_buffer_full")
            dropped += n
    return dropped
