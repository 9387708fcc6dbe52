"""Load generation and CPU accounting for bench_proxy: wrk when installed, a small asyncio client otherwise.

Both keep `connections` HTTP/1.1 keep-alive connections busy for a fixed time, each sending the next request as
soon as the previous reply has arrived (closed loop), and report requests/s and latency percentiles. Through a
proxy, requests go in absolute form (`POST http://upstream/a2a HTTP/1.1`), as any HTTP client sends them to a
forward proxy. CPU is read from /proc: utime+stime of a process and all its descendants (plus what reaped
children left in cutime/cstime), so a helper process an addon starts is counted with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import resource
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")
_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*(\d+)", re.IGNORECASE)
_UNITS = {"us": 1e-3, "ms": 1.0, "s": 1e3, "m": 60e3, "h": 3600e3}


@dataclass
class Load:
    requests: int
    seconds: float
    p50: float  # ms
    p99: float  # ms
    errors: int  # non-2xx replies and socket errors

    @property
    def rps(self) -> float:
        return self.requests / self.seconds


# -- CPU accounting -------------------------------------------------------------------------------------------
def _stats() -> dict[int, tuple[int, int]]:
    """pid -> (ppid, utime+stime+cutime+cstime in ticks) for every process now alive."""
    out: dict[int, tuple[int, int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            text = Path(f"/proc/{name}/stat").read_bytes()
        except OSError:
            continue
        f = text.rsplit(b")", 1)[1].split()
        out[int(name)] = (int(f[1]), int(f[11]) + int(f[12]) + int(f[13]) + int(f[14]))
    return out


def tree_cpu(*roots: int) -> list[float]:
    """CPU seconds used so far by each root process and all its descendants (one /proc scan for all roots)."""
    stats = _stats()
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    totals = []
    for root in roots:
        ticks, todo = 0, [root]
        while todo:
            pid = todo.pop()
            if pid in stats:
                ticks += stats[pid][1]
                todo.extend(children.get(pid, ()))
        totals.append(ticks / TICK)
    return totals


def descendants(root: int) -> list[int]:
    """Every live process below `root`."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in _stats().items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], list(children.get(root, ()))
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, ()))
    return out


def pin(pid: int, cores: set[int]) -> None:
    """Every thread of process `pid` onto `cores` (sched_setaffinity on a pid moves only that one thread)."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(ProcessLookupError):
            os.sched_setaffinity(int(tid), cores)


def proc_cpu(pid: int) -> float:
    """CPU seconds used so far by this one process (all its threads), without its children."""
    f = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / TICK


def machine_busy() -> float:
    """CPU seconds the whole machine has spent busy (all cores), from /proc/stat."""
    f = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in f[:8])
    return (user + nice + system + irq + softirq + steal) / TICK


def own_cpu() -> float:
    """CPU seconds of this process and of the children it has reaped (the load generator)."""
    s, c = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return s.ru_utime + s.ru_stime + c.ru_utime + c.ru_stime


def settle(pids: list[int], window: float = 1.25, quiet: float = 0.05, limit: float = 30.0) -> None:
    """Wait until these process trees have used less than `quiet` CPU seconds over `window` seconds (deferred
    work such as a recording worker catching up is over), or `limit` seconds have passed. The window is longer
    than the addon's flush interval (1 s), so that a flush still due, the first one included (it imports pandas
    in the worker: about a second of CPU), happens before the figures are read, not in the next run."""
    last = sum(tree_cpu(*pids))
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        time.sleep(window)
        now = sum(tree_cpu(*pids))
        if now - last < quiet:
            return
        last = now


# -- wrk --------------------------------------------------------------------------------------------------------
def wrk_path() -> str | None:
    return shutil.which("wrk")


def wrk_version() -> str:
    out = subprocess.run(["wrk", "--version"], capture_output=True, text=True).stdout
    return out.split(" [", 1)[0].strip() or "wrk"


def _lua(body: bytes, headers: dict[str, str], path: str, host: str) -> str:
    text = body.decode()
    assert "]==]" not in text
    lines = ['wrk.method = "POST"', f"wrk.body = [==[{text}]==]", f'wrk.path = "{path}"']
    lines += [f'wrk.headers["{k}"] = "{v}"' for k, v in {**headers, "host": host}.items()]
    return "\n".join(lines) + "\n"


def run_wrk(
    connect: str, target: str, body: bytes, headers: dict[str, str], *, connections: int, threads: int, seconds: float
) -> Load:
    """`connect`: host:port wrk connects to (the proxy or the upstream); `target`: the upstream URL."""
    upstream = target.split("//", 1)[1].split("/", 1)[0]
    path = target if connect != upstream else "/" + target.split("//", 1)[1].split("/", 1)[1]
    with tempfile.NamedTemporaryFile("w", suffix=".lua") as script:
        script.write(_lua(body, headers, path, upstream))
        script.flush()
        args = ["wrk", "--latency", "--timeout", "10s", "-c", str(connections), "-t", str(threads)]
        args += ["-d", f"{seconds:g}s", "-s", script.name, f"http://{connect}/"]
        proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"wrk failed ({proc.returncode}): {proc.stderr or proc.stdout}")
    return parse_wrk(proc.stdout)


def _ms(text: str) -> float:
    m = re.fullmatch(r"([\d.]+)(us|ms|s|m|h)", text)
    if m is None:
        raise ValueError(f"not a wrk duration: {text!r}")
    return float(m.group(1)) * _UNITS[m.group(2)]


def parse_wrk(out: str) -> Load:
    total = re.search(r"(\d+) requests in ([\d.]+)(\w+),", out)
    p50 = re.search(r"^\s+50%\s+(\S+)\s*$", out, re.MULTILINE)
    p99 = re.search(r"^\s+99%\s+(\S+)\s*$", out, re.MULTILINE)
    if total is None or p50 is None or p99 is None:
        raise RuntimeError(f"cannot read wrk's output:\n{out}")
    errors = 0
    if m := re.search(r"Non-2xx or 3xx responses: (\d+)", out):
        errors += int(m.group(1))
    if m := re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out):
        errors += sum(int(x) for x in m.groups())
    seconds = _ms(total.group(2) + total.group(3)) / 1e3
    return Load(int(total.group(1)), seconds, _ms(p50.group(1)), _ms(p99.group(1)), errors)


# -- our own client, when wrk is missing ---------------------------------------------------------------------------
def run_own(
    connect: str, target: str, body: bytes, headers: dict[str, str], *, connections: int, seconds: float
) -> Load:
    """The same closed loop as wrk, in this process: enough to saturate mitmproxy on a quiet machine, but its
    Python costs the machine more CPU per request than wrk, and that CPU is taken from what the proxy could use."""
    upstream = target.split("//", 1)[1].split("/", 1)[0]
    path = target if connect != upstream else "/" + target.split("//", 1)[1].split("/", 1)[1]
    head = f"POST {path} HTTP/1.1\r\nhost: {upstream}\r\ncontent-length: {len(body)}\r\n"
    request = (head + "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n").encode() + body
    host, port = connect.rsplit(":", 1)
    return asyncio.run(_own(host, int(port), request, connections, seconds))


async def _own(host: str, port: int, request: bytes, connections: int, seconds: float) -> Load:
    latencies: list[float] = []
    errors = 0
    deadline = time.perf_counter() + seconds

    async def connection() -> None:
        nonlocal errors
        try:
            reader, writer = await asyncio.open_connection(host, port)
        except OSError:
            errors += 1
            return
        try:
            while time.perf_counter() < deadline:
                t0 = time.perf_counter()
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                m = _LENGTH.search(head)
                if m is None:  # our upstream always sends a length; anything else is an error reply
                    errors += 1
                    return
                await reader.readexactly(int(m.group(1)))
                latencies.append(time.perf_counter() - t0)
                if not head.startswith((b"HTTP/1.1 2", b"HTTP/1.0 2")):
                    errors += 1
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            errors += 1
        finally:
            writer.close()

    t0 = time.perf_counter()
    await asyncio.gather(*(connection() for _ in range(connections)))
    elapsed = time.perf_counter() - t0
    if not latencies:
        raise RuntimeError(f"no request completed through {host}:{port} ({errors} errors)")
    latencies.sort()
    n = len(latencies)
    return Load(n, elapsed, latencies[n // 2] * 1e3, latencies[min(n - 1, int(n * 0.99))] * 1e3, errors)
