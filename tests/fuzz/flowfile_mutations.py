"""Flow states, a tnetstring writer that writes what mitmproxy's refuses, and the per-record oracles of the flow-file
differential fuzz (`test_flowfile_differential.py`, and the byte-level campaign run outside pytest).

Three readings of one record are compared:

- `fast`: `converse_tap.flowfile.read` (the project's fast reader), then `extract`, as `ingest` does;
- `reference`: mitmproxy's `tnetstring.loads` + `compat.migrate_flow` + `exchange_from_state` + `extract`
  (`tests/test_ingest_exact.py::reference_ingest`, one record at a time, an exception costing that record);
- `checked`: the reference with `flowstate.checked` in between (the project's documented trust boundary: a value the
  exchange can do without becomes null with a `flow_field_invalid` anomaly, a value it needs costs the record).
  This is what the fast reader does with a record of an older format (parsed whole, migrated, checked), so for a
  record of the current format any difference between `fast` and `checked` comes from the fast reader's partial
  parse.
"""

from __future__ import annotations

import contextlib
import copy
import functools
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mitmproxy.io import compat, tnetstring

from converse_tap import flowfile
from converse_tap.a2a.extract import extract
from converse_tap.a2a.redact import TextPolicy
from converse_tap.addon.flows import DEFAULT_MAX_BODY, exchange_from_state
from converse_tap.flowstate import checked

POLICY = TextPolicy()


class Raw(bytes):
    """Bytes put into a record verbatim by `dumps`: a value no writer would produce."""


def dumps(value: Any) -> bytes:
    """A tnetstring as mitmproxy's writer makes it (dict entries in their order), for any value: keys of any type, a
    str holding lone surrogates (written as the bytes they escape: not UTF-8), a `Raw` as it is."""
    if isinstance(value, Raw):
        return bytes(value)
    if value is None:
        return b"0:~"
    if value is True:
        return b"4:true!"
    if value is False:
        return b"5:false!"
    if isinstance(value, int):
        body, tag = str(value).encode(), b"#"
    elif isinstance(value, float):
        body, tag = repr(value).encode(), b"^"
    elif isinstance(value, bytes):
        body, tag = value, b","
    elif isinstance(value, str):
        body, tag = value.encode("utf-8", "surrogateescape"), b";"
    elif isinstance(value, dict):
        body, tag = b"".join(dumps(k) + dumps(v) for k, v in value.items()), b"}"
    elif isinstance(value, (list, tuple)):
        body, tag = b"".join(dumps(v) for v in value), b"]"
    else:
        raise TypeError(type(value))
    return str(len(body)).encode() + b":" + body + tag


def mitm_dumps(state: dict[str, Any]) -> bytes:
    """As `mitmdump -w` writes a state (its dict entries in reverse order: `version` last)."""
    return tnetstring.dumps(state)


@functools.cache
def _base_states() -> tuple[dict[str, Any], ...]:
    from mitmproxy.test import tflow

    from tests.addon.test_flows import _connect_flow, _error_flow, _gzip_flow, _ipv6_https_flow
    from tests.captures import capture_states
    from tests.golden.sample import sample_flows

    flows = [*sample_flows(), _gzip_flow(), _error_flow(), _ipv6_https_flow(), _connect_flow()]
    states = [f.get_state() for f in flows]
    states += list(capture_states(40, seed=7))
    states += [tflow.twebsocketflow().get_state(), tflow.ttcpflow().get_state()]
    return tuple(states)


def base_states() -> list[dict[str, Any]]:
    """Real flows' states (golden sample, the addon tests' flows, a generated capture's, a WebSocket and a TCP
    flow): fresh copies."""
    return copy.deepcopy(list(_base_states()))


def http_state(i: int = 0) -> dict[str, Any]:
    """A fresh copy of the i-th HTTP state, an A2A exchange with a response."""
    states = [s for s in _base_states() if s["type"] == "http" and s.get("response")]
    return copy.deepcopy(states[i % len(states)])


# outcomes of one record: ("rows", repr of the extraction) | ("not_a2a",) | ("not_http",) | ("error", why)
Outcome = tuple[str, ...]


def _rows(ext: Any) -> Outcome:
    if ext is None:
        return ("not_a2a",)
    return ("rows", repr((ext.exchange, ext.messages, ext.agent_cards)))


def _why(e: BaseException) -> str:
    return f"{type(e).__name__}: {str(e)[:300]}"


def _unnoted(state: Any) -> Any:
    """A state without `content_size`: the project's note of a body a reader did not read, which mitmproxy's state
    never holds (`exchange_from_state` takes it for that note, so one found in a file must not reach it)."""
    for key in ("request", "response"):
        if isinstance(state, dict) and isinstance(state.get(key), dict):
            state[key].pop("content_size", None)
    return state


def reference(raw: bytes, max_body: int = DEFAULT_MAX_BODY) -> Outcome:
    """The reference path on one record's bytes."""
    try:
        state = tnetstring.loads(raw)
        state = _unnoted(compat.migrate_flow(state))  # type: ignore[arg-type]
        if state.get("type") != "http":
            return ("not_http",)
        return _rows(extract(exchange_from_state(state, max_body, "ingest"), POLICY))  # type: ignore[arg-type]
    except (Exception, RecursionError) as e:
        return ("error", _why(e))


def reference_checked(raw: bytes, max_body: int = DEFAULT_MAX_BODY) -> Outcome:
    """The reference path with `flowstate.checked` between migration and the exchange."""
    try:
        state = tnetstring.loads(raw)
        if not isinstance(state, dict):
            raise ValueError("not a dict")
        state = _unnoted(compat.migrate_flow(state))
        if state.get("type") != "http":
            return ("not_http",)
        state, anomalies = checked(state)  # type: ignore[arg-type]
        ex = exchange_from_state(state, max_body, "ingest")
        ex.anomalies.extend(anomalies)
    except (Exception, RecursionError) as e:
        return ("error", _why(e))
    return _rows(extract(ex, POLICY))


@dataclass
class FastRead:
    """What the fast reader made of a file: per record start offset, its outcome; and how the read ended."""

    outcomes: dict[int, Outcome] = field(default_factory=dict)
    damaged: tuple[int, str] | None = None
    crash: str | None = None  # an exception other than Damaged, from the reader or from extract


def fast(path: Path, max_body: int = DEFAULT_MAX_BODY, starts: Iterable[int] = ()) -> FastRead:
    """Read `path` with the fast reader; an exchange is put at the offset where its record starts (the reader's
    position before it), a skipped record at the offset it is reported at. `starts`: offsets of records known to
    be in the file, recorded as ("not_http",) when neither yielded nor skipped."""
    out = FastRead()
    pos = flowfile.Position()

    def skipped(offset: int, why: str) -> None:
        out.outcomes[offset] = ("error", why)

    last = 0
    try:
        for ex in flowfile.read(path, max_body, position=pos, skipped=skipped):
            # the record just read ends at pos.offset; it started at the latest known start before that
            begin = max((s for s in [last, *starts] if s < pos.offset), default=last)
            try:
                out.outcomes[begin] = _rows(extract(ex, POLICY))
            except Exception as e:
                out.crash = f"extract: {_why(e)}"
                out.outcomes[begin] = ("crash", _why(e))
            last = pos.offset
    except flowfile.Damaged as e:
        out.damaged = (e.offset, e.reason)
    except Exception as e:
        out.crash = f"reader: {_why(e)}"
    for s in starts:
        out.outcomes.setdefault(s, ("not_http",))
    return out


def write_records(path: Path, records: list[bytes]) -> list[int]:
    """Write the records; their start offsets."""
    starts, at = [], 0
    for r in records:
        starts.append(at)
        at += len(r)
    path.write_bytes(b"".join(records))
    return starts


def same(fast_outcome: Outcome, want: Outcome) -> bool:
    """The fast reader's outcome agrees with an oracle's: equal rows, both not A2A or not HTTP, or both an error
    (the fast reader's is a skip with a reason)."""
    if want[0] == "error":
        return fast_outcome[0] == "error" and bool(fast_outcome[1])
    return fast_outcome == want


# mutations of a state dict


SCALARS: list[Any] = [
    None, 0, -1, 1, 65536, 2**64, -(2**70), 10**30, 1.5, -1.0, float("nan"), float("inf"), float("-inf"), 1e300,
    True, False, "", "x", "\udcff", "ñ", b"", b"x", b"\xff\xfe", [], [b"a"], [1, 2], ["h", 80], {}, {"k": 1},
    {b"msg": "m"}, {"msg": "m", "timestamp": 1.0}, [[b"a", b"b"]], [[b"a"]], [[b"a", b"b", b"c"]], [["a", "b"]],
    [("a", 1)], 10**5000 // 10**800,
]  # fmt: skip


def paths(state: Any, prefix: tuple[Any, ...] = (), depth: int = 0) -> list[tuple[Any, ...]]:
    """Every key path into the dicts and lists of a state (lists: by index), up to depth 4."""
    out: list[tuple[Any, ...]] = []
    if depth > 4:
        return out
    if isinstance(state, dict):
        for k, v in state.items():
            out.append((*prefix, k))
            out += paths(v, (*prefix, k), depth + 1)
    elif isinstance(state, list):
        for i, v in enumerate(state[:4]):
            out.append((*prefix, i))
            out += paths(v, (*prefix, i), depth + 1)
    return out


INTERESTING = [
    ("id",), ("type",), ("version",), ("error",), ("error", "msg"), ("error", "timestamp"), ("request",),
    ("response",), ("client_conn",), ("server_conn",), ("client_conn", "peername"), ("server_conn", "address"),
    ("server_conn", "peername"), ("websocket",), ("metadata",),
    *[("request", k) for k in ("method", "scheme", "host", "port", "path", "http_version", "headers", "content",
                               "trailers", "timestamp_start", "timestamp_end", "authority", "content_size")],
    *[("response", k) for k in ("status_code", "reason", "http_version", "headers", "content", "trailers",
                                "timestamp_start", "timestamp_end", "content_size")],
    ("request", "headers", 0), ("request", "headers", 0, 0), ("request", "headers", 0, 1),
    ("response", "headers", 0), ("response", "headers", 0, 0), ("response", "headers", 0, 1),
]  # fmt: skip

VERSIONS = [7, 10, 14, 17, 18, 19, 20, 21, 22, 999, "21", 21.0, True, [0, 11], b"21"]


def apply(state: dict[str, Any], path: tuple[Any, ...], op: str, value: Any = None) -> None:
    """Set (`op` "set"), delete ("del") or add an entry beside (`"add"`: `value` is (key, value)) the value at
    `path`; a path that does not lead anywhere is left alone."""
    parent: Any = state
    for k in path[:-1]:
        try:
            parent = parent[k]
        except (KeyError, IndexError, TypeError):
            return
    last = path[-1]
    if isinstance(parent, dict) or (isinstance(parent, list) and isinstance(last, int) and last < len(parent)):
        if op == "set":
            parent[last] = value
        elif op == "del":
            with contextlib.suppress(KeyError, IndexError):
                del parent[last]
        elif op == "add" and isinstance(parent, dict):
            parent[value[0]] = value[1]
        elif op == "add" and isinstance(parent, list):
            parent.append(value[1])
