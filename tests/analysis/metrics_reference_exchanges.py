"""The exchanges' and cards' side of the independent reference (tests/analysis/metrics_reference.py has the
replies' side), written from docs/metrics.md: the exchanges counted, adoption ("Invocations, citations, adoption,
conformance"), the anomalies by table and code, and each agent's latest card; plus the rows hypothesis writes for
them, consistent with the messages a dataset holds, hostile ones included."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from converse_tap.a2a.constants import PUSH_AGENT
from converse_tap.analysis.load import Window
from tests.analysis.metrics_reference import T0, agent_said, at, attribute, in_window, message_key, push_owners, rounded
from tests.analysis.metrics_reference import wilson as wilson_of

NOT_CALLS = ("card", "webhook")  # a card fetch, an agent's push delivery: no client's call to an agent


def calls_of(exchanges: list[dict[str, Any]], window: Window) -> list[dict[str, Any]]:
    """The exchanges in the window's times that are calls (whose tasks attribute push deliveries)."""
    return [x for x in exchanges if in_window(x, window, "ts_start") and x["binding"] not in NOT_CALLS]


def order(row: dict[str, Any], ts: str = "ts") -> tuple[Any, ...]:
    """Rows by time (none last), then by their place in the data."""
    return (row[ts] is None, row[ts] or T0, row["pos"])


def tally(pairs: set[tuple[Any, ...]], table: str) -> dict[tuple[str, str], tuple[int, str]]:
    """Per (table, code, the part before `:`): how many distinct (thing, anomaly) pairs, and the least anomaly."""
    out: dict[tuple[str, str], tuple[int, str]] = {}
    for *_, anomaly in pairs:
        if anomaly is None:
            continue
        key = (table, anomaly.split(":")[0])
        n, example = out.get(key, (0, anomaly))
        out[key] = (n + 1, min(example, anomaly))
    return out


def exchange_figures(
    messages: list[dict[str, Any]], exchanges: list[dict[str, Any]], cards: list[dict[str, Any]], window: Window
) -> dict[str, Any]:
    said = agent_said(messages, window)
    owners = push_owners(said, calls_of(exchanges, window))
    # "Windows and groups": --agent selects exchanges too, by the agent a delivery's rows are attributed to
    seen = attribute([x for x in exchanges if in_window(x, window, "ts_start")], owners, window)
    said = attribute(said, owners, window)
    # "Adoption": A2A requests, all but card fetches (and deliveries: no client's request), one per exchange id;
    # distinct agent messages (by agent and message id, a delivery's attributed) and those that carried the envelope
    calls = {x["exchange_id"] for x in seen if x["binding"] not in NOT_CALLS}
    asked = {x["exchange_id"] for x in seen if x["binding"] not in NOT_CALLS and x["converse_requested"]}
    keys: dict[tuple[Any, Any], bool] = {}
    for r in said:
        keys[(r["agent"], message_key(r))] = keys.get((r["agent"], message_key(r)), False) or bool(r["has_envelope"])
    carried = sum(keys.values())
    # "Conformance": anomalies by table and code; a message's once per distinct message however often sighted; an
    # exchange's once per exchange id and a card's once per card and time ("Stored twice, counted once")
    found = tally({(x["exchange_id"], a) for x in seen for a in x["anomalies"] or []}, "exchanges")
    found |= tally({(r["agent"], message_key(r), a) for r in said for a in r["anomalies"] or []}, "messages")
    shown = [c for c in cards if in_window(c, window) and (not window.agents or c["agent"] in window.agents)]
    found |= tally({(c["agent"], c["ts"], a) for c in shown for a in c["anomalies"] or []}, "agent_cards")
    anomalies = sorted(found.items(), key=lambda kv: (-kv[1][0], kv[0]))
    # the latest card of each agent and source: by time, a card without one last, then by place in the data
    latest: dict[tuple[Any, Any], dict[str, Any]] = {}
    for c in sorted(shown, key=order):
        latest[(c["agent"], c["source"])] = c
    return {
        "exchanges": len({x["exchange_id"] for x in seen}),
        "adoption": {
            "requests_asking_converse": (len(asked), len(calls), *rounded(wilson_of(len(asked), len(calls)))),
            "agent_messages_with_envelope": (carried, len(keys), *rounded(wilson_of(carried, len(keys)))),
        },
        "anomalies": [(t, code, n, example) for (t, code), (n, example) in anomalies],
        "cards": [
            {
                "agent": c["agent"],
                "source": c["source"],
                "name": c["name"],
                "converse_declared": bool(c["converse_declared"]),
                "mcp_url": c["mcp_url"],
                "tools": [t["tool_name"] for t in c["tools"] or []],
                "tools_match_skills": c["tools_match_skills"],
            }
            for _, c in sorted(latest.items())
        ],
    }


def exchange_figures_of(report: dict[str, Any]) -> dict[str, Any]:
    """The same figures read from the report's JSON."""
    conformance = report["conformance"]
    adoption = {
        metric: (v["count"], v["of"], *rounded((v["share"], v["ci_low"], v["ci_high"])))
        for metric, v in conformance["adoption"].items()
    }
    return {
        "exchanges": report["dataset"]["exchanges"],
        "adoption": adoption,
        "anomalies": [(a["table"], a["code"], a["count"], a["example"]) for a in conformance["anomalies"]],
        "cards": conformance["agent_cards"],
    }


# --- the rows: exchanges and cards beside the messages ---------------------------------------------------------

# agent keys a card or a call may carry: some differ from a message's agent only in case or a trailing slash
AGENTS = ["A", "B", "(x", "a", "A/"]
_ANOMALIES = st.sampled_from([None, [], ["no_response"], ["jsonrpc_id_mismatch", "no_response:x"]])
TIMES = st.one_of(st.builds(at, st.integers(0, 6), st.sampled_from([0, 0, 1])), st.just(None))
CALL = st.fixed_dictionaries(
    {
        "agent": st.sampled_from([*AGENTS, PUSH_AGENT]),
        "binding": st.sampled_from(["jsonrpc", "jsonrpc", "rest", "grpc", "card", "webhook"]),
        "converse_requested": st.booleans(),
        "ts_start": TIMES,
        "task_id": st.sampled_from([None, "t1", "t2", "t3"]),
        "anomalies": _ANOMALIES,
    }
)


@st.composite
def exchanges_for(draw: st.DrawFn, messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Files of the exchanges table for `messages`: most of their exchanges (some missing: messages whose exchange
    is not in the data), each with its first row's agent and task, started at or before its first time; calls
    without messages (card fetches, deliveries, agents differing only in case or a trailing slash, tasks no
    message holds); some stored twice, a copy differing in what it asked for."""
    rows = []
    for exchange_id in sorted({m["exchange_id"] for m in messages}):
        if draw(st.integers(0, 4)) == 0:
            continue
        first = next(m for m in messages if m["exchange_id"] == exchange_id)
        row = draw(CALL) | {"exchange_id": exchange_id, "agent": first["agent"], "task_id": first["task_id"]}
        row["ts_start"] = first["ts"] if draw(st.booleans()) else row["ts_start"]
        row["binding"] = "webhook" if first["agent"] == PUSH_AGENT else "jsonrpc"
        rows.append(row)
    for i in range(draw(st.integers(0, 4))):
        rows.append(draw(CALL) | {"exchange_id": f"x{i}"})
    for _ in range(draw(st.integers(0, 2)) if rows else 0):
        again = dict(draw(st.sampled_from(rows)))
        again["converse_requested"] = draw(st.booleans())
        rows.insert(draw(st.integers(0, len(rows))), again)
    return _spread(draw, rows)


TOOL = st.sampled_from(["book", "(t", "cancel"]).map(lambda n: {"tool_name": n})
CARD = st.fixed_dictionaries(
    {
        "agent": st.sampled_from(AGENTS),
        "source": st.sampled_from(["well-known", "extended"]),
        "ts": TIMES,
        "name": st.sampled_from([None, "Booker", "(n"]),
        "converse_declared": st.booleans(),
        "converse_required": st.sampled_from([None, True, False]),
        "mcp_url": st.sampled_from([None, "https://m/mcp"]),
        "tools": st.one_of(st.none(), st.lists(TOOL, max_size=2)),
        "tools_match_skills": st.sampled_from([None, True, False]),
        "anomalies": st.sampled_from([None, [], ["card_converse_required_true"], ["card_tool_without_skill:(t"]]),
    }
)


@st.composite
def cards(draw: st.DrawFn) -> list[list[dict[str, Any]]]:
    """Files of the agent_cards table: cards seen several times with other contents, at the same time too."""
    rows = [draw(CARD) | {"exchange_id": f"k{i}"} for i in range(draw(st.integers(0, 6)))]
    for _ in range(draw(st.integers(0, 3)) if rows else 0):
        again = draw(CARD) | {k: v for k, v in draw(st.sampled_from(rows)).items() if k in ("agent", "source", "ts")}
        rows.insert(draw(st.integers(0, len(rows))), again | {"exchange_id": "k-again"})
    return _spread(draw, rows)


def _spread(draw: st.DrawFn, rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    files: list[list[dict[str, Any]]] = [[], []]
    for row in rows:
        files[draw(st.integers(0, 1))].append(row)
    return [f for f in files if f]


def agents_figures(exchanges: list[dict[str, Any]], cards_: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`converse-tap agents` over the whole dataset: every agent seen in calls or cards (keys as stored: `A`, `a`
    and `A/` are three agents), its calls (one per exchange id) and its latest card of each source: the converse
    declaration, whether required (null when not a boolean), the MCP endpoint, whether the tools match skills."""
    calls: dict[str, set[Any]] = {}
    for x in exchanges:
        if x["binding"] not in NOT_CALLS:
            calls.setdefault(x["agent"], set()).add(x["exchange_id"])
    latest: dict[tuple[Any, Any], dict[str, Any]] = {}
    for c in sorted(cards_, key=order):
        latest[(c["agent"], c["source"])] = c
    out = []
    for agent in sorted(set(calls) | {c["agent"] for c in cards_}):
        mine = [c for (a, _), c in sorted(latest.items()) if a == agent]
        out.append({"agent": agent, "calls": len(calls.get(agent, ())), "cards": [_brief(c) for c in mine]})
    return out


def _brief(card: dict[str, Any], tool: str = "tool_name") -> dict[str, Any]:
    keys = ("source", "name", "converse_declared", "converse_required", "mcp_url", "tools_match_skills")
    return {k: card.get(k) for k in keys} | {"tools": [t[tool] for t in card["tools"] or []]}


def agents_figures_of(overview: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The same figures read from `agents.dataset_overview` (an agent's cards by source: the overview lists them
    by the time of each, which the reference leaves open)."""
    out = []
    for a in overview:
        mine = sorted((_brief(c, "tool") for c in a["cards"]), key=_source)
        out.append({"agent": a["agent"], "calls": a["calls"], "cards": mine})
    return out


def _source(card: dict[str, Any]) -> Any:
    return card["source"]
