"""A mitmproxy content view for A2A bodies: each A2A object in order, with its converse envelope laid out.

Chosen automatically over the JSON view for A2A requests and responses (JSON and SSE). Streamed responses
have a body to show only when mitmproxy stores it: run with `--set store_streamed_bodies=true`.
"""

from __future__ import annotations

from typing import Any

from mitmproxy import http
from mitmproxy.contentviews import Contentview, Metadata

from ..a2a import fastjson
from ..a2a.classify import classify
from ..a2a.envelope import find_envelope, flatten_envelope
from ..a2a.grpc import classify_grpc, decode, is_grpc
from ..a2a.grpc_frames import GrpcFrame, GrpcFrameParser, parser_anomalies
from ..a2a.headers import Headers
from ..a2a.objects import Walk, extensions_of, get, normalise_role, parts_of, text_of, walk_result
from ..a2a.sse import SseParser


def _envelope_lines(obj: dict[str, Any], role: str | None) -> list[str]:
    anomalies: list[str] = []
    present, raw = find_envelope(obj.get("metadata"), extensions_of(obj, anomalies), anomalies, role != "user")
    if not present:
        return [f"    ! {a}" for a in anomalies]
    env = flatten_envelope(raw, anomalies)
    out = []
    cov = ", ".join(x for x in (env["coverage_reason"], env["coverage_availability"]) if x)
    head = [f"author {env['author'] or '–'}"]
    if env["coverage"] or env["coverage_availability"]:
        head.append(f"coverage {env['coverage'] or '–'}" + (f" ({cov})" if cov else ""))
    if env["ownership_state"]:
        head.append(f"ownership {env['ownership_state']}" + (", suppressed" if env["ownership_suppressed"] else ""))
    out.append("    converse: " + " | ".join(head))
    if env["originating_turn_id"]:
        out.append(f"    turn {env['originating_turn_id']}")
    if env["routine_status"] or env["routine_name"]:
        name = env["routine_name"] or env["routine_tool_name"]
        out.append(f"    routine {name}: {env['routine_status']}")
        for s in env["pending_input"] or []:
            req = "required" if s["required"] else "optional"
            about = f": {s['description']}" if s["description"] else ""
            out.append(f"      pending {s['key']} ({s['type'] or '?'}, {req}){about}")
    if env["invocation_outcome"] or env["invocation_tool_name"]:
        out.append(f"    invocation {env['invocation_tool_name']}: {env['invocation_outcome']}")
    for c in env["citations"] or []:
        out.append(f"    cites {c['document_id']} {c['title'] or ''} {c['source_url'] or ''}".rstrip())
    out += [f"    ! {a}" for a in anomalies]
    return out


MAX_OBJECTS = 200  # A2A objects shown per document (a task's history can hold thousands)
MAX_EVENTS = 200  # SSE events or gRPC messages shown per body; the others are only counted
FEED = 64 * 1024  # a body is split this many bytes at a time: never all its events or messages at once
MAX_TEXT_LINES = 8  # lines of a message's text shown, each cut to MAX_LINE characters
MAX_LINE = 200


def _object_lines(walk: Walk, start: int, label: str) -> list[str]:
    lines = []
    shown = walk.sightings[start : start + MAX_OBJECTS]
    for s in shown:
        obj = s.obj
        if s.object_kind == "artifact":
            role, ident = None, get(obj, "artifactId")
            head = f"  artifact {ident or '?'} {obj.get('name') or ''}".rstrip()
        else:
            role, ident = normalise_role(obj.get("role")), get(obj, "messageId")
            head = f"  {role or '?'} message {ident or '?'}"
        if ".history[" in s.location:
            head += " (history)"
        if s.task_state:
            head += f" [{s.task_state.removeprefix('TASK_STATE_').lower()}]"
        text = text_of(parts_of(obj))
        lines.append(head)
        if text:  # the start of the text only: splitting all of a 16 MiB text was a list of millions of lines
            start_of = text[: MAX_TEXT_LINES * (MAX_LINE + 1)].splitlines()[:MAX_TEXT_LINES]
            lines += [f"    {t[:MAX_LINE]}" for t in start_of]
        lines += _envelope_lines(obj, role)
    more = len(walk.sightings) - start - len(shown) + walk.skipped
    if more > 0:
        lines.append(f"  … {more} more objects")
    if not lines:
        lines.append(f"  ({label}: no message)")
    return lines


def render(doc: Any, label: str) -> list[str]:
    """Lines for one JSON document: a JSON-RPC request/response, a REST body, or one SSE event's data."""
    out = []
    if isinstance(doc, dict) and "method" in doc and "jsonrpc" in doc:
        out.append(f"{label}: JSON-RPC {doc['method']} id={doc.get('id')}")
        params = doc.get("params")
        msg = params.get("message") if isinstance(params, dict) else None
        doc = {"message": msg} if isinstance(msg, dict) else None
    elif isinstance(doc, dict) and ("result" in doc or "error" in doc) and "jsonrpc" in doc:
        if doc.get("error") is not None or "result" not in doc:  # a null `error` beside a result is no error
            err = doc["error"] if isinstance(doc.get("error"), dict) else {}
            return [f"{label}: JSON-RPC error {err.get('code')} {err.get('message', '')}".rstrip()]
        doc = doc["result"]
    elif isinstance(doc, dict) and isinstance(doc.get("error"), dict):
        err = doc["error"]
        return [f"{label}: error {err.get('code')} {err.get('status', '')} {err.get('message', '')}".rstrip()]
    if doc is None:
        return out
    walk = Walk()
    walk_result(doc, "body", walk)
    kinds = ", ".join(walk.event_kinds) or "object"
    state = f" task {walk.task_id} {walk.task_state.removeprefix('TASK_STATE_').lower()}" if walk.task_state else ""
    out.append(f"{label}: {kinds}{state}")
    out += _object_lines(walk, 0, label)
    return out


def _grpc_message(dialect: str, method: str, direction: str, frame: GrpcFrame, label: str) -> list[str]:
    doc, note = (None, "too large") if frame.oversize else (None, frame.error) if frame.error else (None, None)
    if note is None:
        doc, note = decode(dialect, method, direction, frame.data)
    if note is not None:
        return [f"{label}: ! {note} ({frame.length} bytes)"]
    if direction == "request":
        return render(doc, label) if isinstance(doc, dict) and "message" in doc else [f"{label}: {doc}"]
    return render(doc, label)


def _sse_lines(data: bytes) -> list[str]:
    """Each event's A2A objects, for the first MAX_EVENTS events; the others are counted."""
    parser = SseParser()
    lines: list[str] = []
    shown = 0
    view = memoryview(data)
    for start in range(0, len(view) + FEED, FEED):
        chunk = bytes(view[start : start + FEED])
        for ev in parser.feed(chunk) if chunk else parser.close():
            if shown < MAX_EVENTS:
                label = f"event {shown}" + (f" ({ev.event})" if ev.event != "message" else "")
                lines += render(fastjson.loads(ev.data), label)
                shown += 1
        if shown >= MAX_EVENTS:
            parser.count_only = True
        if not chunk:
            break
    if parser.dispatched > shown:
        lines.append(f"… {parser.dispatched - shown} more events")
    return lines


def _grpc_lines(data: bytes, metadata: Metadata) -> list[str]:
    """Each length-prefixed message decoded against the call's method, as the JSON bindings are shown."""
    flow = metadata.flow
    if not isinstance(flow, http.HTTPFlow):
        raise ValueError("a gRPC body without its flow")
    req = flow.request
    call = classify_grpc(req.url, Headers(req.headers.items(multi=True)), None)
    if call is None:
        raise ValueError("not an A2A gRPC call")
    direction = "request" if metadata.http_message is req else "response"
    headers = metadata.http_message.headers if metadata.http_message is not None else req.headers
    parser = GrpcFrameParser(encoding=headers.get("grpc-encoding", ""))
    method = call.method_raw.rsplit("/", 1)[-1]
    lines: list[str] = []
    seen = switched = 0
    view = memoryview(data)
    for start in range(0, len(view), FEED):
        for frame in parser.feed(view[start : start + FEED]):
            if seen < MAX_EVENTS:
                label = "request" if direction == "request" else (f"message {seen}" if call.streaming else "response")
                lines += _grpc_message(call.dialect, method, direction, frame, label)
            seen += 1
        if seen >= MAX_EVENTS and not parser.count_only:
            parser.count_only, switched = True, parser.messages  # the rest are counted, never copied nor decoded
    total = seen + (parser.messages - switched if parser.count_only else 0)
    lines.insert(0, f"gRPC {call.dialect} {call.method}: {total} message(s)")
    if total > MAX_EVENTS:
        lines.append(f"… {total - MAX_EVENTS} more messages")
    notes = parser_anomalies(parser)
    lines += [f"! {n}" for n in notes]
    trailers = getattr(metadata.http_message, "trailers", None)
    if direction == "response" and trailers:
        lines.append(f"grpc-status {trailers.get('grpc-status')} {trailers.get('grpc-message', '')}".rstrip())
    return lines


class A2AContentview(Contentview):
    @property
    def name(self) -> str:
        return "A2A converse"

    def prettify(self, data: bytes, metadata: Metadata) -> str:
        ctype = (metadata.content_type or "").lower()
        lines: list[str] = []
        if is_grpc(ctype):
            lines += _grpc_lines(data, metadata)
        elif ctype.startswith("text/event-stream"):
            lines += _sse_lines(data)
        else:  # fastjson: a document of millions of values is refused (ValueError), not parsed on the event loop
            lines += render(fastjson.loads(data), "body")
        return "\n".join(lines) + "\n"

    def render_priority(self, data: bytes, metadata: Metadata) -> float:
        flow = metadata.flow
        if not data or not isinstance(flow, http.HTTPFlow):
            return -1
        req = flow.request
        try:
            a2a = classify(req.method, req.url, Headers(req.headers.items(multi=True)), req.get_content(strict=False))
        except Exception:
            return -1
        if a2a is None or a2a.binding == "card":
            return -1
        return 2.0  # above the JSON view (1) for A2A traffic
