"""Debian's Prometheus scrapes the recorder's /metrics during a recorded session of the demo agent; its query
API returns the counts the dataset holds for the same traffic."""

from __future__ import annotations

import asyncio
import re
import urllib.request
from pathlib import Path

import httpx
import pytest

from converse_tap.demo.agent import AGENTS
from converse_tap.demo.driver import Driver
from converse_tap.demo.plans import build_plans
from converse_tap.store.reader import load
from tests.export.prom import prometheus
from tests.integration.procs import Canned, demo_agent, mitmdump
from tests.integration.test_proxy import BODY, HEADERS

pytestmark = pytest.mark.integration
METRICS = re.compile(r"metrics at (http://127\.0\.0\.1:(\d+))/metrics")


def _direct(url: str, name: str) -> float:
    """The sum of one metric's samples, read from /metrics directly."""
    with urllib.request.urlopen(url, timeout=10) as r:
        text = r.read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(name + "{"))


def test_prometheus_sees_what_the_dataset_holds(tmp_path: Path) -> None:
    out = tmp_path / "data"
    with (
        demo_agent() as agent,
        Canned() as sentinel,
        mitmdump(out, "--set", "converse_tap_metrics_listen=127.0.0.1:0", "--set", "flow_detail=0") as (proxy, proc),
    ):
        metrics_base, port = proc.wait_for(METRICS).groups()
        with prometheus([f"127.0.0.1:{port}"], tmp_path / "prom") as prom:
            stats = asyncio.run(Driver(agent, proxy, 4).run(build_plans(10, 3, list(AGENTS))))
            assert not stats.errors and stats.requests > 10
            # records reach the worker in order: once this last exchange's summary line is out, the metrics
            # count every exchange before it
            with httpx.Client(proxy=proxy, timeout=30) as client:
                assert client.post(f"{sentinel.base}/a2a", content=BODY, headers=HEADERS).status_code == 200
            proc.wait_for(re.compile(re.escape(sentinel.base.removeprefix("http://")) + r"/a2a SendMessage"))
            url = f"{metrics_base}/metrics"
            exchanges = _direct(url, "converse_tap_exchanges_total")
            replies = _direct(url, "converse_tap_replies_total")
            prom.wait_for("sum(converse_tap_exchanges_total)", exchanges)
            prom.wait_for("sum(converse_tap_replies_total)", replies)
            by_agent = {
                r["metric"]["agent"]: float(r["value"][1])
                for r in prom.query("sum by (agent) (converse_tap_exchanges_total)")
            }
            by_coverage = {
                r["metric"].get("coverage", ""): float(r["value"][1])
                for r in prom.query("sum by (coverage) (converse_tap_replies_total)")
            }
            journaled = prom.scalar('converse_tap_rows_journaled_total{table="exchanges"}')
            durations = prom.scalar("sum(converse_tap_exchange_duration_seconds_count)")
    ex = load(out, "exchanges")
    msgs = load(out, "messages")
    assert len(ex) == exchanges == durations
    assert journaled is not None and journaled <= len(ex)
    assert by_agent == {k: float(v) for k, v in ex.groupby("agent", observed=True).size().items()}
    replies_rows = msgs[(msgs.direction == "response") & msgs.has_envelope & (msgs.role == "agent")]
    distinct = replies_rows.sort_values("ts").drop_duplicates(["agent", "message_id"])
    assert replies == len(distinct) > 0
    expected = distinct["coverage"].astype(object).fillna("").value_counts().to_dict()
    assert by_coverage == {k: float(v) for k, v in expected.items()}
    assert len(replies_rows) > len(distinct)  # re-sightings happened, and were not counted twice
