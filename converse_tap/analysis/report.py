"""Assemble the report: one versioned, JSON-ready dict (schema converse-tap-report/1, docs/report-schema.json)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from .. import __version__
from . import metrics as m
from .engine import Engine, engine_for
from .load import Frames, Window
from .sections import Grouping, RoutineFacts, num, plain, records

REPORT_SCHEMA = "converse-tap-report/1"
GROUPINGS = ("agent", "day", "routine")


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
    stale_after: pd.Timedelta | None

    @classmethod
    def gather(cls, engine: Engine, by: tuple[str, ...], stale_after: pd.Timedelta | None) -> Facts:
        turns, replies, cited = engine.turn_counts(), engine.reply_counts(), engine.cited()
        conversations = {g: engine.conversation_summary(g).set_index("key") for g in ("all", *by)}
        routines = engine.routine_facts(("all", *by), stale_after)
        engine.drop_facts()  # what follows is pandas on small frames: give DuckDB's memory back first
        return cls(turns, replies, routines, conversations, cited, stale_after)

    def grouping(self, by: str = "all") -> Grouping:
        """Every key's sections of a grouping (`all`: the whole report), counted in one pass."""
        return Grouping(
            None if by == "all" else by,
            self.turns,
            self.replies,
            self.cited,
            self.routines[by],
            self.conversations[by],
            self.stale_after,
        )


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
    notes += not_kept_notes(anomalies)
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
            "first_seen": num(counts["first_seen"]),
            "last_seen": num(counts["last_seen"]),
            "filters": {
                "agents": list(window.agents) if window.agents else None,
                "since": window.since.isoformat() if window.since else None,
                "until": window.until.isoformat() if window.until else None,
            },
            "notes": notes,
        },
        **facts.grouping().sections(),
        "conformance": {
            "adoption": {r["metric"]: {k: v for k, v in r.items() if k != "metric"} for r in records(adoption)},
            "anomalies": records(anomalies),
            "agent_cards": _cards(cards),
        },
    }
    report.update(drilled)
    if by:
        report["groups"] = {}
        for b in by:
            grouping = facts.grouping(b)
            report["groups"][b] = {str(k): grouping.sections(k) for k in grouping.sorted_keys()}
    return report


# lists a reply's row keeps only the beginning of (a2a/envelope.py MAX_ITEMS: the others counted, and an anomaly
# `<code>:<kept>:<listed>` says so), and the figures that count only what was kept
_NOT_KEPT = {
    "pending_input_not_kept_past": (
        "pendingInput slots",
        "the required input still pending when users abandoned (abandoned_at) lists only the slots kept, so a "
        "required slot past them is missing from it",
    ),
    "citations_not_kept_past": ("citations", "the most cited documents count only the citations kept"),
}


def not_kept_notes(anomalies: pd.DataFrame) -> list[str]:
    """A note for each list the recorder kept only the beginning of in some reply: a figure counted from those lists
    would be silently short otherwise (the anomaly alone, in the conformance section, does not say which figure)."""
    notes: list[str] = []
    if anomalies.empty:
        return notes
    for code, (what, figure) in _NOT_KEPT.items():
        rows = anomalies[(anomalies["code"] == code) & (anomalies["table"] == "messages")]
        if len(rows):
            parts = str(rows["example"].iloc[0]).split(":")  # `<code>:<kept>:<listed>`
            kept = parts[1] if len(parts) == 3 and parts[1].isdigit() else "some"
            notes.append(
                f"{int(rows['count'].sum())} agent message(s) listed more than {kept} {what}, of which the recorder "
                f"kept the first {kept} (anomaly {code}): {figure}"
            )
    return notes


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
                "agent": plain(r["agent"]),
                "source": str(r["source"]),
                "name": plain(r["name"]),
                "converse_declared": bool(r["converse_declared"]),
                "mcp_url": plain(r["mcp_url"]),
                "tools": [t["tool_name"] for t in tools],
                "tools_match_skills": plain(r["tools_match_skills"]),
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
