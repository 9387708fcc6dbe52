"""The report against the independent reference with exchanges and cards beside the messages: every figure of
tests/analysis/test_metrics_reference.py (push deliveries now attributed through calls too), and the exchanges
counted, adoption, anomalies and the latest cards (tests/analysis/metrics_reference_exchanges.py), under windows
whose bounds fall exactly on rows' times."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path
from typing import Any

import pandas as pd
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from converse_tap.a2a.constants import PUSH_AGENT
from converse_tap.analysis.agents import dataset_overview
from converse_tap.analysis.engine import Engine
from converse_tap.analysis.load import Window
from converse_tap.analysis.report import build_report
from tests.analysis.metrics_reference import GROUPS, STALE, at, reference
from tests.analysis.metrics_reference_exchanges import (
    agents_figures,
    agents_figures_of,
    calls_of,
    cards,
    exchange_figures,
    exchange_figures_of,
    exchanges_for,
)
from tests.analysis.test_metrics_reference import ROW_FIELDS, STALES, WINDOWS, check, datasets, write

Tables = tuple[list[list[dict[str, Any]]], list[list[dict[str, Any]]], list[list[dict[str, Any]]]]


@st.composite
def whole(draw: st.DrawFn) -> Tables:
    """The three tables of one dataset: messages, their exchanges (and others), cards."""
    messages = draw(datasets())
    return messages, draw(exchanges_for([r for f in messages for r in f])), draw(cards())


def compare(report: dict[str, Any], root: Path, tables: Tables, window: Window, stale: timedelta) -> None:
    messages, exchanges, cards_ = (write(root, files, t) for files, t in zip(tables, TABLE_NAMES, strict=True))
    check(report, reference(messages, window, calls_of(exchanges, window), stale))
    assert exchange_figures_of(report) == exchange_figures(messages, exchanges, cards_, window)


TABLE_NAMES = ("messages", "exchanges", "agent_cards")
# no shrinking: a dataset of three tables took hypothesis over five minutes to shrink; the difference shows anyway
FIND = (Phase.explicit, Phase.generate)


def report_of(engine: Any, window: Window, stale: timedelta) -> dict[str, Any]:
    report = build_report(engine, window, by=tuple(GROUPS), stale_after=pd.Timedelta(stale))
    return json.loads(json.dumps(report, default=str))


@settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck), phases=FIND)
@given(tables=whole(), w=st.sampled_from(range(len(WINDOWS))), s=st.sampled_from(STALES))
def test_duckdb_report_of_exchanges_and_cards_equals_the_reference(
    tmp_path_factory: Any, tables: Tables, w: int, s: timedelta
) -> None:
    root = tmp_path_factory.mktemp("oracle")
    for files, table in zip(tables, TABLE_NAMES, strict=True):
        write(root, files, table)
    with Engine.over_dataset(root, WINDOWS[w]) as engine:
        report = report_of(engine, WINDOWS[w], s)
    compare(report, root, tables, WINDOWS[w], s)
    if w == 0:  # `converse-tap agents` has no window
        overview, _ = dataset_overview(root)
        exchanges, cards_ = write(root, tables[1], "exchanges"), write(root, tables[2], "agent_cards")
        assert agents_figures_of(overview) == agents_figures(exchanges, cards_)


@settings(max_examples=2, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(tables=whole(), w=st.sampled_from(range(len(WINDOWS))))
def test_spark_report_of_exchanges_and_cards_equals_the_reference(
    tmp_path_factory: Any, spark: Any, tables: Tables, w: int
) -> None:
    from converse_tap.analysis.spark import SparkEngine

    root, window = tmp_path_factory.mktemp("oracle"), WINDOWS[w]
    for files, table in zip(tables, TABLE_NAMES, strict=True):
        write(root, files, table)
    with SparkEngine.over_spark(root, window, spark=spark) as engine:
        report = report_of(engine, window, STALE)
    compare(report, root, tables, window, STALE)
    with Engine.over_dataset(root, window) as engine:
        assert report == report_of(engine, window, STALE)  # and every other figure of the report too


def _said(mid: str, agent: str, exchange: str, **values: Any) -> dict[str, Any]:
    row = {f: None for f in (*ROW_FIELDS, "routine_name", "routine_status")} | dict(
        agent=agent, exchange_id=exchange, seq=0, message_id=mid
    )
    return row | dict(ts=at(1), role="agent", context_id="c1", task_id="t1", anomalies=["missing:author"]) | values


def _call(exchange: str, agent: str, **values: Any) -> dict[str, Any]:
    row = dict(exchange_id=exchange, agent=agent, binding="jsonrpc", ts_start=at(1), task_id="t1", anomalies=None)
    return row | dict(converse_requested=True) | values


def _card(exchange: str, minute: int | None, name: str) -> dict[str, Any]:
    ts = None if minute is None else at(minute)
    row = dict(exchange_id=exchange, agent="A", source="well-known", ts=ts, name=name, anomalies=None)
    return row | dict(converse_declared=True, mcp_url=None, tools=None, tools_match_skills=None)


def test_cards_and_deliveries_the_engines_got_wrong(tmp_path: Path) -> None:
    """Three cases the reference found. (1) A card fetched twice in one microsecond: the latest is the one recorded
    last; an unstable sort of the times left it to chance (`latest_cards`). (2) A push delivery that carried no
    agent message (a status update without one) is its task's agent's: `--agent A` selects it among A's exchanges,
    where `push_owners` looked only at the pushed tasks of messages. (3) A message seen in a delivery and polled
    from its agent is one distinct message: its anomaly counts once, not once under each stored key."""
    cards_ = [[_card("k1", 1, "first"), _card("k3", 0, "older")], [_card("k2", 1, "second")]]
    cards_.append([_card("k4", None, "untimed"), _card("k5", 2, "timed")])
    messages = [[_said("m1", "A", "e1"), _said("m1", PUSH_AGENT, "p1", ts=at(2))]]
    exchanges = [[_call("e1", "A"), _call("p1", PUSH_AGENT, binding="webhook", ts_start=at(2))]]
    exchanges[0].append(_call("p2", PUSH_AGENT, binding="webhook", ts_start=at(3), anomalies=["push_body_not_a2a"]))
    tables = (messages, exchanges, cards_)
    for files, table in zip(tables, TABLE_NAMES, strict=True):
        write(tmp_path, files, table)
    for window in (Window(), Window(agents=("A",)), Window(until=at(2))):
        with Engine.over_dataset(tmp_path, window) as engine:
            report = report_of(engine, window, STALE)
        compare(report, tmp_path, tables, window, STALE)
        got = {(a["table"], a["code"]): a["count"] for a in report["conformance"]["anomalies"]}
        assert got[("messages", "missing")] == 1
        assert report["dataset"]["exchanges"] == (1 if window.until else 3)  # p2 is A's too; --until is exclusive
        latest = [c["name"] for c in report["conformance"]["agent_cards"]]
        assert latest == (["second"] if window.until else ["untimed"])


def test_an_open_instance_idle_exactly_the_stale_time_is_not_stale(tmp_path: Path) -> None:
    """ "Stale: open instances whose last status is older than D before the last reply": idle exactly D is not
    older than D; a microsecond more is."""
    messages = [[_said("s1", "A", "e1", ts=at(0), routine_name="R", routine_status="active", anomalies=None)]]
    messages[0].append(_said("s2", "B", "e2", ts=at(2)))  # the last reply of the data, two minutes later
    rows = write(tmp_path, messages, "messages")
    for stale, want in ((timedelta(minutes=2), 0), (timedelta(minutes=2) - timedelta(microseconds=1), 1)):
        with Engine.over_dataset(tmp_path, Window()) as engine:
            report = report_of(engine, Window(), stale)
        check(report, reference(rows, Window(), stale=stale))
        assert (report["routines"]["open"], report["routines"]["stale"]) == (1, want)
