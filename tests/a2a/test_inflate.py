"""Content-Encoding of whole bodies and of streams: every gzip member decoded, a body cut short kept as far as it
goes and said so, data after the end of a deflate stream refused — through the extractor's real entry."""

from __future__ import annotations

import gzip
import zlib

import brotli
import pytest

from converse_tap.a2a.extract import extract
from converse_tap.a2a.inflate import Inflater, Truncated, inflate
from converse_tap.a2a.redact import TextPolicy
from converse_tap.addon.flows import exchange_from_flow
from tests.factories import a2a_flow, agent_message, sse_body, status_event


def _events(n: int) -> list[bytes]:
    return [sse_body(status_event("TASK_STATE_WORKING", agent_message(f"m{i}", text=f"step {i}"))) for i in range(n)]


def test_every_member_of_a_gzip_body_is_decoded() -> None:
    """gzip allows members one after another (a server may compress each flush as its own): the members after
    the first were dropped without a word, and with them every event they carried."""
    events = _events(4)
    body = b"".join(gzip.compress(e) for e in events)
    assert inflate(body, "gzip", 1 << 20) == b"".join(events)
    live = Inflater("gzip", None)
    assert b"".join(live.feed(body[i : i + 7]) for i in range(0, len(body), 7)) == b"".join(events)
    flow = a2a_flow(
        body=b'{"jsonrpc": "2.0", "id": "r-1", "method": "SendStreamingMessage", "params": {}}',
        response=body,
        content_type="text/event-stream",
        response_headers={"content-encoding": "gzip"},
    )
    ext = extract(exchange_from_flow(flow), TextPolicy())
    assert ext is not None and ext.exchange["sse_events"] == 4
    assert [m["message_id"] for m in ext.messages if m["direction"] == "response"] == ["m0", "m1", "m2", "m3"]


@pytest.mark.parametrize(
    ("coding", "compress"),
    [("gzip", gzip.compress), ("deflate", zlib.compress), ("br", brotli.compress)],
)
def test_a_body_cut_short_is_kept_as_far_as_it_goes_and_said(coding: str, compress) -> None:
    """A stream the client left is captured as far as it went: its compressed body ends inside the stream. It was
    decoded as if whole, silently; now the events it holds are kept and the exchange says the body was cut."""
    events = _events(40)
    whole = compress(b"".join(events))
    cut = whole[: len(whole) - 20]
    with pytest.raises(Truncated) as caught:
        inflate(cut, coding, 1 << 20)
    assert b"".join(events).startswith(caught.value.partial) and caught.value.partial
    flow = a2a_flow(
        body=b'{"jsonrpc": "2.0", "id": "r-1", "method": "SendStreamingMessage", "params": {}}',
        response=cut,
        content_type="text/event-stream",
        response_headers={"content-encoding": coding},
    )
    ext = extract(exchange_from_flow(flow), TextPolicy())
    assert ext is not None
    assert f"response_content_encoding_cut:{coding}" in ext.exchange["anomalies"]
    assert 0 < ext.exchange["sse_events"] <= 40


def test_data_after_the_end_of_a_deflate_stream_is_not_taken_as_the_body() -> None:
    body = zlib.compress(b'{"jsonrpc": "2.0"}') + b"JUNK"
    with pytest.raises(ValueError, match="after the end"):
        inflate(body, "deflate", 1 << 20)
    assert inflate(gzip.compress(b"x") + b"\x00" * 8, "gzip", 1 << 20) == b"x"  # zero padding: readers ignore it
    assert inflate(b"", "gzip", 1 << 20) == b""  # no body at all (a HEAD's, a 204's) is no stream cut short
