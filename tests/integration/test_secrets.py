"""Credentials never reach a file: planted in every place a request and response can carry them, then looked
for in everything the tool writes (Parquet, journals, salt, logs, reports)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from converse_tap.cli import cli
from converse_tap.store.reader import load
from tests.integration.procs import Canned, mitmdump
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
