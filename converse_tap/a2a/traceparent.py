"""W3C Trace Context: the trace an exchange belongs to, read from the request's `traceparent` (never altered).

Every exchange gets the ids of the span the recorder exports for it (export/otel.py): its own span id, derived
from the exchange id so that a live export and a later `export otlp` of the same rows name the same span, and
the caller's trace and parent span when the request carried a valid `traceparent`; otherwise a trace of its
own, derived the same way.
"""

from __future__ import annotations

import hashlib
import re

from .headers import Headers

# version "00" (and future versions, read by their first four fields); "ff" is invalid
_TRACEPARENT = re.compile(r"^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16


def parse_traceparent(value: str | None) -> tuple[str, str] | None:
    """(trace id, parent span id) as lower-case hex, or None when the header is absent or not valid."""
    if not value:
        return None
    m = _TRACEPARENT.match(value.strip())
    if m is None:
        return None
    version, trace_id, parent_id, _flags, rest = m.groups()
    if version == "ff" or (version == "00" and rest) or trace_id == _ZERO_TRACE or parent_id == _ZERO_SPAN:
        return None
    return trace_id, parent_id


def _derived(kind: bytes, exchange_id: str, nbytes: int) -> str:
    digest = hashlib.sha256(b"converse-tap " + kind + b" " + exchange_id.encode("utf-8", "surrogateescape"))
    value = digest.digest()[:nbytes]
    if not any(value):  # all-zero ids are invalid; a digest that starts with 8 zero bytes is not going to happen
        value = b"\x01" + value[1:]
    return value.hex()


def span_id_for(exchange_id: str) -> str:
    return _derived(b"span", exchange_id, 8)


def trace_columns(headers: Headers, exchange_id: str) -> dict[str, str | None]:
    """The exchanges row's `trace_id`, `span_id` and `parent_span_id`."""
    trace_id, span_id, parent_span_id = trace_ids(headers, exchange_id)
    return {"trace_id": trace_id, "span_id": span_id, "parent_span_id": parent_span_id}


def trace_ids(headers: Headers, exchange_id: str) -> tuple[str, str, str | None]:
    """(trace id, span id, parent span id): `trace_columns`' values."""
    values = headers.get_all("traceparent")
    parent = parse_traceparent(values[0]) if len(values) == 1 else None  # two headers: W3C says ignore both
    raw = exchange_id.encode("utf-8", "surrogateescape")
    span = _sha256(b"converse-tap span " + raw).digest()[:8]
    if span == _ZERO_8:  # all-zero ids are invalid (as _derived)
        span = b"\x01" + span[1:]
    if parent:
        return parent[0], span.hex(), parent[1]
    trace = _sha256(b"converse-tap trace " + raw).digest()[:16]
    if trace == _ZERO_16:
        trace = b"\x01" + trace[1:]
    return trace.hex(), span.hex(), None


_sha256 = hashlib.sha256
_ZERO_8, _ZERO_16 = bytes(8), bytes(16)


def own_trace_id(exchange_id: str) -> str:
    """The trace of an exchange that came without a `traceparent` (also for rows written before schema 2)."""
    return _derived(b"trace", exchange_id, 16)
