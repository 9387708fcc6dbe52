"""Assemble the report: one versioned, JSON-ready dict (schema converse-tap-report/1, docs/report-schema.md)."""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from .. import __version__
from ..a2a.constants import AUTHORS, AVAILABILITY, COVERAGE, INVOCATION_OUTCOMES
from . import metrics as m
from .load import Frames, Window
from .stats import wilson

REPORT_SCHEMA = "converse-tap-report/1"
GROUPINGS = ("agent", "day", "routine")


def _num(value: Any) -> Any:
    """JSON-safe scalars: NaN/NaT -> None, numpy -> Python."""
    if value is None:
        return None
    if isinstance(value, pd.Timestamp):
        return None if pd.isna(value) else value.isoformat()
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def _records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{str(k): _plainvalue(v) for k, v in row.items()} for row in frame.to_dict("records")]


def _plainvalue(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return [_plainvalue(x) for x in v]
    if isinstance(v, dict):
        return {k: _plainvalue(x) for k, x in v.items()}
    try:
        if pd.isna(v):
            return None
    except (TypeError, ValueError):
        pass
    return _num(v)


def coverage_section(turns: pd.DataFrame) -> dict[str, Any]:
    dist = m.coverage_distribution(turns)
    assessed = len(m.assessed(turns))
    by_cov: dict[str, Any] = {
        v: {"count": 0, "share": 0.0 if assessed else None, "ci_low": None, "ci_high": None} for v in sorted(COVERAGE)
    }
    if assessed:
        for v in COVERAGE:  # zero counts still carry an interval
            by_cov[v].update(_wilson_dict(0, assessed))
    for row in _records(dist):
        by_cov[row["value"]] = {k: row[k] for k in ("count", "share", "ci_low", "ci_high")}
    by_reason = {r["value"]: {"count": r["count"], "share": r["share"]} for r in _records(m.coverage_reasons(turns))}
    by_avail: dict[str, int] = dict.fromkeys(sorted(AVAILABILITY), 0)
    for r in _records(m.coverage_availability(turns)):
        by_avail[r["value"]] = r["count"]
    return {
        "turns_with_coverage": len(turns),
        "turns_assessed": assessed,
        "by_coverage": by_cov,
        "by_reason": by_reason,
        "by_availability": by_avail,
    }


def _wilson_dict(k: int, n: int) -> dict[str, Any]:
    share, lo, hi = wilson(k, n)
    return {"share": share, "ci_low": lo, "ci_high": hi}


def authors_section(replies: pd.DataFrame) -> dict[str, Any]:
    shares = m.author_share(replies)
    by_author: dict[str, int] = dict.fromkeys(sorted(AUTHORS), 0)
    for r in _records(shares):
        by_author[r["value"]] = r["count"]
    stated = int(shares["count"].sum()) if not shares.empty else 0
    human = _wilson_dict(by_author["human"], stated)
    conv = m.conversations(replies)
    return {
        "replies": len(replies),
        "replies_with_author": stated,
        "by_author": by_author,
        "human_share": human["share"],
        "human_share_ci_low": human["ci_low"],
        "human_share_ci_high": human["ci_high"],
        "conversations": len(conv),
        "conversations_with_human": int((conv["human_replies"] > 0).sum()) if len(conv) else 0,
        "suppressed_turns": int(conv["suppressed_turns"].sum()) if len(conv) else 0,
        "handoffs_to_human": int(conv["handoffs_to_human"].sum()) if len(conv) else 0,
        "handbacks_to_agent": int(conv["handbacks_to_agent"].sum()) if len(conv) else 0,
    }


def routines_section(instances: pd.DataFrame, stale_after: pd.Timedelta | None) -> dict[str, Any]:
    totals = m.routine_totals(instances)
    return {
        "instances": totals["instances"],
        "completed": totals["completed"],
        "abandoned": totals["abandoned"],
        "open": totals["open"],
        "stale": totals["stale"] if stale_after is not None else None,
        "stale_after_seconds": None if stale_after is None else stale_after.total_seconds(),
        "abandonment_rate": _num(totals["abandonment_rate"]),
        "abandonment_ci_low": _num(totals["ci_low"]),
        "abandonment_ci_high": _num(totals["ci_high"]),
        "median_turns": _num(totals["median_turns"]),
        "median_seconds": _num(totals["median_seconds"]),
        "by_routine": [
            {k: v for k, v in r.items() if k != "stale" or stale_after is not None}
            for r in _records(m.routine_summary(instances))
        ],
        "abandoned_at": _records(m.abandoned_slots(instances)),
    }


def invocations_section(replies: pd.DataFrame) -> dict[str, Any]:
    inv = m.invocation_outcomes(replies)
    by_outcome: dict[str, int] = dict.fromkeys(sorted(INVOCATION_OUTCOMES), 0)
    for outcome, count in inv.groupby("outcome")["count"].sum().items():
        by_outcome[str(outcome)] = int(count)
    return {
        "total": int(inv["count"].sum()) if len(inv) else 0,
        "by_outcome": by_outcome,
        "by_tool": _records(inv),
    }


def citations_section(turns: pd.DataFrame, replies: pd.DataFrame) -> dict[str, Any]:
    return {
        **{k: _num(v) for k, v in m.citation_summary(turns).items()},
        "most_cited": _records(m.most_cited(replies)),
    }


def _sections(
    replies: pd.DataFrame, turns: pd.DataFrame, instances: pd.DataFrame, stale_after: pd.Timedelta | None
) -> dict[str, Any]:
    return {
        "coverage": coverage_section(turns),
        "authors": authors_section(replies),
        "routines": routines_section(instances, stale_after),
        "invocations": invocations_section(replies),
        "citations": citations_section(turns, replies),
    }


def _day(ts: pd.Series) -> pd.Series:
    return ts.dt.strftime("%Y-%m-%d").fillna(m.NONE)


def _groups(
    by: str,
    replies: pd.DataFrame,
    turns: pd.DataFrame,
    instances: pd.DataFrame,
    stale_after: pd.Timedelta | None,
) -> dict[str, Any]:
    if by == "agent":
        rk, tk, ik = replies["agent"], turns["agent"], instances["agent"]
    elif by == "day":
        rk, tk = _day(replies["first_seen"]), _day(turns["first_seen"])
        ik = _day(pd.to_datetime(instances["started"], utc=True)) if len(instances) else instances["agent"]
    else:
        rk = m._routine_key(replies).fillna(m.NONE) if len(replies) else replies["agent"]
        tk = m._routine_key(turns).fillna(m.NONE) if len(turns) else turns["agent"]
        ik = instances["routine"]
    keys = sorted(set(rk.dropna()) | set(tk.dropna()) | set(ik.dropna()), key=str)
    return {str(k): _sections(replies[rk == k], turns[tk == k], instances[ik == k], stale_after) for k in keys}


def build_report(
    frames: Frames,
    window: Window | None = None,
    by: tuple[str, ...] = (),
    stale_after: pd.Timedelta | None = None,
) -> dict[str, Any]:
    """The whole report over already loaded (and filtered) frames."""
    window = window or Window()
    rep = m.replies(frames.messages)
    trn = m.turns(rep)
    inst = m.routine_instances(rep, stale_after=stale_after)
    notes = []
    missing = [t for t in ("exchanges", "messages", "agent_cards") if t not in frames.present]
    if not frames.present:
        notes.append("the dataset holds no Parquet files yet: record or ingest some traffic first")
    elif "messages" in missing:
        notes.append("no messages table: no A2A message was recorded, so there is nothing to measure")
    elif frames.messages.empty:
        notes.append("no agent messages in the selected window")
    elif rep.empty:
        notes.append("no agent message carried the converse envelope: did the clients send A2A-Extensions?")
    if frames.present and len(trn) == 0 and not rep.empty:
        notes.append("no reply carried answerCoverage")
    ts = frames.messages["ts"] if not frames.messages.empty else pd.Series(dtype="datetime64[us, UTC]")
    agents = sorted(set(frames.exchanges["agent"].dropna()) | set(frames.messages["agent"].dropna()))
    report: dict[str, Any] = {
        "schema": REPORT_SCHEMA,
        "generator": f"converse-tap {__version__}",
        "dataset": {
            "path": frames.root,
            "tables_present": frames.present,
            "tables_missing": missing,
            "exchanges": len(frames.exchanges),
            "agent_message_sightings": len(frames.messages),
            "replies": len(rep),
            "turns": len(trn),
            "agents": agents,
            "first_seen": _num(ts.min()) if len(ts) else None,
            "last_seen": _num(ts.max()) if len(ts) else None,
            "filters": {
                "agents": list(window.agents) if window.agents else None,
                "since": window.since.isoformat() if window.since else None,
                "until": window.until.isoformat() if window.until else None,
            },
            "notes": notes,
        },
        **_sections(rep, trn, inst, stale_after),
        "conformance": {
            "adoption": {
                r["metric"]: {k: v for k, v in r.items() if k != "metric"}
                for r in _records(m.adoption(frames.exchanges, frames.messages))
            },
            "anomalies": _records(m.anomaly_counts(frames.exchanges, frames.messages, frames.agent_cards)),
            "agent_cards": _cards(frames.agent_cards),
        },
    }
    if by:
        report["groups"] = {b: _groups(b, rep, trn, inst, stale_after) for b in by}
    return report


def _cards(cards: pd.DataFrame) -> list[dict[str, Any]]:
    """The latest card per agent and source, in brief."""
    if cards.empty:
        return []
    latest = m.latest_cards(cards)
    out = []
    for r in latest.to_dict("records"):
        tools: list[dict[str, Any]] = list(r["tools"]) if r["tools"] is not None else []
        out.append(
            {
                "agent": r["agent"],
                "source": str(r["source"]),
                "name": _plainvalue(r["name"]),
                "converse_declared": bool(r["converse_declared"]),
                "mcp_url": _plainvalue(r["mcp_url"]),
                "tools": [t["tool_name"] for t in tools],
                "tools_match_skills": _plainvalue(r["tools_match_skills"]),
            }
        )
    return sorted(out, key=lambda c: (c["agent"], c["source"]))
