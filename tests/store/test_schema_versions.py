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
