"""HARs written by a real exporter: Playwright driving Debian's Chromium through the recording proxy to the demo
agents (a2a-sdk). The HAR's bodies kept as files beside it ("attach", a folder), in a `.har.zip`, or embedded, each
ingested, give the rows the proxy recorded live."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Literal

import pytest
from click.testing import CliRunner

from converse_tap.a2a.constants import CONVERSE_URI
from converse_tap.cli import cli
from converse_tap.store.reader import load
from tests.browser import ensure_chromium
from tests.integration.procs import demo_agent, mitmdump

pytestmark = pytest.mark.integration

# in the page, at the agent's origin: its card read, then two unary calls and a streamed one to its JSON-RPC URL
SCRIPT = """async ([card, ext]) => {
  const c = await (await fetch(card, {cache: 'no-store'})).json();  // (a revalidation is a 304 on the wire)
  const url = c.supportedInterfaces.find(i => i.protocolBinding === 'JSONRPC' && i.protocolVersion === '1.0').url;
  const headers = {'Content-Type': 'application/json', 'A2A-Version': '1.0', 'A2A-Extensions': ext};
  const call = async (id, method, text, contextId) => {
    const message = {messageId: 'u-' + id, role: 'ROLE_USER', parts: [{text}], ...(contextId ? {contextId} : {})};
    const body = JSON.stringify({jsonrpc: '2.0', id, method, params: {message}});
    return await (await fetch(url, {method: 'POST', headers, body})).text();
  };
  const first = JSON.parse(await call('r-1', 'SendMessage', 'I would like to book a table'));
  const ctx = (first.result.task || first.result.message).contextId;
  await call('r-2', 'SendMessage', 'Tomorrow at 8pm', ctx);
  return await call('r-3', 'SendStreamingMessage', 'Is there parking?');
}"""
NOT_COMPARED = {"exchange_id", "ts", "date"}  # a HAR entry's id is its content's; the proxy's times are its own


def _browse(chromium: str, proxy: str, agent: str, har: Path, content: Literal["attach", "embed"]) -> str:
    from playwright.sync_api import sync_playwright

    card = f"{agent}/agents/ag_trattoria01/.well-known/agent-card.json"
    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium,
            args=["--no-sandbox", "--proxy-bypass-list=<-loopback>"],  # loopback through the proxy too
            proxy={"server": proxy},
        )
        try:
            context = browser.new_context(record_har_path=str(har), record_har_content=content)
            page = context.new_page()
            page.goto(card)
            streamed: str = page.evaluate(SCRIPT, [card, CONVERSE_URI])
            context.close()  # the HAR is written here
        finally:
            browser.close()
    return streamed


EXCHANGE_COLUMNS = ["url", "http_method", "binding", "dialect", "method", "jsonrpc_id", "a2a_version", "status_code",
                    "converse_requested", "converse_echoed", "streamed", "sse_events", "bytes_in", "bytes_out",
                    "context_id", "task_id", "task_state", "complete", "messages", "replies", "anomalies"]  # fmt: skip


def _rows(dataset: Path, table: str = "messages") -> list[list[str]]:
    msgs = load(dataset, table)
    msgs = msgs[[c for c in msgs.columns if c not in NOT_COMPARED and (table == "messages" or c in EXCHANGE_COLUMNS)]]
    return sorted([f"{c}={v}" for c, v in zip(msgs.columns, row, strict=True)] for row in msgs.itertuples(index=False))


def test_playwright_hars_ingest_to_the_rows_the_proxy_recorded(tmp_path: Path) -> None:
    chromium = ensure_chromium()
    exports = {"attach": tmp_path / "pw" / "session.har", "zip": tmp_path / "session.har.zip",
               "embed": tmp_path / "embedded.har"}  # fmt: skip
    exports["attach"].parent.mkdir()
    with demo_agent() as agent:
        for how, har in exports.items():  # one session each, recorded live by its own proxy
            with mitmdump(tmp_path / f"live-{how}") as (proxy, _):
                streamed = _browse(chromium, proxy, agent, har, "embed" if how == "embed" else "attach")
            assert "data:" in streamed  # the stream reached the page
    bodies = [p for p in exports["attach"].parent.iterdir() if p != exports["attach"]]
    assert bodies and all(p.stat().st_size for p in bodies)  # Playwright kept the bodies as files beside the HAR
    with zipfile.ZipFile(exports["zip"]) as z:
        assert len(z.namelist()) > 1
    assert '"_file"' not in exports["embed"].read_text()
    for how, source in (("attach", exports["attach"].parent), ("zip", exports["zip"]), ("embed", exports["embed"])):
        expected = _rows(tmp_path / f"live-{how}")
        assert len(expected) >= 6 and sum("has_envelope=True" in r for r in expected) >= 3, how
        out = tmp_path / f"from-{how}"
        r = CliRunner().invoke(cli, ["ingest", str(source), "--out", str(out)])  # the folder, as a user gives it
        assert r.exit_code == 0, (how, r.stderr)
        assert json.dumps(_rows(out), indent=0) == json.dumps(expected, indent=0), how
        calls = _rows(tmp_path / f"live-{how}", "exchanges")  # the card twice (the page, then fetched), 3 calls
        assert len(calls) == 5 and json.dumps(_rows(out, "exchanges"), indent=0) == json.dumps(calls, indent=0), how
