"""The report's sections (docs/report-schema.json): counted once per grouping, then shaped key by key.

`Grouping` counts the facts of every key of one grouping (the whole report, agents, days or routines) with one
pass per metric (`metrics.*_tallies`), so a report over a thousand agents costs a thousand small dictionaries, not
a thousand rounds of pandas calls; each key's sections are then read from those counts in plain Python.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ..a2a.constants import AUTHORS, AVAILABILITY, COVERAGE, INVOCATION_OUTCOMES
from . import metrics as m
from .stats import wilson
from .tally import ALL, Row, documents, median, missing, shares, sizes, split

TOP_CITED = 10
CONVERSATION_FIELDS = (
    "conversations",
    "conversations_with_human",
    "suppressed_turns",
    "handoffs_to_human",
    "handbacks_to_agent",
)
ROUTINE_COUNTS = ("instances", "completed", "abandoned", "open", "stale")
# per grouping: instances counted per key and routine, middle values of closed ones, abandoned slots
RoutineFacts = tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]


def num(value: Any) -> Any:
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


def plain(v: Any) -> Any:
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    try:
        if pd.isna(v):
            return None
    except (TypeError, ValueError):
        pass
    return num(v)


def records(frame: pd.DataFrame) -> list[dict[str, Any]]:
    return [{str(k): plain(v) for k, v in row.items()} for row in frame.to_dict("records")]


def _wilson_dict(k: int, n: int) -> dict[str, Any]:
    share, lo, hi = wilson(k, n)
    return {"share": share, "ci_low": lo, "ci_high": hi}


class Grouping:
    """The sections of every key of one grouping: `by` a column of the counted facts (agent, day, routine), or
    None for the whole report (one key, ALL). `turns` and `replies` are counted facts (with `n`), `cited` replies
    per document, `routines` the grouping's routine facts (`Engine.routine_facts`), `conversations` its
    conversation summary per key."""

    def __init__(
        self,
        by: str | None,
        turns: pd.DataFrame,
        replies: pd.DataFrame,
        cited: pd.DataFrame,
        routines: RoutineFacts,
        conversations: pd.DataFrame,
        stale_after: pd.Timedelta | None,
    ) -> None:
        self.stale_after = stale_after
        self.coverage = m.coverage_tallies(turns, by)
        self.reasons = m.reason_tallies(turns, by)
        self.availability = m.availability_tallies(turns, by)
        self.citations = m.citation_tallies(turns, by)
        self.turns = sizes(turns, by)
        self.replies = sizes(replies, by)
        self.authors = m.author_tallies(replies, by)
        self.invocations = m.invocation_tallies(replies, by)
        self.documents = documents(cited, by, TOP_CITED)
        self.conversations: dict[Any, dict[Any, Any]] = conversations.to_dict("index")
        counts, middles, slots = routines
        self.routine_counts = split(counts.to_dict("records"), "key")
        self.middles = split(_middle_values(middles), "key")
        self.slots = split(slots.to_dict("records"), "key")

    def sorted_keys(self) -> list[Any]:
        return sorted(set(self.turns) | set(self.replies) | set(self.routine_counts), key=str)

    def sections(self, key: Any = ALL) -> dict[str, Any]:
        return {
            "coverage": self.coverage_section(key),
            "authors": self.authors_section(key),
            "routines": self.routines_section(key),
            "invocations": self.invocations_section(key),
            "citations": self.citations_section(key),
        }

    def coverage_section(self, key: Any) -> dict[str, Any]:
        counts = self.coverage.get(key, {})
        assessed = sum(counts.values())
        by_cov: dict[str, Any] = {
            v: {"count": 0, "share": 0.0 if assessed else None, "ci_low": None, "ci_high": None}
            for v in sorted(COVERAGE)
        }
        if assessed:
            for v in COVERAGE:  # zero counts still carry an interval
                by_cov[v].update(_wilson_dict(0, assessed))
        for row in shares(counts, with_ci=True):
            by_cov[row["value"]] = {k: row[k] for k in ("count", "share", "ci_low", "ci_high")}
        reasons = shares(self.reasons.get(key, {}), with_ci=False)
        by_avail: dict[str, int] = dict.fromkeys(sorted(AVAILABILITY), 0)
        for r in shares(self.availability.get(key, {}), with_ci=False):
            by_avail[r["value"]] = r["count"]
        return {
            "turns_with_coverage": self.turns.get(key, 0),
            "turns_assessed": assessed,
            "by_coverage": by_cov,
            "by_reason": {r["value"]: {"count": r["count"], "share": r["share"]} for r in reasons},
            "by_availability": by_avail,
        }

    def authors_section(self, key: Any) -> dict[str, Any]:
        counts = self.authors.get(key, {})
        by_author: dict[str, int] = dict.fromkeys(sorted(AUTHORS), 0)
        for r in shares(counts, with_ci=True):
            by_author[r["value"]] = r["count"]
        stated = sum(counts.values())
        human = _wilson_dict(by_author["human"], stated)
        conv = self.conversations.get(key, {})
        return {
            "replies": self.replies.get(key, 0),
            "replies_with_author": stated,
            "by_author": by_author,
            "human_share": human["share"],
            "human_share_ci_low": human["ci_low"],
            "human_share_ci_high": human["ci_high"],
            **{k: int(conv.get(k, 0)) for k in CONVERSATION_FIELDS},
        }

    def routines_section(self, key: Any) -> dict[str, Any]:
        """The routines of one key, from the instances counted in SQL (`Engine.routine_facts`)."""
        counts, stale_after = self.routine_counts.get(key, []), self.stale_after
        per_counts, per_middles = split(counts, "routine"), split(self.middles.get(key, []), "routine")
        totals = _routine_row(per_counts.get(None, []), per_middles.get(None, []))
        by_routine = []
        for routine in sorted((r["routine"] for r in counts if not missing(r["routine"])), key=str):
            row = {"routine": routine, **_routine_row(per_counts[routine], per_middles.get(routine, []))}
            by_routine.append({k: v for k, v in row.items() if k != "stale" or stale_after is not None})
        slots = [{k: plain(r[k]) for k in ("routine", "slot", "abandoned")} for r in self.slots.get(key, [])]
        slots.sort(key=lambda r: (-r["abandoned"], _last_if_missing(r["routine"]), _last_if_missing(r["slot"])))
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
            "abandoned_at": slots,
        }

    def invocations_section(self, key: Any) -> dict[str, Any]:
        counts = self.invocations.get(key, {})
        per_outcome: dict[str, int] = {}
        for (_tool, outcome), n in counts.items():
            per_outcome[outcome] = per_outcome.get(outcome, 0) + n
        by_outcome: dict[str, int] = dict.fromkeys(sorted(INVOCATION_OUTCOMES), 0)
        for outcome in sorted(per_outcome):
            by_outcome[outcome] = per_outcome[outcome]
        return {"total": sum(counts.values()), "by_outcome": by_outcome, "by_tool": m.invocation_rows(counts)}

    def citations_section(self, key: Any) -> dict[str, Any]:
        answered, uncited = self.citations.get(key, (0, 0))
        return {
            **{k: num(v) for k, v in m.citation_row(answered, uncited).items()},
            "most_cited": self.documents.get(key, []),
        }


def _last_if_missing(value: Any) -> tuple[bool, Any]:
    """A sort key putting missing values last, as pandas sorts them."""
    return (True, "") if missing(value) else (False, value)


def _middle_values(middles: pd.DataFrame) -> list[Row]:
    """The middle values as rows with `x`: turns as floats, durations (`us`) as seconds, each as pandas makes them
    of a duration before a median (not after: rounding)."""
    if middles.empty:
        return []
    value = middles["value"].astype("int64").to_numpy()
    x = value.astype("float64")
    is_us = (middles["measure"] == "us").to_numpy()
    if is_us.any():
        x[is_us] = pd.Series(pd.to_timedelta(value[is_us], unit="us")).dt.total_seconds().to_numpy()
    return [
        {"key": k, "routine": r, "measure": measure, "x": v}
        for k, r, measure, v in zip(middles["key"], middles["routine"], middles["measure"], x.tolist(), strict=True)
    ]


def _routine_row(counts: list[Row], middles: list[Row]) -> dict[str, Any]:
    """What `metrics.routine_summary` gives per routine, from counts (one row or none) and the middle values of
    the turns and durations of closed instances."""
    row = counts[0] if counts else None
    n = {k: int(row[k]) if row is not None else 0 for k in ROUTINE_COUNTS}
    rate = _wilson_dict(n["abandoned"], n["completed"] + n["abandoned"])
    return {
        **n,
        "abandonment_rate": num(rate["share"]),
        "ci_low": num(rate["ci_low"]),
        "ci_high": num(rate["ci_high"]),
        "median_turns": median(r["x"] for r in middles if r["measure"] == "turns" and not np.isnan(r["x"])),
        "median_seconds": median(r["x"] for r in middles if r["measure"] == "us" and not np.isnan(r["x"])),
    }
