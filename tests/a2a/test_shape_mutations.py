"""Well-formed JSON of the wrong shape, anywhere: the spec's own Agent Card and reply, with any one node (or a few)
replaced by any JSON value, through the extractor's real entry. Nothing raises (the worker's safety net, which
turns an exception into a failure row, loses the card or the reply), every stored list holds what its column
says, and a value of the wrong type costs only itself. Deterministic (`derandomize=True`)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converse_tap.a2a.constants import TASK_STATE_NUMBERS
from converse_tap.a2a.extract import extract
from converse_tap.a2a.redact import TextPolicy
from converse_tap.addon.flows import exchange_from_flow
from converse_tap.store.batches import TS_COLUMNS, to_micros
from converse_tap.store.schema import TABLES
from tests.factories import EXT, a2a_flow, jsonrpc_request, jsonrpc_result, sse_body

# the Agent Card and the reply of the extension's spec (v1.0 shapes), with a v0.3 card's fields beside them
TOOL = ("capabilities", "extensions", 0, "params", "tools", 0)
CARD: dict[str, Any] = {
    "name": "Returns desk",
    "version": "1.0.0",
    "description": "d",
    "protocolVersion": "0.3",
    "url": "https://agent.test/a2a",
    "preferredTransport": "JSONRPC",
    "additionalInterfaces": [{"url": "https://agent.test/a2a/rest", "transport": "HTTP+JSON"}],
    "supportedInterfaces": [{"url": "https://agent.test/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
    "skills": [{"id": "book_table", "name": "Book"}],
    "capabilities": {
        "streaming": True,
        "extensions": [
            {
                "uri": EXT,
                "required": False,
                "params": {
                    "mcp": {"url": "https://mcp.test/mcp/a/x", "serverCardUrl": "https://mcp.test/mcp/a/x/server-card"},
                    "tools": [
                        {
                            "toolName": "book_table",
                            "description": "Book a table.",
                            "inputSchema": {
                                "type": "object",
                                "properties": {"date": {"type": "string"}, "partySize": {"type": "integer"}},
                                "required": ["date", "partySize"],
                            },
                        }
                    ],
                },
            }
        ],
    },
}

ENVELOPE: dict[str, Any] = {
    "author": "agent",
    "answerCoverage": {
        "availability": "assessed",
        "coverage": "answered",
        "reason": "sufficient_evidence",
        "originatingTurnId": "t1",
        "originatingRequestId": "q1",
    },
    "ownership": {"state": "ai_owned", "suppressed": False},
    "routine": {
        "toolName": "book_table",
        "name": "Book a table",
        "status": "waiting_for_input",
        "pendingInput": [{"key": "date", "type": "string", "required": True, "description": "When"}],
    },
    "invocation": {"toolName": "book_table", "outcome": "started"},
    "citations": [{"documentId": "d1", "chunkId": "c1", "title": "Returns policy", "sourceUrl": "https://kb.test/r"}],
}

REPLY: dict[str, Any] = {
    "id": "task-1",
    "contextId": "ctx-1",
    "status": {
        "state": "TASK_STATE_INPUT_REQUIRED",
        "message": {
            "messageId": "m-2",
            "contextId": "ctx-1",
            "role": "ROLE_AGENT",
            "parts": [{"text": "For which date?"}],
            "extensions": [EXT],
            "metadata": {EXT: ENVELOPE},
        },
    },
    "artifacts": [{"artifactId": "a1", "parts": [{"text": "x"}], "metadata": {EXT: ENVELOPE}}],
    "history": [{"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "Book"}]}],
}

_ANY_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


def _paths(node: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every node's path (keys and indices), the root's `()` included."""
    found = [at]
    if isinstance(node, dict):
        for k, v in node.items():
            found += _paths(v, (*at, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            found += _paths(v, (*at, i))
    return found


def _replaced(doc: Any, changes: list[tuple[tuple[Any, ...], Any]]) -> Any:
    out = copy.deepcopy(doc)
    for path, value in changes:
        if not path:
            return value
        node = out
        try:
            for step in path[:-1]:
                node = node[step]
            node[path[-1]] = value
        except (KeyError, IndexError, TypeError):  # an earlier change replaced this path's parent
            continue
    return out


def _mutations(doc: Any) -> st.SearchStrategy[Any]:
    paths = _paths(doc)
    change = st.tuples(st.sampled_from(paths), _ANY_JSON)
    return st.lists(change, min_size=1, max_size=3).map(lambda changes: _replaced(doc, changes))


# one value of each JSON type, and the shapes a list or an object of the wrong kind takes
WRONG: list[Any] = [None, True, 0, 5, -1, 1.5, 2**64, "", "x", [], [5], ["x"], [None], {}, {"k": 5}, [{}], [[]]]


def _every_single_change(doc: Any) -> list[Any]:
    """The document with each of its nodes replaced by each value of WRONG, one node at a time."""
    return [_replaced(doc, [(path, value)]) for path in _paths(doc) for value in WRONG]


def _fits_the_store(ext: Any) -> None:
    """Every row converts to its table's Arrow schema as the extractor made it (the writer's mending of a value
    of the wrong type is a last resort, which costs the value)."""
    for table, rows in (("exchanges", [ext.exchange]), ("messages", ext.messages), ("agent_cards", ext.agent_cards)):
        copies = [dict(r) for r in rows]
        to_micros(copies, TS_COLUMNS[table])
        pa.RecordBatch.from_pylist(copies, schema=TABLES[table])


def _strings_or_none(values: Any) -> bool:
    return all(v is None or isinstance(v, str) for v in values)


def _card_extraction(card: Any) -> Any:
    body = json.dumps(card).encode()
    flow = a2a_flow(method="GET", path="/.well-known/agent-card.json", response=body)
    return extract(exchange_from_flow(flow), TextPolicy())


def _check_card(card: Any) -> None:
    ext = _card_extraction(card)
    assert ext is not None
    assert not any(a.startswith("extraction_failed") for a in ext.exchange["anomalies"])
    assert len(ext.agent_cards) == 1
    row = ext.agent_cards[0]
    for column in ("skill_ids", "unmatched_tools", "anomalies"):
        assert isinstance(row[column], list) and all(isinstance(v, str) for v in row[column]), column
    for tool in row["tools"]:
        assert _strings_or_none([tool["tool_name"], tool["description"], tool["input_schema_json"]])
        assert all(isinstance(f, str) for f in tool["required_fields"]), tool
    for itf in row["interfaces"]:
        assert _strings_or_none(itf.values()), itf
    assert _strings_or_none([row["name"], row["version"], row["mcp_url"], row["mcp_server_card_url"]])
    _fits_the_store(ext)


def _reply_extraction(task: Any) -> Any:
    request = {"message": {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "Book"}]}}
    flow = a2a_flow(
        body=jsonrpc_request("SendMessage", request),
        response=jsonrpc_result(task),
        response_headers={"a2a-extensions": EXT},
    )
    return extract(exchange_from_flow(flow), TextPolicy())


def _check_reply(task: Any) -> None:
    ext = _reply_extraction(task)
    assert ext is not None
    assert not any(a.startswith("extraction_failed") for a in ext.exchange["anomalies"])
    for m in ext.messages:
        for column, value in m.items():
            if isinstance(value, list) and column != "citations" and column != "pending_input":
                assert all(isinstance(v, str) for v in value), (column, value)
        for c in m.get("citations") or []:
            assert _strings_or_none(c.values()), c
        for slot in m.get("pending_input") or []:
            assert isinstance(slot, dict), slot
    _fits_the_store(ext)


def test_every_node_of_a_card_may_have_any_type() -> None:
    for card in _every_single_change(CARD):
        _check_card(card)


def test_every_node_of_a_reply_may_have_any_type() -> None:
    for task in _every_single_change(REPLY):
        _check_reply(task)


# what no column reads (a skill's name, the streaming flag, a request's configuration and metadata, an error's
# free-form data) or is the operator's JSON Schema, stored whole
NOT_READ = [("skills", 0, "name"), ("capabilities", "streaming"), (*TOOL, "inputSchema", "type")]
NOT_READ += [(*TOOL, "inputSchema", "properties"), ("params", "configuration"), ("params", "metadata")]
NOT_READ += [("error", "data"), ("params", "message", "kind"), ("result", "status", "message", "kind")]
# (a REST error's `status` may be its HTTP status number; its details beside the ErrorInfo's reason are not read;
# a task list's paging fields are not stored)
NOT_READ += [("error", "status"), ("error", "details"), ("nextPageToken",), ("pageSize",), ("totalSize",)]

REST_ERROR: dict[str, Any] = {
    "error": {
        "code": 404,
        "status": "NOT_FOUND",
        "message": "Task not found",
        "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "TASK_NOT_FOUND"}],
    }
}
TASK_LIST: dict[str, Any] = {"tasks": [REPLY], "nextPageToken": "", "pageSize": 1, "totalSize": 1}


def _rest_get(path: str, status: int) -> Any:
    def run(doc: Any) -> Any:
        flow = a2a_flow(method="GET", path=path, body=b"", response=json.dumps(doc).encode(), status=status)
        return extract(exchange_from_flow(flow), TextPolicy())

    return run


REQUEST: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": "r-1",
    "method": "SendMessage",
    "params": {
        "message": {
            "messageId": "m-1",
            "contextId": "ctx-1",
            "taskId": "task-1",
            "role": "ROLE_USER",
            "parts": [{"text": "Book"}],
            "extensions": [EXT],
        },
        "configuration": {"acceptedOutputModes": ["text/plain"], "historyLength": 5},
        "metadata": {},
    },
}
RESPONSE: dict[str, Any] = {"jsonrpc": "2.0", "id": "r-1", "result": {"task": REPLY}}
ERROR: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": "r-1",
    "error": {"code": -32001, "message": "Task not found", "data": [{"reason": "TASK_NOT_FOUND"}]},
}


def _exchange(request: Any, response: Any) -> Any:
    flow = a2a_flow(
        body=json.dumps(request).encode(),
        response=json.dumps(response).encode(),
        response_headers={"a2a-extensions": EXT},
    )
    return extract(exchange_from_flow(flow), TextPolicy())


# v0.3: `kind` discriminators, lower-case states and roles; a stream's status and artifact events
V03_REQUEST: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "message/stream",
    "params": {
        "message": {"kind": "message", "messageId": "m-1", "role": "user", "parts": [{"kind": "text", "text": "Hi"}]}
    },
}
V03_MESSAGE: dict[str, Any] = {
    "kind": "message",
    "messageId": "m-3",
    "role": "agent",
    "parts": [{"kind": "text", "text": "Done"}],
    "extensions": [EXT],
    "metadata": {EXT: {"author": "agent", "ownership": {"state": "ai_owned", "suppressed": False}}},
}
V03_STATUS_EVENT: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "result": {
        "kind": "status-update",
        "taskId": "task-1",
        "contextId": "ctx-1",
        "final": True,
        "status": {"state": "completed", "message": V03_MESSAGE},
    },
}
V03_ARTIFACT_EVENT: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": 1,
    "result": {
        "kind": "artifact-update",
        "taskId": "task-1",
        "contextId": "ctx-1",
        "artifact": {"artifactId": "a1", "name": "n", "parts": [{"kind": "text", "text": "x"}], "extensions": [EXT]},
    },
}


def _v03_exchange(request: Any, event: Any) -> Any:
    flow = a2a_flow(
        body=json.dumps(request).encode(),
        headers={"a2a-version": "0.3"},
        response=sse_body(event),
        content_type="text/event-stream",
        response_headers={"a2a-extensions": EXT},
    )
    return extract(exchange_from_flow(flow), TextPolicy())


def _v03_stream(event: Any) -> Any:
    return _v03_exchange(V03_REQUEST, event)


def _v03_request(request: Any) -> Any:
    return _v03_exchange(request, V03_STATUS_EVENT)


def _request_extraction(request: Any) -> Any:
    return _exchange(request, RESPONSE)


def _response_extraction(response: Any) -> Any:
    return _exchange(REQUEST, response)


def _anomalies(ext: Any) -> set[str]:
    found = set(ext.exchange["anomalies"])
    for row in [*ext.messages, *ext.agent_cards]:
        found.update(row["anomalies"])
    return found


def _node(doc: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        doc = doc[step]
    return doc


MORE_IDS = ["v03-request", "v03-status-event", "v03-artifact-event", "rest-error", "rest-task-list"]


@pytest.mark.parametrize(
    ("doc", "run"),
    [
        (CARD, _card_extraction),
        (REPLY, _reply_extraction),
        (REQUEST, _request_extraction),
        (RESPONSE, _response_extraction),
        (ERROR, _response_extraction),
        (V03_REQUEST, _v03_request),
        (V03_STATUS_EVENT, _v03_stream),
        (V03_ARTIFACT_EVENT, _v03_stream),
        (REST_ERROR, _rest_get("/v1/tasks/task-1", 404)),
        (TASK_LIST, _rest_get("/v1/tasks", 200)),
    ],
    ids=["card", "reply", "jsonrpc-request", "jsonrpc-response", "jsonrpc-error", *MORE_IDS],
)
def test_a_value_of_another_type_is_said(doc: Any, run: Any) -> None:
    """Any field of the card, the reply, a JSON-RPC call or its answer that a column reads, given a value of
    another JSON type (absent, null or an empty string aside), leaves an anomaly — on an exchange still recorded:
    the value costs itself, and never silently."""
    before = _anomalies(run(doc))
    silent = []
    for path in _paths(doc):
        if not path or any(path[: len(p)] == p for p in NOT_READ):
            continue
        was = _node(doc, path)
        for value in WRONG:
            if value is None or value == "" or type(value) is type(was):
                continue
            if (
                path[-1] == "state" and type(value) is int and value in TASK_STATE_NUMBERS
            ):  # ProtoJSON writes an enum as its number too
                continue
            ext = run(_replaced(doc, [(path, value)]))
            if ext is None or not _anomalies(ext) - before:
                silent.append((path, value))
    assert not silent, silent


@settings(max_examples=300, derandomize=True)
@given(_mutations(CARD))
def test_a_card_with_a_few_nodes_of_any_value_is_recorded(card: Any) -> None:
    _check_card(card)


@settings(max_examples=300, derandomize=True)
@given(_mutations(REPLY))
def test_a_reply_with_a_few_nodes_of_any_value_is_recorded(task: Any) -> None:
    _check_reply(task)


def test_extension_uris_and_a_messages_anomalies_are_bounded() -> None:
    """A megabyte `A2A-Extensions` header of 40,000 URIs was 40,000 strings in the exchange row (and 0.3 s of
    redaction); a message listing 1,000 extensions, or with metadata of 100,000 keys of other versions of the
    extension, as many strings in its row. Past the bound the rest are counted — and the converse extension's URI
    is kept wherever it stands, so whether it was asked for stays exact."""
    from converse_tap.a2a.constants import MAX_URIS
    from converse_tap.a2a.finish import MAX_ANOMALIES

    header = ",".join(f"https://ext{i}.test/x" for i in range(40_000)) + "," + EXT
    versions = {f"{EXT[:-2]}v{i}": 1 for i in range(2, 20_000)}
    reply = {
        "messageId": "m-2",
        "role": "ROLE_AGENT",
        "parts": [{"text": "x"}],
        "metadata": versions,
        "extensions": [f"https://u{i}.test/" for i in range(1_000)] + [EXT],
    }
    flow = a2a_flow(
        headers={"a2a-extensions": header},
        response=jsonrpc_result(reply),
        response_headers={"a2a-extensions": header},
    )
    ext = extract(exchange_from_flow(flow), TextPolicy())
    assert ext is not None
    row = ext.exchange
    for column in ("extensions_requested", "extensions_echoed"):
        assert len(row[column]) == MAX_URIS + 1 and row[column][-1] == EXT
        assert f"uris_not_recorded:{column}:40001" in row["anomalies"]
    assert row["converse_requested"] is True and row["converse_echoed"] is True
    message = ext.messages[-1]
    assert len(message["extensions"]) == MAX_URIS + 1 and message["extensions"][-1] == EXT
    assert len(message["anomalies"]) <= MAX_ANOMALIES
    assert "uris_not_recorded:extensions:1001" in message["anomalies"]
    assert any(a.startswith("more_anomalies:") for a in message["anomalies"])
    _fits_the_store(ext)
