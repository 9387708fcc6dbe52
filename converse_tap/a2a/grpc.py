"""The gRPC binding of A2A: recognise a call, decode its messages with the a2a-sdk's descriptors, read its status.

Messages are decoded by the protobuf runtime against the descriptors the a2a-sdk ships (`a2a.proto` of v1.0,
package `lf.a2a.v1`; `a2a_v0_3.proto`, package `a2a.v1`) and turned into the same ProtoJSON-shaped dicts the JSON
bindings carry (`json_format.MessageToDict`: lowerCamel names, enum names, Struct metadata as plain JSON), so the
walker and the envelope reader see no difference.
"""

from __future__ import annotations

import base64
import binascii
import functools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from . import urls
from .classify import A2ARequest, params_task_id
from .constants import CONVERSE_URI, JSONRPC_V1_METHODS
from .envelope import clip
from .exchange import HttpExchange
from .grpc_frames import GrpcFrame, parse_frames
from .headers import Headers, split_uris
from .redact import NO_OPERATOR_PATTERNS, Redaction

PACKAGES = {"lf.a2a.v1": "v1.0", "a2a.v1": "v0.3"}  # the a2a-sdk's A2AService packages -> dialect
_PATH = re.compile(r"^/(?P<package>[A-Za-z_][\w.]*)\.A2AService/(?P<method>[A-Za-z_]\w*)$")
# v0.3 gRPC method names that differ from the v1.0 operation names
V03_METHODS = {
    "TaskSubscription": "SubscribeToTask",
    "ListTaskPushNotificationConfig": "ListTaskPushNotificationConfigs",
    "GetAgentCard": "GetExtendedAgentCard",
}
STATUS_NAMES = (
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
)
DEFAULT_MAX = 16 * 1024 * 1024


def is_grpc(content_type: str | None) -> bool:
    """application/grpc or application/grpc+proto (gRPC-Web and other message codecs are not this binding)."""
    ctype = (content_type or "").split(";", 1)[0].strip().lower()
    return ctype in ("application/grpc", "application/grpc+proto")


def grpc_path(path: str) -> tuple[str, str] | None:
    """(package, method) of an `/<package>.A2AService/<Method>` path."""
    m = _PATH.match(path)
    return (m["package"], m["method"]) if m else None


@functools.cache
def _services() -> dict[str, Any]:
    """dialect -> the A2AService descriptor, from the a2a-sdk's generated modules (imported on first use)."""
    try:
        from a2a.compat.v0_3 import a2a_v0_3_pb2
        from a2a.types import a2a_pb2
    except ImportError:  # pragma: no cover - a2a-sdk is a dependency
        return {}
    return {
        "v1.0": a2a_pb2.DESCRIPTOR.services_by_name["A2AService"],
        "v0.3": a2a_v0_3_pb2.DESCRIPTOR.services_by_name["A2AService"],
    }


def method_descriptor(dialect: str, method: str) -> Any:
    service = _services().get(dialect)
    return None if service is None else service.methods_by_name.get(method)


def _message_class(dialect: str, method: str, direction: str) -> Any:
    desc = method_descriptor(dialect, method)
    if desc is None:
        return None
    return _class_of(desc.input_type if direction == "request" else desc.output_type)


@functools.cache
def _class_of(descriptor: Any) -> Any:
    """Cached by descriptor, of which the SDK has a few dozen: never by a method name from the wire."""
    from google.protobuf import message_factory

    return message_factory.GetMessageClass(descriptor)


def parse(dialect: str, method: str, direction: str, data: bytes) -> tuple[Any, str | None]:
    """One message of `method` ("request" or "response") -> the protobuf message, or (None, anomaly)."""
    from google.protobuf.message import DecodeError

    cls = _message_class(dialect, method, direction)
    if cls is None:
        return None, "grpc_not_decoded:unknown_method"
    try:
        return cls.FromString(data), None
    except (DecodeError, RecursionError, ValueError) as e:
        return None, f"grpc_message_undecodable:{type(e).__name__}"


def to_dict(dialect: str, message: Any) -> tuple[Any, str | None]:
    """A protobuf message -> the ProtoJSON dict the JSON bindings carry."""
    from google.protobuf import json_format

    try:
        doc = json_format.MessageToDict(message)
    except (RecursionError, ValueError) as e:
        return None, f"grpc_message_undecodable:{type(e).__name__}"
    if dialect == "v0.3" and isinstance(doc.get("msg"), dict):  # v0.3 names the message member `msg`
        doc["message"] = doc.pop("msg")
    return doc, None


def decode(dialect: str, method: str, direction: str, data: bytes) -> tuple[Any, str | None]:
    """One message of `method` ("request" or "response") -> its ProtoJSON dict, or (None, anomaly)."""
    message, note = parse(dialect, method, direction, data)
    return (None, note) if message is None else to_dict(dialect, message)


def request_params(req: A2ARequest) -> Any:
    """The request message of a gRPC call as a dict. `classify_grpc` leaves it a protobuf message (turning it into
    a dict is most of the cost, and need not happen on mitmproxy's event loop); this converts it once."""
    from google.protobuf.message import Message

    if isinstance(req.params, Message):
        req.params, note = to_dict(req.dialect, req.params)
        if note:
            req.anomalies.append(f"request_{note}")
    return req.params


@functools.cache
def _string_fields(descriptor: Any) -> tuple[tuple[str, str], ...]:
    return tuple((f.json_name, f.name) for f in descriptor.fields if f.type == f.TYPE_STRING)


def _scalars(message: Any) -> dict[str, Any]:
    """The top-level string fields of a message by their JSON names (tenant, id, name, taskId, parent…)."""
    return {json_name: getattr(message, name) for json_name, name in _string_fields(message.DESCRIPTOR)}


def classify_grpc(url: str, headers: Headers, body: bytes | None, max_message: int = DEFAULT_MAX) -> A2ARequest | None:
    """An A2A gRPC call (path `/<package>.A2AService/<Method>`, content type application/grpc) or None.

    Its `params` is the request message as protobuf: `request_params` gives the dict (extract calls it)."""
    parts = urls.parse(url)
    found = grpc_path(parts.path)
    if found is None or not is_grpc(headers.get("content-type")):
        return None
    package, raw = found
    anomalies: list[str] = []
    dialect = PACKAGES.get(package)
    if dialect is None:
        anomalies.append(f"grpc_unknown_service:{clip(package)}.A2AService")
        version = headers.get("a2a-version") or ""
        dialect = "v0.3" if version.strip().startswith("0.") else "v1.0"
    canonical = V03_METHODS.get(raw, raw) if dialect == "v0.3" else raw
    if method_descriptor(dialect, raw) is None or canonical not in JSONRPC_V1_METHODS:
        anomalies.append(f"unknown_method:{clip(raw)}")
    params = None
    if body is not None:
        frames, notes = parse_frames(body, max_message, headers.get("grpc-encoding") or "")
        anomalies += [f"request_{n}" for n in notes]
        if len(frames) != 1:
            anomalies.append(f"grpc_request_messages:{len(frames)}")
        if frames:
            params, note = _frame_doc(frames[0], dialect, raw, "request", parse)
            if note and not note.startswith("grpc_not_decoded"):
                anomalies.append(f"request_{note}")
    fields = _scalars(params) if params is not None else {}
    origin = f"{parts.scheme}://{parts.netloc}"
    tenant = fields.get("tenant")
    return A2ARequest(
        "grpc",
        canonical,
        parts.path,
        dialect,
        f"{origin}/{tenant}" if isinstance(tenant, str) and tenant else origin,
        params=params,
        task_id=_task_id(canonical, dialect, fields),
        anomalies=anomalies,
    )


def _frame_doc(
    frame: GrpcFrame, dialect: str, method: str, direction: str, how: Callable[..., Any] = decode
) -> tuple[Any, str | None]:
    if frame.oversize:
        return None, "grpc_message_too_large"
    if frame.error:
        return None, frame.error
    return how(dialect, method, direction, frame.data)


def _task_id(operation: str, dialect: str, params: Any) -> str | None:
    if not isinstance(params, dict):
        return None
    tid = params_task_id(operation, dialect, params)  # v1.0: `id`, or a push-config call's `taskId`
    if not tid and isinstance(params.get("name"), str):  # v0.3: "tasks/{id}[/pushNotificationConfigs/…]"
        segments = params["name"].split("/")
        tid = segments[1] if len(segments) > 1 and segments[0] == "tasks" else None
    if not tid and isinstance(params.get("parent"), str):
        segments = params["parent"].split("/")
        tid = segments[1] if len(segments) > 1 and segments[0] == "tasks" else None
    return tid if isinstance(tid, str) and tid else None


@dataclass(slots=True)
class GrpcStatus:
    code: int
    name: str | None
    message: str | None
    reason: str | None  # google.rpc.ErrorInfo.reason from grpc-status-details-bin


def grpc_status(headers: Headers, trailers: Headers | None) -> tuple[GrpcStatus | None, list[str]]:
    """The call's status from its trailers (or its headers, for a trailers-only response)."""
    anomalies: list[str] = []
    source = trailers if trailers is not None and trailers.get("grpc-status") is not None else headers
    raw = source.get("grpc-status")
    if raw is None:
        return None, anomalies
    try:
        code = int(raw.strip())
    except ValueError:
        anomalies.append(f"grpc_status_invalid:{raw[:20]}")
        code = 2  # UNKNOWN, as gRPC clients read an unparseable status
    message = source.get("grpc-message")
    reason = _reason(source.get("grpc-status-details-bin"), anomalies)
    name = STATUS_NAMES[code] if 0 <= code < len(STATUS_NAMES) else None
    return GrpcStatus(code, name, unquote(message) if message else None, reason), anomalies


def _reason(details: str | None, anomalies: list[str]) -> str | None:
    if not details:
        return None
    from google.protobuf.message import DecodeError
    from google.rpc import error_details_pb2, status_pb2

    try:
        status = status_pb2.Status.FromString(base64.b64decode(details + "=" * (-len(details) % 4), validate=True))
    except (binascii.Error, DecodeError, ValueError):
        anomalies.append("grpc_status_details_undecodable")
        return None
    for any_ in status.details:
        if any_.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            any_.Unpack(info)
            return info.reason or None
    return None


Payload = Callable[[Any, int | None, bool, float | None], bool]


def message_payload(
    frame: GrpcFrame, index: int, req: A2ARequest, anomalies: list[str], payload: Payload, ts: float | None
) -> None:
    """One response message (the `index`-th) decoded and handed to `payload`, or an anomaly saying why not."""
    streaming = req.streaming
    doc, note = _frame_doc(frame, req.dialect, req.method_raw.rsplit("/", 1)[-1], "response")
    if note:
        anomalies.append(f"{note}:{index}" if streaming else note)
        return
    payload(doc, index if streaming else None, False, frame.received or ts)


def extract_grpc_response(
    ex: HttpExchange,
    req: A2ARequest,
    row: dict[str, Any],
    payload: Payload,
    max_message: int,
    seen: int = 0,
    redaction: Redaction = NO_OPERATOR_PATTERNS,
) -> None:
    """Fill `row` from a gRPC response: each message through `payload(doc, index, error, ts)`, then the status.

    Messages come from the live tap, which hands each to `message_payload` as it arrives (`seen` of them, and
    `ex.grpc_frames` empty), or from `ex.grpc_frames`, or are split from a whole body (flow files)."""
    anomalies: list[str] = row["anomalies"]
    trailers = ex.response_trailers
    if trailers is not None:
        echoed = split_uris(
            row["extensions_echoed"] + trailers.get_all("a2a-extensions") + trailers.get_all("x-a2a-extensions"),
            redaction,
        )
        row["extensions_echoed"] = echoed
        row["converse_echoed"] = CONVERSE_URI in echoed
    frames = ex.grpc_frames
    ctype = ex.response_headers.get("content-type")
    if frames is None and not is_grpc(ctype):  # e.g. an intermediary's HTML error page: not gRPC framing
        if ex.response_body:
            anomalies.append(f"grpc_response_not_grpc:{clip((ctype or '').split(';')[0].strip())}")
        frames = []
    if frames is None and ex.response_body is None and ex.status == 200:
        anomalies.append("grpc_body_not_stored")  # a flow file written without store_streamed_bodies
    if frames is None:
        frames, notes = parse_frames(
            ex.response_body or b"", max_message, ex.response_headers.get("grpc-encoding") or "", ex.ts_end
        )
        anomalies += notes
    streaming = req.streaming
    row["streamed"] = streaming
    count = seen + len(frames)
    row["sse_events"] = count if streaming else None
    if not streaming and count > 1:
        anomalies.append(f"grpc_unary_messages:{count}")
    for i, frame in enumerate(frames, seen):
        message_payload(frame, i, req, anomalies, payload, ex.ts_end)
    status, notes = grpc_status(ex.response_headers, trailers)
    anomalies += notes
    if status is None:
        if ex.error is None and ex.status == 200:
            anomalies.append("grpc_status_missing")
        row["complete"] = False
    elif status.code != 0:
        row.update(
            error_code=status.code,
            error_status=status.name,
            error_message=status.message,  # redacted with every error column (rows.redact_wire_text)
            error_reason=status.reason,
        )
