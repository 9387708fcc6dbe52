"""The proxy's first look (`maybe_a2a`) and the worker's classification on hostile request lines and bodies.

    python -m benchmarks.bench_first_look [--reps 200]

Every request the proxy sees goes through `maybe_a2a` on mitmproxy's event loop, so its cost on a 64 KiB path or
body bounds what one request can cost every other connection. Prints microseconds per call (median of --reps).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

from converse_tap.a2a.classify import classify
from converse_tap.a2a.firstlook import maybe_a2a
from converse_tap.a2a.headers import Headers

K = 64 * 1024
CASES: list[tuple[str, str, str, bytes]] = [
    ("a2a call", "POST", "/a2a", b'{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {}}'),
    ("form post", "POST", "/login", b"user=a&password=b"),
    ("10 KB json", "POST", "/api", b'{"x": "' + b"y" * 10_000 + b'"}'),
    ("200 KB json", "POST", "/api", b'{"x": "' + b"y" * 200_000 + b'"}'),
    ("64 KiB segment", "GET", "/" + "a" * K, b""),
    ("64 KiB of /tasks/", "GET", "/tasks/" * (K // 7), b""),
    ("64 KiB of slashes", "GET", "/" * K, b""),
    ("64 KiB of %3A", "GET", "/%3A" * (K // 4), b""),
    ("64 KiB task id", "GET", "/v1/tasks/" + "x" * K, b""),
    ("64 KiB base, SendMessage", "POST", "/" + "b" * K + "/message:send", b"{}"),
]


def _median_us(fn: Callable[..., object], args: tuple[object, ...], reps: int) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=200)
    args = parser.parse_args()
    headers = Headers()
    print(f"{'request':26} {'maybe_a2a us':>13} {'classify us':>12}  recorded as")
    for name, verb, path, body in CASES:
        first = _median_us(maybe_a2a, (verb, path, headers, body or None), args.reps)
        full = _median_us(classify, (verb, "http://h" + path, headers, body or None), args.reps)
        req = classify(verb, "http://h" + path, headers, body or None)
        print(f"{name:26} {first:13.1f} {full:12.1f}  {req.method if req else '-'}")


if __name__ == "__main__":
    main()
