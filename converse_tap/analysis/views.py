"""Views named for the report's concepts (`converse-tap sql`, `show`, report and check examples): the stored
tables with every column, and the facts under their names, built by the SQL of `facts_sql`."""

from __future__ import annotations

import pandas as pd

from ..store.schema import TABLES
from .agent_filter import ATTRIBUTABLE, stored_agents
from .engine import Engine
from .facts_sql import _TERMINAL, INSTANCES, conversations_sql
from .load import Window
from .sources import _arrow, _journaled, _window_sql, scan_of, typed_columns

STORED_VIEWS = ("exchanges", "messages", "agent_cards", "capture_gaps")
FACT_VIEWS = ("replies", "turns", "conversations", "routine_instances")
_STORED_TS = {"exchanges": "ts_start", "messages": "ts", "agent_cards": "ts", "capture_gaps": "ts"}


def create_named_views(engine: Engine, window: Window | None = None, facts: tuple[str, ...] = FACT_VIEWS) -> None:
    """Views named for the report's concepts on the engine's connection: the stored tables with every column
    (schema `stored`, narrowed to the window like the report) and the facts in `facts`, built by the SQL above.
    Unqualified names resolve to them afterwards (temporary facts first, then `stored`, then the engine's own)."""
    window = window or Window()
    con = engine.con
    con.execute("CREATE SCHEMA IF NOT EXISTS stored")
    for table in STORED_VIEWS:
        schema = TABLES[table]
        # the files and journals the engine read (the window's partitions, foreign files left out)
        files = engine.listed[table].files if engine.listed else []
        pending = engine.journals.tables.get(table, []) if engine.listed else []
        parts = []
        if files:  # (by name, typed as this version stores them, whatever the writer: sources.typed_columns)
            scan = scan_of(engine.root, files)
            found = {r[0]: r[1] for r in con.sql(f"DESCRIBE SELECT * FROM {scan}").fetchall()}
            parts.append(f"SELECT {typed_columns(found, list(schema.names))} FROM {scan}")
        if pending:
            con.register(f"_{table}_all_journaled", _journaled(pending, table, list(schema.names), len(files)))
            parts.append(f"SELECT {', '.join(schema.names)} FROM _{table}_all_journaled")
        if not parts:
            con.register(f"_{table}_all_empty", _arrow(pd.DataFrame(), table, list(schema.names)))
            parts.append(f"SELECT * FROM _{table}_all_empty")
        source = "(" + " UNION ALL BY NAME ".join(f"({p})" for p in parts) + ")"
        # (a gap note belongs to no agent: the time window alone narrows it)
        # (a push delivery's rows are in by the agent they are attributed to: agent_filter.stored_agents)
        pushed = bool(window.agents) and table in ATTRIBUTABLE
        times = Window(since=window.since, until=window.until)
        narrow = window if "agent" in schema.names and not pushed else times
        where = _window_sql(narrow, _STORED_TS[table]) + (f" AND {stored_agents(window)}" if pushed else "")
        con.execute(f"CREATE OR REPLACE VIEW stored.{table} AS SELECT * FROM {source} WHERE {where}")
    if set(facts) & {"replies", "turns", "conversations", "routine_instances"}:
        engine.build("replies")
        if "last_pos" in {r[0] for r in con.sql("DESCRIBE replies").fetchall()}:
            # the facts' table holds what the report reads; a user's query sees whole replies (and turns)
            con.execute(f"CREATE TEMP TABLE _replies_whole AS {engine._whole('replies')}")
            con.execute("DROP TABLE replies")
            con.execute("ALTER TABLE _replies_whole RENAME TO replies")
    if "turns" in facts:
        engine.build("turns")
    if "conversations" in facts:
        con.execute(f"CREATE OR REPLACE TEMP VIEW conversations AS SELECT * EXCLUDE (g) FROM ({conversations_sql()})")
    if "routine_instances" in facts:
        outcome = f"CASE WHEN last_status IN ({_TERMINAL}) THEN last_status ELSE 'open' END AS outcome"
        con.execute(f"CREATE OR REPLACE TEMP VIEW routine_instances AS SELECT *, {outcome} FROM ({INSTANCES})")
    con.execute("SET search_path = 'stored,main'")
