"""A reply delivered by push notification counts once, under the agent whose task it belongs to, whether it is
seen only in the delivery or polled again later (DuckDB and Spark alike)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mitmproxy import http

from converse_tap.a2a.constants import PUSH_AGENT
from converse_tap.analysis.engine import Engine
from converse_tap.analysis.report import build_report
from tests.factories import a2a_flow, agent_message, jsonrpc_request, jsonrpc_result, user_message, write_dataset

AGENT = "agent.test:9000/a2a/jsonrpc"  # the agent key of a2a_flow's agent


def pushed(doc: Any, ts: float) -> http.HTTPFlow:
    """The agent's POST of `doc` to the client's webhook."""
    f = a2a_flow(path="/hooks/a2a", body=json.dumps(doc).encode(), extensions=False, response=b"")
    del f.request.headers["a2a-version"]
    f.request.host = "client.test"
    f.request.timestamp_start = ts
    f.response.timestamp_start = f.response.timestamp_end = ts + 0.01
    return f


def poll(task: dict[str, Any], ts: float) -> http.HTTPFlow:
    f = a2a_flow(body=jsonrpc_request("GetTask", {"id": task["id"]}), response=jsonrpc_result(task))
    f.request.timestamp_start = ts
    f.response.timestamp_start = f.response.timestamp_end = ts + 0.01
    return f


def send(ts: float, task_id: str, agent_msg: dict[str, Any] | None = None) -> http.HTTPFlow:
    """A SendMessage answered by the task (submitted, or with the agent's message when given)."""
    task: dict[str, Any] = {"id": task_id, "contextId": "ctx-1", "status": {"state": "TASK_STATE_SUBMITTED"}}
    if agent_msg is not None:
        task["status"] = {"state": "TASK_STATE_WORKING", "message": agent_msg}
    params = {"message": user_message(), "configuration": {"returnImmediately": True}}
    f = a2a_flow(body=jsonrpc_request("SendMessage", params), response=jsonrpc_result({"task": task}))
    f.request.timestamp_start = ts
    f.response.timestamp_start = f.response.timestamp_end = ts + 0.01
    return f


def completed(task_id: str, mid: str) -> dict[str, Any]:
    msg = agent_message(mid, taskId=task_id)
    return {"id": task_id, "contextId": "ctx-1", "status": {"state": "TASK_STATE_COMPLETED", "message": msg}}


def status_update(task_id: str, mid: str) -> dict[str, Any]:
    task = completed(task_id, mid)
    return {"statusUpdate": {"taskId": task_id, "contextId": "ctx-1", "status": task["status"]}}


T0 = 1_767_000_000.0


@pytest.fixture(scope="module")
def dataset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    flows = [
        # task t-1: the agent's first word in SendMessage, its reply pushed, then polled (one reply, the agent's)
        send(T0, "t-1", agent_message("m-ack", text="On it.", taskId="t-1")),
        pushed(status_update("t-1", "m-1"), T0 + 1),
        poll(completed("t-1", "m-1"), T0 + 2),
        # task t-2: the reply is pushed as the whole Task and polled, nothing else of the agent's seen before
        pushed({"task": completed("t-2", "m-2")}, T0 + 3),
        poll(completed("t-2", "m-2"), T0 + 4),
        # task t-3: answered `submitted` (no agent message), its reply only pushed: the agent of the call
        send(T0 + 5, "t-3"),
        pushed(status_update("t-3", "m-3"), T0 + 6),
        # task t-4: pushed only, nothing else of its task seen: the agent is not known
        pushed(status_update("t-4", "m-4"), T0 + 7),
    ]
    return Path(write_dataset(tmp_path_factory.mktemp("push"), flows))


@pytest.fixture(scope="module")
def replies(dataset: Path) -> Iterator[Any]:
    with Engine.over_dataset(dataset) as engine:
        yield engine.replies()


def test_a_pushed_then_polled_reply_counts_once_under_its_agent(replies: Any) -> None:
    by_key = {r["reply_key"]: r for r in replies.to_dict("records")}
    assert sorted(by_key) == ["m-1", "m-2", "m-3", "m-4", "m-ack"]
    assert by_key["m-1"]["agent"] == AGENT and by_key["m-2"]["agent"] == AGENT
    # first seen in the delivery (its time), its values from the last sighting (the poll)
    assert by_key["m-1"]["first_seen"].timestamp() == pytest.approx(T0 + 1)
    assert by_key["m-1"]["exchange_id"] == "ex-002"
    assert by_key["m-2"]["first_seen"].timestamp() == pytest.approx(T0 + 3)


def test_a_reply_only_pushed_is_the_agent_whose_call_made_its_task(replies: Any) -> None:
    """The common push flow: SendMessage answered with the task, submitted (no agent message), then the reply by push
    and no poll. The call names the task's agent."""
    (row,) = [r for r in replies.to_dict("records") if r["reply_key"] == "m-3"]
    assert (row["agent"], row["exchange_id"], row["task_id"]) == (AGENT, "ex-006", "t-3")


def test_a_reply_seen_only_in_a_delivery_keeps_the_push_key(replies: Any) -> None:
    (row,) = [r for r in replies.to_dict("records") if r["reply_key"] == "m-4"]
    assert (row["agent"], row["exchange_id"], row["task_id"]) == (PUSH_AGENT, "ex-007", "t-4")


def test_the_report_counts_each_reply_once(dataset: Path) -> None:
    with Engine.over_dataset(dataset) as engine:
        report = build_report(engine, by=("agent",))
    assert report["dataset"]["replies"] == 5
    assert report["dataset"]["agent_message_sightings"] == 7  # as stored: every sighting
    groups = report["groups"]["agent"]
    assert groups[AGENT]["authors"]["replies"] == 4  # m-ack, m-1, m-2, m-3
    assert groups[PUSH_AGENT]["authors"]["replies"] == 1  # m-4, whose agent is not known


def test_a_task_two_agents_claim_is_not_attributed(tmp_path: Path) -> None:
    """A delivery whose task the sightings of two agents hold stays under the push key: no agent is guessed."""
    other = poll(completed("t-9", "m-x"), T0 + 1)
    other.request.host = "other.test"
    flows = [poll(completed("t-9", "m-a"), T0), other, pushed(status_update("t-9", "m-9"), T0 + 2)]
    with Engine.over_dataset(write_dataset(tmp_path, flows)) as engine:
        rows = {r["reply_key"]: r["agent"] for r in engine.replies().to_dict("records")}
    assert rows["m-9"] == PUSH_AGENT and rows["m-a"] == AGENT and rows["m-x"].startswith("other.test")


def test_spark_attributes_pushed_replies_as_duckdb_does(dataset: Path) -> None:
    from converse_tap.analysis.spark import SparkEngine, spark_session

    session = spark_session("local[1]")
    try:
        with Engine.over_dataset(dataset) as e:
            duck = build_report(e, by=("agent", "day"))
        with SparkEngine.over_spark(dataset, spark=session) as e:
            spk = build_report(e, by=("agent", "day"))
    finally:
        session.stop()
    assert json.dumps(spk, sort_keys=True) == json.dumps(duck, sort_keys=True)
    assert duck["dataset"]["replies"] == 5


def test_deliveries_are_no_calls_and_their_key_no_agent(dataset: Path) -> None:
    """A delivery is the agent's request to the client, not a client's call that could ask for the extension, and
    `push:unattributed` names no agent: adoption and the agents overview leave both out."""
    from converse_tap.analysis.agents import dataset_overview

    with Engine.over_dataset(dataset) as engine:
        counts = engine.adoption_counts()
        calls = engine.scalar("SELECT count(DISTINCT exchange_id) FROM exchanges WHERE binding <> 'webhook'")
    assert counts["calls"] == calls == 4  # two SendMessage and two GetTask; the four deliveries left out
    overview, _ = dataset_overview(dataset)
    assert [a["agent"] for a in overview] == [AGENT]
