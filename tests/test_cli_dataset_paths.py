"""The dataset argument of every reading command: a device, a FIFO, a file, a directory no writer wrote into.
Each is refused with exit 2 saying what it is, before anything opens it (a FIFO would block a reader)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli_helpers import invoke

COMMANDS = [
    ["recover", "{d}"],
    ["report", "{d}"],
    ["agents", "{d}"],
    ["check", "{d}", "--no-anomalies"],
    ["sql", "{d}", "SELECT 1"],
    ["show", "{d}", "abc"],
    ["export", "otlp", "{d}", "--endpoint", "http://127.0.0.1:9"],
]


def _run(command: list[str], dataset: Path | str) -> tuple[int, str, str]:
    r = invoke(*[a.format(d=dataset) for a in command])
    assert "Traceback" not in r.stderr
    return r.exit_code, r.stdout, r.stderr


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0] if c[0] != "export" else "export-otlp")
def test_a_device_a_fifo_or_a_file_is_not_a_dataset(tmp_path: Path, command: list[str]) -> None:
    fifo = tmp_path / "data.fifo"
    os.mkfifo(fifo)  # nothing ever writes to it: opening it for reading would block for ever
    plain = tmp_path / "data.parquet"
    plain.write_bytes(b"PAR1")
    for path, kind in (("/dev/null", "a character device"), (fifo, "a FIFO"), (plain, "is a file")):
        code, out, err = _run(command, path)
        assert (code, out) == (2, ""), (path, err)
        assert "Error: Invalid value for 'DATASET'" in err and kind in err
        assert kind == "is a file" or "not a directory" in err


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c[0] if c[0] != "export" else "export-otlp")
def test_a_directory_no_writer_wrote_into_is_not_a_dataset(tmp_path: Path, command: list[str]) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    code, out, err = _run(command, tmp_path)
    assert (code, out) == (2, "")
    assert err.startswith(f"Error: {tmp_path} is not a converse-tap dataset (no exchanges/, messages/")


def test_a_symlink_to_a_dataset_directory_is_the_dataset(sample: Path, tmp_path: Path) -> None:
    link = tmp_path / "link"
    link.symlink_to(sample, target_is_directory=True)
    code, out, _ = _run(["sql", "{d}", "SELECT count(*) AS n FROM exchanges", "--format", "csv"], link)
    assert code == 0 and out.splitlines()[0] == "n" and int(out.splitlines()[1]) > 0


def test_an_error_passed_on_with_its_traceback_is_shown_by_its_own_line() -> None:
    """DuckDB passes on an error of the Python filesystem it reads S3 through with the whole traceback; the user
    read `cannot read the dataset s3://…: Traceback (most recent call last):` and nothing else."""
    import duckdb

    from converse_tap.cli.guards import first_line

    text = (
        "Traceback (most recent call last):\n\n"
        '  File "/venv/lib/python3.12/site-packages/fsspec/spec.py", line 781, in size\n'
        '    return self.info(path).get("size", None)\n'
        "           ^^^^^^^^^^^^^^^\n\n"
        "OSError: When getting information for key 'ds/x.parquet' in bucket 'bkt': AWS Error NETWORK_CONNECTION\n\n"
        "LINE 4: ... exchanges WHERE len(anomalies) > 0), unnest(anomalies) AS t(a)\n"
    )
    assert first_line(duckdb.IOException(text)).startswith("OSError: When getting information for key 'ds/x")
    assert first_line(duckdb.BinderException("Binder Error: no such column\nLINE 1: SELECT")) == (
        "Binder Error: no such column"
    )
    assert first_line(ValueError("")) == "ValueError"
