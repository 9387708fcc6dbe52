"""File-level helpers for the dataset directory: owner-only permissions, atomic Parquet files, journals."""

from __future__ import annotations

import errno
import os
import secrets
import socket
import stat
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from . import objstore
from .compat import _plain, incompatible, narrowing
from .filekind import file_kind as file_kind  # re-exported: readers name it from here
from .schema import METADATA_KEY, PARTITION_TS, SCHEMA_VERSION, TABLES, parquet_options, with_version

JOURNAL_DIR = "_journal"
SALT_FILE = "_salt"
TEXT_POLICY_FILE = "_text_policy"


class TextPolicyConflict(ValueError):
    """The dataset was written under another text policy: one dataset holds one policy."""

    def __init__(self, root: str | Path, dataset_policy: str, wanted: str) -> None:
        self.root, self.dataset_policy, self.wanted = root, dataset_policy, wanted
        super().__init__(
            f"the dataset {root} holds message text under the {dataset_policy!r} policy, not {wanted!r}: "
            f"use --text {dataset_policy} for it, or another dataset directory for {wanted!r}"
        )


TEXT_POLICIES = ("keep", "hash", "drop")
SMALL_FILE = 4096  # the most a salt or a text policy file holds (they hold 32 and 5 bytes)


class TextPolicyUnreadable(TextPolicyConflict):
    """The dataset's text policy file is not one a writer made: garbage, binary, huge, not a file."""

    def __init__(self, root: str | Path, why: str) -> None:
        self.root, self.dataset_policy, self.wanted = root, "?", "?"
        ValueError.__init__(
            self,
            f"the text policy file {Path(root) / TEXT_POLICY_FILE} of the dataset {root} is {why}, where it should "
            f"hold one of {', '.join(TEXT_POLICIES)}: write the policy the dataset was recorded under into it, or "
            "use another dataset directory",
        )


def read_small(path: Path, what: str) -> bytes | None:
    """A dataset's small file (salt, text policy), None when it does not exist. Raises OSError naming it when it
    is not a regular file (a FIFO would block) or larger than any such file is."""
    try:
        fd = open_regular(path)
    except FileNotFoundError:
        return None
    except ForeignJournal as e:
        raise OSError(f"{path} is {e}, not the dataset's {what}") from None
    with os.fdopen(fd, "rb") as f:
        data = f.read(SMALL_FILE + 1)
    if len(data) > SMALL_FILE:
        raise OSError(f"{path} holds more than {SMALL_FILE} bytes: it is not the dataset's {what}")
    return data


def check_journal_folder(local: Path) -> None:
    """Raise OSError when `local/_journal` is something a writer must not write into: a symbolic link (journals
    would be written, and removed at roll-over, wherever it points) or not a folder."""
    folder = local / JOURNAL_DIR
    try:  # looked at once: removed between two looks (the last other writer ending) it was "not a directory"
        mode = os.lstat(folder).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise OSError(
            f"{folder} is a symbolic link; a writer keeps its journals only in a folder of the dataset itself: "
            "remove the link, or write to another directory"
        )
    if not stat.S_ISDIR(mode):
        raise NotADirectoryError(f"{folder} exists and is not a directory; move it away, or write to another directory")


def make_dir(path: Path) -> None:
    """mkdir -p with owner-only permissions on every directory this creates."""
    missing = []
    p = path
    while not p.exists():
        missing.append(p)
        p = p.parent
    for d in reversed(missing):
        try:
            d.mkdir(mode=0o700)
        except FileExistsError:
            continue
        os.chmod(d, 0o700)


def check_writable(root: str | Path) -> None:
    """Raise OSError with a plain message when `root` cannot hold a dataset."""
    if objstore.is_remote(root):
        objstore.check_writable(objstore.parse(str(root)))
        return
    root = Path(root)
    if root.exists() and not root.is_dir():
        raise NotADirectoryError(f"{root} exists and is not a directory")
    check_journal_folder(root)
    make_dir(root)
    probe = root / f".probe-{os.getpid()}-{secrets.token_hex(4)}"
    fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(fd)
    probe.unlink()


def write_private(path: Path, text: str) -> None:
    """Write a text file that only its owner can read (a report holds what the dataset holds), even if it existed."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        mode = os.fstat(fd).st_mode
        if stat.S_ISREG(mode) and mode & 0o077:  # (a device or a FIFO, `-o /dev/null`, is not the report's to change)
            os.fchmod(fd, 0o600)
        f.write(text)


def dataset_salt(root: str | Path) -> bytes:
    """The per-dataset salt of the hash text policy, created once (owner-only) and shared by all writers."""
    if objstore.is_remote(root):
        return objstore.claim_once(objstore.parse(str(root)), SALT_FILE, secrets.token_hex(16)).encode()
    root = Path(root)
    path = root / SALT_FILE
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        for _ in range(50):  # another writer may be between create and write
            data = read_small(path, "salt")
            if data:
                return data
            time.sleep(0.01)
        raise OSError(f"{path} is empty; delete it to start a new salt") from None
    salt = secrets.token_hex(16).encode()
    with os.fdopen(fd, "wb") as f:
        f.write(salt)
        f.flush()
        os.fsync(f.fileno())
    return salt


def is_dataset(root: str | Path) -> bool:
    """Whether `root` holds anything a converse-tap writer makes: a table, journals, a salt, a text policy."""
    if objstore.is_remote(root):
        return objstore.exists_any(objstore.parse(str(root)), (*TABLES, SALT_FILE, TEXT_POLICY_FILE))
    root = Path(root)
    return any((root / name).exists() for name in (*TABLES, JOURNAL_DIR, SALT_FILE, TEXT_POLICY_FILE))


def dataset_text_policy(root: str | Path) -> str | None:
    """The text policy the dataset's rows were written under (`keep`/`hash`/`drop`), None before its first writer."""
    if objstore.is_remote(root):
        return (objstore.read_text(objstore.parse(str(root)), TEXT_POLICY_FILE) or "").strip() or None
    root = Path(root)
    try:
        data = read_small(root / TEXT_POLICY_FILE, "text policy")
    except OSError as e:
        raise TextPolicyUnreadable(root, f"unusable ({e})") from e
    if data is None:
        return None
    try:
        policy = data.decode("ascii").strip()
    except UnicodeDecodeError:
        raise TextPolicyUnreadable(root, "not text") from None
    if policy and policy not in TEXT_POLICIES:
        raise TextPolicyUnreadable(root, f"{policy[:40]!r}")
    return policy or None


def claim_text_policy(root: str | Path, policy: str) -> None:
    """Record `policy` as the dataset's text policy, or check it against the one recorded: every writer (the
    addon, ingest) calls this before it writes a row. Raises TextPolicyConflict when the dataset has another.
    The file appears whole (written aside, then linked into place), so a concurrent reader never sees it empty.
    On object storage the object is written once and read back (see objstore.claim_once)."""
    if objstore.is_remote(root):
        recorded: str | None = objstore.claim_once(objstore.parse(str(root)), TEXT_POLICY_FILE, policy)
        if recorded != policy:
            raise TextPolicyConflict(root, recorded or "?", policy)
        return
    root = Path(root)
    recorded = dataset_text_policy(root)
    if recorded is None:
        make_dir(root)
        tmp = root / f".{TEXT_POLICY_FILE}-{os.getpid()}-{secrets.token_hex(4)}"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(policy + "\n")
            f.flush()
            os.fsync(f.fileno())
        try:
            os.link(tmp, root / TEXT_POLICY_FILE)  # fails if another writer claimed first
            recorded = policy
        except FileExistsError:
            recorded = dataset_text_policy(root)
        finally:
            tmp.unlink()
    if recorded != policy:
        raise TextPolicyConflict(root, recorded or "?", policy)


def writer_id() -> str:
    host = "".join(c if c.isalnum() else "-" for c in socket.gethostname())[:24] or "host"
    return f"{host}-{os.getpid()}-{secrets.token_hex(4)}"


def partitions(table_name: str, table: pa.Table) -> list[tuple[str, pa.Table]]:
    """`table` cast to its schema (with the version) and split by the UTC date of its partition column."""
    if table.num_rows == 0:
        return []
    schema = with_version(TABLES[table_name])
    table = table.cast(TABLES[table_name]).replace_schema_metadata(schema.metadata)
    ts = table[PARTITION_TS[table_name]]
    dates = pc.fill_null(pc.strftime(ts, format="%Y-%m-%d"), time.strftime("%Y-%m-%d", time.gmtime()))
    return [(date, table.filter(pc.equal(dates, date))) for date in pc.unique(dates).to_pylist()]


def write_parquet(root: str | Path, table_name: str, table: pa.Table, stem: str) -> list[str]:
    """Write `table` into date partitions, each file under a dot-name first and renamed when complete; on object
    storage each file is uploaded whole (an object appears complete or not at all)."""
    if objstore.is_remote(root):
        parts = [(table_name, date, part) for date, part in partitions(table_name, table)]
        return objstore.upload_parquet(objstore.parse(str(root)), parts, stem)
    root = Path(root)
    written = []
    for date, part in partitions(table_name, table):
        folder = root / table_name / f"date={date}"
        make_dir(folder)
        final = folder / f"part-{stem}.parquet"
        tmp = folder / f".part-{stem}.parquet.tmp"
        pq.write_table(part, tmp, **parquet_options(part.schema))
        os.chmod(tmp, 0o600)
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, final)
        written.append(str(final))
    return written


class ForeignJournal(ValueError):
    """A file named like a journal that is not one a writer of this dataset made: named, never read or deleted."""


# the columns without which a file is not a table's file, whatever its version
KEY_COLUMNS = {table: ["exchange_id", PARTITION_TS[table]] for table in TABLES}
KEY_COLUMNS["messages"].append("seq")
_ARROW_CONTINUATION = b"\xff\xff\xff\xff"  # how every message of an Arrow IPC stream begins


_EXPECTED = {table: {f.name: f.type for f in schema} for table, schema in TABLES.items()}


def schema_problem(schema: pa.Schema, table: str, checked: bool = False) -> str | None:
    """Why a file of this schema is not one of `table`'s, of any version or writer (None when it is one). A
    number of a type that may not fit its column (compat.narrowing) is one only when the caller checks the values
    (`checked`: reader.foreign_reason); a journal, which no other writer makes, must have the column's width."""
    names = set(schema.names)
    missing = [c for c in KEY_COLUMNS[table] if c not in names]
    if missing:
        return _newer(schema, table, f"another schema (no {', '.join(missing)} column)")
    expected = _EXPECTED[table]
    wrong = [
        f"{f.name} is {f.type}, not {_plain(expected[f.name])}"
        for f in schema
        if f.name in expected
        and (incompatible(f.type, expected[f.name]) or (not checked and narrowing(f.type, expected[f.name])))
    ]
    problem = "wrong column types: " + "; ".join(wrong) if wrong else None
    return _newer(schema, table, problem)


def _newer(schema: pa.Schema, table: str, problem: str | None) -> str | None:
    """A file written by a newer converse-tap (its schema version above ours) is read only when it holds every
    column of ours in its type: a column it renamed or dropped would be read as all null (as for a file older than
    the column), and a figure counted from it silently wrong or zero. Said so, with what to do."""
    version = (schema.metadata or {}).get(METADATA_KEY, b"")
    if not version.isdigit() or int(version) <= SCHEMA_VERSION:
        return problem
    lacking = [name for name in _EXPECTED[table] if name not in schema.names]
    if lacking:
        problem = (problem + "; " if problem else "") + f"no {', '.join(lacking)} column"
    if problem is None:
        return None
    return (
        f"{problem}: written by a newer converse-tap (schema version {int(version)}; this one reads up to "
        f"{SCHEMA_VERSION}); upgrade converse-tap to read it"
    )


def open_regular(path: Path) -> int:
    """A descriptor of `path` when it is a regular file (not a symlink, FIFO, device or directory: a FIFO would
    block its reader for ever); ForeignJournal says what it is otherwise. What the path names is looked at before
    it is opened (opening a device acts), and again once opened."""
    mode = os.lstat(path).st_mode
    if stat.S_ISLNK(mode):
        raise ForeignJournal("a symbolic link")
    if not stat.S_ISREG(mode):
        raise ForeignJournal(file_kind(mode))
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as e:
        if e.errno == errno.ELOOP:
            raise ForeignJournal("a symbolic link") from None
        raise
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise ForeignJournal(file_kind(mode))
    return fd


def read_journal(path: Path, table: str | None = None) -> tuple[pa.Table | None, bool]:
    """Every complete batch of an Arrow IPC stream journal; the flag says whether a torn tail was cut off. Raises
    ForeignJournal when the file is not a regular file, not an Arrow stream, or (given `table`) not of that
    table's schema of any version; a journal that died before its schema was whole is (None, True)."""
    batches: list[pa.RecordBatch] = []
    torn = False
    with os.fdopen(open_regular(path), "rb") as f:
        head = f.read(len(_ARROW_CONTINUATION))
        if not _ARROW_CONTINUATION.startswith(head):
            raise ForeignJournal("not an Arrow IPC stream")
        f.seek(0)
        try:
            reader = pa.ipc.open_stream(f)
            schema = reader.schema
        except (pa.ArrowInvalid, OSError):  # not even a schema: a journal that died at birth
            return None, True
        problem = schema_problem(schema, table) if table is not None else None
        if problem is not None:
            raise ForeignJournal(f"Arrow of {problem}" if problem.startswith("another") else problem)
        while True:
            try:
                batches.append(reader.read_next_batch())
            except StopIteration:
                break
            except (pa.ArrowInvalid, OSError):
                torn = True
                break
    return pa.Table.from_batches(batches, schema=schema), torn


def conform(data: pa.Table, table: str) -> pa.Table:
    """Journaled rows of any version with the table's current columns (those a version lacks are null)."""
    have = set(data.column_names)
    schema = TABLES[table]
    arrays = [data[f.name] if f.name in have else pa.nulls(data.num_rows, f.type) for f in schema]
    return pa.Table.from_arrays(arrays, names=schema.names).cast(schema)
