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
