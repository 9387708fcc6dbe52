"""An independent A2A implementation through the recorder: the @a2a-js/sdk 1.3.0 agent and client of
tests/integration/js/ (express for JSON-RPC and HTTP+JSON, grpc-js for gRPC, v1.0 and its v0.3 compat layer)
talk through a real mitmdump with the addon. What the client printed as received is the ground truth the
recorded rows are checked against; what only the wire shows (HTTP status, echoed extension headers) is read
back from the flow file mitmdump saved of the same traffic.

Each run ends with SubscribeToTask (v0.3 `tasks/resubscribe`, gRPC `TaskSubscription`), which the SDK offers on
every binding and version: a non-blocking send starts a task the agent holds working until the subscription has
attached (no timing involved, see server.mjs), and the subscription receives the rest of it."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from click.testing import CliRunner
from mitmproxy import io as mitmio
from mitmproxy.http import HTTPFlow

from converse_tap.a2a.constants import CONVERSE_URI
from converse_tap.cli import cli
from converse_tap.store.reader import load
from tests.integration.js_procs import RUNS, record

pytestmark = pytest.mark.integration

BINDINGS = {"JSONRPC": "jsonrpc", "HTTP+JSON": "rest", "GRPC": "grpc"}
ROLES = {"ROLE_AGENT": "agent", "ROLE_USER": "user"}
EXTENSION_HEADERS = {"a2a-extensions", "x-a2a-extensions"}


@dataclass
class Recorded:
    live: Path
    flows: Path
    truth: dict[str, Any]
    exchanges: pd.DataFrame  # in the order the client made its calls
    messages: pd.DataFrame
    wire: dict[str, tuple[int, bool]]  # flow id -> (HTTP status, the converse URI in a response extension header)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    live, flows, truth = record(tmp_path_factory.mktemp("js-sdk"))
    wire: dict[str, tuple[int, bool]] = {}
    with flows.open("rb") as f:
        for flow in mitmio.FlowReader(f).stream():
            assert isinstance(flow, HTTPFlow) and flow.response is not None, flow
            trailers = flow.response.trailers.fields if flow.response.trailers is not None else ()
            fields = [*flow.response.headers.fields, *trailers]
            echoed = any(k.decode().lower() in EXTENSION_HEADERS and CONVERSE_URI in v.decode() for k, v in fields)
            wire[flow.id] = (flow.response.status_code, echoed)
    exchanges = load(live, "exchanges").sort_values("ts_start").reset_index(drop=True)
    return Recorded(live, flows, truth, exchanges, load(live, "messages"), wire)


def _value(v: Any) -> Any:
    if isinstance(v, dict):
        return {k: _value(x) for k, x in v.items()}
    if isinstance(v, list | tuple) or hasattr(v, "tolist"):
        return [_value(x) for x in list(v)]
    if isinstance(v, float):  # an integer column holding nulls reads as floats
        return None if pd.isna(v) else int(v) if v.is_integer() else v
    return None if v is None or v is pd.NA else v


def _citation(c: dict[str, Any]) -> dict[str, Any]:
    return {"document_id": c.get("documentId"), "chunk_id": c.get("chunkId"), "title": c.get("title"),
            "source_url": c.get("sourceUrl")}  # fmt: skip


def _expected_envelope(env: dict[str, Any] | None) -> dict[str, Any]:
    """The envelope columns docs/schema.md derives from an envelope."""
    env = env or {}
    cov, own = env.get("answerCoverage") or {}, env.get("ownership") or {}
    routine, inv = env.get("routine"), env.get("invocation") or {}
    pending = None if routine is None else [{k: p.get(k) for k in ("key", "type", "required", "description")}
                                            for p in routine.get("pendingInput", [])]  # fmt: skip
    citations = env.get("citations")
    return {
        "has_envelope": bool(env),
        "author": env.get("author"),
        "coverage_availability": cov.get("availability"),
        "coverage": cov.get("coverage"),
        "coverage_reason": cov.get("reason"),
        "originating_turn_id": cov.get("originatingTurnId"),
        "originating_request_id": cov.get("originatingRequestId"),
        "ownership_state": own.get("state"),
        "ownership_suppressed": own.get("suppressed"),
        "routine_tool_name": (routine or {}).get("toolName"),
        "routine_name": (routine or {}).get("name"),
        "routine_status": (routine or {}).get("status"),
        "pending_input": pending,
        "pending_required_open": None if pending is None else sum(1 for p in pending if p["required"]),
        "invocation_tool_name": inv.get("toolName"),
        "invocation_outcome": inv.get("outcome"),
        "citations": None if citations is None else [_citation(c) for c in citations],
        "citation_count": None if citations is None else len(citations),
        "envelope_json": None if not env else json.dumps(env, sort_keys=True, separators=(",", ":")),
    }


ROW_COLUMNS = ["object_kind", "message_id", "artifact_name", "context_id", "task_id", "role", "task_state", "text",
               "event_index", "extensions", *_expected_envelope(None)]  # fmt: skip


def _expected_sighting(s: dict[str, Any], blind: frozenset[str]) -> str:
    row = {k: s[k] for k in ("object_kind", "message_id", "artifact_name", "context_id", "task_id", "task_state")}
    row |= {"role": ROLES.get(s["role"]), "text": s["text"], "event_index": s["event_index"]}
    row |= {"extensions": s["extensions"], **_expected_envelope(s["envelope"])}
    return json.dumps({k: v for k, v in row.items() if (row["object_kind"], k) not in blind}, sort_keys=True)


def _recorded_sighting(r: pd.Series, blind: frozenset[str]) -> str:
    row = {c: _value(r[c]) for c in ROW_COLUMNS}
    return json.dumps({k: v for k, v in row.items() if (row["object_kind"], k) not in blind}, sort_keys=True)


def _client_blind_spots(binding: str, version: str) -> frozenset[Any]:
    """(object kind, column) the JS client cannot report: its v0.3 HTTP+JSON and gRPC transports drop an
    artifact's `extensions` (on the wire; the v1.0 and v0.3 JSON-RPC ones keep them)."""
    return frozenset({("artifact", "extensions")}) if version == "0.3" and binding != "JSONRPC" else frozenset()


def _run(rec: Recorded, run: str) -> tuple[dict[str, Any], pd.Series, pd.DataFrame]:
    """A run's ground truth, its card fetch and its calls' exchanges: the client made them one after another."""
    at = 0
    for r in rec.truth["runs"]:
        if r["run"] == run:
            return r, rec.exchanges.iloc[at], rec.exchanges.iloc[at + 1 : at + 1 + len(r["calls"])]
        at += 1 + len(r["calls"])
    raise AssertionError(f"no run {run}")


def _method(call: dict[str, Any]) -> str:
    """The operation the recorder names a client call."""
    if call["op"] != "send":
        return {"get": "GetTask", "subscribe": "SubscribeToTask"}[call["op"]]
    return "SendStreamingMessage" if call["streamed"] else "SendMessage"


def _method_raw(binding: str, version: str, method: str, task_id: str | None) -> str:
    if binding == "GRPC":
        if version == "0.3" and method == "SubscribeToTask":
            method = "TaskSubscription"
        return f"/{'lf.a2a.v1' if version == '1.0' else 'a2a.v1'}.A2AService/{method}"
    if binding == "HTTP+JSON":  # (the v0.3 paths' /v1 prefix is part of the interface's base)
        return {
            "SendMessage": "POST /message:send",
            "SendStreamingMessage": "POST /message:stream",
            # the v1.0 client POSTs a subscription, the v0.3 one GETs it
            "SubscribeToTask": f"{'POST' if version == '1.0' else 'GET'} /tasks/{task_id}:subscribe",
        }.get(method, f"GET /tasks/{task_id}")
    v03 = {
        "SendMessage": "message/send",
        "SendStreamingMessage": "message/stream",
        "GetTask": "tasks/get",
        "SubscribeToTask": "tasks/resubscribe",
    }
    return v03[method] if version == "0.3" else method


def _not_found(binding: str, version: str) -> tuple[int, str | None]:
    """(error_code, error_reason) of GetTask on an unknown task, as the JS SDK answers it on each binding."""
    if binding == "JSONRPC":  # v0.3 errors carry no ErrorInfo
        return -32001, "TASK_NOT_FOUND" if version == "1.0" else None
    if binding == "GRPC":
        return 5, "TASK_NOT_FOUND"
    # v1.0 REST: {"error": {"code": 404, "status": "NOT_FOUND", "details": [ErrorInfo]}}; the v0.3 compat layer
    # answers a bare {"code": -32001, "message": …}
    return (404, "TASK_NOT_FOUND") if version == "1.0" else (-32001, None)


@pytest.mark.parametrize("run", RUNS)
def test_every_exchange_and_sighting_is_what_the_js_client_saw(recorded: Recorded, run: str) -> None:
    truth, card, calls = _run(recorded, run)
    binding, version = truth["binding"], truth["version"]
    assert (card["binding"], card["method"], card["status_code"]) == ("card", "GetAgentCard", 200)
    assert len(calls) == len(truth["calls"]) == 14
    for call, (_, ex) in zip(truth["calls"], calls.iterrows(), strict=True):
        where = f"{run} {call['op']} {call.get('text', call.get('task_id'))}"
        method = _method(call)
        status, echoed = recorded.wire[ex["exchange_id"]]
        assert ex["binding"] == BINDINGS[binding] and ex["dialect"] == f"v{version}", where
        assert (ex["method"], ex["method_raw"]) == (method, _method_raw(binding, version, method, call.get("task_id")))
        assert (ex["streamed"], ex["status_code"], ex["complete"]) == (call["streamed"], status, True), where
        assert _value(ex["sse_events"]) == (len(call["events"]) if call["streamed"] else None), where
        assert ex["converse_requested"] and ex["converse_echoed"] == echoed, where
        assert _value(ex["task_state"]) == call["task_state"], where
        assert _value(ex["context_id"]) == (call["context_id"] or None), where
        assert _value(ex["task_id"]) == (call["task_id"] or None), where
        if call["error"] is not None:  # GetTask on a task that does not exist
            assert "TaskNotFound" in call["error"]["name"], where
            assert (ex["error_code"], _value(ex["error_reason"])) == _not_found(binding, version), where
            assert "Task not found" in ex["error_message"], where
        else:
            assert _value(ex["error_code"]) is None and _value(ex["error_message"]) is None, where

        rows = recorded.messages[recorded.messages["exchange_id"] == ex["exchange_id"]]
        requests, responses = rows[rows["direction"] == "request"], rows[rows["direction"] == "response"]
        if call["op"] == "send":
            sent = call["request"]
            assert requests[["message_id", "role", "object_kind"]].values.tolist() == [
                [sent["message_id"], "user", "message"]
            ], where
            assert _value(requests["context_id"].iloc[0]) == (sent["context_id"] or call["context_id"]), where
        else:
            assert requests.empty, where
        blind = _client_blind_spots(binding, version)
        got = Counter(_recorded_sighting(r, blind) for _, r in responses.iterrows())
        want = Counter(_expected_sighting(s, blind) for s in call["sightings"])
        assert got == want, (where, sorted((got - want).elements()), sorted((want - got).elements()))
        replies = sum(1 for s in call["sightings"] if s["envelope"] and s["role"] == "ROLE_AGENT")
        assert (ex["messages"], ex["replies"]) == (len(rows), replies), where


@pytest.mark.parametrize("run", RUNS)
def test_a_subscription_receives_the_rest_of_a_task_a_non_blocking_send_left_working(
    recorded: Recorded, run: str
) -> None:
    """The `watch report` scenario: the non-blocking send answers with the submitted task alone; the subscription
    opens with the task's snapshot (working, the user's message in its history), then gets a progress status, an
    artifact and the completed status, each carrying the envelope. What the client received must be exactly this
    (a subscription that timed out or erred would not be) and the recorded rows must say so, event by event."""
    truth, _, calls = _run(recorded, run)
    binding, version = truth["binding"], truth["version"]
    send, sub = truth["calls"][-2:]
    (_, sent), (_, ex) = calls.iloc[-2:].iterrows()
    assert (send["op"], send["text"], send["return_immediately"], send["error"]) == ("send", "watch report", True, None)
    assert (send["events"], send["task_state"]) == (["task"], "TASK_STATE_SUBMITTED"), send
    assert (sent["method"], sent["streamed"], sent["task_state"]) == ("SendMessage", False, "TASK_STATE_SUBMITTED")
    assert sub["op"] == "subscribe" and sub["error"] is None, sub
    assert sub["events"] == ["task", "statusUpdate", "artifactUpdate", "statusUpdate"], sub
    assert (sub["snapshot_state"], sub["task_state"]) == ("TASK_STATE_WORKING", "TASK_STATE_COMPLETED"), sub
    assert (sub["task_id"], sub["context_id"]) == (send["task_id"], send["context_id"]) != (None, None)

    assert (ex["binding"], ex["dialect"], ex["method"]) == (BINDINGS[binding], f"v{version}", "SubscribeToTask")
    assert ex["method_raw"] == _method_raw(binding, version, "SubscribeToTask", send["task_id"])
    assert (ex["streamed"], ex["complete"], ex["status_code"], _value(ex["sse_events"])) == (True, True, 200, 4)
    assert (ex["task_id"], ex["context_id"], ex["task_state"]) == (
        send["task_id"],
        send["context_id"],
        "TASK_STATE_COMPLETED",
    )
    assert ex["converse_requested"] and ex["converse_echoed"] and recorded.wire[ex["exchange_id"]] == (200, True)
    assert (ex["messages"], ex["replies"], _value(ex["error_code"]), len(ex["anomalies"])) == (4, 2, None, 0)

    rows = recorded.messages[recorded.messages["exchange_id"] == ex["exchange_id"]].sort_values("seq")
    got = [
        [_value(r[c]) for c in ("direction", "event_index", "event_kind", "object_kind", "role", "task_state")]
        + [r["has_envelope"], _value(r["coverage_availability"]), _value(r["coverage"]), _value(r["citation_count"])]
        for _, r in rows.iterrows()
    ]
    assert got == [
        ["response", 0, "task", "message", "user", None, False, None, None, None],
        ["response", 1, "statusUpdate", "message", "agent", "TASK_STATE_WORKING", True, "not_recorded", None, None],
        ["response", 2, "artifactUpdate", "artifact", None, None, True, None, None, 1],
        ["response", 3, "statusUpdate", "message", "agent", "TASK_STATE_COMPLETED", True, "assessed", "answered", 1],
    ], run
    assert set(rows["task_id"]) == {send["task_id"]} and set(rows["context_id"]) == {send["context_id"]}
    assert rows["text"].tolist() == [
        "watch report",
        "Reading the wine list.",
        "Three reds, two whites.",
        "The wine list is attached.",
    ]


def test_the_agent_card_rows_carry_the_converse_declaration(recorded: Recorded) -> None:
    cards = load(recorded.live, "agent_cards")
    assert len(cards) == len(RUNS)  # the client fetched the card once per run
    card = cards.iloc[0]
    assert card["name"] == "JS Trattoria" and card["source"] == "well-known"
    assert card["converse_declared"] and card["converse_required"] in (False,)  # false, not null
    assert card["mcp_url"] == "https://mcp.radioso.example/mcp/a/ag_js0peer01"
    assert card["mcp_server_card_url"] == card["mcp_url"] + "/server-card"
    assert [t["tool_name"] for t in card["tools"]] == ["book_table"]
    assert list(card["tools"][0]["required_fields"]) == ["date", "partySize"]
    assert card["tools_match_skills"] and list(card["unmatched_tools"]) == []
    assert sorted(card["skill_ids"]) == ["ask_agent", "book_table"]
    assert sorted((i["binding"], i["protocol_version"]) for i in card["interfaces"]) == sorted(
        (b, v) for b in BINDINGS for v in ("0.3", "1.0")
    )
    cols = [c for c in cards.columns if c not in {"exchange_id", "ts", "date"}]
    assert cards[cols].astype(str).drop_duplicates().shape[0] == 1  # the same card every time


def test_anomalies_are_the_ones_the_traffic_justifies(recorded: Recorded) -> None:
    """The only thing wrong on this wire: the JS SDK turns an executor's exception into a failed task whose status
    message (the SDK's, not the agent's) carries no envelope although the client asked for the extension."""
    ex, msgs = recorded.exchanges, recorded.messages
    explode: set[str] = set()  # the exchanges of the `explode` calls, by their request message
    for r in recorded.truth["runs"]:
        for call in r["calls"]:
            if call.get("text") == "explode":
                sent = msgs[(msgs["direction"] == "request") & (msgs["message_id"] == call["request"]["message_id"])]
                explode |= set(sent["exchange_id"])
    assert len(explode) == len(RUNS)
    flagged = {e: sorted(a) for e, a in zip(ex["exchange_id"], ex["anomalies"], strict=True) if len(a)}
    assert flagged == {e: ["converse_requested_no_envelope"] for e in explode}
    codes = Counter((e, a) for e, anomalies in zip(msgs["exchange_id"], msgs["anomalies"], strict=True)
                    for a in anomalies)  # fmt: skip
    assert set(codes) == {(e, "envelope_missing") for e in explode}
    missing = msgs[msgs["anomalies"].apply(len) > 0]
    assert set(missing["role"]) == {"agent"} and set(missing["task_state"].dropna()) == {"TASK_STATE_FAILED"}
    assert not load(recorded.live, "agent_cards")["anomalies"].apply(len).any()


def test_report_counts_what_the_scenario_implies(recorded: Recorded) -> None:
    r = CliRunner().invoke(cli, ["report", str(recorded.live), "--format", "json"])
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)
    replies: dict[str, dict[str, Any]] = {}  # distinct agent messages with the envelope, by message id
    for run in recorded.truth["runs"]:
        for call in run["calls"]:
            for s in call["sightings"]:
                if s["envelope"] and s["role"] == "ROLE_AGENT":
                    replies[s["message_id"]] = s["envelope"]
    assessed = Counter(
        e["answerCoverage"]["coverage"] for e in replies.values() if e["answerCoverage"]["availability"] == "assessed"
    )
    n = len(RUNS)
    assert len(replies) == 11 * n and assessed == {"answered": 3 * n, "partial": n, "unanswered": n}
    assert report["dataset"]["replies"] == len(replies) and report["dataset"]["exchanges"] == 15 * n
    coverage = report["coverage"]
    assert {k: v["count"] for k, v in coverage["by_coverage"].items() if v["count"]} == assessed
    assert coverage["turns_assessed"] == sum(assessed.values())
    assert report["authors"]["by_author"] == {"agent": 10 * n, "human": n}
    assert report["authors"]["handoffs_to_human"] == n
    routines = report["routines"]
    assert (routines["completed"], routines["abandoned"], routines["open"]) == (n, n, 0)
    assert routines["abandonment_rate"] == 0.5
    assert {(a["slot"], a["abandoned"]) for a in routines["abandoned_at"]} == {("date", n), ("partySize", n)}


def test_ingest_of_the_flow_file_equals_the_live_rows(recorded: Recorded, tmp_path: Path) -> None:
    from converse_tap.a2a.redact import TextPolicy
    from converse_tap.ingest import ingest

    offline = tmp_path / "offline"
    result = ingest([recorded.flows], offline, TextPolicy())
    assert result.errors == []
    for table, key in (("exchanges", ["exchange_id"]), ("messages", ["exchange_id", "seq"]),
                       ("agent_cards", ["exchange_id"])):  # fmt: skip
        a = load(recorded.live, table).sort_values(key).reset_index(drop=True)
        b = load(offline, table).sort_values(key).reset_index(drop=True)
        assert len(a) == len(b) > 0, table
        drop = ["source", "ts", "date"]  # live taps see per-event times
        a, b = a.drop(columns=[c for c in drop if c in a]), b.drop(columns=[c for c in drop if c in b])
        assert a.astype(str).equals(b.astype(str)), table
