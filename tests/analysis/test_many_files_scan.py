"""DuckDB's scans of a dataset of many files: a run of files alike is bound from its first file alone (unioning
every file by name opened all of them each time a query naming the scan was bound: 5.8 GB and 19 s to define
the views over 10,000 files), and files of other columns, in runs, read as one scan did, in the dataset's order."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pyarrow.parquet as pq

from converse_tap.analysis.drill import open_views
from converse_tap.analysis.sources import _scan_sql, scan_of
from converse_tap.store.reader import table_files
from tests.golden.sample import build_sample


def _copies(root: Path, table: str, days: list[str]) -> Path:
    """The sample's one file of `table` copied into each day's partition under a name of its own."""
    (src,) = sorted((root / table).glob("date=*/part-*.parquet"))
    for i, day in enumerate(days):
        folder = root / table / f"date={day}"
        folder.mkdir(exist_ok=True)
        shutil.copy(src, folder / f"part-17966470{i:05d}-copy-{i}-0.parquet")
    return src


def test_binding_a_scan_of_files_alike_opens_only_the_first(tmp_path: Path) -> None:
    root = tmp_path / "data"
    build_sample(root)
    _copies(root, "messages", ["2000-01-01", "2000-01-02", "2000-01-03"])
    files = table_files(root, "messages").files
    assert len(files) == 4
    for path in files[1:]:  # spoiled after being listed: a bind that opens them fails
        Path(path).write_bytes(b"not parquet at all")
    con = duckdb.connect()
    described = con.sql(f"DESCRIBE SELECT * FROM {scan_of(root, files)}").fetchall()
    assert "message_id" in {r[0] for r in described}
    con.execute(f"CREATE VIEW m AS {_scan_sql(con, files, ['message_id', 'ts'], 0, root)}")
    con.execute("CREATE VIEW n AS SELECT * FROM m")  # (each view over it binds the scan again)
    assert con.sql("SELECT count(*) FROM read_parquet(?)", params=[files[0]]).fetchall()[0][0] > 0


def test_files_of_other_columns_read_in_runs_in_the_datasets_order(tmp_path: Path) -> None:
    root = tmp_path / "data"
    build_sample(root)
    src = _copies(root, "messages", ["2000-01-01", "2000-01-03"])
    older = pq.read_table(src).drop_columns(["routine_name"])  # a file of a version before that column
    older = older.replace_schema_metadata(pq.read_schema(src).metadata)
    (root / "messages" / "date=2000-01-02").mkdir()
    pq.write_table(older, root / "messages" / "date=2000-01-02" / "part-1796647000009-old-9-0.parquet")
    files = table_files(root, "messages").files
    assert [Path(f).parent.name for f in files] == [
        "date=1999-12-31",
        "date=2000-01-01",
        "date=2000-01-02",
        "date=2000-01-03",
    ]
    con = duckdb.connect()
    columns = ["message_id", "routine_name"]
    got = con.sql(f"SELECT pos >> 40, message_id, routine_name FROM ({_scan_sql(con, files, columns, 5, root)})")
    rows = sorted(got.fetchall())
    listed = ", ".join(f"'{f}'" for f in files)
    expected = con.sql(
        f"SELECT file_index + 5, message_id, routine_name FROM read_parquet([{listed}], union_by_name = true)"
    ).fetchall()
    assert rows == sorted(expected)
    assert {r[0] for r in rows} == {5, 6, 7, 8}
    assert all(r[2] is None for r in rows if r[0] == 7)
    assert any(r[2] is not None for r in rows if r[0] != 7)
    union = con.sql(f"SELECT count(*), count(routine_name) FROM {scan_of(root, files)}").fetchall()[0]
    assert union == (len(rows), sum(r[2] is not None for r in rows))


def test_sql_over_files_of_two_versions_counts_every_row(tmp_path: Path) -> None:
    root = tmp_path / "data"
    build_sample(root)
    src = _copies(root, "exchanges", ["2000-01-01"])
    older = pq.read_table(src).drop_columns(["converse_requested"])
    (root / "exchanges" / "date=2000-01-02").mkdir()
    pq.write_table(older, root / "exchanges" / "date=2000-01-02" / "part-1796647000009-old-9-0.parquet")
    one = pq.read_metadata(src).num_rows
    with open_views(root, facts=()) as engine:
        (row,) = engine.con.sql("SELECT count(*), count(converse_requested) FROM exchanges").fetchall()
    assert row == (3 * one, 2 * one)
