"""A real OTLP/HTTP receiver on loopback: decodes what the exporter sends with opentelemetry-proto.

`mode`: `ok` answers 200, `fail` answers 500, `hang` reads the request and never answers (until stopped).
"""

from __future__ import annotations

import gzip
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest


class Collector:
    def __init__(self, mode: str = "ok") -> None:
        self.mode = mode
        self.bodies: list[bytes] = []  # every byte received: headers and (decoded) bodies
        self.requests: list[ExportTraceServiceRequest] = []
        self.paths: list[str] = []
        self.released = threading.Event()
        self.arrived = threading.Condition()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                if self.headers.get("content-encoding") == "gzip":
                    body = gzip.decompress(body)
                with outer.arrived:
                    outer.bodies.append(bytes(str(self.headers), "latin-1") + body)
                    outer.paths.append(self.path)
                    req = ExportTraceServiceRequest()
                    req.ParseFromString(body)
                    outer.requests.append(req)
                    outer.arrived.notify_all()
                if outer.mode == "hang":
                    outer.released.wait(120)
                    return
                status = 500 if outer.mode == "fail" else 200
                self.send_response(status)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> Collector:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()

    def spans(self) -> list[tuple[Any, Any]]:
        """(resource, span) for every span received."""
        out = []
        for req in self.requests:
            for rs in req.resource_spans:
                for ss in rs.scope_spans:
                    out.extend((rs.resource, span) for span in ss.spans)
        return out

    def wait_for_spans(self, n: int, timeout: float = 30) -> None:
        with self.arrived:
            if not self.arrived.wait_for(lambda: len(self.spans()) >= n, timeout):
                raise TimeoutError(f"{len(self.spans())} spans received, expected {n}")


def attrs(items: Any) -> dict[str, Any]:
    """OTLP KeyValues -> a plain dict."""
    out = {}
    for kv in items:
        v = kv.value
        kind = v.WhichOneof("value")
        out[kv.key] = getattr(v, kind) if kind else None
    return out
