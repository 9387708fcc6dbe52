"""An independent reference for the report's headline numbers, written from docs/metrics.md alone, in plain Python
over the stored rows: sightings -> replies -> turns, conversations, routine instances, and the figures the report
shows from them (tests/analysis/test_metrics_reference.py compares the engines with it)."""

from __future__ import annotations

import math
import statistics
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

from converse_tap.a2a.constants import PUSH_AGENT
from converse_tap.analysis.load import Window

T0 = datetime(2026, 12, 1, 23, 57, tzinfo=UTC)  # minutes 0 to 6 of the data span two UTC days
STALE = timedelta(minutes=2)

# --- the reference: docs/metrics.md, read literally ----------------------------------------------------------------

NONE = "(none)"
TERMINAL = ("completed", "abandoned")
Z = 1.959963984540054  # the 97.5% quantile of the normal law (the document's 1.96)


def at(minute: int, us: int = 0) -> datetime:
    """A time `minute` minutes and `us` microseconds after T0 (a bound exactly at a row's time, or just after)."""
    return T0 + timedelta(minutes=minute, microseconds=us)


def key_of(value: Any) -> str:
    """ "Keys of counted values": missing -> (none), a value starting with ( or " quoted, others as they are."""
    if value is None:
        return NONE
    text = str(value)
    if text[:1] in ("(", '"'):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def wilson(k: int, n: int) -> tuple[float | None, float | None, float | None]:
    if n == 0:
        return None, None, None
    p = k / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / (1 + Z * Z / n)
    return p, centre - half, centre + half


def order(row: dict[str, Any]) -> tuple[Any, ...]:
    """Sightings by time (none last), then by place in the data: file, then row."""
    return (row["ts"] is None, row["ts"] or T0, row["pos"])


def in_window(row: dict[str, Any], window: Window, ts: str = "ts") -> bool:
    """Within the window's times, `since <= ts < until` (its agents are chosen after push deliveries are
    attributed); a row without a time is in no bounded window."""
    if window.since is not None and (row[ts] is None or row[ts] < window.since):
        return False
    return window.until is None or (row[ts] is not None and row[ts] < window.until)


def agent_said(rows: list[dict[str, Any]], window: Window) -> list[dict[str, Any]]:
    """The sightings replies are made of, in the window's times: agent-role messages in responses."""
    return [
        r
        for r in rows
        if r["role"] == "agent" and r["object_kind"] == "message" and r["direction"] == "response"
        if in_window(r, window)
    ]


def push_owners(said: list[dict[str, Any]], calls: list[dict[str, Any]]) -> dict[Any, Any]:
    """ "Push deliveries": a delivery's task is the agent's whose sightings or calls (exchanges other than card
    fetches and deliveries), within the window's times, hold it, when exactly one agent's do."""
    holders: dict[Any, set[str]] = {}
    for r in [*said, *calls]:
        if r["agent"] not in (PUSH_AGENT, None) and r["task_id"] is not None:
            holders.setdefault(r["task_id"], set()).add(r["agent"])
    return {task: min(agents) for task, agents in holders.items() if len(agents) == 1}


def attribute(rows: list[dict[str, Any]], owners: dict[Any, Any], window: Window) -> list[dict[str, Any]]:
    """Each pushed row under its task's agent (when it has one), then the window's agents' rows only."""
    out = [
        {**r, "agent": owners[r["task_id"]]} if r["agent"] == PUSH_AGENT and r["task_id"] in owners else r for r in rows
    ]
    return [r for r in out if not window.agents or r["agent"] in window.agents]


def message_key(r: dict[str, Any]) -> Any:
    return r["message_id"] if r["message_id"] is not None else f"sighting:{r['exchange_id']}:{r['seq']}"


def build_replies(
    rows: list[dict[str, Any]], window: Window, calls: list[dict[str, Any]] | None = None
) -> tuple[int, list[dict[str, Any]]]:
    """(agent message sightings as stored, replies in first-sighting order); `calls`: the exchanges in the
    window's times that are calls (their tasks attribute push deliveries too)."""
    said = agent_said(rows, window)
    said = attribute(said, push_owners(said, calls or []), window)
    by_key: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
    for r in said:
        mid = message_key(r)
        by_key.setdefault((r["agent"], mid), []).append(r)
    replies = []
    for (_agent, mid), seen in by_key.items():
        enveloped = sorted((r for r in seen if r["has_envelope"]), key=order)
        if not enveloped:
            continue
        first, last = enveloped[0], enveloped[-1]
        reply = dict(last)
        reply.update(
            reply_key=mid,
            first_seen=first["ts"],
            first_order=order(first),
            conversation=last["context_id"] or last["task_id"] or f"exchange:{last['exchange_id']}",
        )
        replies.append(reply)
    replies.sort(key=lambda r: r["first_order"])
    return len(said), replies


def build_turns(replies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A reply carrying answerCoverage is a verdict on its turn; the last observed (by first sighting) stands."""
    turns: dict[tuple[Any, Any], dict[str, Any]] = {}
    for r in replies:  # in first-sighting order: a later verdict replaces the earlier one
        fields = ("coverage_availability", "coverage", "coverage_reason", "originating_turn_id")
        if any(r[f] is not None for f in fields):
            turns[(r["agent"], r["originating_turn_id"] or r["reply_key"])] = r
    return list(turns.values())


def build_instances(replies: list[dict[str, Any]]) -> list[dict[str, Any]]:
    runs: dict[tuple[Any, ...], list[list[dict[str, Any]]]] = {}
    for r in replies:
        name = r["routine_name"] or r["routine_tool_name"]
        if r["routine_status"] is None or name is None:
            continue
        chain = runs.setdefault((r["agent"], r["conversation"], key_of(name)), [[]])
        if chain[-1] and chain[-1][-1]["routine_status"] in TERMINAL:
            chain.append([])
        chain[-1].append(r)
    out = []
    for (agent, _conv, routine), chain in runs.items():
        for statuses in chain:
            last = statuses[-1]["routine_status"]
            outcome = last if last in TERMINAL else "open"
            slots = None
            if outcome == "abandoned":
                before = statuses[-2]["pending_input"] if len(statuses) > 1 else None
                slots = [key_of(s["key"]) for s in before or [] if s["required"]] or [NONE]
            first_ts, last_ts = statuses[0]["first_seen"], statuses[-1]["first_seen"]
            seconds = (last_ts - first_ts).total_seconds() if first_ts and last_ts else None
            out.append(
                dict(agent=agent, routine=routine, outcome=outcome, turns=len(statuses), seconds=seconds)
                | dict(slots=slots, started=first_ts, last_seen=last_ts)
            )
    return out


def count(values: list[Any]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[key_of(v)] = out.get(key_of(v), 0) + 1
    return out


def pairs(values: list[tuple[str, str]]) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for v in values:
        out[v] = out.get(v, 0) + 1
    return out


def sections(
    replies: list[dict[str, Any]],
    turns: list[dict[str, Any]],
    instances: list[dict[str, Any]],
    now: datetime | None,
    stale: timedelta = STALE,
) -> dict[str, Any]:
    """The headline figures over some replies, their turns and routine instances (a group's: "Windows and
    groups"); `now`: the last first sighting of all the replies, which `stale` idle time is measured to."""
    assessed = [t for t in turns if t["coverage_availability"] == "assessed"]
    coverage = count([t["coverage"] for t in assessed])
    authors = count([r["author"] for r in replies if r["author"] is not None])
    stated = sum(authors.values())
    conversations: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for r in replies:
        conversations.setdefault((r["agent"], r["conversation"]), []).append(r)
    handoffs = handbacks = 0
    for conv in conversations.values():
        states = [r["ownership_state"] for r in conv if r["ownership_state"] is not None]
        handoffs += sum(a == "ai_owned" and b == "human_owned" for a, b in pairwise(states))
        handbacks += sum(a == "human_owned" and b == "ai_owned" for a, b in pairwise(states))
    closed = [i for i in instances if i["outcome"] != "open"]
    n_abandoned = sum(i["outcome"] == "abandoned" for i in closed)
    slots: dict[tuple[str, str], int] = {}
    for i in instances:
        for slot in i["slots"] or []:
            slots[(i["routine"], slot)] = slots.get((i["routine"], slot), 0) + 1
    answered = [t for t in assessed if t["coverage"] == "answered"]
    uncited = sum(not t["citation_count"] for t in answered)
    cited: dict[str, int] = {}
    for r in replies:
        for doc in {key_of(c["document_id"]) for c in r["citations"] or []}:
            cited[doc] = cited.get(doc, 0) + 1
    seconds = [i["seconds"] for i in closed if i["seconds"] is not None]
    invoked = [r for r in replies if r["invocation_tool_name"] is not None or r["invocation_outcome"] is not None]
    return {
        "replies": len(replies),
        "turns": len(turns),
        "assessed": len(assessed),
        "coverage": coverage,
        "coverage_share": {v: rounded(wilson(n, len(assessed))) for v, n in coverage.items()},
        "reasons": count([t["coverage_reason"] for t in assessed]),
        "availability": count([t["coverage_availability"] for t in turns]),
        "authors": authors,
        "human_share": rounded(wilson(authors.get("human", 0), stated)),
        "conversations": len(conversations),
        "with_human": sum(any(r["author"] == "human" for r in c) for c in conversations.values()),
        "suppressed": sum(r["ownership_suppressed"] is True for r in replies),
        "handoffs": handoffs,
        "handbacks": handbacks,
        "instances": count([i["outcome"] for i in instances]),
        "by_routine": {
            r: count([i["outcome"] for i in instances if i["routine"] == r]) for r in {i["routine"] for i in instances}
        },
        "stale": sum(
            i["outcome"] == "open" and now is not None and i["last_seen"] is not None and now - i["last_seen"] > stale
            for i in instances
        ),
        "abandonment": rounded(wilson(n_abandoned, len(closed))),
        "median_turns": statistics.median(i["turns"] for i in closed) if closed else None,
        "median_seconds": statistics.median(seconds) if seconds else None,
        "abandoned_at": slots,
        "invocations": len(invoked),
        "by_tool": pairs([(key_of(r["invocation_tool_name"]), key_of(r["invocation_outcome"])) for r in invoked]),
        "answered": len(answered),
        "uncited": rounded(wilson(uncited, len(answered))),
        "cited": cited,
    }


def day_of(ts: datetime | None) -> str:
    return ts.strftime("%Y-%m-%d") if ts is not None else NONE


# "Windows and groups": a reply's group (agent, UTC date of its first sighting, routine) and an instance's (its
# agent, the date of its start, its routine); a group's sections are those of its replies, turns and instances
GROUPS = {
    "agent": (lambda r: key_of(r["agent"]), lambda i: key_of(i["agent"])),
    "day": (lambda r: day_of(r["first_seen"]), lambda i: day_of(i["started"])),
    "routine": (lambda r: key_of(r["routine_name"] or r["routine_tool_name"]), lambda i: i["routine"]),
}


def reference(
    rows: list[dict[str, Any]], window: Window, calls: list[dict[str, Any]] | None = None, stale: timedelta = STALE
) -> dict[str, Any]:
    sightings, replies = build_replies(rows, window, calls)
    turns, instances = build_turns(replies), build_instances(replies)
    times = [r["first_seen"] for r in replies if r["first_seen"] is not None]
    now = max(times) if times else None
    out: dict[str, Any] = {"sightings": sightings, "all": sections(replies, turns, instances, now, stale)}
    for g, (of_reply, of_instance) in GROUPS.items():
        keys = {of_reply(r) for r in replies} | {of_instance(i) for i in instances}
        out[g] = {
            k: sections(
                [r for r in replies if of_reply(r) == k],
                [t for t in turns if of_reply(t) == k],
                [i for i in instances if of_instance(i) == k],
                now,
                stale,
            )
            for k in keys
        }
    return out


def rounded(values: tuple[float | None, ...]) -> tuple[float | None, ...]:
    return tuple(None if v is None else round(max(0.0, min(1.0, v)), 9) for v in values)


# --- the same figures read from the report's JSON ------------------------------------------------------------------


def figures(s: dict[str, Any]) -> dict[str, Any]:
    cov, au, ro, inv, cit = (s[k] for k in ("coverage", "authors", "routines", "invocations", "citations"))
    counted = {k: v["count"] for k, v in cov["by_coverage"].items() if v["count"]}
    share = {k: rounded((v["share"], v["ci_low"], v["ci_high"])) for k, v in cov["by_coverage"].items() if v["count"]}
    by_routine = {r["routine"]: {k: r[k] for k in ("completed", "abandoned", "open") if r[k]} for r in ro["by_routine"]}
    return {
        "replies": au["replies"],
        "turns": cov["turns_with_coverage"],
        "assessed": cov["turns_assessed"],
        "coverage": counted,
        "coverage_share": share,
        "reasons": {k: v["count"] for k, v in cov["by_reason"].items()},
        "availability": {k: n for k, n in cov["by_availability"].items() if n},
        "authors": {k: n for k, n in au["by_author"].items() if n},
        "human_share": rounded((au["human_share"], au["human_share_ci_low"], au["human_share_ci_high"])),
        "conversations": au["conversations"],
        "with_human": au["conversations_with_human"],
        "suppressed": au["suppressed_turns"],
        "handoffs": au["handoffs_to_human"],
        "handbacks": au["handbacks_to_agent"],
        "instances": {k: ro[k] for k in ("completed", "abandoned", "open") if ro[k]},
        "by_routine": by_routine,
        "stale": ro["stale"],
        "abandonment": rounded((ro["abandonment_rate"], ro["abandonment_ci_low"], ro["abandonment_ci_high"])),
        "median_turns": ro["median_turns"],
        "median_seconds": ro["median_seconds"],
        "abandoned_at": {(a["routine"], a["slot"]): a["abandoned"] for a in ro["abandoned_at"]},
        "invocations": inv["total"],
        "by_tool": {(t["tool"], t["outcome"]): t["count"] for t in inv["by_tool"]},
        "answered": cit["answered_turns"],
        "uncited": rounded((cit["share"], cit["ci_low"], cit["ci_high"])),
        "cited": {d["document_id"]: d["replies"] for d in cit["most_cited"]},
    }


def from_report(report: dict[str, Any]) -> dict[str, Any]:
    out = {"sightings": report["dataset"]["agent_message_sightings"], "all": figures(report)}
    return out | {g: {k: figures(v) for k, v in report["groups"][g].items()} for g in GROUPS}
