"""From a number to the rows behind it: read-only SQL over the report's named views, and example conversations
per counted value (what `sql`, `report --examples` and `check` print).

The views are the engine's own definitions given names (`views.create_named_views`): the stored tables
`exchanges`, `messages`, `agent_cards`, and the facts `replies`, `turns`, `conversations`, `routine_instances`.

    from converse_tap.analysis.drill import open_views
    with open_views("data/") as engine:
        engine.con.sql("SELECT coverage, count(*) FROM turns GROUP BY ALL").df()
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from .engine import CONVERSATION_KEY, DEFAULT_MEMORY_LIMIT, NONE, Engine
from .facts_sql import value_key_sql
from .load import Window
from .sources import _scan_names, literal_pattern
from .views import FACT_VIEWS, STORED_VIEWS, create_named_views

VIEWS = (*STORED_VIEWS, *FACT_VIEWS)
_ALLOWED = {"SELECT"}


class QueryError(ValueError):
    """A query that cannot run: not read-only, or the engine's own error message."""


def open_views(
    root: str | Path,
    window: Window | None = None,
    memory_limit: str | None = DEFAULT_MEMORY_LIMIT,
    facts: tuple[str, ...] = FACT_VIEWS,
    exclude: dict[str, str] | None = None,
) -> Engine:
    """An engine over a dataset with every named view (`facts` narrows which facts are built; `exclude`: files
    left out, and why, as `Engine.over_dataset`)."""
    engine = Engine.over_dataset(root, window, memory_limit=memory_limit, exclude=exclude)
    try:
        create_named_views(engine, window, facts)
        confine(engine)
    except BaseException:
        engine.close()
        raise
    return engine


def confine(engine: Engine) -> None:
    """From now on the engine's connection reads the dataset's files it was built over and nothing else: no other
    file, directory listing, extension, attached database or setting (DuckDB's own sandbox: external access off,
    the listed files allowed, the configuration locked). For queries nobody vetted (`converse-tap sql`)."""
    names = [name for table in engine.listed.values() for name in _scan_names(engine.root, table.files)]
    # the names as read (a name with `*?[` in brackets, sources.literal_pattern) and as opened
    allowed = [*names, *(p for p in map(literal_pattern, names) if p not in names)]
    if allowed:
        engine.con.execute("SET allowed_paths = ?", [allowed])
    for setting in (
        "autoinstall_known_extensions = false",
        "autoload_known_extensions = false",
        "allow_community_extensions = false",
        "allow_unsigned_extensions = false",
        "enable_external_access = false",
        "lock_configuration = true",
    ):
        engine.con.execute(f"SET {setting}")


def facts_named(sql: str) -> tuple[str, ...]:
    """The fact views a query mentions (only those are built: a query of `exchanges` builds no replies)."""
    words = {w.lower() for w in re.findall(r"[A-Za-z_]+", sql)}
    return tuple(v for v in FACT_VIEWS if v in words)


def check_read_only(sql: str) -> None:
    """One SELECT (or EXPLAIN) statement; anything that writes, attaches or changes settings is refused."""
    try:
        statements = duckdb.extract_statements(sql)
    except duckdb.Error as e:
        raise QueryError(str(e)) from e
    if len(statements) != 1:
        raise QueryError(f"give exactly one statement (got {len(statements)})")
    kind = statements[0].type.name
    if kind == "EXPLAIN":  # EXPLAIN ANALYZE runs what it explains: that must be a query too
        kind = _explained(statements[0].query)
    if kind not in _ALLOWED:
        raise QueryError(f"only read-only queries run here (SELECT, WITH … SELECT, EXPLAIN SELECT); this is {kind}")


def _explained(sql: str) -> str:
    """The kind of statement an EXPLAIN [ANALYZE] [(options)] statement explains: the first statement that the
    text after one of its tokens (comments and strings are whole tokens) parses as; EXPLAIN when none does."""
    for start, token in duckdb.tokenize(sql)[1:]:
        if token == duckdb.token_type.comment:
            continue
        try:
            inner = duckdb.extract_statements(sql[start:])
        except duckdb.Error:
            continue
        if len(inner) == 1:
            return inner[0].type.name
        return "MULTI"
    return "EXPLAIN"


def run_query(engine: Engine, sql: str) -> pa.RecordBatchReader:
    """The query's result as a stream of Arrow batches (never held whole unless the caller does)."""
    check_read_only(sql)
    try:
        return _unique_names(engine.con.sql(sql).to_arrow_reader(batch_size=10_000))
    except duckdb.PermissionException as e:  # the sandbox of confine()
        raise QueryError(
            f"the query reaches outside the dataset ({str(e).strip()}): it may read the views and nothing else"
        ) from e
    except duckdb.Error as e:
        raise QueryError(str(e).strip()) from e


def _unique_names(reader: pa.RecordBatchReader) -> pa.RecordBatchReader:
    """The reader with each column name used once: a second `anomalies` (a join's `SELECT e.anomalies,
    m.anomalies`) becomes `anomalies_2`. Rows are dicts by name, so a repeated name lost a column (and crashed the
    CSV writer); SQL allows it, the outputs cannot."""
    names = reader.schema.names
    if len(set(names)) == len(names):
        return reader
    used = set(names)  # a column's own name is never given to another
    seen: set[str] = set()
    unique: list[str] = []
    for name in names:
        new, k = name, 1
        while new in seen or (new != name and new in used):
            k += 1
            new = f"{name}_{k}"
        seen.add(new)
        used.add(new)
        unique.append(new)
    schema = pa.schema([f.with_name(n) for f, n in zip(reader.schema, unique, strict=True)])
    batches = (pa.RecordBatch.from_arrays(b.columns, schema=schema) for b in reader)
    return pa.RecordBatchReader.from_batches(schema, batches)


# Examples behind a count ---------------------------------------------------------------------------------------

# an abandoned-at key as `tables.abandoned_key` builds it: routine/slot, each with \ and / escaped (no two differ)
_PART = "replace(replace({}, '\\', '\\\\'), '/', '\\/')"
ABANDONED_KEY = f"{_PART.format('i.routine')} || '/' || {_PART.format('slot')}"


# per breakdown: the rows it counts, keyed as the report keys them, with the conversation and the reply
_CANDIDATES = {
    "coverage": f"""SELECT {value_key_sql("coverage")} AS key, agent, conversation, first_seen AS seen_at, message_id
                    FROM turns WHERE coverage_availability = 'assessed'""",
    "author": f"""SELECT {value_key_sql("author")} AS key, agent, conversation, first_seen AS seen_at, message_id
                 FROM replies WHERE author IS NOT NULL""",
    "abandoned_at": f"""SELECT {ABANDONED_KEY} AS key, i.agent, i.conversation, i.last_seen AS seen_at,
                               (SELECT any_value(r.message_id) FROM replies r
                                WHERE r.conversation = i.conversation AND r.agent IS NOT DISTINCT FROM i.agent
                                  AND r.first_seen IS NOT DISTINCT FROM i.last_seen
                                  AND r.routine_status = 'abandoned') AS message_id
                        FROM routine_instances i,
                             unnest(CASE WHEN len(i.abandoned_at) = 0 THEN ['{NONE}'] ELSE i.abandoned_at END)
                             AS t(slot)
                        WHERE i.outcome = 'abandoned'""",
    "invocation": f"""SELECT {value_key_sql("invocation_outcome")} AS key, agent, conversation, first_seen AS seen_at,
                             message_id
                      FROM replies WHERE invocation_outcome IS NOT NULL OR invocation_tool_name IS NOT NULL""",
    "anomaly": f"""SELECT split_part(a, ':', 1) AS key, agent, conversation, seen_at, message_id FROM (
                       SELECT anomalies, agent, {CONVERSATION_KEY} AS conversation, ts_start AS seen_at,
                              NULL::VARCHAR AS message_id FROM exchanges WHERE len(anomalies) > 0
                       UNION ALL
                       SELECT anomalies, agent, {CONVERSATION_KEY}, ts, message_id FROM messages
                       WHERE len(anomalies) > 0), unnest(anomalies) AS t(a)""",
}
BREAKDOWNS = ("coverage", "author", "abandoned_at", "invocation")
WORDS = 60  # characters of a reply's text shown beside an example


def first_words(text: str | None, limit: int = WORDS) -> str:
    if not text:
        return ""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat[:limit].rsplit(" ", 1)[0] if " " in flat[:limit] else flat[:limit]
    return cut + "…"


# a reply's text is the agent's (its sightings in responses not in the user's role, as `replies` reads them): not a
# client message's that reuses its id, nor another agent's reply with the same id
AGENT_SIDE = "(direction = 'response' AND role IS DISTINCT FROM 'user')"


def examples(
    engine: Engine,
    n: int,
    breakdowns: tuple[str, ...] = BREAKDOWNS,
    agent: str | None = None,
    keys: list[str] | None = None,
    exclude: list[str] | None = None,
) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """Up to `n` example conversations per breakdown and key (the most recent first, one per conversation):
    {breakdown: {key: [{conversation, agent, at, message_id, text}]}}. `agent` narrows to one agent; `keys`
    and `exclude` to some keys. The named views must exist (`views.create_named_views`)."""
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for name in breakdowns:
        where, params = ["TRUE"], []
        if agent is not None:
            where.append("agent IS NOT DISTINCT FROM ?")
            params.append(agent)
        if keys is not None:
            where.append(f"key IN ({', '.join('?' for _ in keys)})" if keys else "FALSE")
            params += keys
        if exclude:
            where.append(f"key NOT IN ({', '.join('?' for _ in exclude)})")
            params += exclude
        sql = f"""
            WITH c AS (SELECT * FROM ({_CANDIDATES[name]}) WHERE {" AND ".join(where)}),
            one AS (SELECT * FROM c QUALIFY row_number() OVER (
                        PARTITION BY key, conversation ORDER BY seen_at DESC NULLS LAST, message_id) = 1),
            picked AS (SELECT * FROM one QUALIFY row_number() OVER (
                        PARTITION BY key ORDER BY seen_at DESC NULLS LAST, conversation) <= {int(n)}),
            texts AS (SELECT agent, message_id, last(text ORDER BY {AGENT_SIDE}, ts) AS text FROM messages
                      WHERE message_id IN (SELECT message_id FROM picked) GROUP BY agent, message_id)
            SELECT picked.key, picked.conversation, picked.agent, picked.seen_at, picked.message_id, texts.text
            FROM picked LEFT JOIN texts
                 ON texts.message_id = picked.message_id AND texts.agent IS NOT DISTINCT FROM picked.agent
            ORDER BY picked.key, picked.seen_at DESC NULLS LAST, picked.conversation"""
        found: dict[str, list[dict[str, Any]]] = {}
        for key, conv, ag, at, mid, text in engine.con.execute(sql, params).fetchall():
            found.setdefault(str(key), []).append(
                {
                    "conversation": conv,
                    "agent": ag,
                    "at": at.isoformat() if at is not None else None,
                    "message_id": mid,
                    "text": first_words(text),
                }
            )
        out[name] = found
    return out


# which rows stand behind a threshold of `converse-tap check` (analysis/gate.py's metrics)
_THRESHOLD_ROWS: dict[str, tuple[str, list[str] | None, list[str] | None]] = {
    "unanswered_share": ("coverage", ["unanswered"], None),
    "answered_share": ("coverage", None, ["answered"]),
    "abandonment_rate": ("abandoned_at", None, None),
    "human_share": ("author", ["human"], None),
    "anomalies": ("anomaly", None, None),
}


def threshold_examples(engine: Engine, metric: str, scope: str = "all", n: int = 5) -> list[dict[str, Any]]:
    """Up to `n` examples (most recent first, one per conversation) of the turns, replies, routine instances or
    anomalies that make a threshold fail; each names its key (e.g. the coverage value)."""
    breakdown, keys, exclude = _THRESHOLD_ROWS[metric]
    agent = None if scope == "all" else scope
    found = examples(engine, n, (breakdown,), agent, keys, exclude)[breakdown]
    flat = [{"key": key, **e} for key, items in found.items() for e in items]
    flat.sort(key=lambda e: (e["at"] or "", e["conversation"]), reverse=True)
    seen: set[str] = set()
    out = []
    for e in flat:
        if e["conversation"] not in seen:
            seen.add(e["conversation"])
            out.append(e)
    return out[:n]
