"""The pieces of the observability export: W3C traceparent, the rows' trace columns, bounded metric labels,
the listen address, and the addon's option checks."""

from __future__ import annotations

import socket
import time
import urllib.request
from typing import Any

import pytest
from mitmproxy import exceptions

from converse_tap.a2a.extract import extract
from converse_tap.a2a.headers import Headers
from converse_tap.a2a.redact import TextPolicy
from converse_tap.a2a.traceparent import parse_traceparent, span_id_for, trace_columns
from converse_tap.addon.flows import exchange_from_flow
from converse_tap.export.live import check_listen, parse_listen
from converse_tap.export.metrics import OTHER, LiveMetrics, outcome
from converse_tap.export.spans import build_span
from tests.factories import a2a_flow, agent_message, envelope, jsonrpc_result
from tests.memory import retained

T, P = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (f"00-{T}-{P}-01", (T, P)),
        (f"00-{T}-{P}-00", (T, P)),  # not sampled by the caller: still its trace
        (f" 00-{T}-{P}-01 ", (T, P)),
        (f"01-{T}-{P}-01-future", (T, P)),  # a later version, read by its first four fields
        (f"00-{T}-{P}-01-extra", None),  # version 00 has exactly four
        (f"ff-{T}-{P}-01", None),
        (f"00-{'0' * 32}-{P}-01", None),
        (f"00-{T}-{'0' * 16}-01", None),
        (f"00-{T.upper()}-{P}-01", None),
        (f"00-{T[:-1]}-{P}-01", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_traceparent(value: str | None, expected: tuple[str, str] | None) -> None:
    assert parse_traceparent(value) == expected


def test_trace_columns() -> None:
    joined = trace_columns(Headers([("TraceParent", f"00-{T}-{P}-01")]), "ex-1")
    assert joined == {"trace_id": T, "span_id": span_id_for("ex-1"), "parent_span_id": P}
    own = trace_columns(Headers(), "ex-1")
    assert own["parent_span_id"] is None and len(own["trace_id"]) == 32 and own["trace_id"] != T
    assert own == trace_columns(Headers(), "ex-1") != trace_columns(Headers(), "ex-2")  # derived, stable
    two = Headers([("traceparent", f"00-{T}-{P}-01"), ("traceparent", f"00-{T}-{P}-01")])
    assert trace_columns(two, "ex-1")["parent_span_id"] is None  # W3C: more than one is invalid


def test_extract_fills_the_trace_columns_and_leaves_the_request_alone() -> None:
    flow = a2a_flow(
        headers={"traceparent": f"00-{T}-{P}-01"},
        response=jsonrpc_result({"message": agent_message("m1", env=envelope())}),
    )
    before = flow.request.headers.fields
    ext = extract(exchange_from_flow(flow), TextPolicy())
    assert ext is not None and flow.request.headers.fields == before
    row = ext.exchange
    assert (row["trace_id"], row["parent_span_id"], row["span_id"]) == (T, P, span_id_for(flow.id))
    span = build_span(row, ext.messages)
    assert (span.trace_id, span.parent_span_id, span.span_id) == (T, P, row["span_id"])


def _row(**kw: Any) -> dict[str, Any]:
    row = {"agent": "a", "method": "SendMessage", "binding": "jsonrpc", "complete": True, "status_code": 200}
    row.update(error_code=None, ts_start=1_000_000, ts_end=1_500_000, streamed=False, anomalies=[])
    row.update(kw)
    return row


def _reply(mid: str | None, **kw: Any) -> dict[str, Any]:
    m = {"direction": "response", "has_envelope": True, "role": "agent", "message_id": mid, "anomalies": []}
    m.update(author="agent", coverage="answered", coverage_reason=None)
    m.update(kw)
    return m


def _samples(metrics: LiveMetrics, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    out = {}
    for fam in metrics.registry.collect():
        for s in fam.samples:
            if s.name == name:
                out[tuple(sorted(s.labels.items()))] = s.value
    return out


def test_metrics_count_each_reply_once_and_bound_their_labels() -> None:
    m = LiveMetrics(max_agents=2)
    for agent in ("a", "b", "c", "d"):
        m.observe(_row(agent=agent), [_reply(f"{agent}-1")])
    m.observe(_row(agent="a"), [_reply("a-1"), _reply("a-2", coverage="unanswered", routine_status="completed")])
    m.observe(_row(agent="a", error_code=-32001), [_reply(None), _reply(None)])  # no id: each sighting counts
    ex = _samples(m, "converse_tap_exchanges_total")
    assert {dict(k)["agent"] for k in ex} == {"a", "b", OTHER}
    assert sum(ex.values()) == 6
    assert ex[(("agent", "a"), ("binding", "jsonrpc"), ("method", "SendMessage"), ("outcome", "error"))] == 1
    replies = _samples(m, "converse_tap_replies_total")
    assert sum(replies.values()) == 4 + 1 + 2  # a-1 seen twice, counted once
    assert replies[(("agent", "a"), ("author", "agent"), ("coverage", "unanswered"), ("reason", ""))] == 1
    routines = _samples(m, "converse_tap_routine_status_total")
    assert list(routines.values()) == [1.0]
    assert sum(_samples(m, "converse_tap_exchange_duration_seconds_count").values()) == 6
    text = m.text().decode()
    assert "a-1" not in text and "a-2" not in text  # no ids as labels


def test_metric_label_values_are_bounded_per_label() -> None:
    m = LiveMetrics()
    for i in range(200):
        m.observe(_row(), [_reply(f"m{i}", coverage=f"verdict-{i}" + "x" * 200)])
    coverages = {dict(k)["coverage"] for k in _samples(m, "converse_tap_replies_total")}
    assert len(coverages) == 51 and OTHER in coverages and max(map(len, coverages)) == 80


def test_values_the_spec_names_keep_their_series_whatever_came_first() -> None:
    """A flood of made-up coverages and methods took every slot of their labels, and the spec's own values that
    came later were counted as `other` for the worker's life."""
    m = LiveMetrics()
    for i in range(60):
        row = _row(method=f"made/up-{i}")
        m.observe(row, [_reply(f"m{i}", coverage=f"verdict-{i}")])
    m.observe(_row(), [_reply("real", coverage="answered")])
    replies = _samples(m, "converse_tap_replies_total")
    assert replies[(("agent", "a"), ("author", "agent"), ("coverage", "answered"), ("reason", ""))] == 1
    methods = {dict(k)["method"] for k in _samples(m, "converse_tap_exchanges_total")}
    assert "SendMessage" in methods and OTHER in methods and len(methods) == 52


def test_an_idle_agents_slot_goes_to_a_new_agent_and_its_series_go() -> None:
    """The first `max_agents` agents held their slots for the worker's life: agents that came once (or a burst
    of made-up ones) kept every later agent under `other`."""
    from converse_tap.export.metrics import AGENT_IDLE

    now = [0.0]
    m = LiveMetrics(max_agents=2)
    m.agent.clock = lambda: now[0]
    for agent in ("once", "steady", "late"):
        m.observe(_row(agent=agent), [_reply(f"{agent}-1")])
    now[0] = AGENT_IDLE - 1
    m.observe(_row(agent="steady"), [_reply("steady-2")])
    m.observe(_row(agent="late"), [_reply("late-2")])  # "once" is not idle long enough yet
    assert {dict(k)["agent"] for k in _samples(m, "converse_tap_exchanges_total")} == {"once", "steady", OTHER}
    now[0] = AGENT_IDLE + 1
    m.observe(_row(agent="late"), [_reply("late-3")])  # takes the slot "once" left idle, not "steady"'s
    exchanges = _samples(m, "converse_tap_exchanges_total")
    assert {dict(k)["agent"] for k in exchanges} == {"steady", "late", OTHER}
    assert {dict(k)["agent"] for k in _samples(m, "converse_tap_exchange_duration_seconds_count")} == {
        "steady",
        "late",
        OTHER,
    }
    by_agent = {dict(k)["agent"]: v for k, v in exchanges.items()}
    assert (by_agent["steady"], by_agent["late"], by_agent[OTHER]) == (2, 1, 2)
    assert not m._series.get((m.exchanges, "once"))  # nothing kept for it


def test_outcome() -> None:
    assert outcome(_row()) == "ok"
    assert outcome(_row(status_code=404, error_code=404)) == "error"
    assert outcome(_row(complete=False)) == "incomplete"


def test_listen_addresses() -> None:
    assert parse_listen("127.0.0.1:9464") == ("127.0.0.1", 9464)
    assert parse_listen("[::1]:0") == ("::1", 0)
    assert parse_listen(":9464") == ("0.0.0.0", 9464)
    for bad in ("9464", "host", "127.0.0.1:99999", "a:b"):
        with pytest.raises(ValueError, match="HOST:PORT"):
            parse_listen(bad)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        assert "cannot listen" in (check_listen(f"127.0.0.1:{taken.getsockname()[1]}") or "")
    assert check_listen("") is None and check_listen("127.0.0.1:0") is None


def test_bad_export_options_fail_at_startup(tap) -> None:
    addon, tctx, _ = tap
    with pytest.raises(exceptions.OptionsError, match="not an http"):
        tctx.configure(addon, converse_tap_otlp_endpoint="127.0.0.1:4318")
    with pytest.raises(exceptions.OptionsError, match="HOST:PORT"):
        tctx.configure(addon, converse_tap_otlp_endpoint="", converse_tap_metrics_listen="9464")


def _serving(port: int, timeout: float = 60) -> bytes:
    """/metrics of the worker once it listens (it starts in its own process): polled up to a deadline."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as r:
                return r.read()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_reconfiguring_keeps_the_metrics_port_the_worker_holds(tap) -> None:
    addon, tctx, _ = tap
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tctx.configure(addon, converse_tap_metrics_listen=f"127.0.0.1:{port}")
    assert b"converse_tap_rows_journaled_total" in _serving(port)
    tctx.configure(addon, converse_tap_summary="off")  # our own worker holds the port: not an error
    assert b"converse_tap_rows_journaled_total" in _serving(port)
    with pytest.raises(exceptions.OptionsError, match="at least 1"):
        tctx.configure(addon, converse_tap_metrics_agents=0)


def test_label_combinations_are_bounded_per_agent() -> None:
    """Each label keeps 50 values, but their combinations multiplied: one agent answering with 50 authors × 50
    coverages × 50 reasons of its own making made 125,000 series (~900 bytes each, and each one read at every
    scrape); a hundred agents, 12 million. Past MAX_SERIES combinations an agent's further ones count under
    `other`, the agent kept, every reply still counted; another agent's combinations are its own."""
    from converse_tap.export.metrics import MAX_SERIES

    m = LiveMetrics()
    n = 0
    for author in range(30):
        for coverage in range(30):
            n += 1
            m.observe(_row(agent="flood"), [_reply(f"m{n}", author=f"a{author}", coverage=f"c{coverage}")])
    m.observe(_row(agent="calm"), [_reply("calm-1", coverage="answered")])
    replies = _samples(m, "converse_tap_replies_total")
    flood = {k: v for k, v in replies.items() if dict(k)["agent"] == "flood"}
    assert len(flood) == MAX_SERIES + 1 and sum(flood.values()) == n
    other = (("agent", "flood"), ("author", OTHER), ("coverage", OTHER), ("reason", OTHER))
    assert flood[other] == n - MAX_SERIES
    assert replies[(("agent", "calm"), ("author", "agent"), ("coverage", "answered"), ("reason", ""))] == 1


def test_reply_ids_remembered_for_counting_once_are_kept_short() -> None:
    """The last 100,000 replies are remembered by agent and message id, both strings of the wire's making:
    ids of 20 KB would have held 2 GB. Ids past SHORT_TEXT are remembered by a digest, still counted once."""
    m = LiveMetrics()

    def replies(round_: int) -> None:
        for i in range(200):
            mid = f"{round_}-{i}-" + "i" * 20_000
            m.observe(_row(), [_reply(mid)])
            m.observe(_row(), [_reply(mid)])  # seen again: counted once

    kept = retained(replies)
    assert kept < 500_000, kept  # 200 ids of 20 KB held are 4 MB
    assert sum(_samples(m, "converse_tap_replies_total").values()) == 400
