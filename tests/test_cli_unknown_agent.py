"""Zero measured data is never reported as success: every command with --agent refuses an agent the dataset never
saw, as `report` does (exit 2, the agents it saw listed on stderr), while a query whose own WHERE matches nothing is
still an empty answer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from converse_tap.store.gaps import CaptureGap
from converse_tap.store.writer import DatasetWriter
from tests.cli_helpers import invoke

AGENT = "agent.test:9000/a2a/jsonrpc"
QUERY = "SELECT count(*) AS n FROM replies"


def refusal(sample: Path, *agents: str) -> str:
    """What `report` says of these --agent values, the wording every command must give."""
    r = invoke("report", str(sample), *[a for name in agents for a in ("--agent", name)])
    assert r.exit_code == 2 and r.stdout == ""
    return str(r.stderr)


@pytest.mark.parametrize("agents", [("nobody",), (AGENT, "nobody"), (AGENT.upper(),)])
@pytest.mark.parametrize("fmt", ["json", "csv", "table"])
def test_sql_refuses_an_agent_the_dataset_never_saw_as_report_does(
    sample: Path, agents: tuple[str, ...], fmt: str
) -> None:
    args = [a for name in agents for a in ("--agent", name)]
    r = invoke("sql", str(sample), QUERY, *args, "--format", fmt)
    assert (r.exit_code, r.stdout) == (2, "")
    assert r.stderr == refusal(sample, *agents)
    assert "never saw this agent. The agents it saw:\n  agent.test:9000\n  " + AGENT in r.stderr


def test_sql_answers_an_empty_where_of_a_known_agent_with_no_rows(sample: Path) -> None:
    r = invoke("sql", str(sample), f"{QUERY} WHERE conversation = 'no-such'", "--agent", AGENT, "--format", "json")
    assert (r.exit_code, json.loads(r.stdout), r.stderr) == (0, [{"n": 0}], "")
    r = invoke("sql", str(sample), "SELECT * FROM turns WHERE FALSE", "--agent", AGENT, "--format", "csv")
    assert r.exit_code == 0 and r.stdout.startswith("reply_key,") and r.stdout.count("\n") == 1
    r = invoke("sql", str(sample), QUERY, "--agent", AGENT, "--format", "json")
    assert (r.exit_code, json.loads(r.stdout)) == (0, [{"n": 7}])


def test_sql_with_an_agent_seen_only_before_the_window_is_an_empty_answer(sample: Path) -> None:
    """The agent is known, the window is empty: that is the query's answer (report and check say "nothing measured"
    their own way), not an unknown agent."""
    r = invoke("sql", str(sample), QUERY, "--agent", AGENT, "--since", "2100-01-01", "--format", "json")
    assert (r.exit_code, json.loads(r.stdout)) == (0, [{"n": 0}])


def test_an_agent_filter_leaves_the_capture_gaps_whole(sample: Path, tmp_path: Path) -> None:
    root = tmp_path / "data"
    shutil.copytree(sample, root)
    writer = DatasetWriter(root, flush_interval=60)
    writer.start()
    writer.submit(CaptureGap("worker_died", 12, 3400, 1.0e9, 1.0e9 + 5))
    writer.close()
    query = "SELECT reason, records FROM capture_gaps"
    r = invoke("sql", str(root), query, "--agent", AGENT, "--format", "csv")
    assert (r.exit_code, r.stdout) == (0, "reason,records\nworker_died,12\n")
    r = invoke("sql", str(root), query, "--agent", "nobody", "--format", "csv")
    assert (r.exit_code, r.stdout) == (2, "") and "never saw this agent" in r.stderr


def test_export_refuses_an_agent_the_dataset_never_saw_before_sending_anything(sample: Path) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    endpoint = "http://127.0.0.1:9"  # never reached: the agent is refused first
    r = invoke("export", "otlp", str(sample), "--endpoint", endpoint, "--agent", "nobody")
    assert (r.exit_code, r.stdout) == (2, "")
    assert r.stderr == refusal(sample, "nobody")
