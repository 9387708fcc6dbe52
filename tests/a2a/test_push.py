"""Push notifications: an agent's POST of a task's update to a client's webhook, recorded as the objects it carries."""

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mitmproxy import http

from converse_tap.a2a.classify import classify
from converse_tap.a2a.constants import PUSH_AGENT, PUSH_BINDING, PUSH_METHOD
from converse_tap.a2a.extract import Extraction, extract
from converse_tap.a2a.headers import Headers
from converse_tap.a2a.push import may_be_push, strict_shape
from converse_tap.a2a.redact import TextPolicy
from converse_tap.addon.flows import exchange_from_flow
from tests.factories import EXT, a2a_flow, agent_message

TOKEN = "tok-3f9a1c7e5b2d4f60a8c1"
KEYS = ["task", "message", "statusUpdate", "kind", "id", "taskId", "status", "state", "messageId", "role", "parts"]
KEYS += ["history", "artifact", "artifactId", "contextId", "metadata"]
AUTH = "Bearer sk-live-push-5e1d2c3b4a596877"


def delivery(
    doc: Any, headers: dict[str, str] | None = None, *, raw: bytes | None = None, status: int = 200
) -> http.HTTPFlow:
    """A POST of `doc` to the client's webhook, as an agent's push sender makes it: no A2A headers of its own."""
    body = raw if raw is not None else json.dumps(doc).encode()
    f = a2a_flow(path="/hooks/a2a", body=body, headers=headers, extensions=False, status=status, response=b"")
    if "a2a-version" not in {k.lower() for k in headers or {}}:
        del f.request.headers["a2a-version"]
    f.request.host = "client.test"
    return f


def run(flow: http.HTTPFlow) -> Extraction | None:
    return extract(exchange_from_flow(flow), TextPolicy())


def recorded(flow: http.HTTPFlow) -> Extraction:
    out = run(flow)
    assert out is not None
    return out


def status_update(message: dict[str, Any] | None, state: str = "TASK_STATE_COMPLETED") -> dict[str, Any]:
    status: dict[str, Any] = {"state": state}
    if message is not None:
        status["message"] = message
    return {"taskId": "t-1", "contextId": "ctx-1", "status": status}


def test_v1_status_update_with_token_is_a_push_with_its_reply_and_envelope() -> None:
    out = recorded(delivery({"statusUpdate": status_update(agent_message("m-1"))}, {"X-A2A-Notification-Token": TOKEN}))
    ex = out.exchange
    assert (ex["binding"], ex["method"], ex["method_raw"], ex["dialect"]) == (
        PUSH_BINDING,
        PUSH_METHOD,
        PUSH_METHOD,
        "v1.0",
    )
    assert (ex["agent"], ex["agent_id"], ex["agent_url"]) == (PUSH_AGENT, None, "http://client.test:9000/hooks/a2a")
    assert (ex["task_id"], ex["context_id"], ex["task_state"]) == ("t-1", "ctx-1", "TASK_STATE_COMPLETED")
    assert (ex["messages"], ex["replies"], ex["anomalies"], ex["complete"]) == (1, 1, [], True)
    (m,) = out.messages
    assert (m["direction"], m["event_kind"], m["location"], m["role"], m["agent"]) == (
        "response",
        "statusUpdate",
        "push.statusUpdate.status.message",
        "agent",
        PUSH_AGENT,
    )
    assert (m["message_id"], m["task_id"], m["has_envelope"], m["coverage"], m["ts"]) == (
        "m-1",
        "t-1",
        True,
        "answered",
        ex["ts_start"],
    )


def test_the_same_object_reads_alike_in_a_push_and_in_a_stream_event() -> None:
    """The delivery's message row is the row a stream event of the same statusUpdate gives (but for where it was
    seen and what carried it)."""
    update = status_update(agent_message("m-1"))
    pushed = recorded(delivery({"statusUpdate": update})).messages[0]
    event = json.dumps({"jsonrpc": "2.0", "id": "r-1", "result": {"statusUpdate": update}})
    stream = a2a_flow(
        body=json.dumps({"jsonrpc": "2.0", "id": "r-1", "method": "SendStreamingMessage", "params": {}}).encode(),
        response=f"data: {event}\n\n".encode(),
        content_type="text/event-stream",
    )
    streamed = next(m for m in recorded(stream).messages if m["direction"] == "response")
    differ = {"exchange_id", "ts", "location", "event_index", "agent", "agent_url", "agent_id", "binding", "method"}
    assert {k: v for k, v in pushed.items() if k not in differ} == {
        k: v for k, v in streamed.items() if k not in differ
    }


@pytest.mark.parametrize(
    ("doc", "kinds"),
    [
        (
            {
                "task": {
                    "id": "t-1",
                    "contextId": "ctx-1",
                    "status": {"state": "TASK_STATE_COMPLETED", "message": agent_message("m-s")},
                    "history": [agent_message("m-h", env=None)],
                    "artifacts": [{"artifactId": "a-1", "name": "out", "parts": [{"text": "x"}]}],
                }
            },
            [
                ("push.task.history[0]", "message"),
                ("push.task.artifacts[0]", "artifact"),
                ("push.task.status.message", "message"),
            ],
        ),
        ({"message": agent_message("m-1", taskId="t-1")}, [("push.message", "message")]),
        (
            {"artifactUpdate": {"taskId": "t-1", "contextId": "ctx-1", "artifact": {"artifactId": "a-1", "parts": []}}},
            [("push.artifactUpdate.artifact", "artifact")],
        ),
    ],
)
def test_v1_stream_responses_of_each_kind(doc: dict[str, Any], kinds: list[tuple[str, str]]) -> None:
    out = recorded(delivery(doc))
    assert [(m["location"], m["object_kind"]) for m in out.messages] == kinds
    assert out.exchange["task_id"] == "t-1" and out.exchange["dialect"] == "v1.0"
    assert out.exchange["anomalies"] == []
    assert all(m["direction"] == "response" and m["task_id"] == "t-1" for m in out.messages)


def test_v03_task_body_as_the_sdk_and_js_senders_post_it() -> None:
    task = {
        "kind": "task",
        "id": "t-3",
        "contextId": "ctx-3",
        "status": {"state": "completed", "message": agent_message("m-3", v03=True)},
        "history": [],
    }
    out = recorded(delivery(task))
    ex = out.exchange
    assert (ex["method"], ex["dialect"], ex["task_id"], ex["task_state"], ex["replies"]) == (
        PUSH_METHOD,
        "v0.3",
        "t-3",
        "TASK_STATE_COMPLETED",
        1,
    )
    assert [m["location"] for m in out.messages] == ["push.status.message"]


def test_v03_status_update_event() -> None:
    event = {"kind": "status-update", "final": True, **status_update(agent_message("m-4", v03=True), "completed")}
    out = recorded(delivery(event))
    assert (out.exchange["dialect"], out.messages[0]["event_kind"]) == ("v0.3", "statusUpdate")


def test_the_a2a_version_header_names_the_dialect() -> None:
    out = recorded(delivery({"message": agent_message()}, {"A2A-Version": "0.3"}))
    assert out.exchange["dialect"] == "v0.3" and out.exchange["a2a_version"] == "0.3"


@pytest.mark.parametrize(
    "doc",
    [
        {"event": "push", "repository": {"id": 1}},  # another service's webhook
        {"message": "deployed", "status": "ok"},  # a `message` that is no A2A Message
        {"message": {"text": "hello"}},  # no messageId, role or parts
        {"task": {"id": "t-1", "status": "done"}},  # a status that is no TaskStatus
        {"task": {"id": "t-1", "status": {"state": "finished"}}},  # no task state by that name
        {"statusUpdate": status_update(None), "extra": 1},  # a StreamResponse holds one member
        {"kind": "task", "id": "t-1", "status": {"state": "completed"}},  # v0.3 requires contextId
        {"kind": "message", "messageId": "m", "role": "bot", "parts": []},
        {"kind": "note", "id": "x"},
        {"message": {"messageId": "m", "role": True, "parts": []}},  # a boolean is no role
        {"artifactUpdate": {"taskId": "t-1", "artifact": {"name": "no id"}}},
        [{"statusUpdate": status_update(None)}],  # a list
    ],
)
def test_json_webhooks_of_other_shapes_are_not_a2a(doc: Any) -> None:
    assert run(delivery(doc)) is None


def test_a_non_a2a_post_is_still_none() -> None:
    assert run(delivery(None, raw=b"hello=world&kind=task")) is None
    assert run(delivery(None, raw=b'{"kind": "task"')) is None  # not JSON, and no token: nothing says A2A
    assert run(delivery({"kind": 3, "id": "x"})) is None


def test_a2a_headers_and_a_body_naming_an_a2a_object_is_a_push() -> None:
    f = delivery({"statusUpdate": {"taskId": "t-1"}}, {"A2A-Version": "1.0"})  # not strict: no status
    out = recorded(f)
    assert out.exchange["method"] == PUSH_METHOD and out.messages == []
    later = delivery({"id": 1, "message": agent_message()}, {"A2A-Extensions": EXT})  # (the member not first)
    assert recorded(later).exchange["replies"] == 1
    assert run(delivery({"event": "deployed"}, {"A2A-Version": "1.0"})) is None


@pytest.mark.parametrize(
    ("raw", "anomaly"),
    [
        (b'{"statusUpdate": ', "request_not_parsed:invalid_json:"),
        (b"", "request_not_parsed:empty"),
        (b'{"hello": "world"}', "push_body_not_a2a"),
        (b"[1, 2]", "result_not_object:push"),
        (b'"text"', "result_not_object:push"),
        (b'{"task": {"id": 7, "status": {"state": []}, "history": {"a": 1}}}', "wrong_type:"),
    ],
)
def test_a_token_makes_any_body_a_push_its_oddities_anomalies(raw: bytes, anomaly: str) -> None:
    out = recorded(delivery(None, {"X-A2A-Notification-Token": TOKEN}, raw=raw))
    assert out.exchange["method"] == PUSH_METHOD
    assert any(a.startswith(anomaly) for a in out.exchange["anomalies"]), out.exchange["anomalies"]


def test_hostile_typed_fields_are_anomalies_not_exceptions() -> None:
    doc = {
        "task": {
            "id": "t-1",
            "contextId": "ctx-1",
            "status": {"state": "TASK_STATE_WORKING", "message": {"messageId": ["x"], "role": 9, "parts": "p"}},
            "history": [None, 3, {"messageId": "m-h", "role": "ROLE_AGENT", "parts": [{"text": 5}]}],
            "artifacts": "none",
        }
    }
    out = recorded(delivery(doc, {"X-A2A-Notification-Token": TOKEN}))
    found = [a for m in out.messages for a in m["anomalies"]] + out.exchange["anomalies"]
    assert "wrong_type:push.task.artifacts=str" in found
    assert "unknown_enum:message.role=9" in found and "wrong_type:parts=str" in found
    assert len(out.messages) == 2


def test_the_webhooks_refusal_is_the_exchanges_error() -> None:
    out = recorded(delivery({"message": agent_message()}, status=401))
    assert (out.exchange["status_code"], out.exchange["error_code"], out.exchange["replies"]) == (401, 401, 1)


def test_token_and_authorization_never_reach_a_row() -> None:
    f = delivery({"statusUpdate": status_update(agent_message())}, {"X-A2A-Notification-Token": TOKEN})
    f.request.headers["Authorization"] = AUTH
    out = recorded(f)
    stored = json.dumps([out.exchange, *out.messages, *out.agent_cards], default=str)
    assert TOKEN not in stored and "sk-live-push" not in stored


def test_a_webhook_url_with_a_secret_is_redacted() -> None:
    f = delivery({"message": agent_message()})
    f.request.path = "/hooks/a2a?token=" + TOKEN
    out = recorded(f)
    assert TOKEN not in json.dumps([out.exchange, *out.messages])


def test_requests_to_agents_are_classified_as_before() -> None:
    """A call to an A2A route is never taken for a delivery, whatever it carries."""
    f = a2a_flow(path="/a2a/v1/message:send", body=json.dumps({"message": agent_message()}).encode())
    f.request.headers["X-A2A-Notification-Token"] = TOKEN
    assert recorded(f).exchange["method"] == "SendMessage"


def test_strict_shape_and_the_first_look_agree() -> None:
    body = json.dumps({"artifactUpdate": {"taskId": "t", "artifact": {"artifactId": "a"}}}).encode()
    assert strict_shape(json.loads(body)) == "v1.0" and may_be_push(Headers(), body)
    v03 = json.dumps({"id": "t", "contextId": "c", "status": {"state": "working"}, "kind": "task"}).encode()
    assert strict_shape(json.loads(v03)) == "v0.3" and may_be_push(Headers(), v03)
    assert not may_be_push(Headers(), b'{"event": "push"}')
    assert may_be_push(Headers([("X-A2A-Notification-Token", "t")]), None)


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=8),
        lambda children: (
            st.lists(children, max_size=3)
            | st.dictionaries(
                st.sampled_from(KEYS),
                children,
                max_size=4,
            )
        ),
        max_leaves=12,
    )
)
def test_any_json_body_with_a_token_is_recorded_never_raises(doc: Any) -> None:
    out = recorded(delivery(doc, {"X-A2A-Notification-Token": "t"}))
    assert out.exchange["method"] == PUSH_METHOD
    unsigned = run(delivery(doc))
    assert unsigned is None or strict_shape(doc) is not None


def test_classify_takes_a_delivery_only_where_it_would_give_up() -> None:
    body = json.dumps({"message": agent_message()}).encode()
    req = classify("POST", "http://client.test/hook", Headers([("content-type", "application/json")]), body)
    assert req is not None and (req.binding, req.method, req.agent_url) == (
        PUSH_BINDING,
        PUSH_METHOD,
        "http://client.test/hook",
    )
    assert classify("GET", "http://client.test/hook", Headers(), body) is None


def test_envelope_in_a_pushed_reply_is_read_with_its_extensions() -> None:
    out = recorded(delivery({"message": agent_message("m-9")}))
    (m,) = out.messages
    assert m["extensions"] == [EXT] and m["has_envelope"] and m["author"] == "agent"


@pytest.mark.parametrize(
    ("headers", "body", "sent_on"),
    [
        ({"X-A2A-Notification-Token": "t"}, b"{}", True),
        ({}, json.dumps({"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "x"}}}).encode(), True),
        ({}, b'{"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "web"}}', False),
        ({}, b'{"event": "push", "repository": {"name": "x"}}', False),
    ],
)
def test_the_proxys_first_look_sends_push_deliveries_on(headers: dict[str, str], body: bytes, sent_on: bool) -> None:
    """A webhook POST reaches the recording worker only if the first look on the event loop lets it through."""
    from converse_tap.a2a.firstlook import maybe_a2a

    hdrs = Headers([("content-type", "application/json"), *headers.items()])
    assert maybe_a2a("POST", "/hooks/a2a", hdrs, body) is sent_on
