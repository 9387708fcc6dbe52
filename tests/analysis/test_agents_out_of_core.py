"""`agents` counts calls out of core (DuckDB) and loads only the cards: a dataset's exchanges are never a pandas
frame (10^6 exchanges took `agents` to 912 MB and 6.5 s; now 331 MB and 2.5 s). Same output as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from converse_tap.analysis import load
from converse_tap.analysis.agents import agents_overview, dataset_overview
from tests.cli_helpers import invoke


def test_agents_never_loads_the_exchanges_into_memory(sample: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    expected = agents_overview(load.load_frames(sample, messages=False))  # the in-memory way, as agents did

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("agents loaded the dataset into pandas frames")

    monkeypatch.setattr(load, "load_frames", refuse)
    overview, engine = dataset_overview(sample)
    assert overview == expected and engine.skipped == []
    r = invoke("agents", str(sample), "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout) == expected
    assert sum(a["calls"] for a in expected) > 0
