"""The end of one exchange's extraction: the exchange row completed from what its messages said, its anomalies
bounded, its wire text redacted and its keys bounded (`extract.Extractor.finish` and `extract.extract`)."""

from __future__ import annotations

from .classify import A2ARequest
from .objects import MAX_SIGHTINGS, Walk
from .redact import Redaction
from .rows import ERROR_TEXT, MESSAGE_METHODS, Extraction, bound_keys, redact_wire_text

MAX_ANOMALIES = 50


def said(anomalies: list[str], prefixes: tuple[str, ...]) -> bool:
    return any(a.startswith(prefixes) for a in anomalies)


def sample_anomalies(anomalies: list[str], per_kind: int = 5) -> list[str]:
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


def finish_extraction(
    out: Extraction, walk: Walk, req: A2ARequest, confirmed: bool, redaction: Redaction
) -> Extraction | None:
    """The exchange's rows, completed; None when nothing confirmed a request of a generic path as A2A."""
    if not confirmed:
        return None
    row = out.exchange
    row["anomalies"].extend(walk.anomalies)
    if walk.skipped:
        row["anomalies"].append(f"messages_not_recorded_past:{MAX_SIGHTINGS}:{walk.skipped}")
    if len(row["anomalies"]) > MAX_ANOMALIES:
        row["anomalies"] = sample_anomalies(row["anomalies"])
    row["context_id"] = row["context_id"] or walk.context_id  # the request message's, else the response's
    row["task_id"] = walk.task_id or row["task_id"]
    row["task_state"] = walk.task_state
    messages = out.messages
    row["messages"] = len(messages)
    context_id, task_id = row["context_id"], row["task_id"]
    check = req.method in MESSAGE_METHODS and row["error_code"] is None
    replies = fresh = fresh_enveloped = 0  # (fresh: the answer's own messages, neither history nor the user's)
    for m in messages:  # one pass: counted, and sightings inherit what the exchange learnt about their task
        if len(m["anomalies"]) > MAX_ANOMALIES:  # (a metadata object of a million odd keys is one row's)
            m["anomalies"] = sample_anomalies(m["anomalies"])
        if not m["context_id"]:
            m["context_id"] = context_id
        if m["direction"] == "response":
            if not m["task_id"]:
                m["task_id"] = task_id
            if m["has_envelope"] and m["role"] == "agent":
                replies += 1
            if check and ".history[" not in m["location"] and m["role"] != "user":
                fresh += 1
                if m["has_envelope"]:
                    fresh_enveloped += 1
    row["replies"] = replies
    if check:
        if row["converse_requested"] and fresh and not fresh_enveloped:
            row["anomalies"].append("converse_requested_no_envelope")
        if not row["converse_requested"] and fresh_enveloped:
            row["anomalies"].append("envelope_not_requested")
    if row["converse_echoed"] and not row["converse_requested"]:
        row["anomalies"].append("converse_echoed_not_requested")
    redact_wire_text(out, redaction)
    if out.error_as_text and len(row["error_message"]) > ERROR_TEXT:
        row["error_message"] = row["error_message"][:ERROR_TEXT]  # cut once redacted, not before
    bound_keys(out)
    return out
