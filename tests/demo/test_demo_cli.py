"""`converse-tap demo` as a user runs it: twice in a row, kept running then stopped, without its extra."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from converse_tap.cli import cli
from converse_tap.demo.run import report_actuals
from tests.integration.procs import Proc

pytestmark = pytest.mark.integration

DEMO = [sys.executable, "-m", "converse_tap", "demo", "--conversations", "3"]


def test_demo_twice_replaces_its_own_output(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    for run in (1, 2):
        r = subprocess.run([*DEMO, "--out", str(out), "--format", "json", "--seed", str(run)],
                           capture_output=True, text=True, timeout=300)  # fmt: skip
        assert r.returncode == 0, r.stderr
        truth = json.loads((out / "ground_truth.json").read_text())
        # the report is this run's alone: the first run's rows are gone, not added to
        assert (truth["seed"], report_actuals(json.loads(r.stdout))) == (run, truth["expected"])


def test_demo_refuses_a_dataset_it_did_not_write(tmp_path: Path) -> None:
    (tmp_path / "exchanges").mkdir()
    r = CliRunner().invoke(cli, ["demo", "--out", str(tmp_path)])
    assert r.exit_code == 2
    assert r.stderr == (
        f"Error: {tmp_path} holds a dataset that is not a demo's output; pass another --out, "
        "so the report shows this run only\n"
    )
    assert [p.name for p in tmp_path.iterdir()] == ["exchanges"]


def test_demo_keep_running_prints_and_writes_the_report_on_ctrl_c(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    proc = Proc([*DEMO, "--out", str(out), "--keep-running"])
    try:
        proc.wait_for(re.compile(r"Ctrl-C stops both and prints the report"), timeout=300)
    finally:
        rc = proc.stop(signal.SIGINT)
    assert rc == 0, proc.output
    assert "== Answer coverage ==" in proc.output and "Aborted" not in proc.output
    assert (out / "report.html").read_text().startswith("<!doctype html>")


def test_demo_without_its_extra_says_how_to_install_it(tmp_path: Path) -> None:
    # a fresh interpreter in which the demo extra's packages cannot be imported, as after `pip install a2a-converse-tap`
    code = textwrap.dedent(
        """
        import sys

        class NotInstalled:
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in {"a2a", "httpx", "uvicorn"}:
                    raise ModuleNotFoundError(f"No module named {name!r}", name=name)
                return None

        sys.meta_path.insert(0, NotInstalled())
        from converse_tap.cli import main
        main()
        """
    )
    for command in (["demo"], ["demo", "agent", "--port", "0"]):
        r = subprocess.run(
            [sys.executable, "-c", code, *command], capture_output=True, text=True, timeout=120, cwd=tmp_path
        )
        assert r.returncode == 2, r.stderr
        assert "pip install 'a2a-converse-tap[demo]'" in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "converse-tap-demo").exists()
