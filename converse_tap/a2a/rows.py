"""The rows of one response document: its message sightings (with the envelope), agent cards and error fields."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .card import card_fields
from .classify import A2ARequest
from .constants import (
    ROLES,
    V03_NON_OBJECT_RESULTS,
)
from .envelope import ENVELOPE_FIELDS, clip, find_envelope, flatten_envelope
from .exchange import HttpExchange
from .objects import (
    Sighting,
    Walk,
    extensions_of,
    id_text,
    normalise_role,
    text_and_kinds,
    walk_result,
)
from .redact import Redaction, TextPolicy, redact_card_json
from .wiretext import MAX_KEY, bound_keys, bounded_key, redact_wire_text

MESSAGE_METHODS = frozenset({"SendMessage", "SendStreamingMessage"})
# methods whose success carries an A2A object (a Task or Message, or a stream's event of one); a result that is an
# object of none of them (`{}`, `{"ok": true}`) answered the call with nothing, and the row says so
OBJECT_METHODS = MESSAGE_METHODS | {"GetTask", "CancelTask", "SubscribeToTask"}


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
    if isinstance(code, (int, float)) and not isinstance(code, bool) and math.isfinite(code):
        out["error_code"] = int(code)  # one the column cannot hold is mended, flagged, by the writer
        if code != out["error_code"] and anomalies is not None:
            anomalies.append(f"error_code_not_integer:{clip(code)}")
    elif code is not None and anomalies is not None:
        anomalies.append(f"wrong_type:error.code={type(code).__name__}")
    status = err.get("status")
    out["error_status"] = status if isinstance(status, str) else None
    if status is not None and not isinstance(status, (str, int)) and anomalies is not None:
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
        if req.binding == "card":
            self._card(doc, "well-known", ts)
            return True
        if req.binding == "jsonrpc":
            if not isinstance(doc, dict):
                row["anomalies"].append(f"jsonrpc_response_not_object{_where(event_index)}")
                return False
            version = doc.get("jsonrpc")
            if version != "2.0" and (version is not None or "jsonrpc" in doc):
                row["anomalies"].append(f"response_jsonrpc_version:{clip(version)}")
            got, sent = doc.get("id"), req.rpc_id
            if sent is not None and got is not None and ("jsonrpc" in doc or "result" in doc or "error" in doc):
                # (a bare A2A object's `id` is its own, a task's: no JSON-RPC id that could mismatch)
                kind = sent.__class__  # (an id of the same plain type: equal or not, as same_rpc_id says)
                same = sent == got if kind is got.__class__ and (kind is int or kind is str) else same_rpc_id(sent, got)
                if not same:
                    row["anomalies"].append("jsonrpc_id_mismatch")
            err = doc.get("error")  # a null `error` is no error (serialisers that keep nil fields send one)
            if err is not None or error_event:
                self._error(doc if err is None else err)
                return True
            if "result" not in doc:
                if "jsonrpc" in doc:
                    row["anomalies"].append(f"jsonrpc_without_result{_where(event_index)}")
                    return False
                # no JSON-RPC response at all: an A2A object sent bare (python-a2a streams its tasks so), read by its
                # shape as an HTTP+JSON body is
                row["anomalies"].append(f"jsonrpc_without_result{_where(event_index)}")
                before, kinds = len(walk.sightings), len(walk.event_kinds)
                walk_result(doc, "body" if event_index is None else f"event[{event_index}]", walk)
                self._sightings(walk, before, event_index, ts)
                return len(walk.event_kinds) > kinds
            result = doc["result"]
            if req.method == "GetExtendedAgentCard":
                self._card(result, "extended", ts)
                return True
            if req.dialect == "v0.3" and isinstance(result, V03_NON_OBJECT_RESULTS.get(req.method, ())):
                return True  # a v0.3 result of its schema's shape that is no object (and carries no message)
            before, kinds = len(walk.sightings), len(walk.event_kinds)
            walk_result(result, "result" if event_index is None else f"event[{event_index}].result", walk)
            self._sightings(walk, before, event_index, ts)
            if len(walk.event_kinds) == kinds and result.__class__ is dict and req.method in OBJECT_METHODS:
                row["anomalies"].append(f"result_without_a2a_object{_where(event_index)}")
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
        if len(walk.event_kinds) > kinds:
            return True
        if doc.__class__ is dict and req.method in OBJECT_METHODS and req.binding == "rest" and req.certain:
            row["anomalies"].append(f"result_without_a2a_object{_where(event_index)}")
        return isinstance(doc, dict) and isinstance(doc.get("tasks"), list)

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
        if is_artifact:
            role = None
        else:
            said = obj.get("role")
            role = _STR_ROLES.get(said) if said.__class__ is str else None  # (the common case, as normalise_role)
            if role is None:
                role = normalise_role(said, anomalies)
                if said is None:  # A2A: a Message's role is required (the reply is counted as no one's)
                    anomalies.append("missing:role")
        text, kinds = text_and_kinds(obj, anomalies)
        exts = [] if obj.get("extensions") is None else extensions_of(obj, anomalies)
        metadata = obj.get("metadata")
        if metadata is None and not exts:
            present, raw = False, None  # (as find_envelope says, without a call)
        else:
            present, raw = find_envelope(metadata, exts, anomalies, agent_side=role != "user")
        env = None
        if present:
            if role == "user":  # the spec: human and agent replies "both arrive as ROLE_AGENT"
                anomalies.append("envelope_on_user_message")
            env = flatten_envelope(raw, anomalies)
            stored = env.get("envelope_json")
            if stored is not None and redact_card_json(raw, self.redaction, stored) is not stored:
                # a credential in the envelope: every column is taken from its redacted copy (citation titles,
                # routine and slot names...), not only envelope_json; its anomalies were noted above
                env = flatten_envelope(self.redaction.json_urls(raw), [])
            for c in env.get("citations") or []:
                if c["source_url"] is not None:
                    c["source_url"] = self.redaction.url(c["source_url"])
        elif (
            self.converse_requested
            and direction == "response"
            and role != "user"
            and ".history[" not in s.location
            and self.req.method in MESSAGE_METHODS
        ):
            anomalies.append("envelope_missing")
        if direction == "request" and role == "agent":
            anomalies.append("request_claims_agent_role")  # the client's message: never counted as a reply
        # (each field by its JSON or its proto name, as objects.get)
        if is_artifact:
            ident = obj.get("artifactId")
            if ident is None:
                ident = obj.get("artifact_id")
        else:
            ident = obj.get("messageId")
            if ident is None:
                ident = obj.get("message_id")
        cid = obj.get("contextId")
        if cid is None:
            cid = obj.get("context_id")
        tid = obj.get("taskId")
        if tid is None:
            tid = obj.get("task_id")
        if (cid is None or cid.__class__ is str) and (tid is None or tid.__class__ is str):  # (the rule)
            cid, tid = cid or None, tid or None
        else:
            cid, tid = id_text(cid, "contextId", anomalies), id_text(tid, "taskId", anomalies)
        name = obj.get("name") if is_artifact else None
        if name is not None and not isinstance(name, str):
            anomalies.append(f"wrong_type:artifact.name={type(name).__name__}")
        policy, redaction, req, messages = self.policy, self.redaction, self.req, self.out.messages
        # the row's columns in their order (_MESSAGE_ROW), set on a copy: cheaper than a display of 44 keys
        row = _MESSAGE_ROW.copy()
        row["exchange_id"] = self.ex.id
        row["seq"] = len(messages)
        row["ts"] = ts
        row["direction"] = direction
        row["event_index"] = event_index
        row["event_kind"] = s.event_kind
        row["location"] = s.location
        row["object_kind"] = s.object_kind
        row["agent"] = self.agent
        row["agent_url"] = self.agent_url
        row["agent_id"] = self.agent_id
        row["binding"] = req.binding
        row["dialect"] = req.dialect
        row["method"] = req.method
        row["message_id"] = ident if isinstance(ident, str) and ident else None
        # (an empty name is none, as an empty id is: proto3 cannot tell `""` from absent, so gRPC never sends one)
        row["artifact_name"] = name if name.__class__ is str and name else None
        row["context_id"] = cid or s.context_id
        row["task_id"] = tid or s.task_id
        row["role"] = role
        row["task_state"] = s.task_state
        row["text"] = text if policy.mode == "keep" else policy.apply(text)
        row["text_length"] = None if text is None else len(text)
        row["part_kinds"] = kinds
        row["extensions"] = [redaction.url(e) for e in exts]
        row["has_envelope"] = present
        if env is not None:
            row.update(env)
        row["anomalies"] = anomalies
        messages.append(row)
        if not isinstance(ident, str) or not ident:
            anomalies.append("missing:artifactId" if is_artifact else "missing:messageId")


# a message row's columns, in their order, all None: each row is a copy with its values set
_MESSAGE_ROW: dict[str, Any] = dict.fromkeys(
    (
        *("exchange_id", "seq", "ts", "direction", "event_index", "event_kind", "location", "object_kind"),
        *("agent", "agent_url", "agent_id", "binding", "dialect", "method", "message_id", "artifact_name"),
        *("context_id", "task_id", "role", "task_state", "text", "text_length", "part_kinds", "extensions"),
        "has_envelope",
        *ENVELOPE_FIELDS,
        "anomalies",
    )
)
_STR_ROLES = {k: v for k, v in ROLES.items() if isinstance(k, str)}


def _where(event_index: int | None) -> str:
    """`:event[<i>]` for an anomaly of a stream's event, nothing for a whole body's."""
    return "" if event_index is None else f":event[{event_index}]"


def id_or_none(value: Any) -> str | None:
    if value is None or value == "":
        return None
    return value if isinstance(value, str) else str(value)


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


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


__all__ = ["MAX_KEY", "bound_keys", "bounded_key", "redact_wire_text"]  # (where they were first defined)
