"""The end of an extraction's rows: wire text redacted (`redact_wire_text`) and repeated keys bounded
(`bound_keys`), each cheap for the rows of every exchange, where nothing is to be done."""

from __future__ import annotations

import hashlib
import json
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from .constants import CARD_METHOD, JSONRPC_V03_METHODS, JSONRPC_V1_METHODS, TASK_STATES
from .redact import NO_OPERATOR_PATTERNS, Redaction

if TYPE_CHECKING:
    from .rows import Extraction

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
# a message row's columns of one value each, which are nearly always plain (or null), then its lists
_message_values = itemgetter("method", "role", "task_state", "event_kind", "artifact_name")
_MESSAGE_LISTS = ("part_kinds", "anomalies")


def redact_wire_text(out: Extraction, redaction: Redaction) -> None:
    """Every column of wire text (_EXCHANGE_TEXT, _MESSAGE_TEXT) of an extraction redacted as free text: each
    distinct value once (a 1 MB method repeated in 20,000 sightings took 40 s redacted row by row)."""
    plain, known = (_PLAIN, _PLAIN_OR_NULL) if not redaction.patterns else (_NOTHING, _NULL)
    done: dict[str, str] = {}
    _redact_text(out.exchange, _EXCHANGE_TEXT, redaction, plain, done)
    for m in out.messages:
        try:  # (a value no set can hold is looked at column by column, as any other)
            columns = _MESSAGE_LISTS if known.issuperset(_message_values(m)) else _MESSAGE_TEXT
        except TypeError:
            columns = _MESSAGE_TEXT
        _redact_text(m, columns, redaction, plain, done)


# values those columns hold on nearly every row, which no redaction changes: looked up, not redacted
_PLAIN = frozenset(
    {*JSONRPC_V1_METHODS, *JSONRPC_V03_METHODS, *JSONRPC_V03_METHODS.values(), *TASK_STATES.values(), CARD_METHOD}
    | {"user", "agent", "message", "task", "status-update", "artifact-update", "text", "data", "file", "unknown"}
    | {"application/json", "text/event-stream", "application/grpc", "1.0", "0.3", "0.3.0"}
    # the event kinds, and anomalies of nearly every stream or call without an envelope: kept only when the
    # built-in redaction leaves them as they are (it does)
    | {
        v
        for v in ("statusUpdate", "artifactUpdate", "request", "envelope_missing", "missing:messageId")
        if NO_OPERATOR_PATTERNS.log_text(v) == v
    }
)
_NOTHING: frozenset[str] = frozenset()
_NULL: frozenset[str | None] = frozenset({None})
_PLAIN_OR_NULL: frozenset[str | None] = _PLAIN | _NULL


def _redact_text(
    row: dict[str, Any], columns: tuple[str, ...], redaction: Redaction, plain: frozenset[str], done: dict[str, str]
) -> None:
    for key in columns:
        value = row[key]
        if isinstance(value, str):
            if value not in plain:
                row[key] = _once(value, redaction, done)
        elif value and not plain.issuperset(value):  # a list of strings (kept as it is when all are plain)
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
_KEY_VALUES = {table: itemgetter(*keys) for table, keys in _KEYS.items()}


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
        values = _KEY_VALUES[table]
        for row in rows:
            try:  # (the common case: none too long, seen in one look at the row's values)
                for value in values(row):
                    if isinstance(value, str) and len(value) > MAX_KEY:
                        break
                else:
                    continue
            except KeyError:  # (a row without one of them: each looked up by itself)
                pass
            for key in _KEYS[table]:
                value = row.get(key)
                if isinstance(value, str) and len(value) > MAX_KEY:
                    got = done.get(value)
                    if got is None:
                        got = done[value] = bounded_key(value)
                    row[key] = got
                    row["anomalies"].append(f"value_clipped:{key}")


def id_text(rid: Any) -> str | None:
    """A JSON-RPC id as text (the `jsonrpc_id` column): a string or number as it reads, any other value (which
    JSON-RPC forbids: `true`, an object) as its JSON, bounded like a key."""
    if rid is None or rid.__class__ is str or rid.__class__ is int or rid.__class__ is float:
        return None if rid is None else str(rid)
    return bounded_key(json.dumps(rid, separators=(",", ":"), ensure_ascii=False, default=str))
