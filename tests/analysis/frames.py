"""Hand-made message frames with the dataset's columns, for metric tests."""

from __future__ import annotations

from typing import Any

import pandas as pd

from converse_tap.analysis.load import MESSAGE_COLUMNS, Frames

T0 = pd.Timestamp("2026-12-01T09:00:00Z")


def sighting(mid: str | None, conv: str = "c1", minute: float = 0, agent: str = "ag_support1", **fields: Any) -> dict:
    row: dict[str, Any] = dict.fromkeys(MESSAGE_COLUMNS)
    row.update(
        exchange_id=f"ex-{mid}-{minute}",
        seq=0,
        ts=T0 + pd.Timedelta(minutes=minute),
        agent=agent,
        message_id=mid,
        context_id=conv,
        role="agent",
        direction="response",
        has_envelope=True,
        anomalies=[],
    )
    row.update(fields)
    return row


def covered(
    coverage: str,
    reason: str | None = "sufficient_evidence",
    availability: str = "assessed",
    turn: str | None = None,
    **fields: Any,
) -> dict:
    return {
        "coverage_availability": availability,
        "coverage": coverage,
        "coverage_reason": reason,
        "originating_turn_id": turn,
        **fields,
    }


def routine(name: str, status: str, *required_open: str, **fields: Any) -> dict:
    slots = [{"key": k, "type": "string", "required": True, "description": None} for k in required_open]
    return {"routine_name": name, "routine_status": status, "pending_input": slots or None, **fields}


def messages(*rows: dict) -> pd.DataFrame:
    frame = pd.DataFrame(list(rows), columns=MESSAGE_COLUMNS)
    frame["ts"] = pd.to_datetime(frame["ts"], utc=True)
    return frame


def frames(msgs: pd.DataFrame, exchanges: pd.DataFrame | None = None) -> Frames:
    from converse_tap.analysis.load import CARD_COLUMNS, EXCHANGE_COLUMNS

    ex = exchanges if exchanges is not None else pd.DataFrame(columns=EXCHANGE_COLUMNS)
    return Frames(ex, msgs, pd.DataFrame(columns=CARD_COLUMNS), ["exchanges", "messages"], "test")
