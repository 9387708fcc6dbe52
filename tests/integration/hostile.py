"""A hostile upstream for tests: exact bytes on a raw socket, bodies and streams no well-behaved server sends."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

# path -> (status, headers, chunks); the handler gets the request body
Handler = Callable[[bytes], tuple[int, list[tuple[str, str]], Iterable[bytes]]]


class Hostile:
    """HTTP/1.1 on 127.0.0.1, one asyncio loop in a thread. Streams are sent without a length (the connection
    closes after them), each chunk written and drained before the next is produced."""

    def __init__(self, routes: dict[str, Handler]) -> None:
        self.routes = routes
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.base = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._ready = threading.Event()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)

        async def serve() -> None:
            self._server = await asyncio.start_server(self._handle, sock=self.sock)
            self._ready.set()

        self._loop.run_until_complete(serve())
        self._loop.run_forever()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                path = lines[0].split(" ")[1]
                if path.startswith("http"):  # absolute form
                    path = "/" + path.split("/", 3)[3]
                headers = dict(line.split(": ", 1) for line in lines[1:] if ": " in line)
                length = int({k.lower(): v for k, v in headers.items()}.get("content-length", "0"))
                body = await reader.readexactly(length) if length else b""
                handler = self.routes.get(path.split("?")[0])
                if handler is None:
                    writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                    await writer.drain()
                    continue
                status, hdrs, chunks = handler(body)
                sized = isinstance(chunks, bytes)
                out = [f"HTTP/1.1 {status} X"] + [f"{k}: {v}" for k, v in hdrs]
                out.append(f"content-length: {len(chunks)}" if sized else "connection: close")
                writer.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1"))
                if sized:
                    writer.write(chunks)  # type: ignore[arg-type]
                    await writer.drain()
                    continue
                for chunk in chunks:
                    writer.write(chunk)
                    await writer.drain()
                    await asyncio.sleep(0)
                break
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def __enter__(self) -> Hostile:
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: Any) -> None:
        async def shutdown() -> None:
            self._server.close()
            self._loop.stop()

        self._loop.call_soon_threadsafe(lambda: self._loop.create_task(shutdown()))
        self._thread.join(10)
        self._loop.close()
        self.sock.close()


def post(proxy: str, url: str, body: bytes, headers: dict[str, str], timeout: float = 120) -> tuple[int, bytes]:
    """POST through the proxy, reading the raw (still encoded) response body."""
    host, port = proxy.removeprefix("http://").split(":")
    conn = http.client.HTTPConnection(host, int(port), timeout=timeout)
    try:
        conn.request("POST", url, body=body, headers=headers)
        r = conn.getresponse()
        return r.status, r.read()
    finally:
        conn.close()


def raw_request(proxy: str, request: bytes, timeout: float = 30) -> bytes:
    """Exact request bytes to the proxy (e.g. a path that is not UTF-8); returns the raw response."""
    host, port = proxy.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(request)
        out = b""
        while b"\r\n\r\n" not in out or not _complete(out):
            data = s.recv(65536)
            if not data:
                break
            out += data
        return out


def _complete(response: bytes) -> bool:
    head, _, body = response.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False


def family(pid: int) -> list[int]:
    """The process and all its descendants."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        with contextlib.suppress(OSError):
            todo += [int(c) for c in Path(f"/proc/{p}/task/{p}/children").read_text().split()]
    return out


def cpu_seconds(pids: Iterable[int]) -> float:
    import os

    total = 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {key}")


def chunks_of(data: bytes, size: int) -> Iterator[bytes]:
    for i in range(0, len(data), size):
        yield data[i : i + size]
