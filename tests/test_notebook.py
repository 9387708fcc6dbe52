"""CI executes the notebook headless against a dataset the tests make, and fails on any error."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.golden.sample import build_sample

NOTEBOOK = Path(__file__).parents[1] / "notebooks" / "converse_report.ipynb"


@pytest.mark.integration
def test_notebook_runs_against_a_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build_sample(tmp_path / "data")
    monkeypatch.setenv("CONVERSE_TAP_DATASET", str(tmp_path / "data"))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "9 exchanges, 7 replies, 6 turns" in text
    assert "sql views: 3 assessed turns, 1 abandoned instances" in text  # the report's counts, from the views
    assert "routine: Book a table abandoned" in text  # and the transcript behind the abandoned one
    assert "All replies fall on one day, 1999-12-31: 14.3% written by a person." in text
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 2  # coverage, routines; one day is a sentence


def test_notebook_is_stored_without_outputs() -> None:
    nb = nbformat.read(NOTEBOOK, as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code")
