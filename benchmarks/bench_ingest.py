"""Ingest of a realistic capture against the floor of mitmproxy's own parser, with memory and output size.

    python -m benchmarks.bench_ingest [--flows 100000] [--reps 3] [--jobs N]

The capture (`tests/captures.py`: ~5 KiB per flow; unary SendMessage replies with the envelope, SSE streams of
3-10 events, task polls, JSON-RPC errors, gzip bodies, v0.3 and HTTP+JSON calls, agent cards, TLS connections,
a little non-A2A traffic) is generated once. Each repetition runs, interleaved, each in a fresh process:
- floor: one process running mitmproxy's bare `tnetstring.load` over every record of the file;
- jobs=1: `ingest()` in one process; jobs=N: `ingest()` with N processes (default: one per core, as the CLI).
Peak RSS is the largest VmHWM/ru_maxrss of the ingest process and of its worker processes. The files, row
groups and bytes of the dataset written are printed for each variant, so the figures come from one run. The
parallel variant's efficiency (its rate over N times one process's) is printed beside what starting one worker
process costs (a fresh interpreter importing what a worker imports), the part of the loss start-up explains.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from converse_tap import mempolicy


def _vmhwm_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def _run_floor(capture: Path) -> dict[str, float]:
    from mitmproxy.io import tnetstring

    t0 = time.perf_counter()
    n = 0
    with open(capture, "rb") as f:
        while True:
            try:
                tnetstring.load(f)
            except ValueError:
                break
            n += 1
    return {"secs": time.perf_counter() - t0, "flows": n, "rss": _vmhwm_mib()}


def _run_ingest(capture: Path, out: Path, jobs: int) -> dict[str, float]:
    from converse_tap.a2a.redact import TextPolicy
    from converse_tap.ingest import ingest

    t0 = time.perf_counter()
    result = ingest([capture], out, TextPolicy(), jobs=jobs)
    secs = time.perf_counter() - t0
    assert not result.errors and not result.unwritten, result
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return {
        "secs": secs,
        "flows": result.flows,
        "exchanges": result.exchanges,
        "rss": max(_vmhwm_mib(), children),
        **_dataset_shape(out),
    }


def _dataset_shape(out: Path) -> dict[str, float]:
    import pyarrow.parquet as pq

    shape: dict[str, float] = {}
    for table in ("exchanges", "messages", "agent_cards"):
        files = list((out / table).rglob("*.parquet"))
        shape[f"{table}_files"] = len(files)
        shape[f"{table}_mib"] = sum(f.stat().st_size for f in files) / 2**20
        shape[f"{table}_rows"] = sum(pq.ParquetFile(f).metadata.num_rows for f in files)
        shape[f"{table}_row_groups"] = sum(pq.ParquetFile(f).metadata.num_row_groups for f in files)
    return shape


def steps(capture: Path, reps: int) -> None:
    """Microseconds per flow of each step of ingest, in one process, interleaved: what the time goes to."""
    from mitmproxy.io import compat, tnetstring

    from converse_tap import flowfile
    from converse_tap.a2a.extract import extract
    from converse_tap.a2a.redact import TextPolicy
    from converse_tap.addon.flows import exchange_from_state
    from converse_tap.store.batches import TS_COLUMNS, rows_to_batch, to_micros
    from converse_tap.store.schema import TABLES

    def floor() -> int:
        n = 0
        with open(capture, "rb") as f:
            while True:
                try:
                    tnetstring.load(f)
                except ValueError:
                    return n
                n += 1

    def reference() -> list:
        out = []
        with open(capture, "rb") as f:
            while True:
                try:
                    state = tnetstring.load(f)
                except ValueError:
                    return out
                out.append(exchange_from_state(compat.migrate_flow(state)))  # type: ignore[arg-type]

    n = floor()
    names = ("floor", "reference read", "fast read", "extract", "rows to Arrow")
    times: dict[str, list[float]] = {k: [] for k in names}
    for _ in range(reps):
        t0 = time.perf_counter()
        floor()
        times["floor"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        reference()
        times["reference read"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        exchanges = list(flowfile.read(capture))
        times["fast read"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        extractions = [e for e in (extract(x, TextPolicy()) for x in exchanges) if e is not None]
        times["extract"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for table in ("exchanges", "messages", "agent_cards"):  # (extraction makes no capture_gaps rows)
            rows = [r for e in extractions for r in ([e.exchange] if table == "exchanges" else getattr(e, table))]
            to_micros(rows, TS_COLUMNS[table])
            rows_to_batch(rows, TABLES[table])
        times["rows to Arrow"].append(time.perf_counter() - t0)
    print(f"steps over {n:,} flows, one process, median of {reps} interleaved reps: microseconds per flow")
    for k, v in times.items():
        print(f"  {k:<16} {statistics.median(v) / n * 1e6:7.0f}")


def _child(args: list[str]) -> dict[str, float]:
    """In a fresh process with the environment `converse-tap` gives itself (Arrow's allocator)."""
    env = {**mempolicy.ENVIRONMENT, **os.environ}
    cmd = [sys.executable, "-m", "benchmarks.bench_ingest", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"benchmark child failed: {proc.stderr[-2000:]}")
    figures: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
    return figures


def _worker_start() -> float:
    """Seconds a fresh interpreter takes to import what an ingest worker process imports, and exit."""
    t0 = time.perf_counter()
    code = "import converse_tap.ingest_share, converse_tap.ingest"
    subprocess.run([sys.executable, "-c", code], check=True, env={**mempolicy.ENVIRONMENT, **os.environ})
    return time.perf_counter() - t0


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--flows", type=int, default=100_000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--jobs", type=int, default=min(os.cpu_count() or 1, 8), help="the parallel variant")
    p.add_argument("--steps", type=int, metavar="FLOWS", help="time each step of ingest over this many flows")
    p.add_argument("--child", nargs=3, metavar=("WHAT", "CAPTURE", "OUT"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        what, capture, out = args.child
        figures = _run_floor(Path(capture)) if what == "floor" else _run_ingest(Path(capture), Path(out), int(what))
        print(json.dumps(figures))
        return

    from tests.captures import write_capture

    if args.steps:
        with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
            steps(write_capture(Path(tmp) / "capture.mitm", args.steps), args.reps)
        return
    with tempfile.TemporaryDirectory(prefix="bench-ingest-") as tmp:
        capture = Path(tmp) / "capture.mitm"
        t0 = time.perf_counter()
        write_capture(capture, args.flows)
        size = capture.stat().st_size
        print(
            f"{args.flows:,} flows, {size / 2**20:.1f} MiB ({size / args.flows / 1024:.1f} KiB/flow), generated in "
            f"{time.perf_counter() - t0:.0f}s; {os.cpu_count()} cores; median of {args.reps} interleaved reps"
        )
        variants = ["floor", "1", str(args.jobs)] if args.jobs != 1 else ["floor", "1"]
        runs: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
        starts = []
        for rep in range(args.reps):
            starts.append(_worker_start())
            for v in variants:
                out = Path(tmp) / f"out-{v}-{rep}"
                runs[v].append(_child(["--child", v, str(capture), str(out)]))
                shutil.rmtree(out, ignore_errors=True)
    rate = {v: statistics.median(r["flows"] / r["secs"] for r in rs) for v, rs in runs.items()}
    print(f"{'variant':<22} {'flows/s':>9} {'range':>15} {'peak RSS MiB':>13}")
    for v, rs in runs.items():
        rates = [r["flows"] / r["secs"] for r in rs]
        name = "floor (tnetstring.load)" if v == "floor" else f"ingest jobs={v}"
        print(f"{name:<22} {rate[v]:9,.0f} {min(rates):7,.0f}-{max(rates):<7,.0f} {max(r['rss'] for r in rs):13.0f}")
    for v in variants[1:]:
        r = runs[v][-1]
        print(
            f"jobs={v}: "
            + "; ".join(
                f"{t} {r[t + '_rows']:,.0f} rows in {r[t + '_files']:.0f} files, "
                f"{r[t + '_row_groups']:.0f} row groups, {r[t + '_mib']:.2f} MiB"
                for t in ("exchanges", "messages", "agent_cards")
            )
        )
    par = variants[-1]
    if par != "1":
        print(
            f"jobs={par}: parallel efficiency {rate[par] / rate['1'] / int(par):.0%} (jobs={par} / ({par} x jobs=1)); "
            f"a fresh worker process's start-up (interpreter and imports) {statistics.median(starts):.2f}s, "
            f"{statistics.median(starts) * rate['1']:,.0f} flows of one process's time"
        )
    files = {v: sum(runs[v][-1][f"{t}_files"] for t in ("exchanges", "messages", "agent_cards")) for v in variants[1:]}
    print(
        f"ingest jobs={par} / floor: {rate[par] / rate['floor']:.2f}x (target >= 2); "
        f"jobs={par} / jobs=1: {rate[par] / rate['1']:.2f}x; "
        f"Parquet files jobs={par} / jobs=1: {files[par] / files['1']:.2f} (target <= 2); "
        f"peak RSS max {max(r['rss'] for v in variants[1:] for r in runs[v]):.0f} MiB (target <= 256)"
    )


if __name__ == "__main__":
    main()
