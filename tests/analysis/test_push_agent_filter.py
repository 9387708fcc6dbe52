"""`--agent A` selects sightings by the agent they are attributed to: a reply of A that arrived only by push is in
A's report, a delivery attributed to B or to no agent is not (but `--agent push:unattributed` keeps the latter),
and the report for A alone equals A's group of the unfiltered report, on DuckDB and Spark."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mitmproxy import http

from converse_tap.a2a.constants import PUSH_AGENT
from converse_tap.analysis.engine import Engine
from converse_tap.analysis.load import Window
from converse_tap.analysis.report import build_report
from converse_tap.analysis.views import create_named_views
from tests.analysis.test_push_report import T0, completed, poll, pushed, send, status_update
from tests.cli_helpers import invoke
from tests.factories import write_dataset

A = "agent.test:9000/a2a/jsonrpc"  # the agent key of a2a_flow's agent
B_HOST = "other.test"


def at_b(flow: http.HTTPFlow) -> http.HTTPFlow:
    flow.request.host = B_HOST
    return flow


def flows() -> list[http.HTTPFlow]:
    return [
        # A: two tasks answered `submitted`, each reply only pushed (no poll)
        send(T0, "t-a1"),
        pushed(status_update("t-a1", "m-a1"), T0 + 1),
        send(T0 + 2, "t-a2"),
        pushed(status_update("t-a2", "m-a2"), T0 + 3),
        # B: a reply polled, and one only pushed after a `submitted` SendMessage
        at_b(poll(completed("t-b1", "m-b1"), T0 + 4)),
        at_b(send(T0 + 5, "t-b2")),
        pushed(status_update("t-b2", "m-b2"), T0 + 6),
        # a delivery of a task nothing else holds, and one of a task A and B both hold: no agent's
        pushed(status_update("t-x", "m-x"), T0 + 7),
        poll(completed("t-c", "m-ca"), T0 + 8),
        at_b(poll(completed("t-c", "m-cb"), T0 + 9)),
        pushed(status_update("t-c", "m-c"), T0 + 10),
    ]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(write_dataset(tmp_path_factory.mktemp("push-filter"), flows()))


@pytest.fixture(scope="module")
def unfiltered(dataset: Path) -> dict[str, Any]:
    with Engine.over_dataset(dataset) as engine:
        return build_report(engine, by=("agent",))


def agent_keys(report: dict[str, Any]) -> list[str]:
    return sorted(report["groups"]["agent"])


def same_as_group(report: dict[str, Any], unfiltered: dict[str, Any], agent: str) -> None:
    group = unfiltered["groups"]["agent"][agent]
    for section, value in group.items():
        assert report[section] == value, section
    assert list(report["groups"]["agent"]) == [agent]


def test_the_unfiltered_report_attributes_as_documented(unfiltered: dict[str, Any]) -> None:
    groups = unfiltered["groups"]["agent"]
    b = next(k for k in groups if k.startswith(B_HOST))
    assert {k: groups[k]["authors"]["replies"] for k in groups} == {A: 3, b: 3, PUSH_AGENT: 2}


def test_a_report_for_one_agent_is_its_group_of_the_unfiltered_report(
    dataset: Path, unfiltered: dict[str, Any]
) -> None:
    for agent in agent_keys(unfiltered):
        window = Window(agents=(agent,))
        with Engine.over_dataset(dataset, window) as engine:
            report = build_report(engine, window, by=("agent",))
        same_as_group(report, unfiltered, agent)
        assert report["dataset"]["agents"] == [agent]


def test_a_pushed_reply_counts_in_its_agents_dataset_counts(dataset: Path) -> None:
    window = Window(agents=(A,))
    with Engine.over_dataset(dataset, window) as engine:
        report = build_report(engine, window, by=("agent",))
        replies = {r["reply_key"]: r["agent"] for r in engine.replies().to_dict("records")}
    assert replies == {"m-a1": A, "m-a2": A, "m-ca": A}
    counts = report["dataset"]
    # A's two deliveries and its poll of t-c; its two SendMessage calls, the poll and the two deliveries
    assert (counts["agent_message_sightings"], counts["replies"], counts["exchanges"]) == (3, 3, 5)
    adoption = report["conformance"]["adoption"]
    assert adoption["agent_messages_with_envelope"]["of"] == 3  # its messages, the pushed ones too
    assert adoption["requests_asking_converse"]["of"] == 3  # its calls: deliveries are none


def test_an_agent_and_the_push_key_together_leave_a_contested_task_unattributed(dataset: Path) -> None:
    """`--agent A --agent push:unattributed`: the delivery of a task A and B both hold stays no agent's, although
    B's rows are outside the filter."""
    window = Window(agents=(A, PUSH_AGENT))
    with Engine.over_dataset(dataset, window) as engine:
        replies = {r["reply_key"]: r["agent"] for r in engine.replies().to_dict("records")}
    assert replies == {"m-a1": A, "m-a2": A, "m-ca": A, "m-x": PUSH_AGENT, "m-c": PUSH_AGENT}


def test_replies_built_file_by_file_are_the_same(tmp_path: Path) -> None:
    """The replies built from runs of files (and the message keys in hash partitions) are narrowed as the whole."""
    both = flows()
    write_dataset(tmp_path, both[:6])
    write_dataset(tmp_path, both[6:], id_format="ey-{:03d}")
    window = Window(agents=(A, PUSH_AGENT))
    with Engine.over_dataset(tmp_path, window) as engine:
        whole = engine.replies()
    with Engine.over_dataset(tmp_path, window, chunk_rows=1, partition_rows=1) as engine:
        assert len(engine._chunks) == 2 and engine._partitions > 1
        parts = engine.replies()
    assert parts.to_dict("records") == whole.to_dict("records")
    assert sorted(whole["reply_key"]) == ["m-a1", "m-a2", "m-c", "m-ca", "m-x"]


def test_the_drill_down_views_hold_the_agents_pushed_rows(dataset: Path) -> None:
    window = Window(agents=(A,))
    with Engine.over_dataset(dataset, window) as engine:
        create_named_views(engine, window)
        stored = engine.con.sql(
            "SELECT DISTINCT message_id, agent FROM stored.messages WHERE role = 'agent' ORDER BY message_id"
        ).fetchall()
        facts = engine.con.sql("SELECT reply_key, agent FROM replies ORDER BY reply_key").fetchall()
        report = build_report(engine, window, examples=2, transcripts=True)
    # as stored (a delivery's key), but only the rows of A's replies
    assert stored == [("m-a1", PUSH_AGENT), ("m-a2", PUSH_AGENT), ("m-ca", A)]
    assert facts == [("m-a1", A), ("m-a2", A), ("m-ca", A)]
    shown = {m["message_id"] for t in report["transcripts"].values() for m in t["messages"] if m["role"] == "agent"}
    assert shown == {"m-a1", "m-a2", "m-ca"}


def test_the_cli_report_for_an_agent_counts_its_pushed_replies(dataset: Path, unfiltered: dict[str, Any]) -> None:
    r = invoke("report", str(dataset), "--agent", A, "--format", "json", "--by", "agent")
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert report["authors"]["replies"] == 3
    same_as_group(report, unfiltered, A)


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from converse_tap.analysis.spark import spark_session

    session = spark_session("local[1]")
    yield session
    session.stop()


@pytest.mark.parametrize("agents", [(A,), (A, PUSH_AGENT)])
def test_spark_filters_by_the_attributed_agent_as_duckdb_does(dataset: Path, spark: Any, agents: tuple[str]) -> None:
    from converse_tap.analysis.spark import SparkEngine

    window = Window(agents=agents)
    with Engine.over_dataset(dataset, window) as e:
        duck = build_report(e, window, by=("agent",))
    with SparkEngine.over_spark(dataset, window, spark=spark) as e:
        spk = build_report(e, window, by=("agent",))
    assert json.dumps(spk, sort_keys=True) == json.dumps(duck, sort_keys=True)
    assert duck["authors"]["replies"] == {(A,): 3, (A, PUSH_AGENT): 5}[agents]
