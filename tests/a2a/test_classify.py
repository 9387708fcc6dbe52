import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from converse_tap.a2a.classify import classify
from converse_tap.a2a.headers import Headers
from tests.factories import jsonrpc_request

V1 = Headers([("A2A-Version", "1.0")])
NONE = Headers()


@pytest.mark.parametrize(
    ("verb", "url", "headers", "body", "expected"),
    [
        (
            "POST",
            "http://h/a2a",
            V1,
            jsonrpc_request("SendMessage"),
            ("jsonrpc", "SendMessage", "v1.0", "http://h/a2a"),
        ),
        (
            "POST",
            "http://h/",
            NONE,
            jsonrpc_request("message/stream"),
            ("jsonrpc", "SendStreamingMessage", "v0.3", "http://h/"),
        ),
        (
            "POST",
            "http://h/x",
            NONE,
            jsonrpc_request("tasks/resubscribe", {"id": "t"}),
            ("jsonrpc", "SubscribeToTask", "v0.3", "http://h/x"),
        ),
        (
            "POST",
            "http://h/x",
            NONE,
            jsonrpc_request("agent/getAuthenticatedExtendedCard", {}),
            ("jsonrpc", "GetExtendedAgentCard", "v0.3", "http://h/x"),
        ),
        (
            "POST",
            "http://h/a2a/rest/message:send",
            V1,
            b"{}",
            ("rest", "SendMessage", "v1.0", "http://h/a2a/rest"),
        ),
        (
            "POST",
            "http://h/tenant-7/message:stream",
            V1,
            b"{}",
            ("rest", "SendStreamingMessage", "v1.0", "http://h/tenant-7"),
        ),
        (
            "POST",
            "http://h/v1/message:send",
            NONE,
            b'{"message":{"content":[]}}',
            ("rest", "SendMessage", "v0.3", "http://h"),
        ),
        ("POST", "http://h/v1/message:send", V1, b"{}", ("rest", "SendMessage", "v1.0", "http://h/v1")),
        ("GET", "http://h/a/tasks/t-1", V1, None, ("rest", "GetTask", "v1.0", "http://h/a")),
        ("GET", "http://h/a/tasks", V1, None, ("rest", "ListTasks", "v1.0", "http://h/a")),
        (
            "POST",
            "http://h/a/tasks/t-1:cancel",
            V1,
            b'{"id":"t-1"}',
            ("rest", "CancelTask", "v1.0", "http://h/a"),
        ),
        (
            "GET",
            "http://h/a/tasks/t-1:subscribe",
            V1,
            None,
            ("rest", "SubscribeToTask", "v1.0", "http://h/a"),
        ),
        (
            "POST",
            "http://h/a/tasks/t-1/pushNotificationConfigs",
            V1,
            b"{}",
            ("rest", "CreateTaskPushNotificationConfig", "v1.0", "http://h/a"),
        ),
        (
            "DELETE",
            "http://h/a/tasks/t-1/pushNotificationConfigs/c",
            V1,
            None,
            ("rest", "DeleteTaskPushNotificationConfig", "v1.0", "http://h/a"),
        ),
        (
            "GET",
            "http://h/a/extendedAgentCard",
            V1,
            None,
            ("rest", "GetExtendedAgentCard", "v1.0", "http://h/a"),
        ),
        (
            "GET",
            "http://h/p/.well-known/agent-card.json",
            NONE,
            None,
            ("card", "GetAgentCard", "v1.0", "http://h/p"),
        ),
        ("GET", "http://h/.well-known/agent.json", NONE, None, ("card", "GetAgentCard", "v1.0", "http://h")),
    ],
)
def test_a2a_requests_are_recognised(verb, url, headers, body, expected) -> None:
    req = classify(verb, url, headers, body)
    assert req is not None
    assert (req.binding, req.method, req.dialect, req.agent_url) == expected


def test_task_id_from_path_and_params() -> None:
    assert classify("GET", "http://h/tasks/abc", V1, None).task_id == "abc"
    assert classify("POST", "http://h/", V1, jsonrpc_request("GetTask", {"id": "xyz"})).task_id == "xyz"


@pytest.mark.parametrize(
    ("verb", "url", "body"),
    [
        ("GET", "http://h/index.html", None),
        ("POST", "http://h/api", b'{"jsonrpc": "2.0", "method": "eth_call", "id": 1}'),
        ("POST", "http://h/api", b"not json"),
        ("POST", "http://h/message:send", None),  # wrong verb is not the route: GET only below
        ("PUT", "http://h/a/tasks/1", None),
    ],
)
def test_other_traffic_is_not_a2a(verb, url, body) -> None:
    if verb == "POST" and url.endswith("message:send"):
        assert classify("GET", url, NONE, body) is None
        return
    assert classify(verb, url, NONE, body) is None


def test_generic_paths_need_confirmation_without_a2a_headers() -> None:
    req = classify("GET", "http://h/todo/tasks/1", NONE, None)
    assert req is not None and req.certain is False
    assert classify("GET", "http://h/todo/tasks/1", V1, None).certain is True


def test_unknown_method_with_a2a_headers_is_kept_with_an_anomaly() -> None:
    req = classify("POST", "http://h/", V1, jsonrpc_request("FutureMethod", {}))
    assert req is not None and req.method == "FutureMethod"
    assert req.anomalies == ["unknown_method:FutureMethod"]


def test_a_request_of_too_many_values_is_recognised_from_its_start() -> None:
    from converse_tap.a2a.fastjson import MAX_VALUES

    flood = b",".join([b"[]"] * (MAX_VALUES // 2 + 1))
    body = b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"x": [' + flood + b"]}}"
    req = classify("POST", "http://h/a2a", V1, body)
    assert req is not None
    assert (req.method, req.params, req.anomalies) == ("SendMessage", None, ["request_not_parsed:too_many_values"])
    rest = b'{"message": {"parts": [' + flood + b"]}}"
    req = classify("POST", "http://h/v1/message:send", V1, rest)
    assert req is not None
    assert (req.binding, req.params, req.anomalies) == ("rest", None, ["request_not_parsed:too_many_values"])


@pytest.mark.parametrize(
    ("params", "why"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "json_too_deep"),
        (b'{"message": {"parts": [{"text": "a\x01b"}]}}', "invalid_json:JSONDecodeError"),  # a raw control byte
        (b'{"message": {"parts": [}', "invalid_json:JSONDecodeError"),
        # (a byte that is not UTF-8 is read now, replaced and said: tests/a2a/test_charset_and_ids.py)
        (b'{"message": "\xff\xfe}', "invalid_json:JSONDecodeError"),
    ],
)
def test_a_call_no_parser_takes_is_recognised_from_its_start_and_said_so(params: bytes, why: str) -> None:
    """A JSON-RPC call nested too deep or with a raw control byte was not A2A at all: the agent answered it, and
    the exchange vanished from the dataset."""
    body = b'{"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": ' + params + b"}"
    req = classify("POST", "http://h/a2a", V1, body)
    assert req is not None
    assert (req.binding, req.method, req.params, req.anomalies) == (
        "jsonrpc",
        "SendMessage",
        None,
        [f"request_not_parsed:{why}"],
    )
    rest = classify("POST", "http://h/v1/message:send", V1, params)
    assert rest is not None
    assert (rest.binding, rest.method, rest.anomalies) == ("rest", "SendMessage", [f"request_not_parsed:{why}"])


def test_a_body_that_is_not_a_call_stays_other_traffic() -> None:
    assert classify("POST", "http://h/x", NONE, b'{"jsonrpc": "2.0", "method": ' + b"[" * 50_000) is None
    assert classify("POST", "http://h/x", NONE, b'{"jsonrpc": "2.0", "method": "sum", "params": [1,}') is None


def _call(**replace: str) -> str:
    msg = {"messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "hi"}]}
    text = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": msg}})
    for old, new in replace.items():
        text = text.replace(old, new)
    return text


BIG = {"messageId": "m", "role": "user", "parts": [{"kind": "text", "text": "x" * 70_000}]}
# bodies a Python agent (json.loads, as starlette's request.json() calls it) takes as a call, but in which the bytes
# `jsonrpc` are not where a first look searches, or nowhere at all
DISGUISED = {
    "escaped jsonrpc key": (_call(**{'"jsonrpc"': '"\\u006asonrpc"'}).encode(), True),
    "escaped method key": (_call(**{'"method"': '"\\u006dethod"'}).encode(), True),
    "utf-16 with a BOM": (_call().encode("utf-16"), True),
    "utf-16-le": (_call().encode("utf-16-le"), True),
    "utf-32-be": (_call().encode("utf-32-be"), True),
    "params before a late jsonrpc key": (
        json.dumps({"params": {"message": BIG}, "method": "message/send", "id": 1, "jsonrpc": "2.0"}).encode(),
        False,
    ),
    "padded with whitespace": (b" \r\n" * 20_000 + _call().encode(), False),
}


@pytest.mark.parametrize("name", list(DISGUISED))
def test_a_call_disguised_from_a_first_look_is_recorded(name: str) -> None:
    """Each of these reached the agent and was answered, and the proxy sent none of them to be recorded: an
    attacker could talk to an agent past the recorder by escaping one key."""
    from converse_tap.a2a.firstlook import maybe_a2a

    body, disguised = DISGUISED[name]
    assert json.loads(body)["method"] == "message/send"  # what the agent reads
    assert maybe_a2a("POST", "/a2a", NONE, body)
    req = classify("POST", "http://h/a2a", NONE, body)
    assert req is not None
    assert (req.method, req.dialect) == ("SendMessage", "v0.3")
    assert isinstance(req.params, dict) and req.params["message"]["messageId"] == "m"
    assert req.anomalies == (["request_json_disguised"] if disguised else [])


@pytest.mark.parametrize(
    "body",
    [b"a=1&b=2", b'{"query": "hello"}', bytes(range(256)) * 100, b"\xff\xd8\xff\xe0" + b"x" * 20_000, b"\x00" * 9],
)
def test_other_posts_stay_out_of_the_recorder(body: bytes) -> None:
    from converse_tap.a2a.firstlook import maybe_a2a

    assert not maybe_a2a("POST", "/upload", NONE, body)
    assert classify("POST", "http://h/upload", NONE, body) is None


@pytest.mark.parametrize(
    ("verb", "path", "method"),
    [
        ("POST", "/v1/message%3Asend", "SendMessage"),
        ("POST", "/v1/message%3astream", "SendStreamingMessage"),
        ("POST", "/v1/tasks/t-1%3Acancel", "CancelTask"),
        ("GET", "/%2Ewell-known/agent-card.json", "GetAgentCard"),
        ("GET", "/.well-known%2Fagent.json", "GetAgentCard"),
    ],
)
def test_a_route_written_with_percent_escapes_is_recognised(verb: str, path: str, method: str) -> None:
    """ASGI servers route on the percent-decoded path: `/v1/message%3Asend` is SendMessage to the agent, and was
    other traffic to the recorder."""
    from converse_tap.a2a.firstlook import maybe_a2a

    assert maybe_a2a(verb, path, NONE, b"x" if verb == "POST" else None)
    req = classify(verb, "http://h" + path, NONE, b'{"message": {"messageId": "m"}}' if verb == "POST" else None)
    assert req is not None
    assert (req.method, req.agent_url, req.anomalies) == (method, "http://h", ["path_percent_encoded"])


def test_escapes_that_a_route_already_matches_are_left_as_they_are() -> None:
    req = classify("GET", "http://h/v1/tasks/t%2F1", V1, None)
    # the route is the raw path's, and the task id the one the agent reads: its path segment decoded
    assert req is not None and (req.method, req.task_id, req.anomalies) == ("GetTask", "t/1", [])
    req = classify("POST", "http://h/agents/a%20b/message:send", V1, b"{}")
    assert req is not None and (req.agent_url, req.anomalies) == ("http://h/agents/a%20b", [])


_SEGMENTS = st.sampled_from(
    ["", "v1", "a2a", "tasks", "t-1", "t:1", "message:send", "message:stream", "x:cancel", "y:subscribe",
     "z:resubscribe", "pushNotificationConfigs", "cfg", "extendedAgentCard", "card", ".well-known",
     "agent-card.json", "agent.json", "a" * 300]
)  # fmt: skip


@given(st.lists(_SEGMENTS, max_size=9), st.sampled_from(["GET", "POST", "DELETE"]))
def test_routes_matched_on_a_paths_tail_are_those_of_the_whole_path(segments: list[str], verb: str) -> None:
    """The routes are matched on the last four segments only (a 64 KiB path run through every pattern cost the
    proxy's event loop 6-8 ms): the operation, base and groups are those the whole path gives."""
    from converse_tap.a2a.routes import CARD_PATH, REST_ROUTES, match_card, match_route

    path = "/" + "/".join(segments)
    expected = None
    for i, (pattern, verbs, _, _, _) in enumerate(REST_ROUTES):
        m = pattern.match(path)
        if m is not None and verb in verbs:
            expected = (i, m["base"], {k: v for k, v in m.groupdict().items() if k != "base"})
            break
    got = match_route(path, verb)
    if got is not None:
        i, m, head = got
        assert (i, head + m["base"], {k: v for k, v in m.groupdict().items() if k != "base"}) == expected
    else:
        assert expected is None
    card = CARD_PATH.match(path)
    assert match_card(path) == (None if card is None else card["base"])


@pytest.mark.parametrize(
    ("verb", "path", "expected"),
    [
        ("GET", "/a/tasks/task:42", ("GetTask", "task:42", [])),
        ("GET", "/a/tasks/a:b:c", ("GetTask", "a:b:c", [])),
        ("POST", "/a/tasks/task:42:cancel", ("CancelTask", "task:42", [])),
        ("GET", "/a/tasks/task:42:subscribe", ("SubscribeToTask", "task:42", [])),
        ("POST", "/a/tasks/task:42:resubscribe", ("SubscribeToTask", "task:42", [])),
        ("GET", "/a/tasks/task:42/pushNotificationConfigs", ("ListTaskPushNotificationConfigs", "task:42", [])),
        ("DELETE", "/a/tasks/t:1/pushNotificationConfigs/c:1", ("DeleteTaskPushNotificationConfig", "t:1", [])),
        # the verb is the last `:segment` when it is a known one, also written %3A (routers read the path decoded)
        ("GET", "/a/tasks/t-1:cancel", None),
        ("GET", "/a/tasks/t-1%3Asubscribe", ("SubscribeToTask", "t-1", ["path_percent_encoded"])),
        ("GET", "/a/tasks/t-1%3acancel", None),
        # a task id is the path segment decoded, as the agent reads it
        ("GET", "/a/tasks/t%201", ("GetTask", "t 1", [])),
        ("POST", "/a/tasks/t%201:cancel", ("CancelTask", "t 1", [])),
        ("GET", "/a/tasks/t%3A1", ("GetTask", "t:1", [])),
        ("POST", "/a/tasks/t%25201%3Acancel", ("CancelTask", "t%201", ["path_percent_encoded"])),  # decoded once
    ],
)
def test_task_ids_may_hold_colons_and_the_verb_is_a_known_last_segment(
    verb: str, path: str, expected: tuple[str, str, list[str]] | None
) -> None:
    req = classify(verb, "http://h" + path, V1, b"{}" if verb == "POST" else None)
    assert (req if req is None else (req.method, req.task_id, req.anomalies)) == expected
    if req is not None:
        assert req.agent_url == "http://h/a"


@pytest.mark.parametrize(
    ("method", "params", "task_id"),
    [
        ("GetTask", {"id": "t-1"}, "t-1"),
        # v1.0 push-config calls name the task `taskId`; their `id` is the config's
        ("CreateTaskPushNotificationConfig", {"taskId": "t-1", "id": "c-1", "url": "https://c.test/h"}, "t-1"),
        ("GetTaskPushNotificationConfig", {"taskId": "t-1", "id": "c-1"}, "t-1"),
        ("GetTaskPushNotificationConfig", {"task_id": "t-1", "id": "c-1"}, "t-1"),
        ("GetTaskPushNotificationConfig", {"id": "c-1"}, None),
        ("DeleteTaskPushNotificationConfig", {"taskId": "t-1", "id": "c-1"}, "t-1"),
        ("ListTaskPushNotificationConfigs", {"taskId": "t-1"}, "t-1"),
        # v0.3: `set` names it `taskId`, get/list/delete `id` (the config is `pushNotificationConfigId`)
        ("tasks/pushNotificationConfig/set", {"taskId": "t-1", "pushNotificationConfig": {"id": "c-1"}}, "t-1"),
        ("tasks/pushNotificationConfig/get", {"id": "t-1", "pushNotificationConfigId": "c-1"}, "t-1"),
        ("tasks/pushNotificationConfig/list", {"id": "t-1"}, "t-1"),
        ("tasks/pushNotificationConfig/delete", {"id": "t-1", "pushNotificationConfigId": "c-1"}, "t-1"),
    ],
)
def test_the_task_of_a_jsonrpc_call_is_the_one_its_params_name(method: str, params: dict, task_id: str | None) -> None:
    req = classify("POST", "http://h/", NONE, jsonrpc_request(method, params))
    assert req is not None and req.task_id == task_id


def test_the_first_look_never_decodes_a_whole_long_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The first look runs on the proxy's event loop: an 18 MB path of `%2F` ending in `message:send` was
    percent-decoded whole there (about 4 s on this machine, every other flow waiting). It decodes at most the
    path's last characters and sends such a request on: the worker decodes the whole path, off the event loop."""
    from converse_tap.a2a import classify as c
    from converse_tap.a2a import firstlook as f
    from converse_tap.a2a import routes as r

    decoded: list[int] = []
    real = f.unquote
    for module in (f, c, r):
        monkeypatch.setattr(module, "unquote", lambda s, *a, **k: decoded.append(len(s)) or real(s, *a, **k))
    path = "/" + "%2F" * 6_000_000 + "message:send"
    assert f.maybe_a2a("POST", path, Headers([("content-type", "application/json")]), b"{}")
    assert decoded and max(decoded) <= r.PROBE, max(decoded)
    req = c.classify("POST", "http://agent.test" + path, Headers([("content-type", "application/json")]), b"{}")
    assert req is not None and req.method == "SendMessage" and "path_percent_encoded" in req.anomalies


_METHODS = ["message/send", "SendMessage", "tasks/get", "tools/call", "initialize", "notifications/initialized", ""]


@given(
    methods=st.lists(st.sampled_from(_METHODS), min_size=0, max_size=3),
    nested=st.sampled_from([None, *_METHODS]),
    escaped=st.booleans(),
    batch=st.booleans(),
)
def test_the_first_look_never_refuses_a_call_classify_takes(
    methods: list[str], nested: str | None, escaped: bool, batch: bool
) -> None:
    """JSON-RPC calls of other protocols (MCP's `tools/call`) are refused by the first look, so that mitmproxy
    keeps their streamed responses as it would without the addon; any body the agent's JSON parser reads as an A2A
    call (the last of repeated `method` keys, one written with escapes, a batch) still passes."""
    from converse_tap.a2a.firstlook import maybe_a2a

    pairs = [("jsonrpc", '"2.0"'), ("id", "1")]
    pairs += [("\\u006dethod" if escaped and i == 0 else "method", json.dumps(m)) for i, m in enumerate(methods)]
    if nested is not None:
        pairs.append(("params", json.dumps({"method": nested, "message": {"messageId": "m", "role": "user"}})))
    text = "{" + ", ".join(f'"{k}": {v}' for k, v in pairs) + "}"
    body = (f"[{text}]" if batch else text).encode()
    req = classify("POST", "http://h/rpc", NONE, body)
    if req is not None:
        assert maybe_a2a("POST", "/rpc", NONE, body), body
    if methods == ["tools/call"] and nested is None and not escaped:
        assert not maybe_a2a("POST", "/rpc", NONE, body) and req is None


def test_a_call_whose_body_was_never_seen_is_recorded_when_its_headers_say_a2a() -> None:
    """mitmproxy's `stream_large_bodies` hands the hooks a request without its body: with A2A headers it is a
    call all the same (its reply is read from the response), named as such; without them nothing says it is."""
    from converse_tap.a2a.firstlook import maybe_a2a

    a2a = Headers([("content-type", "application/json"), ("a2a-version", "1.0")])
    assert maybe_a2a("POST", "/rpc", a2a, None)
    req = classify("POST", "http://h/rpc", a2a, None)
    assert req is not None and (req.binding, req.method, req.anomalies) == (
        "jsonrpc",
        "unknown",
        ["request_not_parsed:not_seen"],
    )
    plain = Headers([("content-type", "application/json")])
    assert not maybe_a2a("POST", "/rpc", plain, None) and classify("POST", "http://h/rpc", plain, None) is None


@pytest.mark.parametrize("escape", [True, False])
def test_a_long_json_body_of_another_api_is_left_to_mitmproxy(escape: bool) -> None:
    """A 200 KB JSON request of another API (a long prompt to a model, its non-ASCII text escaped as JSON writers
    do) answered with SSE was streamed by the addon, so mitmproxy kept no body for `-w`: the first look searched
    only its first 16 KiB for `jsonrpc`, and took any `\\u` escape for a disguised key. It searches 256 KiB, and only
    an escaped ASCII letter can spell a disguised key; a call whose `jsonrpc` lies 100 KB in is still sent on."""
    from converse_tap.a2a.firstlook import maybe_a2a

    text = "caf\u00e9 <b> & " * 12_000 if escape else "plain words " * 12_000
    prompt = json.dumps({"model": "m", "stream": True, "messages": [{"role": "user", "content": text}]})
    assert len(prompt) > 100_000 and ("\\u00e9" in prompt) is escape
    assert not maybe_a2a("POST", "/v1/chat/completions", NONE, prompt.encode())
    late = json.dumps({"params": {"message": {"messageId": "m", "text": text}}, "method": "message/send", "id": 1})
    call = (late[:-1] + ', "jsonrpc": "2.0"}').encode()
    assert maybe_a2a("POST", "/a2a", NONE, call)
    assert classify("POST", "http://h/a2a", NONE, call) is not None
    disguised = call.replace(b'"jsonrpc"', b'"\\u006asonrpc"')
    assert maybe_a2a("POST", "/a2a", NONE, disguised)
