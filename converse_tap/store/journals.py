"""Journals: the append-only Arrow IPC streams a writer keeps rows in until they are rolled into Parquet (the
writing side, `Journal`), and a dataset's journals read back with whether their writer still runs (`read_journals`).
"""

from __future__ import annotations

import fcntl
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from . import objstore
from .files import JOURNAL_DIR, ForeignJournal, read_journal
from .schema import TABLES


class Journal:
    """One table's append-only Arrow IPC stream, fsync'd on every flush."""

    def __init__(self, path: Path, schema: pa.Schema) -> None:
        self.path = path
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        self.file = os.fdopen(fd, "wb")
        try:
            self.writer = pa.ipc.new_stream(self.file, schema)
        except BaseException:  # (a full disk: no file left behind that holds not even the schema)
            self.file.close()
            path.unlink(missing_ok=True)
            raise
        self.rows = 0

    def append(self, batch: pa.RecordBatch) -> None:
        self.writer.write_batch(batch)
        self.file.flush()
        os.fsync(self.file.fileno())
        self.rows += batch.num_rows

    def close(self) -> None:
        try:
            self.writer.close()
        finally:
            self.file.close()


@dataclass
class Journals:
    """The rows journaled but not yet rolled into Parquet: per table, their batches (torn tails cut off), and
    which journal directories belong to a running writer and which to one that died."""

    tables: dict[str, list[pa.Table]] = field(default_factory=lambda: {t: [] for t in TABLES})
    live: list[str] = field(default_factory=list)
    dead: list[str] = field(default_factory=list)
    rows: dict[str, int] = field(default_factory=lambda: dict.fromkeys(("live", "dead"), 0))
    paths: list[str] = field(default_factory=list)  # the journal files read
    foreign: list[tuple[str, str]] = field(default_factory=list)  # files named like journals that are not: why
    vanished: list[str] = field(default_factory=list)  # listed, then gone before being read: rolled over meanwhile


def writer_alive(directory: Path) -> bool:
    """Whether a writer holds the lock of its journal directory (a shared lock is refused while it lives)."""
    try:
        if not stat.S_ISREG(os.lstat(directory / "lock").st_mode):  # a device is not opened: opening one acts
            return False
        fd = os.open(directory / "lock", os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)  # a FIFO would block
    except OSError:
        return False  # no lock file: no writer ever locked it, or it is being removed
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False  # a lock that cannot be locked (not a file) is no writer's
    finally:
        os.close(fd)  # closing releases a lock taken here
    return False


def read_journals(root: str | Path) -> Journals:
    """Every complete batch in `root/_journal/<writer>/<table>-*.arrows`, of live and of dead writers (for a
    dataset on object storage: those in its default local journal folder, objstore.default_journal_dir). A journal
    removed between its listing and its reading was rolled into Parquet meanwhile (its rows are in a file written
    before the journal went): it is listed in `vanished`, not as a foreign file."""
    out = Journals()
    base = objstore.journal_root(root) / JOURNAL_DIR
    if base.is_symlink():
        out.foreign.append((str(base), "a symbolic link, not the dataset's journal directory"))
        return out
    if not base.is_dir():
        return out
    try:
        folders = sorted(base.iterdir())
    except FileNotFoundError:  # the last writer closed and removed it meanwhile
        return out
    for d in folders:
        if d.is_symlink() or not d.is_dir():
            continue
        if not (d / "lock").is_file():  # a writer makes its lock first
            if d.exists():  # (a writer that closed removed it, lock first, since the listing)
                out.foreign.append((str(d), "no lock file, not a writer's journal directory"))
            continue
        state = "live" if writer_alive(d) else "dead"
        got = 0
        for table in TABLES:
            for path in sorted(d.glob(f"{table}-*.arrows")):
                try:  # a live writer's last batch may be mid-write: it comes next time
                    data, _torn = read_journal(path, table)
                except ForeignJournal as e:
                    out.foreign.append((str(path), f"{e}, not a journal of this dataset"))
                    continue
                except FileNotFoundError:
                    out.vanished.append(str(path))
                    continue
                except OSError as e:
                    out.foreign.append((str(path), f"unreadable: {e.strerror or e}"))
                    continue
                out.paths.append(str(path))
                if data is not None and data.num_rows:
                    out.tables[table].append(data)
                    got += data.num_rows
        if got:
            getattr(out, state).append(str(d))
            out.rows[state] += got
    return out
