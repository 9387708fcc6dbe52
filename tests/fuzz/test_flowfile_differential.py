"""The fast flow-file reader (`converse_tap.flowfile.read`) against mitmproxy's own reading of the same records.

A structured differential property: real flows' states, mutated (types changed, keys deleted or added, older
format versions, bytes that are not UTF-8, huge ints, NaN), written between two good records, read by the fast
reader and by the reference path (`flowfile_mutations.reference`: mitmproxy's tnetstring reader, `migrate_flow`,
`exchange_from_state`, `extract`) and by the reference with the project's documented trust boundary in between
(`flowfile_mutations.reference_checked`). Each record must read as the checked reference (the same rows, or a skip
with a reason where it raises), or be skipped where mitmproxy itself cannot read it; the good records around it are
always read exactly as the reference reads them, and nothing raises.

Then one test per finding of the fuzzing campaign (hypothesis here, and a byte-level mutation campaign run outside
pytest): those not yet fixed are marked `xfail(strict=True)` with their finding's number (see the campaign's
REPORT.md): once fixed, the mark goes (and its entry in `KNOWN`, which keeps the property quiet about it).
"""

from __future__ import annotations

import copy
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mitmproxy import version
from mitmproxy.io import tnetstring

from converse_tap import flowfile
from converse_tap.a2a.classify import PREFIX
from converse_tap.a2a.redact import TextPolicy
from converse_tap.ingest import ingest
from converse_tap.store.reader import load
from tests.fuzz import flowfile_mutations as fm

# --- the structured differential property ---------------------------------------------------------------------

STATES = fm.base_states()


def _good(i: int, fid: str) -> bytes:
    state = fm.http_state(i)
    state["id"] = fid
    return fm.mitm_dumps(state)


GOOD = (_good(0, "good-before"), _good(1, "good-after"))


def _text_ok(v: Any) -> bool:
    return isinstance(v, (bytes, str))


def _addr_ok(v: Any) -> bool:
    return isinstance(v, (list, tuple)) and len(v) >= 2 and isinstance(v[0], str) and type(v[1]) is int


def _pairs_ok(v: Any) -> bool:
    return isinstance(v, list) and all(
        isinstance(p, (list, tuple)) and len(p) == 2 and all(type(x) is bytes for x in p) for p in v
    )


def _keys(d: Any, deep: bool = False) -> list[Any]:
    """The keys of a dict; `deep`: and of every dict inside it (in lists too)."""
    if isinstance(d, (list, tuple)) and deep:
        return [k for v in d for k in _keys(v, True)]
    if not isinstance(d, dict):
        return []
    out = list(d)
    if deep:
        for v in d.values():
            out += _keys(v, True)
    return out


def _read_dicts(state: dict[str, Any]) -> list[Any]:
    """The keys of the dicts the fast reader walks: the record, its request and response, its connections, and
    every dict inside its error."""
    keys = list(state)
    for name in ("request", "response", "client_conn", "server_conn"):
        keys += _keys(state.get(name))
    return keys + _keys(state.get("error"), deep=True)


def _surrogates(v: Any) -> bool:
    if isinstance(v, str):
        return any("\udc80" <= c <= "\udcff" for c in v)
    if isinstance(v, dict):
        return any(_surrogates(k) or _surrogates(x) for k, x in v.items())
    if isinstance(v, (list, tuple)):
        return any(_surrogates(x) for x in v)
    return False


_VALUE: st.SearchStrategy[Any] = st.deferred(
    lambda: st.one_of(
        st.sampled_from(range(len(fm.SCALARS))).map(lambda i: copy.deepcopy(fm.SCALARS[i])),
        st.sampled_from(range(len(fm.VERSIONS))).map(lambda i: copy.deepcopy(fm.VERSIONS[i])),
        st.integers(),
        st.floats(),
        st.text(max_size=8),
        st.binary(max_size=8),
        st.lists(_VALUE, max_size=3),
        st.dictionaries(st.one_of(st.text(max_size=6), st.binary(max_size=6), st.integers()), _VALUE, max_size=2),
    )
)
BIG_BODY = b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {}, "pad": "%s"}' % (b"x" * PREFIX)
_VALUE = st.one_of(_VALUE, st.just(BIG_BODY))
_KEY = st.one_of(
    st.sampled_from(["zz", "content_size", "peername", "address", "msg", "request"]), st.binary(max_size=8)
)


def _mutated(data: st.DataObject) -> tuple[dict[str, Any], bytes]:
    state = copy.deepcopy(data.draw(st.sampled_from(STATES), label="base"))
    for _ in range(data.draw(st.integers(1, 3), label="mutations")):
        path = data.draw(st.one_of(st.sampled_from(fm.INTERESTING), st.sampled_from(fm.paths(state) or [("id",)])))
        op = data.draw(st.sampled_from(["set", "set", "del", "add"]))
        value = data.draw(_VALUE) if op == "set" else (data.draw(_KEY), data.draw(_VALUE)) if op == "add" else None
        fm.apply(state, path, op, value)
    try:
        raw = fm.mitm_dumps(state) if data.draw(st.booleans(), label="mitmproxy's writer") else fm.dumps(state)
    except (ValueError, TypeError, UnicodeEncodeError):  # what mitmproxy's writer refuses
        raw = fm.dumps(state)
    return state, raw


def _difference(fast: fm.Outcome, checked: fm.Outcome, ref: fm.Outcome) -> str:
    if fast[0] == checked[0] == "rows":
        (ef, mf, _), (ec, mc, _) = _rows(fast), _rows(checked)
        keys = [k for k in ef if repr(ef[k]) != repr(ec.get(k))]
        return f"exchange columns {[(k, ef[k], ec.get(k)) for k in keys]!r:.800}; messages same: {mf == mc}"
    return f"fast {fast!r:.300}\nchecked {checked!r:.300}\nreference {ref!r:.300}"


def _check_record(state: dict[str, Any], raw: bytes, max_body: int, root: Path) -> fm.Outcome:
    """Read [good, raw, good]: the good ones exactly as the reference reads them, the record as the checked
    reference (or skipped where mitmproxy cannot read it, or a known finding). The fast reader's outcome."""
    path = root / "x.mitm"
    records = [GOOD[0], raw, GOOD[1]]
    starts = fm.write_records(path, records)
    got = fm.fast(path, max_body, starts)
    assert got.crash is None and got.damaged is None, (got.crash, got.damaged)
    assert sorted(got.outcomes) == starts, "a record reported at an offset where none starts"
    for i in (0, 2):
        assert got.outcomes[starts[i]] == fm.reference(records[i], max_body), f"good record {i} changed"
    fast, ref, checked = got.outcomes[starts[1]], fm.reference(raw, max_body), fm.reference_checked(raw, max_body)
    if fm.same(fast, checked) or (fast[0] == "error" and ref[0] == "error"):
        return fast
    if fast[0] != "error" and "UnicodeDecodeError" in checked[-1] and _surrogates(state):
        return fast  # finding 8 (by design): text that is not UTF-8 in a value the fast reader never reads
    raise AssertionError(_difference(fast, checked, ref))


@settings(
    derandomize=True,
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
)
@given(data=st.data())
def test_a_mutated_record_reads_as_the_reference_and_costs_at_most_itself(data: st.DataObject) -> None:
    state, raw = _mutated(data)
    max_body = data.draw(st.sampled_from([fm.DEFAULT_MAX_BODY, 64, 0]), label="max_body")
    with tempfile.TemporaryDirectory() as tmp:
        _check_record(state, raw, max_body, Path(tmp))


@settings(derandomize=True, max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_ingest_of_a_mutated_record_keeps_its_neighbours_and_reports_it(data: st.DataObject) -> None:
    """The full entry point on the same files: never raises, the good records' exchanges are in the dataset, and
    a skipped record is in `errors` at its own offset."""
    state, raw = _mutated(data)
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        fast = _check_record(state, raw, fm.DEFAULT_MAX_BODY, root)
        result = ingest([root / "x.mitm"], root / "out", TextPolicy())
        ids = set(load(root / "out", "exchanges")["exchange_id"]) if result.exchanges else set()
        assert {"good-before", "good-after"} <= ids
        if fast[0] == "error":
            assert [e.position.split(" ")[1] for e in result.errors] == [str(len(GOOD[0]))]
        else:
            assert result.errors == []


# --- regressions: one per finding ----------------------------------------------------------------------------


def _file(tmp_path: Path, *records: bytes) -> tuple[Path, list[int]]:
    path = tmp_path / "x.mitm"
    return path, fm.write_records(path, list(records))


def _read(path: Path, starts: list[int], max_body: int = fm.DEFAULT_MAX_BODY) -> dict[int, fm.Outcome]:
    got = fm.fast(path, max_body, starts)
    assert got.crash is None and got.damaged is None, (got.crash, got.damaged)
    return got.outcomes


def _as_reference(tmp_path: Path, state: dict[str, Any], checked: bool = True) -> None:
    """The record, between two good ones, reads as the (checked) reference reads it; its neighbours as theirs."""
    raw = fm.dumps(state)
    path, starts = _file(tmp_path, GOOD[0], raw, GOOD[1])
    got = _read(path, starts)
    assert got[starts[0]] == fm.reference(GOOD[0]) and got[starts[2]] == fm.reference(GOOD[1])
    want = fm.reference_checked(raw) if checked else fm.reference(raw)
    assert want[0] != "error", want
    assert got[starts[1]] == want


def _rows(outcome: fm.Outcome) -> tuple[dict[str, Any], list[Any], list[Any]]:
    assert outcome[0] == "rows", outcome
    nan, inf = float("nan"), float("inf")
    return eval(outcome[1], {"nan": nan, "inf": inf})  # repr of plain values


@pytest.mark.parametrize("max_body", [64, 1000])
def test_the_prefix_of_a_body_too_large_is_the_body_s_own(tmp_path: Path, max_body: int) -> None:
    """A body larger than `max_body` is kept as its first PREFIX (64 KiB) bytes; when it is shorter than that, the
    fast reader's prefix ran on past the body's end: into the rest of the record and the records after it. A REST
    call followed by a JSON-RPC one was classified by the next record's `"method": "SendMessage"`."""
    rest = next(s for s in STATES if s["type"] == "http" and s["request"]["path"] == b"/v1/message:send")
    rest = copy.deepcopy(rest)
    rest["request"]["content"] = b'{"message": {"messageId": "m", "role": "ROLE_USER", "parts": []}, "pad": "%s"}' % (
        b"x" * 1500
    )
    raw = fm.mitm_dumps(rest)
    path, starts = _file(tmp_path, raw, GOOD[1])
    exchanges = list(flowfile.read(path, max_body))
    assert exchanges[0].request_prefix == rest["request"]["content"]
    assert _read(path, starts, max_body)[0] == fm.reference_checked(raw, max_body)


@pytest.mark.parametrize(
    ("message", "trailers"),
    [
        ("response", [[b"grpc-status", b"0", b"extra"]]),
        ("response", [["grpc-status", "0"]]),
        ("response", [1, 2]),
        ("request", [[b"x"]]),
        ("request", [b"a"]),
    ],
)
def test_malformed_trailers_cost_only_the_trailers(tmp_path: Path, message: str, trailers: Any) -> None:
    """Trailers are a value the exchange can do without (`flowstate`): invalid ones become null with an anomaly,
    as a record of an older format read whole has them; request trailers are not read at all."""
    state = fm.http_state(2)
    state[message]["trailers"] = trailers
    _as_reference(tmp_path, state)


def test_an_invalid_server_address_falls_back_to_the_peername(tmp_path: Path) -> None:
    state = fm.http_state(2)
    state["server_conn"]["address"] = "not an address"
    _as_reference(tmp_path, state)
    path, starts = _file(tmp_path, fm.dumps(state))
    exchange, _, _ = _rows(_read(path, starts)[0])
    assert exchange["server_addr"] == "{}:{}".format(*state["server_conn"]["peername"][:2])


def test_an_invalid_server_peername_is_an_anomaly_whatever_the_address(tmp_path: Path) -> None:
    state = fm.http_state(2)
    state["server_conn"]["peername"] = 5
    _as_reference(tmp_path, state)


@pytest.mark.parametrize("conn", ["client_conn", "server_conn"])
@pytest.mark.parametrize("value", [5, "10.0.0.1:80", [1, 2], b"x"])
def test_a_connection_that_is_not_a_dict_is_an_anomaly(tmp_path: Path, conn: str, value: Any) -> None:
    state = fm.http_state(2)
    state[conn] = value
    _as_reference(tmp_path, state)


def _rekeyed(d: dict[Any, Any], key: Any, new: Any) -> dict[Any, Any]:
    return {(new if k == key else k): v for k, v in d.items()}


BYTES_KEYS: dict[str, Callable[[dict[str, Any]], dict[Any, Any]]] = {
    "error.msg": lambda s: {**s, "error": {b"msg": "boom", "timestamp": 1.0}},
    "request.content": lambda s: {**s, "request": _rekeyed(s["request"], "content", b"content")},
    "response.status_code": lambda s: {**s, "response": _rekeyed(s["response"], "status_code", b"status_code")},
    "request": lambda s: _rekeyed(s, "request", b"request"),
    "every key of the record": lambda s: {k.encode(): v for k, v in s.items()},
}


@pytest.mark.parametrize("where", BYTES_KEYS)
def test_a_byte_string_key_is_not_the_text_key_of_the_same_bytes(tmp_path: Path, where: str) -> None:
    """mitmproxy's reader gives a `7:request,` key as b"request", which `state["request"]` does not find; the fast
    reader matches keys by their bytes whatever their type tag. (A record whose every key is a byte string is not an
    HTTP flow to mitmproxy: the reference reads nothing from it.)"""
    raw = fm.dumps(BYTES_KEYS[where](fm.http_state(2)))
    path, starts = _file(tmp_path, GOOD[0], raw, GOOD[1])
    got = _read(path, starts)
    want, checked = fm.reference(raw), fm.reference_checked(raw)
    assert fm.same(got[starts[1]], checked) or (want[0] == checked[0] == "error" and got[starts[1]][0] == "error")


@pytest.mark.parametrize(
    "fmt",
    [
        version.FLOW_FORMAT_VERSION,
        20,
        19,
    ],
)
@pytest.mark.parametrize("message", ["request", "response"])
def test_a_content_size_written_in_the_file_changes_nothing(tmp_path: Path, fmt: int, message: str) -> None:
    """`content_size` is the fast reader's own note of a body it did not read, not a field of mitmproxy's: found in
    a record, it must not drop the body (nor, if not a size, the record). The current format's records ignore it;
    older formats' (parsed whole, migrated, checked) took it as the reader's note."""
    state = fm.http_state(0)
    state["version"] = fmt
    plain = fm.mitm_dumps(state)
    outcomes = []
    for size in (0, 12, "x"):
        state[message]["content_size"] = size
        path, starts = _file(tmp_path, fm.mitm_dumps(state))
        outcomes.append(_read(path, starts)[0])
    path, starts = _file(tmp_path, plain)
    assert outcomes == [_read(path, starts)[0]] * 3


@pytest.mark.parametrize("where", ["record", "request", "response", "error"])
def test_a_key_that_is_not_text_costs_nothing_where_mitmproxy_reads_the_record(tmp_path: Path, where: str) -> None:
    state = fm.http_state(2)
    if where == "error":
        state["error"] = {"msg": "boom", "timestamp": 1.0}
    target: dict[Any, Any] = state if where == "record" else state[where]
    target[5] = 1
    _as_reference(tmp_path, state, checked=False)


def test_text_that_is_not_utf8_in_a_value_never_read_changes_nothing_else(tmp_path: Path) -> None:
    """Finding 8, by design: mitmproxy cannot load a record holding a `;` string that is not UTF-8 anywhere; the
    fast reader reads the fields it needs only, and keeps the exchange. It must be the exchange the record holds:
    the rows of the same record with that value valid, and the neighbours intact."""
    for field in ("metadata", "comment", "websocket"):
        state = fm.http_state(2)
        clean = fm.dumps(state)
        state[field] = "\udcff\udcfe"
        raw = fm.dumps(state)
        assert fm.reference(raw)[0] == "error"
        path, starts = _file(tmp_path, GOOD[0], raw, GOOD[1])
        got = _read(path, starts)
        assert got[starts[1]] == fm.reference(clean)
        assert got[starts[0]] == fm.reference(GOOD[0]) and got[starts[2]] == fm.reference(GOOD[1])


def _raw_dict(pairs: list[tuple[Any, Any]]) -> fm.Raw:
    body = b"".join(fm.dumps(k) + fm.dumps(v) for k, v in pairs)
    return fm.Raw(b"%d:%s}" % (len(body), body))


def test_the_client_peername_is_the_real_one_whatever_the_last_value_holds(tmp_path: Path) -> None:
    """`_last` finds `8:peername;` from the end of the connection's dict: a string ending in those bytes and a
    value (here the SNI, which a client chooses) is taken for the peername."""
    state = fm.http_state(2)
    conn = dict(state["client_conn"])
    conn.pop("sni")
    state["client_conn"] = _raw_dict([*conn.items(), ("sni", "x8:peername;9:127.0.0.9")])
    _as_reference(tmp_path, state)


def test_a_repeated_key_reads_as_mitmproxy_reads_it(tmp_path: Path) -> None:
    state = fm.http_state(2)
    state["server_conn"] = _raw_dict([("address", ["first.test", 1]), *state["server_conn"].items()])
    _as_reference(tmp_path, state)


def _carrier() -> tuple[bytes, bytes, bytes, str]:
    """Three records, the middle one a request whose body holds a whole flow record (an upload of a capture), its
    length prefix damaged; and the id of the flow inside the body."""
    inner = fm.http_state(3)
    inner["id"] = "phantom-" + str(uuid.UUID(int=7))
    carrier = fm.http_state(4)
    carrier["request"]["content"] = b"upload:" + fm.mitm_dumps(inner) + b":end"
    damaged = b"9" + fm.mitm_dumps(carrier)[1:]
    return _good(5, "good-before"), damaged, _good(6, "good-after"), inner["id"]


def test_after_damage_reading_never_resumes_inside_a_body(tmp_path: Path) -> None:
    before, damaged, after, phantom = _carrier()
    path, _ = _file(tmp_path, before, damaged, after)
    ids: list[str] = []
    skipped: list[int] = []
    for ex in flowfile.read(path, skipped=lambda o, r: skipped.append(o)):
        ids.append(ex.id)
    assert phantom not in ids
    assert ids == ["good-before", "good-after"], ids
    assert skipped == [len(before)]


def _overlong(a: bytes, b: bytes, tags: bytes) -> bytes:
    """Record `a` with its length prefix made larger (as many digits) so that its end lands on a type tag inside
    record `b` that follows it: framing damage that looks like a whole value."""
    colon = a.index(b":")
    n = int(a[:colon])
    joined = a + b
    for extra in range(1, len(b) - 1):
        m = n + extra
        if len(str(m)) == colon and joined[colon + 1 + m] in tags:
            return str(m).encode() + a[colon:]
    raise AssertionError("no tag to land on")


@pytest.mark.parametrize("tags", [b",;#^!~]", b"}"], ids=["lands-on-another-type", "lands-on-a-dict-end"])
def test_a_record_after_one_whose_length_lands_inside_it_is_read(tmp_path: Path, tags: bytes) -> None:
    """The record after the damaged one is whole, and mitmproxy reads it (`tnetstring.loads` from its start); the
    fast reader takes the damaged one for a value ending inside it (of another type, or a dict it cannot read),
    skips that, goes on from inside the next record, and loses it."""
    a, b, c = _good(2, "damaged"), _good(3, "intact-next"), _good(4, "intact-last")
    path, _ = _file(tmp_path, _overlong(a, b, tags), b, c)
    assert tnetstring.loads(b)
    skipped: list[int] = []
    ids = [ex.id for ex in flowfile.read(path, skipped=lambda o, r: skipped.append(o))]
    assert skipped[:1] == [0]
    assert ids == ["intact-next", "intact-last"], ids


def _dup_file(tmp_path: Path, copies: int = 1, readable: bool = False) -> tuple[Path, str]:
    """A record (unreadable: port "80") and, 40 records later, `copies` readable ones of the same flow id, 40 apart."""
    first = fm.http_state(0)
    if not readable:
        first["request"]["port"] = "80"
    good = fm.http_state(0)
    records = [fm.mitm_dumps(first)]
    for c in range(copies):
        for i in range(40):
            s = fm.http_state(i + 1)
            s["id"] = str(uuid.UUID(int=1000 + 100 * c + i))
            records.append(fm.mitm_dumps(s))
        records.append(fm.mitm_dumps(good))
    path, _ = _file(tmp_path, *records)
    return path, good["id"]


def test_a_flow_whose_earlier_copy_is_unreadable_is_ingested_by_one_process(tmp_path: Path) -> None:
    path, fid = _dup_file(tmp_path)
    result = ingest([path], tmp_path / "out", TextPolicy(), jobs=1)
    assert (result.skipped, result.duplicates) == (1, 0)
    assert fid in set(load(tmp_path / "out", "exchanges")["exchange_id"])


@pytest.mark.parametrize(("copies", "readable"), [(1, False), (2, False), (1, True), (2, True)])
def test_a_flow_whose_earlier_copy_is_unreadable_is_ingested_by_several_processes(
    tmp_path: Path, copies: int, readable: bool
) -> None:
    """`flowids.ids` hands a later share the ids of every earlier record, readable or not (and not HTTP): a share
    puts off a flow whose id an earlier share holds, and the ingest reads it at the end unless that share wrote it.
    Each copy lands in another share; the counts and rows are those of one process."""
    path, fid = _dup_file(tmp_path, copies, readable)
    one = ingest([path], tmp_path / "one", TextPolicy(), jobs=1)
    result = ingest([path], tmp_path / "out", TextPolicy(), jobs=2, part_bytes=path.stat().st_size // (3 * copies))
    assert (result.flows, result.exchanges, result.skipped, result.duplicates) == (
        one.flows,
        one.exchanges,
        one.skipped,
        one.duplicates,
    )
    assert (result.skipped, result.duplicates) == (0 if readable else 1, copies if readable else copies - 1)
    ids = list(load(tmp_path / "out", "exchanges")["exchange_id"])
    assert ids.count(fid) == 1 and sorted(ids) == sorted(load(tmp_path / "one", "exchanges")["exchange_id"])


@pytest.mark.parametrize(
    "damage",
    [lambda d: b"\x00" + d, lambda d: b"x" + d[1:]],
    ids=["a byte before the first record", "the first length prefix's first digit"],
)
def test_damage_at_the_start_of_a_flow_file_costs_only_the_first_record(
    tmp_path: Path, damage: Callable[[bytes], bytes]
) -> None:
    """`ingest_plan.kind` decides from the first bytes whether a file is a flow file: one damaged byte there and
    the whole capture is "not a mitmproxy flow file or HAR", though the reader (which resumes after damage) reads
    every whole record of it, as mitmproxy does from the first intact record."""
    records = [_good(i, f"flow-{i}") for i in range(4)]
    path = tmp_path / "x.mitm"
    path.write_bytes(damage(b"".join(records)))
    read = [ex.id for ex in flowfile.read(path, skipped=lambda o, r: None)]
    assert read[-3:] == ["flow-1", "flow-2", "flow-3"]
    result = ingest([path], tmp_path / "out", TextPolicy())
    assert result.exchanges == len(read)
    assert set(load(tmp_path / "out", "exchanges")["exchange_id"]) == set(read)


def test_a_record_with_a_byte_string_version_key_cannot_hang_the_reader() -> None:
    """mitmproxy's `compat.migrate_flow` reads the version of `b"version"` before `"version"`, and each converter
    sets `"version"`: a record of an older format holding both keys never leaves the loop (mitmproxy's own reader
    hangs on it too). The fast reader hands such a record to it whole: the record must cost itself, in bounded
    time, and the records after it be read. Run in a child process killed after 10 s."""
    from tests.children import finishes_within

    code = (
        "import tempfile\n"
        "from pathlib import Path\n"
        "from converse_tap import flowfile\n"
        "from tests.fuzz import flowfile_mutations as fm\n"
        "state = fm.http_state(0)\n"
        "state['version'] = 20\n"
        "state[b'version'] = 20\n"
        "path = Path(tempfile.mkdtemp()) / 'x.mitm'\n"
        "good = {**fm.http_state(1), 'id': 'after'}\n"
        "path.write_bytes(fm.dumps(state) + fm.mitm_dumps(good))\n"
        "skipped = []\n"
        "ids = [ex.id for ex in flowfile.read(path, skipped=lambda o, r: skipped.append(o))]\n"
        "assert ids == ['after'] and skipped == [0], (ids, skipped)\n"
        "print('done')\n"
    )
    finishes_within(code, 10, "reading a record with two version keys")
