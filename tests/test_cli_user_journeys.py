"""A user-journey hunt over the CLI and the report outputs: each test one defect found by
using the commands as a user would, or as someone trying to break them would."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.cli_helpers import invoke
from tests.factories import a2a_flow, agent_message, envelope, jsonrpc_request, jsonrpc_result, user_message
from tests.factories import write_dataset as _write_dataset

ANSWERED = {"availability": "assessed", "coverage": "answered"}


def _flow(mid: str, env: dict[str, Any], minute: int, ctx: str = "c1") -> Any:
    reply = agent_message(mid, env=envelope(**env))
    reply["contextId"] = ctx
    asked = user_message(f"u-{mid}")
    asked["contextId"] = ctx
    flow = a2a_flow(
        body=jsonrpc_request(params={"message": asked, "configuration": {}}),
        response=jsonrpc_result({"message": reply}),
    )
    for m in (flow.request, flow.response):
        m.timestamp_start += minute * 60
        m.timestamp_end = m.timestamp_start
    return flow


def _process(args: list[str], **kw: Any) -> subprocess.Popen[str]:
    """`converse-tap ARGS` in its own process, through the console script's own `main`."""
    code = "import sys; from converse_tap.cli import main; sys.argv[0] = 'converse-tap'; main()"
    return subprocess.Popen([sys.executable, "-c", code, *args], text=True, **kw)


# -- -o ---------------------------------------------------------------------------------------------------------


def test_output_dash_is_stdout(sample: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`-o -` wrote a file named `-` in the working directory (and said "wrote -")."""
    monkeypatch.chdir(tmp_path)
    r = invoke("report", str(sample), "--format", "json", "-o", "-")
    assert r.exit_code == 0 and json.loads(r.stdout)["schema"] == "converse-tap-report/1"
    assert not (tmp_path / "-").exists() and "wrote" not in r.stderr


def _unwritable_directory(tmp_path: Path) -> Path:
    """A directory this process cannot create files in: one made read-only, or (as root, whom permissions do not
    stop) a read-only file system's."""
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    if not os.access(ro, os.W_OK):
        return ro
    for candidate in (Path("/sys"), Path("/proc/sys")):
        if candidate.is_dir() and not os.access(candidate, os.W_OK):
            return candidate
    pytest.skip("no directory here this process cannot write to")


def test_an_output_that_cannot_be_written_is_refused_before_the_work(tmp_path: Path) -> None:
    """`-o` in a directory the user cannot write to was found only once the whole report was made: for a big
    dataset, minutes of work lost. Now it is refused first (before the dataset is even looked at: here a directory
    that is no dataset would be the error otherwise)."""
    not_a_dataset = tmp_path / "empty"
    not_a_dataset.mkdir()
    out = _unwritable_directory(tmp_path) / "sub" / "r.html"
    r = invoke("report", str(not_a_dataset), "--format", "html", "-o", str(out))
    assert r.exit_code == 2, r.stderr
    assert "cannot write in" in r.stderr and "directory you can write to" in r.stderr
    assert "not a converse-tap dataset" not in r.stderr and "Traceback" not in r.stderr


# -- the out-of-memory advice -----------------------------------------------------------------------------------


def test_out_of_memory_advice_is_worded_once(sample: Path) -> None:
    """`report` and `sql` gave the same advice from two definitions; both now come from `guards.out_of_memory`."""
    import duckdb

    from converse_tap.analysis.drill import QueryError
    from converse_tap.cli.drill import _failed
    from converse_tap.cli.guards import SafeError, out_of_memory, read_error

    oom = duckdb.OutOfMemoryException("Out of Memory Error: failed to allocate 4.0 KiB (1.0 KiB/1.0 KiB used)")
    query = QueryError("query failed")
    query.__cause__ = oom
    advice = "needs more memory than its limit allows; raise --memory-limit (Out of Memory Error: failed"
    assert _failed(query) == out_of_memory(oom, "the query") and advice in _failed(query)
    assert read_error(oom, sample, SafeError).message == out_of_memory(oom, "the analysis")
    assert out_of_memory(duckdb.IOException("IO Error: no such file"), "the query") is None


# -- lists the recorder kept only the beginning of --------------------------------------------------------------


def test_abandoned_at_past_the_kept_slots_is_noted(tmp_path: Path) -> None:
    """A reply listing more pendingInput slots than the recorder keeps (256) had its routine's "abandoned at"
    counted from the kept ones only, with nothing in the report but an anomaly code: now a note says which figure
    that costs. The same for citations and the most cited documents."""
    slots = [{"key": f"s{i:03d}", "required": i >= 255} for i in range(300)]
    waiting = {"name": "Book", "status": "waiting_for_input", "pendingInput": slots}
    cited = [{"documentId": f"d{i}"} for i in range(300)]
    root = Path(
        _write_dataset(
            tmp_path / "d",
            [
                _flow("m1", {"answerCoverage": {**ANSWERED, "originatingTurnId": "t1"}, "routine": waiting}, 0),
                _flow("m2", {"answerCoverage": ANSWERED, "routine": {"name": "Book", "status": "abandoned"}}, 1),
                _flow("m3", {"answerCoverage": {**ANSWERED, "originatingTurnId": "t3"}, "citations": cited}, 2),
            ],
        )
    )
    r = invoke("report", str(root), "--format", "json")
    assert r.exit_code == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["routines"]["abandoned_at"][0]["slot"] == "s255"  # s256..s299 were not kept
    notes = report["dataset"]["notes"]
    slot_note = [n for n in notes if "pending_input_not_kept_past" in n]
    assert len(slot_note) == 1 and "more than 256 pendingInput slots" in slot_note[0]
    assert "abandoned_at" in slot_note[0] and slot_note[0].startswith("1 agent message")
    assert any("citations_not_kept_past" in n and "most cited documents" in n for n in notes), notes
    text = invoke("report", str(root)).stdout
    assert "note: 1 agent message(s) listed more than 256 pendingInput slots" in text


def test_no_note_when_every_list_was_kept(sample: Path) -> None:
    notes = json.loads(invoke("report", str(sample), "--format", "json").stdout)["dataset"]["notes"]
    assert not [n for n in notes if "not_kept_past" in n]


# -- how a command ends when stopped ----------------------------------------------------------------------------


def _with_a_warning(sample: Path, tmp_path: Path) -> Path:
    """A copy of the sample with a file that is not the dataset's: every command that opens it warns on stderr
    first, which tells a test the command is past start-up."""
    root = tmp_path / "data"
    shutil.copytree(sample, root)
    (next((root / "exchanges").glob("date=*")) / "stray.parquet").write_bytes(b"not parquet")
    return root


def test_ctrl_c_during_a_query_is_aborted_not_a_traceback(sample: Path, tmp_path: Path) -> None:
    """DuckDB interrupted by SIGINT inside a query raises `RuntimeError("Query interrupted")`, not
    KeyboardInterrupt: Ctrl-C during a long report, check or query printed a traceback (or, in a scan's Python
    callback, "cannot read the dataset", exit 1). Now: "Aborted!" and exit 130, as a shell reports Ctrl-C."""
    root = _with_a_warning(sample, tmp_path)
    forever = "SELECT count(*) FROM range(1000000000000000) t(i) WHERE i % 7 = 3"
    with _process(
        ["sql", str(root), forever, "--format", "csv"], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    ) as proc:
        assert proc.stderr is not None
        first = proc.stderr.readline()  # the warning: the command has opened the dataset; the query runs next
        assert "warning: skipped" in first, first
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, (proc.returncode, err)
    assert err.strip() == "Aborted!" and out == ""


def test_a_reader_that_goes_away_ends_the_command_quietly(sample: Path) -> None:
    """`sql … | head -1`: click ended it with exit 1, `report`'s "the dataset cannot be read". Now exit 141, as a
    shell reports a command SIGPIPE stopped, and nothing on stderr."""
    with _process(
        ["sql", str(sample), "SELECT * FROM range(100000000)", "--format", "csv"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        assert proc.stdout.readline() == "range\n"
        proc.stdout.close()
        err = proc.stderr.read()
        assert proc.wait(timeout=120) == 141, err
    assert err == ""


@pytest.mark.parametrize("where", ["messages/{part}", "exchanges/new.txt", "_salt", "_journal/r.txt"])
def test_an_output_among_the_datasets_own_files_is_refused(sample: Path, tmp_path: Path, where: str) -> None:
    """`report data/ -o data/messages/…/part-….parquet` (a slip of tab completion) wrote the report over that
    Parquet file, said "wrote …", and the dataset had lost its messages. A report beside the tables (the demo writes
    `report.html` at the dataset's top) is still written."""
    root = tmp_path / "data"
    shutil.copytree(sample, root)
    part = next((root / "messages").rglob("*.parquet"))
    before = part.read_bytes()
    out = root / where.format(part=part.relative_to(root / "messages"))
    r = invoke("report", str(root), "-o", str(out))
    assert r.exit_code == 2 and "would overwrite or add to the dataset's own files" in r.stderr, r.stderr
    assert part.read_bytes() == before and not (root / "exchanges" / "new.txt").exists()
    r = invoke("report", str(root), "-o", str(root / "report.txt"))
    assert r.exit_code == 0 and (root / "report.txt").read_text().startswith("== Dataset ==")


@pytest.mark.parametrize(
    "args", [["report", "{d}"], ["sql", "{d}", "SELECT 1 AS one", "--format", "csv"], ["show", "{d}", "c1"]]
)
def test_a_closed_stdout_is_an_error_not_a_silent_success(sample: Path, args: list[str]) -> None:
    """Started with stdout closed (`report data/ >&-`), `report` exited 0 having written nothing (click's echo
    writes nothing when Python has no sys.stdout) and `sql` failed with a traceback. Now: exit 2, saying so."""
    argv = [a.format(d=sample) for a in args]
    with _process(argv, stdout=None, stderr=subprocess.PIPE, preexec_fn=lambda: os.close(1)) as proc:
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2, err
    advice = "redirect it (> FILE), or give `report` -o FILE" if args[0] == "report" else "redirect it (> FILE)"
    assert err == f"Error: standard output is closed: {advice}\n"  # (only `report` has an -o)


def test_a_closed_stdout_does_not_stop_a_report_written_to_a_file(sample: Path, tmp_path: Path) -> None:
    out = tmp_path / "r.txt"
    argv = ["report", str(sample), "-o", str(out)]
    with _process(argv, stdout=None, stderr=subprocess.PIPE, preexec_fn=lambda: os.close(1)) as proc:
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and err == f"wrote {out}\n" and out.read_text().startswith("== Dataset ==")


@pytest.mark.parametrize("command", [["report"], ["check", "--no-anomalies"]])
def test_spark_master_without_the_spark_engine_is_a_usage_error(sample: Path, command: list[str]) -> None:
    """`--spark-master spark://head:7077` without `--engine spark` was ignored: the report ran on DuckDB here, not
    on the cluster named."""
    r = invoke(command[0], str(sample), *command[1:], "--spark-master", "local[2]")
    assert r.exit_code == 2 and "--spark-master is for --engine spark" in r.stderr and r.stdout == ""


def test_sql_csv_guards_formulas_in_every_column_that_may_hold_wire_text(tmp_path: Path) -> None:
    """Only string columns had a formula prefixed: a UNION (or any type written as its text) wrote the wire's
    `=cmd|' /C calc'!A0` as it was, which a spreadsheet runs. Numbers keep their sign."""
    formula = "=cmd|' /C calc'!A0"
    root = Path(_write_dataset(tmp_path / "d", [_flow("m1", {"answerCoverage": {**ANSWERED, "reason": formula}}, 0)]))
    query = (
        "SELECT union_value(t := coverage_reason) AS u, coverage_reason AS s, -5 AS n, -1.5 AS f "
        "FROM messages WHERE coverage_reason IS NOT NULL"
    )
    r = invoke("sql", str(root), query, "--format", "csv")
    assert r.exit_code == 0, r.stderr
    assert r.stdout.splitlines() == ["u,s,n,f", f"'{formula},'{formula},-5,-1.5"]


@pytest.mark.parametrize("value", ["30", "2.5", " 90 "])
def test_a_stale_after_without_a_unit_is_refused(sample: Path, value: str) -> None:
    """pandas reads a bare number as nanoseconds: `--stale-after 30` (meant as minutes, or seconds) reported every
    open routine instance idle for 30 ns as stale, exit 0."""
    r = invoke("report", str(sample), "--stale-after", value)
    assert r.exit_code == 2 and "has no unit; write e.g." in r.stderr and r.stdout == ""
    assert invoke("report", str(sample), "--stale-after", value.strip() + "min").exit_code == 0
