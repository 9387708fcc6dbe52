"""Offline ingest: mitmproxy flow files and HAR files through the same extractor, into the same dataset.

Memory stays bounded whatever the size of the captures: flow files are read record by record (`flowfile`, a
megabyte at a time), HAR files entry by entry (`harfile`), rows are journaled in batches of bounded size and rolled
into Parquet by rows and by bytes. With several processes, each takes one contiguous share of the input and writes
through one writer, so a parallel ingest writes about as many files as a single one (`ingest_share`); the first
share is read in this process, a little larger than the others, while the worker processes start up.

A compressed capture is read from a decompressed copy in a temporary folder; the input is read in rounds
(`ingest_plan.rounds`), each round's copies removed before the next is decompressed, so that the disk holds the
copies of one round, never those of the whole input.
"""

from __future__ import annotations

import contextlib
import multiprocessing
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from dataclasses import replace
from pathlib import Path

import numpy as np

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
    rounds,
    size_as_given,
    split_flow_file,
)
from .ingest_share import (
    LISTED,
    IngestResult,
    Run,
    Share,
    init_worker,
    run_share,
    sigint_between_exchanges,
    sigint_received,
)
from .seen import SeenIds, dataset_ids

__all__ = [
    "EMPTY", "LISTED", "NOT_A_CAPTURE", "IngestError", "IngestResult", "Part", "ingest", "kind", "plan",
    "split_flow_file",
]  # fmt: skip


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
    total = sum(size_as_given(p) for p in paths)
    known: np.ndarray | None = None
    shown = _Shown(progress, total, result) if progress is not None else None
    try:  # compressed captures decompressed a round at a time
        with contextlib.closing(rounds(paths, unpacking=shown.unpacking if shown else None)) as each:
            for found in each:
                result.errors.extend(found.errors)
                result.empty.extend(found.empty)
                if found.read:
                    if known is None:
                        known = dataset_ids(out)
                    reading = shown.reading(found) if shown is not None else None
                    r, added = _read(
                        found, out, policy, max_body, reading, jobs, part_bytes, redaction, journal_dir, known
                    )
                    r.errors = [as_given(e, found.shown) for e in r.errors]  # the files as given, not their copies
                    _merge(result, r)
                    if not found.last:
                        known = np.union1d(known, added)  # what the next rounds find already read
                    if r.interrupted or r.write_error:
                        break
                if shown is not None:
                    shown.base = max(shown.last, shown.base + found.given)
    except KeyboardInterrupt:  # while decompressing (reading takes Ctrl-C between two exchanges)
        result.interrupted = True
    return result


UNPACKING_SHARE = 0.1  # of a compressed capture's stretch of the progress bar: its decompression; the rest, reading


class _Shown:
    """Progress through the whole input as given (a compressed capture at its compressed size), round after round,
    never going back: a round's compressed captures fill UNPACKING_SHARE of their bytes as they are decompressed,
    then reading the round's files (bytes of their plain copies) fills the rest of the round's stretch."""

    def __init__(self, progress: Progress, total: int, result: IngestResult) -> None:
        self.progress, self.total, self.result = progress, total, result  # (its flows: those of the rounds read)
        self.base = self.last = 0  # where the round starts; shown so far

    def show(self, done: int, flows: int) -> None:
        self.last = max(self.last, done)
        self.progress(self.last, self.total, flows)

    def unpacking(self, unpacked: int) -> None:
        self.show(self.base + int(unpacked * UNPACKING_SHARE), self.result.flows)

    def reading(self, found: Inputs) -> Progress:
        start = self.base + int(found.unpacked * UNPACKING_SHARE)
        span = max(0, found.given - int(found.unpacked * UNPACKING_SHARE))
        flows = self.result.flows
        return lambda done, plain, n: self.show(start + done * span // max(plain, 1), flows + n)


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
    known: np.ndarray,
) -> tuple[IngestResult, np.ndarray]:
    """One round: its result, and the digests of the flows it read (when a round follows, else none)."""
    total = sum(p.stat().st_size for p in found.read)
    groups = plan(found.read, found.kinds, jobs, part_bytes, head=part_bytes // 2)  # (read here while workers start)
    groups = [[replace(p, attachments=found.attachments.get(p.path)) if p.har else p for p in g] for g in groups]
    like = Share([], out, policy, max_body, known, redaction, journal_dir=journal_dir, keep_ids=not found.last)
    result = IngestResult()
    if len(groups) == 1:
        run = Run(
            replace(like, parts=groups[0]), (lambda done, flows: progress(done, total, flows)) if progress else None
        )
        with sigint_between_exchanges():
            _merge(result, run.run())
        return result, run.added_ids()
    with sigint_between_exchanges():
        return _parallel(groups, like, progress, total, result)


def _parallel(
    groups: list[list[Part]],
    like: Share,
    progress: Progress | None,
    total: int,
    result: IngestResult,
) -> tuple[IngestResult, np.ndarray]:
    """The first share read in this process, at once; each other in a worker process of its own, started first
    so that it starts up (a fresh interpreter importing the extractor, about half a second) while this one reads."""
    context = multiprocessing.get_context("spawn")  # no fork of a process that may hold threads
    counters = context.Array("q", 2 * len(groups) + 1, lock=False)  # per share: bytes, flows; then: stop
    shares = []
    for i, group in enumerate(groups):
        earlier = [p for g in groups[:i] for p in g if not p.har]
        # (the digests of what each share read: those it put off are checked against them, `_deferred`)
        shares.append(replace(like, parts=group, before=earlier, slot=i, result=IngestResult(), keep_ids=True))
    # one executor per share: a worker that dies (killed, out of memory) breaks only its own, never its neighbours'
    pools = [
        ProcessPoolExecutor(1, mp_context=context, initializer=init_worker, initargs=(counters,)) for _ in shares[1:]
    ]
    try:
        futures = [pool.submit(run_share, s) for pool, s in zip(pools, shares[1:], strict=True)]

        def report(done: int, flows: int) -> None:
            counters[0], counters[1] = done, flows
            if progress is not None:
                progress(sum(counters[0:-1:2]), total, sum(counters[1:-1:2]))

        own = Run(shares[0], report)
        first = own.run(), own.added_ids()
        pending = set(futures)
        while pending:
            if sigint_received():
                counters[-1] = 1  # the workers stop too, between two exchanges
            _done, pending = wait(pending, timeout=0.25)
            report(counters[0], counters[1])
    except BaseException:
        counters[-1] = 1
        raise
    finally:
        for pool in pools:
            pool.shutdown(wait=True)  # each worker rolls what it read into Parquet
    _merge(result, first[0])
    added = [np.empty(0, dtype=np.uint64), first[1]]
    for f, share in zip(futures, shares[1:], strict=True):
        error = f.exception()
        if error is None:
            part, ids = f.result()
            _merge(result, part)
            added.append(ids)
        else:
            result.errors.extend(_died(share.parts, like.out, error))
    if result.deferred and not (result.interrupted or result.write_error):
        added.append(_deferred(result, like, np.concatenate(added)))
    return result, np.concatenate(added)


def _deferred(result: IngestResult, like: Share, added: np.ndarray) -> np.ndarray:
    """The flows a share put off because an earlier share's records hold their id: duplicates of what the earlier
    shares wrote; the others (that earlier record unreadable, or not an exchange) read now, in file order, in this
    process. The digests of those read."""
    wrote = SeenIds(added)
    again = []
    for path, offset, h in result.deferred:
        if h in wrote:
            result.duplicates += 1
        else:
            again.append(Part(path, offset, offset + 1))
    result.deferred = []
    if not again:
        return np.empty(0, dtype=np.uint64)
    run = Run(replace(like, parts=again, known=np.union1d(like.known, added), keep_ids=True), None)
    r = run.run()
    r.flows = 0  # counted by the shares that put them off (their WebSocket messages too)
    r.websocket_flows = r.websocket_messages = 0
    _merge(result, r)
    return run.added_ids()


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
    into.deferred.extend(part.deferred)
    into.unread(part.not_http, [part.websocket_flows, part.websocket_messages])
