"""Read a dataset back: only the columns and date partitions asked for, any schema version."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.dataset as ds

from .schema import TABLES

PARTITIONING = ds.partitioning(pa.schema([("date", pa.string())]), flavor="hive")


def table_dataset(root: str | Path, table: str) -> ds.Dataset | None:
    """A pyarrow dataset over `root/<table>/date=*/part-*.parquet`, or None when the table has no files.

    Journals and temporary files start with `_` or `.` and are skipped. The explicit schema lets files
    written by earlier versions load (columns they lack come back null).
    """
    if table not in TABLES:
        raise ValueError(f"unknown table {table!r}; the tables are {', '.join(TABLES)}")
    path = Path(root) / table
    if not path.is_dir():
        return None
    schema = TABLES[table].append(pa.field("date", pa.string()))
    dataset = ds.dataset(path, format="parquet", partitioning=PARTITIONING, schema=schema)
    if not dataset.files:
        return None
    return dataset


def read_table(
    root: str | Path,
    table: str,
    columns: list[str] | None = None,
    filter: ds.Expression | None = None,
) -> pa.Table:
    dataset = table_dataset(root, table)
    if dataset is None:
        schema = TABLES[table]
        if columns is not None:
            schema = pa.schema([schema.field(c) if c != "date" else pa.field("date", pa.string()) for c in columns])
        return schema.empty_table()
    return dataset.to_table(columns=columns, filter=filter)


def load(
    root: str | Path,
    table: str,
    columns: list[str] | None = None,
    filter: ds.Expression | None = None,
) -> pd.DataFrame:
    """A pandas frame of one table; enums come back as categoricals, timestamps as UTC datetimes."""
    return read_table(root, table, columns, filter).to_pandas()


def tables_present(root: str | Path) -> list[str]:
    return [t for t in TABLES if table_dataset(root, t) is not None]
