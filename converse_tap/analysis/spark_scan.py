"""Spark's scan of a table's Parquet files on disk, each column in the dataset's type whatever the file's writer
(as `sources.typed_columns` gives DuckDB's scan), and each row's position (file, then row, as engine.py numbers
them).

Spark merges the files' schemas into one before it reads a row, and refuses to merge a column that two files hold
in two types (`int` and `double`, a time with and without a zone: CANNOT_MERGE_SCHEMAS), nor reads a time in
nanoseconds at all (PARQUET_TYPE_ILLEGAL), where DuckDB reads each file in its own types and casts them. So the
files are read in groups of one schema each (their Arrow schemas, from their footers), each group's columns cast
to the dataset's types (a time in nanoseconds read as its number, rounded to microseconds as DuckDB rounds it),
and the groups put together.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq

_GLOB = re.compile(r"([\\*?\[\]{}])")
NANOS_AS_LONG = "spark.sql.legacy.parquet.nanosAsLong"


def hadoop_literal(path: str) -> str:
    """A path as a Hadoop path pattern that matches that path alone: `spark.read` takes a path holding `*`, `?`,
    `[`, `]`, `{`, `}` or `\\` for a glob (a dataset under `/data/run[1]` read `/data/run1`'s files instead, one
    under `/data/br{a,b}ce` both `/data/brace`'s and `/data/brbce`'s), each of them after a backslash stands for
    itself."""
    return _GLOB.sub(r"\\\1", path)


def local(uri: str) -> str:
    """A local file's path (a URI's other files as they are)."""
    return unquote(urlparse(uri).path) if uri.startswith("file:") else uri


def key(uri: str) -> str:
    """A file's URI as `_metadata.file_path` spells it, without the scheme of a local file."""
    return re.sub("^file:/+", "/", uri)


def _nanos(t: pa.DataType | None) -> bool:
    return t is not None and pa.types.is_timestamp(t) and t.unit == "ns"


def typed(scan: Any, schema: Any, types: dict[str, pa.DataType]) -> list[Any]:
    """The select list giving each field of `schema` (Spark's) its type from `scan`, whose files hold the Arrow
    `types` (empty: unknown): a column the files lack is a null of that type."""
    from pyspark.sql import functions as F

    found = set(scan.columns)
    out = []
    for f in schema:
        if f.name not in found:
            out.append(F.lit(None).cast(f.dataType).alias(f.name))
        elif _nanos(types.get(f.name)):  # read as its number: to microseconds, half away from zero (DuckDB's)
            c = f"`{f.name}`"
            us = f"CASE WHEN {c} >= 0 THEN ({c} + 500) div 1000 ELSE ({c} - 500) div 1000 END"
            out.append(F.expr(f"timestamp_micros({us})").cast(f.dataType).alias(f.name))
        else:
            out.append(F.col(f.name).cast(f.dataType).alias(f.name))
    return out


def _groups(files: list[str], columns: list[str]) -> list[tuple[dict[str, pa.DataType], list[str]]]:
    """The files in groups of one schema (of `columns`), in the order each schema is first met."""
    groups: dict[tuple[tuple[str, str], ...], tuple[dict[str, pa.DataType], list[str]]] = {}
    for f in files:
        schema = pq.read_schema(f)
        types = {n: schema.field(n).type for n in columns if n in schema.names}
        groups.setdefault(tuple((n, str(t)) for n, t in types.items()), (types, []))[1].append(f)
    return list(groups.values())


def scan_files(spark: Any, reader: Any, root: str, table: str, files: list[str], schema: Any) -> Any:
    """The rows of `files` (the table's, listed in this order) with the columns of `schema` (Spark's, the
    dataset's types) and `pos`."""
    from pyspark.sql import functions as F

    base = str((Path(root) / table).resolve())  # (a directory, never a pattern)
    parts, keys = [], {}
    for types, group in _groups(files, schema.fieldNames()):
        # absolute (the JVM's working directory is not this process's), each a pattern of itself alone
        given = [hadoop_literal(str(Path(f).resolve())) for f in group]
        nanos = any(_nanos(t) for t in types.values())
        before = spark.conf.get(NANOS_AS_LONG, "false")
        if nanos:  # (the setting holds while the files' schema is read: their plan keeps it)
            spark.conf.set(NANOS_AS_LONG, "true")
        try:
            scan = reader.option("basePath", base).parquet(*given)
        finally:
            if nanos:
                spark.conf.set(NANOS_AS_LONG, before)
        keys.update({local(u): key(u) for u in scan.inputFiles()})
        parts.append(
            scan.select(
                *typed(scan, schema, types),
                F.regexp_replace(F.col("_metadata.file_path"), "^file:/+", "/").alias("_path"),
                F.col("_metadata.row_index").alias("_row"),
            )
        )
    union = parts[0]
    for other in parts[1:]:
        union = union.unionByName(other)
    # a row's position: its file's place in the listing, then its row
    index = spark.createDataFrame(
        [(keys[str(Path(f).resolve())], i) for i, f in enumerate(files)], "path string, i long"
    )
    union = union.join(F.broadcast(index), union["_path"] == index["path"])
    return union.select(*schema.fieldNames(), (F.shiftleft(F.col("i"), 40) + F.col("_row")).alias("pos"))
