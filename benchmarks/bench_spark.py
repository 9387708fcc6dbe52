"""The report on DuckDB beside the same report on Spark `local[2]`, over a generated dataset (bench_analysis's).

    python -m benchmarks.bench_spark --rows 10000000 [--reps 3] [--keep DIR] [--driver-memory 2g]

Each measurement runs in a fresh process, the engines interleaved. Printed as medians: the process's wall time
(start-up included: for Spark that is the JVM's), the report's own time (the session already up), and the
Spark/DuckDB ratios; the two reports are checked to be equal.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.bench_analysis import dataset, run_child


def measure(engine: str, root: str, driver_memory: str) -> None:
    """In a fresh process: start the engine, then the report as the CLI makes it (no breakdown); print timings."""
    t0 = time.perf_counter()
    from converse_tap.analysis.engine import Engine
    from converse_tap.analysis.report import build_report

    if engine == "spark":
        from converse_tap.analysis.spark import SparkEngine, spark_session

        spark = spark_session("local[2]", {"spark.driver.memory": driver_memory})
        started = time.perf_counter()
        with SparkEngine.over_spark(root, spark=spark) as e:
            rep = build_report(e)
    else:
        started = time.perf_counter()
        with Engine.over_dataset(root, threads=2) as e:
            rep = build_report(e)
    done = time.perf_counter()
    out = {"startup": started - t0, "report": done - started, "digest": json.dumps(rep, sort_keys=True)}
    print(json.dumps(out))


def _child(*args: str) -> tuple[float, dict]:
    return run_child("benchmarks.bench_spark", *args)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, default=10_000_000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--keep", type=Path, help="Keep the generated dataset here and reuse it.")
    p.add_argument("--driver-memory", default="2g", help="Spark's driver memory (local mode: all of Spark's).")
    p.add_argument("--measure", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.measure:
        measure(args.measure[0], args.measure[1], args.driver_memory)
        return
    with tempfile.TemporaryDirectory() as tmp:
        root = dataset(args.rows, args.keep, Path(tmp))
        runs: dict[str, list[tuple[float, dict]]] = {"duckdb": [], "spark": []}
        for _ in range(args.reps):  # interleaved
            for engine in runs:
                runs[engine].append(_child("--measure", engine, str(root), "--driver-memory", args.driver_memory))
                seconds, m = runs[engine][-1]
                print(f"  ({engine}: process {seconds:.2f}s, report {m['report']:.2f}s)", flush=True)
        digests = {r[1]["digest"] for rs in runs.values() for r in rs}
        wall = {e: statistics.median(s for s, _ in r) for e, r in runs.items()}
        report = {e: statistics.median(m["report"] for _, m in r) for e, r in runs.items()}
        for engine, r in runs.items():
            startup = statistics.median(m["startup"] for _, m in r)
            print(
                f"  {engine:6} process median {wall[engine]:7.2f}s  report {report[engine]:7.2f}s "
                f"(start-up {startup:5.2f}s; reports {min(m['report'] for _, m in r):.2f}-"
                f"{max(m['report'] for _, m in r):.2f}s)"
            )
        ratio = {"process": wall["spark"] / wall["duckdb"], "report": report["spark"] / report["duckdb"]}
        print(
            f"  spark/duckdb: process {ratio['process']:.1f}x, report {ratio['report']:.1f}x;"
            f" reports equal: {len(digests) == 1}"
        )


if __name__ == "__main__":
    main()
