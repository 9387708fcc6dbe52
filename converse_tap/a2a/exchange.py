"""One HTTP exchange as the extractor sees it, whether it came from a live flow, a flow file or a HAR."""

from __future__ import annotations

from dataclasses import dataclass, field

from .grpc_frames import GrpcFrame
from .headers import Headers
from .sse import SseEvent


@dataclass(slots=True)
class HttpExchange:
    id: str
    method: str
    url: str
    request_headers: Headers
    request_body: bytes | None  # content-decoded
    request_prefix: bytes | None = None  # the first 64 KiB of a request body too large to parse
    http_version: str | None = None
    status: int | None = None
    response_headers: Headers = field(default_factory=Headers)
    response_body: bytes | None = None  # content-decoded; None when the body was streamed past us
    sse_events: list[SseEvent] | None = None  # events tapped from a live stream, in order
    sse_comments: int = 0
    grpc_frames: list[GrpcFrame] | None = None  # gRPC messages tapped from a live response, in order
    response_trailers: Headers | None = None  # HTTP/2 trailers (gRPC: grpc-status, grpc-message)
    ts_start: float | None = None
    ts_first_byte: float | None = None
    ts_end: float | None = None
    client_addr: str | None = None
    server_addr: str | None = None
    error: str | None = None
    bytes_in: int | None = None
    bytes_out: int | None = None
    source: str = "live"
    anomalies: list[str] = field(default_factory=list)  # noted while capturing (oversize body, decode failure...)
