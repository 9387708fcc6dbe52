"""A dataset that changed, or storage that stopped answering, between the listing of its files and their reading.

Recorders roll journals into Parquet files and other tools move or remove files while a report runs: a file listed
a moment ago may be gone, renamed, or rewritten (an object replaced by a shorter or damaged one), and an S3
endpoint may go away. A reader that fails then says which file changed and that running the command again reads
the dataset as it is now; it never reports over part of the files as if they were all (a rename would leave the
rows out of the figures, though they are still in the dataset).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

import pyarrow.fs as pafs

from . import objstore

if TYPE_CHECKING:
    from .reader import TableFiles

NAMED = 3  # files a message names; the others are counted


class ReadInterrupted(OSError):
    """Reading a dataset stopped for a cause outside it (it changed, or its storage went away): a usage error with
    what to do in its message, never a damaged dataset."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class DatasetChanged(ReadInterrupted):
    """Files listed for a read were removed or rewritten before they were read (`changed`: where, and how)."""

    def __init__(self, root: str | Path, changed: list[tuple[str, str]]) -> None:
        self.changed = changed
        named = "; ".join(f"{where} {how}" for where, how in changed[:NAMED])
        more = f" (and {len(changed) - NAMED} more files)" if len(changed) > NAMED else ""
        super().__init__(
            f"the dataset {root} changed while it was being read: {named}{more}. A recorder rolling its journals "
            "over, or files moved, replaced or removed, does this: run the command again (if it keeps happening, "
            "stop what rewrites the dataset while it is read)"
        )


class StorageLost(ReadInterrupted):
    """The object storage failed (stopped answering, refused the credentials, lost the bucket) while a dataset
    on it was being read."""

    def __init__(self, where: str, error: BaseException) -> None:
        super().__init__(
            f"the object storage failed while {where} was being read ({objstore.describe(error)}): check that "
            "its endpoint (AWS_ENDPOINT_URL) answers, the bucket still exists and the credentials are still valid, "
            "then run the command again"
        )


def storage_error(e: BaseException) -> bool:
    """Whether an error of pyarrow's S3 filesystem is the storage failing (unreachable, refusing), rather than
    the object asked for being absent or not Parquet."""
    return isinstance(e, OSError) and not isinstance(e, FileNotFoundError) and "AWS Error" in str(e)


def table_of(path: str) -> str:
    """The table a listed Parquet file belongs to (`…/<table>/date=…/<file>`, local or on object storage)."""
    return PurePosixPath(path).parent.parent.name


def local_stamp(path: str | Path) -> tuple[int, int] | None:
    """A local file's size and modification time (None when it is gone)."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


def object_stamp(info: pafs.FileInfo) -> tuple[int, int]:
    """An object's size and modification time, as a listing of its prefix gives them."""
    return info.size if info.size is not None else -1, info.mtime_ns or 0


def _stamps_now(remote: objstore.Remote | None, table: str, files: list[str]) -> dict[str, tuple[int, int]]:
    """The files' stamps now (a gone file has none): on object storage from one listing of the table."""
    if remote is None:
        return {f: s for f in files if (s := local_stamp(f)) is not None}
    try:
        return {i.path: object_stamp(i) for i in objstore.list_files(remote, table)}
    except OSError as e:
        if storage_error(e):
            raise StorageLost(remote.url, e) from e
        raise


def changed_files(
    root: str | Path, listed: Mapping[str, TableFiles], named: Collection[str] = ()
) -> list[tuple[str, str]]:
    """The listed files that are no longer what the listing found: gone, or rewritten (each named as a user would
    name it, with how it changed). A file whose size and time are as listed is taken for unchanged unless `named`
    (the error being explained names it), when its footer is checked again, as is every file listed without its
    stamps. Raises StorageLost when the storage does not answer."""
    from .reader import GONE, foreign_reason

    remote = objstore.parse(str(root)) if objstore.is_remote(root) else None
    out = []
    for table, found in listed.items():
        now = _stamps_now(remote, table, found.files) if found.stamps else {}
        for path in found.files:
            where = objstore.SCHEME + path if remote is not None else path
            was = found.stamps.get(path)
            if was is not None and now.get(path) is None:
                out.append((where, GONE_NOW))
                continue
            if was is not None and now.get(path) == was and path not in named:
                continue
            reason = foreign_reason(path, table, remote)
            if reason == GONE:
                out.append((where, GONE_NOW))
            elif reason is not None:
                out.append((where, f"was replaced ({reason} now)"))
            elif was is not None and now.get(path) != was:
                out.append((where, "was rewritten"))
    return out


GONE_NOW = "is gone (removed or renamed)"


def settle(e: Exception, root: str | Path, listed: Mapping[str, TableFiles] | None) -> Exception:
    """What to raise for `e`, an error while reading the `listed` files of the dataset at `root`: DatasetChanged
    when some of them changed since they were listed, StorageLost when the storage no longer answers, `e` itself
    otherwise (the files are as listed: the error is the data's or the reader's). Looks at each listed file's size
    and time again (on object storage: lists each table once), and at the footers of those the error names: for a
    read that failed, never on the common path."""
    if isinstance(e, ReadInterrupted) or not listed:
        return e
    text = str(e)
    named = {f for found in listed.values() for f in found.files if f in text}  # (a DuckDB name holds the path)
    try:
        changed = changed_files(root, listed, named)
    except ReadInterrupted as lost:
        return lost
    except OSError:
        return e
    return DatasetChanged(root, changed) if changed else e


def files_listed(files: list[str]) -> dict[str, TableFiles]:
    """Some listed files as `settle` takes them: by table."""
    from .reader import TableFiles

    out: dict[str, TableFiles] = {}
    for f in files:
        out.setdefault(table_of(f), TableFiles()).files.append(f)
    return out
