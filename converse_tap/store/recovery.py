"""Recovery: journals left by writers that died (SIGKILL, the OOM killer, a lost machine) rolled into Parquet."""

from __future__ import annotations

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
    if not base.is_dir():
        return recovered
    for d in sorted(base.iterdir()):
        if d.is_symlink() or not d.is_dir():
            continue
        lock = d / "lock"
        try:  # never a FIFO's open that waits for a writer, never through a symlink; a writer made the lock first
            if not stat.S_ISREG(os.lstat(lock).st_mode):  # nor a device's: opening one acts
                raise OSError(errno.EPERM, "not a regular file")
            fd = os.open(lock, os.O_WRONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
        except FileNotFoundError:
            log.warning("converse-tap: skipped %s: no lock file, not a writer's journal directory; left in place", d)
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
            kept = False
            for table in TABLES:
                paths, data = _recoverable(sorted(d.glob(f"{table}-*.arrows")), table)
                kept = kept or len(paths) < len(list(d.glob(f"{table}-*.arrows")))
                if data is not None and data.num_rows:
                    target = str(root) if remote else Path(root)
                    try:
                        write_parquet(target, table, data, f"{int(time.time() * 1000)}-{d.name}-recovered")
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
            if not kept:  # only what a writer makes is removed: files of anyone else keep the directory
                lock.unlink(missing_ok=True)
                try:
                    d.rmdir()
                except OSError:
                    log.warning("converse-tap: %s holds files that are not journals; it is left in place", d)
        finally:
            os.close(fd)
    return recovered


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
