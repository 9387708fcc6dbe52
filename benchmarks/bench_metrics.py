"""Live metrics: prometheus-client (what the recorder uses) against OpenTelemetry's metrics SDK with its
Prometheus exporter, for the same updates per exchange, interleaved.

    python -m benchmarks.bench_metrics [--exchanges 20000] [--reps 7]

Per exchange: one counter increment on {agent, method, binding, outcome}, one histogram observation on
{agent, method}, one reply counter increment on {agent, author, coverage, reason}, over 20 agents. Prints the
median µs per exchange of updates, the ms per scrape (rendering /metrics text) and the ratio. The OTel
exporter is not a dependency: `pip install opentelemetry-exporter-prometheus` to run its half.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

AGENTS = [f"ag_{i:02d}" for i in range(20)]
COVERAGE = ["answered", "partial", "unanswered"]


def prometheus_client_variant() -> tuple[Any, Any]:
    from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

    r = CollectorRegistry()
    ex = Counter("converse_tap_exchanges", "x", ["agent", "method", "binding", "outcome"], registry=r)
    rep = Counter("converse_tap_replies", "x", ["agent", "author", "coverage", "reason"], registry=r)
    dur = Histogram("converse_tap_exchange_duration_seconds", "x", ["agent", "method"], registry=r)

    def update(i: int) -> None:
        agent = AGENTS[i % 20]
        ex.labels(agent, "SendMessage", "jsonrpc", "ok").inc()
        dur.labels(agent, "SendMessage").observe(0.01 * (i % 50))
        rep.labels(agent, "agent", COVERAGE[i % 3], "").inc()

    return update, lambda: generate_latest(r)


def otel_variant() -> tuple[Any, Any]:
    from opentelemetry.exporter.prometheus import PrometheusMetricReader
    from opentelemetry.sdk.metrics import MeterProvider
    from prometheus_client import REGISTRY, generate_latest

    reader = PrometheusMetricReader()
    meter = MeterProvider(metric_readers=[reader]).get_meter("bench")
    ex = meter.create_counter("converse_tap_exchanges")
    rep = meter.create_counter("converse_tap_replies")
    dur = meter.create_histogram("converse_tap_exchange_duration", unit="s")

    def update(i: int) -> None:
        agent = AGENTS[i % 20]
        ex.add(1, {"agent": agent, "method": "SendMessage", "binding": "jsonrpc", "outcome": "ok"})
        dur.record(0.01 * (i % 50), {"agent": agent, "method": "SendMessage"})
        rep.add(1, {"agent": agent, "author": "agent", "coverage": COVERAGE[i % 3], "reason": ""})

    return update, lambda: generate_latest(REGISTRY)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--exchanges", type=int, default=20_000)
    p.add_argument("--reps", type=int, default=7)
    a = p.parse_args()
    variants = {"prometheus-client": prometheus_client_variant()}
    try:
        variants["otel-sdk+exporter"] = otel_variant()
    except ImportError:
        print("opentelemetry-exporter-prometheus is not installed: measuring prometheus-client only")
    res: dict[str, dict[str, list[float]]] = {k: {"update": [], "scrape": []} for k in variants}
    for _ in range(a.reps):  # interleaved
        for name, (update, scrape) in variants.items():
            t0 = time.perf_counter()
            for i in range(a.exchanges):
                update(i)
            res[name]["update"].append((time.perf_counter() - t0) / a.exchanges * 1e6)
            t0 = time.perf_counter()
            scrape()
            res[name]["scrape"].append((time.perf_counter() - t0) * 1e3)
    print(f"{a.exchanges} exchanges x {a.reps} reps; medians (range)")
    for name, r in res.items():
        u, s = r["update"], r["scrape"]
        print(
            f"{name:18} update {statistics.median(u):6.2f} µs/exchange ({min(u):.2f}-{max(u):.2f})   "
            f"scrape {statistics.median(s):6.2f} ms ({min(s):.2f}-{max(s):.2f})"
        )
    if len(res) == 2:
        pc, ot = (statistics.median(r["update"]) for r in res.values())
        print(f"otel/prometheus-client update cost: {ot / pc:.2f}")


if __name__ == "__main__":
    main()
