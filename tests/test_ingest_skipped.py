"""What ingest does not read is said, by kind: flows of another type than HTTP (tcp, udp, dns) and the messages of
WebSocket connections, in flow files and HARs, counted exactly once however the input is shared among processes.

Before, these records were passed over without a word: a capture of 12 tcp flows and 3 A2A calls said "ingested 3
flows" as if that were the whole of it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from mitmproxy import io, tcp
from mitmproxy.io import tnetstring
from mitmproxy.test import tflow

from converse_tap.a2a.redact import TextPolicy
from converse_tap.ingest import ingest, split_flow_file
from converse_tap.ingest_plan import plan
from tests.factories import a2a_flow, agent_message, jsonrpc_result
from tests.test_ingest import _entry, _har
from tests.test_ingest_exact import _frame

TCP_LINE = (
    "skipped {}: not HTTP, and ingest reads HTTP exchanges only (A2A carried inside them, as under mitmproxy's "
    "`tcp_hosts`, is not seen)"
)
WS_LINE = (
    "skipped the {} messages of {} WebSocket connection(s): their HTTP handshakes were read, their messages are "
    "not (ingest reads HTTP exchanges only)"
)


def _assert_same(a: Path, b: Path) -> None:
    """The same exchanges and messages, row for row (these captures hold no agent card)."""
    for table in ("exchanges", "messages"):
        fa, fb = _frame(a, table), _frame(b, table)
        assert len(fa) == len(fb) > 0, table
        pd.testing.assert_frame_equal(fa, fb, check_categorical=False, obj=table)


def _a2a(i: int) -> Any:
    return a2a_flow(response=jsonrpc_result({"message": agent_message(f"m-{i}")}))


def _with_websocket(flow: Any) -> Any:
    flow.websocket = tflow.twebsocketflow().websocket  # three messages
    return flow


def _write(path: Path, flows: list[Any]) -> Path:
    with open(path, "wb") as f:
        w = io.FlowWriter(f)
        for flow in flows:
            w.add(flow)
    return path


def _mixed(n: int) -> tuple[list[Any], list[Any]]:
    """n rounds of: an A2A call, two tcp flows, a dns flow; every third round a udp flow and an A2A call whose
    flow holds WebSocket data. The A2A flows, and all of them in file order."""
    a2a, flows = [], []
    for i in range(n):
        call = _a2a(i) if i % 3 else _with_websocket(_a2a(i))
        a2a.append(call)
        flows += [call, tflow.ttcpflow(), tflow.ttcpflow(), tflow.tdnsflow(resp=True)]
        if i % 3 == 0:
            flows.append(tflow.tudpflow())
    return a2a, flows


def _counts(result: Any) -> tuple[Any, ...]:
    return result.flows, result.exchanges, result.not_http, result.websocket_flows, result.websocket_messages


@pytest.mark.parametrize("jobs", [1, 3])
def test_non_http_flows_are_counted_by_kind_once_and_every_a2a_row_is_kept(tmp_path: Path, jobs: int) -> None:
    a2a, flows = _mixed(30)
    mixed = _write(tmp_path / "mixed.mitm", flows)
    only = _write(tmp_path / "a2a.mitm", a2a)
    part = mixed.stat().st_size // 7
    if jobs > 1:  # shared for real: parts cut between records of every kind
        assert len(split_flow_file(mixed, part)) >= 7 and len(plan([mixed], {mixed: "flows"}, jobs, part)) == 3
    result = ingest([mixed], tmp_path / "out", TextPolicy(), jobs=jobs, part_bytes=part)
    want = ingest([only], tmp_path / "ref", TextPolicy())
    assert _counts(want) == (30, 30, {}, 10, 30)
    assert _counts(result) == (30, 30, {"tcp": 60, "dns": 30, "udp": 10}, 10, 30)
    assert (result.errors, result.skipped, result.duplicates) == ([], 0, 0)  # not-HTTP is no unreadable record
    _assert_same(tmp_path / "ref", tmp_path / "out")


def test_a_record_parsed_whole_is_counted_as_one_read_in_place(tmp_path: Path) -> None:
    """Records the partial read does not take (here: one key a byte string) are parsed whole: same counts."""
    states = [tflow.ttcpflow().get_state(), tflow.tudpflow().get_state(), _with_websocket(_a2a(0)).get_state()]
    fast = tmp_path / "fast.mitm"
    fast.write_bytes(b"".join(tnetstring.dumps(s) for s in states))
    whole = tmp_path / "whole.mitm"
    whole.write_bytes(b"".join(tnetstring.dumps({**s, b"note": b"x"}) for s in states))
    for path in (fast, whole):
        result = ingest([path], tmp_path / path.stem, TextPolicy())
        assert _counts(result) == (1, 1, {"tcp": 1, "udp": 1}, 1, 3), path.name


@pytest.mark.parametrize(("value", "kind"), [("quic", "quic"), (5, "unknown"), ("t\x1b[2J", "unknown")])
def test_a_record_of_another_type_is_named_by_it_or_as_unknown(tmp_path: Path, value: Any, kind: str) -> None:
    other = tflow.ttcpflow().get_state()
    other["type"] = value
    path = tmp_path / "x.mitm"
    path.write_bytes(tnetstring.dumps(other) + tnetstring.dumps(_a2a(0).get_state()))
    result = ingest([path], tmp_path / "out", TextPolicy())
    assert _counts(result) == (1, 1, {kind: 1}, 0, 0) and result.errors == []


def test_a_flow_read_again_after_the_shares_is_counted_once(tmp_path: Path) -> None:
    """A flow whose id an earlier share's record holds is put off, then read at the end when that record was no
    exchange (here a tcp flow of the same id): its WebSocket messages were counted by the share that put it off."""
    call = _with_websocket(_a2a(0))
    twin = tflow.ttcpflow()
    twin.id = call.id
    flows = [twin, *(_a2a(i) for i in range(1, 20)), call]
    path = _write(tmp_path / "x.mitm", flows)
    part = path.stat().st_size // 2
    one = ingest([path], tmp_path / "one", TextPolicy())
    two = ingest([path], tmp_path / "two", TextPolicy(), jobs=2, part_bytes=part)
    assert _counts(one) == _counts(two) == (20, 20, {"tcp": 1}, 1, 3)
    _assert_same(tmp_path / "one", tmp_path / "two")


def _har_with_websocket(path: Path, n: int) -> Path:
    entries = []
    for i in range(n):
        entry = _entry(f"call {i}")
        if i % 4 == 0:
            entry["_resourceType"] = "websocket"
            entry["_webSocketMessages"] = [
                {"type": "send", "time": 1.5, "opcode": 1, "data": "hello"},
                {"type": "receive", "time": 1.6, "opcode": 1, "data": "x" * 2000},
            ]
        entries.append(entry)
    _har(path, entries)
    return path


def test_websocket_messages_of_a_har_are_counted_once_however_it_is_striped(tmp_path: Path) -> None:
    path = _har_with_websocket(tmp_path / "b.har", 40)
    assert [[(p.stripe, p.stripes) for p in g] for g in plan([path], {path: "har"}, 2, 1024)] == [[(0, 2)], [(1, 2)]]
    one = ingest([path], tmp_path / "one", TextPolicy())
    two = ingest([path], tmp_path / "two", TextPolicy(), jobs=2, part_bytes=1024)
    assert _counts(one) == _counts(two) == (40, 40, {}, 10, 20)
    _assert_same(tmp_path / "one", tmp_path / "two")


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "converse_tap", "ingest", *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300)


def _large_mixed(path: Path) -> list[Any]:
    """Above the 8 MiB under which ingest stays in one process: tcp flows of 256 KiB messages among A2A calls."""
    a2a, flows = [], []
    for i in range(40):
        big = tflow.ttcpflow()
        big.messages = [tcp.TCPMessage(True, b"x" * (256 << 10), 0.0)]
        call = _a2a(i) if i % 5 else _with_websocket(_a2a(i))
        a2a.append(call)
        flows += [big, call, tflow.tdnsflow(resp=True)]
    _write(path, flows)
    assert path.stat().st_size > 8 << 20
    return a2a


@pytest.mark.parametrize("jobs", [["--jobs", "1"], []], ids=["jobs-1", "default-jobs"])
def test_the_summary_says_what_was_skipped_by_kind(tmp_path: Path, jobs: list[str]) -> None:
    a2a = _large_mixed(tmp_path / "mixed.mitm")
    only = _write(tmp_path / "a2a.mitm", a2a)
    proc = _cli(str(tmp_path / "mixed.mitm"), "--out", str(tmp_path / "out"), *jobs)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines() == [
        f"ingested 40 flows from 1 file(s): 40 new A2A exchanges into {tmp_path / 'out'}",
        TCP_LINE.format("40 dns, 40 tcp flows"),
        WS_LINE.format(24, 8),
    ]
    assert _cli(str(only), "--out", str(tmp_path / "ref")).returncode == 0
    _assert_same(tmp_path / "ref", tmp_path / "out")


def test_a_har_s_websocket_messages_are_said(tmp_path: Path) -> None:
    path = _har_with_websocket(tmp_path / "b.har", 3)
    proc = _cli(str(path), "--out", str(tmp_path / "out"))
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[1:] == [WS_LINE.format(2, 1)]


def test_a_flow_file_of_tcp_flows_only_is_no_success_and_says_what_it_held(tmp_path: Path) -> None:
    path = _write(tmp_path / "tcp.mitm", [tflow.ttcpflow(), tflow.ttcpflow(), tflow.tdnsflow(resp=True)])
    proc = _cli(str(path), "--out", str(tmp_path / "out"))
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.splitlines()[1:] == [
        TCP_LINE.format("2 tcp, 1 dns flows"),
        "Error: no HTTP exchange in the input (only 2 tcp, 1 dns flows): nothing was ingested",
    ]
    assert "Traceback" not in proc.stderr and not (tmp_path / "out").exists()


def test_nothing_is_said_of_a_capture_that_holds_only_http(tmp_path: Path) -> None:
    path = _write(tmp_path / "a.mitm", [_a2a(i) for i in range(3)])
    proc = _cli(str(path), "--out", str(tmp_path / "out"))
    assert (proc.returncode, proc.stderr) == (0, f"ingested 3 flows from 1 file(s): 3 new A2A exchanges into "
                                                 f"{tmp_path / 'out'}\n")  # fmt: skip
