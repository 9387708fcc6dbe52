"""What a HAR entry says of the exchange on the wire that mitmproxy's importer makes up or loses: where the server
was (the importer put every address on port 80 for `http://` URLs and 443 for any other, whatever the URL's port,
kept the brackets Chrome writes around an IPv6 address, and gave every entry the client 127.0.0.1:0, which no HAR
states), and bodies the exporter did not keep (the importer read them as empty bodies)."""

from __future__ import annotations

import ipaddress
from typing import Any

from mitmproxy import http

from .a2a import urls
from .harfit import Fitted


def server_address(entry: dict[str, Any], url: Any) -> str | None:
    """The entry's `serverIPAddress` on the port the client connected to (Playwright's `_serverPort`, else the
    URL's, its scheme's default when it writes none), as the recorder writes an address (`host:port`,
    `[v6]:port`); None when the entry states no IP address (absent, empty, not text, a name) or no port."""
    stated = entry.get("serverIPAddress")
    if not isinstance(stated, str) or not isinstance(url, str):
        return None
    host = stated.strip()
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return None
    port = entry.get("_serverPort")
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        port = urls.host_port(url.strip())[1]
    if port is None:
        return None
    return f"[{ip}]:{port}" if ip.version == 6 else f"{ip}:{port}"


def wire_size(side: dict[str, Any]) -> int | None:
    """The bytes a body had on the wire, as the HAR states them: `bodySize`, else the decoded `content.size` less
    what compression saved (`content.compression`); None when it states neither (-1, absent, not a number)."""
    size = _count(side.get("bodySize"))
    if size is not None:
        return size
    content = side.get("content")
    if isinstance(content, dict):
        full, saved = _count(content.get("size")), _count(content.get("compression"))
        if full is not None and saved is not None and saved <= full:
            return full - saved
    return None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def unstored(flow: http.HTTPFlow, fit: Fitted) -> int | None:
    """The bodies the entry had but did not keep made unknown in `flow` (None, as mitmproxy leaves a streamed body
    it did not store), where the importer made them empty; the bytes the reply's body had on the wire, when the
    entry states them, for one not kept."""
    if not fit.request_stored:
        flow.request.raw_content = None
    if fit.response_stored or flow.response is None:
        return None
    flow.response.raw_content = None
    return wire_size(fit.entry["response"])
