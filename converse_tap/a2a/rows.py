"""The rows of one response document: its message sightings (with the envelope), agent cards and error fields."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

from .card import card_fields
from .classify import A2ARequest
from .constants import CARD_METHOD, JSONRPC_V03_METHODS, JSONRPC_V1_METHODS, TASK_STATES, V03_NON_OBJECT_RESULTS
from .envelope import clip, empty_envelope, find_envelope, flatten_envelope
from .exchange import HttpExchange
from .objects import (
    Sighting,
    Walk,
    extensions_of,
    get,
    id_text,
    normalise_role,
    part_kind,
    parts_of,
    text_of,
    walk_result,
)
from .redact import Redaction, TextPolicy, redact_card_json

MESSAGE_METHODS = frozenset({"SendMessage", "SendStreamingMessage"})
_NO_ENVELOPE = empty_envelope()  # the envelope columns of a message without one (never mutated)


_RELEASED: dict[str, Any] = {}  # what a sighting's object becomes once its row is made


@dataclass(slots=True)
class Extraction:
    exchange: dict[str, Any]
    messages: list[dict[str, Any]] = field(default_factory=list)
    agent_cards: list[dict[str, Any]] = field(default_factory=list)
    first_event: float | None = None  # when a stream's first SSE event arrived (not a column: live metrics only)
    error_as_text: bool = False  # `error_message` is the text of an error that was no object: cut once redacted


ERROR_TEXT = 500  # characters of an error that is no object (its text) kept in `error_message`


def error_fields(err: Any, anomalies: list[str] | None = None) -> dict[str, Any]:
    """JSON-RPC error object or REST error body -> code/status/message/reason. An error that is no object, or
    whose code is no number or message no string, is said in `anomalies` (its column then null, or the text of
    what was sent)."""
    out: dict[str, Any] = {
        "error_code": None,
        "error_status": None,
        "error_message": None,
        "error_reason": None,
    }
    if not isinstance(err, dict):
        # cut to ERROR_TEXT once redacted (finish.py): a credential across the cut was cut before it was seen
        out["error_message"] = None if err is None else str(err)[: 64 * ERROR_TEXT]
        if anomalies is not None and err is not None:
            anomalies.append(f"wrong_type:error={type(err).__name__}")
        return out
    if isinstance(err.get("error"), dict):  # REST {"error": {...}} or a whole JSON-RPC response
        err = err["error"]
    elif err.get("error") is not None and anomalies is not None:
        anomalies.append(f"wrong_type:error={type(err['error']).__name__}")
    code = err.get("code", err.get("status") if isinstance(err.get("status"), int) else None)
    if isinstance(code, int | float) and not isinstance(code, bool) and math.isfinite(code):
        out["error_code"] = int(code)  # one the column cannot hold is mended, flagged, by the writer
        if code != out["error_code"] and anomalies is not None:
            anomalies.append(f"error_code_not_integer:{clip(code)}")
    elif code is not None and anomalies is not None:
        anomalies.append(f"wrong_type:error.code={type(code).__name__}")
    status = err.get("status")
    out["error_status"] = status if isinstance(status, str) else None
    if status is not None and not isinstance(status, str | int) and anomalies is not None:
        anomalies.append(f"wrong_type:error.status={type(status).__name__}")
    msg = err.get("message", err.get("detail", err.get("title")))
    out["error_message"] = msg if isinstance(msg, str) else None
    if msg is not None and not isinstance(msg, str) and anomalies is not None:
        anomalies.append(f"wrong_type:error.message={type(msg).__name__}")
    details = err.get("data", err.get("details"))
    if isinstance(details, dict):
        details = [details]
    if isinstance(details, list):
        for d in details:
            reason = d.get("reason") if isinstance(d, dict) else None
            if isinstance(reason, str):
                out["error_reason"] = reason
                break
            if reason is not None and anomalies is not None:  # (an ErrorInfo's reason is a string)
                anomalies.append(f"wrong_type:error.details[].reason={type(reason).__name__}")
                break
    elif "details" in err and details is not None and anomalies is not None:  # google.rpc.Status: a list
        anomalies.append(f"wrong_type:error.details={type(details).__name__}")
    return out


@dataclass(slots=True)
class Ctx:
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
            version = doc.get("jsonrpc")
            if version != "2.0" and (version is not None or "jsonrpc" in doc):
                row["anomalies"].append(f"response_jsonrpc_version:{clip(version)}")
            got = doc.get("id")
            if req.rpc_id is not None and got is not None and not same_rpc_id(req.rpc_id, got):
                row["anomalies"].append("jsonrpc_id_mismatch")
            err = doc.get("error")  # a null `error` is no error (serialisers that keep nil fields send one)
            if err is not None or error_event:
                self._error(doc if err is None else err)
                return True
            if "result" not in doc:
                row["anomalies"].append(f"jsonrpc_without_result{':' + where if where else ''}")
                return False
            result = doc["result"]
            if req.method == "GetExtendedAgentCard":
                self._card(result, "extended", ts)
                return True
            if req.dialect == "v0.3" and isinstance(result, V03_NON_OBJECT_RESULTS.get(req.method, ())):
                return True  # a v0.3 result of its schema's shape that is no object (and carries no message)
            before = len(walk.sightings)
            walk_result(result, "result" if event_index is None else f"event[{event_index}].result", walk)
            self._sightings(walk, before, event_index, ts)
            return True
        # REST
        status = self.ex.status or 0
        if error_event or status >= 400 or _error_body(doc):
            self._error(doc)
            return is_a2a_error(doc)
        if req.method == "GetExtendedAgentCard":
            self._card(doc, "extended", ts)
            return isinstance(doc, dict) and ("skills" in doc or "capabilities" in doc)
        before = len(walk.sightings)
        kinds = len(walk.event_kinds)
        walk_result(doc, "body" if event_index is None else f"event[{event_index}]", walk)
        self._sightings(walk, before, event_index, ts)
        return len(walk.event_kinds) > kinds or (isinstance(doc, dict) and isinstance(doc.get("tasks"), list))

    def delivered(self, doc: Any, walk: Walk, ts: float | None) -> None:
        """A push delivery's body (push.py): the agent's objects, read as a stream event's or a poll's are."""
        before = len(walk.sightings)
        walk_result(doc, "push", walk)
        self._sightings(walk, before, None, ts)

    def _error(self, err: Any) -> None:
        row = self.out.exchange
        fields = error_fields(err, row["anomalies"])  # redacted with every error column at the end (finish.py)
        if row["error_code"] is None and row["error_message"] is None:
            row.update(fields)
            self.out.error_as_text = not isinstance(err, dict) and fields["error_message"] is not None

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
            "anomalies": [self.redaction.log_text(a) for a in anomalies],  # they quote the card's names
        }
        self.out.agent_cards.append(card_row)

    def _sightings(self, walk: Walk, start: int, event_index: int | None, ts: float | None) -> None:
        for s in walk.sightings[start:]:
            self.add(s, "response", event_index, ts)
            s.obj = _RELEASED  # its row is made: a long stream's parsed events are not kept until its end

    def add(self, s: Sighting, direction: str, event_index: int | None, ts: float | None) -> None:
        anomalies: list[str] = []
        obj = s.obj
        is_artifact = s.object_kind == "artifact"
        role = None if is_artifact else normalise_role(obj.get("role"), anomalies)
        parts = parts_of(obj, anomalies)
        text = text_of(parts)
        exts = extensions_of(obj, anomalies)
        present, raw = find_envelope(obj.get("metadata"), exts, anomalies, agent_side=role != "user")
        env = _NO_ENVELOPE  # read only: its values are spread into the row
        if present:
            env = flatten_envelope(raw, anomalies)
            stored = env.get("envelope_json")
            if stored is not None and redact_card_json(raw, self.redaction, stored) is not stored:
                # a credential in the envelope: every column is taken from its redacted copy (citation titles,
                # routine and slot names...), not only envelope_json; its anomalies were noted above
                env = flatten_envelope(self.redaction.json_urls(raw), [])
            for c in env.get("citations") or []:
                c["source_url"] = self.redaction.maybe_url(c["source_url"])
        if (
            not present
            and self.converse_requested
            and direction == "response"
            and role != "user"
            and ".history[" not in s.location
            and self.req.method in MESSAGE_METHODS
        ):
            anomalies.append("envelope_missing")
        if direction == "request" and role == "agent":
            anomalies.append("request_claims_agent_role")  # the client's message: never counted as a reply
        ident = get(obj, "artifactId") if is_artifact else get(obj, "messageId")
        cid, tid = get(obj, "contextId"), get(obj, "taskId")
        if (cid is None or cid.__class__ is str) and (tid is None or tid.__class__ is str):  # (the rule)
            cid, tid = cid or None, tid or None
        else:
            cid, tid = id_text(cid, "contextId", anomalies), id_text(tid, "taskId", anomalies)
        name = obj.get("name") if is_artifact else None
        if name is not None and not isinstance(name, str):
            anomalies.append(f"wrong_type:artifact.name={type(name).__name__}")
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
                "artifact_name": name if isinstance(name, str) else None,
                "context_id": cid or s.context_id,
                "task_id": tid or s.task_id,
                "role": role,
                "task_state": s.task_state,
                "text": self.policy.apply(text),
                "text_length": None if text is None else len(text),
                "part_kinds": [part_kind(p) for p in parts],
                "extensions": [self.redaction.url(e) for e in exts],
                "has_envelope": present,
                **env,
                "anomalies": anomalies,
            }
        )
        if not isinstance(ident, str) or not ident:
            anomalies.append("missing:artifactId" if is_artifact else "missing:messageId")


def id_or_none(value: Any) -> str | None:
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else str(value)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def same_rpc_id(sent: Any, got: Any) -> bool:
    """Whether a response's JSON-RPC id is the request's: the same string, or the same number (`1` and `1.0` are
    one JSON number; `1` and `"1"` are two ids)."""
    if _number(sent) and _number(got):
        return bool(sent == got)
    if isinstance(sent, str) or isinstance(got, str):
        return type(sent) is type(got) and sent == got
    return str(got) == str(sent)  # ids of no JSON-RPC type (objects, arrays, booleans): as text


def _error_body(doc: Any) -> bool:
    """A REST body that is an error object: a non-null `error` and at most one other non-null member."""
    if not isinstance(doc, dict) or doc.get("error") is None:
        return False
    return len(doc) <= 2 or sum(v is not None for v in doc.values()) <= 2


def is_a2a_error(doc: Any) -> bool:
    if not isinstance(doc, dict):
        return False
    err = doc.get("error")
    if not isinstance(err, dict):
        return False
    details = err.get("details")
    return isinstance(details, list) and any(
        isinstance(d, dict) and d.get("domain") == "a2a-protocol.org" for d in details
    )


# columns of text from the wire other than message text and identifiers: servers quote URLs, tokens and keys
# in errors, and an attacker can put one in any name or enum (anomalies quote the odd values)
_EXCHANGE_TEXT = (
    "method",
    "method_raw",
    "a2a_version",
    "content_type",
    "task_state",
    "error_status",
    "error_message",
    "error_reason",
    "anomalies",
)
_MESSAGE_TEXT = ("method", "role", "task_state", "event_kind", "artifact_name", "part_kinds", "anomalies")


def redact_wire_text(out: Extraction, redaction: Redaction) -> None:
    """Every column of wire text (_EXCHANGE_TEXT, _MESSAGE_TEXT) of an extraction redacted as free text: each
    distinct value once (a 1 MB method repeated in 20,000 sightings took 40 s redacted row by row)."""
    plain = _PLAIN if not redaction.patterns else frozenset()
    done: dict[str, str] = {}
    _redact_text(out.exchange, _EXCHANGE_TEXT, redaction, plain, done)
    for m in out.messages:
        _redact_text(m, _MESSAGE_TEXT, redaction, plain, done)


# values those columns hold on nearly every row, which no redaction changes: looked up, not redacted
_PLAIN = frozenset(
    {*JSONRPC_V1_METHODS, *JSONRPC_V03_METHODS, *JSONRPC_V03_METHODS.values(), *TASK_STATES.values(), CARD_METHOD}
    | {"user", "agent", "message", "task", "status-update", "artifact-update", "text", "data", "file", "unknown"}
    | {"application/json", "text/event-stream", "application/grpc", "1.0", "0.3", "0.3.0"}
)


def _redact_text(
    row: dict[str, Any], columns: tuple[str, ...], redaction: Redaction, plain: frozenset[str], done: dict[str, str]
) -> None:
    for key in columns:
        value = row[key]
        if isinstance(value, str):
            if value not in plain:
                row[key] = _once(value, redaction, done)
        elif value:  # a list of strings
            row[key] = [v if v in plain else _once(v, redaction, done) for v in value]


def _once(value: str, redaction: Redaction, done: dict[str, str]) -> str:
    got = done.get(value)
    if got is None:
        got = done[value] = redaction.log_text(value)
    return got


# Identifiers, names and URLs that every row of an exchange repeats (the agent, its URL, the method, the task and
# context ids a task's history inherits): a value longer than MAX_KEY characters is stored as its beginning and the
# SHA-256 of the whole, so that a 1 MB task id or agent path in 20,000 sightings is not 20 GB of rows, and distinct
# values stay distinct (conversations, replies and joins are as exact as with the whole value).
MAX_KEY = 1024
_KEYS = {
    "exchange": ("agent", "agent_url", "agent_id", "method", "method_raw", "context_id", "task_id"),
    "messages": ("agent", "agent_url", "agent_id", "method", "context_id", "task_id", "message_id"),
    "agent_cards": ("agent", "agent_url", "agent_id"),
}


def bounded_key(value: str) -> str:
    """`value`, or when longer than MAX_KEY characters its beginning and the SHA-256 of the whole (MAX_KEY in all)."""
    if len(value) <= MAX_KEY:
        return value
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
    tail = f"…(clipped from {len(value)} characters; sha256:{digest})"
    return value[: MAX_KEY - len(tail)] + tail


def bound_keys(out: Extraction) -> None:
    """The columns of _KEYS bounded (`bounded_key`), each clipped value named in its row's anomalies."""
    done: dict[str, str] = {}
    for table, rows in (("exchange", [out.exchange]), ("messages", out.messages), ("agent_cards", out.agent_cards)):
        for row in rows:
            for key in _KEYS[table]:
                value = row.get(key)
                if isinstance(value, str) and len(value) > MAX_KEY:
                    got = done.get(value)
                    if got is None:
                        got = done[value] = bounded_key(value)
                    row[key] = got
                    row["anomalies"].append(f"value_clipped:{key}")
