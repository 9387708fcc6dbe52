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


def _weights(frame: pd.DataFrame) -> pd.Series:
    return frame["n"] if "n" in frame.columns else pd.Series(1, index=frame.index)


def value_key(value: Any) -> str:
    """The key a counted value is reported under, one per value: `(none)` (NONE) for a missing value; a value from
    the data that starts like such a placeholder, `(`, or like a quoted value, `"`, is quoted (its `\\` and `"`
    escaped with a backslash), so that a wire value `(none)` is counted as `"(none)"`, apart from the missing
    ones (`facts_sql.value_key_sql` builds the same in SQL)."""
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return NONE
    text = str(value)
    if text.startswith(("(", '"')):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def _counts(values: pd.Series, weights: pd.Series, with_ci: bool) -> pd.DataFrame:
    total = int(weights.sum())
    counts = weights.groupby(values.astype(object).map(value_key), sort=False).sum()
    rows = []
    for value, count in sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0]))):
        share, lo, hi = wilson(int(count), total)
        row: dict[str, Any] = {"value": value, "count": int(count), "share": share}
        if with_ci:
            row.update(ci_low=lo, ci_high=hi)
        rows.append(row)
    cols = ["value", "count", "share"] + (["ci_low", "ci_high"] if with_ci else [])
    return pd.DataFrame(rows, columns=cols)


def count(frame: pd.DataFrame) -> int:
    """How many facts a frame stands for (its rows, or the sum of its `n`)."""
    return int(_weights(frame).sum())


def assessed(turns: pd.DataFrame) -> pd.DataFrame:
    return turns[turns["coverage_availability"] == "assessed"] if not turns.empty else turns


def coverage_distribution(turns: pd.DataFrame) -> pd.DataFrame:
    """Coverage value of assessed turns: count, share and 95% Wilson interval (unknown values verbatim)."""
    a = assessed(turns)
    return _counts(a["coverage"], _weights(a), with_ci=True)


def coverage_reasons(turns: pd.DataFrame) -> pd.DataFrame:
    """Reason of assessed turns: count and share of assessed turns ('(none)' when a turn gives none)."""
    a = assessed(turns)
    return _counts(a["coverage_reason"], _weights(a), with_ci=False)


def coverage_availability(turns: pd.DataFrame) -> pd.DataFrame:
    """Availability of every turn that carries answerCoverage."""
    return _counts(turns["coverage_availability"], _weights(turns), with_ci=False)


def author_share(replies: pd.DataFrame) -> pd.DataFrame:
    """Replies that state an author, by author: count, share, 95% Wilson interval."""
    stated = replies[replies["author"].notna()]
    return _counts(stated["author"], _weights(stated), with_ci=True)


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
    inv = replies[replies["invocation_outcome"].notna() | replies["invocation_tool_name"].notna()]
    if inv.empty:
        return pd.DataFrame(columns=["tool", "outcome", "count"])
    frame = pd.DataFrame(
        {
            "tool": inv["invocation_tool_name"].astype(object).map(value_key),
            "outcome": inv["invocation_outcome"].astype(object).map(value_key),
            "count": _weights(inv),
        }
    )
    out = frame.groupby(["tool", "outcome"], sort=False)["count"].sum().astype(int).reset_index()
    return out.sort_values(["tool", "outcome"]).reset_index(drop=True)


def citation_summary(turns: pd.DataFrame) -> dict[str, Any]:
    """Answered (assessed) turns with no citation: count, share, Wilson interval."""
    a = assessed(turns)
    answered = a[a["coverage"] == "answered"]
    uncited = count(answered[answered["citation_count"].fillna(0) == 0])
    total = count(answered)
    share, lo, hi = wilson(uncited, total)
    return {
        "answered_turns": total,
        "answered_without_citation": uncited,
        "share": share,
        "ci_low": lo,
        "ci_high": hi,
    }


def top_cited(cited: pd.DataFrame, top: int = 10) -> pd.DataFrame:
    """The documents cited by the most replies, from per-document counts (`Engine.cited`)."""
    cols = ["document_id", "title", "replies"]
    if cited.empty:
        return pd.DataFrame(columns=cols)
    counts = cited.groupby("document_id", sort=False).agg(replies=("replies", "sum"), title=("title", "first"))
    out = counts.reset_index().sort_values(["replies", "document_id"], ascending=[False, True]).head(top)
    out["replies"] = out["replies"].astype(int)
    return out[cols].reset_index(drop=True)


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
    """The most recent card of each agent and source (well-known, extended)."""
    if cards.empty:
        return cards
    return cards.sort_values("ts").drop_duplicates(["agent", "source"], keep="last")


def anomaly_counts(exchanges: pd.DataFrame, messages: pd.DataFrame, cards: pd.DataFrame) -> pd.DataFrame:
    """Conformance anomalies by table and code (the part before ':'), with one verbatim example each.
    Message anomalies count once per distinct message, however often it was sighted."""
    with Engine.over_frames(Frames(exchanges, messages, cards)) as e:
        return e.anomalies()
