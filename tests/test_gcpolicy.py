import gc
from pathlib import Path

import pytest

from converse_tap import gcpolicy, ingest, ingest_share
from converse_tap.a2a.redact import TextPolicy
from converse_tap.store.reader import load
from tests.test_ingest import _flow_file


@pytest.fixture
def default_thresholds():
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*before)


def test_fewer_collections_is_restored_even_on_error(default_thresholds) -> None:
    with gcpolicy.fewer_collections():
        assert gc.get_threshold() == gcpolicy.THRESHOLDS
    assert gc.get_threshold() == (700, 10, 10)
    with pytest.raises(KeyError), gcpolicy.fewer_collections():
        raise KeyError("in the loop")
    assert gc.get_threshold() == (700, 10, 10)


def test_ingest_collects_less_while_it_runs_and_restores_the_callers_settings(
    tmp_path: Path, monkeypatch, default_thresholds
) -> None:
    capture = tmp_path / "flows.mitm"
    _flow_file(capture, 5)
    seen = []
    real = ingest_share.extract

    def spy(*args, **kwargs):
        seen.append(gc.get_threshold())
        return real(*args, **kwargs)

    monkeypatch.setattr(ingest_share, "extract", spy)
    result = ingest.ingest([capture], tmp_path / "data", TextPolicy())
    assert result.exchanges == 5 and len(load(tmp_path / "data", "exchanges")) == 5
    assert seen and set(seen) == {gcpolicy.THRESHOLDS}
    assert gc.get_threshold() == (700, 10, 10)
