"""What drill-down costs: the HTML report with its examples and transcripts (20 per count, the default) beside the
same report without them, and a `sql` query of the turns view beside the report, over a generated dataset.

    python -m benchmarks.bench_drill --rows 200000 [--reps 3]

The variants are interleaved, one run each per round; medians and ratios are printed.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks.bench_analysis import generate
from converse_tap.analysis import Engine, build_report
from converse_tap.analysis.drill import open_views
from converse_tap.analysis.render import to_html


def html(root: Path, examples: int) -> None:
    report = build_report(Engine.over_dataset(root), by=("agent", "day"), examples=examples, transcripts=examples > 0)
    to_html(report)


def sql(root: Path) -> None:
    with open_views(root, facts=("turns",)) as engine:
        engine.con.sql("SELECT coverage, count(*) FROM turns GROUP BY ALL").fetchall()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        generate(root, args.rows)
        variants: dict[str, Callable[[], None]] = {
            "html report, no examples": lambda: html(root, 0),
            "html report, 20 examples per count + transcripts": lambda: html(root, 20),
            "report (text facts), as `report` runs": lambda: build_report(Engine.over_dataset(root)) and None,
            "sql: coverage of the turns view": lambda: sql(root),
        }
        times: dict[str, list[float]] = {name: [] for name in variants}
        for _ in range(args.reps):
            for name, run in variants.items():
                start = time.perf_counter()
                run()
                times[name].append(time.perf_counter() - start)
    med = {name: statistics.median(t) for name, t in times.items()}
    print(f"{args.rows} message rows, median of {args.reps} interleaved runs")
    for name, m in med.items():
        print(f"  {name:52s} {m:7.2f} s")
    base, drilled = med["html report, no examples"], med["html report, 20 examples per count + transcripts"]
    print(f"  drill-down / plain html: {drilled / base:.2f}")
    ratio = med["sql: coverage of the turns view"] / med["report (text facts), as `report` runs"]
    print(f"  sql turns / report: {ratio:.2f}")


if __name__ == "__main__":
    main()
