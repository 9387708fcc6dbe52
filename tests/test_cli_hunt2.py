"""CLI arguments and environments the earlier tests did not use: each test one defect, failing before its fix.
Errors are on stderr with exit 2 and no traceback; nothing measured is never success."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import shlex
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tests.cli_helpers import invoke

ROOT = Path(__file__).absolute().parents[1]


@pytest.mark.parametrize(
    ("args", "status"),
    [
        (["--until", "9999-12-31"], 0),  # the whole last day a date can name: everything
        (["--until", "9999-12-31T23:00-05:00"], 0),  # past year 9999 once in UTC
        (["--since", "0001-01-01T00:30+01:00"], 0),  # before year 1 once in UTC: everything
        (["--since", "9999-12-31T23:00-05:00"], 3),  # after every time there is: nothing measured
        (["--until", "0001-01-01T00:30+01:00"], 3),
    ],
)
def test_dates_at_the_ends_of_time_are_windows_not_tracebacks(sample: Path, args: list[str], status: int) -> None:
    r = invoke("report", str(sample), "--format", "json", *args)  # (an OverflowError escaped before)
    assert r.exit_code == status, r.output
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("command", "value", "message"),
    [
        ("report", "99999999TB", "more than any limit"),
        ("report", "0B", "no memory"),
        ("show", "abc", "not a size"),
        ("show", "99999999TB", "more than any limit"),
    ],
)
def test_a_memory_limit_no_engine_takes_is_a_usage_error(sample: Path, command: str, value: str, message: str) -> None:
    """It was exit 1, "cannot read the dataset …: Parser Error", as if the dataset were damaged."""
    extra = ["c1"] if command == "show" else []
    r = invoke(command, str(sample), *extra, "--memory-limit", value)
    assert r.exit_code == 2, r.output
    assert message in r.stderr and "cannot read the dataset" not in r.stderr, r.stderr


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "converse_tap", *args],
        capture_output=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **env},
        cwd=ROOT,
        timeout=300,
    )


@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
def test_a_terminal_that_is_not_utf8_gets_escapes_not_a_traceback(sample: Path, fmt: str) -> None:
    """In a Latin-1 locale the report died half-way on its first `–` (UnicodeEncodeError, exit 1); now what the
    encoding cannot hold is written as its \\uXXXX escape, and the JSON is the same JSON."""
    latin = _run({"PYTHONIOENCODING": "latin-1"}, "report", str(sample), "--format", fmt)
    assert latin.returncode == 0, latin.stderr.decode("latin-1")[-2000:]
    out = latin.stdout.decode("latin-1")
    if fmt == "json":
        utf8 = _run({"PYTHONIOENCODING": "utf-8"}, "report", str(sample), "--format", fmt)
        assert json.loads(out) == json.loads(utf8.stdout.decode("utf-8"))
    else:
        assert "\\u2013" in out  # the dash of a share not measured


def test_output_to_a_device_or_fifo_leaves_its_permissions_alone(sample: Path, tmp_path: Path) -> None:
    """`-o` that is no regular file (here a FIFO; `/dev/null` run as root alike) is written to, not made owner-only:
    `report -o /dev/null` as root made /dev/null mode 600, and every other user's programs failed on it."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o644)
    os.chmod(fifo, 0o644)
    got: list[str] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text(encoding="utf-8")))
    reader.start()
    try:
        r = invoke("report", str(sample), "-o", str(fifo))
    finally:
        # unblock the reader should the command have failed before opening the FIFO (no reader left: ENXIO)
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        reader.join(timeout=60)
    assert r.exit_code == 0, r.output
    assert got and got[0].startswith("== Dataset ==")
    assert stat.S_IMODE(fifo.stat().st_mode) == 0o644


def _on_a_terminal(*args: str) -> bytes:
    """What the command writes to a terminal (a pseudo-terminal as its stdout)."""
    master, slave = pty.openpty()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, "-m", "converse_tap", *args], stdout=slave, env=env, cwd=ROOT)
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the command closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.wait(timeout=300) == 0
    return out


def test_sql_csv_on_a_terminal_shows_escapes_and_piped_is_exact(tmp_path: Path) -> None:
    """`sql --format csv` chosen on a terminal wrote the wire's ESC, OSC and bidi characters raw (a cleared screen,
    a retitled window); the JSON formats were escaped already."""
    from tests.test_output_hunt import _flow, _write

    name = "\x1b[2J\x1b]0;owned\x07\u202egnp"
    root = _write(tmp_path / "d", [_flow("m1", {"routine": {"name": name, "status": "completed"}}, 0, ctx="c1")])
    query = "SELECT routine_name FROM messages WHERE routine_name IS NOT NULL"
    shown = _on_a_terminal("sql", str(root), query, "--format", "csv").decode("utf-8")
    assert "\x1b" not in shown and "\x07" not in shown and "\u202e" not in shown, repr(shown)
    assert "\\x1b[2J\\x1b]0;owned\\x07\\u202egnp" in shown
    piped = invoke("sql", str(root), query, "--format", "csv")
    assert piped.stdout == f"routine_name\n{name}\n"


def test_suggested_commands_open_a_dataset_whose_path_looks_like_an_option(
    sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`report ./-data` printed `converse-tap show -data CONVERSATION`, which click reads as option `-d`; and
    `show`'s hint `converse-tap sql DIR "SELECT …"` left a path with a space unquoted."""
    shutil.copytree(sample, tmp_path / "a b" / "-data")
    monkeypatch.chdir(tmp_path / "a b")
    report = invoke("report", "./-data", "--examples", "1")
    (hint,) = {line.split("open one: ", 1)[1] for line in report.stdout.splitlines() if "open one: " in line}
    words = shlex.split(hint.replace("CONVERSATION", "c2"))
    assert words[:2] == ["converse-tap", "show"]
    shown = invoke(*words[1:])
    assert shown.exit_code == 0 and shown.stdout.startswith("conversation c2 "), shown.output
    failed = invoke("check", "./-data", "--max-unanswered-share", "0")
    (hint,) = [line.split("open one: ", 1)[1] for line in failed.stdout.splitlines() if "open one: " in line]
    assert invoke(*shlex.split(hint)[1:]).exit_code == 0, hint
    unknown = invoke("show", str(tmp_path / "a b" / "-data"), "no-such-conversation")
    assert unknown.exit_code == 2
    hint = unknown.stderr.split("list them with: ", 1)[1].strip()
    listed = invoke(*shlex.split(hint)[1:], "--format", "json")
    assert listed.exit_code == 0 and json.loads(listed.stdout), listed.output


def test_a_query_that_fails_on_a_row_as_it_streams_is_an_error_not_a_traceback(sample: Path) -> None:
    """DuckDB finds some errors only as the rows stream out (a value that does not convert, the memory running out):
    they escaped as a traceback (OSError from pyarrow's reader), exit 1."""
    query = "SELECT CASE WHEN range > 150000 THEN ('x' || range)::INT ELSE range END AS v FROM range(300000)"
    for fmt in ("csv", "json", "jsonl"):  # (every row: a table shows the first 1,000, which may all come first)
        r = invoke("sql", str(sample), query, "--format", fmt)
        assert r.exit_code == 2, (fmt, r.output[-500:])
        assert "part-way" in r.stderr and "Could not convert string 'x150001'" in r.stderr, r.stderr


@pytest.mark.parametrize("command", [["sql", "SELECT * FROM turns"], ["show", "c2"]])
def test_sql_and_show_out_of_memory_name_the_option_to_raise(sample: Path, command: list[str]) -> None:
    """They said "cannot read the dataset" and passed on DuckDB's advice (`SET memory_limit=…`, which `sql`
    refuses); `report` says which option to raise."""
    r = invoke(command[0], str(sample), *command[1:], "--memory-limit", "1KB")
    assert r.exit_code in (1, 2) and "raise --memory-limit" in r.stderr, r.stderr
    assert "SET " not in r.stderr and "cannot read the dataset" not in r.stderr, r.stderr


@pytest.mark.parametrize(
    "command",
    [
        ["report"],
        ["report", "--format", "json"],
        ["show", "c2"],
        ["sql", "SELECT * FROM range(100000)", "--format", "csv"],
    ],
)
def test_an_output_on_a_full_disk_is_an_error_not_a_traceback(sample: Path, command: list[str]) -> None:
    """`report data/ > /full/disk/r.txt` died with a traceback (OSError: No space left on device)."""
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "converse_tap", command[0], str(sample), *command[1:]],
            stdout=full,
            stderr=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            cwd=ROOT,
            timeout=300,
        )
    stderr = done.stderr.decode()
    assert done.returncode == 1 and "Traceback" not in stderr and "Exception ignored" not in stderr, stderr
    assert "cannot write the output: No space left on device" in stderr, stderr


def test_an_output_named_as_a_directory_is_refused(sample: Path, tmp_path: Path) -> None:
    """`-o out/` (a directory not made yet) wrote a file named `out`; `-o ''` said "cannot write -o .\""""
    r = invoke("report", str(sample), "-o", f"{tmp_path}/out/")
    assert r.exit_code == 2 and "names a directory" in r.stderr, r.output
    assert not (tmp_path / "out").exists()
    r = invoke("report", str(sample), "-o", "")
    assert r.exit_code == 2 and "give a file name" in r.stderr, r.output
