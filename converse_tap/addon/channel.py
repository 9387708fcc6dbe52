"""The proxy's side of the capture pipe: records go to a worker process without ever blocking the event loop.

Each record is pickled and framed (4-byte length) into a bounded in-memory backlog, written to the worker's
stdin by the event loop whenever the pipe can take it (`add_writer`; no thread, no lock, no GIL hand-off). If
the worker falls behind until the backlog is full, new records are dropped and counted; if it dies, the bytes in
flight are counted as lost, and a new worker is started (it recovers the dead one's journals).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import itertools
import logging
import os
import pickle
import select
import struct
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger(__name__)

_LEN = struct.Struct(">I")
_IOV_MAX = 512
_F_SETPIPE_SZ = 1031  # Linux: a larger pipe absorbs bursts without a wake-up per record
RESTART_BACKOFF = 1.0  # seconds after a worker's death before the next A2A record starts another
# a worker that dies within STEADY seconds of its start doubles the back-off, up to RESTART_BACKOFF_MAX: a worker
# that cannot run (its dataset made a file, a full disk at its start, an OOM kill at each start) was started every
# 2 s for as long as traffic flowed, each start a second of CPU and a traceback
RESTART_BACKOFF_MAX = 60.0
STEADY = 30.0
# a record `send` queues past a full backlog (a stream's start or end, so that the worker never holds a stream
# open) is at most this large once pickled; a larger one is bounded like any other, or the request body a stream's
# start carries would let a flood of them grow the backlog without limit while the worker is behind
FORCED_MAX = 64 * 1024
# and how far such records may take the backlog past its bound: a stream's start (which carries the request body)
# is dropped past it, and its stream relayed unrecorded and counted, as any record past a full backlog; a stream's
# end (a few hundred bytes, one per start that got through) always passes
FORCED_OVERFLOW = 1024 * 1024
KILL_AFTER = 10.0  # seconds a worker that outlived `close` has to exit after SIGTERM, then after SIGKILL
GAP_EVERY = 1.0  # seconds between two notes of lost records sent to the worker (a `capture_gaps` row each)


@dataclass
class ChannelStats:
    records: int = 0
    dropped: int = 0  # refused because the backlog was full or the worker was down
    lost_in_flight: int = 0  # bytes written towards a worker that died
    restarts: int = 0
    drops_by_flow: set[str] = field(default_factory=set)


class Channel:
    """Owns one worker process. `send` is for the event loop thread (or any single thread when no loop runs)."""

    def __init__(self, config: dict[str, Any], max_backlog: int = 64 * 1024 * 1024) -> None:
        self.config = config
        self.max_backlog = max_backlog
        self.stats = ChannelStats()
        self._proc: subprocess.Popen[bytes] | None = None
        self._fd = -1
        self._buf: deque[bytes | memoryview] = deque()
        self._backlog = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._scheduled = False
        self._watching = False
        self._down_until = 0.0
        self._closed = False
        # records lost since the last note, by reason: [records, bytes, first lost at, last lost at]
        self._gaps: dict[str, list[float]] = {}
        self._gap_due = 0.0
        self.generation = 0  # workers started: a stream opened with an earlier one is unknown to the one running
        self.backoff = RESTART_BACKOFF / 2  # the last back-off (doubled after a death soon after a start)
        self._started_at = 0.0

    # -- lifecycle ---------------------------------------------------------------------------------------
    def start(self) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        proc = subprocess.Popen(
            [sys.executable, "-m", "converse_tap.addon.workerproc"],
            stdin=subprocess.PIPE,
            env=env,
            close_fds=True,
        )
        assert proc.stdin is not None
        fd = proc.stdin.fileno()
        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, _F_SETPIPE_SZ, 1 << 20)
        os.set_blocking(fd, False)
        self._proc, self._fd = proc, fd
        self._buf, self._backlog = deque(), 0
        self._started_at = time.monotonic()
        self.generation += 1
        self._send_now(("config", self.config))

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def close(self, timeout: float = 60.0, background: bool = False) -> int | None:
        """Write what is buffered, close the pipe, wait for the worker to finish its files. Returns its exit code.
        `background`: the writing and waiting happen in a thread of their own (None is returned at once), for a
        channel replaced while traffic flows (an option changed at run time): the event loop never waits for it."""
        if self._closed or self.generation == 0:
            return None
        self.reap()
        if self._proc is None:
            # the worker died (the OOM killer, kill -9) and no record came to start another: its journals stayed
            # behind a graceful stop, out of every report until a `recover`, and what was lost was never written
            # down. A last worker recovers them (every worker does as it starts) and writes the losses.
            try:
                self.start()
            except OSError as e:
                log.error("converse-tap: cannot start a recording worker to recover the journals: %s", e)
                return None
            self.stats.restarts += 1
        self._closed = True  # from here on the event loop's callbacks leave the buffer alone (`_flush`)
        self._unwatch()
        if self._proc is not None:
            self._send_gaps()
        if background:
            threading.Thread(target=self._finish, args=(timeout,), name="converse-tap-close").start()
            return None
        return self._finish(timeout)

    def _finish(self, timeout: float) -> int | None:
        self._drain_blocking(timeout)
        proc = self._proc
        if proc is None:  # (it died while the backlog was written: nothing to wait for)
            return None
        with contextlib.suppress(OSError):
            assert proc.stdin is not None
            proc.stdin.close()
        try:
            return proc.wait(timeout)
        except subprocess.TimeoutExpired:
            log.error("converse-tap: the recording worker did not finish within %.0fs; stopping it", timeout)
        # a worker stopped (SIGSTOP) or stuck never acts on SIGTERM: killed after a bounded wait, and given up on
        # (the proxy exits all the same) if even that is not reaped; `converse-tap recover` completes its journals
        for stop, wait in ((proc.terminate, KILL_AFTER), (proc.kill, KILL_AFTER)):
            with contextlib.suppress(OSError):
                stop()
            try:
                return proc.wait(wait)
            except subprocess.TimeoutExpired:
                continue
        log.error("converse-tap: the recording worker (pid %d) could not be stopped; leaving it", proc.pid)
        return None

    # -- sending -----------------------------------------------------------------------------------------
    def send(self, record: tuple[Any, ...], force: bool = False, always: bool = False) -> bool:
        """Queue one record; False (and counted) when it had to be dropped. `force`: a stream's start, which passes
        a full backlog when it is at most FORCED_MAX bytes and the backlog within FORCED_OVERFLOW past its bound;
        `always`: a stream's end (at most FORCED_MAX bytes), which passes whatever the backlog, so that the worker
        never holds open a stream whose start it got."""
        if self._closed:
            return False
        if self._proc is None and not self._restart():  # a dead worker shows as a failed write
            self.stats.dropped += 1
            self._lost("worker_down", 1, 0)
            return False
        data = pickle.dumps(record, protocol=5)
        over = self._backlog + len(data) + 4 - self.max_backlog
        if len(data) > FORCED_MAX:
            past = over > 0
        elif always:
            past = False
        else:
            past = over > (FORCED_OVERFLOW if force else 0)
        if past:
            self.stats.dropped += 1
            self._lost("recorder_backlog_full", 1, len(data))
            if self.stats.dropped == 1 or self.stats.dropped % 10_000 == 0:
                log.warning(
                    "converse-tap: the recording worker is behind by %d bytes; %d records dropped so far "
                    "(traffic is unaffected)",
                    self._backlog,
                    self.stats.dropped,
                )
            return False
        if self._gaps and time.monotonic() >= self._gap_due:
            self._send_gaps()
            if self._proc is None:  # its write found the worker dead: this record has no worker to go to
                self.stats.dropped += 1
                self._lost("worker_died", 1, len(data))
                return False
        self.stats.records += 1
        self._buf.append(_LEN.pack(len(data)))
        self._buf.append(data)
        self._backlog += len(data) + 4
        self._schedule()
        return True

    def reap(self) -> None:
        """A worker that died while nothing was written to it (idle when the OOM killer chose it) is found here,
        as a failed write finds one."""
        if not self._closed and self._proc is not None and self._proc.poll() is not None:
            self._died(ChildProcessError("found exited"))

    def knows(self, generation: int) -> bool:
        """Whether the worker that got a stream's start (started as `generation`) is the one running."""
        return generation == self.generation and self._proc is not None

    def count_lost(self, reason: str, records: int = 1) -> None:
        """Exchanges lost to the proxy's side without a record refused: a stream whose start went to a worker that
        died (`worker_died`: the worker now running never saw it open), requests still waiting for their response
        when the recorder stops or its script is reloaded (`recorder_stopped`). Written down like drops."""
        self.stats.dropped += records
        self._lost(reason, records, 0)

    def _lost(self, reason: str, records: int, nbytes: int) -> None:
        now = time.time()
        gap = self._gaps.setdefault(reason, [0, 0, now, now])
        gap[0] += records
        gap[1] += nbytes
        gap[3] = now

    def _send_gaps(self) -> None:
        """What was lost since the last note, to the worker, which writes it into the dataset (`capture_gaps`):
        a few small records, past a full backlog, at most every GAP_EVERY seconds."""
        gaps, self._gaps = self._gaps, {}  # (a write that finds the worker dead notes that loss in a new one)
        for reason, (records, nbytes, first, last) in gaps.items():
            self._send_now(("g", reason, int(records), int(nbytes), first, last))
        self._gap_due = time.monotonic() + GAP_EVERY

    def _send_now(self, record: tuple[Any, ...]) -> None:
        data = pickle.dumps(record, protocol=5)
        self._buf.append(_LEN.pack(len(data)))
        self._buf.append(data)
        self._backlog += len(data) + 4
        self._schedule()

    def _schedule(self) -> None:
        if self._scheduled or self._watching:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        if loop is None:  # no event loop (unit tests driving hooks): write through
            self._drain_blocking(60.0)
            return
        self._loop = loop
        self._scheduled = True
        loop.call_soon(self._flush)  # one write for everything sent in this turn of the loop

    def _flush(self) -> None:
        self._scheduled = False
        if self._closed:  # `close` owns the buffer now (maybe from a thread of its own)
            return
        if self._write_some() and self._buf and not self._watching and self._loop is not None:
            self._loop.add_writer(self._fd, self._on_writable)
            self._watching = True

    def _on_writable(self) -> None:
        if not self._write_some() or not self._buf:
            self._unwatch()

    def _unwatch(self) -> None:
        if self._watching and self._loop is not None:
            with contextlib.suppress(Exception):
                self._loop.remove_writer(self._fd)
        self._watching = False

    def _write_some(self) -> bool:
        """Write as much of the backlog as the pipe takes now, without joining or copying it (writev of the
        queued buffers). False when the worker is gone."""
        buf = self._buf
        if self._fd < 0:  # (its worker died: the descriptor number may be another file's by now)
            return False
        while buf:
            views = list(itertools.islice(buf, 0, _IOV_MAX))
            try:
                n = os.writev(self._fd, views)
            except BlockingIOError:
                return True
            except OSError as e:  # BrokenPipeError: the worker died
                self._died(e)
                return False
            self._backlog -= n
            full = n < sum(len(v) for v in views)
            while n:
                head = buf[0]
                if n >= len(head):
                    n -= len(head)
                    buf.popleft()
                else:
                    buf[0] = memoryview(head)[n:]
                    n = 0
            if full:
                return True
        return True

    def _drain_blocking(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while self._buf and self._fd >= 0:
            if not self._write_some():
                return
            if self._buf:
                if time.monotonic() > deadline:
                    log.error("converse-tap: gave up writing %d bytes to the recording worker", self._backlog)
                    return
                select.select([], [self._fd], [], 0.5)

    # -- failure -----------------------------------------------------------------------------------------
    def _died(self, error: BaseException) -> None:
        self._unwatch()
        self.stats.lost_in_flight += self._backlog
        # the records queued (their length prefixes are the 4-byte buffers), and those the worker had read and
        # not yet journaled, which no one can count
        self._lost("worker_died", sum(1 for b in self._buf if len(b) == 4), self._backlog)
        code = self._proc.poll() if self._proc is not None else None
        log.error(
            "converse-tap: the recording worker stopped (%s, exit %s); %d bytes of records in flight are lost. "
            "Traffic is unaffected; a new worker starts and recovers its journals.",
            error,
            code,
            self._backlog,
        )
        self._buf, self._backlog = deque(), 0
        with contextlib.suppress(Exception):
            if self._proc is not None and self._proc.stdin is not None:
                self._proc.stdin.close()
        self._proc, self._fd = None, -1
        now = time.monotonic()
        self.backoff = (
            min(self.backoff * 2, RESTART_BACKOFF_MAX) if now - self._started_at < STEADY else RESTART_BACKOFF
        )
        self._down_until = now + self.backoff
        if self.backoff > RESTART_BACKOFF:
            log.error(
                "converse-tap: the recording worker keeps stopping soon after its start; the next starts in %.0f s "
                "(A2A exchanges until then are not recorded, and counted)",
                self.backoff,
            )

    def _restart(self) -> bool:
        if time.monotonic() < self._down_until:
            return False
        try:
            self.start()
        except OSError as e:
            log.error("converse-tap: cannot start the recording worker: %s", e)
            self.backoff = min(self.backoff * 2, RESTART_BACKOFF_MAX)
            self._down_until = time.monotonic() + self.backoff
            return False
        self.stats.restarts += 1
        return True
