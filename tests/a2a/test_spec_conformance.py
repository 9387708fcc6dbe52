"""Conformance hunt against the converse extension spec (v1) and the A2A wire, as other implementations speak it.

Each test states what the spec says a value means and asserts the rows say it: an odd value costs only its own
field and is named in `anomalies`, never read as something else; the spec's own examples stay without anomalies."""

from __future__ import annotations

import json
from typing import Any

import pytest

from converse_tap.a2a.card import card_fields
from converse_tap.a2a.envelope import flatten_envelope
from converse_tap.a2a.extract import Extraction, extract
from converse_tap.a2a.redact import TextPolicy
from converse_tap.a2a.sse import parse_sse
from converse_tap.addon.flows import exchange_from_flow
from tests.factories import EXT, a2a_flow, agent_message, envelope, jsonrpc_request, jsonrpc_result, status_event


def run(flow: Any) -> Extraction:
    out = extract(exchange_from_flow(flow), TextPolicy())
    assert out is not None
    return out


def reply_row(out: Extraction) -> dict[str, Any]:
    rows = [m for m in out.messages if m["direction"] == "response"]
    assert len(rows) == 1
    return rows[0]


def with_headers(requested: list[str], echoed: list[str]) -> Any:
    flow = a2a_flow(extensions=False, response=jsonrpc_result({"message": agent_message()}))
    for value in requested:
        flow.request.headers.add("A2A-Extensions", value)
    for value in echoed:
        flow.response.headers.add("X-A2A-Extensions", value)
    return flow


# -- the spec's own examples: no anomaly --------------------------------------------------------------------------

SPEC_CARD_EXTENSION = {
    "uri": EXT,
    "description": "Radioso conversation extension.",
    "required": False,
    "params": {
        "mcp": {
            "url": "https://mcp.radioso.ai/mcp/a/ag_7Qb3nT1xK9wZs2Pv0Lm4Rd",
            "serverCardUrl": "https://mcp.radioso.ai/mcp/a/ag_7Qb3nT1xK9wZs2Pv0Lm4Rd/server-card",
        },
        "tools": [
            {
                "toolName": "book_table",
                "description": "Book a table for a date and party size.",
                "inputSchema": {
                    "type": "object",
                    "properties": {"date": {"type": "string"}, "partySize": {"type": "integer"}},
                    "required": ["date", "partySize"],
                },
            }
        ],
    },
}


def card_with(*extensions: Any, skills: Any = ({"id": "book_table"},)) -> dict[str, Any]:
    return {"name": "A", "skills": list(skills), "capabilities": {"extensions": list(extensions)}}


def test_the_spec_examples_are_read_without_anomalies() -> None:
    notes: list[str] = []
    fields = card_fields(card_with(SPEC_CARD_EXTENSION), notes)
    assert (fields["converse_declared"], fields["tools_match_skills"], notes) == (True, True, [])
    spec_envelope = {
        "author": "agent",
        "answerCoverage": {
            "availability": "assessed",
            "coverage": "answered",
            "reason": "sufficient_evidence",
            "originatingTurnId": "c3",
            "originatingRequestId": "c3",
        },
        "ownership": {"state": "ai_owned", "suppressed": False},
        "citations": [{"documentId": "0c8e", "chunkId": "5d21", "title": "Returns policy"}],
    }
    out = run(a2a_flow(response=jsonrpc_result({"message": agent_message(env=spec_envelope)})))
    row = reply_row(out)
    assert (row["author"], row["coverage"], row["citation_count"], row["anomalies"]) == ("agent", "answered", 1, [])
    assert out.exchange["anomalies"] == []


# -- activation: the A2A-Extensions headers ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("sent", "stored"),
    [
        (EXT + "/", EXT + "/"),
        (f'"{EXT}"', f'"{EXT}"'),
        (f"<{EXT}>", f"<{EXT}>"),
        (EXT.replace("docs.radioso.ai", "Docs.Radioso.AI"), EXT.replace("docs.radioso.ai", "Docs.Radioso.AI")),
        (EXT.upper(), "https" + EXT.upper()[5:]),  # (stored redacted: the scheme in lower case)
        (EXT.replace("https", "HTTPS"), EXT),  # these two were read as the exact URI once redacted
        (EXT + "#v1", EXT),
    ],
)
def test_a_near_miss_of_the_uri_is_not_activation_and_is_named(sent: str, stored: str) -> None:
    """The spec: "Check that A2A-Extensions holds the exact URI, including the v1 at the end": a near miss activates
    nothing on a server that compares it (the a2a-sdk does), so it is not `converse_requested`, and the row says
    what came instead (as stored: redacted)."""
    out = run(with_headers([sent], [sent]))
    x = out.exchange
    assert (x["converse_requested"], x["converse_echoed"], x["extensions_requested"]) == (False, False, [stored])
    assert f"extension_uri_variant:extensions_requested:{stored}" in x["anomalies"]
    assert f"extension_uri_variant:extensions_echoed:{stored}" in x["anomalies"]
    assert "envelope_not_requested" in x["anomalies"]  # (the agent answered with the envelope all the same)


def test_another_version_of_the_extension_is_named_as_such() -> None:
    v2 = EXT[:-1] + "2"
    x = run(with_headers([v2], [v2])).exchange
    assert x["converse_requested"] is False
    assert [a for a in x["anomalies"] if a.startswith("extension_")] == [
        f"extension_other_version:extensions_requested:{v2}",
        f"extension_other_version:extensions_echoed:{v2}",
    ]


def test_the_exact_uri_in_lists_repeated_headers_and_spacing_activates_without_a_note() -> None:
    x = run(
        with_headers(["https://x.test/a ,  " + EXT + " , ", "https://y.test/b"], [f"https://x.test/a,{EXT}"])
    ).exchange
    assert (x["converse_requested"], x["converse_echoed"]) == (True, True)
    assert x["extensions_requested"] == ["https://x.test/a", EXT, "https://y.test/b"]
    assert x["anomalies"] == []


def test_an_echo_of_a_variant_is_named_and_is_no_echo() -> None:
    x = run(with_headers([EXT], [EXT + "/"])).exchange
    assert (x["converse_requested"], x["converse_echoed"]) == (True, False)
    assert x["anomalies"] == [f"extension_uri_variant:extensions_echoed:{EXT}/"]


# -- the card's declaration ----------------------------------------------------------------------------------------


def test_a_card_declaring_a_near_miss_is_not_declared_and_says_so() -> None:
    notes: list[str] = []
    odd = {**SPEC_CARD_EXTENSION, "uri": EXT + "/"}
    assert card_fields(card_with(odd), notes)["converse_declared"] is False
    assert notes == [f"extension_uri_variant:card:{EXT}/"]
    notes = []
    assert card_fields(card_with({"uri": "https://other.test/ext"}), notes)["converse_declared"] is False
    assert notes == []  # (another extension altogether: nothing to say)


def test_a_card_declaring_the_extension_twice_reads_the_first_and_says_so() -> None:
    notes: list[str] = []
    second = {"uri": EXT, "required": True}
    fields = card_fields(card_with(SPEC_CARD_EXTENSION, second), notes)
    assert (fields["converse_required"], fields["mcp_url"] is not None) == (False, True)
    assert notes == ["card_converse_declared_more_than_once:2"]


def test_tools_the_spec_describes_are_checked_each_oddity_once() -> None:
    """`tools`: "Empty when none is exposed" (so present); `toolName` matches a skill; `inputSchema` an object
    schema built from the routine's slots; one entry per routine. A tool without a name was
    `card_tool_without_skill:None`."""
    params = json.loads(json.dumps(SPEC_CARD_EXTENSION["params"]))
    params["tools"] += [
        {"description": "nameless", "inputSchema": {"type": "object"}},
        {"toolName": "book_table", "inputSchema": {"type": "object"}},
        {"toolName": "cancel", "inputSchema": {"type": "string"}},
        {"toolName": "move"},
        {"toolName": "drop"},
    ]
    skills = [{"id": n} for n in ("book_table", "cancel", "move", "drop")]
    notes: list[str] = []
    fields = card_fields(card_with({"uri": EXT, "params": params}, skills=skills), notes)
    assert [t["tool_name"] for t in fields["tools"]] == ["book_table", None, "book_table", "cancel", "move", "drop"]
    assert (fields["tools_match_skills"], fields["unmatched_tools"]) == (False, [])
    assert notes == [
        "missing:params.tools[].toolName",
        "card_tool_listed_twice:book_table",
        "card_tool_schema_type:cancel=string",
        "card_tool_schema_missing:move",
    ]
    notes = []
    del params["tools"]
    fields = card_fields(card_with({"uri": EXT, "params": params}), notes)
    assert (fields["tools"], notes) == ([], ["card_converse_tools_missing"])


# -- the envelope's fields -----------------------------------------------------------------------------------------


def flat(env: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    notes: list[str] = []
    return flatten_envelope(env, notes), notes


def test_a_reply_without_author_is_named_unless_the_turn_was_suppressed() -> None:
    """`author` is `agent` or `human` for every reply; a suppressed turn (the agent generated nothing) has none
    (metrics.md's example counts one such)."""
    no_author = {k: v for k, v in envelope().items() if k != "author"}
    out, notes = flat(no_author)
    assert (out["author"], notes) == (None, ["missing:author"])
    out, notes = flat({**no_author, "author": None})
    assert notes == ["missing:author"]
    out, notes = flat({**no_author, "ownership": {"state": "human_owned", "suppressed": True}})
    assert (out["author"], out["ownership_suppressed"], notes) == (None, True, [])
    out, notes = flat(envelope(author={"kind": "human"}))
    assert (out["author"], notes) == (None, ["wrong_type:author=dict"])  # (said once, as its type)


def test_suppressed_under_ai_ownership_is_kept_and_named() -> None:
    """The spec: "suppressed is true when a person owns the conversation"."""
    out, notes = flat(envelope(ownership={"state": "ai_owned", "suppressed": True}))
    assert (out["ownership_state"], out["ownership_suppressed"]) == ("ai_owned", True)
    assert notes == ["suppressed_not_human_owned:ai_owned"]
    out, notes = flat(envelope(ownership={"suppressed": False}))
    assert (out["ownership_state"], notes) == (None, ["missing:ownership.state"])


def test_a_verdict_beside_not_recorded_is_kept_and_named() -> None:
    """The spec: "not_recorded means no assessment ran for that turn"."""
    cov = {"availability": "not_recorded", "coverage": "answered", "reason": "sufficient_evidence"}
    out, notes = flat(envelope(answerCoverage=cov))
    assert (out["coverage_availability"], out["coverage"]) == ("not_recorded", "answered")
    assert notes == ["coverage_without_assessment:not_recorded"]
    out, notes = flat(envelope(answerCoverage={"availability": "not_recorded"}))
    assert notes == []


def test_routine_and_invocation_without_their_required_members_are_named() -> None:
    out, notes = flat(envelope(routine={"name": "Book", "pendingInput": []}, invocation={"toolName": "book"}))
    assert (out["routine_name"], out["routine_status"], out["invocation_outcome"]) == ("Book", None, None)
    assert notes == ["missing:routine.status", "missing:invocation.outcome"]
    out, notes = flat(envelope(invocation={"outcome": "unknown_tool"}))
    assert (out["invocation_outcome"], notes) == ("unknown_tool", ["missing:invocation.toolName"])


def test_odd_slots_and_citations_are_said_once_per_list() -> None:
    slots = [{"type": "string", "required": "yes"}] * 3 + [{"key": "date", "required": "true"}]
    routine = {"name": "Book", "status": "waiting_for_input", "pendingInput": slots}
    cites = [{"chunkId": "c", "title": "t"}] * 3 + [{"documentId": "d"}]
    out, notes = flat(envelope(routine=routine, citations=cites))
    assert (out["pending_required_open"], [s["key"] for s in out["pending_input"]]) == (1, [None] * 3 + ["date"])
    assert out["citation_count"] == 4
    assert notes == [
        "wrong_type:routine.pendingInput[].required=str",
        "missing:routine.pendingInput[].key",
        "missing:citations[].documentId",
    ]


# -- roles ---------------------------------------------------------------------------------------------------------


def test_a_message_without_role_is_named_and_counts_as_no_reply() -> None:
    msg = agent_message()
    del msg["role"]
    out = run(a2a_flow(response=jsonrpc_result({"message": msg})))
    row = reply_row(out)
    assert (row["role"], row["has_envelope"], row["anomalies"]) == (None, True, ["missing:role"])
    assert out.exchange["replies"] == 0


@pytest.mark.parametrize("role", ["ROLE_USER", "user", 1])
def test_an_envelope_on_a_user_message_is_named(role: Any) -> None:
    """Human and agent replies "both arrive as ROLE_AGENT": the envelope on a user's message is no reply."""
    out = run(a2a_flow(response=jsonrpc_result({"message": agent_message(role=role)})))
    row = reply_row(out)
    assert (row["role"], row["author"], row["anomalies"]) == ("user", "agent", ["envelope_on_user_message"])
    assert out.exchange["replies"] == 0


# -- v0.3 proto names ----------------------------------------------------------------------------------------------


def test_a_v03_rest_reply_under_its_proto_field_name_msg_is_read() -> None:
    """v0.3 `SendMessageResponse` is `oneof payload {Task task; Message msg [json_name = "message"]}`: a printer
    keeping proto names writes `msg`, which ProtoJSON parsers take; the reply was lost without a word."""
    body = json.dumps({"message": {"messageId": "u", "role": "ROLE_USER", "content": [{"text": "hi"}]}}).encode()
    flow = a2a_flow(
        path="/a2a/rest/v1/message:send",
        headers={"a2a-version": "0.3"},
        body=body,
        response=json.dumps({"msg": agent_message()}).encode(),
    )
    out = run(flow)
    row = reply_row(out)
    assert (out.exchange["dialect"], row["location"], row["role"], row["coverage"]) == (
        "v0.3",
        "body.msg",
        "agent",
        "answered",
    )
    assert out.exchange["replies"] == 1


# -- SSE from other servers ----------------------------------------------------------------------------------------


def test_a_last_event_without_its_blank_line_is_kept_and_named() -> None:
    """The SSE standard (and the a2a-sdk's client) drop an event the stream ended before its blank line: its
    client may never have read it. It is recorded, and named."""
    done = json.dumps(status_event("TASK_STATE_COMPLETED", agent_message()))
    working = json.dumps(status_event("TASK_STATE_WORKING"))
    for ending, expected in (
        ("\r\n\r\n", []),
        ("\r\n", ["sse_event_unterminated:1"]),
        ("", ["sse_event_unterminated:1"]),
    ):
        body = f"data: {working}\r\n\r\ndata: {done}{ending}".encode()
        flow = a2a_flow(body=jsonrpc_request("SendStreamingMessage"), response=body, content_type="text/event-stream")
        out = run(flow)
        assert (out.exchange["sse_events"], out.exchange["task_state"], out.exchange["replies"]) == (
            2,
            "TASK_STATE_COMPLETED",
            1,
        )
        assert out.exchange["anomalies"] == expected, ending
    events, _ = parse_sse(b"data: 1\r\rdata: 2\r")
    assert [(e.data, e.unterminated) for e in events] == [("1", False), ("2", True)]
    events, _ = parse_sse(b"data: 1\n\ndata: 2", ended=False)  # (a stream cut by an error: kept back)
    assert [e.data for e in events] == ["1"]


def stream(*docs: Any, named_error: bool = False) -> Extraction:
    body = b""
    for d in docs:
        head = "event: error\r\n" if named_error and "error" in d else ""
        body += f"{head}data: {json.dumps(d)}\r\n\r\n".encode()
    flow = a2a_flow(body=jsonrpc_request("SendStreamingMessage"), response=body, content_type="text/event-stream")
    return run(flow)


ERROR = {"jsonrpc": "2.0", "id": "r-1", "error": {"code": -32603, "message": "boom"}}


@pytest.mark.parametrize("named", [True, False])
def test_events_after_the_streams_last_are_recorded_and_named_once(named: bool) -> None:
    """A stream ends with its final event (an error, a terminal state, `final: true`, a Message); a client stops
    reading there, so what an agent sends after it is recorded and named, once. An error event ends the stream
    whether or not it is named `event: error`."""
    working, done = status_event("TASK_STATE_WORKING"), status_event("TASK_STATE_COMPLETED", agent_message())
    out = stream(working, ERROR, done, working, named_error=named)
    x = out.exchange
    # (`task_state` is the last state seen, as schema.md says: the late event's)
    assert (x["error_code"], x["task_state"], x["sse_events"], x["replies"]) == (-32603, "TASK_STATE_WORKING", 4, 1)
    assert x["anomalies"] == ["sse_event_after_final:2"]
    assert stream(working, done, working).exchange["anomalies"] == ["sse_event_after_final:2"]
    v03_final = {"jsonrpc": "2.0", "id": "r-1", "result": {"kind": "status-update", "taskId": "t", "final": True}}
    v03_final["result"]["status"] = {"state": "working"}
    assert stream(v03_final, working).exchange["anomalies"] == ["sse_event_after_final:1"]
    message = {"jsonrpc": "2.0", "id": "r-1", "result": {"message": agent_message()}}
    assert stream(message, working).exchange["anomalies"] == ["sse_event_after_final:1"]


def test_a_stream_resumed_past_an_interrupted_state_is_no_oddity() -> None:
    """`input-required` and `auth-required` interrupt a task without ending it: a subscription may see it go on."""
    asked = status_event("TASK_STATE_INPUT_REQUIRED", agent_message("m-q"))
    done = status_event("TASK_STATE_COMPLETED", agent_message("m-a"))
    out = stream(status_event("TASK_STATE_WORKING"), asked, status_event("TASK_STATE_WORKING"), done)
    assert (out.exchange["anomalies"], out.exchange["task_state"]) == ([], "TASK_STATE_COMPLETED")
    assert stream(status_event("TASK_STATE_WORKING"), done).exchange["anomalies"] == []


def test_envelope_fields_under_other_spellings_are_named_not_read() -> None:
    """A serialiser that writes `answer_coverage` or `Ownership` lost those fields without a word: they are
    named (not read: the spec spells them in lowerCamelCase); other extra members are left alone."""
    env = {"author": "agent", "answer_coverage": {"availability": "assessed", "coverage": "answered"}}
    out, notes = flat({**env, "Ownership": {"state": "ai_owned"}, "extra": 1, "citations": []})
    assert (out["coverage"], out["ownership_state"]) == (None, None)
    assert notes == ["envelope_field_variant:answer_coverage", "envelope_field_variant:Ownership"]
    out, notes = flat({"author": "agent", "ownership": {"state": "ai_owned", "suppressed": False}, "extra": 1})
    assert notes == []  # (no answerCoverage, as the JS test agent sends a plain reply: no oddity)
