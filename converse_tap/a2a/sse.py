"""Incremental Server-Sent Events parser (WHATWG framing) that tolerates arbitrary chunk boundaries."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class SseEvent:
    """One dispatched event. `data` is the joined `data:` lines; `oversize` means data was dropped."""

    data: str
    event: str = "message"
    id: str | None = None
    received: float | None = None
    oversize: bool = False


class SseParser:
    """Feed bytes as they arrive; `feed` returns the events completed by that chunk.

    Lines end in CRLF, LF or CR (a CR at the end of a chunk waits for a possible LF). A blank line dispatches
    the event; comment lines (leading ':') are counted and skipped. Events whose data grows past
    `max_event_bytes` are dispatched with `oversize=True` and empty data instead of being held in memory.
    """

    __slots__ = (
        "_buf",
        "_data",
        "_data_bytes",
        "_event",
        "_id",
        "_oversize",
        "_skip_is_data",
        "_skipping",
        "_started",
        "comments",
        "max_event_bytes",
    )

    def __init__(self, max_event_bytes: int = 16 * 1024 * 1024) -> None:
        self.max_event_bytes = max_event_bytes
        self.comments = 0
        self._buf = b""
        self._data: list[bytes] = []
        self._data_bytes = 0
        self._event: str | None = None
        self._id: str | None = None
        self._oversize = False
        self._skipping = False  # inside a line too long to hold, whose start was dropped
        self._skip_is_data = False
        self._started = False

    def feed(self, chunk: bytes, received: float | None = None) -> list[SseEvent]:
        buf = self._buf + chunk if self._buf else chunk
        if not self._started and buf:
            if len(buf) < 3 and b"\xef\xbb\xbf".startswith(buf):
                self._buf = buf
                return []
            self._started = True
            if buf.startswith(b"\xef\xbb\xbf"):
                buf = buf[3:]
        hold = b""
        if buf.endswith(b"\r"):
            buf, hold = buf[:-1], b"\r"
        lines = buf.splitlines(keepends=True)
        rest = b""
        if lines and not lines[-1].endswith((b"\n", b"\r")):
            rest = lines.pop()
        self._buf = rest + hold
        events: list[SseEvent] = []
        for raw in lines:
            if self._skipping:  # the end of the dropped line
                self._skipping = False
                continue
            ev = self._line(raw.rstrip(b"\r\n"), received)
            if ev is not None:
                events.append(ev)
        if len(self._buf) > self.max_event_bytes:
            # one enormous line with no end yet: drop it, remember the event is oversize
            if not self._skipping:
                self._skip_is_data = self._buf.startswith(b"data")
            self._skipping = True
            self._oversize = True
            if self._skip_is_data:
                self._data_bytes += len(self._buf)
            self._buf = b""
        return events

    def close(self, received: float | None = None) -> list[SseEvent]:
        """End of stream: a trailing event without its blank line is dispatched (lenient, like browsers are not)."""
        events: list[SseEvent] = []
        if self._buf:
            line, self._buf = self._buf.rstrip(b"\r\n"), b""
            ev = self._line(line, received)
            if ev is not None:
                events.append(ev)
        ev = self._line(b"", received)
        if ev is not None:
            events.append(ev)
        return events

    def _line(self, line: bytes, received: float | None) -> SseEvent | None:
        if not line:
            return self._dispatch(received)
        if line[:1] == b":":
            self.comments += 1
            return None
        name, sep, value = line.partition(b":")
        if sep and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            if not self._oversize:
                self._data_bytes += len(value) + 1
                if self._data_bytes > self.max_event_bytes:
                    self._oversize = True
                    self._data.clear()
                else:
                    self._data.append(value)
            else:
                self._data_bytes += len(value) + 1
        elif name == b"event":
            self._event = value.decode("utf-8", "replace")
        elif name == b"id" and b"\x00" not in value:
            self._id = value.decode("utf-8", "replace")
        # "retry" and unknown fields are ignored, as the standard says
        return None

    def _dispatch(self, received: float | None) -> SseEvent | None:
        if not self._data_bytes:
            self._event = None
            self._oversize = False
            return None
        data = b"\n".join(self._data).decode("utf-8", "replace")
        ev = SseEvent(
            data="" if self._oversize else data,
            event=self._event or "message",
            id=self._id,
            received=received,
            oversize=self._oversize,
        )
        self._data.clear()
        self._data_bytes = 0
        self._event = None
        self._oversize = False
        return ev


def parse_sse(body: bytes, max_event_bytes: int = 16 * 1024 * 1024) -> tuple[list[SseEvent], int]:
    """Parse a whole SSE body; returns the events and the number of comment lines."""
    parser = SseParser(max_event_bytes)
    events = parser.feed(body)
    events.extend(parser.close())
    return events, parser.comments
