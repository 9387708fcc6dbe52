"""Analysis at scale: `converse-tap report --format json` over a generated dataset, beside its floor: one DuckDB
scan of every column the report reads (the same files, memory limit and threads).

    python -m benchmarks.bench_analysis --rows 10000000 [--rows 30000000] [--reps 3] [--keep DIR] [--handoffs F]

Each measurement runs in a fresh process, the two interleaved; wall time (the process, start-up included) and peak
RSS (the process's VmHWM) are printed as medians with the report/scan ratio. The dataset is generated in a child
process, 10M rows per file, and kept in `--keep DIR/<rows>` for the next run when `--keep` is given.
`--handoffs F`: people write replies (and take conversations over) in that share of the conversations only
(default 1: in every one, as in the datasets of performance.md before section 1i); kept in `DIR/<rows>-h<F>`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from converse_tap.store.schema import MESSAGES, SLOT, with_version

AGENTS = 20
CONVERSATIONS_PER_AGENT = 2000
STATUSES = np.array(["active", "waiting_for_input", "completed", "abandoned"])


CHUNK = 10_000_000  # rows per generated file


def generate(root: Path, rows: int, seed: int = 1, part: int = 0, handoffs: float = 1.0) -> None:
    """`rows` sightings of agent replies: a third are re-sightings (polls, history) of earlier replies. Part k of a
    larger dataset holds messages of its own (ids and times after those of part k-1) in conversations shared by
    all parts. A twentieth of the replies are a person's (`human_owned`), in the first `handoffs` share of the
    conversations only."""
    rng = np.random.default_rng(seed + part)
    distinct = rows * 2 // 3
    conv = rng.integers(0, AGENTS * CONVERSATIONS_PER_AGENT, distinct)
    ids = part * distinct + np.arange(distinct)
    dup = part * distinct + rng.integers(0, distinct, rows - distinct)
    order_ids = np.concatenate([ids, dup])
    ts = np.concatenate([ids, dup + rng.integers(1, 1000, rows - distinct)]) * 1_000 + 1_795_000_000_000_000
    conv_all = conv[order_ids - part * distinct]
    has_routine = (conv_all % 10) < 3
    status = np.where(has_routine, STATUSES[rng.choice(4, rows, p=[0.3, 0.4, 0.2, 0.1])], None)
    local = order_ids - part * distinct
    cov_choice = rng.choice(4, distinct, p=[0.6, 0.2, 0.15, 0.05])[local]
    coverage = np.array(["answered", "partial", "unanswered", "unclear"])[cov_choice]
    avail = np.where(rng.random(distinct)[local] < 0.8, "assessed", "not_recorded")
    human = rng.random(distinct)[local] < 0.05
    if handoffs < 1:
        human &= conv_all < handoffs * AGENTS * CONVERSATIONS_PER_AGENT
    author = np.where(human, "human", "agent")
    pending = [
        [{"key": "date", "type": "string", "required": True, "description": "Which day?"}]
        if s == "waiting_for_input"
        else None
        for s in status
    ]
    n = rows
    cols = {
        "exchange_id": pa.array(np.char.add("ex-", order_ids.astype(str))),
        "seq": pa.array(np.zeros(n, dtype=np.int32)),
        "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
        "direction": pa.array(["response"] * n),
        "location": pa.array(["result.message"] * n),
        "object_kind": pa.array(["message"] * n),
        "agent": pa.array(np.char.add("ag_agent", (conv_all // CONVERSATIONS_PER_AGENT).astype(str))),
        "agent_url": pa.array(["http://a/"] * n),
        "binding": pa.array(["jsonrpc"] * n),
        "dialect": pa.array(["v1.0"] * n),
        "method": pa.array(["SendMessage"] * n),
        "message_id": pa.array(np.char.add("m", order_ids.astype(str))),
        "context_id": pa.array(np.char.add("c", conv_all.astype(str))),
        "role": pa.array(["agent"] * n),
        "has_envelope": pa.array(np.ones(n, dtype=bool)),
        "author": pa.array(author),
        "coverage_availability": pa.array(avail),
        "coverage": pa.array(np.where(avail == "assessed", coverage, None)),
        "coverage_reason": pa.array(np.where(avail == "assessed", "sufficient_evidence", None)),
        "ownership_state": pa.array(np.where(author == "human", "human_owned", "ai_owned")),
        "ownership_suppressed": pa.array(np.zeros(n, dtype=bool)),
        "routine_name": pa.array(np.where(has_routine, "Book a table", None)),
        "routine_status": pa.array(status),
        "pending_input": pa.array(pending, pa.list_(SLOT)),
        "citation_count": pa.array(np.ones(n, dtype=np.int32)),
        "anomalies": pa.array([[]] * n, pa.list_(pa.string())),
    }
    table = pa.table(
        {
            f.name: cols.get(f.name, pa.nulls(n, f.type if not pa.types.is_dictionary(f.type) else pa.string()))
            for f in MESSAGES
        }
    )
    table = table.cast(MESSAGES).replace_schema_metadata(with_version(MESSAGES).metadata)
    folder = root / "messages" / "date=2026-11-18"
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, folder / f"part-{part}.parquet", compression="zstd", row_group_size=1_000_000)


def scan_sql(root: Path) -> str:
    """One scan of every column the report reads: each counted, so each is read and decoded."""
    from converse_tap.analysis.load import CARD_COLUMNS, EXCHANGE_COLUMNS, MESSAGE_COLUMNS

    parts = []
    for table, columns in (
        ("messages", [*MESSAGE_COLUMNS, "object_kind"]),
        ("exchanges", EXCHANGE_COLUMNS),
        ("agent_cards", CARD_COLUMNS),
    ):
        if list(root.glob(f"{table}/*/*.parquet")):
            counts = ", ".join(f"count({c})" for c in columns)
            parts.append(f"(SELECT {counts} FROM read_parquet('{root}/{table}/*/*.parquet'))")
    return "SELECT * FROM " + ", ".join(parts)


def measure(what: str, root: str) -> None:
    """In a fresh process: the report as the CLI makes it, or the scan; prints the headline and VmHWM."""
    if what == "report":
        from converse_tap.cli import cli

        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "report.json"
            try:
                cli(["report", root, "--format", "json", "-o", str(out)], standalone_mode=True)
            except SystemExit as e:
                if e.code:
                    raise
            rep = json.loads(out.read_text())
        summary = [
            rep["dataset"]["replies"],
            rep["coverage"]["by_coverage"]["answered"]["count"],
            rep["authors"]["by_author"]["human"],
            rep["routines"]["abandonment_rate"],
        ]
    else:
        import duckdb

        from converse_tap.analysis.engine import DEFAULT_MEMORY_LIMIT

        con = duckdb.connect()
        con.execute(f"SET memory_limit = '{DEFAULT_MEMORY_LIMIT}'")
        summary = list(con.execute(scan_sql(Path(root))).fetchone() or ())[:1]
    t = os.times()
    print(json.dumps({"rss_mib": peak_rss_mib(), "cpu": t.user + t.system, "summary": summary}))


def peak_rss_mib() -> float:
    """This process's peak RSS (VmHWM). Not ru_maxrss: that survives exec, so a child of a big process would
    report the parent's size."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def run_child(module: str, *args: str) -> tuple[float, dict]:
    """Run `python -m module args` in a fresh process: its wall time and the JSON of its last stdout line."""
    t0 = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", module, *args], capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t0
    if out.returncode:
        raise SystemExit(f"{' '.join(args)} failed:\n{out.stderr[-4000:]}")  # the end: where a JVM trace says why
    lines = out.stdout.strip().splitlines()
    return seconds, json.loads(lines[-1]) if lines else {}


def _child(*args: str) -> tuple[float, dict]:
    return run_child("benchmarks.bench_analysis", *args)


def dataset(rows: int, keep: Path | None, tmp: Path, handoffs: float = 1.0) -> Path:
    root = (keep or tmp) / (str(rows) if handoffs == 1 else f"{rows}-h{handoffs:g}")
    if (root / "done").exists():
        print(f"{rows:,} message rows in {root} (kept from an earlier run)")
        return root
    t0 = time.perf_counter()
    for part in range((rows + CHUNK - 1) // CHUNK):
        _child("--generate", str(root), str(min(CHUNK, rows - part * CHUNK)), str(part), str(handoffs))
    size = sum(f.stat().st_size for f in root.rglob("*.parquet"))
    print(f"{rows:,} message rows, {size / rows:.1f} bytes/row on disk, generated in {time.perf_counter() - t0:.1f}s")
    (root / "done").touch()
    return root


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, action="append")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--keep", type=Path, help="Keep the generated datasets here and reuse them.")
    p.add_argument("--handoffs", type=float, default=1.0, help="Share of conversations with a person's replies.")
    p.add_argument("--measure", nargs=2, help=argparse.SUPPRESS)
    p.add_argument("--generate", nargs=4, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.measure:
        measure(*args.measure)
        return
    if args.generate:
        root, rows, part, handoffs = args.generate
        generate(Path(root), int(rows), part=int(part), handoffs=float(handoffs))
        return
    for rows in args.rows or [1_000_000]:
        with tempfile.TemporaryDirectory() as tmp:
            root = dataset(rows, args.keep, Path(tmp), args.handoffs)
            runs: dict[str, list[tuple[float, dict]]] = {"scan": [], "report": []}
            for _ in range(args.reps):  # interleaved
                for what in runs:
                    runs[what].append(_child("--measure", what, str(root)))
            med = {w: statistics.median(s for s, _ in r) for w, r in runs.items()}
            cpu = {w: statistics.median(m["cpu"] for _, m in r) for w, r in runs.items()}
            for what, r in runs.items():
                rss = max(m["rss_mib"] for _, m in r)
                spread = f"{min(s for s, _ in r):.2f}-{max(s for s, _ in r):.2f}"
                print(
                    f"  {what:6} median {med[what]:7.2f}s ({spread}), CPU {cpu[what]:7.2f}s  peak RSS {rss:6.0f} MiB"
                    f"  {r[0][1]['summary']}"
                )
            per_million = med["report"] / rows * 1e6
            print(
                f"  report/scan ratio: time {med['report'] / med['scan']:.2f} (target <= 3), CPU "
                f"{cpu['report'] / cpu['scan']:.2f}; report {per_million:.2f}s per million rows"
            )


if __name__ == "__main__":
    main()
