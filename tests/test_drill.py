"""From a number to the conversations behind it: `sql`, `show`, `report --examples`, check's examples and JUnit,
and terminal tables that fit their width — on the golden dataset."""

from __future__ import annotations

import csv
import io
import json
import os
import pty
import select
import struct
import subprocess
import sys
import termios
from pathlib import Path

import jsonschema
import pytest
import xmlschema

from converse_tap.analysis import build_report
from converse_tap.analysis.drill import VIEWS, open_views
from converse_tap.analysis.engine import CONVERSATION_KEY, Engine
from converse_tap.analysis.render import table_lines, to_text
from converse_tap.demo.run import report_actuals
from tests.cli_helpers import invoke
from tests.drill_counts import sql, sql_actuals

ROOT = Path(__file__).parents[1]
AGENT = "agent.test:9000/a2a/jsonrpc"  # the golden sample's one agent


# sql ------------------------------------------------------------------------------------------------------------


def test_sql_views_count_what_the_report_counts(sample: Path) -> None:
    report = build_report(Engine.over_dataset(sample))
    assert sql_actuals(sample) == report_actuals(report)
    ds = report["dataset"]
    assert sql(sample, "SELECT count(*) AS n FROM exchanges")[0]["n"] == ds["exchanges"]
    assert sql(sample, "SELECT count(*) AS n FROM replies")[0]["n"] == ds["replies"] == 7
    agent_rows = "SELECT count(*) AS n FROM messages WHERE role = 'agent' AND object_kind = 'message'"
    assert sql(sample, agent_rows)[0]["n"] == ds["agent_message_sightings"]
    assert sql(sample, "SELECT count(*) AS n FROM agent_cards")[0]["n"] == 1


def test_a_replys_conversation_is_the_key_its_messages_are_found_by(sample: Path) -> None:
    """`show` finds messages by engine.CONVERSATION_KEY; the report's replies must agree with it."""
    with open_views(sample) as engine:
        mismatched = engine.con.sql(
            f"""SELECT r.reply_key FROM replies r JOIN messages m ON m.message_id = r.message_id
                WHERE {
                CONVERSATION_KEY.replace("context_id", "m.context_id")
                .replace("task_id", "m.task_id")
                .replace("exchange_id", "m.exchange_id")
            } <> r.conversation"""
        ).fetchall()
        assert engine.con.sql("SELECT count(*) FROM replies").fetchall() == [(7,)]
    assert mismatched == []


def test_sql_formats_carry_the_same_rows(sample: Path) -> None:
    q = "SELECT reply_key, author, first_seen, citations FROM replies ORDER BY first_pos"
    as_json = json.loads(invoke("sql", str(sample), q, "--format", "json").stdout)
    as_jsonl = [json.loads(line) for line in invoke("sql", str(sample), q, "--format", "jsonl").stdout.splitlines()]
    piped = invoke("sql", str(sample), q).stdout  # not a terminal: csv
    as_csv = list(csv.DictReader(io.StringIO(piped)))
    assert as_json == as_jsonl and len(as_json) == 7
    assert [r["reply_key"] for r in as_csv] == [r["reply_key"] for r in as_json] == [f"a{i}" for i in range(1, 8)]
    assert as_json[0]["first_seen"] == "1999-12-31T23:00:02+00:00"  # the first sighting, not the poll at minute 7
    assert as_csv[1]["citations"] == "[]" and as_json[1]["citations"] == []
    table = invoke("sql", str(sample), q, "--format", "table").stdout.splitlines()
    assert table[0].split() == ["reply_key", "author", "first_seen", "citations"] and table[-1] == "(7 rows)"


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("DELETE FROM replies", "only read-only queries run here"),
        ("COPY (SELECT 1) TO 'out.csv'", "only read-only queries run here"),
        ("ATTACH 'x.db'", "only read-only queries run here"),
        ("SELECT 1; SELECT 2", "give exactly one statement (got 2)"),
        ("SELECT nope FROM turns", 'Referenced column "nope" not found'),
        ("SELECT * FROM sessions", "sessions"),
        ("SELEC 1", "syntax error"),
    ],
)
def test_a_bad_query_gets_the_engines_message_and_exit_2(sample: Path, query: str, message: str) -> None:
    r = invoke("sql", str(sample), query)
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith("Error: ") and message in r.stderr and "Traceback" not in r.stderr
    assert "the views are exchanges, messages, agent_cards, capture_gaps, replies, turns" in r.stderr


def test_every_view_and_column_is_named_in_metrics_md(sample: Path) -> None:
    doc = (ROOT / "docs" / "metrics.md").read_text()
    section = doc.split("## Views for SQL", 1)[1]
    with open_views(sample) as engine:
        for view in VIEWS:
            part = section.split(f"### `{view}`", 1)[1].split("\n### ", 1)[0]
            columns = [r[0] for r in engine.con.sql(f"SELECT column_name FROM (DESCRIBE {view})").fetchall()]
            if "the columns of `replies`" in part:
                part += " ".join(f"`{r[0]}`" for r in engine.con.sql("DESCRIBE replies").fetchall())
            for column in columns:
                assert f"`{column}`" in part, f"{view}.{column} is not in docs/metrics.md"


def test_windows_narrow_every_view(sample: Path) -> None:
    late = ["--since", "1999-12-31T23:03:00Z", "--format", "json"]
    r = invoke("sql", str(sample), "SELECT count(*) AS n FROM replies", *late)
    assert json.loads(r.stdout) == [{"n": 5}]  # as the report: a4..a7 and a1's poll (test_cli.test_filters...)
    agent = ["--agent", "agent.test:9000/a2a/jsonrpc", "--format", "json"]
    r = invoke("sql", str(sample), "SELECT count(*) AS n FROM exchanges", *agent)
    assert json.loads(r.stdout) == [{"n": 8}]  # the A2A calls, not the card fetch (agent.test:9000)
    # an agent the dataset never saw is refused as `report` refuses it, not answered with zero rows
    r = invoke("sql", str(sample), "SELECT count(*) AS n FROM exchanges", "--agent", "nobody", "--format", "json")
    assert (r.exit_code, r.stdout) == (2, "")
    assert "'nobody': the dataset" in r.stderr and "never saw this agent" in r.stderr


def test_sql_on_a_directory_without_data_says_so(tmp_path: Path) -> None:
    r = invoke("sql", str(tmp_path), "SELECT count(*) AS n FROM turns", "--format", "json")
    assert (r.exit_code, r.stdout) == (2, "")  # no writer ever wrote here: not a dataset, not an empty answer
    assert r.stderr.startswith(f"Error: {tmp_path} is not a converse-tap dataset (no exchanges/")
    (tmp_path / "_text_policy").write_text("keep\n")  # a recorder started and saw nothing yet
    r = invoke("sql", str(tmp_path), "SELECT count(*) AS n FROM turns", "--format", "json")
    assert (r.exit_code, json.loads(r.stdout)) == (0, [{"n": 0}])
    assert r.stderr == f"note: {tmp_path} holds no Parquet files yet: every view is empty\n"


# show -----------------------------------------------------------------------------------------------------------


def test_show_prints_the_conversation_in_order_with_envelopes(sample: Path) -> None:
    r = invoke("show", str(sample), "c3", "--format", "json")
    assert r.exit_code == 0, r.output
    t = json.loads(r.stdout)
    agent = [m for m in t["messages"] if m["role"] == "agent"]
    assert [m["message_id"] for m in agent] == ["a5", "a6"]
    first, second = (m["envelope"] for m in agent)
    assert first["routine"] == {
        "name": "Book a table",
        "tool_name": "book_table",
        "status": "waiting_for_input",
        "pending": [{"key": "date", "required": True, "description": "Which day?"}],
    }
    assert second["routine"]["status"] == "abandoned" and first["coverage"]["availability"] == "not_recorded"
    text = invoke("show", str(sample), "c3").stdout
    assert "routine: Book a table waiting_for_input (pending date*)" in text
    assert text.index("routine: Book a table waiting_for_input") < text.index("routine: Book a table abandoned")


def test_show_counts_a_polled_message_once_and_hashes_on_request(sample: Path) -> None:
    t = json.loads(invoke("show", str(sample), "c1", "--format", "json").stdout)
    agent = [m for m in t["messages"] if m["role"] == "agent"]
    assert [(m["message_id"], m["sightings"]) for m in agent] == [("a1", 2), ("a2", 1)]
    hashed = json.loads(invoke("show", str(sample), "c1", "--format", "json", "--text", "hash").stdout)
    texts = [m["text"] for m in hashed["messages"] if m["text"]]
    assert texts and all(x.startswith("sha256:") for x in texts)
    assert [m["message_id"] for m in hashed["messages"]] == [m["message_id"] for m in t["messages"]]


def test_show_of_a_human_reply_shows_the_ownership_change(sample: Path) -> None:
    t = json.loads(invoke("show", str(sample), "c2", "--format", "json").stdout)
    (human,) = [m for m in t["messages"] if m["author"] == "human"]
    assert human["envelope"]["ownership"]["state"] == "human_owned"


def test_show_of_an_unknown_id_exits_2_and_suggests_close_ones(sample: Path) -> None:
    r = invoke("show", str(sample), "c9")
    assert r.exit_code == 2 and r.stdout == ""
    assert r.stderr.startswith("Error: no conversation 'c9' in the dataset; did you mean ")
    assert "c1" in r.stderr.splitlines()[0]


# report --examples ------------------------------------------------------------------------------------------------


def test_report_examples_name_conversations_behind_each_count(sample: Path) -> None:
    r = invoke("report", str(sample), "--format", "json", "--examples", "5")
    jsonschema.validate(json.loads(r.stdout), json.loads((ROOT / "docs" / "report-schema.json").read_text()))
    ex = json.loads(r.stdout)["examples"]
    assert {k: [e["conversation"] for e in v] for k, v in ex["coverage"].items()} == {
        "answered": ["c2"],  # a4, the human's reply, is the answered turn
        "partial": ["c1"],
        "unanswered": ["c2"],
    }
    assert {k: [e["conversation"] for e in v] for k, v in ex["author"].items()} == {
        "agent": ["c4", "c3", "c2", "c1"],  # most recent first, one per conversation
        "human": ["c2"],
    }
    assert (
        list(ex["abandoned_at"]) == ["Book a table/date"]
        and ex["abandoned_at"]["Book a table/date"][0]["message_id"] == "a6"
    )
    assert ex["invocation"] == {"started": [ex["invocation"]["started"][0]]}
    one = json.loads(invoke("report", str(sample), "--format", "json", "--examples", "1").stdout)["examples"]
    assert all(len(v) == 1 for b in one.values() for v in b.values())
    text = invoke("report", str(sample), "--examples", "2").stdout
    assert "Examples by coverage value" in text and f"open one: converse-tap show {sample} CONVERSATION" in text


# check: examples and JUnit ------------------------------------------------------------------------------------------


def test_a_failing_check_prints_the_turns_behind_it(sample: Path) -> None:
    r = invoke("check", str(sample), "--max-unanswered-share", "0.1", "--max-abandonment-rate", "0.9")
    assert r.exit_code == 1
    lines = r.stdout.splitlines()
    assert lines[0] == "FAIL all: unanswered_share 33.3% (<= 10.0%) on 3 assessed turns, off by 23.3%"
    assert lines[1].split()[:3] == ["c2", AGENT, "1999-12-31T23:02:02"] and "unanswered" in lines[1]
    assert lines[2] == f"    open one: converse-tap show {sample} c2"
    assert lines[3].startswith("ok   all: abandonment_rate")
    doc = json.loads(invoke("check", str(sample), "--max-unanswered-share", "0.1", "--format", "json").stdout)
    assert [e["conversation"] for e in doc["checks"][0]["examples"]] == ["c2"]


def test_junit_output_validates_and_has_one_case_per_threshold_and_agent(sample: Path) -> None:
    schema = xmlschema.XMLSchema(ROOT / "tests" / "schemas" / "junit.xsd")
    args = ["--max-unanswered-share", "0.1", "--min-answered-share", "0.2", "--no-anomalies", "--per-agent"]
    r = invoke("check", str(sample), *args, "--format", "junit")
    assert r.exit_code == 1
    schema.validate(r.stdout)
    doc = schema.to_dict(r.stdout)
    (suite,) = doc["testsuite"]
    cases = {(c["@classname"], c["@name"]): c for c in suite["testcase"]}
    assert set(cases) == {
        (f"converse-tap.check.{AGENT}", f"unanswered_share ({AGENT})"),
        (f"converse-tap.check.{AGENT}", f"answered_share ({AGENT})"),
        ("converse-tap.check.all", "anomalies (all)"),
    }
    (failure,) = cases[(f"converse-tap.check.{AGENT}", f"unanswered_share ({AGENT})")]["failure"]
    assert failure["@type"] == "threshold" and failure["@message"].startswith(f"{AGENT}: unanswered_share")
    assert f"c2  {AGENT}" in failure["$"]
    assert (suite["@tests"], suite["@failures"], doc["@failures"]) == (3, 1, 1)
    ok = invoke("check", str(sample), "--max-unanswered-share", "0.5", "--format", "junit")
    assert ok.exit_code == 0 and schema.is_valid(ok.stdout) and "<failure" not in ok.stdout


def test_junit_keeps_characters_xml_cannot_hold_out() -> None:
    from converse_tap.analysis.gate import Outcome
    from converse_tap.analysis.junit import junit_xml

    o = Outcome("ag\x00\x1b[31m", "human_share", "max", 0.1, 0.5, 2, "replies", False)
    out = junit_xml([o], lambda o: f"{o.scope} failed", {(o.scope, o.metric): []})
    xmlschema.XMLSchema(ROOT / "tests" / "schemas" / "junit.xsd").validate(out)
    assert "\ufffd[31m" in out


# terminal tables ----------------------------------------------------------------------------------------------------


def test_tables_fit_a_width_by_abbreviating_then_turning_vertical() -> None:
    headers, cells = ["name", "count", "note"], [["x" * 30, "12", "a long note " * 4], ["short", "3", ""]]
    natural = table_lines("T", headers, cells)
    assert max(len(line) for line in natural) > 60
    assert table_lines("T", headers, cells, width=200) == natural  # room enough: unchanged
    fitted = table_lines("T", headers, cells, width=40)
    assert max(len(line) for line in fitted) <= 40 and "…" in fitted[3] and fitted[4].split()[1] == "3"
    narrow = table_lines("T", headers, cells, width=20)
    assert max(len(line) for line in narrow) <= 20 and narrow[1].startswith("-[ 1 ]")
    assert any(line.startswith("count") and line.split()[1] == "12" for line in narrow)


def test_piped_text_is_not_cut(sample: Path) -> None:
    report = build_report(Engine.over_dataset(sample), by=("agent", "routine"), examples=3)
    piped = to_text(report)
    assert to_text(report, width=10_000) == piped and max(len(line) for line in piped.splitlines()) > 80
    assert invoke("report", str(sample), "--by", "agent", "--by", "routine", "--examples", "3").stdout == piped


def _run_in_pty(args: list[str], columns: int) -> str:
    """Run a command with its stdout on a pseudo-terminal `columns` wide; its output."""
    master, slave = pty.openpty()
    import fcntl

    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, columns, 0, 0))
    env = {**os.environ, "COLUMNS": str(columns)}
    proc = subprocess.Popen(args, stdout=slave, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, env=env)
    os.close(slave)
    chunks = []
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            proc.kill()
            raise AssertionError("no output from the command within 60 s")
        try:
            data = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not data:
            break
        chunks.append(data)
    os.close(master)
    assert proc.wait(timeout=60) == 0, proc.stderr.read() if proc.stderr else ""
    if proc.stderr:
        proc.stderr.close()
    return b"".join(chunks).decode().replace("\r\n", "\n")


def test_report_on_an_80_column_terminal_has_no_longer_line(sample: Path) -> None:
    exe = [sys.executable, "-m", "converse_tap"]
    out = _run_in_pty([*exe, "report", str(sample), "--by", "agent", "--by", "routine"], 80)
    lines = out.splitlines()
    assert "== By agent ==" in lines and "== By routine ==" in lines
    assert max(len(line) for line in lines) <= 80, [line for line in lines if len(line) > 80]
    wide = _run_in_pty([*exe, "report", str(sample), "--by", "agent", "--by", "routine", "--examples", "3"], 80)
    assert max(len(line) for line in wide.splitlines()) <= 80 and "Examples by coverage value" in wide


def test_show_prints_the_trace_each_message_joins(sample: Path) -> None:
    """Each message carries the trace and span of the exchange it was first seen in (issue 20's correlation)."""
    t = json.loads(invoke("show", str(sample), "c1", "--format", "json").stdout)
    rows = json.loads(
        invoke("sql", str(sample), "SELECT exchange_id, trace_id, span_id FROM exchanges", "--format", "json").stdout
    )
    spans = {r["span_id"]: r["trace_id"] for r in rows}
    assert t["messages"] and all(m["trace_id"] and m["span_id"] for m in t["messages"])
    assert all(m["span_id"] in spans and spans[m["span_id"]] == m["trace_id"] for m in t["messages"])
    first_poll = next(m for m in t["messages"] if m["message_id"] == "a1")
    assert f"trace {first_poll['trace_id']} span {first_poll['span_id']}" in invoke("show", str(sample), "c1").stdout


def test_transcript_times_read_the_same_with_or_without_a_fraction() -> None:
    """isoformat leaves out a zero fraction: cut at 23 characters, `…23:00:00+00:00` read `23:00:00+00:`."""
    from converse_tap.analysis.transcript import transcript_text

    def message(at: str) -> dict[str, object]:
        return {"role": "agent", "kind": "message", "author": None, "at": at, "text": "hi", "envelope": None}

    t = {"conversation": "c", "agents": ["a"], "replies": 2, "first_seen": None, "last_seen": None}
    text = transcript_text(
        {**t, "messages": [message("1999-12-31T23:00:00+00:00"), message("2026-01-02T03:04:05.678901+00:00")]}
    )
    assert "[1999-12-31 23:00:00] agent: hi" in text and "[2026-01-02 03:04:05.678] agent: hi" in text


VALUES = [None, "answered", "(none)", '"(none)"', "(x", 'a"b', "\\(", "a/b", "a\\/b", "", "é\x1b"]


def test_keys_are_one_per_value_and_sql_builds_them_as_python_does() -> None:
    import duckdb

    from converse_tap.analysis.drill import ABANDONED_KEY, value_key_sql
    from converse_tap.analysis.metrics import value_key
    from converse_tap.analysis.tables import abandoned_key

    keys = [value_key(v) for v in VALUES]
    assert len(set(keys)) == len(VALUES) and keys[0] == "(none)" and keys[1] == "answered"
    con = duckdb.connect()
    for v, k in zip(VALUES, keys, strict=True):
        assert con.execute(f"SELECT {value_key_sql('x')} FROM (SELECT ?::VARCHAR AS x)", [v]).fetchone() == (k,)
    pairs = [(r, s) for r in VALUES[1:] for s in VALUES[1:]]
    assert len({abandoned_key(r, s) for r, s in pairs}) == len(pairs)
    for r, s in pairs:
        got = con.execute(f"SELECT {ABANDONED_KEY} FROM (SELECT ?::VARCHAR AS routine, ?::VARCHAR AS slot) i", [r, s])
        assert got.fetchone() == (abandoned_key(r, s),)
