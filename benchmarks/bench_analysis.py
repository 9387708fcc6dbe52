"""Analysis at scale: the full report over generated datasets, beside DuckDB SQL computing the three headline
metrics (coverage distribution, author share, routine abandonment) over the same files.

    python -m benchmarks.bench_analysis --rows 1000000 [--rows 10000000] [--reps 3]

Each measurement runs in a fresh process; wall time and peak RSS (VmHWM) are printed with the ratio.
DuckDB is optional (pip install duckdb); without it only our figures are printed.
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

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from converse_tap.store.schema import MESSAGES, SLOT, with_version

AGENTS = 20
CONVERSATIONS_PER_AGENT = 2000
STATUSES = np.array(["active", "waiting_for_input", "completed", "abandoned"])


def generate(root: Path, rows: int, seed: int = 1) -> None:
    """`rows` sightings of agent replies: a third are re-sightings (polls, history) of earlier replies."""
    rng = np.random.default_rng(seed)
    distinct = rows * 2 // 3
    conv = rng.integers(0, AGENTS * CONVERSATIONS_PER_AGENT, distinct)
    ids = np.arange(distinct)
    dup = rng.integers(0, distinct, rows - distinct)
    order_ids = np.concatenate([ids, dup])
    ts = np.concatenate([ids, dup + rng.integers(1, 1000, rows - distinct)]) * 1_000 + 1_795_000_000_000_000
    conv_all = conv[order_ids]
    has_routine = (conv_all % 10) < 3
    status = np.where(has_routine, STATUSES[rng.choice(4, rows, p=[0.3, 0.4, 0.2, 0.1])], None)
    cov_choice = rng.choice(4, distinct, p=[0.6, 0.2, 0.15, 0.05])[order_ids]
    coverage = np.array(["answered", "partial", "unanswered", "unclear"])[cov_choice]
    avail = np.where(rng.random(distinct)[order_ids] < 0.8, "assessed", "not_recorded")
    author = np.where(rng.random(distinct)[order_ids] < 0.05, "human", "agent")
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
    folder.mkdir(parents=True)
    pq.write_table(table, folder / "part-0.parquet", compression="zstd", row_group_size=1_000_000)


DUCKDB_SQL = """
WITH s AS (SELECT * FROM read_parquet('{root}/messages/*/*.parquet', hive_partitioning=true)
           WHERE role = 'agent' AND has_envelope),
r AS (SELECT message_id, arg_max(s, ts) AS last, min(ts) AS first_seen FROM s GROUP BY message_id),
replies AS (SELECT message_id, first_seen, last.agent AS agent, last.context_id AS conv, last.author AS author,
                   last.coverage_availability AS avail, last.coverage AS coverage,
                   coalesce(last.originating_turn_id, message_id) AS turn,
                   coalesce(last.routine_name, last.routine_tool_name) AS routine, last.routine_status AS status
            FROM r),
turns AS (SELECT agent, turn, arg_max(coverage, first_seen) AS coverage, arg_max(avail, first_seen) AS avail
          FROM replies WHERE avail IS NOT NULL OR coverage IS NOT NULL GROUP BY agent, turn),
rs AS (SELECT *, coalesce(sum(CASE WHEN status IN ('completed','abandoned') THEN 1 ELSE 0 END)
         OVER (PARTITION BY agent, conv, routine ORDER BY first_seen, message_id
               ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS instance
       FROM replies WHERE status IS NOT NULL AND routine IS NOT NULL),
inst AS (SELECT arg_max(status, first_seen) AS last_status FROM rs GROUP BY agent, conv, routine, instance)
SELECT
  (SELECT list({{'coverage': coverage, 'n': n}})
     FROM (SELECT coverage, count(*) n FROM turns WHERE avail = 'assessed' GROUP BY 1)),
  (SELECT list({{'author': author, 'n': n}})
     FROM (SELECT author, count(*) n FROM replies WHERE author IS NOT NULL GROUP BY 1)),
  (SELECT count(*) FILTER (WHERE last_status = 'abandoned')
          / count(*) FILTER (WHERE last_status IN ('completed','abandoned')) FROM inst)
"""


def measure(engine: str, root: str) -> None:
    t0 = time.perf_counter()
    if engine == "ours":
        from converse_tap.analysis import build_report
        from converse_tap.analysis.engine import Engine

        rep = build_report(Engine.over_dataset(root))
        summary = [
            rep["coverage"]["by_coverage"]["answered"]["count"],
            rep["authors"]["by_author"]["human"],
            rep["routines"]["abandonment_rate"],
        ]
    else:
        import duckdb

        con = duckdb.connect()
        con.execute("SET threads TO 2")
        row = con.execute(DUCKDB_SQL.format(root=root)).fetchone()
        assert row is not None
        summary = [
            next(x["n"] for x in row[0] if x["coverage"] == "answered"),
            next(x["n"] for x in row[1] if x["author"] == "human"),
            row[2],
        ]
    seconds = time.perf_counter() - t0
    print(json.dumps({"seconds": seconds, "rss_mib": peak_rss_mib(), "summary": summary}))


def peak_rss_mib() -> float:
    """This process's peak RSS (VmHWM). Not ru_maxrss: that survives exec, so a child of the big generating
    process would report the parent's size."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _run(engine: str, root: Path) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_analysis", "--measure", engine, str(root)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", type=int, action="append")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--measure", nargs=2, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.measure:
        measure(*args.measure)
        return
    try:
        import duckdb  # noqa: F401

        engines = ["ours", "duckdb"]
    except ImportError:
        engines = ["ours"]
    for rows in args.rows or [1_000_000]:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            generate(Path(tmp), rows)
            size = sum(f.stat().st_size for f in Path(tmp).rglob("*.parquet"))
            took = time.perf_counter() - t0
            print(f"{rows:,} message rows, {size / rows:.1f} bytes/row on disk, generated in {took:.1f}s")
            results: dict[str, list[dict]] = {e: [] for e in engines}
            for _ in range(args.reps):  # interleaved
                for e in engines:
                    results[e].append(_run(e, Path(tmp)))
            for e in engines:
                secs = statistics.median(r["seconds"] for r in results[e])
                rss = max(r["rss_mib"] for r in results[e])
                print(f"  {e:7} median {secs:6.2f}s  peak RSS {rss:7.0f} MiB  headline {results[e][0]['summary']}")
            if "duckdb" in results:
                ratio = statistics.median(r["seconds"] for r in results["ours"]) / statistics.median(
                    r["seconds"] for r in results["duckdb"]
                )
                print(f"  ours/duckdb time ratio {ratio:.2f} (target <= 1.5)")


if __name__ == "__main__":
    main()
