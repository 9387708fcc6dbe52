"""The recording worker's process: `python -m converse_tap.addon.workerproc`, started by the addon's channel.

Reads capture records from its stdin (the pipe the proxy writes without ever waiting), hands them to a `Worker`
(worker.py) and stops when the proxy closes the pipe; Ctrl-C is the proxy's to handle. A SIGTERM or SIGHUP reaches
the worker with the proxy when it is sent to their whole group (`systemctl stop`, `kill -- -PGID`, a closed
terminal): the worker goes on until the proxy, stopping, closes the pipe, and stops on its own TERM_GRACE seconds
after the signal if it never does, its rows written either way.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import pickle
import select
import signal
import struct
import sys
import termios
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .. import gcpolicy
from ..nopandas import keep_pandas_out

if TYPE_CHECKING:
    from .worker import Worker

log = logging.getLogger("converse_tap.worker")
_LEN = struct.Struct(">I")

_READ = 1 << 20  # the pipe's size (channel.py sets it)
GATHER = 0.2  # at most this long (seconds) records gather in the pipe after a read that emptied it
GATHER_STEP = 0.01  # while they gather, how often (seconds) the worker looks how full the pipe is
TERM_GRACE = 5.0  # seconds after a SIGTERM or SIGHUP that the worker waits for the proxy to close the pipe


class _Stop(Exception):
    """Told to stop, and the proxy never closed the pipe."""


def gather_for(flush_interval: float) -> float:
    """How long records gather in the pipe after a read that emptied it: a fifth of the flush interval, at most
    GATHER, so a busy worker wakes a few times a second, not once per exchange (docs/performance.md)."""
    return max(0.0, min(GATHER, flush_interval / 5))


def _frames(fd: int, tick, gather: Callable[[], float] = lambda: GATHER) -> Any:
    """Records from the pipe, calling `tick()` at least every 0.2 s while it is quiet.

    After a read that emptied the pipe, it waits `gather` seconds before the next one, so that under load one
    wake-up takes the records of many exchanges rather than one (each wake-up costs a context switch and
    cold caches); nothing waits on the worker, since the proxy has already sent the exchange on. The wait ends
    early once the pipe is half full (`_gather`). (`gather()`: the config's `gather`, for benchmarks.)"""
    buf = bytearray()
    while True:
        ready, _, _ = select.select([fd], [], [], 0.2)
        if not ready:
            tick()
            continue
        data = os.read(fd, _READ)
        if not data:
            return
        buf += data
        pos = 0
        while len(buf) - pos >= 4:
            (n,) = _LEN.unpack_from(buf, pos)
            if len(buf) - pos - 4 < n:
                break
            yield pickle.loads(memoryview(buf)[pos + 4 : pos + 4 + n])
            pos += 4 + n
        del buf[:pos]
        tick()
        pause = gather()
        if len(data) < _READ and pause > 0:
            _gather(fd, pause)


def _gather(fd: int, pause: float) -> None:
    """Let records gather in the pipe for `pause` seconds, or until it holds half its size, whichever is first.

    A flood (one stream relaying hundreds of MB/s at loopback speed) fills the 1 MiB pipe in a millisecond,
    and past it the proxy's backlog; a worker sleeping the whole pause would let that backlog overflow (and
    the stream lose chunks, `capture_incomplete:recorder_backlog`) while it could have kept up. Looking every
    GATHER_STEP costs a syscall or two; at ~1 GB/s the proxy holds at most ~10 MB meanwhile."""
    end = time.monotonic() + pause
    while (left := end - time.monotonic()) > 0:
        time.sleep(min(GATHER_STEP, left))
        if _in_pipe(fd) >= _READ // 2:
            return


def _in_pipe(fd: int) -> int:
    """Bytes waiting in the pipe (FIONREAD); 0 when the descriptor cannot say (the pause then runs out)."""
    try:
        return int.from_bytes(fcntl.ioctl(fd, termios.FIONREAD, b"\0\0\0\0"), sys.byteorder)
    except OSError:
        return 0


def _output_fds_open() -> None:
    """Descriptors 1 and 2 open, on /dev/null when the proxy was started with them closed (`mitmdump 2>&-`, a
    daemon): the worker inherits them closed, and its lock and journal files took those numbers, where anything
    written to stdout or stderr below Python (a fatal error, a C library's warning) would have landed in a journal."""
    for fd in (1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_WRONLY)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


def main() -> int:
    _output_fds_open()  # before any file is opened
    # first of all, before the imports of a second or so: a group's stop signal may come while they run
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the proxy decides when we stop: it closes the pipe
    told: list[float] = []  # when a SIGTERM or SIGHUP came

    def on_term(signum: int, _frame: Any) -> None:
        if not told:
            told.append(time.monotonic())

    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is not signal.SIG_IGN:  # (ignored under `nohup`: a hangup stops no proxy then)
            signal.signal(sig, on_term)
    from .worker import Worker  # pyarrow, the extractor

    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    fd = sys.stdin.fileno()
    worker: Worker | None = None
    holder: list[Worker] = []
    gather = [GATHER]

    def tick() -> None:
        if holder:
            holder[0].writer.poll()
        if told and time.monotonic() - told[0] > TERM_GRACE:
            raise _Stop

    try:
        for record in _frames(fd, tick, lambda: gather[0]):
            if worker is None:
                if record[0] != "config":
                    continue
                try:
                    worker = Worker(record[1])
                except OSError as e:  # the dataset cannot be written (made a file, its disk full): said in a line
                    log.error("converse-tap: the recording worker cannot write the dataset: %s", e)
                    return 1
                holder.append(worker)
                keep_pandas_out()  # pyarrow would import it at the first flush (1.5 s, ~40 MiB) and never use it
                gcpolicy.for_process()
                gather[0] = float(record[1].get("gather", gather_for(float(record[1]["flush_interval"]))))
                continue
            try:
                worker.handle(record)
            except Exception:
                log.exception("converse-tap: a capture record could not be handled; the recorder goes on")
    except _Stop:
        log.warning("converse-tap: the recording worker was told to stop and its proxy did not close the pipe "
                    "within %.0f s: it writes its rows and stops", TERM_GRACE)  # fmt: skip
    finally:
        if worker is not None:
            with contextlib.suppress(Exception):
                worker.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
