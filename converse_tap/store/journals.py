"""Journals: the append-only Arrow IPC streams a writer keeps rows in until they are rolled into Parquet (the
writing side, `Journal`), and a dataset's journals read back with whether their writer still runs (`read_journals`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa

from . import objstore
from .files import JOURNAL_DIR, ForeignJournal, check_journal_folder, make_dir, read_journal, read_small
from .schema import TABLES

ROLLING = "rolling-"  # + a table: the file name (stem) of that table's roll-over under way, read by `recover`
CLAIM_TRIES = 100  # a writer's journal directory made again while other writers' ends remove `_journal` under it


def claim_dir(directory: Path) -> int:
    """Make a writer's journal directory and lock it (the descriptor holding the lock is returned). It is made under
    a hidden name (`.<id>`, which `recover` and readers pass over), locked, and only then renamed into place: no one
    ever sees it unlocked. Made so, a `recover` run meanwhile (by another recorder starting, say) cannot take it for
    a dead writer's and remove it under the live one (which then journaled into a directory with no lock, passed
    over by readers and by `recover`). `_journal` removed under it by another writer's end is made again."""
    hidden = directory.with_name("." + directory.name)
    for _ in range(CLAIM_TRIES):
        check_journal_folder(directory.parent.parent)
        fd = -1
        try:
            make_dir(hidden)
            fd = os.open(hidden / "lock", os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            fcntl.flock(fd, fcntl.LOCK_EX)
            os.rename(hidden, directory)
            return fd
        except FileNotFoundError:  # `_journal` was removed by a writer that ended meanwhile: made again
            if fd >= 0:
                os.close(fd)
            shutil.rmtree(hidden, ignore_errors=True)
    raise OSError(f"cannot make the journal directory {directory}: its folder keeps being removed")


def release_dir(directory: Path, fd: int | None) -> None:
    """Remove a writer's journal directory (it holds no journal) and let go of its lock: renamed to its hidden name
    first, so no reader sees it without its lock (a reader named it a foreign folder) and no `recover` takes it
    while the writer still holds it; `_journal` goes too when no other writer has a directory in it."""
    hidden = directory.with_name("." + directory.name)
    try:
        os.rename(directory, hidden)
    except OSError:
        hidden = directory  # (gone, or replaced by something that is not a folder: removed where it is)
    shutil.rmtree(hidden, ignore_errors=True)
    if fd is not None:
        os.close(fd)
    with contextlib.suppress(OSError):  # only when no other writer shares the dataset
        directory.parent.rmdir()


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


def mark_rolling(directory: Path, table: str, stem: str) -> None:
    """Note (fsync'd) the stem of the files a roll-over of `table` writes, before it writes them. Killed between
    the files and the journals' removal (a second partition still uploading, SIGKILL), a writer left its rows both
    in Parquet and in journals, and `recover` wrote them again under another name: every row of the roll stored
    twice. With the note, `recover` writes the same names, which replaces those files. A note that cannot be
    written (a full local disk, whose rows an upload would free) stops no roll-over: it is removed (an earlier
    one's name would have `recover` replace that roll-over's files) and the roll-over goes on without it."""
    path = directory / (ROLLING + table)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
        try:
            if os.write(fd, stem.encode("ascii")) != len(stem):
                raise OSError("short write")
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        unmark_rolling(directory, table)


def unmark_rolling(directory: Path, table: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(directory / (ROLLING + table))


def rolling_stem(directory: Path, table: str) -> str | None:
    """The stem a dead writer of `directory` was writing `table`'s roll-over under (`<ms>-<its id>-<n>`), if any;
    anything else in the note (not a writer's making) is None."""
    try:
        data = read_small(directory / (ROLLING + table), "roll-over note")
    except OSError:
        return None
    text = (data or b"").decode("ascii", "replace")
    return text if re.fullmatch(rf"\d{{1,16}}-{re.escape(directory.name)}-\d{{1,12}}", text) else None


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
        if d.name.startswith(".") or d.is_symlink() or not d.is_dir():  # (hidden: a writer starting or ending)
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
