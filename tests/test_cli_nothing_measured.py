"""The gate and the report are never green on nothing: unseen agents, empty windows, non-datasets."""

import json
import re
from pathlib import Path

import pytest

from tests.cli_helpers import invoke

AGENTS_SEEN = "  agent.test:9000\n  agent.test:9000/a2a/jsonrpc\n"


@pytest.mark.parametrize(
    "command", [["check", "--max-unanswered-share", "0.5"], ["report"], ["report", "--by", "agent"]]
)
def test_an_agent_the_dataset_never_saw_exits_2_listing_the_agents_it_saw(sample: Path, command: list[str]) -> None:
    r = invoke(command[0], str(sample), *command[1:], "--agent", "agent.test:9000/a2a/jsonrpc", "--agent", "nobody")
    assert (r.exit_code, r.stdout) == (2, "")
    assert r.stderr == (
        f"Error: --agent 'nobody': the dataset {sample} never saw this agent. The agents it saw:\n{AGENTS_SEEN}"
    )


def test_an_agent_seen_before_the_window_is_not_unknown(sample: Path) -> None:
    r = invoke("check", str(sample), "--max-unanswered-share", "0.5", "--agent", "agent.test:9000/a2a/jsonrpc",
               "--since", "2100-01-01")  # fmt: skip
    assert r.exit_code == 2 and "nothing measured for all: unanswered_share (0 assessed turns)" in r.stderr


@pytest.mark.parametrize(
    ("window", "what"),
    [
        (["--since", "2100-01-01"], "all: unanswered_share (0 assessed turns); all: abandonment_rate"),  # empty window
        (["--agent", "agent.test:9000"], "all: unanswered_share (0 assessed turns)"),  # an agent seen in cards only
    ],
)
def test_a_threshold_with_nothing_to_rest_on_exits_2_unless_allowed(sample: Path, window: list[str], what: str) -> None:
    args = ["check", str(sample), "--max-unanswered-share", "0.5", "--max-abandonment-rate", "0.5", *window]
    r = invoke(*args)
    assert r.exit_code == 2
    assert r.stdout.startswith("FAIL all: unanswered_share no data (<= 50.0%) on 0 assessed turns, nothing measured\n")
    assert r.stderr.startswith(f"Error: nothing measured for {what}")
    assert "--allow-empty" in r.stderr
    allowed = invoke(*args, "--allow-empty")
    assert allowed.exit_code == 0
    assert allowed.stdout.startswith("ok   all: unanswered_share no data (<= 50.0%) on 0 assessed turns\n")


def test_no_anomalies_over_no_exchanges_is_nothing_measured(sample: Path) -> None:
    r = invoke("check", str(sample), "--no-anomalies", "--until", "1999-01-01", "--format", "json")
    assert r.exit_code == 2 and "nothing measured for all: anomalies (0 exchanges)" in r.stderr
    (check,) = json.loads(r.stdout)["checks"]
    assert (check["passed"], check["empty"], check["basis"], check["basis_name"]) == (False, True, 0, "exchanges")


def test_per_agent_covers_a_named_agent_without_traffic_in_the_window(sample: Path) -> None:
    r = invoke("check", str(sample), "--per-agent", "--max-human-share", "0.5", "--agent", "agent.test:9000")
    assert r.exit_code == 2
    assert (
        r.stdout
        == "FAIL agent.test:9000: human_share no data (<= 50.0%) on 0 replies with an author, nothing measured\n"
    )
    r = invoke("check", str(sample), "--per-agent", "--max-human-share", "0.5", "--since", "2100-01-01")
    assert r.exit_code == 2 and "nothing measured for any agent: human_share" in r.stderr


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ["--max-unanswered-share", "0.5", "--min-turns", "4"],
            "FAIL all: unanswered_share 33.3% (<= 50.0%) on 3 assessed turns, fewer than --min-turns 4\n",
        ),
        (
            ["--max-abandonment-rate", "0.5", "--min-routines", "3"],
            "FAIL all: abandonment_rate 50.0% (<= 50.0%) on 2 closed routine instances, fewer than --min-routines 3\n",
        ),
        (
            ["--max-human-share", "0.5", "--min-replies", "8"],
            "FAIL all: human_share 14.3% (<= 50.0%) on 7 replies with an author, fewer than --min-replies 8\n",
        ),
        (["--max-unanswered-share", "0.5", "--min-turns", "3"], "ok   all: unanswered_share 33.3% (<= 50.0%) on 3"),
    ],
)
def test_a_threshold_measured_on_too_few_fails(sample: Path, args: list[str], line: str) -> None:
    r = invoke("check", str(sample), *args)
    assert r.exit_code == (0 if line.startswith("ok") else 1)
    assert r.stdout.startswith(line)


def test_report_of_a_directory_that_is_not_a_dataset_exits_2(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello")
    for command in (["report"], ["agents"], ["check", "--no-anomalies"]):
        r = invoke(command[0], str(tmp_path), *command[1:])
        assert (r.exit_code, r.stdout) == (2, "")
        assert r.stderr.startswith(f"Error: {tmp_path} is not a converse-tap dataset (no exchanges/, messages/")


def test_report_of_a_dataset_without_a2a_traffic_is_written_and_exits_3(sample: Path, tmp_path: Path) -> None:
    (tmp_path / "_text_policy").write_text("keep\n")  # a recorder started and saw nothing
    r = invoke("report", str(tmp_path))
    assert r.exit_code == 3
    assert "note: the dataset holds no Parquet files yet" in r.stdout
    assert r.stderr == f"Error: nothing measured: {tmp_path} holds no A2A message in it\n"
    r = invoke("report", str(sample), "--since", "2100-01-01", "--format", "json")
    assert r.exit_code == 3 and json.loads(r.stdout)["dataset"]["agent_message_sightings"] == 0
    assert r.stderr.endswith("holds no A2A message in the selected window\n")
    assert invoke("report", str(sample)).exit_code == 0


def test_the_html_report_of_an_empty_dataset_is_a_short_page(sample: Path, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "_journal").mkdir()
    r = invoke("report", str(tmp_path / "empty"), "--format", "html", "-o", str(tmp_path / "empty.html"))
    assert r.exit_code == 3
    page = (tmp_path / "empty.html").read_text()
    body = page.split("<script", 1)[0]
    assert "Nothing measured: no A2A message in this dataset or window." in body
    assert re.findall(r"<h2>(.*?)</h2>", body) == ["Dataset"] and "<table" not in body and "<svg" not in body
    # a window with cards but no messages keeps the cards
    r = invoke("report", str(sample), "--format", "html", "--agent", "agent.test:9000", "-o", str(tmp_path / "c.html"))
    assert r.exit_code == 3
    assert re.findall(r"<h2>(.*?)</h2>", (tmp_path / "c.html").read_text()) == ["Dataset", "Conformance"]


def test_report_output_into_a_missing_directory_creates_it(sample: Path, tmp_path: Path) -> None:
    out = tmp_path / "reports" / "today" / "r.md"
    r = invoke("report", str(sample), "--format", "markdown", "-o", str(out))
    assert (r.exit_code, r.stderr) == (0, f"wrote {out}\n")
    assert out.read_text().startswith("# converse-tap report") and (out.parent.stat().st_mode & 0o777) == 0o700


@pytest.mark.parametrize(
    ("target", "message"),
    [("file/r.html", "file is a file, not a directory"), ("dir", "dir' is a directory.")],
)
def test_report_output_that_cannot_be_a_file_exits_2(sample: Path, tmp_path: Path, target: str, message: str) -> None:
    (tmp_path / "file").write_text("")
    (tmp_path / "dir").mkdir()
    r = invoke("report", str(sample), "-o", str(tmp_path / target))
    assert (r.exit_code, r.stdout) == (2, "")
    assert message in r.stderr and "Traceback" not in r.stderr
    assert (tmp_path / "file").read_text() == ""


@pytest.mark.parametrize("option", ["--since", "--until"])
def test_date_errors_name_their_option(option: str) -> None:
    r = invoke("check", ".", "--no-anomalies", option, "01/12/2026")
    assert r.exit_code == 2
    assert f"Error: Invalid value for '{option}': '01/12/2026' is not an ISO date or time" in r.stderr
