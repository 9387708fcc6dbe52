"""Spans and metrics from a real mitmdump with the addon: one span per exchanges row, attributes equal to its
columns, parenting on an incoming `traceparent`, nothing of the text or a planted credential in any byte the
collector receives; and a collector that is down, hangs or answers 500 changes nothing in the dataset."""

from __future__ import annotations

import re
import socket
import urllib.request
from pathlib import Path
from typing import Any

import httpx
import pytest

from converse_tap.store.reader import read_table
from tests.export.collector import Collector, attrs
from tests.integration.procs import Canned, mitmdump
from tests.integration.test_proxy import BODY, HEADERS, STREAM_BODY
from tests.integration.test_secrets import QUERY, SECRETS

pytestmark = pytest.mark.integration

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT = "00f067aa0ba902b7"
PLANTED = [
    b"AUTHSECRET1",
    b"UFJPWFlTRUNSRVQy",
    b"COOKIESECRET3",
    b"APIKEYSECRET4",
    b"TOKENSECRET5",
    b"SESSIONSECRET6",
    b"QUERYSECRET7",
    b"QUERYSECRET8",
    b"QUERYSECRET9",
    b"USERINFOSECRET10",
]
TEXTS = [b"When are you open?", b"Open 12-15."]
# columns that differ between two runs of the same traffic (flow ids, times, ports, and ids derived from them)
VOLATILE = {
    "exchange_id",
    "ts_start",
    "ts_first_byte",
    "ts_end",
    "client_addr",
    "server_addr",
    "url",
    "agent",
    "agent_url",
    "trace_id",
    "span_id",
    "date",
}


def _traffic(proxy: str, up: Canned) -> int:
    """Unary (with a traceparent), stream, JSON-RPC error, REST 404: every request carries planted secrets."""
    base = up.base.replace("http://", "http://user:USERINFOSECRET10@")
    calls = [
        ("/a2a", BODY, {"traceparent": f"00-{TRACE_ID}-{PARENT}-01"}),
        ("/sse/a2a", STREAM_BODY, {}),
        ("/err/a2a", BODY.replace(b"SendMessage", b"GetTask"), {}),
    ]
    with httpx.Client(proxy=proxy, timeout=30) as client:
        for path, body, extra in calls:
            r = client.post(f"{base}{path}?{QUERY}", content=body, headers={**HEADERS, **SECRETS, **extra})
            assert r.status_code == 200
        assert client.get(f"{base}/rest/tasks/x?{QUERY}", headers={**HEADERS, **SECRETS}).status_code == 404
    return len(calls) + 1


def _record(out: Path, *extra: str) -> tuple[list[dict[str, Any]], str]:
    with Canned() as up, mitmdump(out, "--set", "flow_detail=0", *extra) as (proxy, proc):
        n = _traffic(proxy, up)
    rows = sorted(read_table(out, "exchanges").to_pylist(), key=lambda r: (r["method"], r["status_code"]))
    assert len(rows) == n
    return rows, proc.output


def _stable(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k not in VOLATILE} for r in rows]


def test_one_span_per_exchange_with_its_columns_and_nothing_secret(tmp_path: Path) -> None:
    with Collector() as col:
        rows, output = _record(tmp_path / "data", "--set", f"converse_tap_otlp_endpoint={col.url}")
        col.wait_for_spans(len(rows))
    assert "Traceback" not in output
    messages = read_table(tmp_path / "data", "messages").to_pylist()
    spans = {s.span_id.hex(): (res, s) for res, s in col.spans()}
    assert len(spans) == len(rows) == len(col.spans())
    for row in rows:
        res, span = spans[row["span_id"]]
        a = attrs(span.attributes)
        assert attrs(res.attributes)["service.name"] == "converse-tap"
        assert span.name == a["a2a.method.name"] == row["method"]
        assert span.trace_id.hex() == row["trace_id"]
        assert a.get("a2a.task.id") == row["task_id"]
        assert a.get("a2a.task.state") == row["task_state"]
        assert a.get("gen_ai.conversation.id") == row["context_id"]
        assert a.get("error.type") == (None if row["error_code"] is None else str(row["error_code"]))
        assert a["http.response.status_code"] == row["status_code"]
        assert a["a2a.protocol.binding"] == row["binding"]
        assert a["a2a.protocol.version"] == "1.0" and a["server.address"] == "127.0.0.1"
        assert a["server.port"] == int(row["agent_url"].rsplit(":", 1)[1].split("/")[0])
        assert span.start_time_unix_nano == int(row["ts_start"].timestamp() * 1e6) * 1000
        assert span.end_time_unix_nano == int(row["ts_end"].timestamp() * 1e6) * 1000
        assert (span.status.code == 2) == (row["error_code"] is not None)
        replies = [m for m in messages if m["exchange_id"] == row["exchange_id"] and m["has_envelope"]]
        events = [attrs(e.attributes) for e in span.events if e.name == "converse.reply"]
        assert [e["converse.coverage"] for e in events] == [m["coverage"] for m in replies]
        assert [e["converse.author"] for e in events] == [m["author"] for m in replies]
        assert len(events) == row["replies"]
        if row["streamed"]:
            assert a["a2a.response.sse.event.count"] == row["sse_events"] == 2
            assert 0 <= a["a2a.response.time_to_first_event"] <= (row["ts_end"] - row["ts_start"]).total_seconds()
    # the traced request joined the caller's trace, as a child of its span; the others have traces of their own
    traced = [r for r in rows if r["parent_span_id"]]
    assert [(r["trace_id"], r["parent_span_id"]) for r in traced] == [(TRACE_ID, PARENT)]
    assert spans[traced[0]["span_id"]][1].parent_span_id.hex() == PARENT
    assert len({r["trace_id"] for r in rows}) == len(rows)
    assert sum(len(b) for b in col.bodies) > 1000
    for needle in PLANTED + TEXTS:
        assert not any(needle in b for b in col.bodies), needle


def test_text_only_on_opt_in_and_never_under_hash(tmp_path: Path) -> None:
    with Collector() as col:
        _record(
            tmp_path / "keep", "--set", f"converse_tap_otlp_endpoint={col.url}", "--set", "converse_tap_otlp_text=true"
        )
    assert any(b"Open 12-15." in b for b in col.bodies)
    with Collector() as col:
        _record(
            tmp_path / "hash",
            "--set",
            f"converse_tap_otlp_endpoint={col.url}",
            "--set",
            "converse_tap_otlp_text=true",
            "--set",
            "converse_tap_text=hash",
        )
    assert col.spans() and not any(t in b for t in TEXTS for b in col.bodies)
    assert not any(b"sha256:" in b for b in col.bodies)


@pytest.mark.parametrize("mode", ["down", "hang", "fail"])
def test_a_broken_collector_changes_nothing(tmp_path: Path, mode: str) -> None:
    baseline, _ = _record(tmp_path / "plain")
    with Collector("ok" if mode == "down" else mode) as col:
        url = col.url
        if mode == "down":
            col.__exit__(None, None, None)  # nothing listens there any more
        rows, output = _record(tmp_path / "exported", "--set", f"converse_tap_otlp_endpoint={url}")
    assert _stable(rows) == _stable(baseline)
    m = re.search(r"spans exported (\d+), failed (\d+), dropped (\d+)", output)
    assert m is not None, output
    exported, failed, dropped = map(int, m.groups())
    assert exported == 0 and failed + dropped == len(rows)
    assert "Traceback" not in output


def test_scrapers_that_never_read_block_nothing(tmp_path: Path) -> None:
    """Connections to /metrics that send nothing, or ask and never read, while traffic flows: the proxy answers,
    the rows are written, and a real scrape still gets the counts."""
    out = tmp_path / "data"
    with (
        Canned() as up,
        mitmdump(out, "--set", "flow_detail=0", "--set", "converse_tap_metrics_listen=127.0.0.1:0") as (proxy, proc),
    ):
        port = int(proc.wait_for(re.compile(r"metrics at http://127\.0\.0\.1:(\d+)/metrics")).group(1))
        stuck = []
        for i in range(20):
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
            s.connect(("127.0.0.1", port))
            if i % 2:
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")  # and never read the answer
            stuck.append(s)
        try:
            n = _traffic(proxy, up)
            proc.wait_for(re.compile(r"/rest GetTask"))  # the last exchange's summary line
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
                text = r.read().decode()
        finally:
            for s in stuck:
                s.close()
    total = sum(
        float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith("converse_tap_exchanges_total{")
    )
    assert total == n == len(read_table(out, "exchanges"))
