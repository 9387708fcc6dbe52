"""Recovery: journals left by writers that died (SIGKILL, the OOM killer, a lost machine) rolled into Parquet."""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import stat
import time
from pathlib import Path

import pyarrow as pa

from . import objstore
from .files import JOURNAL_DIR, ForeignJournal, conform, file_kind, read_journal, write_parquet
from .journals import rolling_stem, unmark_rolling
from .schema import TABLES

log = logging.getLogger("converse_tap.store.writer")


def recover(root: str | Path, journal_dir: Path | None = None, errors: list[str] | None = None) -> dict[str, int]:
    """Roll journals left by writers that died into Parquet (on object storage: upload them; the journals are in
    `journal_dir`, by default objstore.default_journal_dir). Journals of live writers are left alone. A table whose
    upload fails keeps its journals for the next recovery and is named in `errors`. A file named like a journal
    that is not one (not a regular file, not an Arrow stream, another schema) is named in a warning and left in
    place, with its directory."""
    recovered = dict.fromkeys(TABLES, 0)
    remote = objstore.is_remote(root)
    base = objstore.journal_root(root, journal_dir) / JOURNAL_DIR
    if base.is_symlink():  # a writer makes a directory: a link may point anywhere, whose folders recovery removes
        log.warning("converse-tap: skipped %s: a symbolic link, not the dataset's journal directory", base)
        return recovered
    try:
        folders = sorted(base.iterdir())
    except (FileNotFoundError, NotADirectoryError):  # none, or removed meanwhile by the last writer ending
        return recovered
    for d in folders:
        if d.name.startswith(".") or d.is_symlink() or not d.is_dir():  # (hidden: a writer starting or ending)
            continue
        lock = d / "lock"
        try:  # never a FIFO's open that waits for a writer, never through a symlink; a writer made the lock first
            if not stat.S_ISREG(os.lstat(lock).st_mode):  # nor a device's: opening one acts
                raise OSError(errno.EPERM, "not a regular file")
            fd = os.open(lock, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except FileNotFoundError:
            if d.exists():  # (else its writer ended, or another recovery took it, since the listing)
                log.warning(
                    "converse-tap: skipped %s: no lock file, not a writer's journal directory; left in place", d
                )
            continue
        except OSError as e:
            why = file_kind(lock.lstat().st_mode) if lock.exists() or lock.is_symlink() else e.strerror or str(e)
            log.warning("converse-tap: skipped %s: its lock cannot be opened (%s)", d, why)
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its writer is alive
            except OSError as e:
                log.warning("converse-tap: skipped %s: its lock cannot be locked (%s)", d, e.strerror or e)
                continue
            if not _still_there(lock, fd):
                continue  # its writer ended, or another recovery took it, between the opening and the locking
            kept = False
            for table in TABLES:
                paths, data = _recoverable(sorted(d.glob(f"{table}-*.arrows")), table)
                kept = kept or len(paths) < len(list(d.glob(f"{table}-*.arrows")))
                if data is not None and data.num_rows:
                    target = str(root) if remote else Path(root)
                    try:
                        # the names its roll-over under way was writing, if it died in one: those files replaced
                        stem = rolling_stem(d, table) or f"{int(time.time() * 1000)}-{d.name}-recovered"
                        write_parquet(target, table, data, stem)
                    except OSError as e:
                        if not remote:
                            raise
                        kept = True
                        log.error("converse-tap: cannot recover %s journals of %s (%s); they are kept", table, d, e)
                        if errors is not None:
                            errors.append(f"{data.num_rows} {table} rows in {d}: {e}")
                        continue
                    recovered[table] += data.num_rows
                for path in paths:
                    path.unlink()
                unmark_rolling(d, table)
            if not kept:  # only what a writer makes is removed: files of anyone else keep the directory
                _remove(d)
        finally:
            os.close(fd)
    return recovered


def _still_there(lock: Path, fd: int) -> bool:
    """Whether the lock just locked through `fd` is still the one at `lock`: a lock file removed (its directory
    with it) after its opening was a writer's that ended or a directory another recovery emptied."""
    try:
        st = os.lstat(lock)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def _remove(d: Path) -> None:
    """Remove a dead writer's emptied journal directory, its lock last: renamed to its hidden name first, so a
    reader never sees it without its lock (a foreign folder, it said)."""
    hidden = d.with_name("." + d.name)
    try:
        os.rename(d, hidden)
    except OSError:
        hidden = d
    (hidden / "lock").unlink(missing_ok=True)
    try:
        hidden.rmdir()
    except FileNotFoundError:
        pass
    except OSError:
        if hidden != d:
            with contextlib.suppress(OSError):
                os.rename(hidden, d)  # back where it was, for whoever owns what it holds
        log.warning("converse-tap: %s holds files that are not journals; it is left in place", d)


def read_all(paths: list[Path]) -> pa.Table | None:
    """A writer's own journals, whole (its roll-over)."""
    tables = []
    for path in paths:
        data, torn = read_journal(path)
        if torn:
            log.warning("converse-tap: %s ends mid-batch; its complete batches are kept", path)
        if data is not None:
            tables.append(data)
    return pa.concat_tables(tables) if tables else None


def _recoverable(paths: list[Path], table: str) -> tuple[list[Path], pa.Table | None]:
    """The journals of `table` among `paths` (those that are not one are named and left out) and their rows, in
    the table's current columns."""
    tables, read = [], []
    for path in paths:
        try:
            data, torn = read_journal(path, table)
            if data is not None:
                data = conform(data, table)
        except ForeignJournal as e:
            log.warning("converse-tap: skipped %s: %s, not a journal of this dataset; it is left in place", path, e)
            continue
        except (OSError, pa.ArrowException) as e:
            log.warning("converse-tap: skipped %s: unreadable (%s); it is left in place", path, e)
            continue
        if torn:
            log.warning("converse-tap: %s ends mid-batch; its complete batches are kept", path)
        read.append(path)
        if data is not None:
            tables.append(data)
    return read, (pa.concat_tables(tables) if tables else None)
