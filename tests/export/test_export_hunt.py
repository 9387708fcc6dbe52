"""The live export and the backfill fed what a misbehaving agent or a tampered dataset hands them: lone surrogates,
quotes, backslashes, newlines and NUL in envelope values; ids that are not W3C ids; values of megabytes; floods
of made-up label values. Read back by the real consumers: Debian's Prometheus, an OTLP receiver decoding
protobuf, the dataset's reader."""

from __future__ import annotations

import itertools
import json
import select
import shutil
import socket
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from converse_tap.a2a.extract import extract
from converse_tap.a2a.redact import TextPolicy
from converse_tap.a2a.traceparent import own_trace_id, span_id_for
from converse_tap.addon.flows import exchange_from_flow
from converse_tap.export.live import LiveExport
from converse_tap.export.metrics import MAX_LABEL_LENGTH, OTHER, LiveMetrics
from converse_tap.export.otel import SpanExport
from converse_tap.export.spans import METHODS, OTHER_METHOD, build_span
from converse_tap.store.reader import read_table
from converse_tap.store.writer import DatasetWriter
from tests.analysis.test_hostile_values import _tamper
from tests.cli_helpers import invoke
from tests.export.collector import Collector, attrs
from tests.export.prom import prometheus
from tests.export.test_units import _reply, _row
from tests.factories import a2a_flow, agent_message, envelope, jsonrpc_result

# values an agent's JSON can carry: `\ud800` and `\udcff` escapes decode to lone surrogates, which UTF-8 cannot hold
HOSTILE = {
    "author": 'a\ud800"q\\b\nc',
    "coverage": "x\udcffy\r\t",
    "reason": "r\x00s",
    "routine": "r" * 500 + "\ud83d",
    "message_id": "m-\ud800-1",
    "text": "hello \udc80 world",
}


def _flow() -> Any:
    h = HOSTILE
    env = envelope(
        author=h["author"],
        answerCoverage={"availability": "assessed", "coverage": h["coverage"], "reason": h["reason"]},
        routine={"name": h["routine"], "status": "completed"},
    )
    return a2a_flow(response=jsonrpc_result({"message": agent_message(h["message_id"], text=h["text"], env=env)}))


def _scrape(port: int) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""


def test_hostile_values_reach_prometheus_and_the_collector_as_the_dataset_holds_them(tmp_path: Path) -> None:
    """One lone surrogate in a label value made every later scrape of /metrics fail (500: the exposition could
    not be encoded), for as long as the series lived; in a span the OTLP encoder left such attributes out without
    a word (the reply's author, coverage and message id were missing). Now both carry the value as the stored row
    does, and Prometheus parses every line beside quotes, backslashes, newlines and NUL."""
    out = tmp_path / "data"
    with Collector() as col:
        live = LiveExport(
            {"otlp_endpoint": col.url, "metrics_listen": "127.0.0.1:0", "otel_text": True, "text": "keep"}, dict
        )
        port = live.metrics._server.server_address[1]
        writer = DatasetWriter(out, flush_interval=60, on_rows=live.on_rows)
        writer.start()
        flow = _flow()
        flow.id = "ex-hostile"
        ext = extract(exchange_from_flow(flow), TextPolicy())
        assert ext is not None
        writer.submit(ext)
        writer.close()
        status, text = _scrape(port)
        try:
            assert status == 200
            with prometheus([f"127.0.0.1:{port}"], tmp_path / "prom") as prom:
                prom.wait_for("up", 1)
                prom.wait_for("sum(converse_tap_replies_total)", 1)
                replies = prom.query("converse_tap_replies_total")
                routines = prom.query("converse_tap_routine_status_total")
        finally:
            summary = live.close()
        col.wait_for_spans(1)
    assert summary == "spans exported 1, failed 0, dropped 0"
    stored = next(m for m in read_table(out, "messages").to_pylist() if m["has_envelope"])
    labels = replies[0]["metric"]
    assert labels["author"] == stored["author"] == 'a\\ud800"q\\b\nc'
    assert labels["coverage"] == stored["coverage"] == "x\\xffy\r\t"
    assert labels["reason"] == stored["coverage_reason"] == "r\x00s"
    assert routines[0]["metric"]["routine"] == stored["routine_name"][:MAX_LABEL_LENGTH]
    assert "converse_tap_replies_total{" in text
    ((_res, span),) = col.spans()
    reply = next(attrs(e.attributes) for e in span.events if e.name == "converse.reply")
    assert reply["a2a.message.id"] == stored["message_id"] == "m-\\ud800-1"
    assert reply["converse.author"] == stored["author"]
    assert reply["converse.coverage"] == stored["coverage"]
    assert reply["converse.coverage.reason"] == stored["coverage_reason"]
    assert reply["converse.routine.name"] == stored["routine_name"]
    assert reply["converse.text"] == stored["text"] == "hello \\x80 world"
    verdict = next(attrs(e.attributes) for e in span.events if e.name == "gen_ai.evaluation.result")
    assert verdict["gen_ai.evaluation.score.label"] == stored["coverage"]
    # the backfill of the stored rows sends the same values
    with Collector() as col:
        r = invoke("export", "otlp", str(out), "--endpoint", col.url, "--text")
        assert r.exit_code == 0, r.stderr
    ((_res, again),) = col.spans()
    assert next(attrs(e.attributes) for e in again.events if e.name == "converse.reply") == reply


def _bad_ids(t: pa.Table) -> pa.Table:
    """Trace columns no recorder writes: not hex, too long, negative, all zeros, `0x` and `_` forms, empty."""
    bad = [
        ("z" * 32, "y" * 16, "x" * 16),
        ("ab" * 20, "cd" * 9, "ef" * 9),
        ("-1", "-1", "-1"),
        ("0" * 32, "0" * 16, "0" * 16),
        ("0x" + "1" * 30, "0x" + "2" * 14, "1_" + "3" * 14),
        ("", "", ""),
        ("AB" * 16, "CD" * 8, "EF" * 8),  # upper case: the same ids, read as such
        ("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "0" * 16),  # a valid trace, an invalid parent
        ("1" * 32, "2" * 16, "3" * 16),
    ]
    cols = list(zip(*[bad[i % len(bad)] for i in range(len(t))], strict=True))
    for name, values in zip(("trace_id", "span_id", "parent_span_id"), cols, strict=True):
        t = t.set_column(t.schema.get_field_index(name), t.schema.field(name), pa.array(values, pa.string()))
    return t


def test_backfill_of_ids_that_are_not_w3c_ids(sample: Path, tmp_path: Path) -> None:
    """A trace id that was not hex stopped `export otlp` with a ValueError traceback; one too long or negative
    made the collector's request fail, and every span of its batch with it; all zeros went out as the invalid
    ids W3C forbids. Now such an id is replaced by the one the recorder derives from the exchange id (an invalid
    parent is dropped), and every span is accepted."""
    root = tmp_path / "data"
    shutil.copytree(sample, root)
    _tamper(root, "exchanges", _bad_ids)
    rows = {r["exchange_id"]: r for r in read_table(root, "exchanges").to_pylist()}
    with Collector() as col:
        r = invoke("export", "otlp", str(root), "--endpoint", col.url)
        assert r.exit_code == 0, r.stderr
        assert r.stderr.startswith(f"{len(rows)} of {len(rows)} exchange spans accepted")
        spans = [s for _res, s in col.spans()]
    assert len(spans) == len(rows) == 18
    for span in spans:
        row = rows[attrs(span.attributes)["converse.exchange.id"]]
        tid, sid, pid = span.trace_id.hex(), span.span_id.hex(), span.parent_span_id.hex()
        assert int(tid, 16) and int(sid, 16) and len(tid) == 32 and len(sid) == 16
        if row["exchange_id"].startswith("tampered-"):
            ok_trace = row["trace_id"] in ("AB" * 16, "4bf92f3577b34da6a3ce929d0e0e4736", "1" * 32)
            assert tid == (row["trace_id"].lower() if ok_trace else own_trace_id(row["exchange_id"]))
            ok_span = row["span_id"] in ("CD" * 8, "00f067aa0ba902b7", "2" * 16)
            assert sid == (row["span_id"].lower() if ok_span else span_id_for(row["exchange_id"]))
            ok_parent = ok_trace and row["parent_span_id"] in ("EF" * 8, "3" * 16)
            assert pid == (row["parent_span_id"].lower() if ok_parent else "")
        else:
            assert (tid, sid) == (row["trace_id"], row["span_id"])


class _Limited(Collector):
    """A receiver that refuses a request over `limit` bytes with 413, as the OpenTelemetry Collector's OTLP/HTTP
    receiver does past its `max_request_body_size` (20 MiB unless configured)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        base = self.server.RequestHandlerClass
        self.refused = 0
        outer = self

        class Handler(base):  # type: ignore[misc, valid-type]
            def do_POST(self) -> None:
                size = int(self.headers.get("content-length", 0))
                if size <= limit:
                    super().do_POST()
                    return
                self.rfile.read(size)
                outer.refused += 1
                self.send_response(413)
                self.send_header("content-length", "0")
                self.end_headers()

        self.server.RequestHandlerClass = Handler


def test_a_request_stays_under_the_collectors_size_limit() -> None:
    """512 spans went in one request whatever they held: spans whose attributes the wire sized (a method name of a
    megabyte is recorded as an unknown method) made a request of 30 MB, which the collector refused with every
    span in it. Now a request holds at most MAX_BATCH_BYTES of spans; a span bigger than any request a collector
    takes goes alone, and is the only one refused."""
    limit = 20 << 20
    big = 3 << 20
    with _Limited(limit) as col:
        export = SpanExport(col.url, wait=True)  # (the backfill's mode: the huge span waits for room)
        n = 0
        with export._cond:  # everything queued before the sender takes its first batch
            for i in range(10):
                export.add(build_span(_row(exchange_id=f"big-{i}", method=f"{i}" + "m" * big), []))
                for j in range(20):
                    export.add(build_span(_row(exchange_id=f"small-{i}-{j}"), [_reply(f"r-{i}-{j}")]))
                n += 21
            export.add(build_span(_row(exchange_id="huge", method="h" * (limit + 1)), []))
            n += 1
        stats = export.close(60)
        received = {attrs(s.attributes)["converse.exchange.id"] for _res, s in col.spans()}
    assert (stats.exported, stats.failed, stats.dropped) == (n - 1, 1, 0)
    assert col.refused == 1 and len(received) == n - 1 and "huge" not in received
    assert {s.name for _res, s in col.spans()} == {"SendMessage", OTHER_METHOD}  # the attribute has the method
    assert max(len(attrs(s.attributes)["a2a.method.name"]) for _res, s in col.spans()) == big + 1


def _folded(m: LiveMetrics) -> dict[str, float]:
    return {
        s.labels["label"]: s.value
        for fam in m.registry.collect()
        for s in fam.samples
        if s.name == "converse_tap_metric_labels_folded_total"
    }


def test_a_flood_of_made_up_agents_and_routines_is_bounded_and_counted() -> None:
    """20,000 agents each naming a routine of its own, then one agent with 20,000 more: the series and the
    exposition stay bounded, every reply is still counted, and what the bounds folded into `other` is counted by
    label (before, the fold was silent: `other` could be one agent or thousands)."""
    m = LiveMetrics(max_agents=10)
    n = 20_000
    for i in range(n):
        m.observe(_row(agent=f"agent-{i}"), [_reply(f"m-{i}", routine_name=f"routine-{i}", routine_status="active")])
    for i in range(n):
        m.observe(_row(agent="one"), [_reply(f"o-{i}", routine_name=f"own-{i}", routine_status="active")])
    text = m.text()
    assert len(text) < 200_000, len(text)
    routines = {
        tuple(sorted(s.labels.items())): s.value
        for fam in m.registry.collect()
        for s in fam.samples
        if s.name == "converse_tap_routine_status_total"
    }
    assert sum(routines.values()) == 2 * n and len(routines) <= 10 * 51
    folded = _folded(m)
    assert folded["agent"] == (n - 10) + n  # every agent past the 10 slots, and "one", which came too late
    assert folded["routine"] == 2 * n - 50  # 50 routine names kept
    assert (("agent", OTHER), ("routine", OTHER), ("status", "active")) in routines


def test_folds_are_counted_only_when_a_bound_folds() -> None:
    m = LiveMetrics(max_agents=2)
    m.observe(_row(agent=OTHER), [_reply("x", coverage=OTHER)])  # an agent and a coverage named `other`
    m.observe(_row(agent="a"), [_reply("y", coverage="answered")])
    assert _folded(m) == {}
    m.observe(_row(agent="b"), [_reply("z")])
    assert _folded(m) == {"agent": 1.0}


@pytest.mark.parametrize("value", ["\ud800", "\udcff", "a\ud83d\ude00b", "\u00e9" * 100])
def test_label_values_are_valid_utf8_and_short(value: str) -> None:
    m = LiveMetrics()
    m.observe(_row(), [_reply("m", coverage=value)])
    text = m.text().decode("utf-8")  # strict: raised UnicodeEncodeError before, in generate_latest
    line = next(x for x in text.splitlines() if x.startswith("converse_tap_replies_total{"))
    label = json.loads(line.split('coverage="', 1)[1].split('"', 1)[0].join('""'))
    assert len(label) <= MAX_LABEL_LENGTH and label.encode("utf-8")
    assert label == value[:MAX_LABEL_LENGTH] or "\\" in label


def test_made_up_methods_do_not_name_spans() -> None:
    """Every made-up method (recorded as the wire sent it, with A2A headers) named a span of its own: a caller
    sending random methods made as many span names, which trace backends index and span metrics turn into a series
    each. The span of an unknown method is named OTHER_METHOD; its attribute keeps the method."""
    made_up = [f"tasks/x-{i}" for i in range(300)] + ["", "sendmessage", "SendMessage ", "GetAgentCard\x00"]
    with Collector() as col:
        export = SpanExport(col.url)
        for i, method in enumerate([*made_up, *sorted(METHODS)]):
            export.add(build_span(_row(exchange_id=f"x-{i}", method=method), []))
        stats = export.close(30)
        spans = [s for _res, s in col.spans()]
    assert stats.exported == len(spans) == len(made_up) + len(METHODS)
    by_method = {attrs(s.attributes)["a2a.method.name"]: s.name for s in spans}
    assert by_method == {**dict.fromkeys(made_up, OTHER_METHOD), **{m: m for m in METHODS}}


def _refused(m: LiveMetrics) -> float:
    return m.registry.get_sample_value("converse_tap_metrics_connections_refused_total") or 0.0


def test_connections_to_metrics_are_bounded() -> None:
    """prometheus-client's server started a thread for every connection and kept it while the connection sent
    nothing: 300 idle connections held 300 threads of the recording worker (thousands took its threads, and in a
    container the process ids the proxy needs). Past MAX_CONNECTIONS a connection is closed at once and counted;
    once the held ones go, a scrape is answered."""
    from converse_tap.export.serve import MAX_CONNECTIONS

    m = LiveMetrics()
    port = m.serve("127.0.0.1", 0)
    base = threading.active_count()
    n = MAX_CONNECTIONS + 100
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(n)]
    try:
        deadline = time.monotonic() + 60
        while _refused(m) < n - MAX_CONNECTIONS and time.monotonic() < deadline:
            time.sleep(0.05)  # until the server has taken every connection (a deadline, not a timing assert)
        assert _refused(m) == n - MAX_CONNECTIONS
        assert threading.active_count() - base <= MAX_CONNECTIONS
        readable: list[socket.socket] = []
        while len(readable) < n - MAX_CONNECTIONS and time.monotonic() < deadline:
            readable = select.select(idle, [], [], 1)[0]  # the refused ones, closed by the server
        assert len(readable) == n - MAX_CONNECTIONS and all(s.recv(1) == b"" for s in readable)
    finally:
        for s in idle:
            s.close()
    deadline = time.monotonic() + 60
    while True:  # the held connections end as their peers close them
        try:
            status, text = _scrape(port)
            break
        except OSError:
            assert time.monotonic() < deadline
            time.sleep(0.05)
    m.close()
    assert status == 200
    assert f"converse_tap_metrics_connections_refused_total {float(n - MAX_CONNECTIONS)}" in text


def test_a_connection_that_sends_nothing_is_given_up(monkeypatch: pytest.MonkeyPatch) -> None:
    from converse_tap.export import serve

    monkeypatch.setattr(serve._Handler, "timeout", 0.2)
    m = LiveMetrics()
    port = m.serve("127.0.0.1", 0)
    try:
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.settimeout(30)  # a bound on the wait, far past the server's timeout
            assert s.recv(1) == b""  # closed by the server, not by this timeout (which would raise)
        assert _scrape(port)[0] == 200
    finally:
        m.close()


def _series(m: LiveMetrics, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(s.labels.items())): s.value for fam in m.registry.collect() for s in fam.samples if s.name == name
    }


def test_an_agents_made_up_combinations_do_not_fold_the_specs_values() -> None:
    """Past MAX_SERIES combinations an agent's replies were all counted as (other, other, other), the spec's own
    values too: an agent that had sent 200 made-up authors and coverages had its `answered` replies missing from
    `coverage="answered"` for the worker's life, though the docs promise those values a series whatever came
    first. Combinations of values the spec names (few: authors × coverages × reasons) keep their series."""
    from converse_tap.export.metrics import MAX_SERIES

    m = LiveMetrics()
    for i in range(MAX_SERIES + 50):
        m.observe(_row(agent="noisy"), [_reply(f"x-{i}", author=f"made-up-{i % 20}", coverage=f"c-{i // 20}")])
    m.observe(_row(agent="noisy"), [_reply("real", coverage="answered", coverage_reason="sufficient_evidence")])
    m.observe(_row(agent="noisy", method="made/up"), [])
    replies = _series(m, "converse_tap_replies_total")
    real = (("agent", "noisy"), ("author", "agent"), ("coverage", "answered"), ("reason", "sufficient_evidence"))
    assert replies[real] == 1
    folded = (("agent", "noisy"), ("author", OTHER), ("coverage", OTHER), ("reason", OTHER))
    assert replies[folded] == 50 and sum(replies.values()) == MAX_SERIES + 51
    assert _folded(m)["series"] == 50


def test_an_evicted_agent_leaves_no_series_behind() -> None:
    """The combination an agent's replies folded into (`other` in every label) was not remembered with its other
    series, so when the agent's slot went to another agent that series stayed: one more for every agent that
    ever came and went, for the worker's life."""
    from converse_tap.export.metrics import AGENT_IDLE, MAX_SERIES

    now = [0.0]
    m = LiveMetrics(max_agents=1)
    m.agent.clock = lambda: now[0]
    for round_ in range(5):
        agent = f"agent-{round_}"
        for i in range(MAX_SERIES + 5):  # 20 authors × 11 coverages, beside the 50 values each label keeps
            m.observe(_row(agent=agent), [_reply(f"{agent}-{i}", author=f"a-{i % 20}", coverage=f"c-{i // 20}")])
        now[0] += AGENT_IDLE + 1
    replies = _series(m, "converse_tap_replies_total")
    assert {dict(k)["agent"] for k in replies} == {"agent-4"}  # agents 0-3 gave up their slots, and their series
    assert len(replies) == MAX_SERIES + 1


def test_a_collectors_password_stays_out_of_messages_and_logs(caplog: pytest.LogCaptureFixture) -> None:
    """The exporter sends a URL's userinfo as basic auth, so a collector's password can be in the endpoint. A bad
    endpoint was echoed whole in the error (`export otlp` prints it as a usage error, outside any log filter);
    the log lines named it whole too, relying on the worker's LogRedactor to catch it: they now show it redacted
    themselves."""
    import base64
    import logging

    from converse_tap.export.live import check_endpoint

    caplog.set_level(logging.INFO, logger="converse_tap.export")
    with Collector("fail") as col:
        endpoint = col.url.replace("http://", "http://tap:COLLECTORPW@")
        live = LiveExport({"otlp_endpoint": endpoint}, dict)
        live.on_rows(extract(exchange_from_flow(_flow()), TextPolicy()))
        summary = live.close()
    assert summary == "spans exported 0, failed 1, dropped 0"
    assert any(base64.b64encode(b"tap:COLLECTORPW") in b for b in col.bodies)  # it was used, as basic auth
    logged = [r.getMessage() for r in caplog.records]
    assert any(col.url.removeprefix("http://") in line for line in logged if "failing" in line)
    assert any("exporting spans to" in line for line in logged)
    assert not any("COLLECTORPW" in line for line in logged)
    why = check_endpoint("ftp://tap:COLLECTORPW@collector:4318") or ""
    assert "not an http(s) URL" in why and "COLLECTORPW" not in why


def test_a_client_that_sends_a_byte_now_and_then_is_given_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """A request line sent a byte at a time, each well within the read timeout, held its thread (and one of the
    connection slots) for as long as the client went on: a few such clients kept every scrape out."""
    from converse_tap.export import serve

    monkeypatch.setattr(serve._Server, "deadline", 0.5)
    m = LiveMetrics()
    port = m.serve("127.0.0.1", 0)
    try:
        with socket.create_connection(("127.0.0.1", port)) as s:
            closed = False
            deadline = time.monotonic() + 30  # a bound on the wait, far past the server's deadline
            for byte in itertools.cycle(b"GET /metrics"):
                assert time.monotonic() < deadline, "the server kept the connection"
                try:
                    s.sendall(bytes([byte]))
                except OSError:
                    closed = True
                    break
                if select.select([s], [], [], 0.1)[0]:
                    closed = s.recv(1) == b""
                    break
            assert closed
        assert _scrape(port)[0] == 200
    finally:
        m.close()


def test_a_worker_whose_metrics_port_is_still_held_serves_once_it_is_let_go() -> None:
    """Options changed while traffic flows replace the recording worker; the old one keeps its /metrics port until
    its files are written (a few seconds as a rule, at most PORT_WAIT), and the new one, finding the port taken,
    gave up serving metrics for its whole life (and `test_units`' reconfiguration test failed now and then). It
    now binds the port as soon as it is free."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    live = LiveExport({"metrics_listen": f"127.0.0.1:{port}"}, dict)
    try:
        time.sleep(0.5)
        assert live.metrics is not None  # still waiting for the port, not given up
        holder.close()  # the old worker lets go
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                    assert b"converse_tap_replies_total" in r.read()
                    break
            except OSError:
                assert time.monotonic() < deadline, "the port was free, and never served"
                time.sleep(0.1)
    finally:
        holder.close()
        live.close()
