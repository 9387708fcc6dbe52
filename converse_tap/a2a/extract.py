"""Pure extraction: one HttpExchange -> one exchanges row, its message sightings, and any agent cards.

The rows of each response document are built by `rows.Ctx`."""

from __future__ import annotations

from typing import Any

from . import fastjson, urls
from .charset import NOT_UTF8, loads_not_utf8
from .classify import A2ARequest, classify
from .constants import PUSH_AGENT, PUSH_BINDING, TERMINAL_TASK_STATES
from .envelope import clip
from .exchange import HttpExchange
from .exchange_row import EXCHANGE_ROW, agent_of
from .finish import finish_extraction, said
from .grpc import DEFAULT_MAX, extract_grpc_response, message_payload, request_params
from .grpc_frames import GrpcFrame
from .grpc_web import WebTrailers
from .headers import activated, split_uris
from .objects import Sighting, Walk, get
from .push import read_delivery
from .redact import NO_OPERATOR_PATTERNS, Redaction, TextPolicy
from .rows import MESSAGE_METHODS, Ctx, Extraction, id_or_none
from .sse import SseEvent, parse_sse
from .traceparent import trace_ids


def _loads(data: Any, content_type: str | None = None, notes: list[str] | None = None) -> tuple[Any, str | None]:
    """The document (and None), or (None, why no parser takes it). With `notes`, a reply's body that is not UTF-8
    (a first parse said NOT_UTF8): read as `charset.loads_not_utf8` reads it, and said in `notes`."""
    try:
        if notes is None:
            return fastjson.loads(data), None
        doc, note = loads_not_utf8(data, content_type, "response")
        notes.append(note)
        return doc, None
    except RecursionError:
        return None, "json_too_deep"
    except fastjson.TooManyValues:
        return None, f"json_too_many_values:{fastjson.MAX_VALUES}"
    except ValueError as e:
        return None, f"invalid_json:{type(e).__name__}"


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

    __slots__ = ("_web", "confirmed", "ctx", "ended", "ex", "mark", "n_events", "out", "req", "settled", "walk")

    def __init__(self, ex: HttpExchange, req: A2ARequest, out: Extraction, ctx: Ctx) -> None:
        self.ex, self.req, self.out, self.ctx = ex, req, out, ctx
        # a status timestamp is a google.protobuf.Timestamp in v1.0 and on HTTP+JSON (ProtoJSON: RFC 3339 with its
        # zone); v0.3 JSON-RPC calls it an ISO 8601 string, and gRPC's are decoded from the wire's own
        self.walk = walk = Walk()
        binding = req.binding
        if binding == "jsonrpc":
            if req.dialect == "v0.3":
                walk.v03 = True
            else:
                walk.stamps = True
        elif binding == "rest":
            walk.stamps = True
        self.confirmed = req.certain or "a2a+json" in (out.exchange["content_type"] or "")
        self.n_events = 0
        self.settled = False  # a stream's final A2A event has been seen
        # its last event was in (`final`, an error, a terminal state, a Message: a client stops reading there):
        # None not yet, True yes, False yes and a later event said so (once)
        self.ended: bool | None = None
        self._web: WebTrailers | None = None  # made for a gRPC response only
        self.mark = len(out.exchange["anomalies"])  # where a gRPC response's own notes begin

    @property
    def web(self) -> WebTrailers:
        """A live gRPC-Web response's trailers frames."""
        if self._web is None:
            self._web = WebTrailers()
        return self._web

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
        anomalies: list[str] = [*req.anomalies, *ex.anomalies, *urls.anomalies(ex.url)]
        agent_url = redaction.url(req.agent_url)
        # (a push delivery's URL is the client's webhook: its agent is not known here, see push.py)
        agent, agent_id = agent_of(agent_url) if req.binding != PUSH_BINDING else (PUSH_AGENT, None)
        hdr = ex.request_headers
        asked = hdr.get_both("a2a-extensions", "x-a2a-extensions")
        requested = split_uris(asked, redaction, anomalies, "extensions_requested") if asked else []
        resp_hdr = ex.response_headers
        sent = resp_hdr.get_both("a2a-extensions", "x-a2a-extensions")
        echoed = split_uris(sent, redaction, anomalies, "extensions_echoed") if sent else []
        converse_requested = activated(asked, requested, "extensions_requested", anomalies)
        converse_echoed = activated(sent, echoed, "extensions_echoed", anomalies)
        content_type = (resp_hdr.get("content-type") or "").lower()
        # the row's columns in their order (EXCHANGE_COLUMNS), set on a copy: cheaper than a display of 44 keys
        row = EXCHANGE_ROW.copy()
        row["exchange_id"] = ex.id
        row["ts_start"] = ex.ts_start
        row["ts_first_byte"] = ex.ts_first_byte
        row["client_addr"] = ex.client_addr
        row["server_addr"] = ex.server_addr
        row["url"] = redaction.url(ex.url)
        row["http_method"] = ex.method.upper()
        row["http_version"] = ex.http_version
        row["agent"] = agent
        row["agent_url"] = agent_url
        row["agent_id"] = agent_id
        row["binding"] = req.binding
        row["dialect"] = req.dialect
        row["method"] = req.method
        row["method_raw"] = req.method_raw
        rid = req.rpc_id
        row["jsonrpc_id"] = None if rid is None else rid if rid.__class__ is str else req.jsonrpc_id
        row["a2a_version"] = hdr.get("a2a-version")
        row["extensions_requested"] = requested
        row["extensions_echoed"] = echoed
        row["converse_requested"] = converse_requested
        row["converse_echoed"] = converse_echoed
        row["status_code"] = ex.status
        row["content_type"] = content_type or None
        row["bytes_in"] = ex.bytes_in
        row["task_id"] = req.task_id
        row["source"] = ex.source
        row["anomalies"] = anomalies
        row["trace_id"], row["span_id"], row["parent_span_id"] = trace_ids(hdr, ex.id)
        out = Extraction(row)
        ctx = Ctx(ex, policy, req, out, agent, agent_url, agent_id, converse_requested, redaction)
        # the request's own message (SendMessage / SendStreamingMessage)
        if req.method in MESSAGE_METHODS:
            params = req.params
            msg = None
            if isinstance(params, dict):  # v0.3 REST proto names the field "request"
                msg = params.get("message") if isinstance(params.get("message"), dict) else params.get("request")
            if isinstance(msg, dict):
                ctx.add(Sighting("request.message", "message", "request", msg), "request", None, ex.ts_start)
                cid, tid = msg.get("contextId"), msg.get("taskId")
                row["context_id"] = id_or_none(cid if cid is not None else get(msg, "contextId"))
                row["task_id"] = row["task_id"] or id_or_none(tid if tid is not None else get(msg, "taskId"))
            elif not said(anomalies, ("request_not_parsed:",)):
                anomalies.append("request_without_message")  # (a request not parsed says so already)
        extractor = cls(ex, req, out, ctx)
        if req.binding == PUSH_BINDING:
            read_delivery(ctx, extractor.walk)
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
        if self.ended:  # (recorded all the same: the agent sent it)
            row["anomalies"].append(f"sse_event_after_final:{i}")
            self.ended = False
        if ev.oversize:
            row["anomalies"].append(f"sse_event_too_large:{i}")
            return
        if ev.not_utf8:
            row["anomalies"].append(f"sse_event_not_utf8:{i}")
        if ev.unterminated:
            row["anomalies"].append(f"sse_event_unterminated:{i}")
        doc, err = _loads(ev.data)
        if err:
            row["anomalies"].append(f"{err}:event[{i}]")
            return
        self.confirmed |= self.ctx.payload(doc, self.walk, i, ev.event == "error", ev.received or self._replied())
        final = ev.event == "error" or _final(doc)
        state = self.walk.task_state
        if final or state in _SETTLED_STATES:
            self.settled = True
            if self.ended is None and (final or state in TERMINAL_TASK_STATES):
                self.ended = True  # (an interrupted state may resume on a subscription: no end)
        elif self.walk.event_kinds and self.walk.event_kinds[-1] == "message":
            self.settled = True  # a stream answered with a Message ends with it
            if self.ended is None:
                self.ended = True

    def grpc_message(self, frame: GrpcFrame, codec: str = "proto") -> None:
        """One message of a gRPC response as it arrives (live), in order; `finish` counts it, and no more. A
        gRPC-Web trailers frame is kept for `finish` (the first) or counted, and is not a message."""
        anomalies = self.out.exchange["anomalies"]
        if self.web.take(frame, anomalies):
            return
        i = self.n_events
        self.n_events += 1
        message_payload(frame, i, self.req, anomalies, self._grpc_payload, self._replied(), codec)

    def _replied(self) -> float | None:
        """When a reply without a time of its own was seen: the exchange's end, else (a HAR that states no
        duration) its start, the one time known."""
        return self.ex.ts_end or self.ex.ts_start

    def _grpc_payload(self, doc: Any, index: int | None, error_event: bool, ts: float | None) -> bool:
        return self.ctx.payload(doc, self.walk, index, error_event, ts)

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
            return finish_extraction(self.out, walk, req, req.certain, self.ctx.redaction)
        content_type = row["content_type"] or ""
        if req.binding == PUSH_BINDING:  # the webhook's answer says only whether it took the delivery
            if ex.status >= 400:
                row["error_code"] = ex.status
            return finish_extraction(self.out, walk, req, True, self.ctx.redaction)
        if req.binding == "grpc":
            extract_grpc_response(
                ex, req, row, self._grpc_payload, DEFAULT_MAX, self.n_events, self.ctx.redaction, self.web, self.mark
            )
            if ex.status >= 400 and row["error_code"] is None:
                row["error_code"] = ex.status
            cut = any(a.startswith("grpc_frame_truncated") for a in row["anomalies"])
            kinds = walk.event_kinds
            if not row["complete"] and ex.error is not None and req.streaming and kinds and not cut:
                # the client left once the final message was in (the a2a-sdk client cancels after a Message),
                # before the agent's trailers reached the proxy: nothing of the exchange is missing
                row["complete"] = kinds[-1] == "message" or walk.task_state in _SETTLED_STATES
            return finish_extraction(self.out, walk, req, True, self.ctx.redaction)
        if row["streamed"]:
            if ex.sse_events is None and ex.response_body is not None and self.n_events == 0:
                events, ex.sse_comments = parse_sse(ex.response_body, ended=ex.error is None)
                for ev in events:
                    self.event(ev)
            row["sse_events"] = max(self.n_events, row["sse_events"] or 0)
            if row["sse_events"] == 0 and ex.status < 400 and ex.error is None and not said(row["anomalies"], _UNSEEN):
                row["anomalies"].append("sse_no_events")  # a stream that said nothing: not a silent success
            if not row["complete"] and self.settled and ex.status < 400:
                row["complete"] = True  # the client left after the final event: nothing was missed
        elif ex.response_body is not None and ex.response_body.strip():
            doc, err = _loads(ex.response_body)
            if err == NOT_UTF8:  # one odd byte costs its own characters, not the reply
                doc, err = _loads(ex.response_body, content_type, row["anomalies"])
            if err:
                if content_type.startswith("application/json") or "a2a" in content_type or req.certain:
                    media = content_type.split(";", 1)[0].strip()
                    if media and "json" not in media and err.startswith("invalid_json"):
                        # a reply that never said it was JSON (fasta2a's `500 Internal Server Error`, text/plain): not
                        # broken JSON, but no JSON at all
                        err = f"response_not_json:{clip(media)}"
                    row["anomalies"].append(err)
            else:
                if req.streaming and ex.status < 400:
                    row["anomalies"].append("stream_answered_with_json")
                self.confirmed |= self.ctx.payload(doc, walk, None, False, ex.ts_first_byte or self._replied())
        elif ex.status < 300 and ex.response_body is not None and (ex.status != 204 or req.rpc_id is not None):
            # a card too: no card is news; and a JSON-RPC call with an id, which a response object must answer, met
            # with 204 No Content (only a notification, without an id, has no answer)
            row["anomalies"].append("empty_body")
        if ex.status >= 400 and row["error_code"] is None:
            row["error_code"] = ex.status
        return finish_extraction(self.out, walk, req, self.confirmed, self.ctx.redaction)


# anomalies that already explain why a stream's events were not seen
_UNSEEN = ("sse_", "response_", "capture_incomplete", "no_response")


def _final(doc: Any) -> bool:
    """A streamed JSON-RPC result or REST event that says it is the last one (`final: true`, v0.3), or a JSON-RPC
    error."""
    if not isinstance(doc, dict):
        return False
    result = doc.get("result")
    if result is None:
        if doc.get("error") is not None:  # an error (JSON-RPC, or a REST body) ends its stream, named or not
            return True
        result = doc
    if not isinstance(result, dict):
        return False
    if result.get("final") is True:
        return True
    for v in result.values():  # noqa: SIM110 (a loop: no generator made per event)
        if isinstance(v, dict) and v.get("final") is True:
            return True
    return False
