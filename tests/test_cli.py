import json
import re
from pathlib import Path

import jsonschema
import pytest

from converse_tap.cli import cli
from tests.cli_helpers import invoke
from tests.golden.regenerate import CASES, render

ROOT = Path(__file__).parents[1]
SCHEMA = json.loads((ROOT / "docs" / "report-schema.json").read_text())


@pytest.mark.parametrize("name", sorted(CASES))
def test_report_matches_golden(sample: Path, name: str) -> None:
    """Regenerate with `make golden` after a deliberate change, and read the diff."""
    assert render(sample, CASES[name]) == (ROOT / "tests" / "golden" / name).read_text(encoding="utf-8")


@pytest.mark.parametrize("by", [[], ["--by", "agent", "--by", "day", "--by", "routine"]])
def test_json_report_validates_against_its_documented_schema(sample: Path, by: list[str]) -> None:
    r = invoke("report", str(sample), "--format", "json", "--stale-after", "30min", *by)
    assert r.exit_code == 0
    report = json.loads(r.stdout)
    jsonschema.validate(report, SCHEMA)
    assert report["coverage"]["turns_assessed"] == 3
    assert report["routines"]["abandonment_rate"] == 0.5
    assert report["authors"]["by_author"] == {"agent": 6, "human": 1}
    if by:
        assert set(report["groups"]) == {"agent", "day", "routine"}


def test_filters_reach_the_report(sample: Path) -> None:
    r = invoke("report", str(sample), "--format", "json", "--agent", "agent.test:9000")  # seen in a card only
    report = json.loads(r.stdout)
    assert (report["dataset"]["replies"], report["dataset"]["filters"]["agents"]) == (0, ["agent.test:9000"])
    r = invoke("report", str(sample), "--format", "json", "--since", "1999-12-31T23:03:00Z")
    # a4..a7 (minutes 3-6), and a1 whose poll at minute 7 is a sighting in the window (docs/metrics.md, Windows)
    assert json.loads(r.stdout)["dataset"]["replies"] == 5
    r = invoke("report", str(sample), "--format", "json", "--until", "1999-12-30")
    assert json.loads(r.stdout)["dataset"]["replies"] == 0


def test_html_report_is_one_self_contained_file(sample: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.html"
    r = invoke("report", str(sample), "--format", "html", "-o", str(out))
    assert (r.exit_code, r.stdout, r.stderr) == (0, "", f"wrote {out}\n")
    html = out.read_text()
    assert html.count("<svg") >= 2 and "Coverage of assessed turns, per agent" in html
    assert not re.search(r"""src=|<link""", html)  # nothing loaded from outside; links to http(s) are allowed
    # the one http(s) link is the card's MCP endpoint; the others open embedded transcripts
    links = re.findall(r"""href=["']?([^"' >]*)""", html)
    assert [u for u in links if not u.startswith("#t-")] == ["https://mcp.test/a"] and len(links) > 1
    data = re.search(r'<script type="application/json" id="report-data">(.*?)</script>', html, re.S)
    assert data is not None and json.loads(data.group(1))["schema"] == "converse-tap-report/1"


def test_empty_dataset_says_what_is_missing(tmp_path: Path) -> None:
    (tmp_path / "_journal").mkdir()  # a recorder that has not flushed yet
    r = invoke("report", str(tmp_path), "--format", "json")
    assert r.exit_code == 3  # written, but measured nothing
    report = json.loads(r.stdout)
    jsonschema.validate(report, SCHEMA)
    assert report["dataset"]["notes"] == ["the dataset holds no Parquet files yet: record or ingest some traffic first"]
    assert report["dataset"]["tables_missing"] == ["exchanges", "messages", "agent_cards"]
    text = invoke("report", str(tmp_path)).stdout
    assert "note: the dataset holds no Parquet files yet" in text


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["report", "/nonexistent/x"],
            "Error: Invalid value for 'DATASET': Directory '/nonexistent/x' does not exist.",
        ),
        (["report", ".", "--since", "yesterday"], "is not an ISO date or time; write e.g. 2026-12-01"),
        (
            ["report", ".", "--stale-after", "soon"],
            "'soon' is not a positive duration; write e.g. 90s, 30min, 2h or 1d",
        ),
        (["report", ".", "--since", "2026-12-02", "--until", "2026-12-01"], "--since must be before --until"),
        (["report", ".", "--format", "pdf"], "Invalid value for '--format'"),
        (["report", ".", "--memory-limit", "lots"], "'lots' is not a size; give a number and a unit, like 500MB"),
    ],
)
def test_usage_errors_exit_2_with_a_message_on_stderr(args: list[str], message: str) -> None:
    r = invoke(*args)
    assert r.exit_code == 2
    assert message in r.stderr and r.stdout == ""


def test_addon_path_is_the_script(tmp_path: Path) -> None:
    r = invoke("addon-path")
    path = Path(r.stdout.strip())
    assert path.name == "mitmdump_script.py" and "addons = [ConverseTap()]" in path.read_text()


def test_record_rejects_an_unwritable_directory(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    r = invoke("record", "--out", str(tmp_path / "file" / "data"), "--listen-port", "0")
    assert r.exit_code == 2
    assert "cannot write the dataset to --out" in r.stderr and "converse_tap_dir" not in r.stderr


def test_record_rejects_unknown_options(tmp_path: Path) -> None:
    r = invoke("record", "--out", str(tmp_path), "--listen-port", "0", "--set", "no_such_option=1")
    assert r.exit_code == 2 and "no_such_option" in r.stderr


def test_every_command_has_help_and_the_reference_is_current() -> None:
    from scripts.cli_doc import render_cli_doc

    for name, command in cli.commands.items():
        assert command.help, name
    assert (ROOT / "docs" / "cli.md").read_text() == render_cli_doc(), "run: python -m scripts.cli_doc"


def test_every_column_is_documented() -> None:
    from converse_tap.store.schema import TABLES

    doc = (ROOT / "docs" / "schema.md").read_text()
    for table, schema in TABLES.items():
        section = doc.split(f"## {table}", 1)[1].split("\n## ", 1)[0]
        for name in schema.names:
            assert re.search(rf"^\| [^|]*\b{name}\b", section, re.M), f"{table}.{name} is not in docs/schema.md"


def test_check_passes_and_fails_with_reasons(sample: Path) -> None:
    ok = invoke("check", str(sample), "--max-unanswered-share", "0.5", "--max-abandonment-rate", "0.5")
    assert (ok.exit_code, ok.stdout) == (
        0,
        (
            "ok   all: unanswered_share 33.3% (<= 50.0%) on 3 assessed turns\n"
            "ok   all: abandonment_rate 50.0% (<= 50.0%) on 2 closed routine instances\n"
        ),
    )
    bad = invoke("check", str(sample), "--min-answered-share", "0.5", "--max-human-share", "0.2", "--no-anomalies")
    assert (bad.exit_code, bad.stdout) == (
        1,
        (
            "FAIL all: answered_share 33.3% (>= 50.0%) on 3 assessed turns, off by 16.7%\n"
            # the turns behind the failure, most recent first, and how to open one
            "    c2  agent.test:9000/a2a/jsonrpc  1999-12-31T23:02:02  unanswered"
            "  “You can return it within 30 days.”\n"
            "    c1  agent.test:9000/a2a/jsonrpc  1999-12-31T23:01:02  partial  “You can return it within 30 days.”\n"
            f"    open one: converse-tap show {sample} c2\n"
            "ok   all: human_share 14.3% (<= 20.0%) on 7 replies with an author\n"
            "ok   all: anomalies 0 (<= 0) on 9 exchanges\n"
        ),
    )


def test_check_json_and_per_agent(sample: Path) -> None:
    r = invoke("check", str(sample), "--max-human-share", "0.1", "--per-agent", "--format", "json")
    doc = json.loads(r.stdout)
    assert (r.exit_code, doc["schema"], doc["passed"]) == (1, "converse-tap-check/1", False)
    (check,) = doc["checks"]
    assert (check["scope"], check["value"], check["basis"]) == ("agent.test:9000/a2a/jsonrpc", 1 / 7, 7)
    assert check["margin"] == pytest.approx(1 / 7 - 0.1)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "give at least one threshold"),
        (["--max-human-share", "2"], "2.0 is not in the range 0<=x<=1"),
        (["--max-unanswered-share", "nan"], "'nan' is not a number between 0 and 1"),  # failed every check (1)
    ],
)
def test_check_usage_errors_exit_2(sample: Path, args: list[str], message: str) -> None:
    r = invoke("check", str(sample), *args)
    assert r.exit_code == 2 and message in r.stderr


def test_check_on_an_empty_directory_is_a_data_error(tmp_path: Path) -> None:
    r = invoke("check", str(tmp_path), "--no-anomalies")
    assert r.exit_code == 2 and "is not a converse-tap dataset" in r.stderr
    (tmp_path / "_journal").mkdir()
    r = invoke("check", str(tmp_path), "--no-anomalies")
    assert r.exit_code == 2 and "nothing measured for all: anomalies (0 exchanges)" in r.stderr


def test_agents_lists_cards_and_tools(sample: Path) -> None:
    r = invoke("agents", str(sample))
    assert r.exit_code == 0
    assert r.stdout == (
        "agent.test:9000  (0 A2A calls)\n"
        "  well-known card: Support\n"
        "    converse extension: declared (optional)\n"
        "    MCP endpoint: https://mcp.test/a   server card: https://mcp.test/a/server-card\n"
        "    tool book_table: requires date\n"
        "agent.test:9000/a2a/jsonrpc  (8 A2A calls)\n"
        "  no agent card seen\n"
    )
    doc = json.loads(invoke("agents", str(sample), "--format", "json").stdout)
    assert doc[0]["cards"][0]["tools"][0]["input_schema"] == {"type": "object", "required": ["date"]}


def test_a_report_beyond_its_memory_limit_says_which_option_to_raise(tmp_path: Path) -> None:
    from benchmarks.bench_analysis import generate

    generate(tmp_path, 100_000)
    r = invoke("report", str(tmp_path), "--memory-limit", "2MB")
    assert r.exit_code == 1
    assert "needs more memory than its limit allows; raise --memory-limit (Out of Memory Error" in r.stderr
    assert "SET " not in r.stderr and r.stdout == ""


def test_record_rejects_a_bad_redaction_pattern_before_listening(tmp_path: Path) -> None:
    r = invoke("record", "--out", str(tmp_path / "data"), "--listen-port", "0", "--redact", "tenant=(")
    assert r.exit_code == 2 and "--redact:" in r.stderr and "not a valid regular expression" in r.stderr
    assert not (tmp_path / "data").exists()
