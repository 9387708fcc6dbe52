"""Files and folders in a dataset's table directories that no writer made: a FIFO or a symlink named `*.parquet`
(pointing outside the dataset, or at itself), a partition folder that is a file, a symlink or has a name that is
no date, truncated Parquet. Each is listed as foreign with why, skipped by `report` with a warning naming it, and
never opened in a way that could block; the dataset's own rows are reported as before."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from converse_tap.store.reader import table_files
from tests.cli_helpers import invoke


def _other_rows(good: Path, dest: Path) -> None:
    """A valid exchanges file with rows the dataset does not hold (new exchange ids)."""
    t = pq.read_table(good)
    ids = t.column("exchange_id").to_pylist()
    new = pa.array([f"outside-{i}" for i in ids], t.schema.field("exchange_id").type)
    t = t.set_column(t.schema.get_field_index("exchange_id"), t.schema.field("exchange_id"), new)
    pq.write_table(t, dest)


def _fifo(part: Path, outside: Path) -> Path:
    os.mkfifo(part / "evil.parquet")
    return part / "evil.parquet"


def _symlink_out(part: Path, outside: Path) -> Path:
    (part / "evil.parquet").symlink_to(outside / "other.parquet")
    return part / "evil.parquet"


def _symlink_loop(part: Path, outside: Path) -> Path:
    (part / "evil.parquet").symlink_to(part / "evil.parquet")
    return part / "evil.parquet"


def _partition_file(part: Path, outside: Path) -> Path:
    (part.parent / "date=2026-01-01").write_text("x")
    return part.parent / "date=2026-01-01"


def _partition_not_a_date(part: Path, outside: Path) -> Path:
    for name in ("date=garbage", "date=2026-13-45"):
        (part.parent / name).mkdir()
        shutil.copy(outside / "other.parquet", part.parent / name / "p.parquet")
    return part.parent / "date=garbage"


def _partition_symlink_out(part: Path, outside: Path) -> Path:
    (part.parent / "date=2030-01-01").symlink_to(outside, target_is_directory=True)
    return part.parent / "date=2030-01-01"


def _truncated(part: Path, outside: Path) -> Path:
    data = (outside / "other.parquet").read_bytes()
    (part / "evil.parquet").write_bytes(data[: len(data) // 2] + data[-200:])
    return part / "evil.parquet"


def _coarse(good: Path, dest: Path, value: int) -> None:
    """`good`'s rows with ts_start in milliseconds, every one `value`."""
    t = pq.read_table(good)
    t = t.drop_columns([c for c in ("date",) if c in t.column_names])
    ms = pa.timestamp("ms", tz="UTC")
    t = t.set_column(t.schema.get_field_index("ts_start"), pa.field("ts_start", ms), pa.array([value] * len(t), ms))
    pq.write_table(t, dest, coerce_timestamps=None)


def _ms_overflow(part: Path, outside: Path) -> Path:
    _coarse(next(part.glob("*.parquet")), part / "evil.parquet", 2**62)  # in microseconds: beyond 2**63
    return part / "evil.parquet"


ATTACKS: dict[str, tuple[Callable[[Path, Path], Path], str]] = {
    "fifo": (_fifo, "a FIFO"),
    "symlink-out": (_symlink_out, "a symbolic link"),
    "symlink-loop": (_symlink_loop, "a symbolic link"),
    "partition-is-a-file": (_partition_file, "not a date= partition (a file)"),
    "partition-not-a-date": (_partition_not_a_date, "not a date= partition"),
    "partition-symlink-out": (_partition_symlink_out, "a symbolic link"),
    "truncated": (_truncated, "not a Parquet file"),
    "times-overflow-microseconds": (_ms_overflow, "ts_start holds times beyond what microseconds can hold"),
}


@pytest.mark.parametrize("attack", sorted(ATTACKS))
def test_a_foreign_file_or_folder_is_named_skipped_and_costs_only_itself(
    sample: Path, tmp_path: Path, attack: str
) -> None:
    root = tmp_path / "data"
    shutil.copytree(sample, root)
    outside = tmp_path / "outside"
    outside.mkdir()
    good = next((root / "exchanges").glob("date=*/*.parquet"))
    _other_rows(good, outside / "other.parquet")
    make, why = ATTACKS[attack]
    bad = make(good.parent, outside)

    listed = table_files(root, "exchanges")
    assert (str(bad), why) in listed.foreign
    assert listed.files == [str(good)]  # nothing from outside the dataset is read

    r = invoke("report", str(root), "--format", "json")
    assert r.exit_code == 0
    assert f"warning: skipped {bad}: {why}" in r.stderr
    assert (
        json.loads(r.stdout)["dataset"]["exchanges"]
        == json.loads(invoke("report", str(sample), "--format", "json").stdout)["dataset"]["exchanges"]
    )
    r = invoke(
        "sql", str(root), "SELECT count(*) AS n FROM exchanges WHERE exchange_id LIKE 'outside-%'", "--format", "csv"
    )
    assert r.exit_code == 0 and r.stdout == "n\n0\n"
    assert f"warning: skipped {bad}: {why}" in r.stderr  # sql says what its views leave out, as report does


def test_times_in_milliseconds_that_convert_are_read(sample: Path, tmp_path: Path) -> None:
    root = tmp_path / "data"
    shutil.copytree(sample, root)
    good = next((root / "exchanges").glob("date=*/*.parquet"))
    _coarse(good, good.parent / "part-ms.parquet", 946_681_200_000)  # 1999-12-31T23:00Z
    assert table_files(root, "exchanges").files == sorted(str(p) for p in good.parent.glob("*.parquet"))
    r = invoke(
        "sql", str(root), "SELECT count(*) AS n FROM exchanges WHERE ts_start = '1999-12-31 23:00Z'", "--format", "csv"
    )
    assert r.exit_code == 0 and int(r.stdout.split()[1]) >= 1 and "warning" not in r.stderr


def test_a_file_of_thousands_of_row_groups_is_skipped_before_its_footer_is_read(
    sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # 20,000 one-row groups made an 85 MB footer that took report to 2.7 GB and 50 s; here the limit is lowered
    # so that 300 groups (a footer of about 1 MB) stand for them
    from converse_tap.store import reader

    monkeypatch.setattr(reader, "MAX_FOOTER", 256 << 10)
    root = tmp_path / "data"
    shutil.copytree(sample, root)
    good = next((root / "exchanges").glob("date=*/*.parquet"))
    t = pq.read_table(good)
    t = t.drop_columns([c for c in ("date",) if c in t.column_names])
    many = pa.concat_tables([t] * 34).slice(0, 300)
    ids = pa.array([f"many-{i}" for i in range(300)], t.schema.field("exchange_id").type)
    many = many.set_column(0, t.schema.field("exchange_id"), ids)
    pq.write_table(many, good.parent / "part-many.parquet", row_group_size=1)
    assert pq.read_metadata(good.parent / "part-many.parquet").num_row_groups == 300
    r = invoke("report", str(root), "--format", "json")
    assert r.exit_code == 0
    assert f"warning: skipped {good.parent / 'part-many.parquet'}: a Parquet footer of" in r.stderr
    monkeypatch.setattr(reader, "MAX_FOOTER", 16 << 20)  # under the real limit it is read
    query = "SELECT count(*) AS n FROM exchanges WHERE exchange_id LIKE 'many-%'"
    r = invoke("sql", str(root), query, "--format", "csv")
    assert r.exit_code == 0 and r.stdout == "n\n300\n"
