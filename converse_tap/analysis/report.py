"""Assemble the report: one versioned, JSON-ready dict (schema converse-tap-report/1, docs/report-schema.md)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pandas as pd

from .. import __version__
from ..a2a.constants import AUTHORS, AVAILABILITY, COVERAGE, INVOCATION_OUTCOMES
from . import metrics as m
from .engine import Engine, engine_for
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
    assessed = m.count(m.assessed(turns))
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
        "turns_with_coverage": m.count(turns),
        "turns_assessed": assessed,
        "by_coverage": by_cov,
        "by_reason": by_reason,
        "by_availability": by_avail,
    }


def _wilson_dict(k: int, n: int) -> dict[str, Any]:
    share, lo, hi = wilson(k, n)
    return {"share": share, "ci_low": lo, "ci_high": hi}


def authors_section(replies: pd.DataFrame, conv: dict[str, Any]) -> dict[str, Any]:
    """`replies`: reply facts or counts (with `n`); `conv`: the conversation summary of the same replies."""
    shares = m.author_share(replies)
    by_author: dict[str, int] = dict.fromkeys(sorted(AUTHORS), 0)
    for r in _records(shares):
        by_author[r["value"]] = r["count"]
    stated = int(shares["count"].sum()) if not shares.empty else 0
    human = _wilson_dict(by_author["human"], stated)
    return {
        "replies": m.count(replies),
        "replies_with_author": stated,
        "by_author": by_author,
        "human_share": human["share"],
        "human_share_ci_low": human["ci_low"],
        "human_share_ci_high": human["ci_high"],
        **{k: int(conv.get(k, 0)) for k in CONVERSATION_FIELDS},
    }


CONVERSATION_FIELDS = (
    "conversations",
    "conversations_with_human",
    "suppressed_turns",
    "handoffs_to_human",
    "handbacks_to_agent",
)


def routines_section(routines: RoutineFacts, key: str, stale_after: pd.Timedelta | None) -> dict[str, Any]:
    """The routines of one grouping key, from the instances counted in SQL (`Engine.routine_facts`)."""
    counts, middles, slots = routines
    counts = counts[counts["key"] == key]
    middles = middles[middles["key"] == key]
    totals = _routine_row(counts[counts["routine"].isna()], middles[middles["routine"].isna()])
    by_routine = []
    for routine in sorted(counts["routine"].dropna(), key=str):
        row = {
            "routine": routine,
            **_routine_row(counts[counts["routine"] == routine], middles[middles["routine"] == routine]),
        }
        by_routine.append({k: v for k, v in row.items() if k != "stale" or stale_after is not None})
    abandoned = slots[slots["key"] == key][["routine", "slot", "abandoned"]]
    abandoned = abandoned.sort_values(["abandoned", "routine", "slot"], ascending=[False, True, True])
    return {
        "instances": totals["instances"],
        "completed": totals["completed"],
        "abandoned": totals["abandoned"],
        "open": totals["open"],
        "stale": totals["stale"] if stale_after is not None else None,
        "stale_after_seconds": None if stale_after is None else stale_after.total_seconds(),
        "abandonment_rate": totals["abandonment_rate"],
        "abandonment_ci_low": totals["ci_low"],
        "abandonment_ci_high": totals["ci_high"],
        "median_turns": totals["median_turns"],
        "median_seconds": totals["median_seconds"],
        "by_routine": by_routine,
        "abandoned_at": _records(abandoned.reset_index(drop=True)),
    }


# per grouping: instances counted per key and routine, middle values of closed ones, abandoned slots
RoutineFacts = tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]


def _routine_row(counts: pd.DataFrame, middles: pd.DataFrame) -> dict[str, Any]:
    """What `metrics.routine_summary` gives per routine, from counts (one row or none) and the middle values of
    the turns and durations of closed instances (the medians are taken as pandas takes them)."""
    row = counts.iloc[0] if len(counts) else None
    n = {k: int(row[k]) if row is not None else 0 for k in ("instances", "completed", "abandoned", "open", "stale")}
    rate = _wilson_dict(n["abandoned"], n["completed"] + n["abandoned"])
    medians: dict[str, float | None] = {}
    for measure in ("turns", "us"):
        values: pd.Series = middles.loc[middles["measure"] == measure, "value"].astype("int64")
        if measure == "us":  # seconds as pandas makes them of a duration, before the median (not after: rounding)
            values = pd.Series(pd.to_timedelta(values.to_numpy(), unit="us")).dt.total_seconds()
        medians[measure] = float(values.median()) if len(values) else None
    return {
        **n,
        "abandonment_rate": _num(rate["share"]),
        "ci_low": _num(rate["ci_low"]),
        "ci_high": _num(rate["ci_high"]),
        "median_turns": medians["turns"],
        "median_seconds": medians["us"],
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


def citations_section(turns: pd.DataFrame, cited: pd.DataFrame) -> dict[str, Any]:
    return {
        **{k: _num(v) for k, v in m.citation_summary(turns).items()},
        "most_cited": _records(m.top_cited(cited)),
    }


@dataclass
class Facts:
    """What the sections count, small whatever the dataset's size: turns and replies counted per agent, day,
    routine and counted value (`n`); routine instances counted per grouping key and routine; conversation
    summaries per grouping key; replies per cited document."""

    turns: pd.DataFrame
    replies: pd.DataFrame
    routines: dict[str, RoutineFacts]
    conversations: dict[str, pd.DataFrame]
    cited: pd.DataFrame

    @classmethod
    def gather(cls, engine: Engine, by: tuple[str, ...], stale_after: pd.Timedelta | None) -> Facts:
        turns, replies, cited = engine.turn_counts(), engine.reply_counts(), engine.cited()
        conversations = {g: engine.conversation_summary(g).set_index("key") for g in ("all", *by)}
        routines = engine.routine_facts(("all", *by), stale_after)
        engine.drop_facts()  # what follows is pandas on small frames: give DuckDB's memory back first
        return cls(turns, replies, routines, conversations, cited)

    def keys(self, by: str) -> list[str]:
        found = set(self.turns[by]) | set(self.replies[by]) | set(self.routines[by][0]["key"])
        return sorted(found, key=str)

    def sections(self, stale_after: pd.Timedelta | None, by: str = "all", key: str = "all") -> dict[str, Any]:
        turns, replies, cited = self.turns, self.replies, self.cited
        if by != "all":
            turns, replies, cited = turns[turns[by] == key], replies[replies[by] == key], cited[cited[by] == key]
        conv = self.conversations[by]
        summary = {str(k): v for k, v in conv.loc[key].items()} if key in conv.index else {}
        return {
            "coverage": coverage_section(turns),
            "authors": authors_section(replies, summary),
            "routines": routines_section(self.routines[by], key, stale_after),
            "invocations": invocations_section(replies),
            "citations": citations_section(turns, cited),
        }


def build_report(
    source: Frames | Engine,
    window: Window | None = None,
    by: tuple[str, ...] = (),
    stale_after: pd.Timedelta | None = None,
    examples: int = 0,
    transcripts: bool = False,
) -> dict[str, Any]:
    """The whole report over loaded frames, or over an `Engine` on a dataset (`Engine.over_dataset`, which
    reads the Parquet files out of core and never holds a row per sighting). With `examples`, up to that many
    example conversations per counted value (`examples`), and with `transcripts` each one's transcript."""
    window = window or Window()
    with engine_for(source) as engine:
        drilled = drill_down(engine, window, examples, transcripts) if examples else {}
        counts = engine.dataset_counts()
        adoption = m.adoption_rows(engine.adoption_counts())  # before gather frees the facts it shares
        facts = Facts.gather(engine, by, stale_after)
        anomalies = engine.anomalies()
        cards = source.agent_cards if isinstance(source, Frames) else engine.cards()
        present, root = engine.present, engine.root
        notes = engine.reading_notes()
    missing = [t for t in ("exchanges", "messages", "agent_cards") if t not in present]
    if not present:
        notes.append("the dataset holds no Parquet files yet: record or ingest some traffic first")
    elif "messages" in missing:
        notes.append("no messages table: no A2A message was recorded, so there is nothing to measure")
    elif counts["sightings"] == 0:
        notes.append("no agent messages in the selected window")
    elif counts["replies"] == 0:
        notes.append("no agent message carried the converse envelope: did the clients send A2A-Extensions?")
    if present and counts["turns"] == 0 and counts["replies"]:
        notes.append("no reply carried answerCoverage")
    report: dict[str, Any] = {
        "schema": REPORT_SCHEMA,
        "generator": f"converse-tap {__version__}",
        "dataset": {
            "path": root,
            "tables_present": present,
            "tables_missing": missing,
            "exchanges": counts["exchanges"],
            "agent_message_sightings": counts["sightings"],
            "replies": counts["replies"],
            "turns": counts["turns"],
            "agents": counts["agents"],
            "first_seen": _num(counts["first_seen"]),
            "last_seen": _num(counts["last_seen"]),
            "filters": {
                "agents": list(window.agents) if window.agents else None,
                "since": window.since.isoformat() if window.since else None,
                "until": window.until.isoformat() if window.until else None,
            },
            "notes": notes,
        },
        **facts.sections(stale_after),
        "conformance": {
            "adoption": {r["metric"]: {k: v for k, v in r.items() if k != "metric"} for r in _records(adoption)},
            "anomalies": _records(anomalies),
            "agent_cards": _cards(cards),
        },
    }
    report.update(drilled)
    if by:
        report["groups"] = {b: {str(k): facts.sections(stale_after, b, k) for k in facts.keys(b)} for b in by}
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
                "agent": _plainvalue(r["agent"]),
                "source": str(r["source"]),
                "name": _plainvalue(r["name"]),
                "converse_declared": bool(r["converse_declared"]),
                "mcp_url": _plainvalue(r["mcp_url"]),
                "tools": [t["tool_name"] for t in tools],
                "tools_match_skills": _plainvalue(r["tools_match_skills"]),
            }
        )
    return sorted(out, key=lambda c: (str(c["agent"] or ""), c["source"]))  # a tampered file may lack an agent


def drill_down(engine: Engine, window: Window, n: int, transcripts: bool) -> dict[str, Any]:
    """{"examples": {breakdown: {value: [example]}}} and, with `transcripts`, {"transcripts": {id: transcript}}
    for every conversation named there. Runs over the engine's named views, then leaves its names as they were."""
    from .drill import examples
    from .transcript import transcripts as read_transcripts
    from .views import create_named_views

    create_named_views(engine, window)
    try:
        out: dict[str, Any] = {"examples": examples(engine, n)}
        if transcripts:
            ids = sorted({e["conversation"] for b in out["examples"].values() for v in b.values() for e in v})
            out["transcripts"] = read_transcripts(engine, ids)  # one pass over the messages for all of them
    finally:
        engine.con.execute("RESET search_path")
    return out
