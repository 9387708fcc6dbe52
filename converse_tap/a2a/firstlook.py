"""The proxy's first look at a request, on mitmproxy's event loop: could it be A2A? Cheap, bounded whatever the
request (a path of megabytes, a body of any size), and conservative: False only when `classify.classify`, which
the recording worker runs off the event loop, would surely say None."""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

from . import fastjson
from .classify import _METHOD_IN_PREFIX, MCP_SHARED_METHODS, PEEK, _has_a2a_headers, _may_hide_jsonrpc, mcps_params
from .constants import JSONRPC_V01_METHODS, JSONRPC_V03_METHODS, JSONRPC_V1_METHODS
from .headers import Headers
from .push import may_be_push
from .routes import PROBE, is_route


def maybe_a2a(method: str, path: str, headers: Headers | Any, body: bytes | None) -> bool:
    """A cheap first look, for the proxy's hot path: could this request be A2A? False only when `classify` would
    surely say None; True sends the exchange on to be classified for real. Reads the path, a few headers and at
    most the first SEARCH bytes of the raw body (searched, not parsed or decoded). A JSON body that could hide a
    call from that look (escaped keys, UTF-16, padding, a late `jsonrpc` key) is sent on too: servers parse
    it, so an attacker could otherwise talk to the agent unrecorded."""
    path = path.split("?", 1)[0]
    verb = method.upper()
    if verb == "POST" and body is None and _has_a2a_headers(headers):  # a body mitmproxy streams, never seen
        return True
    if verb == "POST" and ".A2AService/" in path:  # gRPC: /a2a.v1.A2AService/SendMessage (body is protobuf)
        return True
    if verb == "POST" and body:
        searched = min(len(body), SEARCH)  # (searched in place, at memory speed: no copy of the body is made)
        if body.find(b"jsonrpc", 0, searched) >= 0:
            if _has_a2a_headers(headers) or not _another_protocols_call(body, headers):
                return True
        elif (
            headers.get("content-encoding")  # a compressed body cannot be peeked at: decoded in the worker
            or _has_a2a_headers(headers)
            or _may_hide_jsonrpc(body, searched)
        ):
            return True
    if verb == "POST" and may_be_push(headers, body):  # an agent's push delivery to a client's webhook
        return True
    # (a path whose end decodes to a route is sent on: the whole path, which can be megabytes, is decoded in the
    # recording worker, never on the proxy's event loop)
    return is_route(path, verb) or ("%" in path and is_route(unquote(path[-PROBE:]), verb))


# bytes of a body searched for `jsonrpc` (and for escaped ASCII letters) on the event loop, about 0.85 µs per KiB
# here (bench_first_look: 172 µs for 200 KB), so that a JSON body of another API (a long prompt to a model)
# answered with SSE is left to mitmproxy rather than streamed by us; a larger body is sent on to the worker, as any
# body over 16 KiB was (pickled and piped on the event loop: about 110 µs for 200 KB, so about 1.6x less)
SEARCH = 256 * 1024


def _another_protocols_call(body: bytes, headers: Headers | Any) -> bool:
    """Whether a JSON-RPC body is surely a call of a method A2A does not have (MCP's `tools/call`, ...), which
    `classify` refuses without A2A headers: the whole body seen (at most PEEK bytes), `"method"` written once and
    no escape anywhere (a JSON parser could read another method than this look), its value not an A2A method; or
    MCP's own call under a name A2A v0.3 shares (`tasks/get|list|cancel`), which `classify` refuses as well: MCP's
    header and MCP's params (`classify._mcps_call`), read from the body parsed (only such a small body, and only
    when an MCP header is there). Such a flow keeps mitmproxy's own behaviour: no stream callable is given to its
    response (MCP's server answers with SSE, which we would stream and mitmproxy would then keep no body of)."""
    if len(body) > PEEK or body.find(b"\\") >= 0 or body.count(b'"method"') != 1:
        return False
    m = _METHOD_IN_PREFIX.search(body)  # (the method as classify reads it from a body's start)
    if m is None:
        return False
    name = m.group(1).decode("utf-8", "replace")
    if name in MCP_SHARED_METHODS:  # (MCP's params name `taskId`, or nothing but a cursor: A2A's, `id`)
        if (name == "tasks/list" or body.find(b'"taskId"') >= 0) and (
            headers.get("mcp-protocol-version") or headers.get("mcp-session-id")
        ):
            return _mcps_own(body)
        return False
    return name not in JSONRPC_V1_METHODS and name not in JSONRPC_V03_METHODS and name not in JSONRPC_V01_METHODS


def _mcps_own(body: bytes) -> bool:
    """Whether `classify` surely reads the body of a call with MCP's header and no A2A header (`maybe_a2a` checked
    that) as MCP's own call (`_mcps_call`): one JSON-RPC object, parsed as `classify` parses it (a batch, or a body
    it would read otherwise, is sent on)."""
    try:
        doc = fastjson.loads(body)
    except Exception:  # (any parser's refusal: the worker says why)
        return False
    return doc.__class__ is dict and doc.get("method") in MCP_SHARED_METHODS and mcps_params(doc.get("params"))
