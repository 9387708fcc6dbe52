"""Hostile capture files for `converse-tap ingest`: crafted or damaged flow records and HAR entries cost only
themselves, are named with their position and reason, and never crash, hang or grow the ingest."""

from __future__ import annotations

import codecs
import copy
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from mitmproxy.io import tnetstring
from mitmproxy.test import tflow

from converse_tap.a2a.redact import TextPolicy
from converse_tap.ingest import LISTED, ingest
from converse_tap.store.reader import load
from tests.factories import a2a_flow, agent_message, jsonrpc_result

_BASE = a2a_flow(response=jsonrpc_result({"message": agent_message("m")})).get_state()


def _state(**changes: Any) -> dict[str, Any]:
    """A valid flow state with a fresh id, with `a__b=value` setting state[a][b] (`...=DELETE`: removing it)."""
    state = copy.deepcopy(_BASE)
    state["id"] = str(uuid.UUID(int=len(_IDS)))
    _IDS.append(state["id"])
    for path, value in changes.items():
        keys = path.split("__")
        d = state
        for k in keys[:-1]:
            d = d[k]
        if value is DELETE:
            del d[keys[-1]]
        else:
            d[keys[-1]] = value
    return state


_IDS: list[str] = []
DELETE = object()


def _file(path: Path, *states: dict[str, Any] | bytes) -> Path:
    path.write_bytes(b"".join(s if isinstance(s, bytes) else tnetstring.dumps(s) for s in states))
    return path


class Raw(bytes):
    """Bytes put into a record verbatim by `_dumps`: a value no writer would produce."""


def _dumps(value: Any) -> bytes:
    """A tnetstring like mitmproxy's writer makes, taking `Raw` values as they are."""
    if isinstance(value, Raw):
        return bytes(value)
    if isinstance(value, dict):
        body, tag = b"".join(_dumps(k) + _dumps(v) for k, v in value.items()), b"}"
    elif isinstance(value, (list, tuple)):
        body, tag = b"".join(_dumps(v) for v in value), b"]"
    else:
        return tnetstring.dumps(value)
    return str(len(body)).encode() + b":" + body + tag


def _deep(n: int) -> Raw:
    """A tnetstring list nested `n` deep (the writer itself would recurse)."""
    size, heads = 3, []  # "0:]", then each level adds its length prefix and its tag
    for _ in range(n - 1):
        heads.append(b"%d:" % size)
        size += len(heads[-1]) + 1
    return Raw(b"".join(reversed(heads)) + b"0:]" + b"]" * (n - 1))


UNREADABLE = {
    "request__headers": (b"x", "request.headers is of type bytes, not a list"),
    "request__method": (5, "request.method is of type int"),
    "request__scheme": ([b"http"], "request.scheme is of type list"),
    "request__host": (5, "request.host is of type int"),
    "request__port": (70000, "request.port is out of range"),
    "request__path": (None, "request.path is missing"),
    "request": (None, "request is missing"),
    "response": (7, "response is of type int"),
    "id": (5, "the flow id is of type int"),
    "version": (999, "flow format version 999"),
}


@pytest.mark.parametrize("field", UNREADABLE)
def test_a_record_that_cannot_be_an_exchange_costs_only_itself(tmp_path: Path, field: str) -> None:
    value, reason = UNREADABLE[field]
    before, bad, after = _state(), _state(**{field: value}), _state()
    path = _file(tmp_path / "x.mitm", before, bad, after)
    offset = len(tnetstring.dumps(before))
    result = ingest([path], tmp_path / "out", TextPolicy())
    assert (result.flows, result.exchanges, result.skipped) == (2, 2, 1)
    (err,) = result.errors
    assert err.path == path and err.position == f"byte {offset} (flow 2)"
    assert reason in err.reason
    assert sorted(load(tmp_path / "out", "exchanges")["exchange_id"]) == sorted([before["id"], after["id"]])


INVALID = {
    "response__status_code": ("200", "response.status_code"),
    "request__timestamp_start": (float("nan"), "request.timestamp_start"),
    "response__timestamp_end": (1e300, "response.timestamp_end"),
    "response__content": ([1, 2], "response.content"),
    "request__http_version": (5, "request.http_version"),
    "error": ("boom", "error"),
    "client_conn__peername": (5, "client_conn.peername"),
    "response__trailers": (b"x", "response.trailers"),
}


@pytest.mark.parametrize("field", INVALID)
def test_a_value_the_exchange_can_do_without_becomes_null_with_an_anomaly(tmp_path: Path, field: str) -> None:
    value, name = INVALID[field]
    state = _state(**{field: value})
    result = ingest([_file(tmp_path / "x.mitm", state)], tmp_path / "out", TextPolicy())
    assert (result.exchanges, result.errors) == (1, [])
    (row,) = load(tmp_path / "out", "exchanges").to_dict("records")
    assert f"flow_field_invalid:{name}" in list(row["anomalies"])


def test_nesting_100000_deep_costs_only_its_record(tmp_path: Path) -> None:
    deep_field = _state()
    deep_field["request"]["method"] = _deep(100_000)
    deep_old = {**_state(version=18), "extra": _deep(100_000)}  # an older format: parsed whole and migrated
    good = _state()
    path = _file(tmp_path / "x.mitm", _dumps(deep_field), _dumps(deep_old), good)
    result = ingest([path], tmp_path / "out", TextPolicy())
    assert (result.exchanges, result.skipped) == (1, 2)
    assert [e.position.split(" (")[1] for e in result.errors] == ["flow 1)", "flow 2)"]
    assert all("nested too deep" in e.reason for e in result.errors)


def test_non_http_flows_are_passed_over_and_their_neighbours_kept(tmp_path: Path) -> None:
    ws = tflow.twebsocketflow()
    others = [tflow.ttcpflow().get_state(), tflow.tudpflow().get_state(), tflow.tdnsflow().get_state()]
    good = _state()
    path = _file(tmp_path / "x.mitm", *others, ws.get_state(), good)
    result = ingest([path], tmp_path / "out", TextPolicy())
    assert result.errors == [] and result.skipped == 0
    assert good["id"] in set(load(tmp_path / "out", "exchanges")["exchange_id"])


def test_a_huge_header_count_costs_only_its_record(tmp_path: Path) -> None:
    many = _state(request__headers=[(b"x-a", b"1")] * 20_000)
    good = _state()
    result = ingest([_file(tmp_path / "x.mitm", many, good)], tmp_path / "out", TextPolicy())
    assert (result.exchanges, result.skipped) == (1, 1)
    assert "more than 10000 header fields" in result.errors[0].reason


def test_many_unreadable_records_are_counted_and_the_first_listed(tmp_path: Path) -> None:
    bad = [_state(request__port="80") for _ in range(LISTED + 7)]
    path = _file(tmp_path / "x.mitm", *bad, _state())
    proc = subprocess.run(
        [sys.executable, "-m", "converse_tap", "ingest", str(path), "--out", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("request.port is of type str") == LISTED
    assert f"7 more records could not be read and are not listed ({LISTED + 7} unreadable records in all" in proc.stderr
    assert "1 new A2A exchanges" in proc.stderr


# HAR files


def _har_entry(text: str = "hi") -> dict[str, Any]:
    from tests.test_ingest import _entry

    return _entry(text)


def _har(path: Path, *entries: Any) -> Path:
    """A HAR whose entries are given as JSON text (str) or as objects."""
    parts = [e if isinstance(e, str) else json.dumps(e) for e in entries]
    path.write_text('{"log": {"version": "1.2", "entries": [' + ", ".join(parts) + "]}}")
    return path


@pytest.mark.parametrize(
    "bad",
    [
        "[" * 100_000 + "]" * 100_000,
        '{"request": ' + '{"a": ' * 100_000 + "1" + "}" * 100_000 + "}",
        "1" * 5000,
        '{"time": ' + "9" * 5000 + "}",
        "7",
        '{"request": "x"}',
        '{"startedDateTime": 5}',
    ],
    ids=["deep-list", "deep-object", "long-number", "long-number-inside", "int", "request-str", "start-int"],
)
def test_a_har_entry_that_cannot_be_an_exchange_costs_only_itself(tmp_path: Path, bad: str) -> None:
    path = _har(tmp_path / "x.har", _har_entry("one"), bad, _har_entry("two"))
    result = ingest([path], tmp_path / "out", TextPolicy())
    assert (result.exchanges, result.skipped) == (2, 1)
    (err,) = result.errors
    assert err.path == path and err.position == "log.entries[1]"


def test_an_entry_whose_url_mitmproxy_refuses_is_kept_as_live(tmp_path: Path) -> None:
    """The live recorder keeps an exchange whose URL is broken (`http://[::1/a2a`, a port past 65535) with
    url_malformed; mitmproxy's HAR importer refused such an entry, so ingest named it malformed and lost it."""
    from tests.test_ingest import _entry

    urls = ["http://[::1/a2a", "http://agent.test:99999/a2a", "http://h\uff03x/a2a"]
    path = _har(tmp_path / "x.har", _har_entry("one"), *(_entry("odd", url=u) for u in urls), _har_entry("two"))
    result = ingest([path], tmp_path / "out", TextPolicy())
    assert (result.exchanges, result.errors) == (5, [])
    rows = load(tmp_path / "out", "exchanges")
    odd = rows[rows["anomalies"].map(lambda a: any(x.startswith("url_malformed") for x in a))]
    assert len(odd) == 3 and not odd["url"].str.contains("url.invalid").any()


def test_deep_nesting_beside_the_entries_is_passed_over(tmp_path: Path) -> None:
    path = tmp_path / "x.har"
    deep = "[" * 100_000 + "]" * 100_000
    path.write_text(
        '{"creator": ' + deep + ', "log": {"pages": ' + deep + ', "entries": [' + json.dumps(_har_entry()) + "]}}"
    )
    result = ingest([path], tmp_path / "out", TextPolicy())
    assert (result.exchanges, result.errors) == (1, [])


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 8, 13, 64])
def test_an_entry_too_large_is_passed_over_in_bounded_steps_at_any_chunking(
    tmp_path: Path, chunk: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from converse_tap import harfile

    monkeypatch.setattr(harfile, "CHUNK", chunk)
    monkeypatch.setattr(harfile, "MAX_ENTRY", 40)
    tricky = '{"a": "] } \\" \\\\", "b": [1, 2.5e3, true, null, {"c": "[{"}], "d": "' + "x" * 60 + '\\\\"}'
    small = '{"x": 1}'  # not an entry: reported on its own, after the skipped one
    escapes = '"' + 'y\\\\\\"' * 30 + '"'  # a string of escaped backslashes and quotes, cut anywhere
    path = _har(tmp_path / "x.har", tricky, small, escapes, small, "1" * 5000)
    entries = list(harfile.entries(path))
    assert entries[0] == harfile.Unreadable("larger than 0 MiB")
    assert entries[1] == entries[3] == {"x": 1}
    assert entries[2] == harfile.Unreadable("larger than 0 MiB")
    assert isinstance(entries[4], harfile.Unreadable) and len(entries) == 5


def test_har_entries_near_and_past_the_entry_limit_stay_within_the_memory_bound(tmp_path: Path) -> None:
    """A 31 MiB entry was held as text, parsed, serialised again for its id and converted by mitmproxy's
    importer several times over (five times its size); a 40 MiB entry was read whole although past the limit:
    a HAR of large entries took ingest past 256 MiB (334 MB here)."""
    from converse_tap import harfile

    near, past, base64_body = _har_entry("near"), _har_entry("past"), _har_entry("b64")
    near["response"]["content"]["text"] = "x" * (harfile.MAX_ENTRY - (1 << 20))
    past["response"]["content"]["text"] = "y" * (harfile.MAX_ENTRY + (8 << 20))
    base64_body["response"]["content"] = {"encoding": "base64", "text": "QUJD" * (6 << 20)}  # 18 MiB of "ABC"
    path = _har(tmp_path / "big.har", near, past, base64_body, _har_entry("small"))
    code = (  # VmHWM: ru_maxrss would count the pytest process the child was forked from
        "import atexit, sys; from converse_tap.cli import cli; sys.argv[0] = 'converse-tap';"
        "hwm = lambda: [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0];"
        "atexit.register(lambda: print('peak', hwm())); cli()"
    )
    args = ["ingest", str(path), "--out", str(tmp_path / "out"), "--jobs", "1"]
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr
    assert f"log.entries[1]: unreadable entry (larger than {harfile.MAX_ENTRY >> 20} MiB)" in proc.stderr
    peak_kib = int(proc.stdout.rsplit("peak ", 1)[1])
    assert peak_kib < 256 * 1024, peak_kib
    rows = load(tmp_path / "out", "exchanges").to_dict("records")
    sizes = sorted(a for row in rows for a in row["anomalies"] if a.startswith("response_body_too_large:"))
    assert sizes == [f"response_body_too_large:{18 << 20}", f"response_body_too_large:{harfile.MAX_ENTRY - (1 << 20)}"]
    assert len(rows) == 3


def test_a_large_entry_keeps_the_id_it_always_had() -> None:
    from converse_tap import harentry

    entry = _har_entry("é ☃ \U0001f600 \udcff")
    assert harentry.entry_id(entry, size=harentry.LARGE + 1) == harentry.entry_id(entry)


# The inputs themselves


def _cli(*args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "converse_tap", "ingest", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("special", ["fifo", "/dev/zero", "/dev/null"])
def test_a_fifo_or_a_device_is_refused_at_once_and_nothing_created(tmp_path: Path, special: str) -> None:
    import os

    path = tmp_path / "capture.mitm"
    if special == "fifo":
        os.mkfifo(path)  # no writer: opening it for reading blocked forever
    else:
        path = Path(special)
    proc = _cli(str(path), "--out", str(tmp_path / "out"), timeout=30)
    assert proc.returncode == 2, proc.stderr
    what = "a FIFO" if special == "fifo" else "a character device"
    assert f"Error: {path}: byte 0: {what}, not a capture file" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()


def test_a_fifo_among_captures_is_named_and_the_rest_ingested(tmp_path: Path) -> None:
    import os
    import threading

    os.mkfifo(tmp_path / "fifo")
    good = _state()
    path = _file(tmp_path / "x.mitm", good)
    unblock = threading.Timer(20, lambda: open(tmp_path / "fifo", "wb").close())  # a reader that blocked: freed
    unblock.daemon = True
    unblock.start()
    try:
        result = ingest([tmp_path / "fifo", path], tmp_path / "out", TextPolicy())
    finally:
        unblock.cancel()
    assert result.exchanges == 1
    (err,) = result.errors
    assert err.path == tmp_path / "fifo" and "a FIFO" in err.reason


def test_an_empty_input_is_never_success(tmp_path: Path) -> None:
    (tmp_path / "empty.mitm").write_bytes(b"")
    proc = _cli(str(tmp_path / "empty.mitm"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stderr
    assert "empty.mitm: byte 0: an empty file: nothing to ingest" in proc.stderr
    assert not (tmp_path / "out").exists()

    tcp_only = _file(tmp_path / "tcp.mitm", tflow.ttcpflow().get_state(), tflow.tdnsflow().get_state())
    proc = _cli(str(tcp_only), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stderr
    assert "no HTTP exchange in the input" in proc.stderr and "Traceback" not in proc.stderr

    good = _file(tmp_path / "x.mitm", _state())  # an empty file beside a capture: said, not an error
    proc = _cli(str(tmp_path / "empty.mitm"), str(good), "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    assert "Warning: " + str(tmp_path / "empty.mitm") + ": an empty file" in proc.stderr
    assert "ingested 1 flows from 1 file(s)" in proc.stderr


def test_a_symlink_loop_is_a_usage_error_and_in_a_directory_is_named(tmp_path: Path) -> None:
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    proc = _cli(str(tmp_path / "loop"), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "Invalid value for 'FILES...'" in proc.stderr
    proc = _cli(str(tmp_path), "--out", str(tmp_path / "out"))  # the directory's one file is the loop
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert f"{tmp_path / 'loop'}: byte 0: cannot read it" in proc.stderr


# Parallel ingest


def test_a_worker_that_dies_is_reported_and_its_neighbours_rows_kept(tmp_path: Path) -> None:
    from converse_tap.a2a.redact import Redaction
    from tests.worker_death import DiesOnUrl

    def flows(n: int, bad: int | None = None) -> list[dict[str, Any]]:
        return [_state(**({"request__host": "die.test"} if i == bad else {})) for i in range(n)]

    good, doomed = flows(40), flows(40, bad=20)
    a, b = _file(tmp_path / "a.mitm", *good), _file(tmp_path / "b.mitm", *doomed)
    result = ingest(
        [a, b],
        tmp_path / "out",
        TextPolicy(),
        jobs=2,
        part_bytes=1,
        redaction=Redaction((DiesOnUrl(),)),  # type: ignore[arg-type]
    )
    assert result.exchanges == 40  # the neighbour's share, whole
    assert {row for row in load(tmp_path / "out", "exchanges")["exchange_id"]} >= {s["id"] for s in good}
    (err,) = [e for e in result.errors if e.path == b]
    assert err.position.startswith("bytes ") and "died (killed, or out of memory)" in err.reason
    assert f"converse-tap recover {tmp_path / 'out'}" in err.reason


# Damage to the records' framing


def test_a_corrupt_record_in_the_middle_costs_only_itself(tmp_path: Path) -> None:
    states = [_state() for _ in range(5)]
    records = [tnetstring.dumps(s) for s in states]
    broken = b"9" + records[1][1:]  # its length prefix now points past its end
    garbage = b"\x00garbage\xff" * 50  # bytes between two records
    listed = tnetstring.dumps([1, 2])  # a valid tnetstring, not a flow
    path = _file(tmp_path / "x.mitm", records[0], broken, records[2], garbage, records[3], listed, records[4])
    result = ingest([path], tmp_path / "out", TextPolicy())
    got = set(load(tmp_path / "out", "exchanges")["exchange_id"])
    assert got == {states[i]["id"] for i in (0, 2, 3, 4)}
    first, second, third = result.errors
    assert (
        first.position.startswith(f"byte {len(records[0])} ") and "reading resumed at the next record" in first.reason
    )
    assert f"bytes {len(records[0])}-{len(records[0]) + len(broken)} are not records" in first.reason
    assert "reading resumed" in second.reason and "a record of type ']', not a flow" in third.reason


def test_a_flow_file_cut_at_any_byte_keeps_every_record_before_the_cut(tmp_path: Path) -> None:
    from converse_tap import flowfile

    records = [tnetstring.dumps(_state()) for _ in range(3)]
    data = b"".join(records)
    ends = [sum(map(len, records[: i + 1])) for i in range(3)]
    path = tmp_path / "cut.mitm"
    near = {c for end in ends for c in range(end - 48, end + 48)}  # every byte around each record's end
    for cut in sorted(near | set(range(1, len(data), 13))):
        if not 0 < cut < len(data):
            continue
        path.write_bytes(data[:cut])
        got: list[str] = []
        bad: list[int] = []
        try:
            for ex in flowfile.read(path, skipped=lambda o, r, bad=bad: bad.append(o)):  # type: ignore[misc]
                got.append(ex.id)
        except flowfile.Damaged as e:
            bad.append(e.offset)
        whole = sum(1 for end in ends if end <= cut)
        assert len(got) == whole, cut  # every whole record before the cut, nothing invented after it
        assert bad == ([] if cut in ends else [ends[whole - 1] if whole else 0]), cut


def test_crafted_record_endings_cannot_make_the_search_for_the_next_record_quadratic(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from converse_tap import flowfile, flowsync

    monkeypatch.setattr(flowsync, "RESYNC_BUDGET", 20_000)
    path = tmp_path / "x.mitm"
    path.write_bytes(b"x" + b"1:a,7:version;2:21#}" * 200_000)  # endings of records that never started
    with pytest.raises(flowfile.Damaged) as caught:
        list(flowfile.read(path, skipped=lambda o, r: None))
    assert caught.value.offset == 0 and "truncated or corrupt" in caught.value.reason


def test_bytes_that_are_not_utf8_cost_at_most_their_entry(tmp_path: Path) -> None:
    one, two, odd = _har_entry("one"), _har_entry("two"), _har_entry("odd")
    odd["response"]["content"]["text"] = "BODY-MARK"
    odd["request"]["headers"].append({"name": "X-Odd", "value": "HEADER-MARK"})
    text = '{"log": {"entries": [' + ", ".join(json.dumps(e) for e in (one, odd, two)) + "]}}"
    raw = text.encode().replace(b"BODY-MARK", b"\xff\xfe body").replace(b"HEADER-MARK", b"\xc3")
    (tmp_path / "x.har").write_bytes(raw)
    result = ingest([tmp_path / "x.har"], tmp_path / "out", TextPolicy())
    assert result.exchanges + result.skipped == 3 and result.exchanges >= 2  # "one" and "two", whatever "odd" costs
    assert all(e.position == "log.entries[1]" for e in result.errors)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32", "utf-8-sig"])
def test_a_har_in_utf16_or_utf32_with_its_byte_order_mark_is_read(tmp_path: Path, encoding: str) -> None:
    text = '{"log": {"entries": [' + json.dumps(_har_entry("é ☃"), ensure_ascii=False) + "]}}"
    bom = codecs.BOM_UTF16_BE if encoding == "utf-16-be" else b""
    (tmp_path / "x.har").write_bytes(bom + text.encode(encoding))
    result = ingest([tmp_path / "x.har"], tmp_path / "out", TextPolicy())
    assert (result.exchanges, result.errors) == (1, [])


def test_an_entry_of_millions_of_empty_arrays_is_not_parsed_into_memory(tmp_path: Path) -> None:
    """30 MiB of `[],` is within the entry limit but parsed into 11 million lists: 814 MiB. Past a million
    objects and arrays the entry is passed over unparsed (such a file peaked at 203 MiB)."""
    from converse_tap import harfile

    def with_comment(name: str, arrays: int) -> str:
        entry = _har_entry(name)
        entry["comment"] = "@@"
        return json.dumps(entry).replace('"@@"', "[" + "[]," * arrays + "0]")

    path = _har(tmp_path / "x.har", with_comment("bomb", 2_000_000), with_comment("fine", 900_000))
    entries = list(harfile.entries(path))
    assert entries[0] == harfile.Unreadable(f"more than {harfile.MAX_CONTAINERS:,} arrays (an object counting as 4)")
    assert isinstance(entries[1], dict) and len(entries[1]["comment"]) == 900_001


def test_records_of_millions_of_keys_or_lists_cost_only_themselves(tmp_path: Path) -> None:
    """A dict of a million distinct keys (7 MB) was read into a dict of a million entries (10,000 here); an
    older-format record of a million empty lists (3 MB) was parsed whole into them: memory bombs of 30 times their
    size."""
    many_keys = _state()
    many_keys["request"] = Raw(_dumps({f"k{i}": Raw(b"0:~") for i in range(10_000)}))
    many_lists = {**_state(version=18), "extra": Raw(b"%d:" % (3 * 1_100_000) + b"0:]" * 1_100_000 + b"]")}
    good = _state()
    path = _file(tmp_path / "x.mitm", _dumps(many_keys), _dumps(many_lists), good)
    result = ingest([path], tmp_path / "out", TextPolicy())
    assert (result.exchanges, result.skipped) == (1, 2)
    assert "a dict of more than 4096 keys" in result.errors[0].reason
    assert "more than 1,000,000 lists and dicts" in result.errors[1].reason


def test_a_flow_file_that_shrinks_between_two_records_is_reported_not_a_bus_error(tmp_path: Path) -> None:
    """The file is memory-mapped: reading a page past its new end killed the process with SIGBUS."""
    from converse_tap import flowfile

    path = _file(tmp_path / "x.mitm", *[_state() for _ in range(200)])
    size = path.stat().st_size
    reader = flowfile.read(path)
    next(reader)
    os.truncate(path, 4096)  # as a log rotation or a second writer would
    with pytest.raises(flowfile.Damaged) as caught:
        list(reader)
    assert f"the file shrank below {size} bytes while it was read" in caught.value.reason


# a record read into memory whole is parsed from there (the damage is found at the next record); one past
# capturefile.WHOLE is read piece by piece, and the piece past the new end is a short read
@pytest.mark.parametrize(("body_mib", "read"), [(2, 2), (12, 1)])
def test_a_flow_file_truncated_inside_a_record_is_reported_not_a_bus_error(
    tmp_path: Path, body_mib: int, read: int
) -> None:
    """Truncated after a record's head was read and before its fields were: on a memory-mapped file that read
    pages past the new end and the process died with SIGBUS (run in a child, so that a death fails this test)."""
    path = _file(tmp_path / "x.mitm", _state(), _state(response__content=b"x" * (body_mib << 20)), _state())
    code = f"""
import os
from pathlib import Path
from converse_tap import flowfile
path = Path({str(path)!r})
real = flowfile._exchange
def truncating(buf, start, stop, tag, max_body):
    if stop - start > 1 << 20:  # the large record: its head is read, its fields not yet
        os.truncate(path, 300 << 10)
    return real(buf, start, stop, tag, max_body)
flowfile._exchange = truncating
got = []
try:
    for exchange in flowfile.read(path, skipped=lambda offset, why: None):
        got.append(exchange.id)
except flowfile.Damaged as e:
    print(len(got), e.offset > 0, e.reason)
"""
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, f"the reader died (status {proc.returncode}): {proc.stderr[-2000:]}"
    assert proc.stdout.startswith(f"{read} True the file shrank below"), proc.stdout + proc.stderr
    assert "ingest it again once whole" in proc.stdout


def test_file_bytes_read_like_the_bytes_they_are(tmp_path: Path) -> None:
    """`FileBytes` answers `find`, `rfind`, indexes and slices as `bytes` would, across its reads' boundaries."""
    from converse_tap import capturefile

    data = bytes(range(256)) * 9000 + b"7:version;" + b"ab:" * 400_000  # 3.5 MB: several reads of CHUNK
    path = tmp_path / "f"
    path.write_bytes(data)
    with capturefile.opened(path, 0, None) as found:
        assert found is not None
        fb = found[0]
        for sub, a, b in [
            (b"7:version;", 0, None), (b":", 2_300_000, 2_300_010), (b"\xff\x00", 1 << 20, None),
            (b"7:version;", 2_304_000, None), (b"ab:a", 1_048_570, None), (b"zz", 0, None), (b":", 5, 1),
        ]:  # fmt: skip
            assert fb.find(sub, a, b) == data.find(sub, a, b), (sub, a, b)
            assert fb.rfind(sub, a, b) == data.rfind(sub, a, b), (sub, a, b)
        for a, b in [(0, 10), (1_048_570, 1_048_590), (100, 3_000_000), (len(data) - 3, len(data) + 5), (7, 7)]:
            assert fb[a:b] == data[a:b]
        assert [fb[i] for i in (0, 1_048_576, len(data) - 1)] == [data[i] for i in (0, 1_048_576, len(data) - 1)]
        with pytest.raises(IndexError):
            fb[len(data)]
        os.truncate(path, 1000)
        with pytest.raises(capturefile.Shrank):
            fb[len(data) - 10 : len(data)]


def test_an_entry_of_a_million_headers_is_not_parsed_into_memory(tmp_path: Path) -> None:
    """950,000 header objects in 27 MB took ingest to 497 MB (parsed dicts, then mitmproxy's headers, then ours)."""
    from converse_tap import harentry

    many = _har_entry("many")
    many["request"]["headers"] = [{"name": "a", "value": "b"}] * 300_000  # weighs 1,200,000
    some = _har_entry("some")
    some["request"]["headers"] += [{"name": "x", "value": "y"}] * (harentry.MAX_HEADERS + 1)
    path = _har(tmp_path / "x.har", many, some, _har_entry("small"))
    result = ingest([path], tmp_path / "out", TextPolicy())
    assert (result.exchanges, result.skipped) == (1, 2)
    assert "(an object counting as 4)" in result.errors[0].reason  # weighed: arrays, or values and keys
    assert f"request.headers holds more than {harentry.MAX_HEADERS} fields" in result.errors[1].reason


def test_the_search_for_a_records_start_reads_back_across_reads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`_start_of` searches backwards a read at a time (crafted endings make it millions of colons): with reads of
    16 bytes it finds what a byte-by-byte search of the whole file finds."""
    import random

    from converse_tap import capturefile, flowsync

    def reference(data: bytes, after: int, end: int, budget: int) -> int | None:
        colon = end
        while (colon := data.rfind(b":", after + 1, colon)) > after:
            budget -= 1
            if budget <= 0:
                return None
            run = colon
            while run > after + 1 and run > colon - 20 and data[run - 1 : run].isdigit():
                run -= 1
            for k in range(colon - run, 0, -1):
                if int(data[colon - k : colon]) == end - colon - 1:
                    return colon - k
        return None

    monkeypatch.setattr(flowsync, "CHUNK", 16)
    monkeypatch.setattr(capturefile, "CHUNK", 16)
    rnd = random.Random(5)
    for trial in range(300):
        data = bytes(rnd.choice(b"0123456789::,x}") for _ in range(rnd.choice([30, 400])))
        body = bytes(rnd.choice(b"ab:1") for _ in range(rnd.randint(0, 40)))
        at = rnd.randint(0, len(data))
        data = data[:at] + str(len(body)).encode() + b":" + body + data[at:]
        path = tmp_path / f"{trial}.bin"
        path.write_bytes(data)
        with capturefile.opened(path, 0, None) as found:
            assert found is not None
            for _ in range(5):
                end = rnd.randint(1, len(data) - 1)
                after, budget = rnd.randint(-1, end - 1), rnd.choice([3, 10**9])
                assert flowsync.start_of(found[0], after, end, [budget]) == reference(data, after, end, budget)


def test_a_device_is_refused_without_being_opened(monkeypatch: pytest.MonkeyPatch) -> None:
    """Opening a device acts (`/dev/watchdog` arms a reboot, a tape rewinds): what a path names is looked at first,
    and `ingest /dev` or a device inside a directory of captures is refused unopened."""
    from converse_tap import capturefile

    opened: list[str] = []
    real = os.open
    monkeypatch.setattr(capturefile.os, "open", lambda path, *a, **k: opened.append(str(path)) or real(path, *a, **k))
    with pytest.raises(capturefile.NotRegular) as caught:
        capturefile.open_regular(Path("/dev/null"))
    assert caught.value.what == "a character device" and opened == []


@pytest.mark.parametrize(("encoding", "name"), [("utf-16", "UTF-16"), ("utf-32-le", "UTF-32-LE")])
def test_a_har_in_utf16_or_utf32_cut_inside_a_character_names_its_encoding(
    tmp_path: Path, encoding: str, name: str
) -> None:
    """Cut one byte short of a whole character, the file's last bytes are no text of the encoding it was read in:
    the error names that encoding (it said "not UTF-8 text" whatever the file's), and the entries before it are kept."""
    text = '{"log": {"entries": [' + json.dumps(_har_entry("é")) + ", " + json.dumps(_har_entry("x")) + "]}}"
    (tmp_path / "x.har").write_bytes(text.encode(encoding)[:-1])
    result = ingest([tmp_path / "x.har"], tmp_path / "out", TextPolicy())
    assert result.exchanges == 2
    assert [e.reason for e in result.errors] == [f"not {name} text"], result.errors
