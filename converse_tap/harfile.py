"""HAR files read entry by entry: `log.entries` is streamed, so memory holds one entry, whatever the file's size.
Each entry becomes an exchange in `harentry`.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .capturefile import open_regular

CHUNK = 1 << 20
MAX_ENTRY = 32 << 20  # characters of a HAR entry (bodies included) held and parsed; a larger entry is passed over
MAX_CONTAINERS = 1_000_000  # `_Weight` of a value read across chunks (arrays, objects, scalars): past it, not parsed
_SPACE = re.compile(r"[ \t\n\r]*")
_TOKEN = 16  # characters of the longest token a read can cut (`-Infinity`, a surrogate pair's two escapes)
_DECODER = json.JSONDecoder()
_TWICE = "given twice (JSON readers keep only the second; the first one's were read)"
_AFTER = (
    "text after the end of the HAR (another HAR appended to it?), not read: JSON readers refuse such a file; "
    "give each HAR a file of its own"
)


@dataclass(frozen=True)
class Unreadable:
    """A JSON value passed over unparsed: `reason` says why."""

    reason: str


_OUTSIDE = re.compile(r'["\[\]{}]|[^"\[\]{}\s,:]+')
_FLAT = re.compile(r'(?:[^"\[\]{}]++|\[[^"\[\]{}]*+\]|\{[^"\[\]{}]*+\})*+')
_BARE = re.compile(r'[^"\[\]{}\s,:]*')
_CHARS = r'[^"\\]*+(?:\\[\s\S][^"\\]*+)*+'  # a string's characters, escapes whole
_STRING_REST = re.compile(_CHARS)
_WHOLE = re.compile(r'[^"]*+(?:"' + _CHARS + r'"[^"]*+)*+')  # text outside strings and whole strings
_MARKS = re.compile(r'"' + _CHARS + r'"|([\[{,:])')  # a whole string (''), or a mark outside strings


class _Weight:
    """What a value read across chunks would cost parsed, counted outside its strings and on from where the last
    read's count stopped (no text counted twice): an array 1, an object 4 (about four arrays), a scalar or a key 1
    (the `,` and `:` that bring them, less the arrays and objects among the values they bring). The text of strings
    weighs nothing: MAX_ENTRY bounds it."""

    def __init__(self) -> None:
        self.done = 0  # characters of the value weighed
        self.in_string = False  # the text weighed ends inside a string
        self.objects = self.arrays = self.marks = 0

    def add(self, buf: str, start: int) -> None:
        """Weigh on to the end of `buf`, where the value starts at `start`."""
        at, n = start + self.done, len(buf)
        while at < n:
            if self.in_string:
                at = _STRING_REST.match(buf, at).end()  # type: ignore[union-attr]
                if at == n or buf[at] == "\\":  # the text ends in the string, or between `\` and what it escapes
                    break
                self.in_string, at = False, at + 1
                continue
            end = _WHOLE.match(buf, at).end()  # type: ignore[union-attr]
            found = _MARKS.findall(buf, at, end)
            objects, arrays = found.count("{"), found.count("[")
            self.objects += objects
            self.arrays += arrays
            self.marks += len(found) - found.count("") - objects - arrays
            self.in_string, at = end < n, end + 1  # past the quote of a string that goes on
        self.done = min(at, n) - start

    def containers(self) -> int:
        return 4 * self.objects + self.arrays

    def total(self) -> int:
        return self.containers() + max(0, self.marks - self.objects - self.arrays)


def attachment_name(name: Any) -> bool:
    """Whether `name` can name a body a HAR keeps as a file (`"_file"`): a file name, never a path (`../x`,
    `/etc/x`), so that no HAR reads or hides a file outside its folder or zip."""
    return isinstance(name, str) and name not in ("", ".", "..") and not any(c in name for c in "/\\\0")


class HarError(Exception):
    """`position` is where the file stops making sense (`line L column C`, `log.entries[i]`)."""

    def __init__(self, position: str, reason: str) -> None:
        super().__init__(f"{position}: {reason}")
        self.position, self.reason = position, reason


@dataclass
class HarPosition:
    offset: int = 0  # bytes of the file read so far
    entries: int = 0
    started: bool = False  # `log.entries` was found: the file is a HAR
    size: int = 0  # characters of the last entry
    websocket: list[int] = field(default_factory=lambda: [0, 0])  # entries read with `_webSocketMessages`, messages


_BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32"),  # first: its mark begins with UTF-16 LE's
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
)


def encoding_of(head: bytes) -> str:
    """The text encoding a HAR's first bytes announce: UTF-16 or UTF-32 by their byte-order mark, else by the zero
    bytes of its first characters (ASCII in JSON: RFC 4627 section 3), as `json.loads` tells them; else UTF-8."""
    for bom, name in _BOMS:
        if head.startswith(bom):
            return name
    if len(head) >= 4:
        if not head[0]:  # 00 00 -- --: UTF-32 BE; 00 xx -- --: UTF-16 BE
            return "utf-16-be" if head[1] else "utf-32-be"
        if not head[1]:  # xx 00 00 00: UTF-32 LE; xx 00 xx --, xx 00 00 xx: UTF-16 LE
            return "utf-16-le" if head[2] or head[3] else "utf-32-le"
    elif len(head) == 2 and 0 in head:  # (a document of one character)
        return "utf-16-le" if head[0] else "utf-16-be"
    return "utf-8-sig"


def _encoding(f: Any) -> str:
    head = f.read(4)
    f.seek(0)
    return encoding_of(head)


class _Text:
    """The file's text, decoded as it is read, with a cursor; consumed text is dropped but lines are counted."""

    def __init__(self, f: Any, pos: HarPosition) -> None:
        self.f, self.pos = f, pos
        self.encoding = _encoding(f)
        self.decoder = codecs.getincrementaldecoder(self.encoding)("surrogateescape")  # a byte no text: its entry
        self.buf = ""
        self.i = 0
        self.eof = False
        self.line = 1  # line number of buf[0]
        self.line_start = 0  # index in buf where that line starts (negative: it started in dropped text)
        self.want = CHUNK
        self.size = 0  # characters of the last value read

    def more(self) -> bool:
        if self.eof:
            return False
        data = self.f.read(self.want)
        self.pos.offset += len(data)
        try:
            text = self.decoder.decode(data, final=not data)
        except UnicodeDecodeError as e:
            name = self.encoding.upper().removesuffix("-SIG")  # (UTF-8 only at the end: an odd byte of UTF-16/32)
            raise HarError(f"byte {self.pos.offset - len(data) + e.start}", f"not {name} text") from e
        if not data:
            self.eof = True
        if self.i > CHUNK:
            self.drop()
        self.buf += text
        return True

    def drop(self) -> None:
        """Forget the text consumed, keeping line numbers right (counted in place: no copy of that text)."""
        self.line += self.buf.count("\n", 0, self.i)
        last = self.buf.rfind("\n", 0, self.i)
        self.line_start = last + 1 - self.i if last >= 0 else self.line_start - self.i
        self.buf = self.buf[self.i :]
        self.i = 0

    def skip_space(self) -> None:
        while True:
            self.i = _SPACE.match(self.buf, self.i).end()  # type: ignore[union-attr]
            if self.i < len(self.buf) or not self.more():
                return

    def peek(self) -> str:
        self.skip_space()
        return self.buf[self.i : self.i + 1]

    def expect(self, char: str) -> None:
        if self.peek() != char:
            raise self.error(f"Expecting '{char}'" if char in ":,]}" else "Expecting value")
        self.i += 1

    def value(self) -> Any:
        """The next JSON value, read on until it is complete. A value that is valid JSON but cannot be held or parsed
        (larger than MAX_ENTRY, weighing more than MAX_CONTAINERS, nested deeper than the parser recurses, a number of
        thousands of digits) is passed over without being held, and comes back as an `Unreadable` naming why."""
        self.skip_space()
        weight: _Weight | None = None
        while True:
            try:
                doc, end = _DECODER.raw_decode(self.buf, self.i)
            except json.JSONDecodeError as e:
                # a value cut by the end of what was read: an unterminated string, or an error within a token's
                # length of the end (`nul`, `\ud83d\ude`, `1e+`, `-12.` report theirs where the token starts)
                cut = e.msg.startswith("Unterminated string") or e.pos >= len(self.buf) - (1 if self.eof else _TOKEN)
                if cut:  # a large value: read on in larger steps, never far past MAX_ENTRY or MAX_CONTAINERS
                    held = len(self.buf) - self.i
                    if held > MAX_ENTRY:
                        return self.skip(f"larger than {MAX_ENTRY >> 20} MiB")
                    weight = weight or _Weight()
                    weight.add(self.buf, self.i)
                    if weight.total() > MAX_CONTAINERS:
                        many = "arrays" if weight.containers() > MAX_CONTAINERS else "values and keys"
                        return self.skip(f"more than {MAX_CONTAINERS:,} {many} (an object counting as 4)")
                    room = min(MAX_ENTRY + 1 - held, 2 * (MAX_CONTAINERS - weight.total()))  # a value: 2 chars
                    self.want = max(CHUNK, min(self.want * 2, 64 * CHUNK, room))
                    if self.more():
                        continue
                raise self.error(e.msg, e.pos) from e
            except RecursionError:
                return self.skip("nested deeper than the JSON parser allows")
            except ValueError as e:  # valid JSON the parser refuses (an integer of over 4,300 digits)
                return self.skip(f"not parsed ({str(e)[:80]})")
            # a number that may go on past what was read (`1` of `1e+5`, `-12` of `-12.5`): read on, in growing
            # steps (a number of millions of digits is not parsed again at every chunk), never past MAX_ENTRY
            cut_number = not self.eof and end >= len(self.buf) - _TOKEN and isinstance(doc, (int, float))
            if cut_number:
                if end - self.i > MAX_ENTRY:
                    return self.skip(f"larger than {MAX_ENTRY >> 20} MiB")
                self.want = max(CHUNK, min(self.want * 2, 64 * CHUNK))
                if self.more():
                    continue
            self.size = end - self.i
            self.i = end
            if self.want > CHUNK:  # a large value: its text is not kept beside it
                self.drop()
            self.want = CHUNK
            return doc

    def skip(self, why: str) -> Unreadable:
        """Past the value at the cursor without parsing it: brackets and strings are matched by scanning, and the
        text scanned is dropped as the scan goes on, so memory holds about one chunk whatever the value."""
        self.want = CHUNK
        depth, in_string = 0, False
        while True:
            if depth > 0 and not in_string:  # text and flat arrays or objects: passed in one step
                self.i = _FLAT.match(self.buf, self.i).end()  # type: ignore[union-attr]
            if in_string:  # to the closing quote, escapes and all, at C speed
                at = _STRING_REST.match(self.buf, self.i).end()  # type: ignore[union-attr]
                if at >= len(self.buf) or self.buf[at] == "\\":  # it goes on (maybe after a `\`) in text to come
                    self.i = at
                    if not self.more():
                        raise self.error("Unterminated string")
                    continue
                self.i, in_string = at + 1, False
                if depth <= 0:
                    return Unreadable(why)
                continue
            m = _OUTSIDE.search(self.buf, self.i)
            if m is None:
                self.i = len(self.buf)
                if not self.more():
                    raise self.error("Unterminated value")
                continue
            c = m.group()
            if c == '"':
                in_string = True
            elif c in "[{":
                depth += 1
            elif c in "]}":
                depth -= 1
            elif depth == 0:  # a bare number or literal: to its end, however many chunks it spans
                self.i = m.end()
                while self.i >= len(self.buf) and self.more():
                    self.i = _BARE.match(self.buf, self.i).end()  # type: ignore[union-attr]
                return Unreadable(why)
            self.i = m.end()
            if depth <= 0 and not in_string:
                return Unreadable(why)

    def error(self, msg: str, at: int | None = None) -> HarError:
        at = self.i if at is None else at
        line = self.line + self.buf.count("\n", 0, at)
        last = self.buf.rfind("\n", 0, at)
        column = at - last if last >= 0 else at - self.line_start + 1
        return HarError(f"line {line} column {column}", f"invalid JSON ({msg})")


def entries(path: Path, pos: HarPosition | None = None) -> Iterator[dict[str, Any]]:
    """The entries of `log.entries`, in order; HarError where the file stops being a readable HAR."""
    pos = pos if pos is not None else HarPosition()
    with open_regular(path) as f:
        t = _Text(f, pos)
        t.expect("{")
        found = logs = False
        for key in _keys(t):
            if key != "log":
                t.value()
                continue
            if logs:  # JSON readers keep the last: entries already read were another reader's view of the file
                raise HarError("log", _TWICE)
            logs = True
            if t.peek() not in ("{", ""):  # (nothing: the file ends here, said where by `expect`)
                raise HarError("log", "not an object")
            t.expect("{")
            for log_key in _keys(t):
                if log_key != "entries":
                    t.value()
                    continue
                if found:
                    raise HarError("log.entries", _TWICE)
                found = True
                if t.peek() != "[":
                    raise HarError("log.entries", "not a list")
                t.expect("[")
                pos.started = True
                if t.peek() == "]":
                    t.i += 1
                    continue
                while True:
                    entry = t.value()
                    pos.entries += 1
                    pos.size = t.size
                    yield entry
                    if t.peek() == "]":
                        t.i += 1
                        break
                    t.expect(",")
        if not found:
            raise HarError("log.entries", "missing")
        if t.peek():  # JSON readers refuse the file: what follows (another HAR appended to it?) is not read
            raise HarError(t.error("").position, _AFTER)


def _keys(t: _Text) -> Iterator[str]:
    """The keys of the object whose '{' was just read; the caller reads each value."""
    if t.peek() == "}":
        t.i += 1
        return
    while True:
        if t.peek() != '"':
            raise t.error("Expecting property name enclosed in double quotes")
        key = t.value()
        t.expect(":")
        yield key
        if t.peek() == "}":
            t.i += 1
            return
        t.expect(",")
