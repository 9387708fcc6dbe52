"""Captures written by the mitmproxy releases a team may have kept months of: mitmproxy 9 (flow format 18) and 10
(format 20) record a2a-sdk conversations behind the recording proxy (running this mitmproxy, upstream mode), and
their flow files and HAR exports ingest to exactly the rows recorded live. Each older mitmproxy is installed from
PyPI into its own virtual environment under the user's cache on first use."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from converse_tap.cli import cli
from tests.integration.procs import LISTENING, Proc, demo_agent, mitmdump
from tests.integration.test_playwright_har import _rows
from tests.integration.test_proxy import _conversation

pytestmark = pytest.mark.integration

CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "converse-tap-tests"


def _older_mitmdump(version: str) -> Path:
    """`mitmdump` of mitmproxy `version`, in a virtual environment of its own (made once, kept in the cache)."""
    venv = CACHE / f"mitmproxy-{version}"
    exe = venv / "bin" / "mitmdump"
    if exe.exists():
        return exe
    try:
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(venv)], check=True, timeout=300)
        subprocess.run(
            [str(venv / "bin" / "python"), "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
             f"mitmproxy=={version}"],
            check=True, timeout=900, capture_output=True, text=True,
        )  # fmt: skip
    except subprocess.CalledProcessError as e:
        pytest.fail(f"installing mitmproxy {version} from PyPI failed: {e.stderr[-2000:]}")
    return exe


@pytest.mark.parametrize("version", ["9.0.1", "10.4.2"])
def test_flow_files_and_hars_of_older_mitmproxy_ingest_to_the_live_rows(tmp_path: Path, version: str) -> None:
    old = _older_mitmdump(version)
    live, flows, har = tmp_path / "live", tmp_path / "old.mitm", tmp_path / "old.har"
    args = [str(old), "--listen-host", "127.0.0.1", "--listen-port", "0", "-w", str(flows),
            "--set", "store_streamed_bodies=true", "--set", "termlog_verbosity=info"]  # fmt: skip
    if not version.startswith("9."):
        args += ["--set", f"hardump={har}"]  # (mitmproxy 10 introduced its HAR export)
    with demo_agent() as agent:
        older = Proc(args)
        try:
            port = older.wait_for(LISTENING).group(1)
            with mitmdump(live, "--mode", f"upstream:http://127.0.0.1:{port}") as (proxy, _):
                asyncio.run(_conversation(agent, proxy, "JSONRPC", streaming=True))
                asyncio.run(_conversation(agent, proxy, "HTTP+JSON", streaming=False))
        finally:
            assert older.stop() == 0, older.output
    for capture in (flows, har) if har.exists() else (flows,):
        out = tmp_path / f"from-{capture.suffix[1:]}"
        r = CliRunner().invoke(cli, ["ingest", str(capture), "--out", str(out)])
        assert r.exit_code == 0, (capture.name, r.stderr)
        for table in ("messages", "exchanges"):
            expected = _rows(live, table)
            assert len(expected) >= 10, table
            assert json.dumps(_rows(out, table), indent=0) == json.dumps(expected, indent=0), (capture.name, table)
