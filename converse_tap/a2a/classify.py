"""Recognise an HTTP request as A2A (JSON-RPC, HTTP+JSON, agent card) and name its operation and dialect."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from . import fastjson, urls
from .charset import loads_not_utf8
from .constants import (
    CARD_METHOD,
    JSONRPC_V01_METHODS,
    JSONRPC_V03_METHODS,
    JSONRPC_V1_METHODS,
    PUSH_CONFIG_METHODS,
    STREAMING_METHODS,
)
from .envelope import clip
from .headers import Headers
from .objects import get
from .routes import REST_ROUTES, match_card, match_route, routed
from .wiretext import id_text


@dataclass(slots=True)
class A2ARequest:
    binding: str  # "jsonrpc" | "rest" | "card" | "grpc" | "webhook" (a push delivery: push.py)
    method: str  # canonical v1.0 operation name (or the raw name when unknown)
    method_raw: str
    dialect: str  # "v1.0" | "v0.3"
    agent_url: str
    params: Any = None  # JSON-RPC params or REST body, parsed
    rpc_id: Any = None  # the JSON-RPC id as sent (a string or a number), which the response must repeat
    task_id: str | None = None  # from the path or params
    certain: bool = True  # False: a generic path that the response must confirm as A2A
    anomalies: list[str] = field(default_factory=list)

    @property
    def jsonrpc_id(self) -> str | None:
        """The JSON-RPC id as text (the `jsonrpc_id` column): a string or number as it reads, any other value
        (which JSON-RPC forbids, and `wrong_type:id` says) as its JSON, bounded."""
        return id_text(self.rpc_id)

    @property
    def streaming(self) -> bool:
        return self.method in STREAMING_METHODS


_PUSH_OPS = {
    ("POST", False): "CreateTaskPushNotificationConfig",
    ("GET", False): "ListTaskPushNotificationConfigs",
    ("GET", True): "GetTaskPushNotificationConfig",
    ("DELETE", True): "DeleteTaskPushNotificationConfig",
}


def _origin(url: str) -> tuple[str, str]:
    scheme, netloc, path, _, _ = urls.split(url)  # never raises (urlsplit did: `http://[::1/`)
    return f"{scheme}://{netloc}", path or "/"


def _version_dialect(headers: Headers) -> str | None:
    version = headers.get("a2a-version")
    if version:
        return "v0.3" if version.strip().startswith("0.") else "v1.0"
    return None


def _has_a2a_headers(headers: Headers) -> bool:
    return any(headers.get(h) for h in ("a2a-version", "a2a-extensions", "x-a2a-extensions"))


def _parse(body: bytes | None, headers: Headers, read: list[str]) -> tuple[Any, str | None]:
    """The parsed body, or None and why no parser takes it. A body that is not UTF-8 is read by its declared
    charset, or with its odd bytes replaced, and `read` says so (charset.py)."""
    if not body:
        return None, None
    try:
        try:
            return fastjson.loads(body), None
        except UnicodeDecodeError:
            doc, note = loads_not_utf8(body, headers.get("content-type"), "request")
            read.append(note)
            return doc, None
    except RecursionError:
        return None, "json_too_deep"
    except fastjson.TooManyValues:
        return None, "too_many_values"
    except ValueError as e:
        return None, f"invalid_json:{type(e).__name__}"


_UNPARSED = object()
PREFIX = 64 * 1024  # of a request body too large to parse, kept to recognise its JSON-RPC method
_METHOD_IN_PREFIX = re.compile(rb'"method"\s*:\s*"([^"\\]{1,100})"')


def classify(
    method: str, url: str, headers: Headers, body: bytes | None, prefix: bytes | None = None
) -> A2ARequest | None:
    """Return what A2A operation this request is, or None for other traffic. Pure; never raises on odd input.

    `prefix` is the start of a body too large to parse: a JSON-RPC method named in it is still recognised."""
    origin, path = _origin(url)
    verb = method.upper()
    path, notes = routed(path, verb)

    if verb == "POST" and ".A2AService/" in path:
        from .grpc import classify_grpc  # grpc imports this module

        grpc_req = classify_grpc(url, headers, body)
        if grpc_req is not None:
            return grpc_req

    card_base = match_card(path) if verb == "GET" else None
    if card_base is not None:
        version = _version_dialect(headers) or "v1.0"
        return A2ARequest("card", CARD_METHOD, CARD_METHOD, version, origin + card_base, anomalies=notes)

    unparsed: str | None = "body_too_large"
    if body and fastjson.too_many_values(body):  # recognised from its start, like a body too large to keep
        prefix, unparsed = body[:PREFIX], "too_many_values"
        body = None

    doc: Any = _UNPARSED
    read: list[str] = []  # how a body that is not UTF-8 was read
    # (`bytes.find`, not `in`: `in` tries the argument as an integer first, raising and clearing a TypeError)
    if verb == "POST" and body and (body.find(b"jsonrpc") >= 0 or _may_hide_jsonrpc(body, len(body))):
        doc, why = _parse(body, headers, read)
        if why is None:
            req = _classify_jsonrpc(origin + path, headers, doc)
            if req is not None:
                if read:
                    req.anomalies += read
                if (
                    body.find(b'"jsonrpc"') < 0 or body.find(b'"method"') < 0
                ):  # keys seen only once parsed: escaped, UTF-16/32
                    req.anomalies.append("request_json_disguised")
                return req
        else:
            # no parser takes it (nested too deep, a raw control byte, bad syntax): a call all the same, which
            # the agent answers; recognised from its start like a body too large to keep, and said so
            prefix, body, unparsed = body[:PREFIX], None, why

    if verb == "POST" and body is None and prefix and prefix.find(b"jsonrpc", 0, 4096) >= 0:
        found = _METHOD_IN_PREFIX.search(prefix)
        if found is not None:
            name = found.group(1).decode("utf-8", "replace")
            req = _classify_jsonrpc(origin + path, headers, {"jsonrpc": "2.0", "method": name})
            if req is not None:
                req.anomalies.append(f"request_not_parsed:{unparsed}")
                return req

    route = match_route(path, verb)
    if route is None and verb == "POST":  # no A2A call: perhaps an agent's push delivery to a client's webhook
        from .push import classify_push  # push imports this module

        why = unparsed if body is None and prefix is not None else "not_seen" if body is None else None
        push = classify_push(origin, path, headers, body, doc, why, [*notes, *read])
        if push is not None:
            return push
    if verb == "POST" and body is None and prefix is None and route is None and _has_a2a_headers(headers):
        # a call to an A2A agent whose body was never seen (mitmproxy streamed it: `stream_large_bodies`): its
        # reply is read from the response all the same, and the exchange says why its call is unknown
        seen = [*notes, "request_not_parsed:not_seen"]
        version = _version_dialect(headers) or "v1.0"
        return A2ARequest("jsonrpc", "unknown", "unknown", version, origin + path, anomalies=seen)
    if route is not None:
        i, m, head = route
        _, _, operation, certain, _ = REST_ROUTES[i]
        base = head + m["base"]
        params, why = (doc, None) if doc is not _UNPARSED else _parse(body, headers, read)
        if why is not None:
            unparsed = why
        if operation == "PushNotificationConfig":
            operation = _PUSH_OPS.get((verb, m["cfg"] is not None), operation)
        dialect = _version_dialect(headers)
        if dialect is None:
            dialect = "v0.3" if base.endswith("/v1") or _looks_v03(params) else "v1.0"
        if dialect == "v0.3" and base.endswith("/v1"):
            base = base[:-3]
        task = m.groupdict().get("task")
        if task and "%" in task and not notes:  # the id the agent reads (a path routed decoded is decoded already)
            task = unquote(task)
        sure = certain or _has_a2a_headers(headers)
        return A2ARequest(
            "rest",
            operation,
            f"{verb} {m.group(0)[len(m['base']) :]}",
            dialect,
            origin + base,
            params=params,
            task_id=task,
            certain=sure,
            anomalies=notes
            + read
            + ([] if unparsed in (None, "body_too_large") else [f"request_not_parsed:{unparsed}"]),
        )
    return None


PEEK = 16 * 1024  # of a request body the proxy's first look searches
_NOT_SPACE = re.compile(rb"[^ \t\r\n]")
# `\u0061`: an ASCII letter, escaped (Go escapes `<`, `>`, `&` as `\u003c`..., no writer escapes a letter)
_ASCII_ESCAPE = re.compile(rb"\\u00(?:[46][1-9a-fA-F]|[57][0-9aA])")
_BOMS = (b"\xef\xbb\xbf", b"\xff\xfe", b"\xfe\xff")
_JSON_STARTS = (b"{", b"[", b" ", b"\t", b"\r", b"\n")


def _may_hide_jsonrpc(body: bytes, searched: int) -> bool:
    """Whether a body in whose first `searched` bytes the bytes `jsonrpc` were not seen may still be a JSON-RPC
    call as a server's JSON parser reads it: keys written with escapes (`"\\u006asonrpc"`: an escaped ASCII letter,
    which no JSON writer makes of its own; the escapes of other characters cannot spell these keys), UTF-16 or UTF-32
    (with or without a byte-order mark), or — when only part of it was searched — a body padded with whitespace
    past PEEK bytes, or an object whose `jsonrpc` key lies past what was searched."""
    if body.startswith(_BOMS) or (b"\x00" in body[:4] and body[:8].replace(b"\x00", b"")[:1] in _JSON_STARTS):
        return True
    whole = searched >= len(body)
    first = _NOT_SPACE.search(body, 0, PEEK)
    if first is None:
        return not whole and len(body) > PEEK
    if body[first.start()] not in b"{[":
        return False
    if not whole:
        return True
    return _ASCII_ESCAPE.search(body, 0, searched) is not None


def _looks_v03(params: Any) -> bool:
    if not isinstance(params, dict):
        return False
    msg = params.get("message", params.get("request"))
    return isinstance(msg, dict) and (
        "content" in msg or msg.get("role") in ("user", "agent") or "kind" in msg or "message_id" in msg
    )


def params_task_id(operation: str, dialect: str, params: Any) -> str | None:
    """The task a call's params name. That is `id`, except in the push-config calls of v1.0 (all four) and in
    v0.3's `tasks/pushNotificationConfig/set`: they name it `taskId`, and a v1.0 `id` is the config's."""
    if not isinstance(params, dict):
        return None
    by_task_id = operation in PUSH_CONFIG_METHODS and (
        dialect != "v0.3" or operation == "CreateTaskPushNotificationConfig"
    )
    tid = get(params, "taskId") if by_task_id else params.get("id")
    return tid if isinstance(tid, str) and tid else None


def _method_in_path(url: str, raw: str, anomalies: list[str]) -> str:
    """The JSON-RPC URL of a call whose path ends with its method as well (python-a2a serves `POST /tasks/send`,
    `/tasks/get`...: JSON-RPC has one URL for every call, the card's): the URL before it, which its card names, and
    `method_in_path:<method>` said. Any other URL as it is."""
    if url.endswith(raw) and url[-len(raw) - 1 : -len(raw)] == "/":
        anomalies.append(f"method_in_path:{raw}")
        return url[: -len(raw) - 1]
    return url


# v0.3 JSON-RPC names MCP's tasks (2025-11-25) use too, for its own calls (an agent's MCP endpoint, which the
# converse card names, is reached through the same proxy)
MCP_SHARED_METHODS = frozenset({"tasks/get", "tasks/list", "tasks/cancel"})
_MCP_LIST_PARAMS = frozenset({"cursor", "_meta"})


def _mcps_call(headers: Headers, params: Any) -> bool:
    """An MCP call under a name A2A v0.3 shares: MCP's HTTP transport header (`MCP-Protocol-Version`, required
    after initialisation, or `Mcp-Session-Id`), no A2A header, and MCP's params (`taskId` where A2A says `id`; for
    a list, nothing but `cursor` and `_meta`). Such a call is not recorded. A header alone decides nothing: anyone
    can add one to an A2A call, and the agent would answer it unrecorded; with MCP's params an A2A agent answers
    only an error (its `tasks/get` and `tasks/cancel` need `id`)."""
    if not (headers.get("mcp-protocol-version") or headers.get("mcp-session-id")) or _has_a2a_headers(headers):
        return False
    return mcps_params(params)


def mcps_params(params: Any) -> bool:
    """Whether a shared-name call's params are MCP's (`_mcps_call`), its headers aside (the first look reads them)."""
    if params is None:
        return True  # (MCP's tasks/list without a cursor; A2A's get and cancel need params)
    if params.__class__ is not dict:
        return False
    if "taskId" in params:
        return "id" not in params
    return all(k in _MCP_LIST_PARAMS for k in params)


def _classify_jsonrpc(url: str, headers: Headers, doc: Any) -> A2ARequest | None:
    anomalies: list[str] = []
    if isinstance(doc, list):  # a JSON-RPC batch: A2A defines none; classify by its first call
        anomalies.append("jsonrpc_batch")
        doc = doc[0] if doc else None
    if not isinstance(doc, dict) or "method" not in doc:
        return None
    raw = doc["method"]
    named = isinstance(raw, str)
    if not named:  # a call all the same, to an agent its headers name: its reply is recorded
        if not _has_a2a_headers(headers):
            return None
        anomalies.append(f"wrong_type:method={type(raw).__name__}")
        raw = "unknown"
    if raw in JSONRPC_V1_METHODS:
        canonical, dialect = raw, "v1.0"
    elif raw in JSONRPC_V03_METHODS:
        if raw in MCP_SHARED_METHODS and _mcps_call(headers, doc.get("params")):
            return None
        canonical, dialect = JSONRPC_V03_METHODS[raw], "v0.3"
        url = _method_in_path(url, raw, anomalies)
    elif raw in JSONRPC_V01_METHODS:
        canonical, dialect = JSONRPC_V01_METHODS[raw], "v0.3"
        anomalies.append(f"method_before_v0.2:{raw}")
        url = _method_in_path(url, raw, anomalies)
    elif _has_a2a_headers(headers):
        canonical, dialect = raw, _version_dialect(headers) or ("v0.3" if "/" in raw else "v1.0")
        if named:  # (a method of another type is said so already)
            anomalies.append(f"unknown_method:{clip(raw)}")
    else:
        return None
    if doc.get("jsonrpc") != "2.0":
        anomalies.append(f"jsonrpc_version:{clip(doc.get('jsonrpc'))}")
    rid = doc.get("id")
    if rid is not None and rid.__class__ is not str and rid.__class__ is not int and rid.__class__ is not float:
        anomalies.append(f"wrong_type:id={type(rid).__name__}")
    params = doc.get("params")
    return A2ARequest(
        "jsonrpc",
        canonical,
        raw,
        dialect,
        url,
        params=params,
        rpc_id=rid,
        task_id=params_task_id(canonical, dialect, params),
        anomalies=anomalies,
    )
