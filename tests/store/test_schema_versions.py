"""Datasets written by earlier versions stay readable: tests/fixtures/dataset-v1 was written by schema version 1
and is never regenerated."""

from pathlib import Path

import pyarrow.parquet as pq

from converse_tap.analysis import build_report, load_frames
from converse_tap.store.reader import load
from converse_tap.store.schema import METADATA_KEY, TABLES

V1 = Path(__file__).parents[1] / "fixtures" / "dataset-v1"


def test_the_v1_fixture_is_version_1() -> None:
    for f in V1.rglob("*.parquet"):
        assert pq.read_schema(f).metadata[METADATA_KEY] == b"1"


def test_v1_dataset_loads_with_every_current_column() -> None:
    for table, schema in TABLES.items():
        frame = load(V1, table)
        assert set(schema.names) <= set(frame.columns)
        assert len(frame) > 0 or table == "capture_gaps"  # a recorder that lost nothing writes no such rows


def test_v1_dataset_reports_what_it_reported_when_written() -> None:
    report = build_report(load_frames(V1))
    assert report["coverage"]["turns_assessed"] == 3
    assert report["authors"]["by_author"] == {"agent": 6, "human": 1}
    assert (report["routines"]["completed"], report["routines"]["abandoned"]) == (1, 1)


def _as_newer(src: Path, dst: Path, rename: dict[str, str] | None = None, extra: bool = False) -> None:
    """The v1 fixture copied, its messages files rewritten as a converse-tap of schema version 99 would write them:
    a column renamed, or one added."""
    import shutil

    import pyarrow as pa

    shutil.copytree(src, dst)
    for f in (dst / "messages").rglob("*.parquet"):
        t = pq.read_table(f)
        if rename:
            t = t.rename_columns([rename.get(n, n) for n in t.column_names])
        if extra:
            t = t.append_column("a_later_column", pa.array(["x"] * len(t)))
        pq.write_table(t.replace_schema_metadata({METADATA_KEY: b"99"}), f)


def test_a_file_of_a_newer_schema_that_renamed_a_column_is_refused_saying_to_upgrade(tmp_path: Path) -> None:
    """Read as if older than the column, `routine_status` renamed by a later version came out all null: the report
    said "0 instances", exit 0, silently wrong. The file is skipped, saying why and what to do."""
    from tests.cli_helpers import invoke

    _as_newer(V1, tmp_path / "d", rename={"routine_status": "routine_state"})
    result = invoke("report", str(tmp_path / "d"), "--format", "json")
    assert "upgrade converse-tap to read it" in result.stderr and "routine_status" in result.stderr
    assert "schema version 99" in result.stderr
    assert result.exit_code == 3  # no messages file left to read: nothing measured, not a report of zeros


def test_a_file_of_a_newer_schema_holding_every_column_of_ours_is_read(tmp_path: Path) -> None:
    _as_newer(V1, tmp_path / "d", extra=True)
    report = build_report(load_frames(tmp_path / "d"))
    assert report["coverage"]["turns_assessed"] == 3
    assert (report["routines"]["completed"], report["routines"]["abandoned"]) == (1, 1)
