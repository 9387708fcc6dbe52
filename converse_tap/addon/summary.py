"""One line per A2A exchange as it completes (and, at `replies` verbosity, one per reply)."""

from __future__ import annotations

from typing import Any

from ..a2a.extract import Extraction
from ..textsafe import safe_line

SUMMARY_LEVELS = ("off", "exchanges", "replies")


def _reply_bits(m: dict[str, Any]) -> str:
    bits = []
    if m["coverage"] or m["coverage_availability"]:
        bits.append(m["coverage"] or m["coverage_availability"])
    if m["author"]:
        bits.append(f"by {m['author']}")
    if m["ownership_suppressed"]:
        bits.append("suppressed")
    if m["routine_status"]:
        pending = ", ".join(s["key"] for s in m["pending_input"] or [] if s["required"])
        bits.append(
            f"{m['routine_name'] or m['routine_tool_name']}: {m['routine_status']}"
            + (f" ({pending})" if pending else "")
        )
    if m["invocation_outcome"]:
        bits.append(f"call {m['invocation_tool_name']}: {m['invocation_outcome']}")
    return " | ".join(bits)


def summary_lines(ext: Extraction, level: str) -> list[str]:
    """Lines for the proxy's log (a terminal): every value from the wire has its control characters escaped."""
    if level == "off":
        return []
    ex = ext.exchange
    how = f"{ex['binding']} {ex['dialect']}{' stream' if ex['streamed'] else ''}"
    head = f"A2A {ex['agent']} {ex['method']} [{how}] {ex['status_code'] if ex['status_code'] is not None else '–'}"
    state = (ex["task_state"] or "").removeprefix("TASK_STATE_").lower()
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
        parts.append(f"error {ex['error_code']}{': ' + ex['error_message'] if ex['error_message'] else ''}")
    if not ex["complete"]:
        parts.append("incomplete")
    anomalies = len(ex["anomalies"]) + sum(len(m["anomalies"]) for m in ext.messages)
    if anomalies:
        parts.append(f"{anomalies} anomal{'y' if anomalies == 1 else 'ies'}")
    lines = [" | ".join(p for p in parts if p)]
    if level == "replies":
        lines += [f"    reply {m['message_id']}: {_reply_bits(m) or 'no envelope fields'}" for m in replies]
    return [safe_line(line) for line in lines]
