"""Datasets on S3-compatible object storage (`s3://BUCKET/PREFIX`), through pyarrow's S3 filesystem.

The layout under the prefix is the local one (`<table>/date=YYYY-MM-DD/part-*.parquet`, `_text_policy`, `_salt`);
journals stay on local disk (`journal_dir`). A Parquet file is uploaded whole in one PUT (an object appears
complete or not at all, so readers never see half a file), under a name that holds host, pid and a random token.
Configuration is the standard AWS one: `AWS_ENDPOINT_URL_S3` / `AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY` (and `AWS_SESSION_TOKEN`), `AWS_REGION` / `AWS_DEFAULT_REGION`. Nothing here stores a
credential.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import threading
import time
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from .schema import parquet_options

log = logging.getLogger(__name__)

SCHEME = "s3://"
UPLOAD_ATTEMPTS = 3  # in one roll-over; after that the journals wait and the writer retries with backoff
UPLOAD_BACKOFF = 0.2  # seconds before the second attempt, doubled for each further one


BUCKET_REFUSED = frozenset("@:?#[]{}*,;'\"\\ %") | {chr(c) for c in range(32)}  # in no bucket's name


def is_remote(root: object) -> bool:
    """Whether a dataset location names object storage (`s3://…`) rather than a local directory."""
    return isinstance(root, str) and root.startswith(SCHEME)


@dataclass(frozen=True)
class Remote:
    """A dataset under `s3://bucket/prefix` (prefix without leading or trailing slash, possibly empty)."""

    bucket: str
    prefix: str

    @property
    def url(self) -> str:
        return f"{SCHEME}{self.bucket}/{self.prefix}" if self.prefix else f"{SCHEME}{self.bucket}"

    def path(self, *parts: str) -> str:
        """The pyarrow filesystem path (`bucket/prefix/parts…`) of something in the dataset."""
        return "/".join(p for p in (self.bucket, self.prefix, *parts) if p)

    @property
    def fs(self) -> pafs.S3FileSystem:
        return _filesystem(*_settings())

    def __str__(self) -> str:
        return self.url


def parse(url: str) -> Remote:
    """`s3://BUCKET/PREFIX` -> Remote; a ValueError says what is wrong with any other text."""
    if not is_remote(url):
        raise ValueError(f"{url!r} is not an s3://BUCKET/PREFIX address")
    what = f"{url!r} is not an s3://BUCKET/PREFIX address (a bucket name, then an optional prefix)"
    # not urlsplit: a key may hold `?`, `#` or `[` (`s3://b/runs?/x` is a prefix, not a query), none of which a
    # bucket's name may
    bucket, _, prefix = url.removeprefix(SCHEME).partition("/")
    prefix = prefix.strip("/")
    if not bucket or BUCKET_REFUSED & set(bucket):
        raise ValueError(what)
    if any(seg in ("", ".", "..") for seg in prefix.split("/")) and prefix:
        raise ValueError(f"{url!r}: the prefix has an empty, '.' or '..' segment")
    return Remote(bucket, prefix)


def _settings() -> tuple[str | None, str]:
    endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None
    region = os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION") or "us-east-1"
    return endpoint, region


@lru_cache(maxsize=8)
def _filesystem(endpoint: str | None, region: str) -> pafs.S3FileSystem:
    """One S3 filesystem per endpoint and region. Credentials come from the AWS SDK's own chain (environment,
    profile, instance role): they are never passed through, logged or stored here."""
    options: dict[str, object] = {
        "region": region,
        "connect_timeout": 5,
        "request_timeout": 30,
        "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=2),
        "allow_delayed_open": True,  # a small file goes up in one PutObject when it is closed
        "background_writes": False,  # an upload that fails, fails in the call that writes it
    }
    if endpoint:
        split = urlsplit(endpoint if "://" in endpoint else f"https://{endpoint}")
        options["scheme"] = split.scheme or "https"
        options["endpoint_override"] = split.netloc
    return pafs.S3FileSystem(**options)


def describe(e: BaseException) -> str:
    """An S3 error's first line, without the SDK's request ids."""
    text = str(e).strip().splitlines()
    return text[0] if text else type(e).__name__


# -- local journals ------------------------------------------------------------------------------------------------


def default_journal_dir(remote: Remote) -> Path:
    """The local folder named for the dataset where its writers journal (under the user's cache directory). A
    prefix whose folder name is not itself (a character replaced, or `__` standing for `/`) is told apart from
    the others of that name by a digest: `a b`, `a_b` and `a/b` journal in three folders, never in one."""
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    joined = remote.prefix.replace("/", "__")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in joined)
    if safe != joined or "__" in remote.prefix or len(safe) > 200:
        safe = f"{safe[:150]}-{hashlib.sha256(remote.prefix.encode('utf-8')).hexdigest()[:12]}"
    return Path(cache) / "converse-tap" / "journals" / remote.bucket / (safe or "_root")


def location(root: str | Path) -> str | Path:
    """A dataset location as the store takes it: the `s3://…` text, or a local Path."""
    return str(root) if is_remote(root) else Path(root)


def journal_root(root: str | Path, journal_dir: Path | None = None) -> Path:
    """Where a dataset's writers keep `_journal/`: the dataset directory itself, or for object storage
    `journal_dir` (default: default_journal_dir)."""
    if not is_remote(root):
        return Path(root)
    return Path(journal_dir) if journal_dir is not None else default_journal_dir(parse(str(root)))


# -- checks, metadata ------------------------------------------------------------------------------------------------


def check_writable(remote: Remote) -> None:
    """Raise OSError with a plain message when the bucket cannot be reached or written."""
    probe = remote.path(f".probe-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        with remote.fs.open_output_stream(probe) as f:
            f.write(b"")
        remote.fs.delete_file(probe)
    except (OSError, pa.ArrowException) as e:
        raise OSError(f"cannot write to {remote.url}: {describe(e)}") from e


def read_text(remote: Remote, name: str) -> str | None:
    try:
        with remote.fs.open_input_stream(remote.path(name)) as f:
            return bytes(f.read()).decode("utf-8")
    except FileNotFoundError:
        return None


def put_bytes(remote: Remote, key: str, data: bytes | pa.Buffer, attempts: int = UPLOAD_ATTEMPTS) -> None:
    """One object, written whole; retried with backoff, then the last error raised (as OSError)."""
    delay = UPLOAD_BACKOFF
    for attempt in range(1, attempts + 1):
        try:
            with remote.fs.open_output_stream(remote.path(key)) as f:
                f.write(data)
            return
        except (OSError, pa.ArrowException) as e:
            if attempt == attempts:
                raise OSError(f"cannot upload {remote.url}/{key}: {describe(e)}") from e
            time.sleep(delay)
            delay *= 2


def claim_once(remote: Remote, name: str, value: str) -> str:
    """The value of the metadata object `name`, written as `value` when absent. S3 has no create-if-absent that
    pyarrow offers: two writers starting in the same instant may both write; each then reads back and follows
    what is there (the last write), so they agree once both have read. Start one writer first to avoid the race."""
    found = read_text(remote, name)
    if found:
        return found.strip()
    put_bytes(remote, name, (value + "\n").encode("utf-8"))
    return (read_text(remote, name) or value).strip()


def delete_quietly(remote: Remote, names: tuple[str, ...]) -> None:
    """Remove these objects of the dataset where they exist (best effort: a clean-up, never a failure)."""
    for name in names:
        try:
            remote.fs.delete_file(remote.path(name))
        except (OSError, pa.ArrowException):
            continue


def exists_any(remote: Remote, names: tuple[str, ...]) -> bool:
    """Whether any of these exist under the prefix; FileNotFoundError when the bucket itself does not."""
    infos = remote.fs.get_file_info([remote.path(n) for n in names])
    if any(i.type != pafs.FileType.NotFound for i in infos):
        return True
    if remote.fs.get_file_info(remote.bucket).type == pafs.FileType.NotFound:
        raise FileNotFoundError(f"the bucket {remote.bucket!r} does not exist (or is not visible to these credentials)")
    return False


# -- Parquet files ----------------------------------------------------------------------------------------------------


def upload_parquet(remote: Remote, parts: list[tuple[str, str, pa.Table]], stem: str) -> list[str]:
    """Each (table, date, rows) encoded in memory and uploaded whole as `<table>/date=<date>/part-<stem>.parquet`.
    The same stem gives the same key: a roll-over retried after a partial failure overwrites, never duplicates."""
    written = []
    for table_name, date, part in parts:
        sink = pa.BufferOutputStream()
        pq.write_table(part, sink, **parquet_options(part.schema))
        key = f"{table_name}/date={date}/part-{stem}.parquet"
        put_bytes(remote, key, sink.getvalue())
        written.append(remote.path(key))
    return written


def list_files(remote: Remote, folder: str) -> list[pafs.FileInfo]:
    """Every object under `prefix/folder/` (none when the folder does not exist)."""
    try:
        infos = remote.fs.get_file_info(pafs.FileSelector(remote.path(folder), recursive=True, allow_not_found=True))
    except FileNotFoundError:
        return []
    return sorted((i for i in infos if i.type == pafs.FileType.File), key=lambda i: i.path)


# -- DuckDB ------------------------------------------------------------------------------------------------------------

DUCKDB_PROTOCOL = "convtaps3"  # not s3://: DuckDB would want its httpfs extension for that, fetched at run time


def duckdb_path(path: str) -> str:
    """The name under which DuckDB reads an object through `register_duckdb` (a pyarrow path `bucket/key`)."""
    return f"{DUCKDB_PROTOCOL}://{path}"


class PositionalFile:
    """An object opened for DuckDB, which reads it from several threads at once.

    DuckDB's Python filesystem reads "n bytes at offset o" as `seek(o)` then `read(n)` on one handle shared by its
    threads, so two threads can interleave and each read the other's bytes: a Parquet footer that does not parse, a
    page that does not decompress, or worse a page that does and sums to a wrong figure. Here each thread keeps its
    own position and every read is a positional `read_at` on pyarrow's random-access file, which is thread-safe."""

    def __init__(self, raw: pa.NativeFile) -> None:
        self._raw = raw
        self._size = raw.size()
        self._local = threading.local()

    def _pos(self) -> int:
        return getattr(self._local, "pos", 0)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        base = {os.SEEK_SET: 0, os.SEEK_CUR: self._pos(), os.SEEK_END: self._size}[whence]
        if base + offset < 0:
            raise ValueError(f"negative position {base + offset}")
        self._local.pos = base + offset
        return self._local.pos

    def tell(self) -> int:
        return self._pos()

    def read(self, size: int = -1) -> bytes:
        pos = self._pos()
        n = max(0, self._size - pos) if size is None or size < 0 else min(size, max(0, self._size - pos))
        data = self._raw.read_at(n, pos) if n else b""
        self._local.pos = pos + len(data)
        return bytes(data)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    @property
    def size(self) -> int:
        return self._size

    @property
    def closed(self) -> bool:
        return bool(self._raw.closed)

    def close(self) -> None:
        self._raw.close()

    def __enter__(self) -> PositionalFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def register_duckdb(con: object) -> None:
    """Let DuckDB read `convtaps3://bucket/key` through pyarrow's S3 filesystem (via fsspec's wrapper): no DuckDB
    extension, so nothing is downloaded at run time. Objects open as `PositionalFile`s, safe under DuckDB's threads."""
    from fsspec.implementations.arrow import ArrowFSWrapper

    class _Fs(ArrowFSWrapper):
        protocol = DUCKDB_PROTOCOL

        @classmethod
        def _strip_protocol(cls, path: str) -> str:
            path = path.removeprefix(f"{DUCKDB_PROTOCOL}://")
            return path.rstrip("/")

        def _open(self, path: str, mode: str = "rb", *args: object, **kwargs: object) -> object:
            if mode != "rb":  # DuckDB only reads here
                raise ValueError(f"{DUCKDB_PROTOCOL}:// is read-only, not {mode!r}")
            return PositionalFile(self.fs.open_input_file(path))

    con.register_filesystem(_Fs(_filesystem(*_settings())))  # type: ignore[attr-defined]
