"""Dataset writer: rows are journaled off the event loop every flush interval and rolled into Parquet."""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..a2a.extract import Extraction
from . import objstore
from .batches import TS_COLUMNS, UNSTORABLE, mend_rows, rows_to_batch, to_micros
from .files import JOURNAL_DIR, check_journal_folder, write_parquet, writer_id
from .gaps import CaptureGap
from .journals import Journal as _Journal  # (named so by the tests that make its appends fail)
from .journals import claim_dir, mark_rolling, release_dir, unmark_rolling
from .recovery import read_all
from .schema import TABLES

log = logging.getLogger(__name__)

_STOP = object()
Job = Callable[[], Extraction | None]


@dataclass
class WriterStats:
    exchanges: int = 0
    rows_written: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))
    rows_dropped: int = 0
    extract_failures: int = 0
    files: int = 0
    flush_failures: int = 0
    rows_rolled: dict[str, int] = field(default_factory=lambda: dict.fromkeys(TABLES, 0))  # into Parquet files
    roll_failures: int = 0  # roll-overs (uploads) that failed: their journals wait


class DatasetWriter:
    """Owns one journal directory in `root/_journal/<id>/`, locked for as long as this writer lives. For a dataset
    on object storage (`s3://…`), the journals are in `journal_dir/_journal/<id>/` on local disk (by default a
    folder named for the dataset, objstore.default_journal_dir) and each rolled file is uploaded whole; an upload
    that fails keeps its journals and is retried with backoff (1 s doubling to 60 s), under the same file name.

    `submit` is safe from any thread, never blocks and never wakes the worker: the worker thread wakes every
    `flush_interval` seconds, runs the extraction jobs queued since, appends their rows to the journals, and
    rolls the journals into Parquet
    every `rollover_rows` rows, `rollover_bytes` bytes of journal (when given) or `rollover_seconds`.
    When the disk fails, rows wait in memory (at most `max_pending_rows`; beyond that they are counted as
    dropped) and are retried every flush interval.
    """

    def __init__(
        self,
        root: str | Path,
        flush_interval: float = 1.0,
        rollover_rows: int = 250_000,
        rollover_seconds: float = 300.0,
        max_pending_rows: int = 500_000,
        on_rows: Callable[[Extraction], None] | None = None,
        rollover_bytes: int | None = None,
        journal_dir: Path | None = None,
    ) -> None:
        self.remote = objstore.is_remote(root)
        self.root: str | Path = str(root) if self.remote else Path(root)
        self.local = objstore.journal_root(root, journal_dir)  # where the journals are: the dataset, or local disk
        self.flush_interval = flush_interval
        self.rollover_rows = rollover_rows
        self.rollover_seconds = rollover_seconds
        self.rollover_bytes = rollover_bytes  # of journals: what a roll-over reads back into memory
        self.max_pending_rows = max_pending_rows
        self.on_rows = on_rows
        self.id = writer_id()
        self.dir = self.local / JOURNAL_DIR / self.id
        self._stems: dict[str, str] = {}  # a failed roll's file name, reused by its retry: overwritten, not doubled
        self._retry_at: float | None = None
        self._retry_delay = 0.0
        self.stats = WriterStats()
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._wake = threading.Event()  # set by flush and close; submit leaves the thread asleep
        self._pending: dict[str, list[dict[str, Any]]] = {t: [] for t in TABLES}
        self._journals: dict[str, _Journal] = {}
        self._journal_files: dict[str, list[Path]] = {t: [] for t in TABLES}  # written since the last rollover
        self._journal_rows: dict[Path, int] = {}  # rows appended to each of them
        self._opened = 0
        self._rolled = 0
        self._last_roll = time.monotonic()
        self._failing = False
        self._lock_fd: int | None = None
        self._thread: threading.Thread | None = None
        self._inline = False
        self._next_flush = 0.0

    # -- lifecycle ---------------------------------------------------------------------------------------
    def start(self, thread: bool = True) -> None:
        """Lock the journal directory and start the worker thread; with `thread=False`, rows are written by
        `write` in the caller's thread instead (offline ingest, where a thread hand-off only costs time)."""
        self._lock_fd = claim_dir(self.dir)
        if not thread:
            self._inline = True
            self._next_flush = time.monotonic() + self.flush_interval
            return
        self._thread = threading.Thread(target=self._run, name=f"converse-tap-writer-{self.id}", daemon=True)
        self._thread.start()

    def submit(self, job: Job | Extraction | CaptureGap) -> None:
        self._queue.put(job)

    def write(self, item: Job | Extraction | CaptureGap) -> None:
        """`submit` for a writer started with `thread=False`: take the rows now, journal them every flush
        interval, roll over as the thread would."""
        self._take(item)
        if time.monotonic() >= self._next_flush:
            self._flush_and_roll()
            self._next_flush = time.monotonic() + self.flush_interval

    def flush(self, timeout: float = 30.0) -> None:
        """Block until everything submitted so far is journaled (for tests and `done`)."""
        done = threading.Event()
        self._queue.put(done)
        self._wake.set()
        done.wait(timeout)

    def close(self) -> None:
        """Drain the queue, roll everything into Parquet, remove the journal directory."""
        if self._thread is not None:
            self._queue.put(_STOP)
            self._wake.set()
            self._thread.join()
            self._thread = None
        elif self._inline:
            self._inline = False
            self._flush()
            self._rollover()
        else:
            return
        if any(self._pending.values()):
            log.error(
                "converse-tap: %d rows could not be written to %s and are lost",
                sum(map(len, self._pending.values())),
                self.root,
            )
            self.stats.rows_dropped += sum(map(len, self._pending.values()))
        waiting = sum(self._journal_rows.get(p, 0) for paths in self._journal_files.values() for p in paths)
        if self.remote and waiting:
            log.error(
                "converse-tap: %d rows could not be uploaded to %s; they wait in %s for "
                "`converse-tap recover %s --journal-dir %s`",
                waiting,
                self.root,
                self.dir,
                self.root,
                self.local,
            )
        if not any(self._pending.values()) and not any(self._journal_files.values()):  # else: for `recover`
            release_dir(self.dir, self._lock_fd)  # (removed before its lock is let go: never seen unlocked)
        elif self._lock_fd is not None:
            os.close(self._lock_fd)
        self._lock_fd = None

    # -- worker ------------------------------------------------------------------------------------------
    def _run(self) -> None:
        """Wake once per flush interval (or when `flush`/`close` ask), then take everything queued in one go:
        `submit` never wakes this thread, so the proxy pays no thread switch per exchange."""
        next_flush = time.monotonic() + self.flush_interval
        while True:
            self._wake.wait(timeout=max(0.0, next_flush - time.monotonic()))
            self._wake.clear()
            waiting: list[threading.Event] = []
            stop = False
            while not stop:
                try:
                    item = self._queue.get_nowait()
                except queue.Empty:
                    break
                if item is _STOP:
                    stop = True
                elif isinstance(item, threading.Event):
                    waiting.append(item)
                else:
                    self._take(item)
            if stop:
                self._flush()
                self._rollover()
                for event in waiting:
                    event.set()
                return
            if waiting or time.monotonic() >= next_flush:
                self._flush_and_roll()
                next_flush = time.monotonic() + self.flush_interval
            for event in waiting:
                event.set()

    def _flush_and_roll(self) -> None:
        self._flush()
        if self._rollover_due():
            self._rollover()

    def _take(self, item: Job | Extraction | CaptureGap) -> None:
        if isinstance(item, CaptureGap):
            rows = [item.row()]
            to_micros(rows, TS_COLUMNS["capture_gaps"])
            self._pending["capture_gaps"].extend(rows)
            return
        try:
            ext = item() if callable(item) else item
        except Exception:  # a bug in extraction must cost one exchange, never the writer
            self.stats.extract_failures += 1
            if self.stats.extract_failures == 1:
                log.exception("converse-tap: extraction failed; the exchange is skipped (logged once)")
            return
        if ext is None:
            return
        self.stats.exchanges += 1
        for table, rows in (
            ("exchanges", [ext.exchange]),
            ("messages", ext.messages),
            ("agent_cards", ext.agent_cards),
        ):
            to_micros(rows, TS_COLUMNS[table])  # once, as rows arrive: a failed flush retries the same rows
            self._pending[table].extend(rows)
        if self.on_rows is not None:
            try:
                self.on_rows(ext)
            except Exception:
                log.exception("converse-tap: row callback failed")
        pending = sum(map(len, self._pending.values()))
        if pending > self.max_pending_rows:
            # only reachable while the disk fails: keep the newest rows, count what goes
            for rows in self._pending.values():
                over = len(rows) - self.max_pending_rows // len(TABLES)
                if over > 0:
                    del rows[:over]
                    self.stats.rows_dropped += over

    def _flush(self) -> None:
        for table, rows in self._pending.items():
            if not rows:
                continue
            try:
                batch = self._batch(table, rows)
                if batch is None:
                    continue
                journal = self._journals.get(table)
                if journal is not None and not journal.path.exists():  # the directory was removed under us
                    with contextlib.suppress(OSError):
                        journal.close()
                    del self._journals[table]
                    self._forget_vanished(table)
                    journal = None
                if journal is None:
                    check_journal_folder(self.local)  # replaced by a link since: not followed
                    if not self.dir.is_dir():  # (removed under us: made again, and locked, as at the start)
                        if self._lock_fd is not None:
                            os.close(self._lock_fd)
                        self._lock_fd = None
                        self._lock_fd = claim_dir(self.dir)
                    self._opened += 1
                    path = self.dir / f"{table}-{self._opened:06d}.arrows"
                    journal = self._journals[table] = _Journal(path, TABLES[table])
                    self._journal_files[table].append(path)
                journal.append(batch)
                self._journal_rows[journal.path] = journal.rows
            except OSError as e:
                self.stats.flush_failures += 1
                if not self._failing:
                    log.error(
                        "converse-tap: cannot write to %s (%s); traffic is unaffected, %d rows are held in "
                        "memory and retried every %.1fs",
                        self.dir,
                        e,
                        sum(map(len, self._pending.values())),
                        self.flush_interval,
                    )
                self._failing = True
                broken = self._journals.pop(table, None)
                if broken is not None:
                    with contextlib.suppress(OSError):
                        broken.close()
                    if not broken.rows:  # it holds no row: removed, not one more torn file per retry of a full disk
                        with contextlib.suppress(OSError):
                            broken.path.unlink()
                        self._journal_files[table] = [p for p in self._journal_files[table] if p != broken.path]
                        self._journal_rows.pop(broken.path, None)
                return
            self.stats.rows_written[table] += len(rows)
            rows.clear()
        if self._failing and not any(self._pending.values()):
            log.warning("converse-tap: writing to %s works again; held rows are saved", self.dir)
            self._failing = False

    def _batch(self, table: str, rows: list[dict[str, Any]]) -> pa.RecordBatch | None:
        """The rows as one batch. One odd value must cost only its own row: when the batch does not build,
        the rows are tried one by one, mending what does not fit (and saying so in the row's anomalies)."""
        schema = TABLES[table]
        try:
            return rows_to_batch(rows, schema)
        except UNSTORABLE:
            pass
        kept = mend_rows(rows, schema)
        self.stats.rows_dropped += len(rows) - len(kept)
        rows[:] = kept
        if not kept:
            return None
        try:
            return rows_to_batch(kept, schema)
        except UNSTORABLE:
            log.exception("converse-tap: %d %s rows do not fit the schema and are dropped", len(kept), table)
            self.stats.rows_dropped += len(kept)
            rows.clear()
            return None

    def poll(self) -> None:
        """For a writer started with `thread=False`: journal and roll over if due, while no rows arrive."""
        if self._inline and time.monotonic() >= self._next_flush:
            self._flush_and_roll()
            self._next_flush = time.monotonic() + self.flush_interval

    def _forget_vanished(self, table: str) -> None:
        """Journals whose files were removed under us (the directory deleted): count their rows as lost, loudly."""
        paths = self._journal_files[table]
        gone = [p for p in paths if not p.exists()]
        if gone:
            lost = sum(self._journal_rows.pop(p, 0) for p in gone)
            self.stats.rows_dropped += lost
            log.error("converse-tap: %s vanished with %d journaled %s rows; they are lost", self.dir, lost, table)
            paths[:] = [p for p in paths if p not in gone]

    def _rollover_due(self) -> bool:
        rows = sum(j.rows for j in self._journals.values())
        journal_bytes = sum(j.file.tell() for j in self._journals.values()) if self.rollover_bytes else 0
        if rows > 0 and self.rollover_bytes and journal_bytes >= self.rollover_bytes:
            return True
        if self._retry_at is not None and time.monotonic() >= self._retry_at:
            return True  # journals whose upload failed, due for another attempt
        return rows >= self.rollover_rows or (rows > 0 and time.monotonic() - self._last_roll >= self.rollover_seconds)

    def _rollover(self) -> None:
        failed = False
        journals, self._journals = self._journals, {}
        for journal in journals.values():
            with contextlib.suppress(OSError):
                journal.close()
        for table, paths in self._journal_files.items():
            if not paths:
                continue
            self._forget_vanished(table)
            if not paths or failed:  # the storage failed for one table: the others wait for the same retry
                continue
            stem = self._stems.get(table) or f"{int(time.time() * 1000)}-{self.id}-{self._rolled}"
            try:
                mark_rolling(self.dir, table, stem)  # for `recover`, should this process die before the journals go
                data = read_all(paths)
                if data is not None:
                    self.stats.files += len(write_parquet(self.root, table, data, stem))
                    self.stats.rows_rolled[table] += data.num_rows
                for path in paths:
                    path.unlink(missing_ok=True)
                    self._journal_rows.pop(path, None)
                paths.clear()
                self._stems.pop(table, None)
                unmark_rolling(self.dir, table)
            except OSError as e:  # the journals stay, and recovery will pick them up
                self.stats.roll_failures += 1
                self._stems[table] = stem  # (files of some date partitions may be written: the retry overwrites them)
                if self.remote:
                    failed = True
                log.error(
                    "converse-tap: cannot roll %s journals into Parquet (%s); %s",
                    table,
                    e,
                    "the upload is retried" if self.remote else "they will be recovered",
                )
        if failed:
            self._retry_delay = min(max(1.0, self._retry_delay * 2), 60.0)
            self._retry_at = time.monotonic() + self._retry_delay
        else:
            self._retry_at, self._retry_delay = None, 0.0
        self._rolled += 1
        self._last_roll = time.monotonic()
