"""Pure extraction: one HttpExchange -> one exchanges row, its message sightings, and any agent cards."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from . import fastjson
from .card import card_fields
from .classify import A2ARequest, classify
from .constants import CONVERSE_URI, TERMINAL_TASK_STATES
from .envelope import empty_envelope, find_envelope, flatten_envelope
from .exchange import HttpExchange
from .grpc import DEFAULT_MAX, extract_grpc_response, request_params
from .headers import split_uris
from .objects import (
    Sighting,
    Walk,
    extensions_of,
    get,
    normalise_role,
    part_kind,
    parts_of,
    text_of,
    walk_result,
)
from .redact import NO_OPERATOR_PATTERNS, Redaction, TextPolicy, redact_card_json
from .sse import SseEvent, parse_sse
from .traceparent import trace_columns

_AGENT_ID = re.compile(r"^(?:[A-Za-z]{1,10}_[A-Za-z0-9_-]{6,}|[0-9a-fA-F]{8}-[0-9a-fA-F-]{27})$")
# the exchanges table's columns (store.schema.EXCHANGES, which this layer does not import; a test holds them equal)
EXCHANGE_COLUMNS = (
    "exchange_id",
    "ts_start",
    "ts_first_byte",
    "ts_end",
    "client_addr",
    "server_addr",
    "url",
    "http_method",
    "http_version",
    "agent",
    "agent_url",
    "agent_id",
    "binding",
    "dialect",
    "method",
    "method_raw",
    "jsonrpc_id",
    "a2a_version",
    "extensions_requested",
    "extensions_echoed",
    "converse_requested",
    "converse_echoed",
    "status_code",
    "content_type",
    "error_code",
    "error_status",
    "error_message",
    "error_reason",
    "streamed",
    "sse_events",
    "bytes_in",
    "bytes_out",
    "context_id",
    "task_id",
    "task_state",
    "complete",
    "error",
    "messages",
    "replies",
    "source",
    "anomalies",
    "trace_id",
    "span_id",
    "parent_span_id",
)
_MESSAGE_METHODS = frozenset({"SendMessage", "SendStreamingMessage"})


@dataclass(slots=True)
class Extraction:
    exchange: dict[str, Any]
    messages: list[dict[str, Any]] = field(default_factory=list)
    agent_cards: list[dict[str, Any]] = field(default_factory=list)
    first_event: float | None = None  # when a stream's first SSE event arrived (not a column: live metrics only)


def agent_of(agent_url: str, redaction: Redaction = NO_OPERATOR_PATTERNS) -> tuple[str, str | None]:
    """(agent key, agent id): the id is the last path segment when it looks like one (e.g. `ag_…`).

    Taken from the redacted URL: no userinfo, no credential shape in the path.
    """
    parts = urlsplit(redaction.url(agent_url))
    segments = [s for s in parts.path.split("/") if s]
    agent_id = segments[-1] if segments and _AGENT_ID.match(segments[-1]) else None
    return agent_id or f"{parts.netloc}{parts.path.rstrip('/')}", agent_id


def _loads(data: bytes | str) -> tuple[Any, str | None]:
    try:
        return fastjson.loads(data), None
    except RecursionError:
        return None, "json_too_deep"
    except ValueError as e:
        return None, f"invalid_json:{type(e).__name__}"


def _error_fields(err: Any) -> dict[str, Any]:
    """JSON-RPC error object or REST error body -> code/status/message/reason."""
    out: dict[str, Any] = {
        "error_code": None,
        "error_status": None,
        "error_message": None,
        "error_reason": None,
    }
    if not isinstance(err, dict):
        out["error_message"] = None if err is None else str(err)[:500]
        return out
    if isinstance(err.get("error"), dict):  # REST {"error": {...}} or a whole JSON-RPC response
        err = err["error"]
    code = err.get("code", err.get("status") if isinstance(err.get("status"), int) else None)
    if isinstance(code, int | float) and not isinstance(code, bool) and math.isfinite(code):
        out["error_code"] = int(code)  # one the column cannot hold is mended, flagged, by the writer
    status = err.get("status")
    out["error_status"] = status if isinstance(status, str) else None
    msg = err.get("message", err.get("detail", err.get("title")))
    out["error_message"] = msg if isinstance(msg, str) else None
    details = err.get("data", err.get("details"))
    if isinstance(details, dict):
        details = [details]
    if isinstance(details, list):
        for d in details:
            if isinstance(d, dict) and isinstance(d.get("reason"), str):
                out["error_reason"] = d["reason"]
                break
    return out


MAX_ANOMALIES = 50
_SETTLED_STATES = TERMINAL_TASK_STATES | {"TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"}


def extract(
    ex: HttpExchange,
    policy: TextPolicy,
    req: A2ARequest | None = None,
    *,
    redaction: Redaction = NO_OPERATOR_PATTERNS,
) -> Extraction | None:
    """Rows for one exchange, or None when it is not A2A. Never raises on odd payloads: they become anomalies.

    Every URL stored (exchange, agent, card URLs, citation sources, URLs inside card and envelope JSON) and the
    agent key pass through `redaction`: built-in credential shapes plus the operator's patterns
    (`Redaction.from_patterns`).
    """
    extractor = Extractor.start(ex, policy, req, redaction=redaction)
    if extractor is None:
        return None
    if ex.sse_events is not None:
        for ev in ex.sse_events:
            extractor.event(ev)
    return extractor.finish()


class Extractor:
    """One exchange's extraction, fed as it happens: `start` once the response headers are known (or the whole
    exchange is), `event` for each SSE event of a live stream (its data is then dropped), `finish` at the end,
    after the caller has filled in the exchange's end (ts_end, bytes_out, error)."""

    __slots__ = ("confirmed", "ctx", "ex", "n_events", "out", "req", "settled", "walk")

    def __init__(self, ex: HttpExchange, req: A2ARequest, out: Extraction, ctx: _Ctx) -> None:
        self.ex, self.req, self.out, self.ctx = ex, req, out, ctx
        self.walk = Walk()
        self.confirmed = req.certain or "a2a+json" in (out.exchange["content_type"] or "")
        self.n_events = 0
        self.settled = False  # a stream's final A2A event has been seen

    @classmethod
    def start(
        cls,
        ex: HttpExchange,
        policy: TextPolicy,
        req: A2ARequest | None = None,
        *,
        redaction: Redaction = NO_OPERATOR_PATTERNS,
    ) -> Extractor | None:
        if req is None:
            req = classify(ex.method, ex.url, ex.request_headers, ex.request_body, ex.request_prefix)
            if req is None:
                return None
        if req.binding == "grpc":
            request_params(req)  # the request message, decoded here (in the worker), not in the proxy
        anomalies: list[str] = list(req.anomalies) + list(ex.anomalies)
        agent_url = redaction.url(req.agent_url)
        agent, agent_id = agent_of(agent_url)
        hdr = ex.request_headers
        requested = split_uris(hdr.get_all("a2a-extensions") + hdr.get_all("x-a2a-extensions"))
        resp_hdr = ex.response_headers
        echoed = split_uris(resp_hdr.get_all("a2a-extensions") + resp_hdr.get_all("x-a2a-extensions"))
        converse_requested = CONVERSE_URI in requested
        content_type = (resp_hdr.get("content-type") or "").lower()
        row: dict[str, Any] = {
            "exchange_id": ex.id,
            "ts_start": ex.ts_start,
            "ts_first_byte": ex.ts_first_byte,
            "ts_end": None,
            "client_addr": ex.client_addr,
            "server_addr": ex.server_addr,
            "url": redaction.url(ex.url),
            "http_method": ex.method.upper(),
            "http_version": ex.http_version,
            "agent": agent,
            "agent_url": agent_url,
            "agent_id": agent_id,
            "binding": req.binding,
            "dialect": req.dialect,
            "method": req.method,
            "method_raw": req.method_raw,
            "jsonrpc_id": req.jsonrpc_id,
            "a2a_version": hdr.get("a2a-version"),
            "extensions_requested": requested,
            "extensions_echoed": echoed,
            "converse_requested": converse_requested,
            "converse_echoed": CONVERSE_URI in echoed,
            "status_code": ex.status,
            "content_type": content_type or None,
            "error_code": None,
            "error_status": None,
            "error_message": None,
            "error_reason": None,
            "streamed": False,
            "sse_events": None,
            "bytes_in": ex.bytes_in,
            "bytes_out": None,
            "context_id": None,
            "task_id": req.task_id,
            "task_state": None,
            "complete": False,
            "error": None,
            "messages": 0,
            "replies": 0,
            "source": ex.source,
            "anomalies": anomalies,
            **trace_columns(hdr, ex.id),
        }
        out = Extraction(row)
        ctx = _Ctx(ex, policy, req, out, agent, agent_url, agent_id, converse_requested, redaction)
        # the request's own message (SendMessage / SendStreamingMessage)
        if req.method in _MESSAGE_METHODS:
            params = req.params
            msg = None
            if isinstance(params, dict):  # v0.3 REST proto names the field "request"
                msg = params.get("message") if isinstance(params.get("message"), dict) else params.get("request")
            if isinstance(msg, dict):
                ctx.add(Sighting("request.message", "message", "request", msg), "request", None, ex.ts_start)
                row["context_id"] = _id(get(msg, "contextId"))
                row["task_id"] = row["task_id"] or _id(get(msg, "taskId"))
            else:
                anomalies.append("request_without_message")
        extractor = cls(ex, req, out, ctx)
        if ex.status is not None and (ex.sse_events is not None or content_type.startswith("text/event-stream")):
            row["streamed"] = True
            row["sse_events"] = 0
        return extractor

    def event(self, ev: SseEvent) -> None:
        """One SSE event of the response, in order."""
        i = self.n_events
        self.n_events += 1
        if i == 0:
            self.out.first_event = ev.received
        self.settled = False
        row = self.out.exchange
        if ev.oversize:
            row["anomalies"].append(f"sse_event_too_large:{i}")
            return
        doc, err = _loads(ev.data)
        if err:
            row["anomalies"].append(f"{err}:event[{i}]")
            return
        self.confirmed |= self.ctx.payload(doc, self.walk, i, ev.event == "error", ev.received or self.ex.ts_end)
        if ev.event == "error" or _final(doc) or self.walk.task_state in _SETTLED_STATES:
            self.settled = True
        elif self.walk.event_kinds and self.walk.event_kinds[-1] == "message":
            self.settled = True  # a stream answered with a Message ends with it

    def note(self, anomaly: str) -> None:
        """An anomaly the capture noticed after `start` (on the exchange's row)."""
        self.out.exchange["anomalies"].append(anomaly)

    def finish(self, partial: bool = False) -> Extraction | None:
        """`partial`: bytes of a further event had arrived when the stream ended, so it did not end settled."""
        ex, req, row, walk = self.ex, self.req, self.out.exchange, self.walk
        if partial:
            self.settled = False
        row["ts_end"] = ex.ts_end
        row["bytes_out"] = ex.bytes_out
        row["error"] = None if ex.error is None else self.ctx.redaction.log_text(ex.error)
        row["complete"] = ex.error is None and ex.status is not None
        if ex.status is None:
            if ex.error is None:
                row["anomalies"].append("no_response")
            return _finish(self.out, walk, req, confirmed=req.certain)
        content_type = row["content_type"] or ""
        if req.binding == "grpc":

            def payload(doc: Any, index: int | None, error_event: bool, ts: float | None) -> bool:
                return self.ctx.payload(doc, walk, index, error_event, ts)

            extract_grpc_response(ex, req, row, payload, DEFAULT_MAX)
            if ex.status >= 400 and row["error_code"] is None:
                row["error_code"] = ex.status
            cut = any(a.startswith("grpc_frame_truncated") for a in row["anomalies"])
            kinds = walk.event_kinds
            if not row["complete"] and ex.error is not None and req.streaming and kinds and not cut:
                # the client left once the final message was in (the a2a-sdk client cancels after a Message),
                # before the agent's trailers reached the proxy: nothing of the exchange is missing
                row["complete"] = kinds[-1] == "message" or walk.task_state in _SETTLED_STATES
            return _finish(self.out, walk, req, True)
        if row["streamed"]:
            if ex.sse_events is None and ex.response_body is not None and self.n_events == 0:
                events, ex.sse_comments = parse_sse(ex.response_body)
                for ev in events:
                    self.event(ev)
            row["sse_events"] = max(self.n_events, row["sse_events"] or 0)
            if not row["complete"] and self.settled and ex.status < 400:
                row["complete"] = True  # the client left after the final event: nothing was missed
        elif ex.response_body is not None and ex.response_body.strip():
            doc, err = _loads(ex.response_body)
            if err:
                if content_type.startswith("application/json") or "a2a" in content_type or req.certain:
                    row["anomalies"].append(err)
            else:
                if req.streaming and ex.status < 400:
                    row["anomalies"].append("stream_answered_with_json")
                self.confirmed |= self.ctx.payload(doc, walk, None, False, ex.ts_first_byte or ex.ts_end)
        elif ex.status < 300 and ex.status != 204 and req.binding != "card" and ex.response_body is not None:
            row["anomalies"].append("empty_body")
        if ex.status >= 400 and row["error_code"] is None:
            row["error_code"] = ex.status
        return _finish(self.out, walk, req, self.confirmed)


def _sample(anomalies: list[str], per_kind: int = 5) -> list[str]:
    """A stream can repeat one oddity a million times: keep the first few of each kind, and say how many went."""
    seen: dict[str, int] = {}
    kept: list[str] = []
    for a in anomalies:
        kind = a.split(":", 1)[0]
        seen[kind] = seen.get(kind, 0) + 1
        if seen[kind] <= per_kind and len(kept) < MAX_ANOMALIES - 1:
            kept.append(a)
    kept.append(f"more_anomalies:{len(anomalies) - len(kept)}")
    return kept


def failed_extraction(
    ex: HttpExchange, error: BaseException, redaction: Redaction = NO_OPERATOR_PATTERNS
) -> Extraction:
    """The row of an exchange whose extraction failed: what the capture itself knows, and an anomaly that says
    why; the rest of the dataset is unaffected."""
    url = redaction.url(ex.url)
    agent, agent_id = agent_of(url)
    row: dict[str, Any] = dict.fromkeys(EXCHANGE_COLUMNS)
    row.update(
        exchange_id=ex.id,
        ts_start=ex.ts_start,
        ts_first_byte=ex.ts_first_byte,
        ts_end=ex.ts_end,
        client_addr=ex.client_addr,
        server_addr=ex.server_addr,
        url=url,
        http_method=ex.method.upper(),
        http_version=ex.http_version,
        agent=agent,
        agent_url=url,
        agent_id=agent_id,
        binding="unknown",
        dialect="unknown",
        method="unknown",
        converse_requested=False,
        converse_echoed=False,
        status_code=ex.status,
        streamed=ex.sse_events is not None,
        bytes_in=ex.bytes_in,
        bytes_out=ex.bytes_out,
        complete=ex.error is None and ex.status is not None,
        error=None if ex.error is None else redaction.log_text(ex.error),
        messages=0,
        replies=0,
        source=ex.source,
        anomalies=[*ex.anomalies, f"extraction_failed:{type(error).__name__}"],
        **trace_columns(ex.request_headers, ex.id),
    )
    return Extraction(row)


def _final(doc: Any) -> bool:
    """A streamed JSON-RPC result or REST event that says it is the last one (`final: true`, v0.3)."""
    if not isinstance(doc, dict):
        return False
    result = doc.get("result", doc)
    if not isinstance(result, dict):
        return False
    if result.get("final") is True:
        return True
    return any(isinstance(v, dict) and v.get("final") is True for v in result.values())


def _finish(out: Extraction, walk: Walk, req: A2ARequest, confirmed: bool) -> Extraction | None:
    if not confirmed:
        return None
    row = out.exchange
    row["anomalies"].extend(walk.anomalies)
    if len(row["anomalies"]) > MAX_ANOMALIES:
        row["anomalies"] = _sample(row["anomalies"])
    row["context_id"] = walk.context_id or row["context_id"]
    row["task_id"] = walk.task_id or row["task_id"]
    row["task_state"] = walk.task_state
    responses = [m for m in out.messages if m["direction"] == "response"]
    row["messages"] = len(out.messages)
    row["replies"] = sum(1 for m in responses if m["has_envelope"] and m["role"] == "agent")
    if req.method in _MESSAGE_METHODS and row["error_code"] is None:
        fresh = [m for m in responses if ".history[" not in m["location"] and m["role"] != "user"]
        if row["converse_requested"] and fresh and not any(m["has_envelope"] for m in fresh):
            row["anomalies"].append("converse_requested_no_envelope")
        if not row["converse_requested"] and any(m["has_envelope"] for m in fresh):
            row["anomalies"].append("envelope_not_requested")
    if row["converse_echoed"] and not row["converse_requested"]:
        row["anomalies"].append("converse_echoed_not_requested")
    for m in out.messages:  # sightings inherit what the exchange learnt about their task
        m["context_id"] = m["context_id"] or row["context_id"]
        m["task_id"] = m["task_id"] or (row["task_id"] if m["direction"] == "response" else m["task_id"])
    return out


@dataclass(slots=True)
class _Ctx:
    ex: HttpExchange
    policy: TextPolicy
    req: A2ARequest
    out: Extraction
    agent: str
    agent_url: str
    agent_id: str | None
    converse_requested: bool
    redaction: Redaction

    def payload(self, doc: Any, walk: Walk, event_index: int | None, error_event: bool, ts: float | None) -> bool:
        """Handle one parsed response document; returns True when it confirms the exchange is A2A."""
        row = self.out.exchange
        req = self.req
        where = "" if event_index is None else f"event[{event_index}]"
        if req.binding == "card":
            self._card(doc, "well-known", ts)
            return True
        if req.binding == "jsonrpc":
            if not isinstance(doc, dict):
                row["anomalies"].append(f"jsonrpc_response_not_object{':' + where if where else ''}")
                return False
            if (
                req.jsonrpc_id is not None
                and "id" in doc
                and doc["id"] is not None
                and str(doc["id"]) != req.jsonrpc_id
            ):
                row["anomalies"].append("jsonrpc_id_mismatch")
            if "error" in doc or error_event:
                self._error(doc.get("error", doc))
                return True
            if "result" not in doc:
                row["anomalies"].append(f"jsonrpc_without_result{':' + where if where else ''}")
                return False
            result = doc["result"]
            if req.method == "GetExtendedAgentCard":
                self._card(result, "extended", ts)
                return True
            before = len(walk.sightings)
            walk_result(result, "result" if event_index is None else f"event[{event_index}].result", walk)
            self._sightings(walk, before, event_index, ts)
            return True
        # REST
        status = self.ex.status or 0
        if error_event or status >= 400 or (isinstance(doc, dict) and "error" in doc and len(doc) <= 2):
            self._error(doc)
            return _is_a2a_error(doc)
        if req.method == "GetExtendedAgentCard":
            self._card(doc, "extended", ts)
            return isinstance(doc, dict) and ("skills" in doc or "capabilities" in doc)
        before = len(walk.sightings)
        kinds = len(walk.event_kinds)
        walk_result(doc, "body" if event_index is None else f"event[{event_index}]", walk)
        self._sightings(walk, before, event_index, ts)
        return len(walk.event_kinds) > kinds or (isinstance(doc, dict) and isinstance(doc.get("tasks"), list))

    def _error(self, err: Any) -> None:
        row = self.out.exchange
        fields = _error_fields(err)
        if fields["error_message"] is not None:  # servers quote the URL they were asked for, userinfo and all
            fields["error_message"] = self.redaction.log_text(fields["error_message"])
        if row["error_code"] is None and row["error_message"] is None:
            row.update(fields)

    def _card(self, doc: Any, source: str, ts: float | None) -> None:
        anomalies: list[str] = []
        fields = card_fields(doc, anomalies, self.redaction)
        card_row = {
            "exchange_id": self.ex.id,
            "ts": ts,
            "url": self.redaction.url(self.ex.url),
            "agent": self.agent,
            "agent_url": self.agent_url,
            "agent_id": self.agent_id,
            "source": source,
            **fields,
            "anomalies": anomalies,
        }
        self.out.agent_cards.append(card_row)

    def _sightings(self, walk: Walk, start: int, event_index: int | None, ts: float | None) -> None:
        for s in walk.sightings[start:]:
            self.add(s, "response", event_index, ts)

    def add(self, s: Sighting, direction: str, event_index: int | None, ts: float | None) -> None:
        anomalies: list[str] = []
        obj = s.obj
        is_artifact = s.object_kind == "artifact"
        role = None if is_artifact else normalise_role(obj.get("role"), anomalies)
        parts = parts_of(obj)
        text = text_of(parts)
        exts = extensions_of(obj, anomalies)
        present, raw = find_envelope(obj.get("metadata"), exts, anomalies, agent_side=role != "user")
        env = flatten_envelope(raw, anomalies) if present else empty_envelope()
        for c in env.get("citations") or []:
            c["source_url"] = self.redaction.maybe_url(c["source_url"])
        stored = env.get("envelope_json")
        if stored is not None and (self.redaction.patterns or "://" in stored):  # else there is nothing to redact
            env["envelope_json"] = redact_card_json(raw, self.redaction, stored)
        if (
            not present
            and self.converse_requested
            and direction == "response"
            and role != "user"
            and ".history[" not in s.location
            and self.req.method in _MESSAGE_METHODS
        ):
            anomalies.append("envelope_missing")
        ident = get(obj, "artifactId") if is_artifact else get(obj, "messageId")
        self.out.messages.append(
            {
                "exchange_id": self.ex.id,
                "seq": len(self.out.messages),
                "ts": ts,
                "direction": direction,
                "event_index": event_index,
                "event_kind": s.event_kind,
                "location": s.location,
                "object_kind": s.object_kind,
                "agent": self.agent,
                "agent_url": self.agent_url,
                "agent_id": self.agent_id,
                "binding": self.req.binding,
                "dialect": self.req.dialect,
                "method": self.req.method,
                "message_id": ident if isinstance(ident, str) and ident else None,
                "artifact_name": obj.get("name") if is_artifact and isinstance(obj.get("name"), str) else None,
                "context_id": _id(get(obj, "contextId")) or s.context_id,
                "task_id": _id(get(obj, "taskId")) or s.task_id,
                "role": role,
                "task_state": s.task_state,
                "text": self.policy.apply(text),
                "text_length": None if text is None else len(text),
                "part_kinds": [part_kind(p) for p in parts],
                "extensions": exts,
                "has_envelope": present,
                **env,
                "anomalies": anomalies,
            }
        )
        if not isinstance(ident, str) or not ident:
            anomalies.append("missing:artifactId" if is_artifact else "missing:messageId")


def _id(value: Any) -> str | None:
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else str(value)


def _is_a2a_error(doc: Any) -> bool:
    if not isinstance(doc, dict):
        return False
    err = doc.get("error")
    if not isinstance(err, dict):
        return False
    details = err.get("details")
    return isinstance(details, list) and any(
        isinstance(d, dict) and d.get("domain") == "a2a-protocol.org" for d in details
    )
