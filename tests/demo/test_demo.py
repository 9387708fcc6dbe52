"""The project's main correctness check: the report computed from recorded traffic equals the driver's truth."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from converse_tap.analysis import build_report, load_frames
from converse_tap.analysis.engine import Engine
from converse_tap.demo.plans import KINDS
from converse_tap.demo.run import report_actuals, run_demo

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("seed", [3, 4])
def test_report_equals_ground_truth(tmp_path: Path, seed: int) -> None:
    result = asyncio.run(run_demo(tmp_path, conversations=45, seed=seed, concurrency=4))
    assert result.stats.errors == []
    truth = json.loads((tmp_path / "ground_truth.json").read_text())
    # the mix must exercise what the comparison is about: every kind of conversation, every transport
    assert set(truth["mix"]) == set(KINDS)
    assert truth["expected"]["routines.abandoned"] > 0 and truth["expected"]["authors.suppressed_turns"] > 0
    assert truth["polls"] > 0 and truth["resubscribes"] > 0
    assert all(n > 0 for n in truth["transports"].values()), truth["transports"]
    report = build_report(Engine.over_dataset(tmp_path, memory_limit="64MB"))  # what `report` runs, out of core
    assert report_actuals(report) == truth["expected"]
    # the same SQL over frames loaded into memory (the notebook's way) gives the very same report
    in_memory = build_report(load_frames(tmp_path), by=("agent", "day", "routine"))
    assert {k: v for k, v in in_memory.items() if k != "groups"} == report
    assert sum(g["authors"]["replies"] for g in in_memory["groups"]["agent"].values()) == report["authors"]["replies"]
    adoption = report["conformance"]["adoption"]["requests_asking_converse"]
    assert (adoption["count"], adoption["of"]) == (truth["requests_with_extension"], truth["requests"])
    assert report["conformance"]["anomalies"] == []


def test_brain_routines_match_the_card_schema() -> None:
    from converse_tap.demo.brain import ROUTINES

    schema = ROUTINES["book_table"].input_schema()
    assert schema["required"] == ["date", "partySize"]
    assert set(schema["properties"]) == {"date", "partySize", "notes"}
