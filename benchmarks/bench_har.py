"""HAR ingest against mitmproxy's own HAR import of the same file.

    python -m benchmarks.bench_har [--flows 5000] [--reps 3] [--jobs 1 2]

The HAR is the benchmark capture of `bench_ingest` (`tests/captures.py`: unary and streamed A2A calls with the
envelope, task polls, errors, gzip bodies, agent cards, a little non-A2A traffic) exported by mitmproxy's own HAR
writer (the `savehar` addon, as `mitmdump --set hardump=FILE` writes it). Each repetition runs, interleaved, each in
a fresh process:
- floor: `json.load` of the file and mitmproxy's `request_to_flow` over every entry (what reading it into
  mitmproxy costs);
- ingest: `ingest()` of the file with each `--jobs` (a HAR larger than one process's share is read in stripes:
  every process parses the whole file and converts and extracts its own entries).
CPU time per entry (the whole process tree) and entries/s by wall time are medians over the repetitions; the
floor's rate is its CPU's (one process).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _floor(har: Path) -> int:
    from mitmproxy.io import har as importer

    entries = json.loads(har.read_text())["log"]["entries"]
    for entry in entries:
        importer.request_to_flow(entry)
    return len(entries)


def _ingest(har: Path, out: Path, jobs: int) -> int:
    from converse_tap.a2a.redact import TextPolicy
    from converse_tap.ingest import ingest

    result = ingest([har], out, TextPolicy(), jobs=jobs)
    if result.errors:
        raise SystemExit(f"ingest reported errors: {result.errors[:3]}")
    return result.flows


def _cpu() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _child(what: str, har: Path, out: Path) -> None:
    # imported before the clock starts: imports are not what is measured
    import mitmproxy.io.har  # noqa: F401

    import converse_tap.ingest  # noqa: F401

    start, wall = _cpu(), time.perf_counter()
    n = _floor(har) if what == "floor" else _ingest(har, out, int(what.removeprefix("jobs=")))
    print(json.dumps({"entries": n, "cpu": _cpu() - start, "wall": time.perf_counter() - wall}))


def _make_har(path: Path, flows: int) -> int:
    from mitmproxy import io
    from mitmproxy.addons.savehar import SaveHar

    from tests.captures import write_capture

    capture = write_capture(path.with_suffix(".mitm"), flows)
    with capture.open("rb") as f:
        read = [flow for flow in io.FlowReader(f).stream() if flow.type == "http"]
    path.write_text(json.dumps(SaveHar().make_har(read)))  # type: ignore[arg-type]
    return len(read)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--flows", type=int, default=5000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--jobs", type=int, nargs="+", default=[1], help="ingest's --jobs, each measured")
    p.add_argument("--child", nargs=3, metavar=("WHAT", "HAR", "OUT"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        _child(args.child[0], Path(args.child[1]), Path(args.child[2]))
        return
    with tempfile.TemporaryDirectory(prefix="bench-har-") as tmp:
        har = Path(tmp) / "capture.har"
        n = _make_har(har, args.flows)
        mib = har.stat().st_size / 2**20
        print(f"{n} HTTP flows of the benchmark capture as mitmproxy's HAR export: {mib:.1f} MiB")
        whats = ["floor", *(f"jobs={j}" for j in args.jobs)]
        cpu: dict[str, list[float]] = {w: [] for w in whats}
        wall: dict[str, list[float]] = {w: [] for w in whats}
        for rep in range(args.reps):
            for what in whats:
                out = Path(tmp) / f"out-{rep}-{what}"
                run = subprocess.run(
                    [sys.executable, "-m", "benchmarks.bench_har", "--child", what, str(har), str(out)],
                    capture_output=True, text=True, check=True,
                )  # fmt: skip
                got = json.loads(run.stdout.strip().splitlines()[-1])
                cpu[what].append(got["cpu"] / got["entries"])
                wall[what].append(got["wall"] / got["entries"])
                print(
                    f"rep {rep + 1}/{args.reps}: {what:6} {got['entries']} entries, {got['cpu']:.2f} s CPU, "
                    f"{got['wall']:.2f} s wall"
                )
        floor = statistics.median(cpu["floor"])
        print(f"floor   {floor * 1e6:6.0f} us/entry of CPU  {1 / floor:8,.0f} entries/s")
        for what in whats[1:]:
            c, w = statistics.median(cpu[what]), statistics.median(wall[what])
            print(
                f"{what:7} {c * 1e6:6.0f} us/entry of CPU  {1 / w:8,.0f} entries/s by wall time  "
                f"({floor / w:.2f}x the floor's rate)"
            )


if __name__ == "__main__":
    main()
