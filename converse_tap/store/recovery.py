"""Recovery: journals left by writers that died (SIGKILL, the OOM killer, a lost machine) rolled into Parquet."""

from __future__ import annotations

import fcntl
import logging
import os
import shutil
import time
from pathlib import Path

import pyarrow as pa

from . import objstore
from .files import JOURNAL_DIR, read_journal, write_parquet
from .schema import TABLES

log = logging.getLogger("converse_tap.store.writer")


def recover(root: str | Path, journal_dir: Path | None = None, errors: list[str] | None = None) -> dict[str, int]:
    """Roll journals left by writers that died into Parquet (on object storage: upload them; the journals are in
    `journal_dir`, by default objstore.default_journal_dir). Journals of live writers are left alone. A table whose
    upload fails keeps its journals for the next recovery and is named in `errors`."""
    recovered = dict.fromkeys(TABLES, 0)
    remote = objstore.is_remote(root)
    base = objstore.journal_root(root, journal_dir) / JOURNAL_DIR
    if not base.is_dir():
        return recovered
    for d in sorted(base.iterdir()):
        if not d.is_dir():
            continue
        lock = d / "lock"
        try:
            fd = os.open(lock, os.O_WRONLY | os.O_CREAT, 0o600)
        except OSError:
            continue
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # its writer is alive
            kept = False
            for table in TABLES:
                paths = sorted(d.glob(f"{table}-*.arrows"))
                data = read_all(paths)
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
            if not kept:
                shutil.rmtree(d, ignore_errors=True)
        finally:
            os.close(fd)
    return recovered


def read_all(paths: list[Path]) -> pa.Table | None:
    tables = []
    for path in paths:
        data, torn = read_journal(path)
        if torn:
            log.warning("converse-tap: %s ends mid-batch; its complete batches are kept", path)
        if data is not None:
            tables.append(data)
    return pa.concat_tables(tables) if tables else None
