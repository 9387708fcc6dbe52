"""The fact-building half of docs/metrics.md in SQL, run by DuckDB over the dataset's Parquet files out of core,
or over frames already in memory (tests, notebooks). Sightings -> replies -> turns, conversations and routine
instances are defined here once; the report asks for small aggregates and never holds a row per sighting.

DuckDB reads only the columns a query names, prunes `date=` partitions on `--since/--until`, and spills sorts
and hash tables to a temporary directory beyond `memory_limit`, so the memory a report needs does not grow with
the dataset (docs/performance.md has the measurements behind choosing it).
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa

from ..a2a.constants import TERMINAL_ROUTINE_STATUSES
from ..store.reader import table_dataset
from ..store.schema import TABLES
from .load import CARD_COLUMNS, EXCHANGE_COLUMNS, MESSAGE_COLUMNS, Frames, Window

NONE = "(none)"  # the key under which a missing value is counted
DEFAULT_MEMORY_LIMIT = "500MB"  # with the rest of the process, a report stays under 1 GiB (performance.md)

# Sightings are ordered by time, then by their position in the dataset (`pos`: file, then row; rows of one
# exchange are written in order), so "first" and "last" sighting are exact even within one microsecond. The two
# pack into one 128-bit sort key, which keeps the aggregates below scalar (no sort of whole rows).
_NO_TIME = 9223372036854775807  # a sighting without a time sorts last
_LOW64 = "18446744073709551615::HUGEINT"
SORT_KEY = f"((coalesce(epoch_us({{ts}}), {_NO_TIME})::HUGEINT << 64) + {{pos}})"
# replies in first-sighting order; first_pos (the position of the first sighting) is unique per reply
ORDER = "first_seen ASC NULLS LAST, first_pos ASC"

# the columns of a reply: its last sighting's values, plus when and where it was first seen
REPLY_VALUES = [
    "agent", "message_id", "context_id", "task_id", "author", "coverage_availability", "coverage",
    "coverage_reason", "originating_turn_id", "ownership_state", "ownership_suppressed", "routine_tool_name",
    "routine_name", "routine_status", "pending_input", "invocation_tool_name", "invocation_outcome", "citations",
    "citation_count",
]  # fmt: skip
REPLY_COLUMNS = ["reply_key", "conversation", "first_seen", "first_pos", "ts", "exchange_id", *REPLY_VALUES]
_TERMINAL = ", ".join(f"'{s}'" for s in sorted(TERMINAL_ROUTINE_STATUSES))

REPLY_KEY = "coalesce(message_id, 'sighting:' || exchange_id || ':' || seq)"
REPLIES = f"""
WITH k AS (
    SELECT min(ts) AS first_seen,
           (min({SORT_KEY.format(ts="ts", pos="pos")}) & {_LOW64})::BIGINT AS first_pos,
           (max({SORT_KEY.format(ts="ts", pos="pos")}) & {_LOW64})::BIGINT AS last_pos
    FROM sightings WHERE has_envelope GROUP BY {REPLY_KEY}
)
SELECT {REPLY_KEY} AS reply_key, coalesce(context_id, task_id, 'exchange:' || exchange_id) AS conversation,
       k.first_seen, k.first_pos, ts, exchange_id, {", ".join(REPLY_VALUES)}
FROM sightings JOIN k ON sightings.pos = k.last_pos
"""

TURNS = f"""
SELECT r.*, coalesce(r.originating_turn_id, r.reply_key) AS turn_id
FROM replies r JOIN (
    SELECT (max({SORT_KEY.format(ts="first_seen", pos="first_pos")}) & {_LOW64})::BIGINT AS first_pos FROM replies
    WHERE coverage_availability IS NOT NULL OR coverage IS NOT NULL OR coverage_reason IS NOT NULL
       OR originating_turn_id IS NOT NULL
    GROUP BY agent, coalesce(originating_turn_id, reply_key)
) last_verdict USING (first_pos)
"""

DAY = f"coalesce(strftime(first_seen, '%Y-%m-%d'), '{NONE}')"
ROUTINE = f"coalesce(routine_name, routine_tool_name, '{NONE}')"
GROUP_KEYS = {"all": "'all'", "agent": f"coalesce(agent, '{NONE}')", "day": DAY, "routine": ROUTINE}


def conversations_sql(group: str = "'all'") -> str:
    """Per conversation (within a group key `g`): replies, human replies, suppressed turns, ownership changes."""
    return f"""
SELECT g, agent, conversation, count(*) AS replies,
       count(*) FILTER (WHERE author = 'human') AS human_replies,
       count(*) FILTER (WHERE ownership_suppressed) AS suppressed_turns,
       count(*) FILTER (WHERE prev_owner = 'ai_owned' AND ownership_state = 'human_owned') AS handoffs_to_human,
       count(*) FILTER (WHERE prev_owner = 'human_owned' AND ownership_state = 'ai_owned') AS handbacks_to_agent,
       min(first_seen) AS first_seen, max(first_seen) AS last_seen
FROM (
    SELECT {group} AS g, agent, conversation, author, ownership_suppressed, ownership_state, first_seen,
           CASE WHEN ownership_state IS NOT NULL THEN lag(ownership_state IGNORE NULLS) OVER (
               PARTITION BY {group}, agent, conversation ORDER BY {ORDER}) END AS prev_owner
    FROM replies
)
GROUP BY g, agent, conversation
"""


INSTANCES = f"""
WITH statuses AS (
    SELECT *, coalesce(routine_name, routine_tool_name) AS routine FROM replies
    WHERE routine_status IS NOT NULL AND coalesce(routine_name, routine_tool_name) IS NOT NULL
), numbered AS (
    SELECT *, 1 + coalesce(sum(CASE WHEN routine_status IN ({_TERMINAL}) THEN 1 ELSE 0 END) OVER (
        PARTITION BY agent, conversation, routine ORDER BY {ORDER}
        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS instance
    FROM statuses
), paired AS (
    SELECT *, lag(pending_input) OVER (PARTITION BY agent, conversation, routine, instance ORDER BY {ORDER})
        AS prev_pending
    FROM numbered
)
SELECT agent, conversation, routine, instance,
       first(routine_tool_name ORDER BY {ORDER}) FILTER (WHERE routine_tool_name IS NOT NULL) AS tool_name,
       count(*) AS turns,
       min(first_seen) AS started,
       max(first_seen) AS last_seen,
       last(routine_status ORDER BY {ORDER}) AS last_status,
       -- of an abandoned instance: the required slots still pending at the status before the abandonment
       CASE WHEN last(routine_status ORDER BY {ORDER}) = 'abandoned' THEN coalesce(list_transform(
           list_filter(last(prev_pending ORDER BY {ORDER}), lambda slot: slot.required),
           lambda slot: coalesce(slot.key, '{NONE}')), []) END AS abandoned_at
FROM paired
GROUP BY agent, conversation, routine, instance
ORDER BY agent, conversation, routine, instance
"""

CITED = f"""
SELECT agent, {DAY} AS day, {ROUTINE} AS routine, document_id, count(*) AS replies
FROM (SELECT DISTINCT reply_key, agent, first_seen, routine_name, routine_tool_name,
             coalesce(c.document_id, '{NONE}') AS document_id
      FROM replies, unnest(citations) AS t(c))
GROUP BY ALL
"""

CITED_TITLES = f"""
SELECT coalesce(c.document_id, '{NONE}') AS document_id,
       last(c.title ORDER BY {ORDER}) FILTER (WHERE c.title IS NOT NULL) AS title
FROM replies, unnest(citations) AS t(c)
GROUP BY 1
"""

ANOMALIES = f"""
SELECT tbl AS "table", split_part(anomaly, ':', 1) AS code, count(*) AS count, min(anomaly) AS example
FROM (
    SELECT DISTINCT 'exchanges' AS tbl, exchange_id AS k, a AS anomaly
    FROM (SELECT * FROM exchanges WHERE len(anomalies) > 0), unnest(anomalies) AS t(a)
    UNION ALL
    SELECT DISTINCT 'messages', coalesce(message_id, exchange_id || ':' || seq), a
    FROM (SELECT * FROM sightings WHERE len(anomalies) > 0), unnest(anomalies) AS t(a)
    UNION ALL
    SELECT DISTINCT 'agent_cards', coalesce(agent, '{NONE}') || ':' || ts::VARCHAR, a
    FROM (SELECT * FROM agent_cards WHERE len(anomalies) > 0), unnest(anomalies) AS t(a)
)
WHERE anomaly IS NOT NULL
GROUP BY ALL
ORDER BY count DESC, "table", code
"""


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _window_sql(window: Window, ts_column: str) -> str:
    """The window as a predicate on rows; whole `date=` partitions outside it never reach the scan (`_in_window`)."""
    parts = []
    if window.agents:
        parts.append(f"agent IN ({', '.join(_quote(a) for a in window.agents)})")
    if window.since is not None:
        parts.append(f"{ts_column} >= TIMESTAMPTZ {_quote(window.since.isoformat())}")
    if window.until is not None:
        parts.append(f"{ts_column} < TIMESTAMPTZ {_quote(window.until.isoformat())}")
    return " AND ".join(parts) or "TRUE"


def _in_window(files: list[str], window: Window) -> list[str]:
    """Partition pruning before any file is opened: the `date=` directories outside the window are dropped."""
    first = window.since.strftime("%Y-%m-%d") if window.since else None
    last = window.until.strftime("%Y-%m-%d") if window.until else None
    kept = []
    for f in files:
        day = Path(f).parent.name.removeprefix("date=")
        if (first is None or day >= first) and (last is None or day <= last):
            kept.append(f)
    return kept


def _plain_type(t: pa.DataType) -> pa.DataType:
    return t.value_type if pa.types.is_dictionary(t) else t


def _arrow(frame: pd.DataFrame, table: str, columns: list[str]) -> pa.Table:
    """A frame with some of a table's columns -> Arrow with the table's types (enums as plain strings)."""
    schema = TABLES[table]
    arrays, fields = [], []
    for name in columns:
        t = _plain_type(schema.field(name).type)
        if name in frame.columns:
            col = frame[name]
            if isinstance(col.dtype, pd.CategoricalDtype):
                col = col.astype(object).where(col.notna(), None)
            arrays.append(pa.array(col, type=t, from_pandas=True))
        else:
            arrays.append(pa.nulls(len(frame), t))
        fields.append(pa.field(name, t))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


class Engine:
    """A DuckDB connection holding the views `sightings` (agent-role messages), `exchanges`, `agent_cards`
    and, once asked for, the tables `replies` and `turns`."""

    def __init__(self, con: duckdb.DuckDBPyConnection, root: str, present: list[str], spill: str) -> None:
        self.con, self.root, self.present = con, root, present
        self._built: set[str] = set()
        # closed on close(), or when the engine is collected or the interpreter exits (a notebook may never close)
        self._finalizer = weakref.finalize(self, _release, con, spill)

    # construction -------------------------------------------------------------------------------------------

    @staticmethod
    def _connect(memory_limit: str | None, threads: int | None) -> tuple[duckdb.DuckDBPyConnection, str]:
        spill = tempfile.mkdtemp(prefix="converse-tap-duckdb-")
        con = duckdb.connect(config={"temp_directory": spill})
        con.execute("SET TimeZone = 'UTC'")
        con.execute("SET preserve_insertion_order = false")
        if memory_limit:
            con.execute(f"SET memory_limit = {_quote(memory_limit)}")
        if threads:
            con.execute(f"SET threads = {int(threads)}")
        return con, spill

    @classmethod
    def over_dataset(
        cls,
        root: str | Path,
        window: Window | None = None,
        memory_limit: str | None = DEFAULT_MEMORY_LIMIT,
        threads: int | None = None,
    ) -> Engine:
        """Views over the Parquet files of `root`, narrowed to the window (pushed down to the scan)."""
        window = window or Window()
        con, spill = cls._connect(memory_limit, threads)
        present = []
        for table, columns, ts in (
            ("messages", [*MESSAGE_COLUMNS, "object_kind"], "ts"),
            ("exchanges", EXCHANGE_COLUMNS, "ts_start"),
            ("agent_cards", CARD_COLUMNS, "ts"),
        ):
            dataset = table_dataset(root, table)
            if dataset is not None:
                present.append(table)
            files = _in_window(dataset.files, window) if dataset is not None else []
            if not files:
                con.register(f"_{table}_empty", _arrow(pd.DataFrame(), table, columns))
                source = f"(SELECT *, NULL::BIGINT AS pos FROM _{table}_empty)"
            else:
                listed = ", ".join(_quote(f) for f in files)
                scan = f"read_parquet([{listed}], union_by_name = true)"
                found = {r[0] for r in con.sql(f"DESCRIBE SELECT * FROM {scan}").fetchall()}
                select = ", ".join(c if c in found else f"NULL AS {c}" for c in columns)  # columns older files lack
                pos = "(file_index::BIGINT << 40) + file_row_number"  # where in the dataset: file, row
                source = f"(SELECT {select}, {pos} AS pos FROM {scan})"
            where = _window_sql(window, ts)
            name = "sightings" if table == "messages" else table
            if table == "messages":
                where += " AND role = 'agent' AND object_kind = 'message'"
            con.execute(f"CREATE VIEW {name} AS SELECT * FROM {source} WHERE {where}")
        present = [t for t in TABLES if t in present]
        return cls(con, str(root), present, spill)

    @classmethod
    def over_frames(
        cls,
        frames: Frames | None = None,
        *,
        messages: pd.DataFrame | None = None,
        replies: pd.DataFrame | None = None,
    ) -> Engine:
        """Views over frames in memory: `frames` (as `load_frames` returns them), or a messages frame, or an
        already built replies frame."""
        con, spill = cls._connect(None, None)
        if frames is not None:
            messages = frames.messages
        msgs = messages if messages is not None else pd.DataFrame()
        if "object_kind" in msgs.columns:
            kind = msgs["object_kind"].astype(object)
            msgs = msgs[kind.isna() | (kind == "message")]
        if "role" in msgs.columns:
            msgs = msgs[msgs["role"].astype(object) == "agent"]
        table = _arrow(msgs, "messages", MESSAGE_COLUMNS)
        con.register("sightings", table.append_column("pos", pa.array(range(len(msgs)), pa.int64())))
        ex = frames.exchanges if frames is not None else pd.DataFrame()
        con.register("exchanges", _arrow(ex, "exchanges", EXCHANGE_COLUMNS))
        cards = frames.agent_cards if frames is not None else pd.DataFrame()
        con.register("agent_cards", _arrow(cards, "agent_cards", CARD_COLUMNS))
        engine = cls(con, frames.root if frames else "", list(frames.present) if frames else [], spill)
        if replies is not None:
            con.register("_replies_in", _replies_arrow(replies))
            con.execute("CREATE TEMP TABLE replies AS SELECT * FROM _replies_in")
            engine._built.add("replies")
        return engine

    def close(self) -> None:
        """Close the connection and remove the spill directory."""
        self._finalizer()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # facts ------------------------------------------------------------------------------------------------

    def build(self, what: str) -> None:
        """Materialise `replies` or `turns` once (spilled to disk when larger than memory)."""
        if what in self._built:
            return
        if what == "turns":
            self.build("replies")
        sql = {"replies": REPLIES, "turns": TURNS}[what]
        self.con.execute(f"CREATE TEMP TABLE {what} AS {sql}")
        self._built.add(what)

    def df(self, sql: str, *needs: str) -> pd.DataFrame:
        for what in needs:
            self.build(what)
        return self.con.sql(sql).to_arrow_table().to_pandas()

    def scalar(self, sql: str, *needs: str) -> Any:
        for what in needs:
            self.build(what)
        rows = self.con.sql(sql).fetchall()
        return rows[0][0] if rows else None

    def replies(self) -> pd.DataFrame:
        return self.df(f"SELECT * FROM replies ORDER BY {ORDER}", "replies")

    def turns(self) -> pd.DataFrame:
        return self.df(f"SELECT * FROM turns ORDER BY {ORDER}", "turns")

    def conversations(self) -> pd.DataFrame:
        sql = conversations_sql()
        return self.df(f"SELECT * EXCLUDE (g) FROM ({sql}) ORDER BY agent, conversation", "replies")

    def instances(self, conversation: bool = True) -> pd.DataFrame:
        """Per routine instance (`conversation=False` leaves that column out: the report does not need it)."""
        self.build("replies")
        table = self.con.sql(INSTANCES).to_arrow_table()
        if not conversation:
            table = table.drop_columns(["conversation"])
        frame = table.drop_columns(["abandoned_at"]).to_pandas()
        frame["abandoned_at"] = table.column("abandoned_at").to_pylist()  # lists, not numpy arrays
        return frame

    def drop_facts(self) -> None:
        """Free the materialised replies and turns (the report's last query is done)."""
        for what in ("turns", "replies"):
            if what in self._built:
                self.con.execute(f"DROP TABLE {what}")
                self._built.discard(what)

    def last_reply_seen(self) -> pd.Timestamp | None:
        last = self.scalar("SELECT max(first_seen) FROM replies", "replies")
        return pd.Timestamp(last) if last is not None else None

    def turn_counts(self) -> pd.DataFrame:
        """Turns counted by agent, day, routine, coverage fields and whether cited (`citation_count` 0/1)."""
        return self.df(
            f"""SELECT coalesce(agent, '{NONE}') AS agent, {DAY} AS day, {ROUTINE} AS routine,
                       coverage_availability, coverage, coverage_reason,
                       (coalesce(citation_count, 0) > 0)::INTEGER AS citation_count, count(*) AS n
                FROM turns GROUP BY ALL""",
            "turns",
        )

    def reply_counts(self) -> pd.DataFrame:
        """Replies counted by agent, day, routine, author and invocation."""
        return self.df(
            f"""SELECT coalesce(agent, '{NONE}') AS agent, {DAY} AS day, {ROUTINE} AS routine, author,
                       invocation_tool_name, invocation_outcome, count(*) AS n
                FROM replies GROUP BY ALL""",
            "replies",
        )

    def conversation_summary(self, grouping: str = "all") -> pd.DataFrame:
        """Per key of a grouping (all, agent, day, routine): conversations, those with a human reply,
        suppressed turns, hand-offs and hand-backs."""
        sql = conversations_sql(GROUP_KEYS[grouping])
        return self.df(
            f"""SELECT g AS key, count(*) AS conversations,
                       count(*) FILTER (WHERE human_replies > 0) AS conversations_with_human,
                       sum(suppressed_turns)::BIGINT AS suppressed_turns,
                       sum(handoffs_to_human)::BIGINT AS handoffs_to_human,
                       sum(handbacks_to_agent)::BIGINT AS handbacks_to_agent
                FROM ({sql}) GROUP BY g""",
            "replies",
        )

    def cited(self) -> pd.DataFrame:
        """Replies citing each document, by agent, day and routine; titles are the last one seen."""
        counts = self.df(CITED, "replies")
        titles = self.df(CITED_TITLES, "replies")
        return counts.merge(titles, on="document_id", how="left") if len(counts) else counts.assign(title=None)

    def anomalies(self) -> pd.DataFrame:
        return self.df(ANOMALIES)

    def adoption_counts(self) -> dict[str, int]:
        (row,) = self.con.sql(
            """SELECT count(*) FILTER (WHERE binding IS DISTINCT FROM 'card'),
                      count(*) FILTER (WHERE binding IS DISTINCT FROM 'card' AND converse_requested)
               FROM exchanges"""
        ).fetchall()
        (msg,) = self.con.sql(
            """SELECT count(*), count(*) FILTER (WHERE carried) FROM (
                   SELECT bool_or(coalesce(has_envelope, false)) AS carried FROM sightings
                   GROUP BY coalesce(message_id, exchange_id || ':' || seq))"""
        ).fetchall()
        return {"calls": row[0], "asked": row[1], "messages": msg[0], "carried": msg[1]}

    def dataset_counts(self) -> dict[str, Any]:
        ex = self.scalar("SELECT count(*) FROM exchanges")
        ((sightings, first, last),) = self.con.sql("SELECT count(*), min(ts), max(ts) FROM sightings").fetchall()
        agents = [
            r[0]
            for r in self.con.sql(
                """SELECT DISTINCT agent FROM (SELECT agent FROM exchanges UNION SELECT agent FROM sightings)
                   WHERE agent IS NOT NULL ORDER BY agent"""
            ).fetchall()
        ]
        return {
            "exchanges": ex,
            "sightings": sightings,
            "replies": self.scalar("SELECT count(*) FROM replies", "replies"),
            "turns": self.scalar("SELECT count(*) FROM turns", "turns"),
            "agents": agents,
            "first_seen": pd.Timestamp(first) if first is not None else None,
            "last_seen": pd.Timestamp(last) if last is not None else None,
        }

    def cards(self) -> pd.DataFrame:
        return self.df("SELECT * EXCLUDE (pos) FROM agent_cards")


def _release(con: duckdb.DuckDBPyConnection, spill: str) -> None:
    con.close()
    shutil.rmtree(spill, ignore_errors=True)


def _replies_arrow(replies: pd.DataFrame) -> pa.Table:
    """A replies frame (as `Engine.replies` returns it) back to Arrow with the dataset's types."""
    out = _arrow(replies, "messages", [c for c in MESSAGE_COLUMNS if c in REPLY_VALUES or c in ("ts", "exchange_id")])
    extra = {
        "reply_key": pa.string(),
        "conversation": pa.string(),
        "first_seen": pa.timestamp("us", tz="UTC"),
        "first_pos": pa.int64(),
    }
    for name, t in extra.items():
        col = replies[name] if name in replies.columns else pd.Series([None] * len(replies), dtype=object)
        if name == "first_pos" and name not in replies.columns:  # a hand-made frame: its row order
            col = pd.Series(range(len(replies)))
        out = out.append_column(name, pa.array(col, type=t, from_pandas=True))
    return out.select(REPLY_COLUMNS)


@contextmanager
def engine_for(source: Frames | Engine) -> Iterator[Engine]:
    """An engine over `source`; one made here is closed on exit, one passed in is left open."""
    if isinstance(source, Engine):
        yield source
        return
    engine = Engine.over_frames(source)
    try:
        yield engine
    finally:
        engine.close()


# Named views for drill-down (`converse-tap sql`, `show`, report and check examples) ------------------------------
# Kept apart from the report's queries above: these only give the definitions above their names.

STORED_VIEWS = ("exchanges", "messages", "agent_cards")
FACT_VIEWS = ("replies", "turns", "conversations", "routine_instances")
# the conversation a message belongs to, as REPLIES computes it for replies (tests check the two agree)
CONVERSATION_KEY = "coalesce(context_id, task_id, 'exchange:' || exchange_id)"
_STORED_TS = {"exchanges": "ts_start", "messages": "ts", "agent_cards": "ts"}


def create_named_views(engine: Engine, window: Window | None = None, facts: tuple[str, ...] = FACT_VIEWS) -> None:
    """Views named for the report's concepts on the engine's connection: the stored tables with every column
    (schema `stored`, narrowed to the window like the report) and the facts in `facts`, built by the SQL above.
    Unqualified names resolve to them afterwards (temporary facts first, then `stored`, then the engine's own)."""
    window = window or Window()
    con = engine.con
    con.execute("CREATE SCHEMA IF NOT EXISTS stored")
    for table in STORED_VIEWS:
        schema = TABLES[table]
        dataset = table_dataset(engine.root, table) if engine.root else None
        files = _in_window(dataset.files, window) if dataset is not None else []
        if files:
            listed = ", ".join(_quote(f) for f in files)
            scan = f"read_parquet([{listed}], union_by_name = true)"
            found = {r[0] for r in con.sql(f"DESCRIBE SELECT * FROM {scan}").fetchall()}
            select = ", ".join(c if c in found else f"NULL AS {c}" for c in schema.names)
            source = f"(SELECT {select} FROM {scan})"
        else:
            con.register(f"_{table}_all_empty", _arrow(pd.DataFrame(), table, list(schema.names)))
            source = f"_{table}_all_empty"
        where = _window_sql(window, _STORED_TS[table])
        con.execute(f"CREATE OR REPLACE VIEW stored.{table} AS SELECT * FROM {source} WHERE {where}")
    if set(facts) & {"replies", "conversations", "routine_instances"}:
        engine.build("replies")
    if "turns" in facts:
        engine.build("turns")
    if "conversations" in facts:
        con.execute(f"CREATE OR REPLACE TEMP VIEW conversations AS SELECT * EXCLUDE (g) FROM ({conversations_sql()})")
    if "routine_instances" in facts:
        outcome = f"CASE WHEN last_status IN ({_TERMINAL}) THEN last_status ELSE 'open' END AS outcome"
        con.execute(f"CREATE OR REPLACE TEMP VIEW routine_instances AS SELECT *, {outcome} FROM ({INSTANCES})")
    con.execute("SET search_path = 'stored,main'")
