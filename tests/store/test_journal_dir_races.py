"""Writers starting and ending, `recover` and readers, at once on one dataset's `_journal/`: each interleaving that
broke is forced here at the exact point it broke (two recorders starting together, a recorder starting while
another ends, `converse-tap recover` beside a running recorder, a report during all of it)."""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from converse_tap.a2a.extract import Extraction, extract
from converse_tap.a2a.redact import TextPolicy
from converse_tap.addon.flows import exchange_from_flow
from converse_tap.store.journals import read_journals
from converse_tap.store.reader import load
from converse_tap.store.recovery import recover
from converse_tap.store.writer import DatasetWriter
from tests.factories import a2a_flow, agent_message, jsonrpc_result


def extraction(i: int, ts: float | None = None) -> Extraction:
    flow = a2a_flow(response=jsonrpc_result({"message": agent_message(f"m-{i}")}))
    if ts is not None:
        flow.request.timestamp_start = ts
        flow.response.timestamp_start = flow.response.timestamp_end = ts
    out = extract(exchange_from_flow(flow), TextPolicy())
    assert out is not None
    return out


def test_a_recover_between_a_writers_lock_file_and_its_lock_leaves_the_writer_its_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`recover` (another recorder starting) ran between a writer's making its lock file and locking it: it took the
    directory for a dead writer's and removed it, and the live writer journaled into a folder without a lock, which
    readers skipped as foreign and `recover` would never have recovered had the writer died."""
    real = fcntl.flock
    ran: list[dict[str, int]] = []

    def flock(fd: int, op: int) -> None:
        if op == fcntl.LOCK_EX and not ran:  # the writer's own lock, blocking: recover runs first
            ran.append(recover(tmp_path))
        real(fd, op)

    monkeypatch.setattr(fcntl, "flock", flock)
    w = DatasetWriter(tmp_path, flush_interval=60)
    w.start(thread=False)
    monkeypatch.setattr(fcntl, "flock", real)
    assert ran  # the interleaving happened
    for i in range(3):
        w.write(extraction(i))
    w.poll()
    w._flush()
    assert (w.dir / "lock").is_file()
    journals = read_journals(tmp_path)
    assert journals.foreign == []
    assert journals.live == [str(w.dir)] and journals.dead == []
    assert journals.rows["live"] == 9  # 3 exchanges + 6 messages, read as the running writer's
    assert recover(tmp_path) == {"exchanges": 0, "messages": 0, "agent_cards": 0, "capture_gaps": 0}  # (alive)
    w.close()
    assert len(load(tmp_path, "exchanges")) == 3


def test_recover_while_the_last_writer_ends_does_not_fail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The last writer ended (removing `_journal/`) between `recover` seeing `_journal/` and listing it: recover
    stopped with FileNotFoundError (`converse-tap recover` with a traceback, a recording worker at its start)."""
    w = DatasetWriter(tmp_path, flush_interval=60)
    w.start(thread=False)
    w.write(extraction(1))
    real = os.listdir

    def listdir(path: Any = ".") -> list[str]:
        if Path(path) == tmp_path / "_journal" and w._lock_fd is not None:
            w.close()  # the writer ends right then
        return real(path)

    monkeypatch.setattr(os, "listdir", listdir)
    assert sum(recover(tmp_path).values()) == 0
    monkeypatch.setattr(os, "listdir", real)
    assert not (tmp_path / "_journal").exists()
    assert len(load(tmp_path, "exchanges")) == 1


def test_a_writer_starting_while_the_last_other_ends_starts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another writer ended (removing the then empty `_journal/`) between a writer's seeing `_journal/` and making
    its own directory in it: the start failed with FileNotFoundError (a recorder that did not record)."""
    other = DatasetWriter(tmp_path, flush_interval=60)
    other.start(thread=False)
    other.write(extraction(1))
    real = Path.mkdir

    def mkdir(self: Path, *args: Any, **kwargs: Any) -> None:
        if self.parent == tmp_path / "_journal" and other._lock_fd is not None:
            other.close()  # the other writer ends right then, and `_journal/` with it
        real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", mkdir)
    w = DatasetWriter(tmp_path, flush_interval=60)
    w.start(thread=False)
    monkeypatch.setattr(Path, "mkdir", real)
    assert other._lock_fd is None  # the interleaving happened
    w.write(extraction(2))
    w.close()
    assert sorted(load(tmp_path, "messages")["message_id"]) == ["m-1", "m-2", "m-user", "m-user"]


def test_a_writer_ending_is_never_read_as_a_foreign_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A report read `_journal/` while a writer ended: its folder, its lock removed but the folder not yet, was named
    in the report's notes as "no lock file, not a writer's journal directory" (and `recover` warned the same)."""
    w = DatasetWriter(tmp_path, flush_interval=60)
    w.start(thread=False)
    w.write(extraction(1))
    seen: list[list[tuple[str, str]]] = []
    real = shutil.rmtree

    def rmtree(path: Any, *args: Any, **kwargs: Any) -> None:
        lock = Path(path) / "lock"
        if lock.exists():  # the lock goes first, then a report reads the journals
            lock.unlink()
            seen.append(read_journals(tmp_path).foreign)
        real(path, *args, **kwargs)

    monkeypatch.setattr(shutil, "rmtree", rmtree)
    w.close()
    monkeypatch.setattr(shutil, "rmtree", real)
    assert seen == [[]]
    assert not (tmp_path / "_journal").exists()


KILLED_MID_ROLL = textwrap.dedent(
    """
    import os, signal, sys
    from converse_tap.store.writer import DatasetWriter
    from tests.store.test_journal_dir_races import extraction
    real = os.replace

    def replace(src, dst, *args, **kwargs):
        real(src, dst, *args, **kwargs)
        if str(dst).endswith(".parquet"):  # the first date partition's file is in place: killed right then
            os.kill(os.getpid(), signal.SIGKILL)

    os.replace = replace
    w = DatasetWriter(sys.argv[1], flush_interval=60)
    w.start(thread=False)
    for i in range(6):
        w.write(extraction(i, ts=1_795_000_000.0 + 86_400 * (i % 2)))  # two days: two partitions
    w.close()
    """
)


def test_a_writer_killed_mid_roll_over_is_recovered_without_doubling_its_rows(tmp_path: Path) -> None:
    """A writer killed after writing one date partition of a roll-over and before removing its journals (SIGKILL, the
    channel's SIGTERM after its wait, the OOM killer; an upload of the next partition under way): its rows were in
    Parquet and in its journals, and `recover` wrote them all again under another name. Each exchange was stored
    twice (a `sql` count over `exchanges` doubled); it now replaces the files the roll-over wrote."""
    proc = subprocess.run(
        [sys.executable, "-c", KILLED_MID_ROLL, str(tmp_path)], cwd=Path(__file__).parents[2], check=False
    )
    assert proc.returncode == -signal.SIGKILL
    assert len(load(tmp_path, "exchanges")) == 3  # one day's file written, the journals all there
    assert recover(tmp_path) == {"exchanges": 6, "messages": 12, "agent_cards": 0, "capture_gaps": 0}
    ids = load(tmp_path, "exchanges")["exchange_id"].tolist()
    assert len(ids) == 6 and len(set(ids)) == 6
    assert len(load(tmp_path, "messages")) == 12
    assert not (tmp_path / "_journal").exists() or not list((tmp_path / "_journal").iterdir())


def test_a_roll_over_failing_after_one_partition_is_retried_under_the_same_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A local roll-over that failed after writing one date partition (the disk full at the second) kept its
    journals, and the next roll-over wrote them all again under new names: that partition's rows stored twice."""
    from converse_tap.store import files

    real = files.pq.write_table
    calls: list[str] = []

    def write_table(table: Any, where: Any, **kwargs: Any) -> None:
        calls.append(str(where))
        if len(calls) == 2:
            raise OSError(28, "No space left on device")
        real(table, where, **kwargs)

    monkeypatch.setattr(files.pq, "write_table", write_table)
    w = DatasetWriter(tmp_path, flush_interval=60)
    w.start(thread=False)
    for i in range(4):
        w.write(extraction(i, ts=1_795_000_000.0 + 86_400 * (i % 2)))
    w._flush()
    w._rollover()
    assert w.stats.roll_failures == 1 and len(load(tmp_path, "exchanges")) == 2  # one day in Parquet
    w.close()
    ids = load(tmp_path, "exchanges")["exchange_id"].tolist()
    assert len(ids) == 4 and len(set(ids)) == 4
    assert len(load(tmp_path, "messages")) == 8
