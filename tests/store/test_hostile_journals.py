"""Files named like journals that no writer of the dataset made: a FIFO, garbage, Arrow of another schema or of
the wrong types, a directory, a symlink loop, a FIFO as the lock. `report` and `recover` name each one (path and
why), leave it in place, never block on it, and keep every row of the real journals beside it."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

from converse_tap.cli import cli
from converse_tap.store.reader import load, read_journals
from converse_tap.store.recovery import recover
from tests.store.test_writer import _killed_writer

ROOT = Path(__file__).parents[2]


def _stream(path: Path, table: pa.Table) -> None:
    with pa.ipc.new_stream(str(path), table.schema) as w:
        w.write_table(table)


HOSTILE = {
    "fifo": lambda p: os.mkfifo(p),
    "garbage": lambda p: p.write_bytes(b"\x00garbage" * 64),
    "csv": lambda p: p.write_text("exchange_id,ts_start\nx,2026-01-01\n"),
    "other-schema": lambda p: _stream(p, pa.table({"x": [1, 2]})),
    "wrong-types": lambda p: _stream(p, pa.table({"exchange_id": [1, 2], "ts_start": ["a", "b"]})),
    "directory": lambda p: p.mkdir(),
    "symlink-loop": lambda p: p.symlink_to(p),
    "symlink-out": lambda p: p.symlink_to("/etc/passwd"),
}


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A dataset whose writer was killed (SIGKILL) after journaling 7 exchanges and 14 messages."""
    root = tmp_path_factory.mktemp("killed") / "data"
    _killed_writer(root)
    return root


def _dead_writer(killed: Path, root: Path) -> Path:
    """A copy of `killed` at `root`: its one journal directory."""
    shutil.copytree(killed, root)
    (d,) = (root / "_journal").iterdir()
    assert sorted(p.name.split("-")[0] for p in d.glob("*.arrows")) == ["exchanges", "messages"]
    return d


def _cli(*args: str, blocking_risk: bool) -> tuple[int, str]:
    """The CLI in-process, or (where a reader could block on a FIFO) in a subprocess with a timeout: a reader
    blocked fails the test instead of hanging it."""
    if not blocking_risk:
        r = CliRunner().invoke(cli, list(args))
        assert r.exception is None or isinstance(r.exception, SystemExit), r.exception
        return r.exit_code, r.stderr
    p = subprocess.run(
        [sys.executable, "-m", "converse_tap", *args], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    return p.returncode, p.stderr


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_report_and_recover_name_a_foreign_journal_and_keep_the_real_ones(
    killed: Path, tmp_path: Path, kind: str, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / "data"
    d = _dead_writer(killed, root)
    bad = d / "exchanges-zzzz-foreign.arrows"
    HOSTILE[kind](bad)

    journals = read_journals(root)
    assert [p for p, _ in journals.foreign] == [str(bad)]
    assert sum(t.num_rows for t in journals.tables["exchanges"]) == 7

    fifo = kind == "fifo"
    code, err = _cli("report", str(root), "--format", "json", blocking_risk=fifo)
    assert code == 0 and "Traceback" not in err, err
    assert f"warning: skipped {bad}: " in err and "not a journal of this dataset" in err

    with caplog.at_level(logging.WARNING, "converse_tap"):
        code, err = _cli("recover", str(root), blocking_risk=fifo)
    err += caplog.text
    assert code == 0 and "Traceback" not in err, err
    assert f"skipped {bad}: " in err and "it is left in place" in err
    assert "7 exchanges rows, 14 messages rows" in err
    assert len(load(root, "exchanges")) == 7
    assert bad.is_symlink() or bad.exists()  # not ours: never deleted
    assert not list(d.glob("messages-*.arrows")) and not [p for p in d.glob("exchanges-*") if p != bad]


def test_a_fifo_as_the_lock_blocks_neither_report_nor_recover(killed: Path, tmp_path: Path) -> None:
    root = tmp_path / "data"
    d = _dead_writer(killed, root)
    (d / "lock").unlink(missing_ok=True)
    os.mkfifo(d / "lock")
    code, err = _cli("report", str(root), "--format", "json", blocking_risk=True)
    assert code == 3 and f"warning: skipped {d}: no lock file" in err, err  # not a writer's: its rows are not read
    code, err = _cli("recover", str(root), blocking_risk=True)
    assert code == 0 and f"skipped {d}: its lock cannot be opened (a FIFO)" in err


def test_a_journal_of_an_earlier_version_is_recovered_with_null_new_columns(killed: Path, tmp_path: Path) -> None:
    root = tmp_path / "data"
    d = _dead_writer(killed, root)
    (path,) = d.glob("exchanges-*.arrows")
    with pa.ipc.open_stream(str(path)) as r:
        old = r.read_all().drop_columns(["trace_id", "span_id", "parent_span_id"])  # schema version 1
    path.unlink()
    _stream(path, old)
    assert recover(root)["exchanges"] == 7
    assert load(root, "exchanges")["trace_id"].isna().all()


def test_recover_never_removes_what_no_writer_made(
    killed: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # `_journal` a symlink to somewhere else: recovery removed every folder there (a home directory, say)
    victim = tmp_path / "victim"
    (victim / "important").mkdir(parents=True)
    (victim / "important" / "file.txt").write_text("precious")
    root = tmp_path / "linked"
    shutil.copytree(killed, root)
    shutil.rmtree(root / "_journal")
    (root / "_journal").symlink_to(victim, target_is_directory=True)
    with caplog.at_level(logging.WARNING, "converse_tap"):
        assert sum(recover(root).values()) == 0
    assert (victim / "important" / "file.txt").read_text() == "precious"
    assert f"skipped {root / '_journal'}: a symbolic link" in caplog.text
    code, err = _cli("report", str(root), "--format", "json", blocking_risk=False)
    assert code == 3 and f"warning: skipped {root / '_journal'}: a symbolic link" in err  # its rows were all there

    # a folder without a writer's lock, and a dead writer's folder holding someone's file beside its journals
    root = tmp_path / "data"
    d = _dead_writer(killed, root)
    (d / "notes.txt").write_text("mine")
    stranger = root / "_journal" / "not-a-writer"
    stranger.mkdir()
    (stranger / "data.txt").write_text("mine too")
    caplog.clear()
    with caplog.at_level(logging.WARNING, "converse_tap"):
        assert recover(root)["exchanges"] == 7
    assert (d / "notes.txt").read_text() == "mine" and not list(d.glob("*.arrows"))
    assert (stranger / "data.txt").read_text() == "mine too"
    assert f"{d} holds files that are not journals; it is left in place" in caplog.text
    assert f"skipped {stranger}: no lock file" in caplog.text


@pytest.mark.parametrize("what", ["link", "file"])
def test_writers_never_write_through_a_journal_folder_that_is_not_theirs(tmp_path: Path, what: str) -> None:
    """A symlinked `_journal` was followed by every writer (recorder and ingest): journals written, and removed at
    roll-over, wherever the link pointed. The CLI refuses such a dataset (exit 2, saying what to do), and a writer
    started on it raises; a link made after the writer started is not followed either."""
    from converse_tap.store.gaps import CaptureGap
    from converse_tap.store.writer import DatasetWriter
    from tests.captures import write_capture

    victim = tmp_path / "victim"
    victim.mkdir()
    root = tmp_path / "data"
    root.mkdir()
    if what == "link":
        (root / "_journal").symlink_to(victim, target_is_directory=True)
    else:
        (root / "_journal").write_text("someone's file")
    capture = write_capture(tmp_path / "c.mitm", 20)
    code, err = _cli("ingest", str(capture), "--out", str(root), blocking_risk=False)
    assert code == 2, err
    assert "_journal is a symbolic link" in err if what == "link" else "_journal exists and is not a directory" in err
    assert "Traceback" not in err
    with pytest.raises(OSError, match="_journal"):
        DatasetWriter(root).start(thread=False)
    assert list(victim.iterdir()) == []

    # linked after the writer started: its next journal is not opened there, its rows are held and retried
    fine = tmp_path / "fine"
    writer = DatasetWriter(fine, flush_interval=0.0)
    writer.start(thread=False)
    shutil.rmtree(fine / "_journal")
    (fine / "_journal").symlink_to(victim, target_is_directory=True)
    writer.write(CaptureGap("backlog_full", 1, 100, None, None))
    assert writer.stats.flush_failures >= 1 and list(victim.iterdir()) == []
    (fine / "_journal").unlink()
    writer.write(CaptureGap("backlog_full", 1, 100, None, None))  # a folder of its own again: both rows written
    writer.close()
    assert len(load(fine, "capture_gaps")) == 2


def test_a_device_named_like_a_dataset_file_is_refused_unopened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A journal, salt or text-policy file that is a device was opened (non-blocking) before it was refused;
    opening a device acts (`/dev/watchdog` arms a reboot)."""
    from converse_tap.store import files

    opened: list[str] = []
    real = os.open
    monkeypatch.setattr(files.os, "open", lambda path, *a, **k: opened.append(str(path)) or real(path, *a, **k))
    with pytest.raises(files.ForeignJournal, match="character device"):
        files.open_regular(Path("/dev/null"))
    assert opened == []


def test_a_device_as_a_writers_lock_is_never_opened(
    killed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`recover` opened a dead writer's lock for writing, `report` for reading: a device there was opened (for
    writing, /dev/watchdog arms a reboot). It is named and its folder left, unopened."""
    import stat

    from converse_tap.store import reader, recovery

    root = tmp_path / "data"
    d = _dead_writer(killed, root)
    (d / "lock").unlink()
    try:
        os.mknod(d / "lock", stat.S_IFCHR | 0o600, os.makedev(1, 3))  # the null device
    except PermissionError:
        pytest.skip("making a device node needs CAP_MKNOD")
    opened: list[str] = []
    real = os.open
    spy = lambda path, *a, **k: opened.append(str(path)) or real(path, *a, **k)  # noqa: E731
    monkeypatch.setattr(reader.os, "open", spy)
    monkeypatch.setattr(recovery.os, "open", spy)
    assert not reader.writer_alive(d)
    assert sum(recover(root).values()) == 0
    assert str(d / "lock") not in opened and (d / "lock").exists()
