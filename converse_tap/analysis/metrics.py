"""The metric definitions of docs/metrics.md, each a function from frames to a frame.

Sightings become facts first: `replies` keeps one row per distinct agent message carrying the envelope,
`turns` one row per turn with a coverage verdict; everything else counts those.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..a2a.constants import TERMINAL_ROUTINE_STATUSES
from .stats import wilson

NONE = "(none)"  # the key under which a missing value is counted
_COVERAGE_FIELDS = ["coverage_availability", "coverage", "coverage_reason", "originating_turn_id"]


def _plain(frame: pd.DataFrame) -> pd.DataFrame:
    """Categoricals -> plain objects, so comparisons and group keys behave the same on every pandas."""
    cats = [c for c in frame.columns if isinstance(frame[c].dtype, pd.CategoricalDtype)]
    if not cats:
        return frame
    return frame.assign(**{c: frame[c].astype(object).where(frame[c].notna(), None) for c in cats})


def replies(messages: pd.DataFrame) -> pd.DataFrame:
    """One row per reply: a distinct agent-role message (by message id) carrying the converse envelope.

    The row holds the values of the reply's last sighting and `first_seen`, the time of its first one;
    rows are ordered by first sighting. `reply_key` is the message id (or the sighting, when the message
    has none); `conversation` is the context id, else the task id, else the exchange.
    """
    m = messages
    if m.empty:
        return _plain(
            m.assign(
                reply_key=pd.Series(dtype=object),
                first_seen=m.get("ts"),
                conversation=pd.Series(dtype=object),
            )
        )
    m = m[(m["role"].astype(object) == "agent") & m["has_envelope"].astype(bool)]
    if "object_kind" in m.columns:
        m = m[m["object_kind"].astype(object) == "message"]
    m = _plain(m)
    fallback = "sighting:" + m["exchange_id"].astype(str) + ":" + m["seq"].astype(str)
    m = m.assign(reply_key=m["message_id"].where(m["message_id"].notna(), fallback))
    m = m.sort_values(["ts", "exchange_id", "seq"], kind="stable", na_position="last")
    first = m.drop_duplicates("reply_key", keep="first").set_index("reply_key")
    last = m.drop_duplicates("reply_key", keep="last").set_index("reply_key")
    out = last.assign(
        first_seen=first["ts"],
        _order_exchange=first["exchange_id"],
        _order_seq=first["seq"],
    )
    conv = out["context_id"].where(out["context_id"].notna(), out["task_id"])
    conv = conv.where(conv.notna(), "exchange:" + out["exchange_id"].astype(str))
    out = out.assign(conversation=conv).reset_index()
    out = out.sort_values(["first_seen", "_order_exchange", "_order_seq"], kind="stable", na_position="last")
    return out.drop(columns=["_order_exchange", "_order_seq"]).reset_index(drop=True)


def turns(replies: pd.DataFrame) -> pd.DataFrame:
    """One row per turn carrying answerCoverage: the turn is originatingTurnId, else the reply's message id;
    a turn seen with several verdicts keeps the last one observed."""
    if replies.empty:
        return replies.assign(turn_id=pd.Series(dtype=object))
    has = replies[_COVERAGE_FIELDS].notna().any(axis=1)
    t = replies[has]
    turn = t["originating_turn_id"].where(t["originating_turn_id"].notna(), t["reply_key"])
    t = t.assign(turn_id=turn)
    return t.drop_duplicates(["agent", "turn_id"], keep="last").reset_index(drop=True)


def _counts(values: pd.Series, total: int, with_ci: bool) -> pd.DataFrame:
    counts = values.fillna(NONE).value_counts(sort=False)
    rows = []
    for value, count in sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0]))):
        share, lo, hi = wilson(int(count), total)
        row: dict[str, Any] = {"value": value, "count": int(count), "share": share}
        if with_ci:
            row.update(ci_low=lo, ci_high=hi)
        rows.append(row)
    cols = ["value", "count", "share"] + (["ci_low", "ci_high"] if with_ci else [])
    return pd.DataFrame(rows, columns=cols)


def assessed(turns: pd.DataFrame) -> pd.DataFrame:
    return turns[turns["coverage_availability"] == "assessed"] if not turns.empty else turns


def coverage_distribution(turns: pd.DataFrame) -> pd.DataFrame:
    """Coverage value of assessed turns: count, share and 95% Wilson interval (unknown values verbatim)."""
    a = assessed(turns)
    return _counts(a["coverage"] if not a.empty else pd.Series(dtype=object), len(a), with_ci=True)


def coverage_reasons(turns: pd.DataFrame) -> pd.DataFrame:
    """Reason of assessed turns: count and share of assessed turns ('(none)' when a turn gives none)."""
    a = assessed(turns)
    return _counts(a["coverage_reason"] if not a.empty else pd.Series(dtype=object), len(a), with_ci=False)


def coverage_availability(turns: pd.DataFrame) -> pd.DataFrame:
    """Availability of every turn that carries answerCoverage."""
    col = turns["coverage_availability"] if not turns.empty else pd.Series(dtype=object)
    return _counts(col, len(turns), with_ci=False)


def author_share(replies: pd.DataFrame) -> pd.DataFrame:
    """Replies that state an author, by author: count, share, 95% Wilson interval."""
    stated = replies["author"].dropna() if not replies.empty else pd.Series(dtype=object)
    return _counts(stated, len(stated), with_ci=True)


def conversations(replies: pd.DataFrame) -> pd.DataFrame:
    """Per conversation: replies, human-written replies, suppressed turns, and ownership changes."""
    cols = ["agent", "conversation", "replies", "human_replies", "suppressed_turns", "handoffs_to_human",
            "handbacks_to_agent", "first_seen", "last_seen"]  # fmt: skip
    if replies.empty:
        return pd.DataFrame(columns=cols)
    keys = ["agent", "conversation"]
    r = replies.assign(
        _human=(replies["author"] == "human"),
        _suppressed=(replies["ownership_suppressed"] == True),  # noqa: E712 (nullable column)
    )
    out = r.groupby(keys, sort=True).agg(
        replies=("reply_key", "size"),
        human_replies=("_human", "sum"),
        suppressed_turns=("_suppressed", "sum"),
        first_seen=("first_seen", "min"),
        last_seen=("first_seen", "max"),
    )
    # ownership changes between consecutive replies that state an owner (replies come in first-seen order)
    owned = r[r["ownership_state"].notna()]
    prev = owned.groupby(keys, sort=False)["ownership_state"].shift()
    changes = (
        owned.assign(
            handoffs_to_human=(prev == "ai_owned") & (owned["ownership_state"] == "human_owned"),
            handbacks_to_agent=(prev == "human_owned") & (owned["ownership_state"] == "ai_owned"),
        )
        .groupby(keys, sort=True)[["handoffs_to_human", "handbacks_to_agent"]]
        .sum()
    )
    out = out.join(changes, how="left").fillna({"handoffs_to_human": 0, "handbacks_to_agent": 0})
    for c in ("replies", "human_replies", "suppressed_turns", "handoffs_to_human", "handbacks_to_agent"):
        out[c] = out[c].astype(int)
    return out.reset_index()[cols]


def _routine_key(replies: pd.DataFrame) -> pd.Series:
    return replies["routine_name"].where(replies["routine_name"].notna(), replies["routine_tool_name"])


def _required_open(slots: Any) -> list[str]:
    if slots is None or (isinstance(slots, float) and np.isnan(slots)):
        return []
    return [s["key"] or NONE for s in slots if s.get("required")]


def routine_instances(
    replies: pd.DataFrame, stale_after: pd.Timedelta | None = None, now: pd.Timestamp | None = None
) -> pd.DataFrame:
    """One row per routine instance: a run of one routine within one conversation, from its first status to a
    terminal one (`completed`/`abandoned`); a status after a terminal one starts a new instance.

    outcome is completed, abandoned or open; `abandoned_at` lists the required slots still pending at the
    last status before abandonment. With `stale_after`, open instances idle longer than that before `now`
    (default: the last reply seen in the data) are marked stale.
    """
    cols = ["agent", "conversation", "routine", "tool_name", "instance", "outcome", "stale", "turns",
            "started", "ended", "last_seen", "seconds", "last_status", "abandoned_at"]  # fmt: skip
    if replies.empty:
        return pd.DataFrame(columns=cols)
    r = replies[replies["routine_status"].notna()]
    r = r.assign(routine=_routine_key(r))
    r = r[r["routine"].notna()]
    if r.empty:
        return pd.DataFrame(columns=cols)
    if now is None:
        now = replies["first_seen"].max()
    keys = ["agent", "conversation", "routine"]
    terminal = r["routine_status"].isin(TERMINAL_ROUTINE_STATUSES)
    # an instance number per row: 1 + the terminal statuses before it in its (agent, conversation, routine)
    instance = terminal.astype(int).groupby([r[k] for k in keys], sort=False).cumsum() - terminal.astype(int) + 1
    r = r.assign(instance=instance, _prev_pending=None)
    inst_keys = [*keys, "instance"]
    r["_prev_pending"] = r.groupby(inst_keys, sort=False)["pending_input"].shift()
    g = r.groupby(inst_keys, sort=True)
    out = g.agg(
        tool_name=("routine_tool_name", "first"),
        turns=("reply_key", "size"),
        started=("first_seen", "first"),
        last_seen=("first_seen", "last"),
        last_status=("routine_status", "last"),
        _last_prev_pending=("_prev_pending", "last"),
    ).reset_index()
    closed = out["last_status"].isin(TERMINAL_ROUTINE_STATUSES)
    out["outcome"] = out["last_status"].where(closed, "open")
    out["ended"] = out["last_seen"].where(closed)
    out["seconds"] = (out["ended"] - out["started"]).dt.total_seconds().astype(object)
    out["seconds"] = out["seconds"].where(closed, None)
    out["abandoned_at"] = [
        _required_open(p) if o == "abandoned" else []
        for o, p in zip(out["outcome"], out["_last_prev_pending"], strict=True)
    ]
    stale = pd.Series(False, index=out.index)
    if stale_after is not None and now is not None:
        stale = (~closed) & ((now - out["last_seen"]) > stale_after)
    out["stale"] = stale.astype(bool)
    out["tool_name"] = out["tool_name"].astype(object).where(out["tool_name"].notna(), None)
    return out[cols]


def _seconds(start: Any, end: Any) -> float | None:
    if pd.isna(start) or pd.isna(end):
        return None
    return float((end - start).total_seconds())


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
    a = instances[instances["outcome"] == "abandoned"] if not instances.empty else instances
    rows = [(r["routine"], slot) for r in a.to_dict("records") for slot in (r["abandoned_at"] or [NONE])]
    frame = pd.DataFrame(rows, columns=["routine", "slot"])
    out = frame.value_counts().rename("abandoned").reset_index()
    return out.sort_values(["abandoned", "routine", "slot"], ascending=[False, True, True]).reset_index(drop=True)


def invocation_outcomes(replies: pd.DataFrame) -> pd.DataFrame:
    """Typed routine calls: one row per tool and outcome with its count (unknown outcomes verbatim)."""
    if replies.empty:
        return pd.DataFrame(columns=["tool", "outcome", "count"])
    inv = replies[replies["invocation_outcome"].notna() | replies["invocation_tool_name"].notna()]
    frame = pd.DataFrame(
        {"tool": inv["invocation_tool_name"].fillna(NONE), "outcome": inv["invocation_outcome"].fillna(NONE)}
    )
    out = frame.value_counts().rename("count").reset_index()
    return out.sort_values(["tool", "outcome"]).reset_index(drop=True)


def citation_summary(turns: pd.DataFrame) -> dict[str, Any]:
    """Answered (assessed) turns with no citation: count, share, Wilson interval."""
    a = assessed(turns)
    answered = a[a["coverage"] == "answered"] if not a.empty else a
    uncited = int((answered["citation_count"].fillna(0) == 0).sum()) if not answered.empty else 0
    share, lo, hi = wilson(uncited, len(answered))
    return {
        "answered_turns": len(answered),
        "answered_without_citation": uncited,
        "share": share,
        "ci_low": lo,
        "ci_high": hi,
    }


def most_cited(replies: pd.DataFrame, top: int = 10) -> pd.DataFrame:
    """Documents cited by the most replies (one count per reply that cites it)."""
    cols = ["document_id", "title", "replies"]
    if replies.empty:
        return pd.DataFrame(columns=cols)
    rows = []
    for key, cites in zip(replies["reply_key"], replies["citations"], strict=True):
        if cites is None or (isinstance(cites, float) and np.isnan(cites)):
            continue
        for doc in {(c["document_id"] or NONE, c["title"]) for c in cites}:
            rows.append((key, *doc))
    frame = pd.DataFrame(rows, columns=["reply_key", "document_id", "title"])
    if frame.empty:
        return pd.DataFrame(columns=cols)
    titles = frame.dropna(subset=["title"]).groupby("document_id")["title"].last()
    counts = frame.drop_duplicates(["reply_key", "document_id"]).groupby("document_id").size().rename("replies")
    out = counts.reset_index().assign(title=lambda f: f["document_id"].map(titles))
    out = out.sort_values(["replies", "document_id"], ascending=[False, True]).head(top)
    return out[cols].reset_index(drop=True)


def adoption(exchanges: pd.DataFrame, messages: pd.DataFrame) -> pd.DataFrame:
    """Share of A2A requests that asked for the converse extension, and share of distinct agent messages
    that carried the envelope."""
    calls = exchanges[exchanges["binding"].astype(object) != "card"] if not exchanges.empty else exchanges
    asked = int(calls["converse_requested"].astype(bool).sum()) if not calls.empty else 0
    agent = messages[messages["role"].astype(object) == "agent"] if not messages.empty else messages
    if not agent.empty:
        key = agent["message_id"].astype(object)
        key = key.where(key.notna(), agent["exchange_id"].astype(str) + ":" + agent["seq"].astype(str))
        per_message = agent.assign(_k=key).groupby("_k")["has_envelope"].any()
        distinct, carried = len(per_message), int(per_message.sum())
    else:
        distinct = carried = 0
    rows = []
    for metric, k, n in (
        ("requests_asking_converse", asked, len(calls)),
        ("agent_messages_with_envelope", carried, distinct),
    ):
        share, lo, hi = wilson(k, n)
        rows.append({"metric": metric, "count": k, "of": n, "share": share, "ci_low": lo, "ci_high": hi})
    return pd.DataFrame(rows)


def latest_cards(cards: pd.DataFrame) -> pd.DataFrame:
    """The most recent card of each agent and source (well-known, extended)."""
    if cards.empty:
        return cards
    return cards.sort_values("ts").drop_duplicates(["agent", "source"], keep="last")


def anomaly_counts(exchanges: pd.DataFrame, messages: pd.DataFrame, cards: pd.DataFrame) -> pd.DataFrame:
    """Conformance anomalies by table and code (the part before ':'), with one verbatim example each.
    Message anomalies count once per distinct message, however often it was sighted."""
    frames = []
    for table, frame, key in (
        ("exchanges", exchanges, "exchange_id"),
        ("messages", messages, None),
        ("agent_cards", cards, None),
    ):
        if frame.empty or "anomalies" not in frame.columns:
            continue
        f = frame[["anomalies"]].copy()
        if table == "messages":
            ident = frame["message_id"].astype(object)
            f["_k"] = ident.where(ident.notna(), frame["exchange_id"].astype(str) + ":" + frame["seq"].astype(str))
        elif table == "agent_cards":
            f["_k"] = frame["agent"].astype(str) + ":" + frame["ts"].astype(str)
        else:
            f["_k"] = frame[key]
        f = f.explode("anomalies").dropna(subset=["anomalies"]).drop_duplicates()
        f["table"] = table
        frames.append(f)
    if not frames:
        return pd.DataFrame(columns=["table", "code", "count", "example"])
    allrows = pd.concat(frames, ignore_index=True)
    allrows["code"] = allrows["anomalies"].str.split(":", n=1).str[0]
    out = allrows.groupby(["table", "code"]).agg(count=("anomalies", "size"), example=("anomalies", "first"))
    return (
        out.reset_index().sort_values(["count", "table", "code"], ascending=[False, True, True]).reset_index(drop=True)
    )
