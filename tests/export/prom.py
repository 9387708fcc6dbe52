"""Debian's Prometheus server for tests: installed with apt-get when missing, started on loopback (port 0; the
port is read from the process's own listening socket), scraping the targets it is given."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.integration.procs import Proc


def prometheus_binary() -> str:
    """The `prometheus` executable, installing Debian's package first when it is missing."""
    found = shutil.which("prometheus") or ("/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None)
    if found:
        return found
    apt = shutil.which("apt-get")
    if apt is None:
        pytest.skip("Debian's prometheus is not installed and apt-get is not available to install it")
    if os.geteuid() != 0:
        pytest.skip("Debian's prometheus is not installed and apt-get needs root to install it")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for args in ([apt, "update"], [apt, "install", "-y", "--no-install-recommends", "prometheus"]):
        done = subprocess.run(args, env=env, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            pytest.fail(f"{' '.join(args)} failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    found = shutil.which("prometheus") or "/usr/bin/prometheus"
    assert Path(found).exists(), "apt-get installed prometheus but there is no prometheus executable"
    return found


def _listening_port(pid: int) -> int | None:
    """The TCP port a process listens on, from /proc: its socket inodes matched to /proc/net/tcp{,6}."""
    inodes = set()
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                return int(fields[1].rsplit(":", 1)[1], 16)
    return None


class Prometheus:
    def __init__(self, base: str) -> None:
        self.base = base

    def query(self, promql: str) -> list[dict[str, Any]]:
        url = f"{self.base}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]["result"]

    def scalar(self, promql: str) -> float | None:
        result = self.query(promql)
        return float(result[0]["value"][1]) if result else None

    def wait_for(self, promql: str, expected: float, timeout: float = 60) -> None:
        """Poll the query API until `promql` returns `expected` (Prometheus scrapes every second)."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            last = self.scalar(promql)
            if last == expected:
                return
            time.sleep(0.25)  # a poll interval of a readiness wait, not a sync: the deadline bounds it
        raise TimeoutError(f"{promql} = {last}, expected {expected}")


@contextmanager
def prometheus(targets: list[str], workdir: Path) -> Iterator[Prometheus]:
    binary = prometheus_binary()
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: converse-tap\n    static_configs:\n"
        f"      - targets: {json.dumps(targets)}\n"
    )
    proc = Proc(
        [
            binary,
            f"--config.file={config}",
            f"--storage.tsdb.path={workdir / 'tsdb'}",
            "--web.listen-address=127.0.0.1:0",
        ]
    )
    try:
        proc.wait_for(__import__("re").compile(r"Server is ready to receive web requests"), timeout=120)
        port = _listening_port(proc.popen.pid)
        assert port, proc.output
        yield Prometheus(f"http://127.0.0.1:{port}")
    finally:
        proc.stop(signal.SIGTERM)
