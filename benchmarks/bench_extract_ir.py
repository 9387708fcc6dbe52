"""Instructions per extracted flow, counted by valgrind's callgrind: a figure that does not move with the machine's
load, so two versions of the extractor can be compared on a busy machine (wall-clock timings there vary by 30%).

    python -m benchmarks.bench_extract_ir [--flows 500] [--tree PATH ...]

Each tree (a checkout of this repository; default: this one) is run twice in a child process under callgrind over
the same benchmark capture (tests/captures.py): once reading the flows only, once reading and extracting them; the
difference divided by the flows is the extractor's instructions per flow. Needs Debian's `valgrind`; about a
minute per run.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

_CHILD = """
import sys
from converse_tap import flowfile
from converse_tap.a2a.extract import extract
from converse_tap.a2a.redact import TextPolicy
flows = list(flowfile.read(sys.argv[1]))[: int(sys.argv[3])]
if sys.argv[2] == "1":
    for x in flows:
        extract(x, TextPolicy())
"""


def _instructions(tree: Path, capture: Path, extract: bool, flows: int) -> int:
    args = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-c", _CHILD]
    env = {**os.environ, "PYTHONPATH": str(tree)}
    run = subprocess.run(
        [*args, str(capture), "1" if extract else "0", str(flows)], cwd=tree, env=env, capture_output=True, text=True
    )
    m = re.search(r"Collected : (\d+)", run.stderr)
    if run.returncode != 0 or m is None:
        raise SystemExit(f"callgrind failed in {tree}:\n{run.stderr[-2000:]}")
    return int(m.group(1))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--flows", type=int, default=500)
    p.add_argument("--tree", action="append", type=Path, help="a checkout to measure (repeatable; default: this one)")
    args = p.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed: apt-get install valgrind")
    trees = args.tree or [Path(__file__).resolve().parent.parent]
    from tests.captures import write_capture

    with tempfile.TemporaryDirectory() as tmp:
        capture = write_capture(Path(tmp) / "capture.mitm", args.flows)
        base: int | None = None
        for tree in trees:
            per_flow = (
                _instructions(tree, capture, True, args.flows) - _instructions(tree, capture, False, args.flows)
            ) / args.flows
            ratio = "" if base is None else f"  ({per_flow / base:.3f}x the first tree)"
            base = base or int(per_flow)
            print(f"{tree!s:<40} {per_flow:>10,.0f} instructions per extracted flow{ratio}")


if __name__ == "__main__":
    main()
