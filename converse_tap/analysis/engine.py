"""The engine that runs the facts of docs/metrics.md (their SQL is `facts_sql`): DuckDB over the dataset's Parquet
files out of core, or over frames already in memory (tests, notebooks). The report asks it for small aggregates
and never holds a row per sighting.

DuckDB reads only the columns a query names, prunes `date=` partitions on `--since/--until`, and spills sorts
and hash tables to a temporary directory beyond `memory_limit`, so the memory a report needs does not grow with
the dataset (docs/performance.md has the measurements behind choosing it).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow as pa

from ..store.reader import Journals, TableFiles
from .dataset_views import CALENDAR, TIME_COLUMNS, calendar_view, connect, dataset_views, release, untimed, untimed_sql
from .facts_sql import (
    ANOMALIES,
    CITED,
    CITED_TITLES,
    CLIENT_CALL,
    DETAIL_COLUMNS,
    GROUP_KEYS,
    INSTANCE_KEYS,
    INSTANCES,
    KEYS,
    LAST_VERDICTS,
    ORDER,
    REPLIES,
    REPLY_COLUMNS,
    REPLY_COUNTS,
    TURN_COUNTS,
    TURNS,
    abandoned_slots_sql,
    conversation_summary_sql,
    conversations_sql,
    keys_sql,
    push_owners_sql,
    replies_sql,
    routine_counts_sql,
    routine_middles_sql,
)
from .facts_sql import CONVERSATION_KEY as CONVERSATION_KEY  # re-exported: callers name it from here
from .facts_sql import NONE as NONE
from .load import CARD_COLUMNS, EXCHANGE_COLUMNS, MESSAGE_COLUMNS, Frames, Window, journal_notes
from .sources import _arrow, _replies_arrow, capture_gap_notes

DEFAULT_MEMORY_LIMIT = "500MB"  # with the rest of the process, a report stays under 1 GiB (performance.md)
# replies are built from runs of files of about this many message rows: the join of one run with its message keys
# fits the default memory limit, so the time grows with the rows rather than with spilling (performance.md)
CHUNK_ROWS = 10_000_000
# the message keys are grouped in hash partitions of about this many message rows each, one after the other: one
# grouping of every key of 100M rows does not fit the default memory limit (performance.md, section 5.0)
PARTITION_ROWS = 25_000_000


class Engine:
    """A DuckDB connection holding the views `sightings` (agent-role messages), `exchanges`, `agent_cards`
    and, once asked for, the tables `replies` and `turns`."""

    def __init__(self, con: duckdb.DuckDBPyConnection, root: str, present: list[str], spill: str) -> None:
        self.con, self.root, self.present = con, root, present
        self.skipped: list[tuple[str, str]] = []  # files in the dataset that are not its own: (path, why)
        self.journals = Journals()  # the rows read from journals, and whose writers live
        self.listed: dict[str, TableFiles] = {}  # the Parquet files read, per table
        self._built: set[str] = set()
        self._messages: tuple[int, int] | None = None  # distinct agent messages, those with the envelope
        self._turns: int | None = None  # turns, once turn_counts has counted them
        # parts of the sightings (source, first position, end position) the replies are built from in turn
        self._chunks: list[tuple[str, int, int | None]] = []
        self._partitions = 1  # hash partitions the message keys are grouped in, one after the other
        self._read_views = False  # views of the rows as read (times outside the calendar too): over a dataset
        self._untimed: dict[str, int] = {}  # rows per view with a time outside the calendar, once counted
        # closed on close(), or when the engine is collected or the interpreter exits (a notebook may never close)
        self._finalizer = weakref.finalize(self, release, con, spill)

    # construction -------------------------------------------------------------------------------------------

    @classmethod
    def over_dataset(
        cls,
        root: str | Path,
        window: Window | None = None,
        memory_limit: str | None = DEFAULT_MEMORY_LIMIT,
        threads: int | None = None,
        chunk_rows: int = CHUNK_ROWS,
        partition_rows: int = PARTITION_ROWS,
        exclude: dict[str, str] | None = None,
    ) -> Engine:
        """Views over the Parquet files of `root` and the rows still in its journals, narrowed to the window
        (pushed down to the scan). Files that are not the dataset's are skipped and listed in `skipped`.
        The replies are built from runs of files of about `chunk_rows` message rows, one after the other, and
        the message keys in hash partitions of about `partition_rows` message rows."""
        con, spill = connect(memory_limit, threads)
        views = dataset_views(con, root, window or Window(), chunk_rows, exclude)
        engine = cls(con, str(root), views.present, spill)
        engine.skipped, engine.journals, engine.listed = views.skipped, views.journals, views.listed
        engine._chunks = views.chunks if len(views.chunks) > 1 else []
        engine._partitions = max(1, -(-views.message_rows // max(1, partition_rows)))
        engine._read_views = True
        return engine

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
        con, spill = connect(None, None)
        if frames is not None:
            messages = frames.messages
        msgs = messages if messages is not None else pd.DataFrame()
        if "object_kind" in msgs.columns:
            kind = msgs["object_kind"].astype(object)
            msgs = msgs[kind.isna() | (kind == "message")]
        if "role" in msgs.columns:
            msgs = msgs[msgs["role"].astype(object) == "agent"]
        if "direction" in msgs.columns:  # (AGENT_SAID, over a frame)
            msgs = msgs[msgs["direction"].astype(object) == "response"]
        ex = frames.exchanges if frames is not None else pd.DataFrame()
        cards = frames.agent_cards if frames is not None else pd.DataFrame()
        for name, frame, table, columns in (
            ("sightings", msgs, "messages", MESSAGE_COLUMNS),
            ("exchanges", ex, "exchanges", EXCHANGE_COLUMNS),
            ("agent_cards", cards, "agent_cards", CARD_COLUMNS),
        ):  # in the frame's order; a time no reader can hold read as none, as over a dataset (dataset_views.py)
            rows = _arrow(frame, table, columns).append_column("pos", pa.array(range(len(frame)), pa.int64()))
            con.register(f"_{name}_frame", rows)
            calendar_view(con, name, f"SELECT * FROM _{name}_frame", TIME_COLUMNS[name], columns)
        owners = push_owners_sql()  # (ATTRIBUTED's; agent_filter.py), none when the frames' rows are attributed
        con.execute(
            f"CREATE VIEW push_owners AS SELECT * FROM ({owners}) WHERE {frames is None or not frames.attributed}"
        )
        engine = cls(con, frames.root if frames else "", list(frames.present) if frames else [], spill)
        engine._read_views = True
        if frames is not None:  # what load_frames read: files skipped, journaled rows, the files (capture gaps)
            engine.skipped, engine.journals, engine.listed = frames.skipped, frames.journals, frames.listed
        if replies is not None:
            con.register("_replies_in", _replies_arrow(replies))
            con.execute("CREATE TEMP TABLE replies AS SELECT * FROM _replies_in")
            engine._built.add("replies")
        return engine

    def reading_notes(self) -> list[str]:
        """What a reader of the report must know about what was read: foreign files skipped, journaled rows."""
        notes = [f"skipped {path}: {why}, not a file of this dataset" for path, why in self.skipped]
        notes += self._untimed_notes()
        gaps = self.listed.get("capture_gaps")
        lost = capture_gap_notes(self.root, gaps.files if gaps else [], self.journals.tables.get("capture_gaps", []))
        return notes + journal_notes(self.journals, self.root) + lost

    def _untimed_notes(self) -> list[str]:
        """Rows whose time no reader can hold (dataset_views.CALENDAR): counted without one."""
        if not self._read_views:
            return []
        notes = []
        for view, what in (
            ("sightings", "agent message sightings"),
            ("exchanges", "exchanges"),
            ("agent_cards", "cards"),
        ):
            n = self._untimed[view] if view in self._untimed else self.scalar(untimed_sql(view))
            if n:
                notes.append(
                    f"{what} with a time outside the years 1 to 9999 (no recorder's clock: files written by another "
                    f"tool?): {n}, read as having none (ordered last, counted under the day {NONE})"
                )
        return notes

    def close(self) -> None:
        """Close the connection and remove the spill directory."""
        self._finalizer()

    def __enter__(self) -> Engine:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # facts ------------------------------------------------------------------------------------------------

    def build(self, what: str) -> None:
        """Materialise `message_keys`, `replies`, `last_verdicts` (spilled to disk when larger than memory) or
        the view `turns`, with what they rest on, once."""
        if what in self._built:
            return
        needs = {"message_keys": (), "replies": ("message_keys",), "last_verdicts": ("replies",)}
        for first in needs.get(what, ("last_verdicts",)):
            self.build(first)
        sql = {"message_keys": KEYS, "replies": REPLIES, "last_verdicts": LAST_VERDICTS, "turns": TURNS}[what]
        kind = "VIEW" if what == "turns" else "TABLE"
        if what == "replies" and self._chunks:  # one part at a time: the join's hash table stays in memory
            for i, (source, low, high) in enumerate(self._chunks):
                part = replies_sql(source, low, high)
                self.con.execute(f"CREATE TEMP TABLE replies AS {part}" if i == 0 else f"INSERT INTO replies {part}")
        elif what == "message_keys" and self._partitions > 1:  # a partition of the keys at a time
            for i in range(self._partitions):
                part = keys_sql(i, self._partitions)
                self.con.execute(f"CREATE TEMP TABLE {what} AS {part}" if i == 0 else f"INSERT INTO {what} {part}")
        else:
            self.con.execute(f"CREATE TEMP {kind} {what} AS {sql}")
        self._built.add(what)
        if what == "replies" and "message_keys" in self._built:  # all it was for but adoption: count, then free
            self._messages = self._count_messages()
            self.con.execute("DROP TABLE message_keys")
            self._built.discard("message_keys")

    def _count_messages(self) -> tuple[int, int]:
        self.build("message_keys")
        (row,) = self.con.sql("SELECT count(*), count(*) FILTER (WHERE carried) FROM message_keys").fetchall()
        return row[0], row[1]

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
        """Whole replies: the facts' columns, and the others from each reply's last sighting."""
        self.build("replies")
        return self.df(f"SELECT {', '.join(REPLY_COLUMNS)} FROM ({self._whole('replies')}) ORDER BY {ORDER}")

    def _whole(self, table: str) -> str:
        have = {r[0] for r in self.con.sql(f"DESCRIBE {table}").fetchall()}
        if "last_pos" not in have:  # built from a frame of whole replies
            return f"SELECT * FROM {table}"
        details = ", ".join(f"s.{c}" for c in DETAIL_COLUMNS)
        return f"SELECT r.*, {details} FROM {table} r JOIN sightings s ON s.pos = r.last_pos"

    def turns(self) -> pd.DataFrame:
        self.build("turns")
        return self.df(f"SELECT {', '.join(REPLY_COLUMNS)}, turn_id FROM ({self._whole('turns')}) ORDER BY {ORDER}")

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

    def routine_facts(
        self, groupings: tuple[str, ...], stale_after: pd.Timedelta | None
    ) -> dict[str, tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]]:
        """Per grouping (all, agent, day, routine): routine instances counted per key and routine (routine None:
        all of the key's), the middle values of turns and durations of closed ones, and abandoned slots."""
        self.build("replies")
        # in microseconds, from DuckDB: a time near the ends of the calendar has no nanoseconds in pandas
        now_us = self.scalar("SELECT epoch_us(max(first_seen)) FROM replies")
        self.con.execute(
            "CREATE OR REPLACE TEMP TABLE instance_facts AS SELECT agent, routine, started, last_seen, last_status,"
            f" turns, abandoned_at FROM ({INSTANCES})"
        )
        stale_ns = None if stale_after is None else stale_after.value
        out = {}
        for g in groupings:
            key = INSTANCE_KEYS[g]
            out[g] = (
                self.df(routine_counts_sql(key, now_us, stale_ns)),
                self.df(routine_middles_sql(key)),
                self.df(abandoned_slots_sql(key)),
            )
        self.con.execute("DROP TABLE instance_facts")
        return out

    def drop_facts(self) -> None:
        """Free the materialised facts (the report's last query is done)."""
        self._turns = None
        for what in ("turns", "last_verdicts", "replies", "message_keys"):
            if what in self._built:
                self.con.execute(f"DROP {'VIEW' if what == 'turns' else 'TABLE'} {what}")
                self._built.discard(what)

    def last_reply_seen(self) -> pd.Timestamp | None:
        last = self.scalar("SELECT max(first_seen) FROM replies", "replies")
        return pd.Timestamp(last) if last is not None else None

    def turn_counts(self) -> pd.DataFrame:
        """Turns counted by agent, day, routine, coverage fields and whether cited (`citation_count` 0/1)."""
        counts = self.df(TURN_COUNTS, "turns")
        self._turns = int(counts["n"].sum())  # what dataset_counts would count again
        return counts

    def reply_counts(self) -> pd.DataFrame:
        """Replies counted by agent, day, routine, author and invocation."""
        return self.df(REPLY_COUNTS, "replies")

    def conversation_summary(self, grouping: str = "all") -> pd.DataFrame:
        """Per key of a grouping (all, agent, day, routine): conversations, those with a human reply,
        suppressed turns, hand-offs and hand-backs."""
        return self.df(conversation_summary_sql(GROUP_KEYS[grouping]), "replies")

    def cited(self) -> pd.DataFrame:
        """Replies citing each document, by agent, day and routine; titles are the last one seen."""
        counts = self.df(CITED, "replies")
        titles = self.df(CITED_TITLES, "replies")
        return counts.merge(titles, on="document_id", how="left") if len(counts) else counts.assign(title=None)

    def anomalies(self) -> pd.DataFrame:
        return self.df(ANOMALIES)

    def adoption_counts(self) -> dict[str, int]:
        (row,) = self.con.sql(
            f"""SELECT count(DISTINCT exchange_id) FILTER (WHERE ({CLIENT_CALL})),
                       count(DISTINCT exchange_id) FILTER (WHERE ({CLIENT_CALL}) AND converse_requested)
                FROM exchanges"""  # an exchange ingested twice, or journaled and rolled, is one call
        ).fetchall()
        msg = self._messages if self._messages is not None else self._count_messages()
        return {"calls": row[0], "asked": row[1], "messages": msg[0], "carried": msg[1]}

    def dataset_counts(self) -> dict[str, Any]:
        if self._read_views:  # over the rows as read: in the same scans, the times outside the calendar
            ((ex, self._untimed["exchanges"]),) = self.con.sql(
                f"SELECT count(DISTINCT exchange_id), {untimed('ts_start')} FROM _exchanges_read"
            ).fetchall()
            ((sightings, first, last, self._untimed["sightings"]),) = self.con.sql(
                f"SELECT count(*), min(ts) FILTER (WHERE ts BETWEEN {CALENDAR}),"
                f" max(ts) FILTER (WHERE ts BETWEEN {CALENDAR}), {untimed('ts')} FROM _sightings_read"
            ).fetchall()
        else:
            ex = self.scalar("SELECT count(DISTINCT exchange_id) FROM exchanges")
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
            "turns": self._turns if self._turns is not None else self.scalar("SELECT count(*) FROM turns", "turns"),
            "agents": agents,
            "first_seen": pd.Timestamp(first) if first is not None else None,
            "last_seen": pd.Timestamp(last) if last is not None else None,
        }

    def cards(self) -> pd.DataFrame:
        """The cards in the window, in their place in the data (file, then row: `metrics.latest_cards` reads it)."""
        return self.df("SELECT * EXCLUDE (pos) FROM agent_cards ORDER BY pos")


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
