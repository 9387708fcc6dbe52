"""The status of a gRPC call: `grpc-status`, `grpc-message` and the `google.rpc.Status` of `grpc-status-details-bin`,
from the trailers, or from the headers of a trailers-only response."""

from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from urllib.parse import unquote, unquote_to_bytes

from .headers import Headers

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
_STATUS_CODE = re.compile(r"[0-9]{1,10}")  # grpc-status is 1*DIGIT (ASCII: `int` also takes "1_0" and "٣")


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
    digits = raw.strip()
    if _STATUS_CODE.fullmatch(digits) and int(digits) < 1 << 31:
        code = int(digits)
    else:
        anomalies.append(f"grpc_status_invalid:{raw[:20]}")
        code = 2  # UNKNOWN, as gRPC clients read an unparseable status
    message = source.get("grpc-message")
    reason = _reason(source.get("grpc-status-details-bin"), anomalies)
    name = STATUS_NAMES[code] if 0 <= code < len(STATUS_NAMES) else None
    return GrpcStatus(code, name, _text(message, anomalies) if message else None, reason), anomalies


def _text(message: str, anomalies: list[str]) -> str:
    """`grpc-message` percent-decoded (UTF-8, as gRPC encodes it). Bytes that are not UTF-8, percent-encoded or
    raw (a header value mitmproxy kept as surrogates), are each a U+FFFD, and `grpc_message_not_utf8` says so."""
    if "%" not in message and message.isascii():
        return message
    try:
        return unquote(message, errors="strict").encode("utf-8").decode("utf-8")
    except UnicodeError:  # (also a lone surrogate, which no column stores)
        anomalies.append("grpc_message_not_utf8")
    try:
        raw = message.encode("utf-8", "surrogateescape")  # (mitmproxy's: each odd byte back as it came)
    except UnicodeEncodeError:  # a surrogate no byte gives
        raw = message.encode("utf-8", "surrogatepass")
    return unquote_to_bytes(raw).decode("utf-8", "replace")


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
            try:
                any_.Unpack(info)  # an ErrorInfo by its type URL whose bytes are not one
            except DecodeError:
                anomalies.append("grpc_status_details_undecodable")
                return None
            return info.reason or None
    return None
