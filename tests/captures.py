"""A realistic `mitmdump -w` capture, generated: the mix of traffic a team's recorded A2A agents produce.

Each record is the saved state of a real mitmproxy HTTPFlow (made by `tflow`, then varied), written with
mitmproxy's own tnetstring writer, so the file reads back with `mitmproxy.io.FlowReader`. About 5 KiB per flow:
unary SendMessage replies carrying the converse envelope, SSE streams of 3-10 events, task polls, JSON-RPC
errors, gzip bodies, v0.3 and HTTP+JSON calls, agent cards, TLS connections with their certificates, and a little
non-A2A traffic. Deterministic for a seed.
"""

from __future__ import annotations

import copy
import datetime
import gzip
import json
import random
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mitmproxy.io import tnetstring

from tests.factories import (
    EXT,
    a2a_flow,
    agent_message,
    envelope,
    jsonrpc_request,
    jsonrpc_result,
    sse_body,
    status_event,
    user_message,
)

_AGENTS = [("support.agents.test", 443, "https"), ("billing.agents.test", 443, "https"), ("agent.test", 9000, "http")]
_STATES = ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING", "TASK_STATE_WORKING", "TASK_STATE_INPUT_REQUIRED"]
_WORDS = [
    "return",
    "order",
    "refund",
    "delivery",
    "invoice",
    "account",
    "password",
    "shipping",
    "tracking",
    "warranty",
    "size",
    "colour",
]


def _certificate() -> bytes:
    """One self-signed certificate in PEM, as mitmproxy stores the server's chain of a TLS connection."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "agents.test")])
    start = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(1)
        .not_valid_before(start)
        .not_valid_after(start + datetime.timedelta(days=365))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName("*.agents.test")]), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM)


class _Gen:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.template = a2a_flow().get_state()
        self.cert = _certificate()
        self.t = 1_796_000_000.0  # 2026-11-30

    def text(self, lo: int, hi: int) -> str:
        return " ".join(self.rng.choice(_WORDS) for _ in range(self.rng.randint(lo, hi)))

    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def env(self) -> dict[str, Any]:
        r = self.rng.random()
        if r < 0.6:
            return envelope(citations=[{"documentId": f"doc-{self.rng.randint(1, 500)}", "title": self.text(2, 5)}])
        if r < 0.8:
            cov = {"availability": "assessed", "coverage": "partial", "reason": "insufficient_evidence"}
            return envelope(answerCoverage=cov, citations=[])
        if r < 0.9:
            return envelope(author="human", ownership={"state": "human_owned", "suppressed": False})
        return envelope(
            answerCoverage={"availability": "not_recorded"},
            routine={"toolName": "book_table", "name": "Book a table", "status": "waiting_for_input"},
        )

    def state(
        self,
        method: str,
        path: str,
        body: bytes,
        response: bytes | None,
        content_type: str = "application/json",
        status: int = 200,
        headers: list[tuple[bytes, bytes]] | None = None,
        response_headers: list[tuple[bytes, bytes]] | None = None,
        agent: tuple[str, int, str] | None = None,
    ) -> dict[str, Any]:
        s = copy.deepcopy(self.template)
        host, port, scheme = agent or self.rng.choice(_AGENTS)
        self.t += self.rng.uniform(0.001, 0.05)
        t0 = self.t
        s["id"] = self.uid()
        s["timestamp_created"] = t0
        req, resp = s["request"], s["response"]
        req.update(method=method.encode(), path=path.encode(), host=host, port=port, scheme=scheme.encode())
        req.update(content=body, timestamp_start=t0, timestamp_end=t0 + 0.001)
        req["headers"] = (
            (b"host", host.encode()),
            (b"user-agent", b"a2a-python/1.0 httpx/0.28"),
            (b"content-type", b"application/json"),
            (b"a2a-version", b"1.0"),
            (b"a2a-extensions", EXT.encode()),
            (b"content-length", str(len(body)).encode()),
            *(headers or []),
        )
        for conn in (s["client_conn"], s["server_conn"]):
            conn["id"] = self.uid()
            conn["timestamp_start"] = t0 - 1
        s["client_conn"]["peername"] = (f"10.0.{self.rng.randint(0, 9)}.{self.rng.randint(1, 250)}", 50_000)
        s["server_conn"]["address"] = (host, port)
        s["server_conn"]["peername"] = (f"192.168.1.{port % 200}", port)
        # the proxy's end, and no SNI in plain HTTP (tflow's placeholders: "address")
        s["server_conn"].update(sockname=("10.0.0.2", 40_000 + port % 1000), sni=None)
        if scheme == "https":
            s["server_conn"].update(tls=True, sni=host, alpn=b"http/1.1", certificate_list=[self.cert])
            s["server_conn"]["cipher"] = "TLS_AES_256_GCM_SHA384"
            s["client_conn"].update(tls=True, sni=host, cipher="TLS_AES_256_GCM_SHA384")
        if response is None:
            s["response"] = None
            s["error"] = {"msg": "Connection killed.", "timestamp": t0 + 0.5}
            return s
        latency = self.rng.uniform(0.05, 2.0)
        resp.update(status_code=status, reason=b"OK" if status < 400 else b"Error", content=response)
        resp.update(timestamp_start=t0 + latency, timestamp_end=t0 + latency + self.rng.uniform(0.001, 0.5))
        resp["headers"] = (
            (b"date", b"Mon, 30 Nov 2026 10:00:00 GMT"),
            (b"server", b"uvicorn"),
            (b"content-type", content_type.encode()),
            (b"content-length", str(len(response)).encode()),
            *(response_headers or []),
        )
        return s

    def unary(self, v03: bool = False, gz: bool = False) -> dict[str, Any]:
        ctx = self.uid()
        text = self.text(5, 30)
        rid = self.rng.randint(1, 10**6)
        user = user_message(self.uid(), text, v03=v03, contextId=ctx)
        method = "message/send" if v03 else "SendMessage"
        body = jsonrpc_request(method, {"message": user, "configuration": {}}, rid=rid)
        reply = agent_message(self.uid(), self.text(20, 120), env=self.env(), v03=v03, contextId=ctx)
        if self.rng.random() < 0.3:
            task = {"id": self.uid(), "contextId": ctx, "status": {"state": "TASK_STATE_COMPLETED", "message": reply}}
            task["history"] = [user]
            result: dict[str, Any] = {"task": task}
        else:
            result = {"message": reply}
        if v03:
            result = reply if "message" in result else {**result["task"], "kind": "task"}
        response = jsonrpc_result(result, rid=rid)
        extra: list[tuple[bytes, bytes]] = [(b"a2a-extensions", EXT.encode())]
        if gz:
            response = gzip.compress(response, mtime=0)
            extra.append((b"content-encoding", b"gzip"))
        return self.state("POST", "/a2a/jsonrpc", body, response, response_headers=extra)

    def rest(self) -> dict[str, Any]:
        ctx = self.uid()
        user = user_message(self.uid(), self.text(5, 20), contextId=ctx)
        body = json.dumps({"message": user}).encode()
        reply = agent_message(self.uid(), self.text(20, 80), env=self.env(), contextId=ctx)
        return self.state("POST", "/v1/message:send", body, json.dumps({"message": reply}).encode())

    def stream(self) -> dict[str, Any]:
        ctx, task, rid = self.uid(), self.uid(), self.rng.randint(1, 10**6)
        user = user_message(self.uid(), self.text(5, 20), contextId=ctx)
        body = jsonrpc_request("SendStreamingMessage", {"message": user}, rid=rid)
        n = self.rng.randint(3, 10)
        events = []
        for _ in range(n - 1):
            ev = status_event(self.rng.choice(_STATES), agent_message(self.uid(), self.text(3, 15), env=None), rid)
            ev["result"]["statusUpdate"].update(taskId=task, contextId=ctx)
            events.append(ev)
        final = agent_message(self.uid(), self.text(20, 60), env=self.env(), contextId=ctx)
        last = status_event("TASK_STATE_COMPLETED", final, rid)
        last["result"]["statusUpdate"].update(taskId=task, contextId=ctx)
        events.append(last)
        return self.state("POST", "/a2a/jsonrpc", body, sse_body(*events), content_type="text/event-stream")

    def poll(self) -> dict[str, Any]:
        ctx, tid, rid = self.uid(), self.uid(), self.rng.randint(1, 10**6)
        body = jsonrpc_request("GetTask", {"id": tid, "historyLength": 10}, rid=rid)
        history = [user_message(self.uid(), self.text(5, 20), contextId=ctx) for _ in range(self.rng.randint(1, 3))]
        status = {"state": self.rng.choice(["TASK_STATE_WORKING", "TASK_STATE_COMPLETED"])}
        if status["state"] == "TASK_STATE_COMPLETED":
            status["message"] = agent_message(self.uid(), self.text(20, 80), env=self.env(), contextId=ctx)
        task = {"id": tid, "contextId": ctx, "status": status, "history": history}
        return self.state("POST", "/a2a/jsonrpc", body, jsonrpc_result({"task": task}, rid=rid))

    def error(self) -> dict[str, Any]:
        rid = self.rng.randint(1, 10**6)
        body = jsonrpc_request("SendMessage", {"message": user_message(self.uid(), self.text(3, 10))}, rid=rid)
        err = {"code": -32001, "message": "Task not found", "data": [{"reason": "TASK_NOT_FOUND"}]}
        return self.state(
            "POST", "/a2a/jsonrpc", body, json.dumps({"jsonrpc": "2.0", "id": rid, "error": err}).encode()
        )

    def card(self) -> dict[str, Any]:
        host, port, scheme = agent = self.rng.choice(_AGENTS)
        card = {
            "name": host.split(".")[0].title(),
            "description": self.text(10, 30),
            "version": "1.2.0",
            "supportedInterfaces": [{"url": f"{scheme}://{host}:{port}/a2a/jsonrpc", "protocolBinding": "JSONRPC"}],
            "capabilities": {"streaming": True, "extensions": [{"uri": EXT, "required": False}]},
            "skills": [
                {"id": f"skill-{i}", "name": self.text(1, 3), "description": self.text(5, 15)} for i in range(4)
            ],
        }
        return self.state("GET", "/.well-known/agent-card.json", b"", json.dumps(card).encode(), agent=agent)

    def other(self) -> dict[str, Any]:
        if self.rng.random() < 0.5:
            page = b"<!doctype html><html><body>" + self.text(100, 300).encode() + b"</body></html>"
            return self.state(
                "GET", "/index.html", b"", page, content_type="text/html", agent=("www.test", 443, "https")
            )
        return self.state("GET", "/api/status", b"", b'{"ok": true}', agent=("metrics.test", 443, "https"))

    def dropped(self) -> dict[str, Any]:
        body = jsonrpc_request("SendMessage", {"message": user_message(self.uid(), self.text(3, 10))})
        return self.state("POST", "/a2a/jsonrpc", body, None)

    def flow(self) -> dict[str, Any]:
        r = self.rng.random()
        for share, make in (
            (0.30, self.unary),
            (0.20, self.stream),
            (0.10, self.poll),
            (0.05, self.error),
            (0.10, lambda: self.unary(gz=True)),
            (0.08, lambda: self.unary(v03=True)),
            (0.08, self.rest),
            (0.04, self.card),
            (0.04, self.other),
        ):
            if r < share:
                return make()
            r -= share
        return self.dropped()


def capture_states(n: int, seed: int = 21) -> Iterator[dict[str, Any]]:
    gen = _Gen(seed)
    for _ in range(n):
        yield gen.flow()


def write_capture(path: Path, n: int, seed: int = 21) -> Path:
    """`n` flows into `path` as `mitmdump -w` writes them."""
    with open(path, "wb") as f:
        for state in capture_states(n, seed):
            f.write(tnetstring.dumps(state))
    return path
