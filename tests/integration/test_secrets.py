"""Credentials never reach a file: planted in every place a request and response can carry them, then looked
for in everything the tool writes (Parquet, journals, salt, logs, reports)."""

from __future__ import annotations

import json
import signal
import socket
import sys
from pathlib import Path

import httpx
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from converse_tap.a2a.constants import CONVERSE_URI
from converse_tap.cli import cli
from converse_tap.store.reader import load
from tests.integration.procs import LISTENING, REPLY_BYTES, Canned, Proc, mitmdump
from tests.integration.test_proxy import BODY, HEADERS

pytestmark = pytest.mark.integration

SECRETS = {
    "authorization": "Bearer sk-live-AUTHSECRET1",
    "proxy-authorization": "Basic UFJPWFlTRUNSRVQy",
    "cookie": "session=COOKIESECRET3; theme=dark",
    "x-api-key": "APIKEYSECRET4",
    "x-auth-token": "TOKENSECRET5",
    "x-session-id": "SESSIONSECRET6",
}
QUERY = "api_key=QUERYSECRET7&access_token=QUERYSECRET8&sig=QUERYSECRET9&tenant=visible"


def test_no_secret_reaches_any_file(tmp_path: Path) -> None:
    out = tmp_path / "data"
    # mitmproxy's own flow dump prints URLs; `converse-tap record` runs without it, and so does this test
    with Canned() as up, mitmdump(out, "--set", "converse_tap_text=hash", "--set", "flow_detail=0") as (proxy, proc):
        base = up.base.replace("http://", "http://user:USERINFOSECRET10@")
        with httpx.Client(proxy=proxy, timeout=10) as client:
            for path, body in (("/a2a", BODY), ("/sse/a2a", BODY.replace(b"SendMessage", b"SendStreamingMessage"))):
                r = client.post(f"{base}{path}?{QUERY}", content=body, headers={**HEADERS, **SECRETS})
                assert r.status_code == 200
    assert "A2A 127.0.0.1" in proc.output  # our summary lines are in the log that is checked
    (tmp_path / "mitmdump.log").write_text(proc.output)
    for fmt in ("text", "json", "markdown", "html"):
        r = CliRunner().invoke(cli, ["report", str(out), "--format", fmt, "-o", str(tmp_path / f"report.{fmt}")])
        assert r.exit_code == 0
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert any(p.suffix == ".parquet" for p in files) and len(files) >= 8
    planted = [v.split()[-1].split("=")[-1].rstrip(";") for v in SECRETS.values()]
    planted += ["COOKIESECRET3", "QUERYSECRET7", "QUERYSECRET8", "QUERYSECRET9", "USERINFOSECRET10"]
    for f in files:
        data = f.read_bytes()
        for secret in planted:
            assert secret.encode() not in data, f"{secret} found in {f}"
    # and the redaction leaves what is not a secret in place
    urls = load(out, "exchanges")["url"].tolist()
    assert all("tenant=visible" in u and "api_key=[REDACTED]" in u and "@" not in u for u in urls), urls


# -- credential shapes in URLs and cards, live through the proxy and again through `ingest --redact` -------------

JWT = "eyJhbGciOiJIUzI1NiJ9.LIVEJWTPAYLOAD3x.LIVEJWTSIG3"
OPERATOR = r"tenant-(\w+)"  # an operator's own pattern: tenant names are confidential here
PLANTED_CARD = {
    "name": "Planted",
    "url": "https://user:CARDPW11@agent.test/a2a?token=CARDTOK12",
    "preferredTransport": "JSONRPC",
    "additionalInterfaces": [{"url": f"https://agent.test/rest/{JWT}", "transport": "HTTP+JSON"}],
    "iconUrl": "https://cdn.test/icon.png?sig=ICONSIG13",
    "documentationUrl": "https://u:DOCPW14@docs.test/",
    "provider": {"organization": "P", "url": "https://p.test/?access_token=PROVTOK15"},
    "capabilities": {
        "extensions": [
            {
                "uri": CONVERSE_URI,
                "params": {
                    "mcp": {
                        "url": "https://mcp.test/m?api_key=MCPKEY16",
                        "serverCardUrl": "https://mcp.test/m/server-card;jsessionid=MCPSESS17",
                    },
                    "tools": [{"toolName": "t", "inputSchema": {"type": "object"}}],
                },
            }
        ]
    },
    "skills": [{"id": "t"}],
}
REPLY_WITH_CITATION = json.loads(REPLY_BYTES)
REPLY_WITH_CITATION["result"]["message"]["metadata"][CONVERSE_URI]["citations"] = [
    {"documentId": "d1", "title": "Doc", "sourceUrl": "https://docs.test/d1?token=CITTOK18"}
]
LIVE_SECRETS = ["LIVEPW1", "RAWPW2", "LIVEJWTPAYLOAD3x", "LIVEJWTSIG3", "LIVEJSESS4", "LIVETOK5"]
LIVE_SECRETS += ["CARDPW11", "CARDTOK12", "ICONSIG13", "DOCPW14", "PROVTOK15", "MCPKEY16", "MCPSESS17", "CITTOK18"]


class Planted(Canned):
    """Answers A2A on every path: a card under /.well-known/, a converse reply to any POST."""

    def _app(self) -> Starlette:
        async def any_path(request: Request) -> Response:
            if request.url.path.endswith("/.well-known/agent-card.json"):
                return Response(json.dumps(PLANTED_CARD).encode(), media_type="application/json")
            return Response(json.dumps(REPLY_WITH_CITATION).encode(), media_type="application/json")

        return Starlette(routes=[Route("/{path:path}", any_path, methods=["GET", "POST"])])


def _plant(proxy: str, base: str) -> None:
    """Each credential shape, sent through the proxy."""
    host = base.split("//", 1)[1]
    with httpx.Client(proxy=proxy, timeout=10) as client:
        for path in (
            f"/agents/{JWT}/a2a",
            "/a2a;jsessionid=LIVEJSESS4",
            "/a2a?token=LIVETOK5&tenant=tenant-LIVEOP6",
        ):
            assert client.post(base + path, content=BODY, headers=HEADERS).status_code == 200
        r = client.post(base.replace("//", "//user:LIVEPW1@") + "/a2a", content=BODY, headers=HEADERS)
        assert r.status_code == 200
        assert client.get(base + "/agents/ag_planted01/.well-known/agent-card.json").status_code == 200
    # userinfo in the request line itself: mitmproxy refuses the line, and logs it
    port = int(proxy.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(f"POST http://user:RAWPW2@{host}/a2a HTTP/1.1\r\nHost: {host}\r\nContent-Length: 0\r\n\r\n".encode())
        assert s.recv(100).startswith(b"HTTP/1.1 400")


def _outputs(data: Path, into: Path) -> None:
    """Every report format and every text and JSON output of the CLI, as files to search."""
    runner = CliRunner()
    for fmt in ("text", "json", "markdown", "html"):
        r = runner.invoke(
            cli, ["report", str(data), "--format", fmt, "--by", "agent", "-o", str(into / f"report.{fmt}")]
        )
        assert r.exit_code == 0, r.output
    for name, args in {
        "agents.txt": ["agents", str(data)],
        "agents.json": ["agents", str(data), "--format", "json"],
        "check.txt": ["check", str(data), "--per-agent", "--max-unanswered-share", "1"],
    }.items():
        r = runner.invoke(cli, args)
        assert r.exit_code == 0, r.output
        (into / name).write_text(r.output)


def _assert_absent(root: Path, secrets: list[str]) -> list[Path]:
    """Search every file's bytes, and each Parquet file's values as text (compression hides them from bytes)."""
    files = [p for p in root.rglob("*") if p.is_file()]
    for f in files:
        data = f.read_bytes()
        if f.suffix == ".parquet":
            data += json.dumps(pq.read_table(f).to_pylist(), default=str, ensure_ascii=False).encode()
        for secret in secrets:
            assert secret.encode() not in data, f"{secret} found in {f}"
    return files


@pytest.mark.parametrize("runner", ["mitmdump -s", "converse-tap record"])
def test_no_credential_shape_survives(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, runner: str) -> None:
    out, flows = tmp_path / "data", tmp_path_factory.mktemp("capture") / "flows.mitm"
    with Planted() as up:
        if runner == "mitmdump -s":
            with mitmdump(out, "--set", "flow_detail=0", "-w", str(flows)) as (proxy, proc):
                _plant(proxy, up.base)
        else:
            record = ["record", "--out", str(out), "--listen-port", "0", "--redact", OPERATOR]
            proc = Proc([sys.executable, "-m", "converse_tap", *record])
            try:
                _plant(f"http://127.0.0.1:{proc.wait_for(LISTENING).group(1)}", up.base)
            finally:
                assert proc.stop(signal.SIGTERM) == 0, proc.output
    log = proc.output
    # the lines that would carry the secrets are in the log that is searched
    assert "Bad HTTP request line: b'POST http://127.0.0.1:" in log and "A2A 127.0.0.1" in log
    (tmp_path / "proxy.log").write_text(log)
    _outputs(out, tmp_path)
    # record --redact: the operator's pattern holds in rows and in the proxy's own log lines alike
    files = _assert_absent(tmp_path, LIVE_SECRETS if runner == "mitmdump -s" else [*LIVE_SECRETS, "LIVEOP6"])
    assert sum(p.suffix == ".parquet" for p in files) >= 3 and len(files) >= 11
    ex = load(out, "exchanges")
    assert f"127.0.0.1:{up.base.rsplit(':', 1)[1]}/agents/[REDACTED]/a2a" in set(ex["agent"])
    assert any(";jsessionid=[REDACTED]" in u for u in ex["url"]) and any("token=[REDACTED]" in u for u in ex["url"])
    card = load(out, "agent_cards").iloc[0]
    assert card["mcp_url"] == "https://mcp.test/m?api_key=[REDACTED]"
    assert next(i["url"] for i in card["interfaces"]) == "https://agent.test/a2a?token=[REDACTED]"
    if runner == "mitmdump -s":  # the saved flows, imported with the operator's pattern
        offline = tmp_path / "offline"
        r = CliRunner().invoke(cli, ["ingest", str(flows), "--out", str(offline), "--redact", OPERATOR])
        assert r.exit_code == 0, r.output
        (tmp_path / "ingest.log").write_text(r.output)
        _outputs(offline, offline)
        _assert_absent(offline, [*LIVE_SECRETS, "LIVEOP6"])
        assert any("tenant=tenant-[REDACTED]" in u for u in load(offline, "exchanges")["url"])


def test_operator_pattern_applies_live(tmp_path: Path) -> None:
    out = tmp_path / "data"
    with (
        Planted() as up,
        mitmdump(out, "--set", "flow_detail=0", "--set", f"converse_tap_redact={OPERATOR}") as (
            proxy,
            proc,
        ),
    ):
        _plant(proxy, up.base)
    (tmp_path / "proxy.log").write_text(proc.output)
    _outputs(out, tmp_path)
    # mitmdump takes an unknown --set silently (a script may declare it later): the secret is then stored
    _assert_absent(tmp_path, [*LIVE_SECRETS, "LIVEOP6"])
