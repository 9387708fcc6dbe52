"""gRPC exchanges for the extractor's tests: a length-prefixed frame, and a unary call to the v1.0 service."""

from __future__ import annotations

from typing import Any

from converse_tap.a2a.exchange import HttpExchange
from converse_tap.a2a.headers import Headers
from tests.factories import EXT

BASE = "https://agent.test:8443"
V1 = f"{BASE}/lf.a2a.v1.A2AService"
GRPC_HEADERS = [("content-type", "application/grpc"), ("a2a-extensions", EXT)]


def frame(data: bytes, compressed: bool = False) -> bytes:
    return bytes([compressed]) + len(data).to_bytes(4, "big") + data


def grpc_exchange(
    method: str,
    request: bytes,
    body: bytes | None,
    trailers: list[tuple[str, str]] | None = None,
    response_headers: list[tuple[str, str]] | None = None,
    **kw: Any,
) -> HttpExchange:
    """`method` of the v1.0 service called with one frame of `request`, answered with `body` (frames as they
    came) and `trailers` (grpc-status 0 unless given)."""
    return HttpExchange(
        id="g-1",
        method="POST",
        url=f"{V1}/{method}",
        request_headers=Headers(GRPC_HEADERS),
        request_body=frame(request),
        http_version="HTTP/2.0",
        status=200,
        response_headers=Headers(response_headers or GRPC_HEADERS),
        response_body=body,
        response_trailers=Headers(trailers if trailers is not None else [("grpc-status", "0")]),
        **kw,
    )
