"""HAR documents written the many ways JSON allows, for the differential tests of `harfile` (the streaming reader)
against `json.loads` of the whole file: keys in any order and duplicated, `log` not first, whitespace anywhere,
strings escaped or not (lone surrogates, `\\/`, `\\uXXXX`, surrogate pairs), numbers as `1e2`, `-0.0`, `NaN`,
a byte-order mark and UTF-16/32.

`plain=True` writes no token that finding 1 of /tmp/fuzz-har/REPORT.md cuts wrongly at a read boundary (no
`true`/`false`/`null`/`NaN`/`Infinity`, no `\\uXXXX` escape, no fraction or exponent): what the reader must
already get right at any chunking."""

from __future__ import annotations

import base64
import codecs
import gzip
import json
import random
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

# fragments that look like the structure the reader scans for
TRICKY = [
    '"',
    "\\",
    "]",
    "}",
    "{",
    "[",
    '"entries"',
    '"entries": [',
    '"log": {',
    "]}",
    '"}],"entries":[{"',
    ",",
    ":",
    "\U0001f600",
    "é",
    "\u2028",
    "\ufeff",
    "\\u0041",
    "null",
    "true",
    "1e+5",
    "/",
    '\\"',
    "\n",
    "\t",
    " ",
]
LONE = ["\udc00", "\ud83d", "\udfff"]  # lone surrogates: JSON writes them escaped; json.loads reads them as such


@dataclass(frozen=True)
class Obj:
    """A JSON object as written: its pairs in order, a key possibly twice (json.loads keeps the last)."""

    pairs: tuple[tuple[str, Any], ...]


def texts(plain: bool) -> st.SearchStrategy[str]:
    if plain:
        chars = st.characters(codec="utf-8", exclude_categories=["Cs", "Cc"])
    else:
        chars = st.characters(codec="utf-8", exclude_categories=["Cs"])
    pieces = st.sampled_from(TRICKY) | st.text(chars, max_size=8)
    if not plain:
        pieces |= st.sampled_from(LONE)
    return st.lists(pieces, max_size=6).map("".join)


def numbers(plain: bool) -> st.SearchStrategy[Any]:
    if plain:  # (a fraction or exponent outside an entry, cut by a read, is finding 1c)
        return st.integers(-(10**6), 10**6)
    exact = st.integers(-(10**6), 10**6) | st.integers(-64, 64).map(lambda n: n / 8) | st.just(-0.0)
    return exact | st.sampled_from([1e2, 1e-7, 2.5e300, -1e-300, float("nan"), float("inf"), -float("inf"), 10**30])


def values(plain: bool) -> st.SearchStrategy[Any]:
    leaves: st.SearchStrategy[Any] = texts(plain) | numbers(plain)
    if not plain:
        leaves |= st.sampled_from([None, True, False])
    return st.recursive(
        leaves,
        lambda inner: (
            st.lists(inner, max_size=4)
            | st.lists(st.tuples(texts(plain), inner), max_size=4).map(lambda p: Obj(tuple(p)))
        ),
        max_leaves=12,
    )


def _reply(text: str, i: int) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": i,
        "result": {"message": {"messageId": f"r{i}", "role": "ROLE_AGENT", "parts": [{"text": text}]}},
    }


@st.composite
def entries(draw: st.DrawFn, plain: bool) -> dict[str, Any]:
    """An A2A call as a HAR entry: JSON-RPC request, reply as JSON, SSE, base64 or gzip'd base64."""
    i = draw(st.integers(0, 10**6))
    text, reply_text = draw(texts(plain)), draw(texts(plain))
    request = {
        "jsonrpc": "2.0",
        "id": i,
        "method": draw(st.sampled_from(["SendMessage", "message/send", "SendStreamingMessage", "tasks/get"])),
        "params": {"message": {"messageId": f"m{i}", "role": "ROLE_USER", "parts": [{"text": text}]}},
    }
    reply = json.dumps(_reply(reply_text, i), ensure_ascii=draw(st.booleans()))
    headers: list[Any] = [{"name": "Content-Type", "value": "application/json"}]
    content: dict[str, Any] = {"mimeType": "application/json", "size": len(reply)}
    raw = reply.encode("utf-8", "surrogatepass")
    body = draw(st.sampled_from(["json", "sse", "base64", "gzip"]))
    if body == "json":
        content["text"] = reply
    elif body == "sse":
        content["mimeType"] = "text/event-stream"
        headers = [["Content-Type", "text/event-stream"]]  # Slack's notation
        content["text"] = "".join(f"event: m\ndata: {reply}\n\n" for _ in range(draw(st.integers(1, 3))))
    elif body == "base64":
        content["text"], content["encoding"] = base64.b64encode(raw).decode(), "base64"
    else:
        content["text"] = base64.b64encode(gzip.compress(raw, mtime=0)).decode()
        content["encoding"] = "base64"
        headers.append({"name": "Content-Encoding", "value": "gzip"})
    entry: dict[str, Any] = {
        "startedDateTime": "2026-12-01T10:00:00.000Z",
        "time": draw(numbers(plain)),
        "request": {
            "method": "POST",
            "url": f"http://agent.test/a2a?i={i}",
            "httpVersion": "HTTP/1.1",
            "headers": [
                {"name": "Content-Type", "value": "application/json"},
                {"name": "Authorization", "value": "Bearer SEKRIT-HAR-DIFF"},
            ],
            "postData": {"mimeType": "application/json", "text": json.dumps(request)},
        },
        "response": {"status": 200, "httpVersion": "HTTP/1.1", "headers": headers, "content": content},
        "timings": {"send": 1, "wait": 10, "receive": 1.5},
    }
    if not plain:
        entry["response"]["_error"] = draw(st.sampled_from([None, "net::ERR_FAILED"]))
        entry["cache"] = {"beforeRequest": None}
    extra = draw(st.lists(st.tuples(st.sampled_from(["comment", "_x", "entries", "log"]), values(plain)), max_size=2))
    entry.update(extra)
    return entry


@dataclass(frozen=True)
class Har:
    """A document: `entries` (objects: dicts), other keys of `log` and of the top level, and how it is written."""

    entries: list[dict[str, Any]]
    log_extra: list[tuple[str, Any]]
    top_extra: list[tuple[str, Any]]
    seed: int
    plain: bool
    encoding: str  # a Python codec; BOM-announced for anything but UTF-8


_OTHER_KEYS = ["version", "creator", "pages", "comment", "_entries", "entries_", "Entries", "log"]


@st.composite
def hars(draw: st.DrawFn, plain: bool = False, max_entries: int = 5) -> Har:
    return Har(
        entries=draw(st.lists(entries(plain), max_size=max_entries)),
        log_extra=draw(st.lists(st.tuples(st.sampled_from(_OTHER_KEYS), values(plain)), max_size=3)),
        top_extra=draw(
            st.lists(st.tuples(st.sampled_from(["creator", "entries", "LOG", "x"]), values(plain)), max_size=2)
        ),
        seed=draw(st.integers(0, 2**32)),
        plain=plain,
        encoding=draw(st.sampled_from(["utf-8", "utf-8", "utf-8-sig", "utf-16", "utf-16-be-bom", "utf-32"])),
    )


class Writer:
    """JSON text of a value, each choice JSON leaves open made by `rnd`."""

    def __init__(self, rnd: random.Random, plain: bool) -> None:
        self.rnd, self.plain = rnd, plain

    def ws(self) -> str:
        return self.rnd.choice(["", "", "", " ", "\n", "\t", "  \r\n  ", " " * 40])

    def value(self, v: Any) -> str:
        if v is _SLOT:
            return "\0"  # (never in other text: a NUL in a string is written `\u0000`)
        if v is None or isinstance(v, bool):
            return json.dumps(v)
        if isinstance(v, int):
            return str(v)
        if isinstance(v, float):
            return json.dumps(v)  # repr: `1e-07`, `-0.0`, `NaN`, `Infinity`
        if isinstance(v, str):
            return self.string(v)
        if isinstance(v, dict):
            pairs = list(v.items())
            self.rnd.shuffle(pairs)
            if pairs and not self.plain and self.rnd.random() < 0.2:  # a key twice: the last one counts
                k, w = self.rnd.choice(pairs)
                pairs.insert(0, (k, ["overwritten", w]))
            return self.obj(pairs)
        if isinstance(v, Obj):
            return self.obj(list(v.pairs))
        if isinstance(v, list):
            if not v:
                return "[" + self.ws() + "]"
            inner = ("," + self.ws()).join(self.value(x) for x in v)
            return "[" + self.ws() + inner + self.ws() + "]"
        raise TypeError(type(v))

    def obj(self, pairs: list[tuple[str, Any]]) -> str:
        if not pairs:
            return "{" + self.ws() + "}"
        inner = ("," + self.ws()).join(self.string(k) + self.ws() + ":" + self.ws() + self.value(w) for k, w in pairs)
        return "{" + self.ws() + inner + self.ws() + "}"

    def string(self, s: str) -> str:
        out = ['"']
        for c in s:
            o = ord(c)
            if c == '"':
                out.append('\\"')
            elif c == "\\":
                out.append("\\\\")
            elif c in "\n\t\r\b\f":
                out.append(json.dumps(c)[1:-1])
            elif o < 0x20 or 0xD800 <= o < 0xE000:  # (plain text has neither)
                out.append(f"\\u{o:04x}")
            elif c == "/" and self.rnd.random() < 0.5:
                out.append("\\/")
            elif o > 0x7F and not self.plain and self.rnd.random() < 0.5:
                out.append(json.dumps(c)[1:-1])  # `\u00e9`, a surrogate pair for U+1F600
            else:
                out.append(c)
        out.append('"')
        return "".join(out)


def _insert_all(rnd: random.Random, base: list[tuple[str, Any]], extra: list[tuple[str, Any]]) -> list[Any]:
    out = list(base)
    for pair in extra:
        out.insert(rnd.randrange(len(out) + 1), pair)
    return out


_SLOT = object()  # where the entries go, written apart so that each entry's place is known


def render(har: Har) -> bytes:
    return render_with_spans(har)[0]


def render_with_spans(har: Har) -> tuple[bytes, list[tuple[int, int]]]:
    """The document's bytes, and the bytes [start, end) of each entry's text. `log` and `entries` each occur once
    (see finding 2 for twice); other keys, in any order, may repeat."""
    rnd = random.Random(har.seed)
    w = Writer(rnd, har.plain)
    log_extra = [(k, v) for k, v in har.log_extra if k not in ("entries",)]
    log_pairs = _insert_all(rnd, [("entries", _SLOT)], [p for p in log_extra if p[0] != "log"])
    log_pairs += [p for p in log_extra if p[0] == "log"]  # a key "log" inside `log`: any value
    top_pairs = _insert_all(rnd, [("log", Obj(tuple(log_pairs)))], [p for p in har.top_extra if p[0] != "log"])
    lead = rnd.choice(["", " ", "\n", "\r\n  "])  # short: a long lead is finding 3
    before, after = (lead + w.value(Obj(tuple(top_pairs))) + w.ws()).split("\0")
    parts = [before, "[", w.ws()]
    spans: list[tuple[int, int]] = []
    for i, entry in enumerate(har.entries):
        if i:
            parts.append("," + w.ws())
        start = len("".join(parts))
        parts.append(w.value(entry))
        spans.append((start, len("".join(parts))))
    parts += [w.ws(), "]", after]
    text = "".join(parts)
    if har.encoding == "utf-16-be-bom":
        unit, mark = "utf-16-be", codecs.BOM_UTF16_BE
    else:
        unit, mark = har.encoding, b""  # (its prefixes encoded carry its mark, as the whole does)
    data = mark + text.encode(unit)
    return data, [(len(mark) + len(text[:a].encode(unit)), len(mark) + len(text[:b].encode(unit))) for a, b in spans]


def canonical(value: Any) -> str:
    """One spelling of a parsed value: `1` and `1.0`, `0.0` and `-0.0`, NaN and NaN told apart or equal as JSON."""
    return json.dumps(value, sort_keys=True)


def reference_entries(data: bytes) -> list[Any]:
    """`log.entries` as a plain reading of the whole file gives them (json.loads detects the encoding)."""
    entries = json.loads(data)["log"]["entries"]
    assert isinstance(entries, list)
    return entries
