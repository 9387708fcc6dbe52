"""The logical exchanges of the cross-binding differential (test_bindings_differential.py): hypothesis strategies
for one conversation, and its faithful encoding in each binding, dialect and gRPC form as an HttpExchange."""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from a2a.compat.v0_3 import a2a_v0_3_pb2 as v03
from a2a.types import a2a_pb2 as pb
from google.protobuf import json_format
from hypothesis import strategies as st

from converse_tap.a2a.exchange import HttpExchange
from converse_tap.a2a.headers import Headers
from tests.factories import EXT

HOST = "https://agent.test"

# ---- the logical exchange ----------------------------------------------------------------------------------------

# text with what breaks naive encoders: non-ASCII, astral, combining marks, controls, quotes (no lone surrogates:
# neither UTF-8 JSON nor a proto string can hold one)
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=12)
IDS = st.one_of(st.just(""), st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8))
# numbers a double holds exactly: what "faithful" can mean for a Struct
NUMBER = st.one_of(
    st.integers(min_value=-(2**53), max_value=2**53),
    st.sampled_from([0.5, -1.25, 1e-3, 3.141592653589793, 1.5e300]),
)
SCALAR = st.one_of(st.none(), st.booleans(), NUMBER, TEXT)
JSONISH = st.recursive(
    SCALAR, lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(TEXT, inner, max_size=3)), max_leaves=6
)


def _enum(*known: str) -> st.SearchStrategy[Any]:
    """An enum member of the envelope: known, unknown, empty, null, or a value of the wrong type."""
    return st.one_of(st.sampled_from(known), st.sampled_from(["", "Answered", "future_value"]), TEXT, SCALAR)


def _maybe(d: dict[str, Any], key: str, strategy: st.SearchStrategy[Any], draw: Any) -> None:
    """Set `key` from `strategy`, or leave it out."""
    if draw(st.booleans()):
        d[key] = draw(strategy)


@st.composite
def envelopes(draw: Any) -> Any:
    env: dict[str, Any] = {}
    _maybe(env, "author", _enum("agent", "human"), draw)
    if draw(st.booleans()):
        cov: dict[str, Any] = {}
        _maybe(cov, "availability", _enum("assessed", "not_recorded", "failed", "invalid"), draw)
        _maybe(cov, "coverage", _enum("answered", "partial", "unanswered", "unclear"), draw)
        _maybe(cov, "reason", _enum("sufficient_evidence", "ambiguous_request"), draw)
        _maybe(cov, "originatingTurnId", st.one_of(TEXT, SCALAR), draw)
        _maybe(cov, "originatingRequestId", st.one_of(TEXT, SCALAR), draw)
        env["answerCoverage"] = cov
    if draw(st.booleans()):
        env["ownership"] = {"state": draw(_enum("ai_owned", "human_owned")), "suppressed": draw(SCALAR)}
    if draw(st.booleans()):
        slot = st.fixed_dictionaries(
            {"key": st.one_of(TEXT, SCALAR), "required": SCALAR}, optional={"type": TEXT, "description": TEXT}
        )
        routine: dict[str, Any] = {"pendingInput": draw(st.one_of(st.lists(slot, max_size=3), SCALAR))}
        _maybe(routine, "toolName", st.one_of(TEXT, SCALAR), draw)
        _maybe(routine, "name", TEXT, draw)
        _maybe(routine, "status", _enum("active", "waiting_for_input", "completed", "abandoned"), draw)
        env["routine"] = routine
    if draw(st.booleans()):
        env["invocation"] = {"toolName": draw(st.one_of(TEXT, SCALAR)), "outcome": draw(_enum("started", "declined"))}
    if draw(st.booleans()):
        cite = st.fixed_dictionaries(
            {"documentId": st.one_of(TEXT, SCALAR), "chunkId": TEXT, "title": st.one_of(TEXT, SCALAR)},
            optional={"sourceUrl": st.sampled_from(["https://kb.test/a?b=1", "", "not a url"])},
        )
        env["citations"] = draw(st.one_of(st.lists(cite, max_size=3), SCALAR))
    _maybe(env, "x-extra", JSONISH, draw)  # a member of a later version: kept in envelope_json
    return env if draw(st.integers(0, 9)) else draw(st.one_of(SCALAR, st.lists(SCALAR, max_size=2)))


PARTS = st.lists(
    st.one_of(
        st.tuples(st.just("text"), TEXT),
        st.tuples(st.just("data"), st.dictionaries(TEXT, JSONISH, max_size=3)),
        st.tuples(st.just("file"), st.sampled_from(["https://files.test/a.pdf", "s3://b/k"])),
    ),
    max_size=3,
)


@dataclass
class Msg:
    mid: str
    parts: list[tuple[str, Any]]
    context_id: str = ""
    task_id: str = ""
    envelope: Any = None  # None: no envelope
    listed: bool = True  # the URI in `extensions`
    other: bool = False  # metadata also keyed by another extension (or, without an envelope, empty: `{}`)
    nulls: bool = False  # absent ids, metadata and extensions written as JSON nulls (a proto3 field: unset)


@dataclass
class Art:
    aid: str
    name: str
    parts: list[tuple[str, Any]]
    envelope: Any = None


@dataclass
class Exchange:
    user: Msg
    kind: str  # "message" | "task" | "stream"
    reply: Msg | None = None  # kind "message"
    task_id: str = "t-1"
    context_id: str = "c-1"
    state: str = "TASK_STATE_COMPLETED"
    status_message: Msg | None = None
    history: list[Msg] = field(default_factory=list)
    artifacts: list[Art] = field(default_factory=list)
    # ("status", (state, Msg | None)) | ("artifact", Art) | ("message", Msg) | ("task", state)
    events: list[tuple[str, Any]] = field(default_factory=list)
    asked: bool = True
    echoed: bool = False
    call: str = "send"  # "send" (SendMessage / SendStreamingMessage), "get" (a task), "subscribe" (a stream)


STATES = ["TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"]
SETTLED = [*STATES, "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"]


@st.composite
def agent_msgs(draw: Any, context_id: str = "", task_id: str = "") -> Msg:
    env = draw(st.one_of(st.none(), envelopes()))
    listed = draw(st.booleans()) if env is not None else False
    return Msg(draw(IDS), draw(PARTS), context_id, task_id, env, listed, draw(st.booleans()), draw(st.booleans()))


@st.composite
def artifacts(draw: Any) -> Art:
    return Art(draw(IDS), draw(TEXT), draw(PARTS), draw(st.one_of(st.none(), envelopes())))


@st.composite
def exchanges(draw: Any) -> Exchange:
    cid, tid = draw(st.sampled_from(["c-1", "ctx-é"])), draw(st.sampled_from(["t-1", "task/✓"]))
    # (a user message with an envelope is odd, and said: alike on every binding)
    user = Msg(
        draw(IDS), draw(PARTS), draw(st.sampled_from(["", cid])), envelope=draw(st.one_of(st.none(), envelopes()))
    )
    user.nulls = draw(st.booleans())
    kind = draw(st.sampled_from(["message", "task", "stream"]))
    ex = Exchange(user, kind, task_id=tid, context_id=cid, asked=draw(st.booleans()), echoed=draw(st.booleans()))
    if kind == "message":
        ex.reply = draw(agent_msgs(context_id=cid))
    elif kind == "task":
        ex.state = draw(st.sampled_from(SETTLED))
        ex.status_message = draw(st.one_of(st.none(), agent_msgs(cid, tid)))
        ex.history = [Msg(user.mid, user.parts, cid, tid), *draw(st.lists(agent_msgs(cid, tid), max_size=2))]
        ex.artifacts = draw(st.lists(artifacts(), max_size=2))
        ex.call = draw(st.sampled_from(["send", "get"]))  # (a task polled carries the same messages)
    else:
        middle = st.one_of(
            st.tuples(st.just("status"), st.tuples(st.just("TASK_STATE_WORKING"), st.one_of(st.none(), agent_msgs()))),
            st.tuples(st.just("artifact"), artifacts()),
        )
        last = st.one_of(
            st.tuples(st.just("status"), st.tuples(st.sampled_from(STATES), st.one_of(st.none(), agent_msgs()))),
            st.tuples(st.just("message"), agent_msgs(cid, tid)),  # a stream may end with a Message
        )
        first = [("task", "TASK_STATE_SUBMITTED")] if draw(st.booleans()) else []  # the SDK opens with the Task
        ex.events = [*first, *draw(st.lists(middle, max_size=3)), draw(last)]
        ex.call = draw(st.sampled_from(["send", "subscribe"]))
    return ex


# ---- encoders: the v1.0 ProtoJSON shape, the v0.3 JSON shape, the v0.3 ProtoJSON shape ----------------------------

V03_STATES = {
    "TASK_STATE_COMPLETED": "completed",
    "TASK_STATE_FAILED": "failed",
    "TASK_STATE_CANCELED": "canceled",
    "TASK_STATE_REJECTED": "rejected",
    "TASK_STATE_INPUT_REQUIRED": "input-required",
    "TASK_STATE_AUTH_REQUIRED": "auth-required",
    "TASK_STATE_WORKING": "working",
    "TASK_STATE_SUBMITTED": "submitted",
}


def _parts(parts: list[tuple[str, Any]], form: str) -> list[dict[str, Any]]:
    """Text, data and file parts in the three shapes: v1.0 (`text` / `data` / `url`), v0.3 JSON (`kind`), v0.3
    ProtoJSON (`data.data`, `file.fileWithUri`)."""
    out: list[dict[str, Any]] = []
    for kind, value in parts:
        if form == "v03":
            key = {"text": "text", "data": "data", "file": "file"}[kind]
            out.append({"kind": kind, key: {"uri": value} if kind == "file" else value})
        elif kind == "text":
            out.append({"text": value})
        elif kind == "data":
            out.append({"data": {"data": value} if form == "v03pb" else value})
        else:
            out.append({"file": {"fileWithUri": value}} if form == "v03pb" else {"url": value})
    return out


def _message(m: Msg, role: str, form: str) -> dict[str, Any]:
    """`form`: "v1" (v1.0 ProtoJSON), "v03" (v0.3 JSON-RPC), "v03pb" (v0.3 ProtoJSON: parts under `content`)."""
    out: dict[str, Any] = {"messageId": m.mid}
    if form == "v03":
        out["kind"] = "message"
        out["role"] = role
        out["parts"] = _parts(m.parts, form)
    else:
        out["role"] = f"ROLE_{role.upper()}"
        out["content" if form == "v03pb" else "parts"] = _parts(m.parts, form)
    if m.context_id or m.nulls:
        out["contextId"] = m.context_id or None
    if m.task_id or m.nulls:
        out["taskId"] = m.task_id or None
    if m.envelope is not None or m.other or m.nulls:
        metadata = {} if m.envelope is None else {EXT: m.envelope}
        if m.other and m.envelope is not None:
            metadata["https://other.test/ext/v2"] = {"n": 1, "s": "x"}
        out["metadata"] = None if m.nulls and not metadata and not m.other else metadata
    if m.listed or m.nulls:
        out["extensions"] = [EXT] if m.listed else None
    return out


def _artifact(a: Art, form: str) -> dict[str, Any]:
    out: dict[str, Any] = {"artifactId": a.aid, "name": a.name}
    out["parts"] = _parts(a.parts, form)
    if a.envelope is not None:
        out["metadata"] = {EXT: a.envelope}
        out["extensions"] = [EXT]
    return out


def _status(state: str, m: Msg | None, form: str) -> dict[str, Any]:
    if form == "v03pb" and state == "TASK_STATE_CANCELED":
        state = "TASK_STATE_CANCELLED"  # the v0.3 proto's spelling
    out: dict[str, Any] = {"state": V03_STATES[state] if form == "v03" else state}
    if m is not None:
        out["message"] = _message(m, "agent", form)
    return out


def _task(ex: Exchange, form: str) -> dict[str, Any]:
    out: dict[str, Any] = {"id": ex.task_id, "contextId": ex.context_id}
    out["status"] = _status(ex.state, ex.status_message, form)
    if ex.history:
        out["history"] = [_message(m, "user" if i == 0 else "agent", form) for i, m in enumerate(ex.history)]
    if ex.artifacts:
        out["artifacts"] = [_artifact(a, form) for a in ex.artifacts]
    if form == "v03":
        out["kind"] = "task"
    return out


def _event(ex: Exchange, i: int, form: str) -> dict[str, Any]:
    """The i-th stream event: a v1.0 / v0.3 ProtoJSON StreamResponse, or a v0.3 JSON-RPC result (with `kind`)."""
    what, value = ex.events[i]
    if what in ("task", "message"):
        snapshot = Exchange(ex.user, "task", task_id=ex.task_id, context_id=ex.context_id, state=value)
        obj = _message(value, "agent", form) if what == "message" else _task(snapshot, form)
        return obj if form == "v03" else {what: obj}
    body: dict[str, Any] = {"taskId": ex.task_id, "contextId": ex.context_id}
    if what == "status":
        body["status"] = _status(*value, form)
        if form != "v1":
            body["final"] = value[0] in STATES
        key, kind = "statusUpdate", "status-update"
    else:
        body["artifact"] = _artifact(value, form)
        key, kind = "artifactUpdate", "artifact-update"
    if form == "v03":
        return {"kind": kind, **body}
    return {key: body}


def documents(ex: Exchange, form: str) -> list[dict[str, Any]]:
    """The response's documents in `form`: one (a unary call's), or a stream's events."""
    if ex.kind == "stream":
        return [_event(ex, i, form) for i in range(len(ex.events))]
    payload = _message(ex.reply, "agent", form) if ex.reply is not None else _task(ex, form)
    if form == "v03" or ex.call == "get":  # (GetTask answers with the Task itself)
        return [payload]
    return [{"message" if ex.reply is not None else "task": payload}]


def request_doc(ex: Exchange, form: str) -> dict[str, Any]:
    msg = _message(ex.user, "user", form)
    if not ex.user.context_id:
        msg.pop("contextId", None)
    return {"message": msg}


# ---- bindings ----------------------------------------------------------------------------------------------------

GRPC_FORMS = [
    "application/grpc",
    "application/grpc+json",
    "application/grpc-web",
    "application/grpc-web-text",
]
BINDINGS = [
    *(("jsonrpc", d, None) for d in ("v1.0", "v0.3")),
    *(("rest", d, None) for d in ("v1.0", "v0.3")),
    *(("grpc", d, c) for d in ("v1.0", "v0.3") for c in GRPC_FORMS),
]


def _frame(data: bytes, flag: int = 0) -> bytes:
    return bytes([flag]) + len(data).to_bytes(4, "big") + data


def _sse(docs: list[Any]) -> bytes:
    return "".join(f"data: {json.dumps(d, ensure_ascii=False)}\n\n" for d in docs).encode()


def _proto(doc: dict[str, Any], cls: Any, ctype: str) -> bytes:
    message = json_format.ParseDict(doc, cls())
    if ctype.endswith("+json"):
        return json_format.MessageToJson(message).encode()
    return message.SerializeToString()


# the call's method: (v1.0 JSON-RPC and gRPC, v0.3 JSON-RPC, v0.3 gRPC)
METHODS = {
    ("send", False): ("SendMessage", "message/send", "SendMessage"),
    ("send", True): ("SendStreamingMessage", "message/stream", "SendStreamingMessage"),
    ("get", False): ("GetTask", "tasks/get", "GetTask"),
    ("subscribe", True): ("SubscribeToTask", "tasks/resubscribe", "TaskSubscription"),
}


def _rest_url(ex: Exchange, dialect: str, stream: bool) -> tuple[str, str]:
    """(verb, URL) of the call over HTTP+JSON: v1.0 paths off the interface, v0.3 under `/v1`."""
    base = f"{HOST}{'' if dialect == 'v1.0' else '/v1'}"
    task = f"{base}/tasks/{quote(ex.task_id, safe='')}"
    if ex.call == "get":
        return "GET", task
    if ex.call == "subscribe":
        return "POST", f"{task}:subscribe"
    return "POST", f"{base}/message:{'stream' if stream else 'send'}"


def _grpc_request(ex: Exchange, dialect: str, ctype: str) -> bytes:
    form, mod = ("v1", pb) if dialect == "v1.0" else ("v03pb", v03)
    if ex.call == "send":
        return _proto(request_doc(ex, form), mod.SendMessageRequest, ctype)
    cls = (
        mod.GetTaskRequest
        if ex.call == "get"
        else pb.SubscribeToTaskRequest
        if mod is pb
        else v03.TaskSubscriptionRequest
    )
    return _proto({"id": ex.task_id} if mod is pb else {"name": f"tasks/{ex.task_id}"}, cls, ctype)


def encode(ex: Exchange, binding: str, dialect: str, ctype: str | None) -> HttpExchange:
    stream = ex.kind == "stream"
    v1_method, v03_method, v03_grpc = METHODS[ex.call, stream]
    verb = "POST"
    req_hdr = [("a2a-version", "1.0" if dialect == "v1.0" else "0.3")]
    if ex.asked:
        req_hdr.append(("a2a-extensions", EXT))
    resp_hdr: list[tuple[str, str]] = [("a2a-extensions", EXT)] if ex.echoed else []
    trailers = None
    version = "HTTP/1.1"
    if binding == "jsonrpc":
        method = v1_method if dialect == "v1.0" else v03_method
        form = "v1" if dialect == "v1.0" else "v03"
        url, ctype = f"{HOST}/", "text/event-stream" if stream else "application/json"
        params = {**request_doc(ex, form), "configuration": {}} if ex.call == "send" else {"id": ex.task_id}
        request = json.dumps({"jsonrpc": "2.0", "id": 7, "method": method, "params": params}).encode()
        docs = [{"jsonrpc": "2.0", "id": 7, "result": d} for d in documents(ex, form)]
        body = _sse(docs) if stream else json.dumps(docs[0]).encode()
        req_hdr.append(("content-type", "application/json"))
    elif binding == "rest":
        form = "v1" if dialect == "v1.0" else "v03pb"
        verb, url = _rest_url(ex, dialect, stream)
        ctype = "text/event-stream" if stream else "application/json"
        request = json.dumps(request_doc(ex, form)).encode() if ex.call == "send" else b""
        docs = documents(ex, form)
        body = _sse(docs) if stream else json.dumps(docs[0]).encode()
        req_hdr.append(("content-type", "application/json"))
    else:
        assert ctype is not None
        form, mod, package = ("v1", pb, "lf.a2a.v1") if dialect == "v1.0" else ("v03pb", v03, "a2a.v1")
        url = f"{HOST}/{package}.A2AService/{v1_method if dialect == 'v1.0' else v03_grpc}"
        out_cls = mod.StreamResponse if stream else mod.Task if ex.call == "get" else mod.SendMessageResponse
        request = _frame(_grpc_request(ex, dialect, ctype))
        body = b"".join(_frame(_proto(d, out_cls, ctype)) for d in documents(ex, form))
        status = [("grpc-status", "0")]
        if "grpc-web" in ctype:
            body += _frame("".join(f"{k}: {v}\r\n" for k, v in status).encode(), 0x80)
        else:
            version, trailers = "HTTP/2.0", Headers(status)
        if ctype.startswith("application/grpc-web-text"):
            body, request = base64.b64encode(body), base64.b64encode(request)
        req_hdr.append(("content-type", ctype))
    return HttpExchange(
        id="x-1",
        method=verb,
        url=url,
        request_headers=Headers(req_hdr),
        request_body=request,
        http_version=version,
        status=200,
        response_headers=Headers([("content-type", ctype), *resp_hdr]),
        response_body=body,
        response_trailers=trailers,
        ts_start=1.0,
        ts_end=1.5,
    )
