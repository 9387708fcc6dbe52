"""Where the addon's time goes under load: py-spy on mitmdump and on its recording worker while wrk saturates it.

    pip install py-spy; apt-get install wrk
    python -m benchmarks.profile_proxy [--seconds 20] [--rate 250] [--out DIR]

Starts the benchmark upstream and `mitmdump -s ADDON` (as bench_proxy runs it), drives it with wrk (16
connections) and samples both processes with `py-spy record --format raw --nonblocking` at the same time. Prints,
per process, the share of on-CPU samples inside converse_tap code (inclusive) and the top functions of ours, and
keeps the raw stacks (flame-graph input) in DIR. py-spy counts a thread that is runnable but waiting for a CPU
as busy, so on a loaded machine a line that wakes another process (a socket or pipe write) collects samples
while that process runs; `--gil` samples only threads holding the GIL, which leaves such waits out.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections import Counter
from pathlib import Path

from benchmarks import load
from benchmarks.bench_proxy import BODY, HEADERS
from tests.integration.procs import Proc, mitmdump

OURS = "converse_tap/"
_FRAME = re.compile(r"^(.*) \((.*?):(\d+)\)$")


def frames(stack: str) -> list[tuple[str, str]]:
    """`func (file:line);...` from py-spy's raw format, outermost first -> [(function, file)]."""
    out = []
    for f in stack.split(";"):
        m = _FRAME.match(f)
        out.append((m.group(1), m.group(2)) if m else (f, ""))
    return out


def report(name: str, raw: Path, top: int) -> None:
    stacks: list[tuple[list[tuple[str, str]], int]] = []
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack and count.isdigit():
            stacks.append((frames(stack), int(count)))
    total = sum(c for _, c in stacks)
    if not total:
        print(f"{name}: no samples")
        return
    inclusive: Counter[str] = Counter()
    leaves: Counter[str] = Counter()
    entry: Counter[str] = Counter()
    in_ours = 0
    for fs, c in stacks:
        own = [(fn, f) for fn, f in fs if OURS in f]
        if not own:
            continue
        in_ours += c
        for key in {f"{fn} ({f.split(OURS, 1)[1]})" for fn, f in own}:
            inclusive[key] += c
        fn, f = own[0]
        entry[f"{fn} ({f.split(OURS, 1)[1]})"] += c
        leaf_fn, leaf_f = fs[-1]
        where = leaf_f.rsplit("site-packages/", 1)[-1].rsplit("/lib/python3.12/", 1)[-1]
        lfn, lf = own[-1]
        leaves[f"{lfn} ({lf.split(OURS, 1)[1]}) -> {leaf_fn} ({where})"] += c
    print(f"\n{name}: {total} samples; {in_ours / total:.1%} inside converse_tap code")
    for title, counter in (
        ("entered from outside", entry),
        ("inclusive", inclusive),
        ("innermost ours -> leaf", leaves),
    ):
        print(f"  top {title}:")
        for key, c in counter.most_common(top):
            print(f"    {c / total:6.1%}  {key}")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=20.0)
    p.add_argument("--rate", type=int, default=250, help="py-spy samples per second")
    p.add_argument("--connections", type=int, default=16)
    p.add_argument("--top", type=int, default=12)
    p.add_argument("--gil", action="store_true", help="sample only threads holding the GIL (py-spy --gil)")
    p.add_argument("--out", type=Path, help="keep the raw stacks here (default: a temporary directory)")
    a = p.parse_args()
    spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(spy).exists() or load.wrk_path() is None:
        sys.exit("profile_proxy needs py-spy (pip install py-spy) and wrk (apt-get install wrk)")
    tmp = Path(tempfile.mkdtemp(prefix="profile_proxy-"))
    out = a.out or tmp
    out.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        up = Proc([sys.executable, "-m", "benchmarks.upstream"])
        stack.callback(up.stop, signal.SIGTERM)
        base = f"http://127.0.0.1:{up.wait_for(re.compile(r'listening on (\d+)')).group(1)}"
        url, addon = stack.enter_context(
            mitmdump(tmp / "data", "--set", "flow_detail=0", "--set", f"confdir={tmp / 'conf'}",
                     "--set", "converse_tap_summary=off", "--set", "converse_tap_flush_interval=1")
        )  # fmt: skip
        connect = url.split("//", 1)[1]
        pid = addon.popen.pid
        # warm-up: connections, the worker's lazy imports on its first flushes; then its backlog drains
        load.run_wrk(connect, base + "/a2a", BODY, HEADERS, connections=a.connections, threads=2, seconds=5)
        load.settle([pid])
        workers = [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
        targets = {"mitmdump": pid, **{f"worker {w}": w for w in workers}}
        results: dict[str, load.Load] = {}
        loader = threading.Thread(
            target=lambda: results.setdefault(
                "load",
                load.run_wrk(
                    connect, base + "/a2a", BODY, HEADERS, connections=a.connections, threads=2, seconds=a.seconds + 2
                ),
            )
        )
        loader.start()
        spies = {
            name: subprocess.Popen(
                [
                    spy,
                    "record",
                    "--format",
                    "raw",
                    "--nonblocking",
                    "--rate",
                    str(a.rate),
                    "--duration",
                    str(int(a.seconds)),
                    "--pid",
                    str(target),
                    "-o",
                    str(out / f"{name.split()[0]}.txt"),
                    *(["--gil"] if a.gil else []),
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                text=True,
            )
            for name, target in targets.items()
        }
        for name, sp in spies.items():
            _, err = sp.communicate()
            if sp.returncode != 0:
                sys.exit(f"py-spy on {name} failed: {err.strip()}")
        loader.join()
    r = results["load"]
    print(f"load during the profile: {r.rps:.0f} req/s, p50 {r.p50:.1f} ms, p99 {r.p99:.1f} ms ({r.errors} errors)")
    for name in targets:
        report(name, out / f"{name.split()[0]}.txt", a.top)
    print(f"\nraw stacks (flame-graph input): {out}")


if __name__ == "__main__":
    main()
