"""A recorder's standard streams as operators leave them: closed by a daemon's start (`converse-tap record ...
<&- >&- 2>&- &`, setsid, an init script; mitmdump with stderr closed), or a pipe whose reader goes away (`record |
tee FILE`, the tee killed; a restarted journald). It serves and records every exchange and stops cleanly, and no
dataset file lands on a standard descriptor (the worker inherits them closed: its first files took their
numbers)."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from converse_tap.addon import mitmdump_script
from converse_tap.store.reader import load
from tests.integration.procs import LISTENING, MITMDUMP, Canned, Proc
from tests.integration.test_proxy import BODY, HEADERS
from tests.integration.test_reliability import _children, _wait_gone

pytestmark = pytest.mark.integration

CONVERSE_TAP = Path(sys.executable).with_name("converse-tap")


def _listening_port(proc: subprocess.Popen[bytes], timeout: float = 60) -> int:
    """The TCP port a process listens on, read from /proc (its output may be closed)."""
    pid = proc.pid
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"the recorder exited at start-up ({proc.returncode})"
        inodes = set()
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with_target = os.readlink(fd) if fd.exists() else ""
            if m := re.fullmatch(r"socket:\[(\d+)\]", with_target):
                inodes.add(m.group(1))
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # LISTEN
                return int(fields[1].rsplit(":", 1)[1], 16)
        time.sleep(0.1)
    raise TimeoutError(f"process {pid} listens on no port")


def _standard_fds(pid: int) -> list[str]:
    return [os.readlink(f"/proc/{pid}/fd/{fd}") if Path(f"/proc/{pid}/fd/{fd}").exists() else "" for fd in (0, 1, 2)]


def _daemon(out: Path, redirections: str) -> subprocess.Popen[bytes]:
    command = (
        f"exec {shlex.quote(str(CONVERSE_TAP))} record --out {shlex.quote(str(out))} --listen-port 0 "
        f"--flush-interval 60 {redirections}"
    )
    return subprocess.Popen(["bash", "-c", command], start_new_session=True)


def _send(proxy: str, base: str, n: int) -> None:
    with httpx.Client(proxy=proxy, timeout=30) as client:
        for _ in range(n):
            client.post(base + "/a2a", content=BODY, headers=HEADERS).raise_for_status()


def _stop(proc: subprocess.Popen[bytes]) -> int:
    proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(90)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        raise


def test_record_with_stdout_closed_records_and_logs_to_stderr(tmp_path: Path) -> None:
    """Until 2026-12-07 it exited 1 at start-up, recording nothing: mitmproxy's log handler exits the process on
    the first line it cannot print."""
    out, err = tmp_path / "data", tmp_path / "stderr.log"
    proc = _daemon(out, f">&- 2>{shlex.quote(str(err))}")
    try:
        port = _listening_port(proc)
        with Canned() as up:
            _send(f"http://127.0.0.1:{port}", up.base, 5)
    finally:
        rc = _stop(proc)
    assert rc == 0, err.read_text()
    assert len(load(out, "exchanges")) == 5
    assert "converse-tap: recording A2A traffic into" in err.read_text()  # mitmproxy's lines, on stderr


def test_record_with_every_standard_descriptor_closed(tmp_path: Path) -> None:
    out = tmp_path / "data"
    proc = _daemon(out, "<&- >&- 2>&-")
    try:
        port = _listening_port(proc)
        with Canned() as up:
            _send(f"http://127.0.0.1:{port}", up.base, 5)
        (worker,) = _children(proc.pid)
        proxy_fds, worker_fds = _standard_fds(proc.pid), _standard_fds(worker)
    finally:
        rc = _stop(proc)
    _wait_gone(worker)
    assert rc == 0
    assert proxy_fds == [os.devnull] * 3  # not its listening socket or a client's connection
    assert worker_fds[1:] == [os.devnull] * 2  # not its lock or journal files
    assert len(load(out, "exchanges")) == 5
    assert not (out / "_journal").exists()


def test_mitmdump_with_stderr_closed_keeps_the_journals_off_descriptor_2(tmp_path: Path) -> None:
    out = tmp_path / "data"
    args = [
        str(MITMDUMP),
        "--listen-host",
        "127.0.0.1",
        "--listen-port",
        "0",
        "-s",
        mitmdump_script.__file__,
        "--set",
        f"converse_tap_dir={out}",
        "--set",
        "converse_tap_flush_interval=0.2",
    ]
    proc = Proc(["bash", "-c", "exec " + " ".join(map(shlex.quote, args)) + " 2>&-"])
    try:
        proxy = f"http://127.0.0.1:{proc.wait_for(LISTENING).group(1)}"
        with Canned() as up:
            _send(proxy, up.base, 5)
            (worker,) = _children(proc.popen.pid)
            deadline = time.monotonic() + 60
            while not list(out.rglob("*.arrows")) and time.monotonic() < deadline:  # its journal is open
                time.sleep(0.1)
            worker_fds = _standard_fds(worker)
    finally:
        rc = proc.stop()
    assert rc == 0
    assert not any(str(out) in target for target in worker_fds), worker_fds
    assert worker_fds[2] == os.devnull
    assert len(load(out, "exchanges")) == 5


def test_record_keeps_serving_when_its_stdout_reader_goes_away(tmp_path: Path) -> None:
    """Until 2026-12-07 mitmproxy's log handler exited the process (exit 1) at the first line it could not print:
    the next client connection's, and every client after it was refused. Now its lines go to stderr."""
    out, err = tmp_path / "data", tmp_path / "stderr.log"
    with err.open("w") as stderr:
        proc = subprocess.Popen(
            [str(CONVERSE_TAP), "record", "--out", str(out), "--listen-port", "0", "--flush-interval", "60"],
            stdout=subprocess.PIPE,
            stderr=stderr,
            start_new_session=True,
        )
    try:
        assert proc.stdout is not None
        while not (m := LISTENING.search(proc.stdout.readline().decode())):
            assert proc.poll() is None, err.read_text()
        proxy = f"http://127.0.0.1:{m.group(1)}"
        with Canned() as up:
            _send(proxy, up.base, 5)
            proc.stdout.close()  # the reader goes away: the proxy's next line meets a broken pipe
            no_keepalive = httpx.Limits(max_keepalive_connections=0)
            with httpx.Client(proxy=proxy, timeout=30, limits=no_keepalive) as client:
                for _ in range(10):  # a connection each: each is a log line
                    client.post(up.base + "/a2a", content=BODY, headers=HEADERS).raise_for_status()
    finally:
        rc = _stop(proc)
    assert rc == 0, err.read_text()
    assert len(load(out, "exchanges")) == 15
    assert "client connect" in err.read_text()  # its lines went on, to stderr
