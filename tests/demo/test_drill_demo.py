"""Drill-down against the demo's ground truth: the `sql` views count what the driver intended (and what the
report says), and `show` of each conversation gives back what the driver sent, in order."""

from __future__ import annotations

import asyncio
import json

import pytest
from click.testing import CliRunner

from converse_tap.analysis import build_report
from converse_tap.analysis.drill import open_views
from converse_tap.analysis.engine import Engine
from converse_tap.analysis.transcript import transcript
from converse_tap.cli import cli
from converse_tap.demo.run import DemoResult, report_actuals, run_demo
from tests.drill_counts import sql_actuals

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> DemoResult:
    out = tmp_path_factory.mktemp("demo")
    result = asyncio.run(run_demo(out, conversations=30, seed=5, concurrency=4))
    assert result.stats.errors == []
    return result


def test_sql_views_count_the_ground_truth_and_the_report(demo: DemoResult) -> None:
    truth = json.loads((demo.out / "ground_truth.json").read_text())
    counted = sql_actuals(demo.out)
    assert counted == truth["expected"]
    assert counted == report_actuals(build_report(Engine.over_dataset(demo.out)))


def test_show_gives_back_what_the_driver_sent(demo: DemoResult) -> None:
    sent = demo.stats.sent
    assert len(sent) == demo.stats.conversations == 30
    with open_views(demo.out) as engine:
        for conversation, texts in sent.items():
            t = transcript(engine, conversation)
            users = [m["text"] for m in t["messages"] if m["role"] == "user"]
            assert users == texts, conversation
            stamps = [m["at"] for m in t["messages"]]
            assert stamps == sorted(stamps)
            assert all(m["envelope"] is not None for m in t["messages"] if m["author"])
    # and through the command line, one conversation with a routine abandoned in it
    with open_views(demo.out) as engine:
        ((abandoned,),) = engine.con.sql(
            "SELECT conversation FROM routine_instances WHERE outcome = 'abandoned' ORDER BY started LIMIT 1"
        ).fetchall()
    r = CliRunner().invoke(cli, ["show", str(demo.out), abandoned, "--format", "json"], catch_exceptions=False)
    t = json.loads(r.stdout)
    assert [m["text"] for m in t["messages"] if m["role"] == "user"] == sent[abandoned]
    statuses = [m["envelope"]["routine"]["status"] for m in t["messages"] if (m["envelope"] or {}).get("routine")]
    assert statuses[-1] == "abandoned"
    text = CliRunner().invoke(cli, ["show", str(demo.out), abandoned]).stdout
    assert all(f": {line}" in text for line in sent[abandoned])
