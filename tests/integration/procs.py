"""Real processes for integration tests: started on port 0, ready when they say where they listen."""

from __future__ import annotations

import asyncio
import gzip
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from converse_tap.addon import mitmdump_script
from tests.factories import status_event

MITMDUMP = Path(sys.executable).with_name("mitmdump")
LISTENING = re.compile(r"(?:proxy|reverse proxy to \S+)(?: \(upstream mode\))? listening at (?:\*|[\d.]+):(\d+)")


class Proc:
    """A subprocess whose output is collected by a thread; `wait_for` blocks until a line matches."""

    def __init__(self, args: list[str], cwd: Path | None = None) -> None:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.popen = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="backslashreplace",  # a log line may carry bytes from the wire
            cwd=cwd,
            env=env,
        )
        self.lines: list[str] = []
        self._cond = threading.Condition()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self.popen.stdout is not None
        for line in self.popen.stdout:
            with self._cond:
                self.lines.append(line.rstrip("\n"))
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def wait_for(self, pattern: re.Pattern[str], timeout: float = 60) -> re.Match[str]:
        with self._cond:
            seen = 0
            while True:
                for line in self.lines[seen:]:
                    if m := pattern.search(line):
                        return m
                seen = len(self.lines)
                if self.popen.poll() is not None and not self._thread.is_alive():
                    raise RuntimeError(f"process exited ({self.popen.returncode}):\n" + "\n".join(self.lines))
                if not self._cond.wait(timeout):
                    raise TimeoutError(f"no line matching {pattern.pattern!r}:\n" + "\n".join(self.lines))

    def stop(self, sig: int = signal.SIGINT, timeout: float = 60) -> int:
        if self.popen.poll() is None:
            self.popen.send_signal(sig)
        try:
            rc = self.popen.wait(timeout)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            rc = self.popen.wait()
        self._thread.join(5)
        if self.popen.stdout is not None:
            self.popen.stdout.close()
        return rc

    @property
    def output(self) -> str:
        return "\n".join(self.lines)


@contextmanager
def hangup(disposition: Any = signal.SIG_DFL) -> Iterator[None]:
    """SIGHUP's disposition for the processes started meanwhile, which inherit an ignored signal: a test run under
    `nohup` ignores it, and a hangup would then stop none of them."""
    old = signal.signal(signal.SIGHUP, disposition)
    try:
        yield
    finally:
        signal.signal(signal.SIGHUP, old)


@contextmanager
def mitmdump(out: Path | None, *extra: str) -> Iterator[tuple[str, Proc]]:
    """mitmdump on a free port, with the addon writing to `out` (None: a bare mitmdump)."""
    args = [
        str(MITMDUMP),
        "--listen-host",
        "127.0.0.1",
        "--listen-port",
        "0",
        "--set",
        "termlog_verbosity=info",
    ]
    if out is not None:
        args += ["-s", mitmdump_script.__file__, "--set", f"converse_tap_dir={out}"]
        if not any(str(e).startswith("converse_tap_flush_interval=") for e in extra):
            args += ["--set", "converse_tap_flush_interval=0.2"]
    proc = Proc([*args, *extra])
    try:
        port = proc.wait_for(LISTENING).group(1)
        yield f"http://127.0.0.1:{port}", proc
    finally:
        proc.stop()


@contextmanager
def demo_agent() -> Iterator[str]:
    """The demo agents (a2a-sdk, uvicorn) in their own process; yields the base URL."""
    proc = Proc([sys.executable, "-m", "converse_tap", "demo", "agent", "--port", "0"])
    try:
        yield proc.wait_for(re.compile(r"(http://127\.0\.0\.1:\d+)/agents/")).group(1)
    finally:
        proc.stop(signal.SIGTERM)


# -- a canned upstream: fixed bytes, so "with" and "without the proxy" can be compared byte for byte -----------
REPLY = {
    "jsonrpc": "2.0",
    "id": "r-1",
    "result": {
        "message": {
            "messageId": "m-1",
            "contextId": "c-1",
            "role": "ROLE_AGENT",
            "parts": [{"text": "Open 12-15."}],
            "extensions": ["https://docs.radioso.ai/reference/a2a-converse-extension/v1"],
            "metadata": {
                "https://docs.radioso.ai/reference/a2a-converse-extension/v1": {
                    "author": "agent",
                    "answerCoverage": {"availability": "assessed", "coverage": "answered"},
                }
            },
        }
    },
}
REPLY_BYTES = json.dumps(REPLY).encode()
SSE_EVENTS = [
    status_event("TASK_STATE_WORKING"),
    status_event("TASK_STATE_COMPLETED", REPLY["result"]["message"]),
]
SSE_BYTES = b"".join(b"data: " + json.dumps(e).encode() + b"\r\n\r\n" for e in SSE_EVENTS)


class Canned:
    """uvicorn in a thread with endpoints returning fixed bodies; `/sse-held` waits for `/release`."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.base = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(self._app(), log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=lambda: asyncio.run(self.server.serve(sockets=[self.sock])), daemon=True)

    def _app(self) -> Starlette:
        async def unary(request: Request) -> Response:
            return Response(REPLY_BYTES, media_type="application/json")

        async def gz(request: Request) -> Response:
            return Response(
                gzip.compress(REPLY_BYTES, mtime=0),  # the header holds a time: same bytes every call
                media_type="application/json",
                headers={"content-encoding": "gzip"},
            )

        async def br(request: Request) -> Response:
            import brotli  # a dependency of mitmproxy

            return Response(
                brotli.compress(REPLY_BYTES), media_type="application/json", headers={"content-encoding": "br"}
            )

        async def rpc_error(request: Request) -> Response:
            return Response(
                b'{"jsonrpc":"2.0","id":"r-1","error":{"code":-32001,"message":"Task not found"}}',
                media_type="application/json",
            )

        async def rest_404(request: Request) -> Response:
            return Response(
                b'{"error":{"code":404,"status":"NOT_FOUND","message":"Task not found"}}',
                status_code=404,
                media_type="application/json",
            )

        async def html(request: Request) -> Response:
            return Response(b"<html><body>not an agent</body></html>", media_type="text/html")

        async def sse_split(request: Request) -> StreamingResponse:
            async def chunks() -> Any:
                for i in range(0, len(SSE_BYTES), 13):  # boundaries that cut lines and events
                    yield SSE_BYTES[i : i + 13]

            return StreamingResponse(chunks(), media_type="text/event-stream")

        async def sse_held(request: Request) -> StreamingResponse:
            async def chunks() -> Any:
                first, rest = SSE_BYTES.split(b"\r\n\r\n", 1)
                yield first + b"\r\n\r\n"
                while not self.release.is_set():
                    await asyncio.sleep(0.01)
                yield rest

            return StreamingResponse(chunks(), media_type="text/event-stream")

        async def release(request: Request) -> Response:
            self.release.set()
            return Response(b"ok")

        return Starlette(
            routes=[
                Route("/a2a", unary, methods=["POST"]),
                Route("/gz/a2a", gz, methods=["POST"]),
                Route("/br/a2a", br, methods=["POST"]),
                Route("/err/a2a", rpc_error, methods=["POST"]),
                Route("/rest/tasks/{id}", rest_404),
                Route("/index.html", html),
                Route("/sse/a2a", sse_split, methods=["POST"]),
                Route("/held/a2a", sse_held, methods=["POST"]),
                Route("/release", release),
            ]
        )

    def __enter__(self) -> Canned:
        self.thread.start()
        while not self.server.started:
            self.release.wait(0.01)
        return self

    def __exit__(self, *exc: Any) -> None:
        self.release.set()
        self.server.should_exit = True
        self.thread.join(10)
        self.sock.close()


def tls_listener(tmp: Path, name: str = "agent") -> tuple[str, Any]:
    """A loopback socket for hypercorn over TLS with a self-signed certificate (HTTP/2 by ALPN): its `https://`
    base URL and the hypercorn `Config` bound to it (hypercorn owns, and closes, the socket; connections wait in
    the backlog until it accepts them). The key and certificate are written to `tmp` as `<name>-key.pem`,
    `<name>-cert.pem`."""
    from hypercorn.config import Config

    from converse_tap.demo.grpc_agent import self_signed

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    base = f"https://127.0.0.1:{sock.getsockname()[1]}"
    key, cert = self_signed()
    (tmp / f"{name}-key.pem").write_bytes(key)
    (tmp / f"{name}-cert.pem").write_bytes(cert)
    config = Config()
    config.bind = [f"fd://{sock.detach()}"]
    config.keyfile, config.certfile = str(tmp / f"{name}-key.pem"), str(tmp / f"{name}-cert.pem")
    return base, config
