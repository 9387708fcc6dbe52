"""`--agent` after push attribution (docs/metrics.md, "Push deliveries"). A push delivery's rows are stored under
PUSH_AGENT and are their task's agent's only once the report attributes them, so an agent filter cannot select
messages and exchanges by their stored key: under one, the views' builders (dataset_views.py, spark.py) define
every agent's rows of the window as `_window_sightings` and `_window_exchanges`, and `agent_views` attributes
the pushed ones (the relation `push_owners`, over every agent's rows) and keeps the window's agents' rows, each
under its attributed agent. The scans stay narrowed to the agents (pushed down to the Parquet files), and to
PUSH_AGENT once some pushed rows are the agents'; only `push_owners` reads every agent's rows, of the pushed tasks.

Under `--agent push:unattributed` the views keep the deliveries no agent is found for, as the unfiltered report
leaves them under that key."""

from __future__ import annotations

from typing import Any

from ..a2a.constants import PUSH_AGENT
from .facts_sql import push_owners_sql
from .load import Window

ATTRIBUTABLE = {"messages": "sightings", "exchanges": "exchanges"}  # the tables push deliveries write rows to
_PUSH = "'" + PUSH_AGENT.replace("'", "''") + "'"


def _quoted(agents: Any) -> str:
    return ", ".join("'" + str(a).replace("'", "''") + "'" for a in sorted(set(agents)))


def view_name(table: str, window: Window) -> str:
    """The name the builder gives a table's rows in the window (`_window_…` for those `agent_views` narrows)."""
    name = ATTRIBUTABLE.get(table, table)
    return f"_window_{name}" if window.agents and table in ATTRIBUTABLE else name


def scan_window(table: str, window: Window) -> Window:
    """The window a table's scan is narrowed to: its times only for a table `agent_views` narrows to agents."""
    return Window(since=window.since, until=window.until) if window.agents and table in ATTRIBUTABLE else window


def attributed(source: str, columns: list[str], agents: tuple[str, ...], pushed: bool = True) -> str:
    """The rows of `source` (with `columns` and `pos`) whose agent, a pushed row's attributed, is one of
    `agents`, each under that agent: the agents' own rows as the scan finds them, and (unless `pushed` is false:
    no pushed row is any of theirs) the pushed rows, attributed."""
    plain = sorted(set(agents) - {PUSH_AGENT})
    parts = [f"SELECT * FROM {source} w WHERE agent IN ({_quoted(plain)})"] if plain else []
    if pushed:
        agent = "coalesce(o.owner, s.agent)"
        select = ", ".join(f"{agent} AS agent" if c == "agent" else f"s.{c}" for c in [*columns, "pos"])
        parts.append(
            f"SELECT {select} FROM (SELECT * FROM {source} w WHERE agent = {_PUSH}) s "
            f"LEFT JOIN push_owners o ON s.task_id = o.task_id WHERE {agent} IN ({_quoted(agents)})"
        )
    return " UNION ALL ".join(f"({p})" for p in parts) if parts else f"SELECT * FROM {source} w WHERE FALSE"


def narrowed(source: str, table: str, window: Window, columns: list[str], pushed: bool) -> str:
    """A part of a table's rows in the window (`source`, a parenthesised query) narrowed as its view is
    (`pushed`: as `agent_views` returned)."""
    if not (window.agents and table in ATTRIBUTABLE):
        return source
    return f"({attributed(source, columns, window.agents, pushed)})"


def agent_views(con: Any, window: Window, columns: dict[str, list[str]]) -> bool:
    """Define `push_owners` (and, under an agent filter, the views `sightings` and `exchanges` over the
    `_window_…` ones) on `con`, a DuckDB connection or a spark.SparkConnection; `columns`: each table's view
    columns but `pos`. Whether the views look at pushed rows: not when no pushed row is one of the agents' (the
    common case: then the views are the scan narrowed to the agents, as without push deliveries)."""
    if not window.agents:
        con.execute(f"CREATE VIEW push_owners AS {push_owners_sql()}")
        return False
    # once: the task ids of the pushed rows, then every agent's rows holding them (none read when nothing was pushed)
    con.execute(f"CREATE TEMP TABLE push_owners AS {push_owners_sql('_window_sightings', '_window_exchanges')}")
    (found,) = con.sql(f"SELECT count(*) FROM push_owners WHERE owner IN ({_quoted(window.agents)})").fetchall()[0]
    pushed = PUSH_AGENT in window.agents or found > 0
    for table, name in ATTRIBUTABLE.items():
        con.execute(f"CREATE VIEW {name} AS {attributed(f'_window_{name}', columns[table], window.agents, pushed)}")
    return pushed


def stored_agents(window: Window) -> str:
    """The agent filter of the stored messages and exchanges (views.py: values as stored), as a predicate on their
    rows: a pushed row is in it when its attributed agent is; needs `push_owners` (`agent_views`)."""
    agents = set(window.agents or ())
    parts = [f"agent IN ({_quoted(agents - {PUSH_AGENT})})"] if agents - {PUSH_AGENT} else []
    parts.append(
        f"(agent = {_PUSH} AND task_id IN (SELECT task_id FROM push_owners WHERE owner IN ({_quoted(agents)})))"
    )
    if PUSH_AGENT in agents:  # (push_owners holds no NULL task id: only a task some agent holds is in it)
        parts.append(f"(agent = {_PUSH} AND (task_id IS NULL OR task_id NOT IN (SELECT task_id FROM push_owners)))")
    return "(" + " OR ".join(parts) + ")"
