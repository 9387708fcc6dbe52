"""Incremental Server-Sent Events parser (WHATWG framing): O(bytes) whatever the chunking, bounded memory."""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(slots=True)
class SseEvent:
    """One dispatched event. `data` is the joined `data:` lines; `oversize` means data was dropped."""

    data: str
    event: str = "message"
    id: str | None = None
    received: float | None = None
    oversize: bool = False
    not_utf8: bool = False  # its data held bytes that are not UTF-8, read as U+FFFD (as the standard says)
    # the stream ended before its blank line: dispatched at `close` (the standard, and the a2a-sdk's client,
    # drop such an event: its client may never have seen it)
    unterminated: bool = False


class SseParser:
    """Feed bytes as they arrive; `feed` returns the events completed by that chunk.

    Lines end in CRLF, LF or CR (a CR at the end of a chunk may be followed by the LF of the same line end).
    A blank line dispatches the event; comment lines (leading ':') are counted and skipped. Each byte is looked
    at a bounded number of times: an unfinished line is kept as a list of pieces, never re-joined per chunk.
    An event whose data, or a line that, grows past `max_event_bytes` is dispatched with `oversize=True` and
    empty data instead of being held in memory. With `count_only` set, events are counted in `dispatched`
    but not built (for the tail of a stream too long to parse).
    """

    __slots__ = (
        "_cr",
        "_data",
        "_data_bytes",
        "_event",
        "_id",
        "_line",
        "_line_bytes",
        "_oversize",
        "_skip_is_data",
        "_skipping",
        "_started",
        "comments",
        "count_only",
        "dispatched",
        "max_event_bytes",
    )

    def __init__(self, max_event_bytes: int = 16 * 1024 * 1024) -> None:
        self.max_event_bytes = max_event_bytes
        self.comments = 0
        self.dispatched = 0
        self.count_only = False
        self._line: list[bytes] = []  # pieces of the line not yet ended
        self._line_bytes = 0
        self._cr = False  # the last chunk ended in CR: a leading LF of the next one belongs to it
        self._data: list[bytes] = []
        self._data_bytes = 0
        self._event: bytes | None = None
        self._id: str | None = None
        self._oversize = False
        self._skipping = False  # inside a line too long to hold, whose start was dropped
        self._skip_is_data = False
        self._started = False

    def feed(self, chunk: bytes, received: float | None = None) -> list[SseEvent]:
        if not chunk:
            return []
        if not self._started:
            pending = b"".join(self._line) + chunk
            if len(pending) < 3 and b"\xef\xbb\xbf".startswith(pending):
                self._line, self._line_bytes = [pending], len(pending)
                return []
            self._started = True
            self._line, self._line_bytes = [], 0
            chunk = pending[3:] if pending.startswith(b"\xef\xbb\xbf") else pending
        if self._cr:
            self._cr = False
            if chunk[:1] == b"\n":
                chunk = chunk[1:]
        if not chunk:  # all of it the LF of a CRLF, or a byte-order mark: no piece of a line to hold
            return []
        if self.count_only and not self._skipping and b"\r" not in chunk:
            self._count(chunk)
            return []
        end = max(chunk.rfind(b"\n"), chunk.rfind(b"\r"))
        if end < 0:
            self._hold(chunk)
            return []
        head, tail = chunk[: end + 1], chunk[end + 1 :]
        self._cr = not tail and chunk[-1:] == b"\r"
        lines = head.splitlines()
        if self._skipping:  # the end of a line too long to hold
            self._end_skipped(len(lines[0]))
            del lines[0]
        elif self._line:
            self._line.append(lines[0])
            lines[0] = b"".join(self._line)
            self._line, self._line_bytes = [], 0
        events: list[SseEvent] = []
        for line in lines:
            if not line:
                if self._data_bytes:
                    ev = self._dispatch(received)
                    if ev is not None:
                        events.append(ev)
                else:
                    self._event = None
                    self._oversize = False
            elif line[:5] == b"data:":
                value = line[6:] if line[5:6] == b" " else line[5:]
                self._add_data(value)
            else:
                self._field(line)
        if tail:
            self._hold(tail)
        return events

    @property
    def held(self) -> int:
        """Bytes of the event being gathered that this parser holds (its unfinished line and data lines)."""
        return self._line_bytes + (0 if self._oversize else self._data_bytes)

    def shed(self) -> None:
        """Drop what `held` counts: the event is dispatched as if it had passed `max_event_bytes` (`oversize`,
        no data), and the rest of an unfinished line is skipped. For a caller over its memory budget."""
        if self._line and not self._skipping:
            start = b""
            for piece in self._line:  # what kind of line it is: its first five bytes, without joining it
                start += piece[: 5 - len(start)]
                if len(start) >= 5:
                    break
            self._skip_is_data = start == b"data:"
            self._skipping = True
            if self._skip_is_data:
                self._data_bytes += self._line_bytes
            self._line, self._line_bytes = [], 0
        if self._data_bytes:
            self._oversize = True
            self._data.clear()

    @property
    def pending(self) -> bool:
        """Bytes of an event not yet dispatched are held (a stream cut here was cut mid-event)."""
        return bool(self._line or self._skipping or self._data_bytes)

    def close(self, received: float | None = None) -> list[SseEvent]:
        """End of stream: a trailing event without its blank line is dispatched (lenient, like browsers are not)."""
        events: list[SseEvent] = []
        if self._skipping:
            self._end_skipped(0)
        elif self._line:
            line = b"".join(self._line)
            self._line, self._line_bytes = [], 0
            if line[:5] == b"data:":
                self._add_data(line[6:] if line[5:6] == b" " else line[5:])
            elif line:
                self._field(line)
        if self._data_bytes:
            ev = self._dispatch(received)
            if ev is not None:
                ev.unterminated = True
                events.append(ev)
        return events

    def _count(self, chunk: bytes) -> None:
        """`feed` for the count-only tail of a stream of LF-ended lines, at C speed: split into blocks at runs
        of blank lines, and count the blocks that hold a data line (the events the standard dispatches)."""
        line_start = not self._line
        text = b"".join(self._line) + chunk if self._line else chunk
        self._line, self._line_bytes = [], 0
        # at a line start, the previous line's LF is part of a blank line that may open this chunk
        t = b"\n" + text if line_start else text
        if self._all_data(t, line_start):
            return
        blocks = _BLANK_RUN.split(t)
        last = blocks.pop()
        if blocks:
            n = 1 if self._data_bytes or _has_data(blocks[0]) else 0
            for block in blocks[1:]:
                if _has_data(block):
                    n += 1
            self.dispatched += n
            self._data_bytes = 0
            self._event = None
            self._oversize = False
        # the last block runs on: its ended lines may hold data, its unended line waits for the next chunk
        cut = last.rfind(b"\n")
        ended, rest = (last[: cut + 1], last[cut + 1 :]) if cut >= 0 else (b"", last)
        if _has_data(ended.rstrip(b"\n")):
            self._data_bytes = self._data_bytes or 1
        if rest:
            self._hold(rest)

    def _all_data(self, t: bytes, line_start: bool) -> bool:
        """The usual shape of a flood, counted with a handful of C-level scans: every line a `data:` line or a
        single blank line. False (nothing consumed) when `t` has any other shape."""
        if b"\n\n\n" in t or (not line_start and not t.startswith(b"data:")):
            return False
        lf, runs, data = t.count(b"\n"), t.count(b"\n\n"), t.count(b"\ndata:")
        if data + runs + (1 if t.endswith(b"\n") else 0) != lf:
            return False
        last_run = t.rfind(b"\n\n")
        if runs:
            # the block before the first blank line joins the event already open (if any)
            opened = self._data_bytes or not t.startswith(b"\n\n")
            self.dispatched += runs - (0 if opened else 1)
            self._event = None
            self._oversize = False
            tail = t[last_run + 2 :]
            self._data_bytes = 1 if b"\n" in tail else 0
        else:
            tail = t
            if b"\n" in (t[1:] if line_start else t):
                self._data_bytes = self._data_bytes or 1
        cut = tail.rfind(b"\n")
        rest = tail[cut + 1 :] if cut >= 0 else tail
        if rest:
            self._hold(rest)
        return True

    def _hold(self, piece: bytes) -> None:
        """Keep the start of an unfinished line; past the cap, drop it and remember what kind of line it was."""
        if self._skipping:
            if self._skip_is_data:
                self._data_bytes += len(piece)
            return
        if not piece:  # held, an empty piece would read as an unfinished line (`pending`)
            return
        self._line.append(piece)
        self._line_bytes += len(piece)
        if self._line_bytes > self.max_event_bytes:
            self._skip_is_data = b"".join(self._line)[:5] == b"data:"
            self._skipping = True
            self._oversize = self._oversize or self._skip_is_data
            if self._skip_is_data:
                self._data_bytes += self._line_bytes
                self._data.clear()
            self._line, self._line_bytes = [], 0

    def _end_skipped(self, rest: int) -> None:
        if self._skip_is_data:
            self._data_bytes += rest + 1
        self._skipping = False

    def _add_data(self, value: bytes) -> None:
        self._data_bytes += len(value) + 1
        if self._oversize:
            return
        if self._data_bytes > self.max_event_bytes:
            self._oversize = True
            self._data.clear()
        elif not self.count_only:
            self._data.append(value)

    def _field(self, line: bytes) -> None:
        if line[:1] == b":":
            self.comments += 1
            return
        name, sep, value = line.partition(b":")
        if sep and value[:1] == b" ":
            value = value[1:]
        if name == b"data":
            self._add_data(value)
        elif name == b"event":
            self._event = value
        elif name == b"id" and b"\x00" not in value:
            self._id = value.decode("utf-8", "replace")
        # "retry" and unknown fields are ignored, as the standard says

    def _dispatch(self, received: float | None) -> SseEvent | None:
        self.dispatched += 1
        ev = None
        if not self.count_only:
            try:
                data = "" if self._oversize else b"\n".join(self._data).decode("utf-8")
            except UnicodeDecodeError:
                data = None
            ev = SseEvent(
                data=b"\n".join(self._data).decode("utf-8", "replace") if data is None else data,
                event=self._event.decode("utf-8", "replace") if self._event else "message",
                id=self._id,
                received=received,
                oversize=self._oversize,
            )
            if data is None:
                ev.not_utf8 = True
        self._data.clear()
        self._data_bytes = 0
        self._event = None
        self._oversize = False
        return ev


_BLANK_RUN = re.compile(rb"\n\n+")


def _has_data(block: bytes) -> bool:
    """Whether LF-separated lines hold a `data` field line (`data:…` or a bare `data`)."""
    return (
        block.startswith(b"data:")
        or block == b"data"
        or block.startswith(b"data\n")
        or b"\ndata:" in block
        or b"\ndata\n" in block
        or block.endswith(b"\ndata")
    )


def parse_sse(body: bytes, max_event_bytes: int = 16 * 1024 * 1024, ended: bool = True) -> tuple[list[SseEvent], int]:
    """Parse a whole SSE body; returns the events and the number of comment lines. `ended`: the stream ended
    cleanly, so a last event without its blank line is dispatched; a stream cut by an error keeps it back (the
    standard dispatches none), as the recorder does live."""
    parser = SseParser(max_event_bytes)
    events = parser.feed(body)
    if ended:
        events.extend(parser.close())
    return events, parser.comments
