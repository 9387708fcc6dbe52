"""One line per A2A exchange as it completes (and, at `replies` verbosity, one per reply)."""

from __future__ import annotations

from typing import Any

from ..a2a.extract import Extraction
from ..textsafe import safe_line

SUMMARY_LEVELS = ("off", "exchanges", "replies")
MAX_VALUE = 200  # characters of each value from the wire a line quotes (an error message can be megabytes)
MAX_PENDING = 10  # pending input keys named


def _v(value: Any) -> str:
    text = str(value)
    return text if len(text) <= MAX_VALUE else text[:MAX_VALUE] + "…"


def _reply_bits(m: dict[str, Any]) -> str:
    bits = []
    if m["coverage"] or m["coverage_availability"]:
        bits.append(_v(m["coverage"] or m["coverage_availability"]))
    if m["author"]:
        bits.append(f"by {_v(m['author'])}")
    if m["ownership_suppressed"]:
        bits.append("suppressed")
    if m["routine_status"]:
        keys = [_v(s["key"]) for s in m["pending_input"] or [] if s["required"]]
        pending = ", ".join(keys[:MAX_PENDING]) + (
            f", … {len(keys) - MAX_PENDING} more" if len(keys) > MAX_PENDING else ""
        )
        bits.append(
            f"{_v(m['routine_name'] or m['routine_tool_name'])}: {_v(m['routine_status'])}"
            + (f" ({pending})" if pending else "")
        )
    if m["invocation_outcome"]:
        bits.append(f"call {_v(m['invocation_tool_name'])}: {_v(m['invocation_outcome'])}")
    return " | ".join(bits)


def summary_lines(ext: Extraction, level: str) -> list[str]:
    """Lines for the proxy's log (a terminal): every value from the wire has its control characters escaped."""
    if level == "off":
        return []
    ex = ext.exchange
    how = f"{ex['binding']} {ex['dialect']}{' stream' if ex['streamed'] else ''}"
    status = ex["status_code"] if ex["status_code"] is not None else "–"
    head = f"A2A {_v(ex['agent'])} {_v(ex['method'])} [{how}] {status}"
    state = _v((ex["task_state"] or "").removeprefix("TASK_STATE_").lower())
    parts = [head + (f" -> {state}" if state else "")]
    replies = [
        m
        for m in ext.messages
        if m["direction"] == "response"
        and m["role"] == "agent"
        and m["has_envelope"]
        and ".history[" not in m["location"]
    ]
    if replies:
        parts.append(_reply_bits(replies[-1]))
    if ex["error_code"] is not None:
        parts.append(f"error {ex['error_code']}{': ' + _v(ex['error_message']) if ex['error_message'] else ''}")
    if not ex["complete"]:
        parts.append("incomplete")
    anomalies = len(ex["anomalies"]) + sum(len(m["anomalies"]) for m in ext.messages)
    if anomalies:
        parts.append(f"{anomalies} anomal{'y' if anomalies == 1 else 'ies'}")
    lines = [" | ".join(p for p in parts if p)]
    if level == "replies":
        lines += [f"    reply {_v(m['message_id'])}: {_reply_bits(m) or 'no envelope fields'}" for m in replies]
    return [safe_line(line) for line in lines]
