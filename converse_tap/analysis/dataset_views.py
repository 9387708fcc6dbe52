"""The DuckDB connection an engine runs on, and the views it holds over a dataset: `sightings` (the agent's
messages), `exchanges` and `agent_cards`, each the union of the table's Parquet files and the rows still in its
journals, narrowed to the report's window where the scan can apply it (columns, `date=` partitions, times).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from ..store import objstore
from ..store.reader import Journals, TableFiles
from ..store.schema import TABLES
from .agent_filter import ATTRIBUTABLE, agent_views, attributed, narrowed, scan_window, view_name
from .load import AGENT_SAID, CARD_COLUMNS, EXCHANGE_COLUMNS, MESSAGE_COLUMNS, Window, skipped_files
from .sources import _arrow, _file_groups, _journaled, _journals_then_files, _quote, _scan_sql, _window_sql

# the times a report can show (Python's calendar, years 1 to 9999): a file not written by a recorder can hold others
# (year 294247, or BC), which DuckDB reads but no reader of its times can hold; such a time is read as no time
# (ordered last, day `(none)`), and the report says how many rows had one (`untimed_sql`)
CALENDAR = "TIMESTAMPTZ '0001-01-01 00:00:00+00' AND TIMESTAMPTZ '9999-12-31 23:59:59.999999+00'"
TIME_COLUMNS = {"sightings": "ts", "exchanges": "ts_start", "agent_cards": "ts"}


def untimed(ts: str) -> str:
    """The aggregate counting the rows whose time `ts` is outside the calendar, over a view's rows as read
    (`_<view>_read`: the view `dataset_views` defines reads that time as none)."""
    return f"count(*) FILTER (WHERE {ts} IS NOT NULL AND NOT ({ts} BETWEEN {CALENDAR}))"


def untimed_sql(view: str) -> str:
    return f"SELECT {untimed(TIME_COLUMNS[view])} FROM _{view}_read"


def calendar_view(con: Any, name: str, source: str, ts: str, columns: list[str]) -> None:
    """On `con` (DuckDB's, or a spark.SparkConnection), the view `_<name>_read` of the rows of `source` (a query
    of `columns` and `pos`) as read, and the view `name` of the same rows with a time `ts` outside the calendar as
    none (the one the facts read)."""
    con.execute(f"CREATE VIEW _{name}_read AS {source}")
    timed = [f"CASE WHEN {ts} BETWEEN {CALENDAR} THEN {ts} END AS {ts}" if c == ts else c for c in [*columns, "pos"]]
    con.execute(f"CREATE VIEW {name} AS SELECT {', '.join(timed)} FROM _{name}_read")


def read_views(con: Any, window: Window) -> bool:
    """`agent_views` (over the `calendar_view`s of the window's rows), and under an agent filter the rows as read
    (times outside the calendar too) narrowed to the agents as their views are: `_sightings_read`,
    `_exchanges_read`. Returns what `agent_views` does."""
    said = [*MESSAGE_COLUMNS, "object_kind"]
    pushed = agent_views(con, window, {"messages": said, "exchanges": EXCHANGE_COLUMNS})
    if window.agents:
        for table, cols in (("messages", said), ("exchanges", EXCHANGE_COLUMNS)):
            read = attributed(f"_{view_name(table, window)}_read", cols, window.agents, pushed)
            con.execute(f"CREATE VIEW _{ATTRIBUTABLE[table]}_read AS {read}")
    return pushed


def connect(memory_limit: str | None, threads: int | None) -> tuple[duckdb.DuckDBPyConnection, str]:
    """A connection in UTC that spills to a directory of its own (returned beside it, for `release`)."""
    spill = tempfile.mkdtemp(prefix="converse-tap-duckdb-")
    con = duckdb.connect(config={"temp_directory": spill})
    con.execute("SET TimeZone = 'UTC'")
    con.execute("SET preserve_insertion_order = false")
    # never drawn into a report written to stdout; in a Jupyter kernel without ipywidgets DuckDB refuses to
    # touch the setting at all (and draws nothing there either)
    with contextlib.suppress(duckdb.InvalidInputException):
        con.execute("SET enable_progress_bar = false")
    if memory_limit:
        con.execute(f"SET memory_limit = {_quote(memory_limit)}")
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    return con, spill


def release(con: duckdb.DuckDBPyConnection, spill: str) -> None:
    con.close()
    shutil.rmtree(spill, ignore_errors=True)


@dataclass
class DatasetViews:
    """What defining the views found: the tables with rows, the files skipped (path, why), the journals and
    files read, and the parts of the sightings the replies are built from (source, first position, end)."""

    present: list[str] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    journals: Journals = field(default_factory=Journals)
    listed: dict[str, TableFiles] = field(default_factory=dict)
    chunks: list[tuple[str, int, int | None]] = field(default_factory=list)
    message_rows: int = 0


def dataset_views(
    con: duckdb.DuckDBPyConnection,
    root: str | Path,
    window: Window,
    chunk_rows: int,
    exclude: dict[str, str] | None = None,
) -> DatasetViews:
    """Create the views `sightings`, `exchanges` and `agent_cards` over the dataset at `root` in `con`.
    `exclude`: files not to read (damaged ones), and why."""
    first = window.since.strftime("%Y-%m-%d") if window.since else None
    last = window.until.strftime("%Y-%m-%d") if window.until else None
    journals, listed = _journals_then_files(root, first, last, exclude)
    if objstore.is_remote(root):  # read through pyarrow's S3 filesystem: no DuckDB extension to download
        objstore.register_duckdb(con)
    out = DatasetViews(journals=journals, listed=listed)
    present = []
    for table, columns, ts in (
        ("messages", [*MESSAGE_COLUMNS, "object_kind"], "ts"),
        ("exchanges", EXCHANGE_COLUMNS, "ts_start"),
        ("agent_cards", CARD_COLUMNS, "ts"),
    ):
        files = listed[table].files
        parts = []
        if files:
            parts.append(_scan_sql(con, files, columns, 0, root))
        pending = journals.tables[table]
        if pending:  # after every file, in the order they were journaled
            con.register(f"_{table}_journaled", _journaled(pending, table, columns, len(files)))
            parts.append(f"SELECT {', '.join(columns)}, pos FROM _{table}_journaled")
        if not parts:
            con.register(f"_{table}_empty", _arrow(pd.DataFrame(), table, columns))
            parts.append(f"SELECT *, NULL::BIGINT AS pos FROM _{table}_empty")
        else:
            present.append(table)
        where = _window_sql(scan_window(table, window), ts)
        name = view_name(table, window)
        if table == "messages":
            where += f" AND {AGENT_SAID}"
        source = " UNION ALL BY NAME ".join(f"({p})" for p in parts)
        calendar_view(con, name, f"SELECT * FROM ({source}) WHERE {where}", ts, columns)
        if table == "messages" and files:
            for group, lo, end, rows in _file_groups(files, chunk_rows, root):
                scan = _scan_sql(con, group, columns, lo, root)
                out.chunks.append((f"(SELECT * FROM ({scan}) WHERE {where})", lo << 40, end << 40))
                out.message_rows += rows
            if pending:
                out.chunks.append((f"(SELECT * FROM _messages_journaled WHERE {where})", len(files) << 40, None))
    said = [*MESSAGE_COLUMNS, "object_kind"]
    pushed = read_views(con, window)
    out.chunks = [(narrowed(s, "messages", window, said, pushed), lo, hi) for s, lo, hi in out.chunks]  # as `sightings`
    out.present = [t for t in TABLES if t in present]
    out.skipped = skipped_files(listed, journals)
    return out
