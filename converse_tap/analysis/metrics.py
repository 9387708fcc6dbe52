"""The metric definitions of docs/metrics.md.

Sightings become facts first, in SQL (`engine.py`): `replies` keeps one row per distinct agent message
carrying the envelope, `turns` one row per turn with a coverage verdict, `conversations` and
`routine_instances` one row per conversation and per routine run. The functions here take those facts as
frames and count them; a frame may carry a count column `n` (rows standing for `n` facts each), which is how
the report feeds them aggregates computed over a whole dataset.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..a2a.constants import TERMINAL_ROUTINE_STATUSES
from .engine import NONE, Engine
from .load import Frames
from .stats import wilson
from .tally import ALL, Tallies, documents, shares, sizes, tally
from .tally import count as count  # re-exported with value_key: callers name them from here
from .tally import value_key as value_key


def replies(messages: pd.DataFrame) -> pd.DataFrame:
    """One row per reply: a distinct agent-role message (by message id) carrying the converse envelope.

    The row holds the values of the reply's last sighting and `first_seen`, the time of its first one
    (`first_pos` is that sighting's place in the data); rows are ordered by first sighting. `reply_key` is the
    message id (or the sighting, when the message has none); `conversation` is the context id, else the task id,
    else the exchange. The definition is SQL (`engine.REPLIES`), the same that runs over a whole dataset.
    """
    with Engine.over_frames(messages=messages) as e:
        return e.replies()


def turns(replies: pd.DataFrame) -> pd.DataFrame:
    """One row per turn carrying answerCoverage: the turn is originatingTurnId, else the reply's message id;
    a turn seen with several verdicts keeps the last one observed."""
    with Engine.over_frames(replies=replies) as e:
        return e.turns()


TERMINAL = sorted(TERMINAL_ROUTINE_STATUSES)


def _frame(rows: list[dict[str, Any]], with_ci: bool) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["value", "count", "share"] + (["ci_low", "ci_high"] if with_ci else []))


def assessed(turns: pd.DataFrame) -> pd.DataFrame:
    return turns[turns["coverage_availability"] == "assessed"] if not turns.empty else turns


# Each metric is a count per key of a grouping (`by`: a column of the frame; None: one key, ALL), so the report
# counts every agent, day or routine in one pass (`tally`); the functions after these are their ungrouped form.


def coverage_tallies(turns: pd.DataFrame, by: str | None = None) -> Tallies:
    """Assessed turns by coverage value (unknown values verbatim)."""
    return tally(assessed(turns), by, "coverage")


def reason_tallies(turns: pd.DataFrame, by: str | None = None) -> Tallies:
    """Assessed turns by reason ('(none)' when a turn gives none)."""
    return tally(assessed(turns), by, "coverage_reason")


def availability_tallies(turns: pd.DataFrame, by: str | None = None) -> Tallies:
    """Every turn that carries answerCoverage, by availability."""
    return tally(turns, by, "coverage_availability")


def author_tallies(replies: pd.DataFrame, by: str | None = None) -> Tallies:
    """Replies that state an author, by author."""
    return tally(replies[replies["author"].notna()], by, "author")


def invocation_tallies(replies: pd.DataFrame, by: str | None = None) -> Tallies:
    """Typed routine calls, by (tool, outcome) (unknown outcomes verbatim)."""
    inv = replies[replies["invocation_outcome"].notna() | replies["invocation_tool_name"].notna()]
    return tally(inv, by, "invocation_tool_name", "invocation_outcome")


def citation_tallies(turns: pd.DataFrame, by: str | None = None) -> dict[Any, tuple[int, int]]:
    """Answered (assessed) turns, and those of them with no citation: (answered, uncited) per key."""
    a = assessed(turns)
    answered = a[a["coverage"] == "answered"]
    uncited = sizes(answered[answered["citation_count"].fillna(0) == 0], by)
    return {k: (n, uncited.get(k, 0)) for k, n in sizes(answered, by).items()}


def coverage_distribution(turns: pd.DataFrame) -> pd.DataFrame:
    """Coverage value of assessed turns: count, share and 95% Wilson interval (unknown values verbatim)."""
    return _frame(shares(coverage_tallies(turns).get(ALL, {}), with_ci=True), with_ci=True)


def coverage_reasons(turns: pd.DataFrame) -> pd.DataFrame:
    """Reason of assessed turns: count and share of assessed turns ('(none)' when a turn gives none)."""
    return _frame(shares(reason_tallies(turns).get(ALL, {}), with_ci=False), with_ci=False)


def coverage_availability(turns: pd.DataFrame) -> pd.DataFrame:
    """Availability of every turn that carries answerCoverage."""
    return _frame(shares(availability_tallies(turns).get(ALL, {}), with_ci=False), with_ci=False)


def author_share(replies: pd.DataFrame) -> pd.DataFrame:
    """Replies that state an author, by author: count, share, 95% Wilson interval."""
    return _frame(shares(author_tallies(replies).get(ALL, {}), with_ci=True), with_ci=True)


def conversations(replies: pd.DataFrame) -> pd.DataFrame:
    """Per conversation: replies, human-written replies, suppressed turns, and ownership changes."""
    with Engine.over_frames(replies=replies) as e:
        return e.conversations()


def routine_instances(
    replies: pd.DataFrame, stale_after: pd.Timedelta | None = None, now: pd.Timestamp | None = None
) -> pd.DataFrame:
    """One row per routine instance: a run of one routine within one conversation, from its first status to a
    terminal one (`completed`/`abandoned`); a status after a terminal one starts a new instance.

    outcome is completed, abandoned or open; `abandoned_at` lists, for an abandoned instance, the required
    slots still pending at the last status before abandonment (None for the others). With `stale_after`, open
    instances idle longer than that before `now` (default: the last reply seen in the data) are marked stale.
    """
    with Engine.over_frames(replies=replies) as e:
        raw = e.instances()
        if now is None:
            now = e.last_reply_seen()
    return finish_instances(raw, stale_after, now)


INSTANCE_COLUMNS = [
    "agent", "conversation", "routine", "tool_name", "instance", "outcome", "stale", "turns", "started", "ended",
    "last_seen", "seconds", "last_status", "abandoned_at",
]  # fmt: skip


def finish_instances(raw: pd.DataFrame, stale_after: pd.Timedelta | None, now: pd.Timestamp | None) -> pd.DataFrame:
    """Outcome, duration, abandoned-at slots and staleness of the per-instance rows `Engine.instances` gives."""
    if raw.empty:
        return pd.DataFrame(columns=INSTANCE_COLUMNS)
    out = raw
    closed = out["last_status"].isin(TERMINAL)
    out["outcome"] = out["last_status"].where(closed, "open")
    out["ended"] = out["last_seen"].where(closed)
    out["seconds"] = (out["ended"] - out["started"]).dt.total_seconds().astype(object)
    out["seconds"] = out["seconds"].where(closed, None)
    stale = pd.Series(False, index=out.index)
    if stale_after is not None and now is not None:
        stale = (~closed) & ((now - out["last_seen"]) > stale_after)
    out["stale"] = stale.astype(bool)
    out["tool_name"] = out["tool_name"].astype(object).where(out["tool_name"].notna(), None)
    out["instance"] = out["instance"].astype(int)
    out["turns"] = out["turns"].astype(int)
    return out[[c for c in INSTANCE_COLUMNS if c in out.columns]].reset_index(drop=True)


def routine_summary(instances: pd.DataFrame) -> pd.DataFrame:
    """Per routine: instances by outcome, abandonment rate (abandoned / (completed + abandoned)) with its
    Wilson interval, stale open instances, median turns and seconds of closed instances."""
    cols = [
        "routine",
        "instances",
        "completed",
        "abandoned",
        "open",
        "stale",
        "abandonment_rate",
        "ci_low",
        "ci_high",
        "median_turns",
        "median_seconds",
    ]
    rows = []
    for routine, g in instances.groupby("routine", sort=True):
        rows.append(_routine_row(g, routine=routine))
    return pd.DataFrame(rows, columns=cols)


def _routine_row(g: pd.DataFrame, **key: Any) -> dict[str, Any]:
    completed = int((g["outcome"] == "completed").sum())
    abandoned = int((g["outcome"] == "abandoned").sum())
    rate, lo, hi = wilson(abandoned, completed + abandoned)
    closed = g[g["outcome"] != "open"]
    return {
        **key,
        "instances": len(g),
        "completed": completed,
        "abandoned": abandoned,
        "open": int((g["outcome"] == "open").sum()),
        "stale": int(g["stale"].astype(bool).sum()),
        "abandonment_rate": rate,
        "ci_low": lo,
        "ci_high": hi,
        "median_turns": float(closed["turns"].median()) if len(closed) else None,
        "median_seconds": float(pd.to_numeric(closed["seconds"]).median()) if len(closed) else None,
    }


def routine_totals(instances: pd.DataFrame) -> dict[str, Any]:
    return _routine_row(instances)


def abandoned_slots(instances: pd.DataFrame) -> pd.DataFrame:
    """Which required slot was still open when users abandoned: one count per abandoned instance and slot."""
    if instances.empty:
        return pd.DataFrame(columns=["routine", "slot", "abandoned"])
    a = instances[instances["outcome"] == "abandoned"]
    slots = a["abandoned_at"].map(lambda open_slots: open_slots or [NONE])  # abandoned at the first status: (none)
    frame = pd.DataFrame({"routine": a["routine"], "slot": slots}).explode("slot")
    out = frame.value_counts().rename("abandoned").reset_index()
    return out.sort_values(["abandoned", "routine", "slot"], ascending=[False, True, True]).reset_index(drop=True)


def invocation_outcomes(replies: pd.DataFrame) -> pd.DataFrame:
    """Typed routine calls: one row per tool and outcome with its count (unknown outcomes verbatim)."""
    return pd.DataFrame(invocation_rows(invocation_tallies(replies).get(ALL, {})), columns=["tool", "outcome", "count"])


def invocation_rows(counts: dict[Any, int]) -> list[dict[str, Any]]:
    return [{"tool": tool, "outcome": outcome, "count": n} for (tool, outcome), n in sorted(counts.items())]


def citation_summary(turns: pd.DataFrame) -> dict[str, Any]:
    """Answered (assessed) turns with no citation: count, share, Wilson interval."""
    return citation_row(*citation_tallies(turns).get(ALL, (0, 0)))


def citation_row(answered: int, uncited: int) -> dict[str, Any]:
    share, lo, hi = wilson(uncited, answered)
    return {
        "answered_turns": answered,
        "answered_without_citation": uncited,
        "share": share,
        "ci_low": lo,
        "ci_high": hi,
    }


def top_cited(cited: pd.DataFrame, top: int = 10) -> pd.DataFrame:
    """The documents cited by the most replies, from per-document counts (`Engine.cited`)."""
    return pd.DataFrame(documents(cited, None, top).get(ALL, []), columns=["document_id", "title", "replies"])


def most_cited(replies: pd.DataFrame, top: int = 10) -> pd.DataFrame:
    """Documents cited by the most replies (one count per reply that cites it)."""
    with Engine.over_frames(replies=replies) as e:
        return top_cited(e.cited(), top)


def adoption_rows(counts: dict[str, int]) -> pd.DataFrame:
    rows = []
    for metric, k, n in (
        ("requests_asking_converse", counts["asked"], counts["calls"]),
        ("agent_messages_with_envelope", counts["carried"], counts["messages"]),
    ):
        share, lo, hi = wilson(k, n)
        rows.append({"metric": metric, "count": k, "of": n, "share": share, "ci_low": lo, "ci_high": hi})
    return pd.DataFrame(rows)


def adoption(exchanges: pd.DataFrame, messages: pd.DataFrame) -> pd.DataFrame:
    """Share of A2A requests that asked for the converse extension, and share of distinct agent messages
    that carried the envelope."""
    with Engine.over_frames(Frames(exchanges, messages, pd.DataFrame())) as e:
        return adoption_rows(e.adoption_counts())


def latest_cards(cards: pd.DataFrame) -> pd.DataFrame:
    """The most recent card of each agent and source (well-known, extended): by time, a card without one last
    (ordered last, as sightings are), and cards of one time by their place in `cards` (the data's order, as
    `Engine.cards` gives them: the one recorded last). The sort is stable: quicksort left ties to chance, so a card
    fetched twice in one microsecond could be either."""
    if cards.empty:
        return cards
    ordered = cards.sort_values("ts", kind="stable", na_position="last")
    return ordered.drop_duplicates(["agent", "source"], keep="last")


def anomaly_counts(exchanges: pd.DataFrame, messages: pd.DataFrame, cards: pd.DataFrame) -> pd.DataFrame:
    """Conformance anomalies by table and code (the part before ':'), with one verbatim example each.
    Message anomalies count once per distinct message, however often it was sighted."""
    with Engine.over_frames(Frames(exchanges, messages, cards)) as e:
        return e.anomalies()
