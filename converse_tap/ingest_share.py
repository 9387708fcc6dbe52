"""Ingest of one share of the input in one process: read its parts (flow files record by record, HAR files entry by
entry), skip the flows already seen, extract, and write rows in batches of bounded size through one writer. Used
in-process for a single share and in each worker process of a parallel ingest (`ingest`)."""

from __future__ import annotations

import atexit
import contextlib
import multiprocessing
import os
import signal
import sys
import threading
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from . import flowfile, flowids, gcpolicy, harentry, harfile, mempolicy
from .a2a.exchange import HttpExchange
from .a2a.extract import Extraction, extract
from .a2a.redact import NO_OPERATOR_PATTERNS, Redaction, TextPolicy
from .ingest_plan import NOT_A_CAPTURE, IngestError, Part
from .nopandas import keep_pandas_out
from .seen import SeenIds, digest
from .store.files import read_journal
from .store.writer import DatasetWriter

BATCH_EXCHANGES = 2048  # rows are journaled at least this often...
BATCH_BYTES = 16 * 1024 * 1024  # ...and after this many bytes of bodies read
ROLLOVER_ROWS = 1_000_000
ROLLOVER_BYTES = 16 * 1024 * 1024  # of journal: the size of what a roll-over reads back into memory
NOT_STORED = "response_body_not_stored"
LISTED = 20  # unreadable records (flows, HAR entries) named one by one, per process; the rest are counted


@dataclass
class IngestResult:
    files: int = 0
    flows: int = 0
    exchanges: int = 0
    errors: list[IngestError] = field(default_factory=list)
    skipped: int = 0  # records (flows, HAR entries) that could not be read, each costing only itself
    unlisted: int = 0  # of those, the ones past the first LISTED, not in `errors`
    duplicates: int = 0  # flows whose exchange was already in the dataset or earlier in the input
    not_stored: int = 0  # exchanges whose response body the capture does not hold (streamed, not stored)
    unwritten: int = 0  # rows that could not be written (the disk failed) and are lost
    waiting: dict[Path, int] = field(default_factory=dict)  # journal directory -> rows waiting for `recover`
    write_error: str | None = None  # why writing stopped
    interrupted: bool = False
    parquet_files: int = 0
    empty: list[Path] = field(default_factory=list)  # input files of no bytes
    # flows whose id an earlier share's records hold, (path, record offset, digest): read at the end (`ingest`)
    # unless that share wrote it (its record with that id may be unreadable, or not an exchange)
    deferred: list[tuple[Path, int, int]] = field(default_factory=list)
    # what the records read held that ingest does not read: flows of another type than HTTP (tcp, udp, dns), by
    # type; and the HTTP flows (HAR entries) with WebSocket messages, and those messages (their handshakes are read)
    not_http: dict[str, int] = field(default_factory=dict)
    websocket_flows: int = 0
    websocket_messages: int = 0

    def unread(self, not_http: dict[str, int], websocket: list[int]) -> None:
        """Count what a part's records held that ingest does not read (`flowfile.Position`, `harfile.HarPosition`)."""
        for kind, n in not_http.items():
            self.not_http[kind] = self.not_http.get(kind, 0) + n
        self.websocket_flows += websocket[0]
        self.websocket_messages += websocket[1]


class _Writer(DatasetWriter):
    """The dataset writer, run inline, journaling in batches of bounded size (not only every flush interval)."""

    def flush_now(self, coming: int = 0) -> None:
        """Journal the pending rows and roll over if due; the journals are rolled over first when `coming` bytes
        more would take them past `rollover_bytes`, so that a roll-over reads back at most that, or one batch."""
        journal = sum(j.file.tell() for j in self._journals.values())
        if journal and self.rollover_bytes and journal + coming > self.rollover_bytes:
            self._rollover()
        self._flush_and_roll()

    @property
    def failing(self) -> bool:
        return self._failing


class _StopWriting(Exception):
    pass


@dataclass
class Share:
    """What one process ingests, and what it reports back (picklable)."""

    parts: list[Part]
    out: str | Path  # a directory, or s3://BUCKET/PREFIX
    policy: TextPolicy
    max_body: int
    known: np.ndarray
    redaction: Redaction = NO_OPERATOR_PATTERNS
    before: list[Part] = field(default_factory=list)  # flow-file parts of earlier shares: their ids are taken
    result: IngestResult = field(default_factory=IngestResult)
    slot: int = -1
    journal_dir: Path | None = None  # local journals of a dataset on object storage (None: its default folder)
    keep_ids: bool = False  # hand back the digests of the flows read: a later round of the input needs them


_PROGRESS: Any = None  # shared counters of a worker process: bytes read, flows, per share


_INTERRUPTED = threading.Event()  # Ctrl-C, taken between two exchanges: never inside the writer


def _on_sigint(_signum: int, _frame: Any) -> None:
    _INTERRUPTED.set()


@contextlib.contextmanager
def sigint_between_exchanges() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _INTERRUPTED.clear()
    previous = signal.signal(signal.SIGINT, _on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def sigint_received() -> bool:
    return _INTERRUPTED.is_set()


def init_worker(progress: Any) -> None:
    signal.signal(signal.SIGINT, _on_sigint)
    global _PROGRESS
    _PROGRESS = progress
    keep_pandas_out()  # a worker process only ingests
    if multiprocessing.parent_process() is not None:
        atexit.register(_exit_now)


def _exit_now() -> None:
    """A worker's exit, once its executor lets it go: its files are closed and its result sent, so nothing is left
    to tear down, and tearing down its interpreter (every module's objects freed) took 80 ms of the ingest's end."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


class Run:
    """Ingest of one share in this process: read, skip duplicates, extract, write in bounded batches."""

    def __init__(self, share: Share, report: Callable[[int, int], None] | None) -> None:
        self.share, self.report = share, report
        self.result = share.result
        self.seen = SeenIds(share.known)
        self.earlier = SeenIds()  # ids of the records of earlier shares
        for part in share.before:
            for fid in flowids.ids(part.path, part.start, part.end):
                self.earlier.add(digest(fid))
        self.record: Callable[[], tuple[Path, int]] | None = None  # where the flow being read is (flow files)
        self.writer: _Writer | None = None
        self.elsewhere: set[int] = set()  # digests of the entries of a striped HAR that other stripes read
        self.added = array("Q") if share.keep_ids else None  # digests of the flows read, for a later round
        self.done_bytes = 0  # of parts finished
        self.batch_n = self.batch_bytes = 0

    def run(self) -> IngestResult:
        with gcpolicy.fewer_collections(), mempolicy.returning_memory():
            return self._run()

    def _run(self) -> IngestResult:
        try:
            for part in self.share.parts:
                try:
                    self._part(part)
                except IngestError as e:
                    self.result.errors.append(e)
                self.done_bytes += part.size()
        except _StopWriting:
            pass
        except KeyboardInterrupt:
            self.result.interrupted = True
        finally:
            self._close()
        return self.result

    def _part(self, part: Part) -> None:
        if part.har:
            hpos = harfile.HarPosition()
            stripe = _Stripe(part.stripe, part.stripes)
            self.elsewhere = stripe.elsewhere
            try:
                with contextlib.closing(harentry.Attachments(part.attachments or part.path.parent)) as attached:
                    source = _har_exchanges(part.path, self.share.max_body, hpos, self._skipped, attached, stripe)
                    self._read(source, lambda: hpos.offset // part.stripes)
            finally:
                self.elsewhere = set()
                self.result.unread({}, hpos.websocket)
        else:
            fpos = flowfile.Position(flows=part.before)

            def skipped(offset: int, reason: str) -> None:
                self._skipped(IngestError(part.path, f"byte {offset} (flow {fpos.flows + 1})", reason))

            source = flowfile.read(part.path, self.share.max_body, part.start, part.end, fpos, skipped)
            self.record = lambda: (part.path, fpos.record)
            try:
                self._read(source, lambda: fpos.offset - part.start)
            except flowfile.Damaged as e:
                reason = f"{e.reason}; {NOT_A_CAPTURE}" if e.offset == 0 else e.reason
                raise IngestError(part.path, f"byte {e.offset} (after flow {fpos.flows})", reason) from e
            finally:
                self.record = None
                self.result.unread(fpos.not_http, fpos.websocket)
        if self.report is not None:
            self.report(self.done_bytes + part.size(), self.result.flows)

    def added_ids(self) -> np.ndarray:
        return np.frombuffer(self.added, dtype=np.uint64) if self.added else np.empty(0, dtype=np.uint64)

    def _skipped(self, error: IngestError) -> None:
        """A record that could not be read: named (the first LISTED), counted, and the next one read."""
        self.result.skipped += 1
        if self.result.skipped > LISTED:
            self.result.unlisted += 1
        else:
            self.result.errors.append(error)

    def _read(self, source: Iterator[HttpExchange], where: Callable[[], int]) -> None:
        for n, ex in enumerate(source, 1):
            if _INTERRUPTED.is_set():
                raise KeyboardInterrupt
            self.result.flows += 1
            self._one(ex)
            if n % 256 == 0 and self.report is not None:
                self.report(self.done_bytes + where(), self.result.flows)

    def _one(self, ex: HttpExchange) -> None:
        h = digest(ex.id)
        if h in self.elsewhere or not self.seen.add(h):
            self.result.duplicates += 1
            return
        if h in self.earlier:
            if self.record is not None:
                self.result.deferred.append((*self.record(), h))
                return
            self.result.duplicates += 1  # (a HAR entry of a flow's id)
            return
        if self.added is not None:
            self.added.append(h)
        extraction = extract(ex, self.share.policy, redaction=self.share.redaction)
        if extraction is None:
            return
        if NOT_STORED in extraction.exchange["anomalies"]:
            self.result.not_stored += 1
            extraction.exchange["complete"] = False  # a stream whose events the capture lacks is not a complete one
            if extraction.exchange["streamed"]:
                extraction.exchange["sse_events"] = None
        self.result.exchanges += 1
        self._write(extraction, (ex.bytes_in or 0) + (ex.bytes_out or 0))

    def _write(self, extraction: Extraction, size: int) -> None:
        if self.writer is None:
            self.writer = _Writer(
                self.share.out,
                flush_interval=1.0,
                rollover_rows=ROLLOVER_ROWS,
                rollover_seconds=24 * 3600,
                rollover_bytes=ROLLOVER_BYTES,
                journal_dir=self.share.journal_dir,
            )
            self.writer.start(thread=False)
        if self.batch_n and self.batch_bytes + size > BATCH_BYTES:  # a batch holds BATCH_BYTES, or one exchange
            self._flush()
        self.writer.write(extraction)
        self.batch_n += 1
        self.batch_bytes += size
        if self.batch_n >= BATCH_EXCHANGES or self.batch_bytes >= BATCH_BYTES:
            self._flush()

    def _flush(self) -> None:
        assert self.writer is not None
        self.writer.flush_now(self.batch_bytes)
        self.batch_n = self.batch_bytes = 0
        if self.writer.failing:  # the disk is full or failing: stop reading rather than hold rows in memory
            self.result.write_error = f"cannot write to {self.share.out}"
            raise _StopWriting

    def _close(self) -> None:
        w = self.writer
        if w is None:
            return
        w.close()
        self.result.parquet_files += w.stats.files
        self.result.unwritten += w.stats.rows_dropped
        if w.dir.is_dir():  # journals the roll-over could not turn into Parquet: `recover` will
            rows = 0
            for path in w.dir.glob("*.arrows"):
                data, _torn = read_journal(path)
                rows += data.num_rows if data is not None else 0
            if rows:
                self.result.waiting[w.dir] = rows
        if w.stats.rows_dropped or self.result.waiting:
            self.result.write_error = self.result.write_error or f"cannot write to {self.share.out}"


@dataclass
class _Stripe:
    """Which entries of a HAR this process converts: i % stripes == stripe. The digests of the others' entries
    are kept in `elsewhere`, so that an entry repeating one that another stripe reads earlier in the file is a
    duplicate here, as it is to a single process reading the whole file."""

    stripe: int = 0
    stripes: int = 1
    elsewhere: set[int] = field(default_factory=set)

    def mine(self, i: int, entry: Any, size: int) -> bool:
        if self.stripes == 1 or i % self.stripes == self.stripe:
            return True
        if not isinstance(entry, harfile.Unreadable):
            with contextlib.suppress(Exception):  # an entry no id can be made of is no exchange anywhere
                self.elsewhere.add(digest(harentry.entry_id(entry, size)))
        return False


def _har_exchanges(
    path: Path,
    max_body: int,
    pos: harfile.HarPosition,
    skipped: Callable[[IngestError], None],
    attached: harentry.Attachments | None = None,
    stripe: _Stripe | None = None,
) -> Iterator[HttpExchange]:
    """The exchanges of a HAR's entries; an entry that cannot be one costs only itself (`skipped` is told).
    With `stripe`, only that stripe's entries; a file that stops being readable is reported by stripe 0 alone."""
    stripe = stripe or _Stripe()
    i = -1
    try:
        for i, entry in enumerate(harfile.entries(path, pos)):
            if not stripe.mine(i, entry, pos.size):
                continue
            if isinstance(entry, harfile.Unreadable):
                skipped(IngestError(path, f"log.entries[{i}]", f"unreadable entry ({entry.reason})"))
                continue
            try:
                ex = harentry.exchange(entry, max_body, pos.size, attached)
            except Exception as e:  # mitmproxy's importer raises whatever a malformed entry provokes
                why = "nested too deep" if isinstance(e, RecursionError) else f"{type(e).__name__}: {str(e)[:200]}"
                skipped(IngestError(path, f"log.entries[{i}]", f"malformed entry ({why})"))
                continue
            messages = entry.get("_webSocketMessages")  # (Chrome's: the handshake is the entry, read as one)
            if isinstance(messages, list):
                pos.websocket[0] += 1
                pos.websocket[1] += len(messages)
            del entry, messages  # a large entry is not held while its exchange is extracted and written
            yield ex
    except harfile.HarError as e:
        if stripe.stripe != 0:
            return
        position = e.position if i < 0 or not e.position.startswith("log.") else f"log.entries[{i + 1}]"
        reason = e.reason if pos.started else f"{e.reason}; {NOT_A_CAPTURE}"
        raise IngestError(path, position, reason) from e


def run_share(share: Share) -> tuple[IngestResult, np.ndarray]:
    """In a worker process: its result, and the digests of the flows it read if the share keeps them."""
    progress = _PROGRESS

    def report(done: int, flows: int) -> None:
        if progress is not None:
            progress[2 * share.slot] = done
            progress[2 * share.slot + 1] = flows
            if progress[len(progress) - 1]:  # the ingest was interrupted: stop between two exchanges
                _INTERRUPTED.set()

    run = Run(share, report)
    return run.run(), run.added_ids()
