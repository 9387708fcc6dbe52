"""One exchange's rows -> the description of its span: name, ids, times, attributes and events.

Pure and SDK-free, so the live export (the recording worker), the backfill (`export otlp`) and the tests build
spans the same way. Rows carry timestamps as integer microseconds since the epoch (as the writer hands them on).

Names follow OpenTelemetry's GenAI conventions for A2A and the open proposal for A2A streams; the converse
envelope goes into `converse.*` attributes of one `converse.reply` event per reply, and each assessed coverage
verdict is also a `gen_ai.evaluation.result` event. No message text unless the caller asks for it (`text`),
and then only what the dataset's policy kept (`keep`): a hashed or dropped text never leaves.

Every string goes out carriable (export/values.py: lone surrogates escaped as the stored rows escape them). A span
is named by its A2A method, or OTHER_METHOD (as OpenTelemetry names an unknown HTTP method) when A2A defines no
such method: the recorder keeps whatever method a request with A2A headers names, and a caller sending made-up
methods made one span name per call, where names are meant to be few (backends index them, span metrics make a
series of each). `a2a.method.name` has the method either way. Ids that are not W3C ids (a tampered dataset) are
replaced by the derived ones.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..a2a import urls
from ..a2a.constants import CARD_METHOD, JSONRPC_V1_METHODS, PUSH_METHOD
from ..a2a.exchange_row import agent_of
from ..a2a.traceparent import own_trace_id, span_id_for
from .values import fit, hex_id

BINDINGS = ("jsonrpc", "rest", "grpc")  # `card` (a well-known card fetch) has no A2A binding: left out
METHODS = frozenset(JSONRPC_V1_METHODS) | {CARD_METHOD, PUSH_METHOD}  # span names (v1.0 names, whatever the dialect)
OTHER_METHOD = "_OTHER"


@dataclass(slots=True)
class SpanEvent:
    name: str
    ts: int  # ns
    attributes: dict[str, Any]


@dataclass(slots=True)
class SpanData:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str | None
    start: int  # ns since the epoch
    end: int
    attributes: dict[str, Any]
    events: list[SpanEvent] = field(default_factory=list)
    error: str | None = None  # error.type, when the span's status is an error


def span_bytes(data: SpanData) -> int:
    """About what a span takes in an OTLP request: its name, its attributes' keys and values and its events'
    (strings as UTF-8, a fixed amount for each attribute, event and span beside)."""
    total = 64 + _size(data.name)
    for attrs in (data.attributes, *(ev.attributes for ev in data.events)):
        total += 24 + sum(len(k) + 12 + (_size(v) if isinstance(v, str) else 8) for k, v in attrs.items())
    return total


def _size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8", "surrogatepass"))


def card_agents(card: dict[str, Any]) -> list[str]:
    """The agent keys a card row names: the agent it was fetched from and each interface it lists."""
    keys = [card["agent"]]
    for iface in card.get("interfaces") or ():
        if isinstance(iface, dict) and iface.get("url"):
            keys.append(agent_of(iface["url"])[0])
    return keys


def _ns(micros: Any) -> int | None:
    return None if micros is None else int(micros) * 1000


def _put(attrs: dict[str, Any], key: str, value: Any) -> None:
    if value is not None:
        attrs[key] = value


def is_reply(m: dict[str, Any]) -> bool:
    """As the exchanges row counts `replies`: an agent message with the converse envelope, in the response."""
    return m["direction"] == "response" and bool(m["has_envelope"]) and m["role"] == "agent"


def reply_attributes(m: dict[str, Any], text: bool = False) -> dict[str, Any]:
    attrs: dict[str, Any] = {}
    for key, column in (
        ("a2a.message.id", "message_id"),
        ("converse.author", "author"),
        ("converse.coverage", "coverage"),
        ("converse.coverage.reason", "coverage_reason"),
        ("converse.coverage.availability", "coverage_availability"),
        ("converse.ownership.state", "ownership_state"),
        ("converse.routine.name", "routine_name"),
        ("converse.routine.status", "routine_status"),
        ("converse.invocation.outcome", "invocation_outcome"),
    ):
        _put(attrs, key, m.get(column))
    if m.get("ownership_suppressed") is not None:
        attrs["converse.ownership.suppressed"] = bool(m["ownership_suppressed"])
    if m.get("pending_required_open") is not None:
        attrs["converse.routine.pending_required"] = int(m["pending_required_open"])
    if m.get("citation_count") is not None:
        attrs["converse.citations.count"] = int(m["citation_count"])
    if text and isinstance(m.get("text"), str) and not m["text"].startswith("sha256:"):
        attrs["converse.text"] = m["text"]
    return _fitted(attrs)


def _fitted(attrs: dict[str, Any]) -> dict[str, Any]:
    return {k: fit(v) for k, v in attrs.items()}


def build_span(
    row: dict[str, Any],
    messages: list[dict[str, Any]],
    agent_name: str | None = None,
    first_event: float | None = None,
    text: bool = False,
) -> SpanData:
    """`text`: put message text into the reply events; the caller passes it only when the opt-in is on and the
    dataset's policy is `keep`."""
    exchange_id = row["exchange_id"]
    start = _ns(row.get("ts_start"))
    times = [t for t in (_ns(row.get("ts_end")), _ns(row.get("ts_first_byte"))) if t is not None]
    times += [t for m in messages if (t := _ns(m.get("ts"))) is not None]
    if start is None:
        start = min(times, default=0)
    end = max([start, *times]) if row.get("ts_end") is None else max(start, _ns(row["ts_end"]) or start)
    attrs: dict[str, Any] = {"a2a.method.name": row["method"]}
    dialect = row.get("dialect") or ""
    _put(attrs, "a2a.protocol.version", row.get("a2a_version") or (dialect[1:] if dialect.startswith("v") else None))
    _put(attrs, "a2a.task.id", row.get("task_id"))
    _put(attrs, "a2a.task.state", row.get("task_state"))
    request_ids = [m["message_id"] for m in messages if m["direction"] == "request" and m.get("message_id")]
    _put(attrs, "a2a.message.id", request_ids[0] if request_ids else None)
    _put(attrs, "gen_ai.conversation.id", row.get("context_id"))
    error_type = None if row.get("error_code") is None else str(row["error_code"])
    _put(attrs, "error.type", error_type)
    _put(attrs, "http.response.status_code", row.get("status_code"))
    _put(attrs, "http.request.method", row.get("http_method"))
    if row.get("agent_url"):
        host, port = urls.host_port(row["agent_url"])  # the lenient parser: never raises on a stored URL
        _put(attrs, "server.address", host)
        _put(attrs, "server.port", port)
    _put(attrs, "gen_ai.agent.name", agent_name)
    _put(attrs, "gen_ai.agent.id", row.get("agent_id"))
    if row.get("binding") in BINDINGS:
        attrs["a2a.protocol.binding"] = row["binding"]
    if row.get("streamed"):
        attrs["a2a.response.sse.event.count"] = int(row.get("sse_events") or 0)
        if first_event is None:  # a backfill: the first event that carried a message
            seen = [m["ts"] for m in messages if m.get("event_index") is not None and m.get("ts") is not None]
            first_event = min(seen) / 1e6 if seen else None
        if first_event is not None and row.get("ts_start") is not None:
            attrs["a2a.response.time_to_first_event"] = max(0.0, first_event - row["ts_start"] / 1e6)
    _put(attrs, "converse.exchange.id", exchange_id)
    if not row.get("complete"):
        attrs["converse.exchange.complete"] = False
    events: list[SpanEvent] = []
    for m in messages:
        if not is_reply(m):
            continue
        ts = _ns(m.get("ts")) or end
        events.append(SpanEvent("converse.reply", ts, reply_attributes(m, text)))
        if m.get("coverage_availability") == "assessed" and m.get("coverage") is not None:
            verdict = {"gen_ai.evaluation.name": "answer_coverage", "gen_ai.evaluation.score.label": m["coverage"]}
            _put(verdict, "gen_ai.evaluation.explanation", m.get("coverage_reason"))
            _put(verdict, "a2a.message.id", m.get("message_id"))
            events.append(SpanEvent("gen_ai.evaluation.result", ts, _fitted(verdict)))
    failed = error_type is not None or (row.get("status_code") or 0) >= 500
    if not failed and not row.get("complete") and row.get("error"):
        error_type = "incomplete"
        failed = True
    trace_id = hex_id(row.get("trace_id"), 32)
    parent = hex_id(row.get("parent_span_id"), 16) if trace_id else None  # the caller's span, in the caller's trace
    return SpanData(
        name=row["method"] if row["method"] in METHODS else OTHER_METHOD,
        trace_id=trace_id or own_trace_id(exchange_id),
        span_id=hex_id(row.get("span_id"), 16) or span_id_for(exchange_id),
        parent_span_id=parent,
        start=start,
        end=end,
        attributes=_fitted(attrs),
        events=events,
        error=(error_type or "error") if failed else None,
    )
