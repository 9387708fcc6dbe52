"""What the fuzzers and hostile-input reviews found, one test each, on the extractor's real entry."""

from __future__ import annotations

import json

from converse_tap.a2a.card import card_fields
from converse_tap.a2a.envelope import find_envelope, flatten_envelope
from converse_tap.a2a.grpc_frames import GrpcFrameParser
from tests.factories import EXT

HUGE = "x" * 1_000_000


def test_wire_values_quoted_in_anomalies_are_clipped() -> None:
    """An envelope enum, a metadata key, a routine status, a card tool name and a grpc-encoding are quoted in
    anomalies: a megabyte value made a megabyte anomaly (in every row of a stream that repeated it)."""
    notes: list[str] = []
    flatten_envelope({"author": HUGE, "routine": {"name": "r", "status": HUGE, "pendingInput": [{"key": "k"}]}}, notes)
    find_envelope(
        {EXT.upper() + HUGE: {}, "https://docs.radioso.ai/reference/a2a-converse-extension/" + HUGE: 1}, [], notes
    )
    card = {
        "skills": [],
        "capabilities": {"extensions": [{"uri": EXT, "params": {"tools": [{"toolName": HUGE, "inputSchema": 5}]}}]},
    }
    card_fields(card, notes)
    parser = GrpcFrameParser(encoding="z" * 10_000)
    frames = parser.feed(b"\x01\x00\x00\x00\x02ab")
    notes.append(frames[0].error or "")
    assert notes and all(len(n) < 200 for n in notes), [len(n) for n in notes]
    assert any(n.startswith("unknown_enum:author=xxx") and n.endswith("…+999900") for n in notes)


def test_clip_keeps_short_values_whole() -> None:
    from converse_tap.a2a.envelope import clip

    assert clip("agent") == "agent"
    assert clip(json.dumps([1, 2])) == "[1, 2]"
    assert clip(12) == "12"


def test_a_url_of_undecodable_bytes_costs_the_worker_little() -> None:
    """64 KiB of bytes that are not UTF-8 in a request path (mitmproxy hands them on as lone surrogates): each
    was percent-encoded by a Python callback, in each of the URL's four parses, 1.5 s of the worker per
    exchange; one `str.translate` makes it 0.13 s. A hundred such exchanges in a child process, killed after
    40 s."""
    from tests.children import finishes_within

    code = (
        "from converse_tap.a2a.extract import extract\n"
        "from converse_tap.a2a.exchange import HttpExchange\n"
        "from converse_tap.a2a.headers import Headers\n"
        "from converse_tap.a2a.redact import TextPolicy\n"
        'body = b\'{"jsonrpc": "2.0", "method": "SendMessage", "params": {}}\'\n'
        "h = Headers([('content-type', 'application/json')])\n"
        "for i in range(100):\n"
        "    url = 'http://h/' + '\\udcff' * 65536 + str(i)\n"
        "    ext = extract(HttpExchange(str(i), 'POST', url, h, body), TextPolicy())\n"
        "    assert 'url_not_utf8' in ext.exchange['anomalies']\n"
        "print('done')\n"
    )
    finishes_within(code, 40, "100 exchanges with 64 KiB undecodable URLs")


def test_a_card_whose_extensions_are_not_a_list_is_recorded() -> None:
    """`capabilities.extensions: 5` raised TypeError (`for ext in exts or []`): the card row was lost, the
    exchange a failure row. Every field of the wrong type is now named on the card row."""
    notes: list[str] = []
    fields = card_fields(
        {
            "name": 7,
            "supportedInterfaces": [{"url": 5, "protocolBinding": "JSONRPC"}, "x"],
            "skills": [{"id": 3}],
            "capabilities": {"extensions": 5},
            "provider": "p",
        },
        notes,
    )
    assert fields["name"] is None and fields["interfaces"] == [
        {"url": None, "binding": "JSONRPC", "protocol_version": None}
    ]
    assert notes == [
        "wrong_type:card.name=int",
        "wrong_type:card.provider=str",
        "wrong_type:card.supportedInterfaces[0].url=int",
        "wrong_type:card.supportedInterfaces[1]=str",
        "wrong_type:card.skills[0].id",
        "wrong_type:card.capabilities.extensions=int",
    ]
