"""Every text a reading command prints to a terminal is display-safe, whatever the dataset holds: `sql`'s table,
`show`'s transcript, the agents listed by an unknown --agent, warnings and errors naming a file of the dataset.
Built from the attack dataset (tests/analysis/hostile.py) and a file whose name carries escape sequences."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from converse_tap.textsafe import is_terminal_safe, shell_word, xml_safe
from tests.analysis.hostile import TERMINAL, build_hostile
from tests.cli_helpers import invoke

ESCAPED = "\\x1b[2J\\x1b]0;owned\\x07"  # how TERMINAL's start reads once escaped


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("hostile") / "data"
    build_hostile(out)
    return out


def _safe(text: str) -> None:
    assert is_terminal_safe(text, multiline=True), [line for line in text.splitlines() if not is_terminal_safe(line)]


def test_sql_table_shows_control_characters_as_escapes(hostile: Path) -> None:
    r = invoke("sql", str(hostile), "SELECT agent, text, routine_name, citations FROM messages", "--format", "table")
    assert r.exit_code == 0
    _safe(r.stdout)
    assert ESCAPED in r.stdout and TERMINAL not in r.stdout


def test_sql_json_keeps_the_exact_value(hostile: Path) -> None:
    # data formats are data: the value itself, for a program to read (JSON escapes controls its own way)
    query = "SELECT DISTINCT routine_name AS name FROM messages WHERE routine_name LIKE '%owned%'"
    r = invoke("sql", str(hostile), query, "--format", "json")
    assert r.exit_code == 0 and json.loads(r.stdout) == [{"name": TERMINAL}]


def test_show_transcript_is_safe(hostile: Path) -> None:
    r = invoke("show", str(hostile), "ctx-1")
    assert r.exit_code == 0
    _safe(r.stdout)
    assert ESCAPED in r.stdout


def test_an_unknown_agent_lists_the_agents_seen_safely(hostile: Path) -> None:
    r = invoke("report", str(hostile), "--agent", "nobody")
    assert r.exit_code == 2 and "The agents it saw:" in r.stderr
    _safe(r.stderr)
    # the agent key's control characters: percent-encoded by the URL parser, or shown escaped
    assert ("\\x1b[2J" in r.stderr or "%1B[2J" in r.stderr) and "\x1b" not in r.stderr


def test_warnings_and_errors_naming_a_hostile_file_name_are_safe(hostile: Path, tmp_path: Path) -> None:
    root = tmp_path / "data"
    shutil.copytree(hostile, root)
    part = next((root / "exchanges").glob("date=*"))
    (part / "evil\x1b]0;owned\x07\x1b[31m\u202e.parquet").write_bytes(b"not parquet")
    r = invoke("report", str(root))
    assert r.exit_code == 0 and "warning: skipped " in r.stderr
    _safe(r.stderr)
    _safe(r.stdout)
    r = invoke("check", str(root), "--no-anomalies")
    assert r.exit_code == 2 and "not its own" in r.stderr
    _safe(r.stderr)
    assert "evil\\x1b]0;owned\\x07" in r.stderr


RAW = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


@pytest.mark.parametrize(
    "args",
    [
        ["report", "{d}", "--format", "json", "--by", "routine"],
        ["agents", "{d}", "--format", "json"],
        ["sql", "{d}", "SELECT routine_name, citations FROM messages", "--format", "json"],
        ["sql", "{d}", "SELECT routine_name, citations FROM messages", "--format", "jsonl"],
        ["show", "{d}", "ctx-1", "--format", "json"],
    ],
    ids=["report", "agents", "sql-json", "sql-jsonl", "show"],
)
def test_json_outputs_escape_what_a_terminal_would_act_on_and_keep_the_value(hostile: Path, args: list[str]) -> None:
    r = invoke(*[a.format(d=hostile) for a in args])
    assert r.exit_code == 0
    assert RAW.search(r.stdout) is None, RAW.findall(r.stdout)[:5]  # C1 controls, bidi overrides, separators
    _safe(r.stdout)
    lines = r.stdout.splitlines() if "jsonl" in args else [r.stdout]
    values = [json.loads(line) for line in lines]
    assert "agents" in args or any(TERMINAL in v for v in _strings(values))  # the value itself survives


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [*value, *(s for v in value.values() for s in _strings(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize(
    "value", ["c1;touch${IFS}/tmp/x", "it's `id` $(id)", "ctx\x9b2J\u202e\x1b[31m", "a\\b\nc\U000e0069", "plain-1", "é"]
)
def test_a_suggested_command_word_reads_back_as_the_value_in_a_shell(value: str) -> None:
    word = shell_word(value)
    assert is_terminal_safe(word)
    done = subprocess.run(["bash", "-c", f"printf %s {word}"], capture_output=True, check=True)
    assert done.stdout.decode("utf-8", "surrogateescape") == value


def test_junit_xml_writes_what_a_terminal_would_act_on_as_character_references() -> None:
    assert xml_safe("<a b='\u202e'>\x9b\u200b</a>") == "<a b='&#x202e;'>&#x9b;&#x200b;</a>"
