"""Bodies that are not UTF-8 and JSON-RPC ids of types JSON-RPC forbids (live hunt 3, tests/integration/
test_live_hunt3.py): one odd byte cost a reply or a call all its messages, an SSE event had its odd bytes replaced
without a word, and an id of `true` was stored as Python writes it."""

from __future__ import annotations

import json
from typing import Any

import pytest

from converse_tap.a2a.charset import declared_codec
from converse_tap.a2a.extract import Extraction, extract
from converse_tap.a2a.redact import TextPolicy
from converse_tap.a2a.sse import parse_sse
from converse_tap.addon.flows import exchange_from_flow
from tests.factories import a2a_flow, agent_message, jsonrpc_request, jsonrpc_result, status_event, user_message

CAFE = "Café ouvert"


def run(**kw: Any) -> Extraction:
    out = extract(exchange_from_flow(a2a_flow(**kw)), TextPolicy())
    assert out is not None
    return out


def _reply(charset: str) -> bytes:
    return jsonrpc_result({"message": agent_message(text=CAFE)}).replace(b"Caf\\u00e9", "Café".encode(charset))


def _replies(out: Extraction) -> list[str]:
    return [m["text"] for m in out.messages if m["direction"] == "response"]


@pytest.mark.parametrize(
    ("content_type", "charset", "text", "note"),
    [
        ("application/json; charset=ISO-8859-1", "latin-1", CAFE, "response_not_utf8:iso8859-1"),
        ('application/json;charset="windows-1252"', "cp1252", CAFE, "response_not_utf8:cp1252"),
        ("application/json", "latin-1", "Caf\ufffd ouvert", "response_not_utf8"),  # none declared: replaced
        ("application/json; charset=utf-8", "latin-1", "Caf\ufffd ouvert", "response_not_utf8"),  # declared wrong
        ("application/json; charset=unicode_escape", "latin-1", "Caf\ufffd ouvert", "response_not_utf8"),  # no charset
        ("application/json; charset=no-such", "latin-1", "Caf\ufffd ouvert", "response_not_utf8"),
    ],
)
def test_a_reply_that_is_not_utf8_keeps_its_messages(content_type: str, charset: str, text: str, note: str) -> None:
    out = run(response=_reply(charset), content_type=content_type)
    assert _replies(out) == [text]
    assert out.exchange["anomalies"] == [note]


def test_a_reply_in_utf8_is_read_as_before_and_says_nothing() -> None:
    out = run(response=_reply("utf-8"), content_type="application/json; charset=ISO-8859-1")
    assert _replies(out) == [CAFE] and out.exchange["anomalies"] == []


def test_a_reply_that_is_no_json_in_any_charset_is_still_said_invalid() -> None:
    out = run(response=b'{"jsonrpc": "2.0", "id": "r-1", "result": \xff', content_type="application/json")
    assert out.exchange["anomalies"] == ["invalid_json:JSONDecodeError"] and _replies(out) == []


def test_a_call_that_is_not_utf8_keeps_its_message() -> None:
    body = jsonrpc_request(params={"message": user_message(text=CAFE)}).replace(b"Caf\\u00e9", b"Caf\xe9")
    out = run(body=body, headers={"content-type": "application/json; charset=latin-1"})
    asked = [m["text"] for m in out.messages if m["direction"] == "request"]
    assert (out.exchange["method"], asked) == ("SendMessage", [CAFE])
    assert "request_not_utf8:iso8859-1" in out.exchange["anomalies"]


def test_an_sse_event_that_is_not_utf8_is_read_and_said() -> None:
    event = json.dumps(status_event("TASK_STATE_COMPLETED", agent_message(text=CAFE)), ensure_ascii=False)
    body = b"data: " + event.encode().replace("Café".encode(), b"Caf\xe9") + b"\n\n"
    out = run(body=jsonrpc_request("SendStreamingMessage"), response=body, content_type="text/event-stream")
    assert _replies(out) == ["Caf\ufffd ouvert"]  # as the SSE standard decodes it
    assert out.exchange["anomalies"] == ["sse_event_not_utf8:0"]
    (ev,), _ = parse_sse(body)
    assert ev.not_utf8 and not parse_sse(b"data: caf\xc3\xa9\n\n")[0][0].not_utf8


@pytest.mark.parametrize(
    ("rid", "text", "note"),
    [
        (True, "true", ["wrong_type:id=bool"]),
        ({"a": [1]}, '{"a":[1]}', ["wrong_type:id=dict"]),
        ([1, "x"], '[1,"x"]', ["wrong_type:id=list"]),
        ("r-1", "r-1", []),
        (7, "7", []),
        (1.5, "1.5", []),
        (None, None, []),
    ],
)
def test_a_jsonrpc_id_is_stored_as_its_json_text(rid: Any, text: str | None, note: list[str]) -> None:
    out = run(body=jsonrpc_request(rid=rid), response=jsonrpc_result({"message": agent_message()}, rid=rid))
    assert out.exchange["jsonrpc_id"] == text
    assert out.exchange["anomalies"] == note


def test_a_huge_object_id_is_stored_bounded() -> None:
    rid = {"k": "x" * 100_000}
    out = run(body=jsonrpc_request(rid=rid), response=jsonrpc_result({"message": agent_message()}, rid=rid))
    assert len(out.exchange["jsonrpc_id"]) == 1024 and "sha256:" in out.exchange["jsonrpc_id"]


@pytest.mark.parametrize(
    ("content_type", "codec"),
    [
        ("application/json; charset=latin1", "iso8859-1"),
        ("application/json; Charset=UTF-16LE", "utf-16-le"),
        ("application/json; charset=utf-8", None),
        ("application/json; charset=punycode", None),  # a codec, not a charset (and not linear)
        ("application/json; charset=rot13", None),
        ("application/json", None),
        (None, None),
    ],
)
def test_only_charsets_are_honoured(content_type: str | None, codec: str | None) -> None:
    assert declared_codec(content_type) == codec


def test_a_call_with_a_byte_that_is_not_utf8_is_parsed_in_either_binding() -> None:
    """It was `request_not_parsed:invalid_json:UnicodeDecodeError`, its message lost (tests/a2a/test_classify.py)."""
    from converse_tap.a2a.classify import classify
    from converse_tap.a2a.headers import Headers

    v1 = Headers([("A2A-Version", "1.0"), ("Content-Type", "application/json")])
    params = b'{"message": "\xff\xfe"}'
    req = classify(
        "POST", "http://h/a2a", v1, b'{"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": ' + params + b"}"
    )
    assert req is not None
    assert (req.method, req.params, req.anomalies) == ("SendMessage", {"message": "\ufffd\ufffd"}, ["request_not_utf8"])
    rest = classify("POST", "http://h/v1/message:send", v1, params)
    assert rest is not None
    assert (rest.binding, rest.params, rest.anomalies) == ("rest", {"message": "\ufffd\ufffd"}, ["request_not_utf8"])


def test_a_push_delivery_that_is_not_utf8_is_read() -> None:
    from converse_tap.a2a.classify import classify
    from converse_tap.a2a.headers import Headers

    event = status_event("TASK_STATE_COMPLETED", agent_message(text=CAFE))["result"]
    body = json.dumps(event, ensure_ascii=False).encode().replace("Café".encode(), b"Caf\xe9")
    headers = Headers([("X-A2A-Notification-Token", "tok"), ("Content-Type", "application/json; charset=latin-1")])
    req = classify("POST", "http://client.test/webhook", headers, body)
    assert req is not None and req.binding == "webhook"
    assert req.params == event and req.anomalies == ["request_not_utf8:iso8859-1"]
