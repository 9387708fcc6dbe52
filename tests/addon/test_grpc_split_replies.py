"""The gRPC notes recorded live: the worker, fed a response split at every point, gives the rows the same
response gives read whole (`extract`), for the replies tests/a2a/test_grpc_hostile.py gives notes."""

from __future__ import annotations

from pathlib import Path

import pytest
from a2a.types import a2a_pb2 as pb

from tests.addon.test_worker_grpc_web import DONE, SEND, WEB, Recorder, frame, same_rows, trailers, whole

GRPC = "application/grpc"
REPLY = pb.SendMessageResponse(message=DONE.message).SerializeToString()
# (case, content type, method, body, HTTP/2 trailers, what the row says)
CASES = [
    ("no-message", GRPC, "SendMessage", b"", [("grpc-status", "0")], ["grpc_unary_messages:0"]),
    ("web-no-message", WEB, "SendMessage", trailers("grpc-status: 0"), None, ["grpc_unary_messages:0"]),
    ("empty", GRPC, "SendMessage", frame(b""), [("grpc-status", "0")], ["grpc_message_empty"]),
    ("empty-event", GRPC, "SendStreamingMessage", frame(b"") + frame(DONE.SerializeToString()), [], []),
    (
        "reply-then-error",
        GRPC,
        "SendMessage",
        frame(REPLY),
        [("grpc-status", "13"), ("grpc-message", "%FFboom")],
        ["grpc_message_not_utf8", "grpc_message_with_error_status"],
    ),
    (
        "web-raw-byte",
        WEB,
        "SendMessage",
        frame("grpc-status: 13\r\ngrpc-message: b\xe9d\r\n".encode("latin-1"), 0x80),
        None,
        ["grpc_message_not_utf8"],
    ),
    ("4gib", GRPC, "SendMessage", b"\x00\xff\xff\xff\xff" + REPLY, None, ["grpc_frame_truncated:507"]),
]


@pytest.mark.parametrize(("name", "ctype", "method", "body", "http", "says"), CASES, ids=[c[0] for c in CASES])
def test_the_hunts_notes_are_the_same_live_at_every_split(
    tmp_path: Path, monkeypatch, name: str, ctype: str, method: str, body: bytes, http: list | None, says: list[str]
) -> None:
    request = frame(SEND.SerializeToString())
    rec = Recorder(tmp_path, monkeypatch)
    for i in range(len(body) + 1):
        rec.live(f"s{i}", ctype, request, [body[:i], body[i:]], http, method=method)
    got = rec.close()
    expected = whole("s0", ctype, request, body, http, method=method)
    notes = expected.exchange["anomalies"]
    if name == "empty-event":  # a stream: the empty event said with its index, the reply after it read
        assert notes == ["grpc_message_empty:0", "grpc_status_missing"] and expected.exchange["replies"] == 1
    elif name == "4gib":
        assert notes[0] == says[0] and notes[1:] == ["grpc_message_too_large", "grpc_status_missing"]
    else:
        assert notes == says, notes
    assert len(got) == len(body) + 1
    for fid, ext in got.items():
        same_rows(ext, whole(fid, ctype, request, body, http, method=method))
