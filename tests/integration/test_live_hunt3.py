"""A third hostile hunt on the live recording path, through a real mitmdump with the addon: odd framings, codings,
charsets, JSON and JSON-RPC shapes (one proxy for them all), then HTTP/2 streams reset from either side and a
proxy stopped while a stream runs on. Each case: the client gets the upstream's bytes, the proxy answers the next
call, and the exchange is recorded (with an anomaly when odd) or counted as lost in `capture_gaps`."""

from __future__ import annotations

import asyncio
import gzip
import json
import socket
import ssl
import zlib
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import brotli
import httpx
import pandas as pd
import pytest
from click.testing import CliRunner
from hypercorn.asyncio import serve
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from converse_tap.a2a.constants import CONVERSE_URI
from converse_tap.a2a.inflate import zstd
from converse_tap.cli import cli
from converse_tap.store.reader import load
from tests.factories import status_event
from tests.integration.grpc_procs import REPLY as GRPC_REPLY
from tests.integration.grpc_procs import REQUEST as GRPC_REQUEST
from tests.integration.grpc_procs import proxy_options
from tests.integration.hostile import Hostile, post
from tests.integration.procs import REPLY_BYTES, SSE_EVENTS, mitmdump, tls_listener
from tests.integration.test_proxy import BODY, HEADERS, STREAM_BODY

pytestmark = pytest.mark.integration

EVENTS = [json.dumps(e).encode() for e in SSE_EVENTS]  # working, then completed with the enveloped reply
JSON = [("content-type", "application/json")]
CHUNKED = ("transfer-encoding", "chunked")  # (the chunks are written as they are)
Route_ = Callable[[bytes], tuple[Any, list[tuple[str, str]], Any]]


def _sse(body: bytes | Iterator[bytes], *headers: tuple[str, str]) -> Route_:
    return lambda _: (200, [("content-type", "text/event-stream"), *headers], body)


def _json(body: bytes, status: int = 200, headers: list[tuple[str, str]] = JSON) -> Route_:
    return lambda _: (status, headers, body)


def _coded(body: bytes, coding: str) -> Route_:
    return _json(body, 200, [*JSON, ("content-encoding", coding)])


def _charset(body: bytes, charset: str) -> Route_:
    return _json(body, 200, [("content-type", f"application/json; charset={charset}")])


def _events(sep: bytes, field: bytes = b"data: ") -> bytes:
    return b"".join(field + e + sep for e in EVENTS)


def _bytewise(data: bytes) -> Route_:
    """An SSE stream written one byte per TCP write: every line and event cut everywhere."""
    return lambda _: (200, [("content-type", "text/event-stream")], iter([data[i : i + 1] for i in range(len(data))]))


def _chunked(body: bytes, trailers: bytes = b"") -> bytes:
    out = b"".join(b"%x\r\n%s\r\n" % (len(body[i : i + 50]), body[i : i + 50]) for i in range(0, len(body), 50))
    return out + b"0\r\n" + trailers + b"\r\n"


def _reply_text(text: str, charset: str) -> bytes:
    return REPLY_BYTES.replace(b"Open 12-15.", text.encode(charset))


def _with_id(doc: bytes, rid: bytes) -> bytes:
    return doc.replace(b'"id": "r-1"', b'"id": ' + rid, 1)


ARTIFACT = {
    "jsonrpc": "2.0",
    "id": "r-1",
    "result": {
        "artifactUpdate": {
            "taskId": "t",
            "contextId": "c",
            "artifact": {
                "artifactId": "a-1",
                "parts": [{"text": "menu"}],
                "metadata": json.loads(REPLY_BYTES)["result"]["message"]["metadata"],
            },
        }
    },
}
V03_EVENT = {  # a v0.3 `kind`-tagged status update in the same stream as a v1.0 one
    "jsonrpc": "2.0",
    "id": "r-1",
    "result": {
        "kind": "status-update",
        "taskId": "t",
        "contextId": "c",
        "final": False,
        "status": {
            "state": "working",
            "message": {
                "kind": "message",
                "messageId": "m-0",
                "role": "agent",
                "parts": [{"kind": "text", "text": "v03"}],
            },
        },
    },
}
CARD = {
    "name": 12,  # not a string
    "protocolVersion": "1.0",
    "supportedInterfaces": [
        {"url": "https://user:hunter2@agent.example/a2a", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
        {"url": 5, "protocolBinding": None},
    ],
    "skills": [{"id": i, "name": {"n": i}} for i in range(3000)],  # ids of the wrong type, more than are recorded
    "capabilities": {"extensions": [{"uri": CONVERSE_URI, "required": "yes"}]},
}
LATIN1_BODY = BODY.replace(b"When are you open?", "Wann öffnen Sie?".encode("latin-1"))

# path -> (route, request body); every reply compared with the upstream's own bytes
CASES: dict[str, tuple[Route_, bytes]] = {
    "/cr/a2a": (_sse(_events(b"\r\r")), STREAM_BODY),  # CR-only line ends
    "/bytewise/a2a": (_bytewise(_events(b"\r\n\r\n")), STREAM_BODY),
    "/bom/a2a": (_sse(b"\xef\xbb\xbf" + _events(b"\n\n")), STREAM_BODY),
    "/nospace/a2a": (_sse(_events(b"\n\n", b"data:")), STREAM_BODY),
    "/fields/a2a": (_sse(b"retry: 1000\nid: 7\n: hi\n\n" + _events(b"\nid: x\nevent: message\n\n")), STREAM_BODY),
    "/multiline/a2a": (
        _sse(b"".join(b"data: " + e.replace(b", ", b",\ndata: ") + b"\n\n" for e in EVENTS)),
        STREAM_BODY,
    ),
    "/heartbeats/a2a": (_sse(b": ping\n\n" * 5), STREAM_BODY),
    "/json-as-sse/a2a": (_sse(REPLY_BYTES), STREAM_BODY),
    "/chunked-sse/a2a": (
        lambda _: (200, [("content-type", "text/event-stream"), CHUNKED], iter([_chunked(_events(b"\n\n"))])),
        STREAM_BODY,
    ),
    "/sse-not-utf8/a2a": (_sse(_events(b"\n\n").replace(b"Open", b"\xd6ffnen")), STREAM_BODY),
    "/mixed/a2a": (_sse(b"data: " + json.dumps(V03_EVENT).encode() + b"\n\ndata: " + EVENTS[1] + b"\n\n"), STREAM_BODY),
    "/artifact/a2a": (_sse(b"data: " + json.dumps(ARTIFACT).encode() + b"\n\n"), STREAM_BODY),
    "/chunked/a2a": (lambda _: (200, [*JSON, CHUNKED], iter([_chunked(REPLY_BYTES)])), BODY),
    "/204/a2a": (_json(b"", 204), BODY),
    "/304/a2a": (_json(b"", 304), BODY),
    "/gzip-br/a2a": (_coded(brotli.compress(gzip.compress(REPLY_BYTES, mtime=0)), "gzip, br"), BODY),
    "/deflate/a2a": (_coded(zlib.compress(REPLY_BYTES), "deflate"), BODY),
    "/zstd/a2a": (_coded(zstd.compress(REPLY_BYTES), "zstd"), BODY),
    "/unknown-coding/a2a": (_coded(b"\x00\x01odd", "x-odd"), BODY),
    "/bad-gzip/a2a": (_coded(b"\x1f\x8b\x08odd", "gzip"), BODY),
    "/utf16/a2a": (_charset(REPLY_BYTES.decode().encode("utf-16"), "utf-16"), BODY),
    "/latin1/a2a": (_charset(_reply_text("Öffnen 12-15.", "latin-1"), "ISO-8859-1"), BODY),
    "/not-utf8/a2a": (_json(_reply_text("Öffnen 12-15.", "latin-1")), BODY),
    "/latin1-call/a2a": (_json(REPLY_BYTES), LATIN1_BODY),
    "/duplicate-keys/a2a": (
        _json(
            REPLY_BYTES[:-1]
            + b', "result": {"message": {"messageId": "m-2", "role": "ROLE_AGENT", "parts": [{"text": "dup"}]}}}'
        ),
        BODY,
    ),
    "/deep/a2a": (_json(b'{"jsonrpc":"2.0","id":"r-1","result":' + b"[" * 100_000 + b"]" * 100_000 + b"}"), BODY),
    "/huge-id/a2a": (_json(_with_id(REPLY_BYTES, b"9" * 5000)), BODY),
    "/surrogate/a2a": (_json(REPLY_BYTES.replace(b'"author": "agent"', b'"author": "\\udc00"')), BODY),
    "/batch/a2a": (_json(b"[" + REPLY_BYTES + b"]"), b"[" + BODY + b"]"),
    "/id-null/a2a": (_json(_with_id(REPLY_BYTES, b"null")), _with_id(BODY, b"null")),
    "/id-float/a2a": (_json(_with_id(REPLY_BYTES, b"1.5e300")), _with_id(BODY, b"1.5e300")),
    "/id-object/a2a": (_json(_with_id(REPLY_BYTES, b'{"a": [1]}')), _with_id(BODY, b'{"a": [1]}')),
    "/id-bool/a2a": (_json(_with_id(REPLY_BYTES, b"true")), _with_id(BODY, b"true")),
    "/.well-known/agent-card.json": (_json(json.dumps(CARD).encode()), b""),
}


# HTTP/1 trailers: mitmproxy's own reader refuses them (a 502 with or without the addon)
def _trailers(_: bytes) -> tuple[int, list[tuple[str, str]], Iterator[bytes]]:
    return 200, [*JSON, CHUNKED], iter([_chunked(REPLY_BYTES, b"x-sum: 1\r\n")])


def _call(proxy: str, url: str, body: bytes) -> tuple[int, bytes]:
    if url.endswith(".json"):
        with httpx.Client(proxy=None if proxy in url else proxy, timeout=30) as client:
            r = client.get(url)
            return r.status_code, r.content
    return post(proxy, url, body, HEADERS)


OPEN = "Open 12-15."
STREAM_OK = {"sse_events": 2, "task_state": "TASK_STATE_COMPLETED", "complete": True, "anomalies": [], "texts": [OPEN]}
REPLY_OK = {"replies": 1, "anomalies": [], "texts": [OPEN]}
# path -> what its exchange row holds (`texts`: its reply texts; `has`: anomalies among others)
EXPECT: dict[str, dict[str, Any]] = {
    **dict.fromkeys(
        ["/cr/a2a", "/bytewise/a2a", "/bom/a2a", "/nospace/a2a", "/fields/a2a", "/multiline/a2a", "/chunked-sse/a2a"],
        STREAM_OK,
    ),
    "/heartbeats/a2a": {"sse_events": 0, "anomalies": ["sse_no_events"], "texts": []},
    "/json-as-sse/a2a": {"sse_events": 0, "anomalies": ["sse_no_events"], "texts": []},
    "/sse-not-utf8/a2a": {**STREAM_OK, "anomalies": ["sse_event_not_utf8:1"], "texts": ["\ufffdffnen 12-15."]},
    "/mixed/a2a": {**STREAM_OK, "texts": ["v03", OPEN]},
    "/artifact/a2a": {"sse_events": 1, "texts": ["menu"], "has": []},
    **dict.fromkeys(["/chunked/a2a", "/gzip-br/a2a", "/deflate/a2a", "/zstd/a2a", "/utf16/a2a"], REPLY_OK),
    "/204/a2a": {"status_code": 204, "replies": 0, "texts": []},
    "/304/a2a": {"status_code": 304, "replies": 0, "texts": []},
    "/unknown-coding/a2a": {"anomalies": ["response_content_encoding_invalid:x-odd"], "texts": []},
    "/bad-gzip/a2a": {"anomalies": ["response_content_encoding_invalid:gzip"], "texts": []},
    "/latin1/a2a": {**REPLY_OK, "anomalies": ["response_not_utf8:iso8859-1"], "texts": ["Öffnen 12-15."]},
    "/not-utf8/a2a": {**REPLY_OK, "anomalies": ["response_not_utf8"], "texts": ["\ufffdffnen 12-15."]},
    "/latin1-call/a2a": {**REPLY_OK, "anomalies": ["request_not_utf8"], "asked": "Wann \ufffdffnen Sie?"},
    "/duplicate-keys/a2a": {"replies": 0, "texts": ["dup"], "has": ["converse_requested_no_envelope"]},
    "/deep/a2a": {"replies": 0, "anomalies": ["json_too_deep"], "texts": []},
    "/huge-id/a2a": {"replies": 1, "has": ["jsonrpc_id_mismatch"], "texts": [OPEN]},
    "/surrogate/a2a": {"replies": 1, "texts": [OPEN], "message_has": ["unstorable_value:author"]},
    "/batch/a2a": {"replies": 0, "has": ["jsonrpc_batch"], "texts": []},
    "/id-null/a2a": {**REPLY_OK, "jsonrpc_id": None},
    "/id-float/a2a": {**REPLY_OK, "jsonrpc_id": "1.5e+300"},
    "/id-object/a2a": {**REPLY_OK, "jsonrpc_id": '{"a":[1]}', "anomalies": ["wrong_type:id=dict"]},
    "/id-bool/a2a": {**REPLY_OK, "jsonrpc_id": "true", "anomalies": ["wrong_type:id=bool"]},
    "/.well-known/agent-card.json": {"method": "GetAgentCard", "anomalies": []},
}
ROWS = ("sse_events", "task_state", "complete", "status_code", "replies", "jsonrpc_id", "method")


def test_odd_payloads_pass_untouched_and_are_recorded(tmp_path: Path) -> None:
    """Each case through one proxy, then an ordinary call: relayed byte for byte, the proxy still answering, and
    the exchange recorded as EXPECT says. Among them the defects this hunt found: a reply or call with a byte that
    is not UTF-8 (one odd character, or a declared ISO-8859-1 charset) lost all its messages, an SSE event with one
    had it replaced without a word, and an id of a type JSON-RPC forbids was stored as Python wrote it (`True`)."""
    out = tmp_path / "data"
    routes = {
        **{path: route for path, (route, _) in CASES.items()},
        "/a2a": _json(REPLY_BYTES),
        "/trailers/a2a": _trailers,
    }
    with Hostile(routes) as up:
        direct = {path: _call(up.base, up.base + path, body) for path, (_, body) in CASES.items()}
        with mitmdump(out, "--set", "converse_tap_summary=off") as (proxy, proc):
            for path, (_, body) in CASES.items():
                assert _call(proxy, up.base + path, body) == direct[path], path
                assert post(proxy, up.base + "/a2a", BODY, HEADERS) == (200, REPLY_BYTES), f"after {path}"
            assert post(proxy, up.base + "/a2a", BODY, {**HEADERS, "expect": "100-continue"}) == (200, REPLY_BYTES)
            # HTTP/1 trailers: mitmproxy's own reader refuses them (a 502 with or without the addon)
            assert post(proxy, up.base + "/trailers/a2a", BODY, HEADERS)[0] == 502
            assert proc.stop() == 0
    assert "hook failed" not in proc.output, proc.output
    ex = load(out, "exchanges")
    ex["path"] = ex["url"].str.slice(len(up.base))
    assert sorted(ex["path"]) == sorted([*CASES, *["/a2a"] * (len(CASES) + 1), "/trailers/a2a"])
    assert load(out, "capture_gaps").empty
    msgs = load(out, "messages").merge(ex[["exchange_id", "path"]])
    rows = ex.set_index("path").drop(index="/a2a")
    failed = {path: _mismatch(rows.loc[path], msgs[msgs["path"] == path], want) for path, want in EXPECT.items()}
    assert not {p: f for p, f in failed.items() if f}
    cut = rows.loc["/trailers/a2a"]
    assert not cut["complete"] and "incomplete chunked read" in cut["error"]
    (card,) = load(out, "agent_cards").to_dict("records")
    assert {"wrong_type:card.name=int", "card_items_not_recorded:skills:3000"} <= set(card["anomalies"])
    assert pd.isna(card["name"]) and "hunter2" not in card["card_json"]


def _mismatch(row: Any, msgs: pd.DataFrame, want: dict[str, Any]) -> dict[str, Any]:
    """What of `want` the row does not hold: {field: (wanted, held)}."""
    anomalies = list(row["anomalies"])
    held: dict[str, Any] = {k: None if pd.isna(row[k]) else row[k] for k in ROWS if k in want}
    held["anomalies"] = anomalies
    replies = msgs[msgs["direction"] == "response"]
    held["texts"] = replies["text"].tolist()
    held["has"] = [a for a in want.get("has", []) if a in anomalies]
    held["message_has"] = [a for m in replies["anomalies"] for a in m if a in want.get("message_has", [])]
    held["asked"] = (msgs[msgs["direction"] == "request"]["text"].tolist() or [None])[0]
    return {k: (v, held[k]) for k, v in want.items() if held[k] != v}


# -- HTTP/2: many streams on one connection, reset from either side, and a proxy stopped mid-stream -----------
STREAM = b"".join(b"data: " + json.dumps(status_event("TASK_STATE_WORKING")).encode() + b"\n\n" for _ in range(4))
STREAM += b"data: " + EVENTS[1] + b"\n\n"


def _h2_app(forever: asyncio.Event, whole: asyncio.Event) -> Starlette:
    async def sse(request: Request) -> StreamingResponse:
        kind = request.url.path.split("/")[1]

        async def events() -> AsyncIterator[bytes]:
            for i, event in enumerate(STREAM.split(b"\n\n")[:-1]):
                if i and kind == "reset":
                    await whole.wait()  # (hypercorn then closes the connection: once the whole streams are in)
                    raise RuntimeError("the agent fails mid-reply")
                if i and kind == "forever":
                    forever.set()
                    await asyncio.Event().wait()  # never ends: the proxy is stopped under it
                yield event + b"\n\n"
                await asyncio.sleep(0.01 if kind == "sse" else 0.2)

        return StreamingResponse(events(), media_type="text/event-stream")

    async def unary(request: Request) -> Response:
        return Response(REPLY_BYTES, media_type="application/json")

    paths = ("/sse/a2a", "/cancel/a2a", "/reset/a2a", "/forever/a2a")
    app = Starlette(routes=[Route(p, sse, methods=["POST"]) for p in paths] + [Route("/a2a", unary, methods=["POST"])])

    async def asgi(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == GRPC_PATH:
            await _grpc(scope, receive, send)
        else:
            await app(scope, receive, send)

    return asgi  # type: ignore[return-value]


def _frame(payload: bytes, flag: int = 0, length: int | None = None) -> bytes:
    return bytes([flag]) + (len(payload) if length is None else length).to_bytes(4, "big") + payload


GRPC_PATH = "/lf.a2a.v1.A2AService/SendMessage"
GRPC_HEADERS = {"content-type": "application/grpc", "te": "trailers", "a2a-extensions": CONVERSE_URI}
# x-case -> (the reply's DATA, as written; its extra headers)
GRPC_CASES: dict[str, tuple[list[bytes], list[tuple[bytes, bytes]]]] = {
    "bytewise": ([bytes([b]) for b in _frame(GRPC_REPLY)], []),  # one byte per DATA frame
    "flag-without-encoding": ([_frame(GRPC_REPLY, 1)], []),
    "unknown-encoding": ([_frame(GRPC_REPLY, 1)], [(b"grpc-encoding", b"x-odd")]),
    "bad-gzip": ([_frame(b"not gzip", 1)], [(b"grpc-encoding", b"gzip")]),
    "reserved-flag": ([_frame(GRPC_REPLY, 0x40)], []),
    "length-past-end": ([_frame(GRPC_REPLY[:10], length=0xFFFFFFFF)], []),
    "trailing-byte": ([_frame(GRPC_REPLY) + b"\x00"], []),
}

# what each case's row says (anomaly names)
GRPC_NOTED = {
    "bytewise": [],
    "flag-without-encoding": ["compressed_without_grpc_encoding"],
    "unknown-encoding": ["grpc_encoding_invalid"],
    "bad-gzip": ["inflate_failed"],
    "reserved-flag": ["grpc_frame_malformed"],
    "length-past-end": ["grpc_frame_truncated", "grpc_message_too_large"],
    "trailing-byte": ["grpc_frame_truncated"],
}


async def _grpc(scope: dict[str, Any], receive: Any, send: Any) -> None:
    while (await receive()).get("more_body"):
        pass
    case = dict(scope["headers"])[b"x-case"].decode()
    chunks, headers = GRPC_CASES[case]
    start = {"type": "http.response.start", "status": 200, "trailers": True}
    await send({**start, "headers": [(b"content-type", b"application/grpc"), *headers]})
    for chunk in chunks:
        await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await send({"type": "http.response.body", "body": b"", "more_body": False})
    await send({"type": "http.response.trailers", "headers": [(b"grpc-status", b"0")], "more_trailers": False})


Call = tuple[str, dict[str, str], bytes, bool]  # path, headers, body, reset once a first SSE event is in


def _h2_cancels(proxy: str, base: str, ca: Path, n: int) -> list[bytes]:
    """`n` streams on one HTTP/2 connection, each reset by the client (RST_STREAM, CANCEL) once its first event is
    in; what each got. (httpx never resets a stream it leaves: it reads on and drops the rest.)"""
    return [data for data, _ in _h2(proxy, base, ca, [("/cancel/a2a", HEADERS, STREAM_BODY, True)] * n)]


def _h2(proxy: str, base: str, ca: Path, calls: list[Call]) -> list[tuple[bytes, list[tuple[bytes, bytes]]]]:
    """`calls` at once on one HTTP/2 connection through the proxy (CONNECT, then TLS), with the `h2` library:
    frames as sent, resets as asked; each call's DATA bytes and its trailers."""
    import h2.config
    import h2.connection
    import h2.errors
    import h2.events

    authority = base.removeprefix("https://")
    host, port = proxy.removeprefix("http://").split(":")
    raw = socket.create_connection((host, int(port)), timeout=30)
    raw.sendall(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        head += raw.recv(1)
    assert head.startswith(b"HTTP/1.1 200"), head
    tls = ssl.create_default_context(cafile=str(ca))
    tls.set_alpn_protocols(["h2"])
    sock = tls.wrap_socket(raw, server_hostname=authority.split(":")[0])
    conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True))
    conn.initiate_connection()
    got: dict[int, tuple[bytearray, list[tuple[bytes, bytes]]]] = {}
    cancel: set[int] = set()
    for path, headers, body, reset in calls:
        sid = conn.get_next_available_stream_id()
        pseudo = [(":method", "POST"), (":path", path), (":scheme", "https"), (":authority", authority)]
        conn.send_headers(sid, pseudo + list(headers.items()))
        conn.send_data(sid, body, end_stream=True)
        got[sid] = (bytearray(), [])
        if reset:
            cancel.add(sid)
    sock.sendall(conn.data_to_send())
    open_ = set(got)
    while open_:
        data = sock.recv(65536)
        if not data:
            break
        for event in conn.receive_data(data):
            stream: Any = getattr(event, "stream_id", None)
            if isinstance(event, h2.events.DataReceived):
                conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
                if stream in open_:
                    got[stream][0].extend(event.data)
                    if stream in cancel and b"\n\n" in got[stream][0]:
                        conn.reset_stream(stream, h2.errors.ErrorCodes.CANCEL)
                        open_.discard(stream)
            elif isinstance(event, h2.events.TrailersReceived):
                got[stream][1].extend(event.headers)
            elif isinstance(event, (h2.events.StreamEnded, h2.events.StreamReset)):
                open_.discard(stream)
        sock.sendall(conn.data_to_send())
    conn.close_connection()
    sock.sendall(conn.data_to_send())
    sock.close()
    return [(bytes(data), trailers) for data, trailers in got.values()]


async def _h2_traffic(proxy: str, ca: Path, tmp: Path, stop: Callable[[], int]) -> dict[str, list[Any]]:
    base, config = tls_listener(tmp)
    done, forever, whole = asyncio.Event(), asyncio.Event(), asyncio.Event()
    server = asyncio.create_task(serve(_h2_app(forever, whole), config, shutdown_trigger=done.wait))  # type: ignore[arg-type]
    got: dict[str, list[Any]] = {k: [] for k in ("sse", "reset", "forever", "unary", "versions", "grpc")}
    try:
        tls = ssl.create_default_context(cafile=str(ca))
        async with httpx.AsyncClient(proxy=proxy, http2=True, verify=tls, timeout=30) as client:

            async def one(kind: str) -> None:
                async with client.stream("POST", f"{base}/{kind}/a2a", content=STREAM_BODY, headers=HEADERS) as r:
                    got["versions"].append(r.http_version)
                    body = b""
                    try:
                        async for chunk in r.aiter_raw():
                            body += chunk
                    except httpx.RemoteProtocolError as e:
                        body += f"<{type(e).__name__}>".encode()
                    got[kind].append(body)

            cancels = asyncio.create_task(asyncio.to_thread(_h2_cancels, proxy, base, ca, 8))
            resets = [asyncio.create_task(one("reset")) for _ in range(8)]
            await asyncio.gather(*(one("sse") for _ in range(8)))
            whole.set()
            await asyncio.gather(*resets)
            got["cancel"] = await cancels
            for case in GRPC_CASES:  # one after another: the rows' order is the cases'
                call = (GRPC_PATH, {**GRPC_HEADERS, "x-case": case}, _frame(GRPC_REQUEST), False)
                got["grpc"] += await asyncio.to_thread(_h2, proxy, base, ca, [call])
            got["unary"].append((await client.post(f"{base}/a2a", content=BODY, headers=HEADERS)).content)
            endless = asyncio.create_task(one("forever"))
            await asyncio.wait_for(forever.wait(), 30)
            got["stopped"] = [await asyncio.to_thread(stop)]
            await asyncio.wait([endless], timeout=30)
    finally:
        done.set()
        await server
    return got


def test_http2_resets_and_a_stop_mid_stream_are_recorded(tmp_path: Path) -> None:
    """24 SSE streams at once over one HTTP/2 connection: eight whole, eight the client resets after the first event,
    eight the agent fails after it; gRPC replies of odd frames (a compression flag without an encoding, an unknown
    encoding, a bad gzip, a reserved flag bit, a length past the end, a byte after the last message, a message one
    byte per DATA frame); then a unary call, and a stream that never ends while the proxy is stopped. Whole replies
    arrive byte for byte (gRPC trailers too), every call is recorded (the cut ones as incomplete, the odd frames
    said) or counted in `capture_gaps`, and `converse-tap report` reads the dataset the stop left."""
    out, conf = tmp_path / "data", tmp_path / "conf"
    with mitmdump(out, *proxy_options(conf), "--set", "converse_tap_summary=off") as (proxy, proc):
        got = asyncio.run(_h2_traffic(proxy, conf / "mitmproxy-ca-cert.pem", tmp_path, proc.stop))
    assert got["stopped"] == [0] and "hook failed" not in proc.output, proc.output
    assert set(got["versions"]) == {"HTTP/2"}
    assert got["sse"] == [STREAM] * 8 and got["unary"] == [REPLY_BYTES]
    first = STREAM.split(b"\n\n")[0] + b"\n\n"
    assert all(body.startswith(first) for body in got["cancel"] + got["reset"])
    ex = load(out, "exchanges")
    ex["kind"] = (
        ex["url"].str.extract(r"https://[^/]+/(\w+)/")[0].fillna("unary").where(ex["binding"] != "grpc", "grpc")
    )
    gaps = load(out, "capture_gaps")
    counts = ex["kind"].value_counts().to_dict()
    assert {k: counts.get(k, 0) for k in ("sse", "cancel", "reset", "unary", "grpc")} == {
        **dict.fromkeys(("sse", "cancel", "reset"), 8),
        "unary": 1,
        "grpc": len(GRPC_CASES),
    }
    assert counts.get("forever", 0) + int(gaps["records"].sum()) == 1, (counts, gaps.to_dict("records"))
    whole = ex[ex["kind"] == "sse"]
    assert whole["complete"].all() and (whole["sse_events"] == 5).all()
    assert (whole["task_state"] == "TASK_STATE_COMPLETED").all()
    cut = ex[ex["kind"].isin(["cancel", "reset", "forever"])]
    said = cut[["kind", "sse_events", "error", "anomalies"]].to_dict("records")
    assert not cut["complete"].any() and (cut["sse_events"] >= 1).all(), said
    grpc = ex[ex["binding"] == "grpc"].sort_values("ts_start")
    grpc.index = pd.Index(list(GRPC_CASES))
    assert (grpc["method"] == "SendMessage").all() and grpc["complete"].all()
    noted = {case: [a.split(":")[0] for a in anomalies] for case, anomalies in grpc["anomalies"].items()}
    assert noted == GRPC_NOTED
    assert grpc["replies"].to_dict() == {c: int(c in ("bytewise", "trailing-byte")) for c in GRPC_CASES}
    assert got["grpc"] == [(b"".join(chunks), [(b"grpc-status", b"0")]) for chunks, _ in GRPC_CASES.values()]
    r = CliRunner().invoke(cli, ["report", str(out), "--format", "json"])
    assert r.exit_code == 0, r.output
