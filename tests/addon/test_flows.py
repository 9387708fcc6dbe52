"""exchange_from_state (ingest's fast path) must read a saved flow exactly as exchange_from_flow reads the flow."""

from __future__ import annotations

import gzip
import io as pyio
from typing import Any

import pytest
from mitmproxy import http, io
from mitmproxy.io import compat, tnetstring

from converse_tap.a2a.exchange import HttpExchange
from converse_tap.addon.flows import exchange_from_flow, exchange_from_state
from tests.factories import a2a_flow, agent_message, envelope, jsonrpc_result


def _saved_state(flow: http.HTTPFlow) -> dict[str, Any]:
    """The flow as `mitmdump -w` writes it and a reader loads it back: bytes, then a migrated state dict."""
    buf = pyio.BytesIO()
    io.FlowWriter(buf).add(flow)
    buf.seek(0)
    state = tnetstring.load(buf)
    assert isinstance(state, dict)
    return compat.migrate_flow(state)


def _same(a: HttpExchange, b: HttpExchange) -> None:
    for name in HttpExchange.__slots__:
        va, vb = getattr(a, name), getattr(b, name)
        if name.endswith("_headers"):  # Headers has no __eq__: compare name by name, in order
            va, vb = [(n, va.get_all(n)) for n in va.names()], [(n, vb.get_all(n)) for n in vb.names()]
        assert va == vb, name


def _reply() -> bytes:
    return jsonrpc_result({"message": agent_message("m1", env=envelope())})


def _gzip_flow() -> http.HTTPFlow:
    return a2a_flow(response=gzip.compress(_reply(), mtime=0), response_headers={"content-encoding": "gzip"})


def _error_flow() -> http.HTTPFlow:
    return a2a_flow(response=None, err=True)


def _ipv6_https_flow() -> http.HTTPFlow:
    flow = a2a_flow(response=_reply())
    flow.request.scheme, flow.request.port = "https", 8443
    flow.client_conn.peername = ("::1", 51000, 0, 0)
    return flow


def _connect_flow() -> http.HTTPFlow:
    return a2a_flow(method="CONNECT", path="", response=b"")


@pytest.mark.parametrize(
    ("make", "max_body"),
    [
        (lambda: a2a_flow(response=_reply()), 1 << 20),
        (_gzip_flow, 1 << 20),
        (lambda: a2a_flow(response=b"not gzip", response_headers={"content-encoding": "gzip"}), 1 << 20),
        (lambda: a2a_flow(response=_reply()), 16),  # both bodies too large: anomalies and a request prefix
        (_error_flow, 1 << 20),
        (_ipv6_https_flow, 1 << 20),
        (_connect_flow, 1 << 20),
        (lambda: a2a_flow(method="GET", path="/.well-known/agent-card.json?x=1", response=b"{}"), 1 << 20),
    ],
    ids=["json", "gzip", "bad-encoding", "oversize", "error", "ipv6-https", "connect", "card-query"],
)
def test_a_saved_flow_reads_as_the_live_flow(make: Any, max_body: int) -> None:
    flow = make()
    live = exchange_from_flow(flow, max_body=max_body, source="ingest")
    saved = exchange_from_state(_saved_state(flow), max_body=max_body, source="ingest")
    _same(live, saved)
    assert saved.url.startswith(("http", "agent.test")) and saved.method == flow.request.method
