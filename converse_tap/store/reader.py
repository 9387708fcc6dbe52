"""Read a dataset back: only the columns and date partitions asked for, any schema version, the rows still in
journals, and never a file that is not one of ours."""

from __future__ import annotations

import datetime as dt
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from . import objstore
from .changes import StorageLost, local_stamp, object_stamp, storage_error
from .compat import narrowing, values_problem
from .files import ForeignJournal, file_kind, open_regular, schema_problem
from .journals import Journals as Journals  # re-exported: readers name the journals from here
from .journals import read_journals as read_journals
from .journals import writer_alive as writer_alive
from .schema import TABLES

PARTITIONING = ds.partitioning(pa.schema([("date", pa.string())]), flavor="hive")
_PARTITION = re.compile(r"date=(\d{4}-\d{2}-\d{2})")


@dataclass
class TableFiles:
    """A table's Parquet files in the date partitions asked for: the readable ones, and the foreign ones (a
    path and why it is not one of ours) that a reader skips."""

    files: list[str] = field(default_factory=list)
    foreign: list[tuple[str, str]] = field(default_factory=list)
    stamps: dict[str, tuple[int, int]] = field(default_factory=dict)  # each file's size and time when listed


def foreign_reason(path: str | Path, table: str, remote: objstore.Remote | None = None) -> str | None:
    """Why the file at `path` (an object of `remote`, when given) is not a Parquet file of `table` (None when it
    is one)."""
    try:
        if remote is not None:
            with remote.fs.open_input_file(str(path)) as f:  # (its size asked for as it opens: one request)
                size = f.size()
                if size == 0:
                    return "an empty file"
                return _parquet_reason(f, size, table, str(path))
        try:
            fd = open_regular(Path(path))  # never a FIFO, device or symlink
        except FileNotFoundError:
            return GONE
        except PermissionError as e:
            return f"unreadable ({e.strerror}): give the reader permission to read it, or move it out of the dataset"
        with os.fdopen(fd, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            if size == 0:
                return "an empty file"
            return _parquet_reason(f, size, table, str(path))
    except ForeignJournal as e:
        return str(e)
    except FileNotFoundError:
        return GONE
    except (OSError, pa.ArrowException) as e:
        if remote is not None and storage_error(e):  # the storage failing says nothing of the file
            raise StorageLost(objstore.SCHEME + str(path), e) from e
        return "not a Parquet file"


GONE = "removed while the dataset was being read: run the command again"
PATTERN_CHARS = frozenset("*?[")  # what DuckDB's read_parquet takes for a pattern of file names, in a name
PATTERN_NAME = (
    "a name with *, ? or [, which SQL readers take for a pattern matching other files: rename it without them"
)


# what the footer of each file found to be a table's says (its columns and rows), by the path it was listed under:
# readers scan runs of files alike without opening every file to learn their columns (file_layout)
_LAYOUTS: dict[str, tuple[str, int]] = {}
_SCHEMAS: dict[str, str] = {}  # each distinct schema's key, once
MAX_LAYOUTS = 4_000_000  # forgotten beyond this (a long-lived process listing ever new files): read again


def file_layout(path: str) -> tuple[str, int] | None:
    """The columns (a key equal for files of the same column names and types, in any order) and the number of
    rows of a file the last listing (`table_files`) found to be a table's; None for a file it did not."""
    return _LAYOUTS.get(path)


def _remember(path: str, schema: pa.Schema, rows: int) -> None:
    key = ",".join(sorted(f"{f.name}:{f.type}" for f in schema))
    if len(_LAYOUTS) >= MAX_LAYOUTS:
        _LAYOUTS.clear()
    _LAYOUTS[path] = (_SCHEMAS.setdefault(key, key), rows)


def _parquet_reason(f: Any, size: int, table: str, path: str) -> str | None:
    """Why the open Parquet file `f` is not one of `table`'s: its footer too big, its schema another, or values
    of a column in a type of another writer that do not convert to the table's (compat.values_problem). A file
    that is one is remembered (`file_layout`)."""
    _LAYOUTS.pop(path, None)
    meta = _footer(f, size)
    if isinstance(meta, str):
        return meta
    schema = meta.schema.to_arrow_schema()
    problem = schema_problem(schema, table, checked=True)
    if problem is not None:
        return f"Parquet of {problem}" if problem.startswith("another") else problem
    coarse = _coarse_times(meta, schema, table)
    if coarse is not None:
        return coarse
    ours = TABLES[table]
    wide = {c.name: ours.field(c.name).type for c in schema if c.name in ours.names}
    wide = {name: t for name, t in wide.items() if narrowing(schema.field(name).type, t)}
    try:
        problem = values_problem(pq.ParquetFile(f, metadata=meta), wide) if wide else None
    except (OSError, pa.ArrowException) as e:
        return f"damaged inside ({str(e).strip().splitlines()[0]})"
    if problem is None:
        _remember(path, schema, meta.num_rows)
    return problem


MAX_FOOTER = 16 << 20  # a footer larger than this (thousands of row groups) is no file a writer of ours makes


FOOTER_READ = 1 << 16  # read at once from a file's end: a writer's footer fits (on object storage, one request)


def _footer(f: Any, size: int) -> pq.FileMetaData | str:
    """A Parquet file's metadata, from one read of its end when the footer is in it; or why it is not read: a
    footer too large to read (its metadata alone would take more memory than a report may: 85 MB of footer took
    2.7 GB), as its last 8 bytes say."""
    if size < 12:
        return pq.read_metadata(f)  # too short for Parquet: this says so
    n = min(size, FOOTER_READ)
    f.seek(size - n)
    tail = f.read(n)
    length = int.from_bytes(tail[-8:-4], "little")
    if tail[-4:] == b"PAR1" and length > MAX_FOOTER:
        return f"a Parquet footer of {length >> 20} MiB (thousands of row groups), more than a reader may hold"
    f.seek(0)
    if tail[-4:] == b"PAR1" and length + 8 <= n:
        return pq.read_metadata(pa.BufferReader(tail))
    return pq.read_metadata(f)


_MICROS = {"s": 1_000_000, "ms": 1_000}


def _coarse_times(meta: pq.FileMetaData, schema: pa.Schema, table: str) -> str | None:
    """Times in seconds or milliseconds become microseconds when read, which overflows beyond ±292,000 years: a file
    with such times must show, in its statistics, that every value converts (one value would stop every reader)."""
    columns = {meta.schema.column(i).name: i for i in range(meta.num_columns)}
    for f in schema:
        if not (pa.types.is_timestamp(f.type) and f.type.unit in _MICROS and f.name in TABLES[table].names):
            continue
        for g in range(meta.num_row_groups):
            stats = meta.row_group(g).column(columns[f.name]).statistics
            if stats is None or not stats.has_min_max:
                return f"{f.name} in {f.type.unit} without the statistics to show it converts to microseconds"
            if max(abs(stats.min_raw), abs(stats.max_raw)) * _MICROS[f.type.unit] > 2**63 - 1:
                return f"{f.name} holds times beyond what microseconds can hold"
    return None


def table_files(root: str | Path, table: str, first_day: str | None = None, last_day: str | None = None) -> TableFiles:
    """`root/<table>/date=*/*.parquet` within [first_day, last_day] (inclusive `YYYY-MM-DD` bounds; whole
    partitions outside are never opened). Names starting with `_` or `.` (journals, files being written) are not
    data; every other file is checked and, when it is not one of this table's, listed as foreign."""
    if table not in TABLES:
        raise ValueError(f"unknown table {table!r}; the tables are {', '.join(TABLES)}")
    out = TableFiles()
    if objstore.is_remote(root):
        return _remote_table_files(objstore.parse(str(root)), table, first_day, last_day)
    base = Path(root) / table
    if _kind(base, out) != "a directory":
        return out
    for folder in _entries(base):
        if folder.name.startswith(("_", ".")):
            continue
        kind = _kind(folder, out)
        if kind is None:
            continue
        day = _partition_day(folder.name)
        if kind != "a directory" or day is None:
            out.foreign.append((str(folder), "not a date= partition" + ("" if kind == "a directory" else f" ({kind})")))
            continue
        if (first_day is not None and day < first_day) or (last_day is not None and day > last_day):
            continue
        for f in _entries(folder):
            if f.name.startswith(("_", ".")):
                continue
            reason = PATTERN_NAME if PATTERN_CHARS & set(f.name) else foreign_reason(f, table)
            if reason is not None:
                out.foreign.append((str(f), reason))
            elif (stamp := local_stamp(f)) is not None:  # (else gone since it was checked: as if never listed)
                out.files.append(str(f))
                out.stamps[str(f)] = stamp
    return out


def _entries(folder: Path) -> list[Path]:
    """A folder's entries, in name order; none when it was removed since it was seen."""
    try:
        return sorted(folder.iterdir())
    except FileNotFoundError:
        return []


def _kind(path: Path, out: TableFiles) -> str | None:
    """What `path` is, not following a symlink (a writer makes none: one may point outside the dataset or at
    itself, and is listed as foreign); None when it is gone."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(mode):
        out.foreign.append((str(path), "a symbolic link"))
        return None
    return file_kind(mode)


def _partition_day(name: str) -> str | None:
    """The day of a `date=YYYY-MM-DD` partition folder, None for any other name."""
    m = _PARTITION.fullmatch(name)
    if m is None:
        return None
    try:
        dt.date.fromisoformat(m.group(1))
    except ValueError:
        return None
    return m.group(1)


def _remote_table_files(remote: objstore.Remote, table: str, first_day: str | None, last_day: str | None) -> TableFiles:
    """`table_files` on object storage: the files are pyarrow paths (`bucket/prefix/table/date=…/part-….parquet`);
    foreign ones are named by their s3:// address."""
    out = TableFiles()
    base = remote.path(table) + "/"
    try:
        infos = objstore.list_files(remote, table)
    except OSError as e:
        if storage_error(e) and not isinstance(e, StorageLost):
            raise StorageLost(remote.url, e) from e
        raise
    for info in infos:
        parts = info.path.removeprefix(base).split("/")
        if parts[0].startswith(("_", ".")) or parts[-1].startswith(("_", ".")):
            continue
        where = objstore.SCHEME + info.path
        day = _partition_day(parts[0])
        if len(parts) == 1 or day is None:
            out.foreign.append((where, "not in a date= partition"))
            continue
        if (first_day is not None and day < first_day) or (last_day is not None and day > last_day):
            continue
        if len(parts) > 2:
            reason: str | None = "a directory"
        elif PATTERN_CHARS & set(parts[-1]):
            reason = PATTERN_NAME
        else:
            reason = foreign_reason(info.path, table, remote)
        if reason is None:
            out.files.append(info.path)
            out.stamps[info.path] = object_stamp(info)
        else:
            out.foreign.append((where, reason))
    return out


def table_dataset(root: str | Path, table: str, files: list[str] | None = None) -> ds.FileSystemDataset | None:
    """A pyarrow dataset over the table's readable files (`table_files`, or `files`), or None without any.

    The explicit schema lets files written by earlier versions load (columns they lack come back null).
    """
    if files is None:
        files = table_files(root, table).files
    if not files:
        return None
    schema = TABLES[table].append(pa.field("date", pa.string()))
    if objstore.is_remote(root):
        remote = objstore.parse(str(root))
        return ds.dataset(
            files,
            format="parquet",
            partitioning=PARTITIONING,
            partition_base_dir=remote.path(table),
            schema=schema,
            filesystem=remote.fs,
        )
    return ds.dataset(
        files, format="parquet", partitioning=PARTITIONING, partition_base_dir=str(Path(root) / table), schema=schema
    )


def read_table(
    root: str | Path,
    table: str,
    columns: list[str] | None = None,
    filter: ds.Expression | None = None,
    files: list[str] | None = None,
) -> pa.Table:
    dataset = table_dataset(root, table, files)
    if dataset is None:
        schema = TABLES[table]
        if columns is not None:
            schema = pa.schema([schema.field(c) if c != "date" else pa.field("date", pa.string()) for c in columns])
        return schema.empty_table()
    try:
        return dataset.to_table(columns=columns, filter=filter)
    except pa.ArrowInvalid:  # a file of another writer with times finer than microseconds: pyarrow's cast refuses
        if len(dataset.files) < 2:
            return _cut_to_micros(dataset, _base_dir(root, table), columns, filter)
    parts = []  # file by file: only the one with such times is read as `_cut_to_micros` reads it
    for path in dataset.files:
        one = ds.dataset(
            [path],
            format="parquet",
            partitioning=PARTITIONING,
            schema=dataset.schema,
            partition_base_dir=_base_dir(root, table),
            filesystem=dataset.filesystem,
        )
        try:
            parts.append(one.to_table(columns=columns, filter=filter))
        except pa.ArrowInvalid:
            parts.append(_cut_to_micros(one, _base_dir(root, table), columns, filter))
    return pa.concat_tables(parts)


def _base_dir(root: str | Path, table: str) -> str:
    return objstore.parse(str(root)).path(table) if objstore.is_remote(root) else str(Path(root) / table)


def _cut_to_micros(
    dataset: ds.FileSystemDataset, base_dir: str, columns: list[str] | None, filter: ds.Expression | None
) -> pa.Table:
    """The rows of a one-file dataset whose times are finer than microseconds (pandas writes nanoseconds), cut
    to microseconds as DuckDB reads them. Raises what the reading raises for any other cause."""
    physical = pq.read_schema(dataset.files[0], filesystem=dataset.filesystem)
    fine = {f.name: f.type for f in physical if f.name in dataset.schema.names and pa.types.is_timestamp(f.type)}
    if not any(t.unit == "ns" for t in fine.values()):
        return dataset.to_table(columns=columns, filter=filter)  # raises again: not this
    schema = pa.schema([pa.field(f.name, fine.get(f.name, f.type)) for f in dataset.schema])
    as_written = ds.dataset(
        dataset.files,
        format="parquet",
        partitioning=PARTITIONING,
        schema=schema,
        partition_base_dir=base_dir,
        filesystem=dataset.filesystem,
    )
    names = columns if columns is not None else dataset.schema.names
    wanted = {
        c: ds.field(c).cast(dataset.schema.field(c).type, safe=False) if c in fine else ds.field(c) for c in names
    }
    return as_written.to_table(columns=wanted, filter=filter).cast(pa.schema([dataset.schema.field(c) for c in names]))


def load(
    root: str | Path,
    table: str,
    columns: list[str] | None = None,
    filter: ds.Expression | None = None,
) -> pd.DataFrame:
    """A pandas frame of one table; enums come back as categoricals, timestamps as UTC datetimes."""
    return read_table(root, table, columns, filter).to_pandas()


def damaged_files(root: str | Path, first_day: str | None = None, last_day: str | None = None) -> dict[str, str]:
    """The dataset's Parquet files (of the partitions asked for) whose footer reads but whose pages do not, and
    why: every file read through once, in batches (for when a reader failed; local datasets only)."""
    if objstore.is_remote(root):
        return {}
    out = {}
    for table in TABLES:
        for path in table_files(root, table, first_day, last_day).files:
            try:
                for _ in pq.ParquetFile(path).iter_batches(batch_size=65_536):
                    pass
            except (OSError, pa.ArrowException) as e:
                out[path] = f"damaged inside ({str(e).strip().splitlines()[0]})"
    return out


def tables_present(root: str | Path) -> list[str]:
    return [t for t in TABLES if table_files(root, t).files]
