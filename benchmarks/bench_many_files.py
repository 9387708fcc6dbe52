"""The readers over a dataset of very many small files, as a fleet of recorders makes one (10 recorders rolling
over every 300 s: 2,880 files a day per table): `report`, `sql`, `check`, `agents` and `show`, each in a process
of its own under `/usr/bin/time -v`, with its wall time, CPU time and peak RSS per number of files. Prints
figures; asserts nothing.

    python -m benchmarks.bench_many_files [N ...] [--per-day 2880] [--nofile 1024] [--keep DIR]

The dataset is the golden sample (tests/golden/sample.py) written once by the store's own writer, its Parquet
files then hard-linked N times per table into `date=` partitions under distinct writer names (one inode: the
page cache holds it, so the figures are the readers' own cost per file, not the disk's).
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import re
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.golden.sample import build_sample  # noqa: E402

TABLES = ("exchanges", "messages", "agent_cards")
TOOL = str(Path(sys.executable).with_name("converse-tap"))


def build(out: Path, n: int, per_day: int) -> None:
    """`out`: a dataset of `n` files per table, `per_day` of them in each day's partition."""
    sample = out.parent / "one"
    if not sample.exists():
        build_sample(sample)
    for table in TABLES:
        (src,) = sorted((sample / table).glob("date=*/part-*.parquet"))
        start = dt.date(2026, 1, 1)
        for i in range(n):
            day = start + dt.timedelta(days=i // per_day)
            folder = out / table / f"date={day.isoformat()}"
            if i % per_day == 0:
                folder.mkdir(parents=True, exist_ok=True)
            stamp = 1_767_225_600_000 + i * 30_000
            os.link(src, folder / f"part-{stamp}-bench{i % 10}-{os.getpid()}-{i:x}-0.parquet")
    for hidden in sample.glob("_*"):
        if hidden.is_file():
            shutil.copy2(hidden, out / hidden.name)


COMMANDS = {
    "report": ["report", "{d}", "--format", "json", "-o", os.devnull],
    "sql": ["sql", "{d}", "select count(*) from exchanges"],
    "check": ["check", "{d}", "--allow-empty", "--max-unanswered-share", "1"],
    "agents": ["agents", "{d}"],
    "show": ["show", "{d}", "c1"],
}
_FIELDS = {
    "wall": re.compile(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (.+)"),
    "user": re.compile(r"User time \(seconds\): ([\d.]+)"),
    "sys": re.compile(r"System time \(seconds\): ([\d.]+)"),
    "rss": re.compile(r"Maximum resident set size \(kbytes\): (\d+)"),
}


def _seconds(clock: str) -> float:
    out = 0.0
    for part in clock.strip().split(":"):
        out = out * 60 + float(part)
    return out


def measure(dataset: Path, name: str, nofile: int | None, timeout: float) -> str:
    """One command over the dataset: its figures, or how it failed."""
    argv = ["/usr/bin/time", "-v", TOOL, *(a.format(d=dataset) for a in COMMANDS[name])]

    def limit() -> None:
        if nofile is not None:
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, preexec_fn=limit)
    except subprocess.TimeoutExpired:
        return f"{name:7} timed out after {timeout:.0f}s"
    got = {k: p.search(done.stderr) for k, p in _FIELDS.items()}
    if not all(got.values()):
        return f"{name:7} no figures: {done.stderr[-300:]!r}"
    wall = _seconds(got["wall"].group(1))  # type: ignore[union-attr]
    cpu = float(got["user"].group(1)) + float(got["sys"].group(1))  # type: ignore[union-attr]
    rss = int(got["rss"].group(1)) // 1024  # type: ignore[union-attr]
    line = f"{name:7} exit {done.returncode:3}  wall {wall:7.1f}s  cpu {cpu:7.1f}s  peak RSS {rss:5} MiB"
    if done.returncode not in (0, 1):
        error = [s for s in done.stderr.splitlines() if s.strip() and not s.startswith("\t")][-1:]
        line += f"  ({error[0][:160] if error else '?'})"
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", nargs="*", type=int, default=[1_000, 10_000, 30_000])
    parser.add_argument("--per-day", type=int, default=2_880)
    parser.add_argument("--nofile", type=int, default=None, help="the open-files limit of each command")
    parser.add_argument("--commands", default=",".join(COMMANDS))
    parser.add_argument("--timeout", type=float, default=180.0)
    parser.add_argument("--keep", type=Path, default=None, help="build the datasets here and keep them")
    args = parser.parse_args()
    base = args.keep or Path(tempfile.mkdtemp(prefix="bench-many-files-"))
    try:
        for n in args.n:
            dataset = base / f"n{n}-d{args.per_day}"
            if not dataset.exists():
                build(dataset, n, args.per_day)
            print(f"{n} files per table, {-(-n // args.per_day)} days, nofile {args.nofile or 'as is'}:", flush=True)
            for name in args.commands.split(","):
                print("  " + measure(dataset, name, args.nofile, args.timeout), flush=True)
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
