"""Where the report's time goes: each stage of the report over a dataset in turn, with the wall and CPU time it
took and the process's peak RSS after it (one process; stages that reuse a materialised fact are cheaper here
than alone).

    python -m benchmarks.analysis_stages DATASET
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

from converse_tap.analysis.engine import Engine


def _now() -> tuple[float, float]:
    t = os.times()
    return time.perf_counter(), t.user + t.system


def _hwm() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) // 1024
    return 0


def main(root: str) -> None:
    last = _now()

    def mark(name: str) -> None:
        nonlocal last
        now = _now()
        wall, cpu = now[0] - last[0], now[1] - last[1]
        print(f"{name:18} wall {wall:7.2f}s cpu {cpu:7.2f}s  peak RSS {_hwm()} MiB", flush=True)
        last = now

    e = Engine.over_dataset(root)
    mark("open")
    for what in ("message_keys", "replies", "last_verdicts"):
        e.build(what)
        mark(what)
    stages = {
        "turn_counts": e.turn_counts,
        "reply_counts": e.reply_counts,
        "cited": e.cited,
        "conv_summary": lambda: e.conversation_summary("all"),
        "routine_facts": lambda: e.routine_facts(("all",), None),
        "dataset_counts": e.dataset_counts,
        "anomalies": e.anomalies,
    }
    for name, run in stages.items():
        run()
        mark(name)
    e.drop_facts()
    e.close()
    print("done")


if __name__ == "__main__":
    main(sys.argv[1])
