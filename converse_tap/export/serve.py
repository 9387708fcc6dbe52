"""The HTTP server of /metrics: prometheus-client's WSGI app, one thread per connection, at most MAX_CONNECTIONS
connections at once, each given up after CONNECTION_TIMEOUT seconds without progress or CONNECTION_DEADLINE
seconds in all (a client that sends a byte now and then makes progress forever).

prometheus-client's own server (`start_http_server`) starts a thread for every connection and never gives one
up: connections that send nothing, or ask and never read, each held a thread of the recording worker for good,
and a few thousand of them took the threads (and, in a container, the process ids) the worker and the proxy need.
A connection past the limit is closed at once and counted (`converse_tap_metrics_connections_refused_total`);
a scraper gets its answer again as soon as the held connections time out.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

MAX_CONNECTIONS = 64
CONNECTION_TIMEOUT = 30.0  # seconds a connection may go without sending or reading
CONNECTION_DEADLINE = 60.0  # seconds a connection may last (a scrape takes milliseconds)


class _Handler(WSGIRequestHandler):
    timeout = CONNECTION_TIMEOUT  # set on the socket: a read or a write that waits this long ends the connection

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def get_stderr(self) -> Any:
        return _Quiet()  # where wsgiref prints the traceback of a connection that timed out or went away


class _Quiet:
    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    request_queue_size = 128  # the listen backlog (socketserver's 5 made connections wait a second past it)
    max_connections = MAX_CONNECTIONS
    deadline = CONNECTION_DEADLINE
    refused: Callable[[], None] = staticmethod(lambda: None)

    def server_activate(self) -> None:
        self._open: dict[Any, float] = {}  # connection -> when it was accepted
        self._lock = threading.Lock()
        super().server_activate()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._lock:
            full = len(self._open) >= self.max_connections
            if not full:
                self._open[request] = time.monotonic()
        if full:
            self.shutdown_request(request)
            self.refused()
            return
        try:
            super().process_request(request, client_address)
        except BaseException:  # no thread for it: its slot is free again
            self._done(request)
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._done(request)

    def _done(self, request: Any) -> None:
        with self._lock:
            self._open.pop(request, None)

    def service_actions(self) -> None:
        """(serve_forever's loop, every half second) End the connections past their deadline: their threads'
        reads and writes return at once."""
        now = time.monotonic()
        with self._lock:
            late = [conn for conn, since in self._open.items() if now - since > self.deadline]
        for conn in late:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A connection that timed out or went away: nothing to print (socketserver prints a traceback)."""


def serve(app: Callable[..., Any], host: str, port: int, refused: Callable[[], None]) -> tuple[Any, int]:
    """Start serving `app` on its own thread; (the server, for `shutdown`, and the port it listens on)."""
    family, _, _, _, sockaddr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]

    class Server(_Server):
        address_family = family

    Server.refused = staticmethod(refused)
    server = make_server(str(sockaddr[0]), port, app, Server, handler_class=_Handler)
    threading.Thread(target=server.serve_forever, name="converse-tap-metrics", daemon=True).start()
    return server, int(server.server_address[1])
