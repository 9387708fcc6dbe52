"""Recognise an HTTP request as A2A (JSON-RPC, HTTP+JSON, agent card) and name its operation and dialect."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from . import fastjson, urls
from .constants import CARD_METHOD, JSONRPC_V03_METHODS, JSONRPC_V1_METHODS, STREAMING_METHODS
from .headers import Headers


@dataclass(slots=True)
class A2ARequest:
    binding: str  # "jsonrpc" | "rest" | "card" | "grpc"
    method: str  # canonical v1.0 operation name (or the raw name when unknown)
    method_raw: str
    dialect: str  # "v1.0" | "v0.3"
    agent_url: str
    params: Any = None  # JSON-RPC params or REST body, parsed
    jsonrpc_id: str | None = None
    task_id: str | None = None  # from the path or params
    certain: bool = True  # False: a generic path that the response must confirm as A2A
    anomalies: list[str] = field(default_factory=list)

    @property
    def streaming(self) -> bool:
        return self.method in STREAMING_METHODS


_CARD_PATH = re.compile(r"^(?P<base>.*?)/\.well-known/(?:agent-card|agent)\.json$")
# (pattern, verbs, operation, certain). Order matters: the specific before the generic.
_REST_ROUTES: list[tuple[re.Pattern[str], frozenset[str], str, bool]] = [
    (re.compile(r"^(?P<base>.*?)/message:send$"), frozenset({"POST"}), "SendMessage", True),
    (re.compile(r"^(?P<base>.*?)/message:stream$"), frozenset({"POST"}), "SendStreamingMessage", True),
    (re.compile(r"^(?P<base>.*?)/tasks/(?P<task>[^/]+):cancel$"), frozenset({"POST"}), "CancelTask", True),
    (
        re.compile(r"^(?P<base>.*?)/tasks/(?P<task>[^/]+):(?:subscribe|resubscribe)$"),
        frozenset({"POST", "GET"}),
        "SubscribeToTask",
        True,
    ),
    (
        re.compile(r"^(?P<base>.*?)/tasks/(?P<task>[^/:]+)/pushNotificationConfigs(?:/(?P<cfg>[^/]+))?$"),
        frozenset({"POST", "GET", "DELETE"}),
        "PushNotificationConfig",
        True,
    ),
    (re.compile(r"^(?P<base>.*?)/extendedAgentCard$"), frozenset({"GET"}), "GetExtendedAgentCard", True),
    (re.compile(r"^(?P<base>.*?)/tasks/(?P<task>[^/:]+)$"), frozenset({"GET"}), "GetTask", False),
    (re.compile(r"^(?P<base>.*?)/tasks$"), frozenset({"GET"}), "ListTasks", False),
    (re.compile(r"^(?P<base>.*?)/v1/card$"), frozenset({"GET"}), "GetExtendedAgentCard", False),
]
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


def _loads(body: bytes | None) -> Any:
    if not body:
        return None
    try:
        return fastjson.loads(body)
    except (ValueError, RecursionError):
        return None


PREFIX = 64 * 1024  # of a request body too large to parse, kept to recognise its JSON-RPC method
_METHOD_IN_PREFIX = re.compile(rb'"method"\s*:\s*"([^"\\]{1,100})"')


def classify(
    method: str, url: str, headers: Headers, body: bytes | None, prefix: bytes | None = None
) -> A2ARequest | None:
    """Return what A2A operation this request is, or None for other traffic. Pure; never raises on odd input.

    `prefix` is the start of a body too large to parse: a JSON-RPC method named in it is still recognised."""
    origin, path = _origin(url)
    verb = method.upper()

    if verb == "POST" and ".A2AService/" in path:
        from .grpc import classify_grpc  # grpc imports this module

        grpc_req = classify_grpc(url, headers, body)
        if grpc_req is not None:
            return grpc_req

    m = _CARD_PATH.match(path)
    if m and verb == "GET":
        return A2ARequest("card", CARD_METHOD, CARD_METHOD, _version_dialect(headers) or "v1.0", origin + m["base"])

    unparsed = "body_too_large"
    if body and fastjson.too_many_values(body):  # recognised from its start, like a body too large to keep
        prefix, unparsed = body[:PREFIX], "too_many_values"
        body = None

    if verb == "POST" and body and b"jsonrpc" in body[:4096] and b"method" in body:
        req = _classify_jsonrpc(origin + path, headers, body)
        if req is not None:
            return req

    if verb == "POST" and body is None and prefix and b"jsonrpc" in prefix[:4096]:
        found = _METHOD_IN_PREFIX.search(prefix)
        if found is not None:
            name = found.group(1).decode("utf-8", "replace")
            doc = b'{"jsonrpc": "2.0", "method": ' + json.dumps(name).encode() + b"}"
            req = _classify_jsonrpc(origin + path, headers, doc)
            if req is not None:
                req.anomalies.append(f"request_not_parsed:{unparsed}")
                return req

    for pattern, verbs, operation, certain in _REST_ROUTES:
        m = pattern.match(path)
        if m is None or verb not in verbs:
            continue
        base = m["base"]
        params = _loads(body) if body else None
        if operation == "PushNotificationConfig":
            operation = _PUSH_OPS.get((verb, m["cfg"] is not None), operation)
        dialect = _version_dialect(headers)
        if dialect is None:
            dialect = "v0.3" if base.endswith("/v1") or _looks_v03(params) else "v1.0"
        if dialect == "v0.3" and base.endswith("/v1"):
            base = base[:-3]
        task = m.groupdict().get("task")
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
            anomalies=["request_not_parsed:too_many_values"] if unparsed == "too_many_values" else [],
        )
    return None


def maybe_a2a(method: str, path: str, headers: Headers | Any, body_start: bytes | None) -> bool:
    """A cheap first look, for the proxy's hot path: could this request be A2A? False only when `classify` would
    surely say None; True sends the exchange on to be classified for real. Reads the path, a few headers and at
    most the first 4 KiB of the raw body: no parsing, no decoding."""
    path = path.split("?", 1)[0]
    verb = method.upper()
    if verb == "GET" and _CARD_PATH.match(path):
        return True
    if verb == "POST" and ".A2AService/" in path:  # gRPC: /a2a.v1.A2AService/SendMessage (body is protobuf)
        return True
    if verb == "POST" and body_start:
        if b"jsonrpc" in body_start[:4096]:
            return True
        if headers.get("content-encoding"):  # a compressed body cannot be peeked at: decoded in the worker
            return True
    return any(pattern.match(path) and verb in verbs for pattern, verbs, _, _ in _REST_ROUTES)


def _looks_v03(params: Any) -> bool:
    if not isinstance(params, dict):
        return False
    msg = params.get("message", params.get("request"))
    return isinstance(msg, dict) and (
        "content" in msg or msg.get("role") in ("user", "agent") or "kind" in msg or "message_id" in msg
    )


def _classify_jsonrpc(url: str, headers: Headers, body: bytes) -> A2ARequest | None:
    doc = _loads(body)
    anomalies: list[str] = []
    if isinstance(doc, list):  # a JSON-RPC batch: A2A defines none; classify by its first call
        anomalies.append("jsonrpc_batch")
        doc = doc[0] if doc else None
    if not isinstance(doc, dict) or not isinstance(doc.get("method"), str):
        return None
    raw = doc["method"]
    if raw in JSONRPC_V1_METHODS:
        canonical, dialect = raw, "v1.0"
    elif raw in JSONRPC_V03_METHODS:
        canonical, dialect = JSONRPC_V03_METHODS[raw], "v0.3"
    elif _has_a2a_headers(headers):
        canonical, dialect = raw, _version_dialect(headers) or ("v0.3" if "/" in raw else "v1.0")
        anomalies.append(f"unknown_method:{raw}")
    else:
        return None
    if doc.get("jsonrpc") != "2.0":
        anomalies.append(f"jsonrpc_version:{doc.get('jsonrpc')}")
    rid = doc.get("id")
    params = doc.get("params")
    task_id = None
    if isinstance(params, dict):
        tid = params.get("id") if canonical != "CreateTaskPushNotificationConfig" else params.get("taskId")
        task_id = tid if isinstance(tid, str) and tid else None
    return A2ARequest(
        "jsonrpc",
        canonical,
        raw,
        dialect,
        url,
        params=params,
        jsonrpc_id=None if rid is None else str(rid),
        task_id=task_id,
        anomalies=anomalies,
    )
