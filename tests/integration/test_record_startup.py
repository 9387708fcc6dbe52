"""`converse-tap record` start-up, as a user runs it: a real process, its own options in every error."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from converse_tap.cli import cli
from tests.integration.procs import LISTENING, Proc

pytestmark = pytest.mark.integration


def record(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "converse_tap", "record", *args], capture_output=True, text=True, timeout=120
    )


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        yield s.getsockname()[1]


def test_a_port_in_use_names_listen_port_and_leaves_nothing_behind(tmp_path: Path, busy_port: int) -> None:
    out = tmp_path / "data"
    r = record("--out", str(out), "--listen-port", str(busy_port))
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("Error: the proxy cannot listen: ") and "address already in use" in r.stderr
    assert "--listen-port" in r.stderr and "--mode" not in r.stderr
    assert "recording" not in r.stdout + r.stderr and "Traceback" not in r.stderr
    assert not out.exists()  # no lock, no journal directory, not even the directory it would have made


def test_a_port_in_use_keeps_an_existing_dataset_as_it_was(tmp_path: Path, busy_port: int) -> None:
    (tmp_path / "exchanges").mkdir()
    r = record("--out", str(tmp_path), "--listen-port", str(busy_port))
    assert r.returncode == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["exchanges"]


def test_an_unwritable_out_names_out(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    r = record("--out", str(tmp_path / "file" / "data"), "--listen-port", "0")
    assert r.returncode == 2
    assert r.stderr.startswith(f"Error: cannot write the dataset to --out {tmp_path / 'file' / 'data'}: ")
    assert "converse_tap_dir" not in r.stderr and r.stdout == ""


@pytest.mark.parametrize(
    ("sets", "message"),
    [
        (["--set", "oops"], "Error: --set takes KEY=VALUE, not 'oops'"),
        (["--set", "no_such_option=1"], "Error: unknown option(s): no_such_option (--set takes mitmproxy's options"),
        (
            ["--mode", "bogus"],
            "Error: Invalid proxy mode specification: bogus (unknown mode); give one of mitmproxy's modes, e.g. --mode",
        ),
    ],
)
def test_bad_set_values_exit_2_before_anything_listens(tmp_path: Path, sets: list[str], message: str) -> None:
    r = record("--out", str(tmp_path / "data"), "--listen-port", "0", *sets)
    assert r.returncode == 2 and r.stderr.startswith(message), r.stderr
    assert "listening" not in r.stdout and not (tmp_path / "data").exists()


def test_the_dataset_keeps_one_text_policy(tmp_path: Path) -> None:
    out = tmp_path / "data"
    args = ["record", "--out", str(out), "--listen-port", "0", "--text", "hash"]
    proc = Proc([sys.executable, "-m", "converse_tap", *args])
    try:
        proc.wait_for(LISTENING)
    finally:
        assert proc.stop(signal.SIGINT) == 0, proc.output
    assert (out / "_text_policy").read_text() == "hash\n"
    r = record("--out", str(out), "--listen-port", "0", "--text", "keep")
    assert r.returncode == 2
    assert r.stderr.startswith(f"Error: the dataset {out} holds message text under the 'hash' policy, not 'keep'")
    assert "--text hash" in r.stderr
    # ingest, the other writer, refuses too, before it reads anything
    flows = tmp_path / "empty.har"
    flows.write_text('{"log": {"entries": []}}')
    r2 = CliRunner().invoke(cli, ["ingest", str(flows), "--out", str(out), "--text", "drop"])
    assert r2.exit_code == 2 and "under the 'hash' policy, not 'drop'" in r2.stderr
    assert (out / "_text_policy").read_text() == "hash\n"
