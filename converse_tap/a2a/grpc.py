"""The gRPC binding of A2A: recognise a call, decode its messages with the a2a-sdk's descriptors, read its status.

Messages are decoded by the protobuf runtime against the descriptors the a2a-sdk ships (`a2a.proto` of v1.0,
package `lf.a2a.v1`; `a2a_v0_3.proto`, package `a2a.v1`) and turned into the same ProtoJSON-shaped dicts the JSON
bindings carry (`json_format.MessageToDict`: lowerCamel names, enum names, Struct metadata as plain JSON), so the
walker and the envelope reader see no difference.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable
from typing import Any

from . import urls
from .classify import A2ARequest, params_task_id
from .constants import JSONRPC_V1_METHODS
from .envelope import clip
from .exchange import HttpExchange
from .fastjson import MAX_VALUES
from .fastjson import too_many_values as json_too_many_values
from .grpc_codecs import GrpcContent, from_json, grpc_content, mend, message_to_dict, trailer_block, unbase64
from .grpc_frames import GrpcFrame, body_frames, first_frame, parser_anomalies
from .grpc_status import grpc_status
from .grpc_utf8 import mend_utf8
from .grpc_web import WebTrailers, text_frames
from .grpc_wire import too_many_values
from .headers import Headers, activated, split_uris
from .redact import NO_OPERATOR_PATTERNS, Redaction

PACKAGES = {"lf.a2a.v1": "v1.0", "a2a.v1": "v0.3"}  # the a2a-sdk's A2AService packages -> dialect
_PATH = re.compile(r"^/(?P<package>[A-Za-z_][\w.]*)\.A2AService/(?P<method>[A-Za-z_]\w*)$")
# v0.3 gRPC method names that differ from the v1.0 operation names
V03_METHODS = {
    "TaskSubscription": "SubscribeToTask",
    "ListTaskPushNotificationConfig": "ListTaskPushNotificationConfigs",
    "GetAgentCard": "GetExtendedAgentCard",
}
DEFAULT_MAX = 16 * 1024 * 1024
UTF8_MENDED = "grpc_string_not_utf8"  # a message read with U+FFFD for the odd bytes of its strings
NOTES = "\n"  # between two notes of one message (no note holds a line break)
PROTO = GrpcContent(web=False, text=False, codec="proto")


def is_grpc(content_type: str | None) -> bool:
    """application/grpc or application/grpc+proto (a live tap splits every gRPC form, `grpc_codecs.grpc_content`,
    into messages)."""
    return grpc_content(content_type) == PROTO


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


def parse(dialect: str, method: str, direction: str, data: bytes, codec: str = "proto") -> tuple[Any, str | None]:
    """One message of `method` ("request" or "response") -> the protobuf message, or (None, anomaly). `codec`:
    "proto", or "json" (the `+json` content types: ProtoJSON, read into the same message). A message read once
    its strings were made UTF-8 comes with `UTF8_MENDED`."""
    from google.protobuf.message import DecodeError

    cls = _message_class(dialect, method, direction)
    if cls is None:
        return None, "grpc_not_decoded:unknown_method"
    if codec not in ("proto", "json"):
        return None, f"grpc_codec_unsupported:{clip(codec)}"
    too_many = too_many_values(data, cls.DESCRIPTOR) if codec == "proto" else json_too_many_values(data)
    if too_many:  # refused unparsed, as a JSON body of as many values is
        return None, f"grpc_message_too_many_values:{MAX_VALUES}"
    try:
        return (cls.FromString(data) if codec == "proto" else from_json(cls, data)), None
    except (DecodeError, RecursionError, ValueError) as e:
        error = f"grpc_message_undecodable:{type(e).__name__}"
    mended = mend_utf8(data, cls.DESCRIPTOR) if codec == "proto" else None
    if mended is not None:  # strings that are not UTF-8 cost their odd bytes (U+FFFD), not the message
        try:
            return cls.FromString(mended), UTF8_MENDED
        except (DecodeError, RecursionError, ValueError):
            pass
    return None, error


def to_dict(dialect: str, message: Any) -> tuple[Any, str | None]:
    """A protobuf message -> the ProtoJSON dict the JSON bindings carry (or None, and why not).

    A value ProtoJSON cannot express (a Timestamp or Duration out of its range, a NaN or infinite number in a
    Struct) costs that value, not the message: it is dropped (`grpc_codecs.mend`) and the note names its kind,
    with the dict all the same."""
    from google.protobuf import json_format

    note = None
    try:
        doc = message_to_dict(message)
    except json_format.Error:  # a value out of ProtoJSON's range (no ValueError): mended on a copy
        mended = type(message)()
        mended.CopyFrom(message)
        dropped = mend(mended)
        try:
            doc = message_to_dict(mended)
        except (json_format.Error, RecursionError, ValueError) as e:
            return None, f"grpc_message_undecodable:{type(e).__name__}"
        note = f"grpc_value_dropped:{','.join(dropped)}"
    except (RecursionError, ValueError) as e:
        return None, f"grpc_message_undecodable:{type(e).__name__}"
    if dialect == "v0.3" and isinstance(doc.get("msg"), dict):  # v0.3 names the message member `msg`
        doc["message"] = doc.pop("msg")
    return doc, note


def decode(dialect: str, method: str, direction: str, data: bytes, codec: str = "proto") -> tuple[Any, str | None]:
    """One message of `method` ("request" or "response") -> its ProtoJSON dict, or (None, anomaly). Two notes
    (strings mended, then values dropped) come joined by NOTES."""
    message, note = parse(dialect, method, direction, data, codec)
    if message is None:
        return None, note
    doc, later = to_dict(dialect, message)
    return doc, later if note is None else note if later is None else f"{note}{NOTES}{later}"


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
    """An A2A gRPC call (path `/<package>.A2AService/<Method>`, a gRPC content type: `application/grpc[+proto]`,
    `+json`, gRPC-Web and its text form) or None.

    Its `params` is the request message as protobuf: `request_params` gives the dict (extract calls it)."""
    parts = urls.parse(url)
    found = grpc_path(parts.path)
    content = grpc_content(headers.get("content-type"))
    if found is None or content is None:
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
    data = unbase64(body) if content.text and body is not None else body
    if body is not None and data is None:
        anomalies.append("request_grpc_web_text_not_base64")
    if data is not None:  # a unary request: its one message decoded; others (there should be none) only counted
        frame, count, notes = first_frame(data, max_message, headers.get("grpc-encoding") or "", content.web)
        anomalies += [f"request_{n}" for n in notes]
        if count != 1:
            anomalies.append(f"grpc_request_messages:{count}")
        if frame is not None:
            params, note = _frame_doc(frame, dialect, raw, "request", content.codec, parse)
            if note and not note.startswith("grpc_not_decoded"):
                anomalies.append(f"request_{note}")  # (one note: `request_params` adds the dict's own)
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
    frame: GrpcFrame,
    dialect: str,
    method: str,
    direction: str,
    codec: str = "proto",
    how: Callable[..., Any] = decode,
) -> tuple[Any, str | None]:
    if frame.oversize:
        return None, "grpc_message_too_large"
    if frame.error:
        return None, frame.error
    if frame.trailers:
        return None, "grpc_web_trailers_misplaced"
    return how(dialect, method, direction, frame.data, codec)


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


Payload = Callable[[Any, int | None, bool, float | None], bool]


def message_payload(
    frame: GrpcFrame,
    index: int,
    req: A2ARequest,
    anomalies: list[str],
    payload: Payload,
    ts: float | None,
    codec: str = "proto",
) -> None:
    """One response message (the `index`-th) decoded and handed to `payload`, or an anomaly saying why not."""
    streaming = req.streaming
    method = req.method_raw.rsplit("/", 1)[-1]
    doc, note = _frame_doc(frame, req.dialect, method, "response", codec)
    if note:
        anomalies += [f"{n}:{index}" if streaming else n for n in note.split(NOTES)]
    if doc is not None:  # (a message that lost a value ProtoJSON cannot print still counts)
        if not doc and _must_hold(req.dialect, method):  # (the common path: one test of a non-empty dict)
            anomalies.append(f"grpc_message_empty:{index}" if streaming else "grpc_message_empty")
        payload(doc, index if streaming else None, False, frame.received or ts)


_HOLDING = frozenset({"SendMessageResponse", "StreamResponse", "Task"})  # never empty: a payload, a task's id


def _must_hold(dialect: str, method: str) -> bool:
    """Whether a response message of `method` that decodes to nothing lost its content: a SendMessage or stream
    response without its payload, a Task without its id. (An empty list, or `Empty`, says all there is.) A
    zero-length message, or one of only unknown fields or fields of the wrong wire type (the runtime keeps those
    as unknown), decodes to nothing."""
    desc = method_descriptor(dialect, method)
    return desc is not None and desc.output_type.name in _HOLDING


def extract_grpc_response(
    ex: HttpExchange,
    req: A2ARequest,
    row: dict[str, Any],
    payload: Payload,
    max_message: int,
    seen: int = 0,
    redaction: Redaction = NO_OPERATOR_PATTERNS,
    live: WebTrailers | None = None,
    mark: int | None = None,
) -> None:
    """Fill `row` from a gRPC response: each message through `payload(doc, index, error, ts)`, then the status.

    Messages come from the live tap, which hands each to `message_payload` as it arrives (`seen` of them, and
    `ex.grpc_frames` empty; `live` what it learnt of the framing and trailers frames, and `mark` where its
    messages' notes begin in the row's anomalies), or from `ex.grpc_frames`, or are split from a whole body
    (flow files). A gRPC-Web body ends with its trailers, read as the HTTP/2 trailers are."""
    anomalies: list[str] = row["anomalies"]
    frames = ex.grpc_frames
    ctype = ex.response_headers.get("content-type")
    content = grpc_content(ctype) or PROTO
    version = (ex.http_version or "").upper()
    head: list[str] = []  # notes before the messages' own: the form, then the framing
    if not content.web and version.startswith("HTTP/1"):  # gRPC needs HTTP/2 (its trailers); gRPC-Web does not
        head.append(f"grpc_over_http1:{clip(version)}")
    body = ex.response_body
    if frames is None and grpc_content(ctype) is None:  # e.g. an intermediary's HTML error page: not gRPC
        if body:
            head.append(f"grpc_response_not_grpc:{clip((ctype or '').split(';')[0].strip())}")
        frames = []
    elif frames is None and content != PROTO and ex.sse_events is not None:  # tapped as SSE: not split
        head.append(f"grpc_response_not_decoded:{content.label}")
        frames = []
    if frames is None and body is None and ex.status == 200:
        head.append("grpc_body_not_stored")  # a flow file written without store_streamed_bodies
    web = live or WebTrailers()
    parser = None
    messages: Iterable[GrpcFrame] = frames or ()
    if frames is None:  # a whole body: its messages split as they are decoded, never all held at once
        encoding = ex.response_headers.get("grpc-encoding") or ""
        if content.text:
            messages, parser = text_frames(body or b"", max_message, encoding, ex.ts_end, web.notes)
        else:
            messages, parser = body_frames(body or b"", max_message, encoding, ex.ts_end, content.web)
    streaming = req.streaming
    row["streamed"] = streaming
    first_note = len(anomalies) if mark is None else mark
    count = seen
    for frame in messages:
        if web.take(frame, anomalies):
            continue
        message_payload(frame, count, req, anomalies, payload, ex.ts_end, content.codec)
        count += 1
    row["sse_events"] = count if streaming else None
    notes = head + web.notes + (parser_anomalies(parser) if parser is not None else [])
    none = not streaming and count == 0 and not notes  # a unary call answered with no message, framing clean
    if not streaming and count > 1:
        notes.append(f"grpc_unary_messages:{count}")
    anomalies[first_note:first_note] = notes  # the form's and framing's notes first, then each message's
    if web.frames > 1:
        anomalies.append(f"grpc_web_trailers_frames:{web.frames}")
    trailers = _trailers(ex.response_trailers, web.first, anomalies)
    if trailers is not None:
        in_trailers = trailers.get_all("a2a-extensions") + trailers.get_all("x-a2a-extensions")
        row["extensions_echoed"] = split_uris(row["extensions_echoed"] + in_trailers, redaction)
        if in_trailers and not row["converse_echoed"]:  # (compared as sent, as the headers' echo is)
            uris = split_uris(in_trailers, redaction)
            row["converse_echoed"] = activated(in_trailers, uris, "extensions_echoed", anomalies)
    status, notes = grpc_status(ex.response_headers, trailers)
    anomalies += notes
    if status is None:
        if ex.error is None and ex.status == 200:
            anomalies.append("grpc_status_missing")
        row["complete"] = False
    elif status.code == 0:
        if none:  # a success without its one message: gRPC clients fail such a call (a cardinality violation)
            anomalies.append("grpc_unary_messages:0")
    else:
        if not streaming and count:  # a client gets the status, not the message: it was sent, never delivered
            anomalies.append("grpc_message_with_error_status")
        row.update(
            error_code=status.code,
            error_status=status.name,
            error_message=status.message,  # redacted with every error column (rows.redact_wire_text)
            error_reason=status.reason,
        )


def _trailers(http: Headers | None, frame: GrpcFrame | None, anomalies: list[str]) -> Headers | None:
    """The call's trailers: HTTP/2's, else (gRPC-Web) the body's trailers frame."""
    if frame is None or (http is not None and http.get("grpc-status") is not None):
        return http
    if frame.oversize or frame.error:
        anomalies.append(f"grpc_web_trailers_undecodable:{frame.error or 'too_large'}")
        return http
    block, clean = trailer_block(frame.data)
    if not clean:
        anomalies.append("grpc_web_trailers_malformed")
    return block
