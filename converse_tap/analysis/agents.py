"""Agents at a glance: each agent seen, its card's converse declaration, MCP endpoint and tools."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from ..textsafe import safe_line
from .engine import DEFAULT_MEMORY_LIMIT, Engine
from .facts_sql import CLIENT_CALL, NOT_CALLS
from .load import Frames, Window
from .metrics import latest_cards
from .sqlout import plain


def dataset_agents(root: str | Path, memory_limit: str | None = None) -> list[str]:
    """Every agent the whole dataset saw, in traffic or in cards, whatever a report's window: what an `--agent`
    filter can name."""
    with Engine.over_dataset(root, Window(), memory_limit=memory_limit or DEFAULT_MEMORY_LIMIT) as engine:
        rows = engine.con.sql(
            """SELECT DISTINCT agent FROM (SELECT agent FROM exchanges UNION ALL SELECT agent FROM agent_cards)
               WHERE agent IS NOT NULL ORDER BY agent"""
        ).fetchall()
    return [r[0] for r in rows]


def dataset_overview(root: str | Path, memory_limit: str | None = None) -> tuple[list[dict[str, Any]], Engine]:
    """`agents_overview` of a whole dataset out of core: the calls counted by DuckDB (a row per exchange never
    held: 10^6 exchanges took `agents` to 912 MB), only the cards loaded. The engine (closed) says what it read."""
    with Engine.over_dataset(root, Window(), memory_limit=memory_limit or DEFAULT_MEMORY_LIMIT) as engine:
        calls = dict(
            engine.con.sql(
                f"""SELECT agent, count(DISTINCT exchange_id) FROM exchanges
                    WHERE ({CLIENT_CALL}) AND agent IS NOT NULL GROUP BY agent"""
            ).fetchall()
        )
        cards = engine.cards()
    return agents_overview(Frames(pd.DataFrame(), pd.DataFrame(), cards), calls), engine


def agents_overview(frames: Frames, calls: dict[str, int] | None = None) -> list[dict[str, Any]]:
    """One entry per agent seen in traffic or cards, with the latest card of each source (`calls`: the A2A calls
    per agent, when counted elsewhere; else counted from `frames.exchanges`)."""
    ex, cards = frames.exchanges, frames.agent_cards
    if calls is None:
        traffic = ex[~ex["binding"].astype(object).isin(NOT_CALLS)] if not ex.empty else ex
        if "exchange_id" in traffic.columns:  # an exchange ingested twice is one call
            traffic = traffic.drop_duplicates("exchange_id")
        calls = {str(k): int(v) for k, v in traffic.groupby("agent").size().items()} if not traffic.empty else {}
    seen = set(map(str, calls)) | (set(map(str, cards["agent"].dropna())) if not cards.empty else set())
    names = sorted(seen)
    latest = latest_cards(cards)
    out = []
    for agent in names:
        entry: dict[str, Any] = {"agent": agent, "calls": int(calls.get(agent, 0)), "cards": []}
        rows = latest[latest["agent"] == agent].to_dict("records") if not latest.empty else []
        for card in rows:
            tools = []
            for t in card["tools"] if card["tools"] is not None else []:
                schema = _schema(t["input_schema_json"])
                tools.append(
                    {
                        "tool": _text(t["tool_name"]),
                        "description": _text(t["description"]),
                        "required": list(t["required_fields"] if t["required_fields"] is not None else []),
                        "input_schema": schema,
                    }
                )
            entry["cards"].append(
                {
                    "source": str(card["source"]),
                    "name": _text(card["name"]),
                    "converse_declared": bool(card["converse_declared"]),
                    "converse_required": None
                    if pd.isna(card["converse_required"])
                    else bool(card["converse_required"]),
                    "mcp_url": _text(card["mcp_url"]),
                    "mcp_server_card_url": _text(card["mcp_server_card_url"]),
                    "skills": list(card["skill_ids"] if card["skill_ids"] is not None else []),
                    "tools": tools,
                    "tools_match_skills": None
                    if pd.isna(card["tools_match_skills"])
                    else bool(card["tools_match_skills"]),
                    "anomalies": list(card["anomalies"] if card["anomalies"] is not None else []),
                }
            )
        out.append(entry)
    return out


def agents_text(overview: list[dict[str, Any]]) -> str:
    """For a terminal: each line's control characters, line breaks and bidi overrides shown as escapes."""
    if not overview:
        return "no agents seen: the dataset has no A2A traffic and no agent cards\n"
    lines = []
    for a in overview:
        lines.append(f"{a['agent']}  ({a['calls']} A2A calls)")
        if not a["cards"]:
            lines.append("  no agent card seen")
        for c in a["cards"]:
            lines.append(f"  {c['source']} card: {c['name'] or '(no name)'}")
            if not c["converse_declared"]:
                lines.append("    converse extension: not declared")
                continue
            req = {True: "required", False: "optional", None: "required not a boolean"}[c["converse_required"]]
            lines.append(f"    converse extension: declared ({req})")
            lines.append(f"    MCP endpoint: {c['mcp_url'] or '–'}   server card: {c['mcp_server_card_url'] or '–'}")
            for t in c["tools"]:
                lines.append(f"    tool {t['tool']}: requires {', '.join(t['required']) or 'nothing'}")
            if c["tools_match_skills"] is False:
                lines.append(
                    "    ! tools without a matching skill: "
                    + ", ".join(x.split(":", 1)[1] for x in c["anomalies"] if x.startswith("card_tool_without_skill:"))
                )
    return "\n".join(safe_line(line) for line in lines) + "\n"


def _text(value: Any) -> str | None:
    """A text column's value: None when missing (pandas gives NaN for a missing value in some frames)."""
    return value if isinstance(value, str) else None


def _schema(text: str | None) -> Any:
    """A tool's input schema as recorded; text that is not JSON (a dataset not written by us) is kept as text.
    Numbers JSON has no place for (1e999, NaN: Python reads them as inf and nan) become the strings "Infinity",
    "-Infinity" and "NaN", as `sql --format json` writes them."""
    if not isinstance(text, str) or not text:
        return None
    try:
        return plain(json.loads(text))
    except ValueError:
        return text
