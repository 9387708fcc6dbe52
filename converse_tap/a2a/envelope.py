"""The converse extension's reply envelope: find it in a message's metadata, flatten it, check it."""

from __future__ import annotations

import json
from typing import Any

from . import urls
from .constants import (
    AUTHORS,
    AVAILABILITY,
    CONVERSE_URI,
    CONVERSE_URI_BASE,
    COVERAGE,
    COVERAGE_REASONS,
    INVOCATION_OUTCOMES,
    OWNERSHIP_STATES,
    ROUTINE_STATUSES,
)
from .redact import stored_json
from .wiretext import MAX_KEY, bounded_key

# Flattened envelope columns, all None when the envelope is absent.
ENVELOPE_FIELDS = (
    "author",
    "coverage_availability",
    "coverage",
    "coverage_reason",
    "originating_turn_id",
    "originating_request_id",
    "ownership_state",
    "ownership_suppressed",
    "routine_tool_name",
    "routine_name",
    "routine_status",
    "pending_input",
    "pending_required_open",
    "invocation_tool_name",
    "invocation_outcome",
    "citations",
    "citation_count",
    "envelope_json",
)


DETAIL = 100  # characters of a value from the wire an anomaly quotes
# items of a reply's citations and of a routine's pendingInput kept in its row, the rest counted: 1,000 replies of
# 5,000 citations each (1.4 MB of Parquet) were more than a report could hold at its default memory limit
MAX_ITEMS = 256


def clip(value: Any, limit: int = DETAIL) -> str:
    """A value from the wire as an anomaly quotes it: at most `limit` characters, then how many more there were
    (a 16 MiB `author` made a 16 MiB anomaly, in every row it was repeated in)."""
    text = value if isinstance(value, str) else str(value)
    return text if len(text) <= limit else f"{text[:limit]}…+{len(text) - limit}"


def empty_envelope() -> dict[str, Any]:
    return _EMPTY.copy()


_EMPTY: dict[str, Any] = dict.fromkeys(ENVELOPE_FIELDS)  # (copied: cheaper than made afresh)


def find_envelope(
    metadata: Any, extensions: list[str], anomalies: list[str], agent_side: bool = True
) -> tuple[bool, Any]:
    """Return (present, raw envelope). Notes keying problems in `anomalies`.

    A user message may list the URI in `extensions` without metadata (clients do); for agent messages and
    artifacts the spec wants both, so only `agent_side` objects are checked for that.
    """
    if metadata is None:
        if agent_side and CONVERSE_URI in extensions:
            anomalies.append("extension_listed_without_metadata")
        return False, None
    if not isinstance(metadata, dict):
        anomalies.append(f"metadata_not_object:{type(metadata).__name__}")
        return False, None
    if CONVERSE_URI in metadata:
        if CONVERSE_URI not in extensions:
            anomalies.append("envelope_uri_not_in_extensions")
        return True, metadata[CONVERSE_URI]
    for key in metadata:
        if isinstance(key, str) and key.rstrip("/").lower() == CONVERSE_URI.lower():
            anomalies.append(f"envelope_key_variant:{clip(key)}")
            return True, metadata[key]
        if isinstance(key, str) and key.startswith(CONVERSE_URI_BASE):
            anomalies.append(f"envelope_other_version:{clip(key)}")
    if agent_side and CONVERSE_URI in extensions:
        anomalies.append("extension_listed_without_metadata")
    return False, None


def _str(env: dict[str, Any], key: str, where: str, anomalies: list[str]) -> str | None:
    value = env.get(key)
    if value is None:
        return None
    if isinstance(value, str):
        if len(value) > MAX_KEY:  # a name or value reports group by: bounded as identifiers are
            anomalies.append(f"value_clipped:{where}{key}")
            return bounded_key(value)
        return value
    anomalies.append(f"wrong_type:{where}{key}={type(value).__name__}")
    return json.dumps(value, sort_keys=True) if isinstance(value, (int, float, bool)) else None


def _enum(env: dict[str, Any], key: str, where: str, allowed: frozenset[str], anomalies: list[str]) -> str | None:
    raw = env.get(key)
    if raw is None or (raw.__class__ is str and raw in allowed):
        return raw  # (the common cases, said nothing of)
    value = _str(env, key, where, anomalies)
    if value is not None and value not in allowed and isinstance(raw, str):
        anomalies.append(f"unknown_enum:{where}{key}={clip(raw)}")  # (as it came, its length said: not bounded)
    return value


def _obj(env: dict[str, Any], key: str, anomalies: list[str]) -> dict[str, Any] | None:
    value = env.get(key)
    if value is None:
        return None
    if isinstance(value, dict):
        return value
    anomalies.append(f"wrong_type:{key}={type(value).__name__}")
    return None


def _bool(value: Any, where: str, anomalies: list[str]) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    anomalies.append(f"wrong_type:{where}={type(value).__name__}")
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return None


def _text(value: Any, where: str, anomalies: list[str]) -> str | None:
    """A string field of a citation or a slot: a value of another type is kept as its JSON text, and said so; at
    most MAX_KEY characters (`bounded_key`: its beginning and the SHA-256 of the whole), and said so."""
    if value is None:
        return value
    if not isinstance(value, str):
        _once(f"wrong_type:{where}={type(value).__name__}", anomalies)
        value = json.dumps(value, sort_keys=True, default=str)
    if len(value) > MAX_KEY:
        _once(f"value_clipped:{where}", anomalies)
        return bounded_key(value)
    return value


def _once(note: str, anomalies: list[str]) -> None:
    """An oddity of a list's items, said once: a list of many citations or slots may repeat it in each."""
    if note not in anomalies:
        anomalies.append(note)


def flatten_envelope(raw: Any, anomalies: list[str]) -> dict[str, Any]:
    """Flatten one envelope into the message columns. Never raises; odd shapes become anomalies."""
    out = empty_envelope()
    try:
        out["envelope_json"] = stored_json(raw)
    except ValueError:  # e.g. circular structures cannot come from JSON, but NaN handling may complain
        out["envelope_json"] = None
    if not isinstance(raw, dict):
        anomalies.append(f"envelope_not_object:{type(raw).__name__}")
        return out

    out["author"] = _enum(raw, "author", "", AUTHORS, anomalies)

    cov = raw.get("answerCoverage")
    if cov is not None and cov.__class__ is not dict:  # (as _obj, which says what it was)
        cov = _obj(raw, "answerCoverage", anomalies)
    if cov is not None:
        w = "answerCoverage."
        out["coverage_availability"] = _enum(cov, "availability", w, AVAILABILITY, anomalies)
        out["coverage"] = _enum(cov, "coverage", w, COVERAGE, anomalies)
        out["coverage_reason"] = _enum(cov, "reason", w, COVERAGE_REASONS, anomalies)
        out["originating_turn_id"] = _str(cov, "originatingTurnId", w, anomalies)
        out["originating_request_id"] = _str(cov, "originatingRequestId", w, anomalies)
        if out["coverage_availability"] is None:
            anomalies.append("missing:answerCoverage.availability")
        elif out["coverage_availability"] == "not_recorded" and out["coverage"] is not None:
            # "not_recorded means no assessment ran for that turn": a verdict beside it came from nowhere (kept,
            # and said; the coverage figures count assessed turns only)
            anomalies.append("coverage_without_assessment:not_recorded")

    own = raw.get("ownership")
    if own is not None and own.__class__ is not dict:  # (as _obj, which says what it was)
        own = _obj(raw, "ownership", anomalies)
    if own is not None:
        out["ownership_state"] = _enum(own, "state", "ownership.", OWNERSHIP_STATES, anomalies)
        out["ownership_suppressed"] = _bool(own.get("suppressed"), "ownership.suppressed", anomalies)
        if out["ownership_state"] is None and own.get("state") is None:
            anomalies.append("missing:ownership.state")
        elif out["ownership_suppressed"] is True and out["ownership_state"] == "ai_owned":
            # "suppressed is true when a person owns the conversation": both kept, the contradiction said
            anomalies.append("suppressed_not_human_owned:ai_owned")

    routine = raw.get("routine")
    if routine is not None and routine.__class__ is not dict:  # (as _obj, which says what it was)
        routine = _obj(raw, "routine", anomalies)
    if routine is not None:
        w = "routine."
        out["routine_tool_name"] = _str(routine, "toolName", w, anomalies)
        out["routine_name"] = _str(routine, "name", w, anomalies)
        out["routine_status"] = _enum(routine, "status", w, ROUTINE_STATUSES, anomalies)
        slots, required_open = _pending_input(routine.get("pendingInput"), anomalies)
        out["pending_input"] = slots
        if slots is not None:
            out["pending_required_open"] = required_open
            # the spec lists open slots under any status (an active routine's next step, an abandoned one's last
            # question); only a completed routine cannot still be waiting for required input
            if out["pending_required_open"] and out["routine_status"] == "completed":
                anomalies.append("pending_input_not_waiting:completed")
        if out["routine_name"] is None and out["routine_tool_name"] is None:
            anomalies.append("missing:routine.name")
        if routine.get("status") is None:  # (a routine instance is followed by its statuses: metrics.md)
            anomalies.append("missing:routine.status")

    inv = raw.get("invocation")
    if inv is not None and inv.__class__ is not dict:  # (as _obj, which says what it was)
        inv = _obj(raw, "invocation", anomalies)
    if inv is not None:
        out["invocation_tool_name"] = _str(inv, "toolName", "invocation.", anomalies)
        out["invocation_outcome"] = _enum(inv, "outcome", "invocation.", INVOCATION_OUTCOMES, anomalies)
        if inv.get("toolName") is None:  # the spec: "toolName and an outcome"
            anomalies.append("missing:invocation.toolName")
        if inv.get("outcome") is None:
            anomalies.append("missing:invocation.outcome")

    cites = raw.get("citations")
    if cites is not None:
        if isinstance(cites, list):
            rows: list[dict[str, Any]] = []
            skipped = 0
            for c in cites:
                if not isinstance(c, dict):
                    _once(f"wrong_type:citations[]={type(c).__name__}", anomalies)
                    continue
                if len(rows) == MAX_ITEMS:  # counted, not kept
                    skipped += 1
                    continue
                source = c.get("sourceUrl")
                if isinstance(source, str):
                    anomalies += urls.anomalies(source, "citations[].sourceUrl")
                document_id, chunk_id, title = c.get("documentId"), c.get("chunkId"), c.get("title")
                if not (
                    (document_id is None or (document_id.__class__ is str and len(document_id) <= MAX_KEY))
                    and (chunk_id is None or (chunk_id.__class__ is str and len(chunk_id) <= MAX_KEY))
                    and (title is None or (title.__class__ is str and len(title) <= MAX_KEY))
                    and (source is None or (source.__class__ is str and len(source) <= MAX_KEY))
                ):  # (else each is what `_text` gives: itself)
                    document_id = _text(document_id, "citations[].documentId", anomalies)
                    chunk_id = _text(chunk_id, "citations[].chunkId", anomalies)
                    title = _text(title, "citations[].title", anomalies)
                    source = _text(source, "citations[].sourceUrl", anomalies)
                if document_id is None:  # the spec: "each entry has documentId, chunkId, title"
                    _once("missing:citations[].documentId", anomalies)
                rows.append({"document_id": document_id, "chunk_id": chunk_id, "title": title, "source_url": source})
            out["citations"] = rows
            out["citation_count"] = len(rows) + skipped
            if skipped:
                anomalies.append(f"citations_not_kept_past:{MAX_ITEMS}:{len(rows) + skipped}")
        else:
            anomalies.append(f"wrong_type:citations={type(cites).__name__}")
    if cov is None or own is None or (out["author"] is None and raw.get("author") is None):
        _near_misses(raw, anomalies)  # (a field looked for and not found: under another spelling?)
    if out["author"] is None and raw.get("author") is None and out["ownership_suppressed"] is not True:
        # a reply is the agent's or a person's; only a suppressed turn (nothing generated) has no author
        anomalies.append("missing:author")
    return out


# the envelope's members, by their spelling folded (no `_`, lower case): a serialiser that writes `answer_coverage`
# or `AnswerCoverage` loses the field to a reader of the spec's names
_FOLDED = {k.lower(): k for k in ("author", "answerCoverage", "ownership", "routine", "invocation", "citations")}


def _near_misses(raw: dict[str, Any], anomalies: list[str]) -> None:
    """Say members named like an envelope field but not as the spec spells it (`envelope_field_variant:<key>`):
    not read (a member of another name may be another extension's), but not silently lost either."""
    for key in raw:
        if key.__class__ is str and key not in _SPELT:
            spelt = _FOLDED.get(key.replace("_", "").replace("-", "").lower())
            if spelt is not None:
                anomalies.append(f"envelope_field_variant:{clip(key)}")


_SPELT = frozenset(_FOLDED.values())


def _pending_input(value: Any, anomalies: list[str]) -> tuple[list[dict[str, Any]] | None, int]:
    """The slots (the first MAX_ITEMS kept, the others counted and said) and how many of all of them are
    required."""
    if value is None:
        return None, 0
    if not isinstance(value, list):
        anomalies.append(f"wrong_type:routine.pendingInput={type(value).__name__}")
        return None, 0
    slots: list[dict[str, Any]] = []
    required_open = seen = 0
    for s in value:
        if not isinstance(s, dict):
            _once(f"wrong_type:routine.pendingInput[]={type(s).__name__}", anomalies)
            continue
        required = s.get("required")
        if required is not None and required.__class__ is not bool:  # (said once per list, as `_text` does)
            said: list[str] = []
            required = _bool(required, "routine.pendingInput[].required", said)
            _once(said[0], anomalies)
        required = bool(required)
        required_open += required
        seen += 1
        if len(slots) == MAX_ITEMS:  # counted, not kept
            continue
        key = s.get("key")
        if key is None:
            _once("missing:routine.pendingInput[].key", anomalies)
        slots.append(
            {
                "key": _text(key, "routine.pendingInput[].key", anomalies),
                "type": _text(s.get("type"), "routine.pendingInput[].type", anomalies),
                "required": required,
                "description": _text(s.get("description"), "routine.pendingInput[].description", anomalies),
            }
        )
    if seen > MAX_ITEMS:
        anomalies.append(f"pending_input_not_kept_past:{MAX_ITEMS}:{seen}")
    return slots, required_open
