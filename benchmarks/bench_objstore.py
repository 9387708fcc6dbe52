"""A dataset on object storage beside the same dataset on local disk: `converse-tap ingest` and `converse-tap report
--format json` over each, the endpoint being moto's S3 server on loopback (a stand-in: its own speed is part of
every s3:// figure, so this measures the overhead of the path, not of a real S3).

    python -m benchmarks.bench_objstore [--flows 20000] [--reps 5]

Each measurement runs in a fresh process, local and s3:// interleaved; medians of wall time and the s3/local
ratio are printed.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pyarrow.fs as pafs

CLI = [sys.executable, "-m", "converse_tap"]


def _moto() -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("moto_server")), "-H", "127.0.0.1", "-p", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert proc.stdout is not None
    for line in proc.stdout:
        if m := re.search(r"Running on http://127\.0\.0\.1:(\d+)", line):
            threading.Thread(target=proc.stdout.read, daemon=True).start()  # its request log, drained
            return proc, int(m.group(1))
    raise RuntimeError("moto_server did not start")


def _timed(args: list[str], env: dict[str, str]) -> float:
    t = time.perf_counter()
    subprocess.run(args, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--flows", type=int, default=20_000)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    from tests.captures import write_capture

    moto, port = _moto()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-objstore-") as tmp:
            env = {
                **os.environ,
                "AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}",
                "AWS_ACCESS_KEY_ID": "bench",
                "AWS_SECRET_ACCESS_KEY": "bench",
                "AWS_REGION": "us-east-1",
                "XDG_CACHE_HOME": f"{tmp}/cache",
            }
            admin = pafs.S3FileSystem(
                endpoint_override=f"127.0.0.1:{port}",
                scheme="http",
                region="us-east-1",
                access_key="bench",
                secret_key="bench",
                allow_bucket_creation=True,
            )
            capture = write_capture(Path(tmp) / "cap.mitm", args.flows)
            size = capture.stat().st_size / 2**20
            ingest: dict[str, list[float]] = {"local": [], "s3": []}
            report: dict[str, list[float]] = {"local": [], "s3": []}
            for rep in range(args.reps):
                bucket = f"b-{uuid.uuid4().hex[:10]}"
                admin.create_dir(bucket)
                where = {"local": f"{tmp}/local-{rep}", "s3": f"s3://{bucket}/data"}
                for kind in ("local", "s3") if rep % 2 == 0 else ("s3", "local"):
                    ingest[kind].append(
                        _timed([*CLI, "ingest", str(capture), "--out", where[kind], "--jobs", "1"], env)
                    )
                for kind in ("local", "s3") if rep % 2 == 0 else ("s3", "local"):
                    report[kind].append(_timed([*CLI, "report", where[kind], "--format", "json"], env))
    finally:
        moto.send_signal(signal.SIGTERM)
        moto.wait(30)
    print(f"{args.flows} flows ({size:.1f} MiB capture), {args.reps} reps, medians, a shared machine:")
    for name, runs in (("ingest", ingest), ("report --format json", report)):
        lo, s3 = statistics.median(runs["local"]), statistics.median(runs["s3"])
        print(f"  {name:<22} local {lo:6.2f} s   s3:// (moto) {s3:6.2f} s   s3/local {s3 / lo:4.2f}x")


if __name__ == "__main__":
    main()
