"""What the engine reads, as DuckDB sources: the dataset's Parquet files (with each row's position, in runs of
files) and the rows still in its journals, narrowed to a window; frames in memory as Arrow with the dataset's types."""

from __future__ import annotations

import re
from collections.abc import Iterator
from functools import lru_cache
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from ..store import objstore
from ..store.changes import DatasetChanged, changed_files, files_listed, settle
from ..store.reader import Journals, TableFiles, file_layout, read_journals, read_table, table_files
from ..store.schema import TABLES
from .facts_sql import REPLY_COLUMNS, REPLY_VALUES
from .load import MESSAGE_COLUMNS, Window


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _window_sql(window: Window, ts_column: str) -> str:
    """The window as a predicate on rows; whole `date=` partitions outside it never reach the scan (`table_files`)."""
    parts = []
    if window.agents:
        parts.append(f"agent IN ({', '.join(_quote(a) for a in window.agents)})")
    if window.since is not None:
        parts.append(f"{ts_column} >= TIMESTAMPTZ {_quote(window.since.isoformat())}")
    if window.until is not None:
        parts.append(f"{ts_column} < TIMESTAMPTZ {_quote(window.until.isoformat())}")
    return " AND ".join(parts) or "TRUE"


def _scan_names(root: str | Path, files: list[str]) -> list[str]:
    """The names under which DuckDB reads a dataset's files: their paths, or on object storage the names its
    pyarrow filesystem is registered under (objstore.register_duckdb)."""
    return [objstore.duckdb_path(f) for f in files] if objstore.is_remote(root) else files


def _scan_sql(
    con: duckdb.DuckDBPyConnection, files: list[str], columns: list[str], first: int = 0, root: str | Path = ""
) -> str:
    """The columns of some of a table's files (the `first`-th file of the table and the ones after it), with
    each row's position in the dataset: file, then row."""
    parts = []
    for start, run, alike in _runs(files):
        scan = _read_parquet(root, run, alike)
        try:
            found = {r[0]: r[1] for r in con.sql(f"DESCRIBE SELECT * FROM {scan}").fetchall()}
        except (duckdb.Error, OSError, ValueError) as e:
            _reraise(e, root, run)
        pos = f"((file_index::BIGINT + {first + start}) << 40) + file_row_number"
        parts.append(f"SELECT {typed_columns(found, columns)}, {pos} AS pos FROM {scan}")
    return parts[0] if len(parts) == 1 else "SELECT * FROM (" + " UNION ALL ".join(f"({p})" for p in parts) + ")"


def scan_of(root: str | Path, files: list[str]) -> str:
    """DuckDB's scan of these files of a table, by column name. Not Hive partitioning: its columns would come from
    every `key=value` folder of the path, the dataset's own location too (a dataset under `…/agent=x/` read `x` as
    every row's agent); the date a partition folder names is its rows' time, which they hold."""
    runs = [_read_parquet(root, run, alike) for _, run, alike in _runs(files)]
    return runs[0] if len(runs) == 1 else "(" + " UNION ALL BY NAME ".join(f"SELECT * FROM {r}" for r in runs) + ")"


def _read_parquet(root: str | Path, files: list[str], alike: bool) -> str:
    """read_parquet of files, by name; `alike`: files of the same columns, whose columns DuckDB takes from the
    first file alone, where unioning them by name opens every file each time a query naming the scan is bound (a
    view over 10,000 files took 5.8 GB and 19 s to define)."""
    listed = ", ".join(_quote(literal_pattern(f)) for f in _scan_names(root, files))
    return f"read_parquet([{listed}], union_by_name = {str(not alike).lower()}, hive_partitioning = false)"


def _runs(files: list[str]) -> list[tuple[int, list[str], bool]]:
    """The files in runs of consecutive ones with the same columns (as their listing found them:
    reader.file_layout), each with the index of its first and whether its files are known to be alike (not when
    the listing did not see them: one run, unioned by name)."""
    keys = [file_layout(f) for f in files]
    if not files or any(k is None for k in keys):
        return [(0, files, False)]
    out: list[tuple[int, list[str], bool]] = []
    start = 0
    for i in range(1, len(files) + 1):
        if i == len(files) or keys[i][0] != keys[start][0]:  # type: ignore[index]
            out.append((start, files[start:i], True))
            start = i
    return out


_PATTERN = re.compile(r"([*?\[])")


def literal_pattern(name: str) -> str:
    """A file name as a DuckDB file pattern that matches that file alone: read_parquet takes `*`, `?` and `[`
    anywhere in a name it is given for a pattern (a dataset under `/data/run[1]` read `/data/run1`'s files, one
    under `/data/a*` every `a…` folder's), each of them in brackets stands for itself."""
    return _PATTERN.sub(r"[\1]", name)


def _reraise(e: Exception, root: str | Path, files: list[str]) -> None:
    """Raise what `e`, an error reading `files`, means (store.changes.settle: the dataset changed while it was
    read, or its storage went away), or `e` itself."""
    settled = settle(e, root, files_listed(files))
    if settled is e:
        raise e
    raise settled from e


def typed_columns(found: dict[str, str], columns: list[str]) -> str:
    """The select list giving each column its type in the dataset, whatever type the files hold (`found`: the
    scan's column types, as DESCRIBE names them): a column the files lack is a null of that type (older files; a
    list column the facts unnest must be a list even then), one of another type (another writer's: int64, ns or
    naive times, a float of whole numbers; `reader.foreign_reason` let through only files whose values convert)
    is cast."""
    types = _duck_types()
    out = []
    for c in columns:
        want = types.get(c)
        if c not in found:
            out.append(f"NULL::{want} AS {c}" if want else f"NULL AS {c}")
        elif want is None or found[c] == want:
            out.append(c)
        else:
            out.append(f"CAST({c} AS {want}) AS {c}")
    return ", ".join(out)


@lru_cache(maxsize=1)
def _duck_types() -> dict[str, str]:
    """Each stored column's DuckDB type, as DuckDB reads the dataset's own schema (a column name has one type in
    every table)."""
    con = duckdb.connect()
    try:
        out: dict[str, str] = {}
        for schema in TABLES.values():
            plain = pa.schema([pa.field(f.name, _plain_type(f.type)) for f in schema])
            rel = con.from_arrow(plain.empty_table())
            out.update(zip(rel.columns, (str(t) for t in rel.dtypes), strict=True))
        return out
    finally:
        con.close()


def _file_groups(files: list[str], chunk_rows: int, root: str | Path = "") -> Iterator[tuple[list[str], int, int, int]]:
    """Runs of consecutive files holding about `chunk_rows` rows each (a larger file is a run of its own):
    (files, index of the first, index after the last, rows)."""
    fs = objstore.parse(str(root)).fs if objstore.is_remote(root) else None
    start, rows = 0, 0
    for i, f in enumerate(files):
        layout = file_layout(f)  # the rows its listing read from its footer; else read here
        try:
            n = layout[1] if layout is not None else pq.read_metadata(f, filesystem=fs).num_rows
        except (OSError, ValueError) as e:  # (pyarrow's errors on a file are both)
            _reraise(e, root, [f])
        if rows and rows + n > chunk_rows:
            yield files[start:i], start, i, rows
            start, rows = i, 0
        rows += n
    if start < len(files):
        yield files[start:], start, len(files), rows


def _journals_then_files(
    root: str | Path, first: str | None, last: str | None, exclude: dict[str, str] | None = None
) -> tuple[Journals, dict[str, TableFiles]]:
    """The journals, then the Parquet files. In this order a roll-over between the two shows its rows twice
    (once journaled, once rolled; the facts count each message and exchange once) rather than not at all; a
    journal that vanished after being read means a roll-over is under way, and the reading starts again (one that
    vanished before it was read was rolled into a file listed after it: its rows are read once)."""
    for _ in range(5):
        journals = read_journals(root)
        listed = {t: table_files(root, t, first, last) for t in TABLES}
        if all(Path(p).exists() for p in journals.paths):
            break
    # a file changed since it was listed is found now (each file's size and time again; on object storage one
    # listing per table), as when every file was opened to learn its columns; the scans open a run's first alone
    changed = changed_files(root, listed)
    if changed:
        raise DatasetChanged(root, changed)
    for found in listed.values():  # files found damaged inside (`exclude`) are left out as foreign ones are
        found.foreign += [(f, exclude[f]) for f in found.files if exclude and f in exclude]
        found.files = [f for f in found.files if not exclude or f not in exclude]
    return journals, listed


def _journaled(tables: list[pa.Table], table: str, columns: list[str], after: int) -> pa.Table:
    """Journaled batches with the table's plain types and a position after the `after` Parquet files."""
    schema = pa.schema([pa.field(c, _plain_type(TABLES[table].field(c).type)) for c in columns])
    out, positions = [], []
    for i, t in enumerate(tables):
        have = set(t.column_names)  # a journal of an earlier version may lack columns: null, as in old files
        arrays = [t[c] if c in have else pa.nulls(t.num_rows, f.type) for c, f in zip(columns, schema, strict=True)]
        out.append(pa.Table.from_arrays(arrays, names=columns).cast(schema))
        positions.append(pa.array(((after + i) << 40) + np.arange(t.num_rows, dtype=np.int64)))
    return pa.concat_tables(out).append_column("pos", pa.chunked_array(positions, pa.int64()))


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


_GAP_REASONS = {
    "recorder_backlog_full": "the recording worker was behind and the proxy's backlog full",
    "worker_down": "the recording worker was down",
    "worker_died": "the recording worker died with them in flight",
    "recorder_stopped": "the recorder stopped (or its script was reloaded) while they waited for their response",
}


def capture_gap_notes(root: str | Path, files: list[str], journaled: list[pa.Table]) -> list[str]:
    """What a reader must know about records the recorder lost (the `capture_gaps` table): how many, why and
    when, so that no figure of that period reads as complete."""
    if not files and not journaled:
        return []
    parts = [read_table(root, "capture_gaps", files=files)] if files else []
    columns = ["reason", "records", "ts_from", "ts_to"]
    parts += journaled
    schema = pa.schema([TABLES["capture_gaps"].field(c) for c in columns])
    frame = pa.concat_tables([p.select(columns).cast(schema) for p in parts]).to_pandas()
    notes = []
    for reason, group in frame.groupby(frame["reason"].astype(str), sort=True):
        first, last = group["ts_from"].min(), group["ts_to"].max()
        when = "" if pd.isna(first) else f" between {first:%Y-%m-%d %H:%M:%S} and {last:%Y-%m-%d %H:%M:%S} UTC"
        why = _GAP_REASONS.get(reason, reason)
        notes.append(
            f"the recorder lost {int(group['records'].sum())} capture records{when} ({why}): "
            "figures for that period undercount"
        )
    return notes
