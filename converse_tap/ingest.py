"""Offline ingest: mitmproxy flow files and HAR files through the same extractor, into the same dataset.

Memory stays bounded whatever the size of the captures: flow files are read record by record (`flowfile`, a
megabyte at a time), HAR files entry by entry (`harfile`), rows are journaled in batches of bounded size and rolled
into Parquet by rows and by bytes. With several processes, each takes one contiguous share of the input and writes
through one writer, so a parallel ingest writes about as many files as a single one.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import signal
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from . import flowfile, flowids, gcpolicy, harfile, mempolicy
from .a2a.exchange import HttpExchange
from .a2a.extract import Extraction, extract
from .a2a.redact import NO_OPERATOR_PATTERNS, Redaction, TextPolicy
from .addon.flows import DEFAULT_MAX_BODY
from .ingest_plan import (
    EMPTY,
    NOT_A_CAPTURE,
    PART_BYTES,
    IngestError,
    Inputs,
    Part,
    as_given,
    kind,
    plan,
    prepared,
    split_flow_file,
)
from .nopandas import keep_pandas_out
from .seen import SeenIds, dataset_ids, digest
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


__all__ = ["EMPTY", "NOT_A_CAPTURE", "IngestError", "IngestResult", "Part", "ingest", "kind", "plan", "split_flow_file"]


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
class _Share:
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


_PROGRESS: Any = None  # shared counters of a worker process: bytes read, flows, per share


_INTERRUPTED = threading.Event()  # Ctrl-C, taken between two exchanges: never inside the writer


def _on_sigint(_signum: int, _frame: Any) -> None:
    _INTERRUPTED.set()


@contextlib.contextmanager
def _sigint_between_exchanges() -> Iterator[None]:
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _INTERRUPTED.clear()
    previous = signal.signal(signal.SIGINT, _on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def _init_worker(progress: Any) -> None:
    signal.signal(signal.SIGINT, _on_sigint)
    global _PROGRESS
    _PROGRESS = progress
    keep_pandas_out()  # a worker process only ingests


class _Run:
    """Ingest of one share in this process: read, skip duplicates, extract, write in bounded batches."""

    def __init__(self, share: _Share, report: Callable[[int, int], None] | None) -> None:
        self.share, self.report = share, report
        self.result = share.result
        self.seen = SeenIds(share.known)
        for part in share.before:
            for fid in flowids.ids(part.path, part.start, part.end):
                self.seen.add(digest(fid))
        self.writer: _Writer | None = None
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
            source = _har_exchanges(part.path, self.share.max_body, hpos, self._skipped)
            self._read(source, lambda: hpos.offset)
        else:
            fpos = flowfile.Position(flows=part.before)

            def skipped(offset: int, reason: str) -> None:
                self._skipped(IngestError(part.path, f"byte {offset} (flow {fpos.flows + 1})", reason))

            source = flowfile.read(part.path, self.share.max_body, part.start, part.end, fpos, skipped)
            try:
                self._read(source, lambda: fpos.offset - part.start)
            except flowfile.Damaged as e:
                reason = f"{e.reason}; {NOT_A_CAPTURE}" if e.offset == 0 else e.reason
                raise IngestError(part.path, f"byte {e.offset} (after flow {fpos.flows})", reason) from e
        if self.report is not None:
            self.report(self.done_bytes + part.size(), self.result.flows)

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
        if not self.seen.add(digest(ex.id)):
            self.result.duplicates += 1
            return
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


def _har_exchanges(
    path: Path, max_body: int, pos: harfile.HarPosition, skipped: Callable[[IngestError], None]
) -> Iterator[HttpExchange]:
    """The exchanges of a HAR's entries; an entry that cannot be one costs only itself (`skipped` is told)."""
    i = -1
    try:
        for i, entry in enumerate(harfile.entries(path, pos)):
            if isinstance(entry, harfile.Unreadable):
                skipped(IngestError(path, f"log.entries[{i}]", f"unreadable entry ({entry.reason})"))
                continue
            try:
                ex = harfile.exchange(entry, max_body, pos.size)
            except Exception as e:  # mitmproxy's importer raises whatever a malformed entry provokes
                why = "nested too deep" if isinstance(e, RecursionError) else f"{type(e).__name__}: {str(e)[:200]}"
                skipped(IngestError(path, f"log.entries[{i}]", f"malformed entry ({why})"))
                continue
            del entry  # a large entry is not held while its exchange is extracted and written
            yield ex
    except harfile.HarError as e:
        position = e.position if i < 0 or not e.position.startswith("log.") else f"log.entries[{i + 1}]"
        reason = e.reason if pos.started else f"{e.reason}; {NOT_A_CAPTURE}"
        raise IngestError(path, position, reason) from e


def _run_share(share: _Share) -> IngestResult:
    """In a worker process."""
    progress = _PROGRESS

    def report(done: int, flows: int) -> None:
        if progress is not None:
            progress[2 * share.slot] = done
            progress[2 * share.slot + 1] = flows

    return _Run(share, report).run()


Progress = Callable[[int, int, int], None]  # (bytes read, bytes in all, flows read)


def ingest(
    paths: list[Path],
    out: str | Path,
    policy: TextPolicy,
    max_body: int = DEFAULT_MAX_BODY,
    progress: Progress | None = None,
    jobs: int = 1,
    part_bytes: int = PART_BYTES,
    redaction: Redaction = NO_OPERATOR_PATTERNS,
    journal_dir: Path | None = None,
) -> IngestResult:
    """Extract every file into `out`, skipping exchanges already there. A damaged file is reported (everything
    readable before the damage is kept) and the rest still ingested; a file that is not a capture is reported
    and nothing is created for it. With `jobs` > 1, the input is shared among that many processes.
    `redaction` carries the operator's own patterns (`Redaction.from_patterns`); the built-in credential
    shapes are always redacted."""
    result = IngestResult(files=len(paths))
    try:
        with prepared(paths) as found:  # compressed captures decompressed into a temporary folder
            result.errors, result.empty = found.errors, found.empty
            if found.read:
                result = _read(found, out, policy, max_body, progress, jobs, part_bytes, redaction, journal_dir, result)
            result.errors = [as_given(e, found.shown) for e in result.errors]  # the files as given, not their copies
    except KeyboardInterrupt:  # while decompressing (reading takes Ctrl-C between two exchanges)
        result.interrupted = True
    return result


def _read(
    found: Inputs,
    out: str | Path,
    policy: TextPolicy,
    max_body: int,
    progress: Progress | None,
    jobs: int,
    part_bytes: int,
    redaction: Redaction,
    journal_dir: Path | None,
    result: IngestResult,
) -> IngestResult:
    total = sum(p.stat().st_size for p in found.read)
    known = dataset_ids(out)
    groups = plan(found.read, found.kinds, jobs, part_bytes)
    if len(groups) == 1:
        share = _Share(groups[0], out, policy, max_body, known, redaction, journal_dir=journal_dir)
        report = (lambda done, flows: progress(done, total, flows)) if progress is not None else None
        with _sigint_between_exchanges():
            _merge(result, _Run(share, report).run())
        return result
    with _sigint_between_exchanges():
        like = _Share([], out, policy, max_body, known, redaction, journal_dir=journal_dir)
        return _parallel(groups, like, progress, total, result)


def _parallel(
    groups: list[list[Part]],
    like: _Share,
    progress: Progress | None,
    total: int,
    result: IngestResult,
) -> IngestResult:
    context = multiprocessing.get_context("spawn")  # no fork of a process that may hold threads
    counters = context.Array("q", 2 * len(groups), lock=False)
    shares = []
    for i, group in enumerate(groups):
        earlier = [p for g in groups[:i] for p in g if not p.har]
        shares.append(replace(like, parts=group, before=earlier, slot=i, result=IngestResult()))
    # one executor per share: a worker that dies (killed, out of memory) breaks only its own, never its neighbours'
    pools = [ProcessPoolExecutor(1, mp_context=context, initializer=_init_worker, initargs=(counters,)) for _ in shares]
    futures = [pool.submit(_run_share, s) for pool, s in zip(pools, shares, strict=True)]
    try:
        pending = set(futures)
        while pending:
            _done, pending = wait(pending, timeout=0.25)
            if progress is not None:
                progress(sum(counters[0::2]), total, sum(counters[1::2]))
    except KeyboardInterrupt:
        result.interrupted = True
        for pool in pools:
            pool.shutdown(wait=False, cancel_futures=True)
    finally:
        for pool in pools:
            pool.shutdown(wait=True)  # each worker rolls what it read into Parquet
    for f, share in zip(futures, shares, strict=True):
        if f.cancelled():
            continue
        error = f.exception()
        if error is None:
            _merge(result, f.result())
        else:
            result.errors.extend(_died(share.parts, like.out, error))
    return result


def _died(parts: list[Part], out: str | Path, error: BaseException) -> list[IngestError]:
    """The parts of a worker that died or failed: named, never left for a silent partial dataset."""
    how = "died (killed, or out of memory)" if isinstance(error, BrokenProcessPool) else f"failed ({error!r:.200})"
    why = (
        f"the process ingesting this part {how} before it finished: rows it journaled wait for `converse-tap "
        f"recover {out}`; run it, then the same ingest again (exchanges already present are skipped)"
    )
    spans: dict[Path, tuple[int, int | None]] = {}  # a share's parts of one file are contiguous: one range each
    for p in parts:
        spans[p.path] = (spans[p.path][0] if p.path in spans else p.start, p.end)
    return [IngestError(path, f"bytes {a}-{b if b is not None else 'end'}", why) for path, (a, b) in spans.items()]


def _merge(into: IngestResult, part: IngestResult) -> None:
    into.flows += part.flows
    into.exchanges += part.exchanges
    into.errors.extend(part.errors)
    into.skipped += part.skipped
    into.unlisted += part.unlisted
    into.duplicates += part.duplicates
    into.not_stored += part.not_stored
    into.unwritten += part.unwritten
    into.waiting.update(part.waiting)
    into.write_error = into.write_error or part.write_error
    into.interrupted = into.interrupted or part.interrupted
    into.parquet_files += part.parquet_files
