"""Files of a dataset that other writers made from its rows: pandas (ints with nulls as floats, columns of None as
nulls, times in nanoseconds), Polars-like (large and view strings, large lists), Spark-like (int64, INT96 times, no
Arrow schema), DuckDB's COPY (naive nanosecond times, BIGINT), with columns reordered, added or missing. Each reads
as the same rows written by this version would, beside this version's own files; a file whose values do not fit
(an int64 beyond int32, a float with a fraction), or whose name SQL readers take for a pattern, is named and
skipped; a dataset stored under a `key=value` folder is not read as Hive partitions of that key."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from converse_tap.analysis.load import load_frames
from converse_tap.store.reader import PATTERN_NAME, table_files
from converse_tap.store.schema import TABLES
from tests.cli_helpers import invoke

TABLE_NAMES = ("exchanges", "messages", "agent_cards")


def _rows(sample: Path, table: str) -> pa.Table:
    """The sample's rows of `table` as new rows (other exchange and message ids), in the dataset's types."""
    (f,) = (sample / table).glob("date=*/*.parquet")
    t = pq.read_table(f, partitioning=None)
    for name in ("exchange_id", "message_id"):
        if name in t.column_names:
            i = t.schema.get_field_index(name)
            t = t.set_column(i, t.schema.field(name), pc.binary_join_element_wise("f-", t[name].cast(pa.string()), ""))
    return t.cast(TABLES[table])


def _retype(t: pa.Table, change: Callable[[pa.DataType], pa.DataType | None]) -> pa.Table:
    fields, columns = [], []
    for f, c in zip(t.schema, t.columns, strict=True):
        new = change(f.type)
        if new is not None:
            c = (c.cast(f.type.value_type) if pa.types.is_dictionary(f.type) else c).cast(new)
        fields.append(pa.field(f.name, new or f.type))
        columns.append(c)
    return pa.Table.from_arrays(columns, schema=pa.schema(fields))


def _pandas(t: pa.Table, path: Path) -> None:
    """pandas' round trip: ints with nulls become floats, a column of None a null column, times nanoseconds."""
    frame = t.to_pandas()
    for c in frame.columns:
        if isinstance(frame[c].dtype, pd.DatetimeTZDtype):
            frame[c] = frame[c].astype("datetime64[ns, UTC]") + pd.Timedelta(7, "ns")  # cut to microseconds
    frame.to_parquet(path)


def _polars_like(t: pa.Table, path: Path) -> None:
    def change(x: pa.DataType) -> pa.DataType | None:
        if pa.types.is_dictionary(x):
            return pa.large_string()
        if pa.types.is_string(x):
            return pa.string_view()
        if pa.types.is_list(x) and pa.types.is_string(x.value_type):
            return pa.large_list(pa.large_string())
        return None

    pq.write_table(_retype(t, change), path)


def _spark_like(t: pa.Table, path: Path) -> None:
    def change(x: pa.DataType) -> pa.DataType | None:
        if pa.types.is_dictionary(x):
            return pa.string()
        return pa.int64() if pa.types.is_integer(x) else None

    pq.write_table(_retype(t, change), path, use_deprecated_int96_timestamps=True, store_schema=False)


def _duckdb_copy(t: pa.Table, path: Path) -> None:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.register("t", t)
    select = ", ".join(
        f"CAST({f.name} AS TIMESTAMP_NS) AS {f.name}"
        if pa.types.is_timestamp(f.type)
        else f"CAST({f.name} AS BIGINT) AS {f.name}"
        if pa.types.is_int32(f.type)
        else f.name
        for f in t.schema
    )
    con.execute(f"COPY (SELECT {select} FROM t) TO '{path}' (FORMAT parquet)")
    con.close()


def _reordered_and_extra(t: pa.Table, path: Path) -> None:
    t = t.select(list(reversed(t.column_names)))
    t = t.append_column("written_by", pa.array(["etl"] * len(t))).append_column("date", pa.array(["x"] * len(t)))
    pq.write_table(t, path)


WRITERS = {
    "pandas": _pandas,
    "polars-like": _polars_like,
    "spark-like": _spark_like,
    "duckdb-copy": _duckdb_copy,
    "reordered-extra-columns": _reordered_and_extra,
}


def _with_rows(sample: Path, root: Path, write: Callable[[pa.Table, Path], None]) -> None:
    shutil.copytree(sample, root)
    for table in TABLE_NAMES:
        (folder,) = (root / table).glob("date=*")
        write(_rows(sample, table), folder / "part-f.parquet")


def _same(a: Path, b: Path, *args: str) -> str:
    ra, rb = invoke(*args[:1], str(a), *args[1:]), invoke(*args[:1], str(b), *args[1:])
    assert ra.exit_code == rb.exit_code == 0, ra.output + rb.output
    assert ra.stdout.replace(str(a), "D") == rb.stdout.replace(str(b), "D")
    return ra.stderr + rb.stderr


@pytest.mark.parametrize("writer", sorted(WRITERS))
def test_rows_another_writer_stored_read_as_the_same_rows_stored_by_this_version(
    sample: Path, tmp_path: Path, writer: str
) -> None:
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    _with_rows(sample, ours, lambda t, p: pq.write_table(t, p))
    _with_rows(sample, theirs, WRITERS[writer])
    for table in TABLE_NAMES:  # every file read, none skipped
        listed = table_files(theirs, table)
        assert not listed.foreign and len(listed.files) == 2, listed.foreign
    stderr = _same(ours, theirs, "report", "--format", "json")
    stderr += _same(ours, theirs, "agents", "--format", "json")
    stderr += _same(ours, theirs, "report", "--format", "json", "--since", "1999-12-31T23:00:01Z")
    stderr += _same(ours, theirs, "show", "c1")  # (the views of `sql` and `show` read the files as the report)
    every = "SELECT * EXCLUDE (exchange_id) FROM exchanges ORDER BY ts_start, exchange_id"
    stderr += _same(ours, theirs, "sql", every, "--format", "json")
    assert "warning" not in stderr
    rep = json.loads(invoke("report", str(theirs), "--format", "json").stdout)
    assert rep["dataset"]["exchanges"] == 18  # the sample's 9 and their 9
    q = "SELECT (SELECT count(*) FROM exchanges WHERE exchange_id LIKE 'f-%') AS e, "
    q += "(SELECT count(*) FROM messages WHERE exchange_id LIKE 'f-%') AS m"
    r = invoke("sql", str(theirs), q, "--format", "csv")
    assert (r.exit_code, r.stdout) == (0, "e,m\n9,16\n"), r.output
    a, b = load_frames(ours), load_frames(theirs)
    for name in TABLE_NAMES:
        pd.testing.assert_frame_equal(getattr(a, name), getattr(b, name), check_categorical=False)


def test_a_file_without_some_columns_reads_them_as_null(sample: Path, tmp_path: Path) -> None:
    """A file that lacks list and text columns (an export of some columns): they read as nulls, and the facts
    that unnest `anomalies` still run (they stopped at a NULL of no type: 'UNNEST requires a single list')."""
    ours, theirs = tmp_path / "ours", tmp_path / "theirs"
    gone = ("anomalies", "url", "text", "envelope_json", "extensions")

    def nulled(t: pa.Table, path: Path) -> None:
        for name in gone:
            if name in t.column_names:
                i = t.schema.get_field_index(name)
                t = t.set_column(i, t.schema.field(name), pa.nulls(len(t), t.schema.field(name).type))
        pq.write_table(t, path)

    def dropped(t: pa.Table, path: Path) -> None:
        pq.write_table(t.drop_columns([c for c in gone if c in t.column_names]), path)

    for root, write in ((ours, nulled), (theirs, dropped)):
        root.mkdir()
        for table in TABLE_NAMES:
            folder = root / table / "date=1999-12-31"
            folder.mkdir(parents=True)
            write(_rows(sample, table), folder / "part-f.parquet")
    assert "warning" not in _same(ours, theirs, "report", "--format", "json")
    _same(ours, theirs, "show", "c1")


def _int64_beyond_int32(t: pa.Table) -> pa.Table:
    i = t.schema.get_field_index("seq")
    return t.set_column(i, pa.field("seq", pa.int64()), pc.add(t["seq"].cast(pa.int64()), 2**40))


def _float_with_fraction(t: pa.Table) -> pa.Table:
    i = t.schema.get_field_index("seq")
    return t.set_column(i, pa.field("seq", pa.float64()), pc.add(t["seq"].cast(pa.float64()), 0.5))


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (_int64_beyond_int32, "seq holds values that are not int32 ("),
        (_float_with_fraction, "seq holds values that are not int32 ("),
    ],
)
def test_a_file_whose_values_do_not_fit_is_named_and_skipped(
    sample: Path, tmp_path: Path, change: Callable[[pa.Table], pa.Table], why: str
) -> None:
    root = tmp_path / "data"
    shutil.copytree(sample, root)
    (folder,) = (root / "messages").glob("date=*")
    bad = folder / "part-f.parquet"
    pq.write_table(change(_rows(sample, "messages")), bad, row_group_size=5)
    (listed,) = table_files(root, "messages").foreign
    assert listed[0] == str(bad) and listed[1].startswith(why), listed
    r = invoke("report", str(root), "--format", "json")
    assert r.exit_code == 0 and f"warning: skipped {bad}: {why}" in r.stderr
    _same_as_sample = invoke("report", str(sample), "--format", "json")
    assert json.loads(r.stdout)["coverage"] == json.loads(_same_as_sample.stdout)["coverage"]
    assert load_frames(root).messages.shape == load_frames(sample).messages.shape


def test_a_file_named_like_a_pattern_is_skipped_not_expanded(sample: Path, tmp_path: Path) -> None:
    """`part-*.parquet` beside a symbolic link to rows outside the dataset: SQL readers took the name for a
    pattern, matching every file of the folder, the link (listed as foreign) and the file itself included."""
    root = tmp_path / "data"
    shutil.copytree(sample, root)
    (good,) = (root / "exchanges").glob("date=*/*.parquet")
    pq.write_table(_rows(sample, "exchanges"), tmp_path / "outside.parquet")
    (good.parent / "link.parquet").symlink_to(tmp_path / "outside.parquet")
    names = [good.parent / "part-*.parquet", good.parent / "part-?.parquet", good.parent / "part-[ab].parquet"]
    for name in names:
        shutil.copy(good, name)
    listed = table_files(root, "exchanges")
    assert listed.files == [str(good)]
    assert {(str(n), PATTERN_NAME) for n in names} <= set(listed.foreign)
    q = "SELECT count(*) AS n, count(*) FILTER (WHERE exchange_id LIKE 'f-%') AS outside FROM exchanges"
    r = invoke("sql", str(root), q, "--format", "csv")
    assert (r.exit_code, r.stdout) == (0, "n,outside\n9,0\n"), r.output
    assert f"warning: skipped {names[0]}: {PATTERN_NAME}" in r.stderr
    r = invoke("report", str(root), "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout)["dataset"]["exchanges"] == 9


def test_a_dataset_under_a_key_value_folder_keeps_its_own_columns(sample: Path, tmp_path: Path) -> None:
    """A dataset kept under `…/agent=billing/source=lake/`: DuckDB's Hive partitioning took each such folder of
    the path for a column, and every row's agent read `billing`, every card's source `lake`."""
    root = tmp_path / "agent=billing" / "source=lake" / "data"
    shutil.copytree(sample, root)
    _same(sample, root, "agents", "--format", "json")
    _same(sample, root, "report", "--format", "json")
    r = invoke("agents", str(root), "--format", "json")
    assert "billing" not in r.stdout and "lake" not in r.stdout
    _same(sample, root, "sql", "SELECT DISTINCT agent FROM exchanges ORDER BY agent", "--format", "csv")
