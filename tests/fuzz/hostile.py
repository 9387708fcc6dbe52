"""Hostile A2A exchanges for the fuzz tests: real v1.0/v0.3 JSON-RPC, HTTP+JSON, SSE, gRPC and card traffic,
mutated by hypothesis, with credentials planted where clients and agents put them.

A `Case` is one exchange as the proxy hands it to the recording worker (records `x`, or `o`/`c`/`e` for a
stream split at chosen points) and as ingest reads it from a capture (an `HttpExchange` whose URL may also
carry userinfo, which mitmproxy never forwards)."""

from __future__ import annotations

import gzip
import json
import zlib
from dataclasses import dataclass, field
from typing import Any

import brotli
from a2a.types import a2a_pb2 as pb
from hypothesis import strategies as st

from converse_tap.a2a.exchange import HttpExchange
from converse_tap.a2a.headers import Headers
from tests.factories import EXT, envelope

# every planted credential contains this marker; none may reach any column of any row
MARK = "Zq7SECRET"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ" + MARK + "In0.c2lnbmF0dXJl" + MARK
API_KEY = "sk-" + MARK + "abcdefghijkl"
SECRET_URL_PARTS = [  # (path prefix, query) pairs a redactor must recognise whatever else the URL holds
    (f"/agents/{JWT}", ""),
    (f"/keys/{API_KEY}", ""),
    (f"/a;jsessionid={MARK}1", ""),
    ("", f"token={MARK}2&tenant=t1"),
    ("", f"api_key={MARK}3"),
    ("", f"x=1&access_token={MARK}4"),
    ("", f"t=tenant-{MARK}o2&x=1"),  # the operator's pattern (OPERATOR_PATTERNS) finds this one
]
OPERATOR_PATTERNS = [r"tenant-(\w+)"]
HEADER_JUNK = ["", "\x00", "\udcff", ",,,", " " * 5, "a" * 3000, "http://[::1", "\u202e", "urn:x:y"]
SECRET_URLS = [  # URLs inside documents: card interfaces, MCP, citations, extension URIs, error messages
    f"https://user:{MARK}5@agent.test/a2a",
    f"https://agent.test/a2a?token={MARK}6",
    f"https://mcp.test/m?api_key={MARK}7",
    f"https://docs.test/{JWT}/x",
    f"http://u:{MARK}8@[::1/x",
    f"https://h\\u:{MARK}9@evil/x",
    f"http:/\\u:{MARK}10@h/x",
]
HOSTS = [
    "agent.test",
    "AGENT.test",
    "[::1]",
    "::1",  # as mitmproxy hands an IPv6 host on: its URL is `http://::1:9000/…`
    "[::1",
    "[fe80::1%25eth0]",
    "[v1.x]",
    "h\\x",
    "xn--a.test",
    "a b",
    "\u00e9x.test",
    "h\uff03x",
    "a..b",
    "h\x00x",
    "a" * 300,
    f"tenant-{MARK}o3.test",  # the operator's pattern matches inside the host
]
PORTS = [80, 443, 9000, 0, 65535]
PATH_JUNK = ["", "/\udcff", "/\x1b[31m", "/a\\b", "/%00", "/\u202e", "/a b", "/" + "p" * 2000, "/..;/", "/\r\nX: y"]


@dataclass
class Case:
    method: str
    scheme: str
    host: str
    port: int
    path: str  # with the query
    headers: list[tuple[str, str]]
    body: bytes | None
    status: int | None
    response_headers: list[tuple[str, str]] = field(default_factory=list)
    response_body: bytes = b""
    decoded_body: bytes | None = None  # the response body once content-decoded (None: it does not decode)
    chunks: list[bytes] | None = None  # a stream: the response body in these pieces (as sent)
    trailers: list[tuple[str, str]] | None = None
    error: str | None = None
    userinfo: str = ""  # only in the URL ingest sees
    malformed: list[str] = field(default_factory=list)  # what a row must say: prefixes of expected anomalies

    def url(self, with_userinfo: bool = True) -> str:
        user = f"{self.userinfo}@" if with_userinfo and self.userinfo else ""
        default = {"http": 80, "https": 443}[self.scheme] == self.port  # left out, as mitmproxy writes URLs
        return f"{self.scheme}://{user}{self.host}{'' if default else f':{self.port}'}{self.path}"

    def exchange(self, fid: str) -> HttpExchange:
        """As ingest reads it from a HAR or flow file."""
        body = self.decoded_body  # ingest decodes it (flowfile, harfile): the extractor sees decoded bytes
        anomalies = [] if body is not None or self.status is None else ["response_content_encoding_invalid"]
        return HttpExchange(
            id=fid,
            method=self.method,
            url=self.url(),
            request_headers=Headers(self.headers),
            request_body=self.body,
            http_version="HTTP/2.0" if self.scheme == "https" else "HTTP/1.1",
            status=self.status,
            response_headers=Headers(self.response_headers if self.status is not None else []),
            response_body=body if self.status is not None else None,
            response_trailers=Headers(self.trailers) if self.trailers is not None else None,
            ts_start=1.0,
            ts_first_byte=1.1,
            ts_end=1.2,
            error=self.error,
            bytes_in=len(self.body or b""),
            bytes_out=len(self.response_body),
            source="ingest",
            anomalies=anomalies,
        )

    def records(self, fid: str) -> list[tuple[Any, ...]]:
        """As the proxy hands it to the recording worker."""
        enc = [(k.encode("utf-8", "surrogateescape"), v.encode("utf-8", "surrogateescape")) for k, v in self.headers]
        path = self.path.encode("utf-8", "surrogateescape")
        body = self.body or b""
        req = (self.method.encode(), (self.scheme.encode(), self.host, self.port, path), b"HTTP/1.1", enc, body)
        req += (len(body), 1.0, ("127.0.0.1", 5000), ("agent.test", 9000), False)
        err = None if self.error is None else (self.error, 1.3)
        rh = [(k.encode(), v.encode("utf-8", "surrogateescape")) for k, v in self.response_headers]
        if self.status is None:
            return [("x", fid, req, None, err)]
        if self.chunks is None:
            resp = (self.status, rh, 1.1, 1.2, self.response_body, len(self.response_body))
            return [("x", fid, req, resp, err)]
        out: list[tuple[Any, ...]] = [("o", fid, req, (self.status, rh, 1.1))]
        out += [("c", fid, 1.15, c) for c in self.chunks if c]
        trailers = None if self.trailers is None else [(k.encode(), v.encode()) for k, v in self.trailers]
        out.append(("e", fid, (1.2, trailers), err, False))
        return out


def _split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(data) + 1) for c in cuts})
    pieces, last = [], 0
    for p in points:
        pieces.append(data[last:p])
        last = p
    pieces.append(data[last:])
    return pieces


def _user(v03: bool) -> dict[str, Any]:
    if v03:
        return {"kind": "message", "messageId": "u-1", "role": "user", "parts": [{"kind": "text", "text": "Hi"}]}
    return {"messageId": "u-1", "role": "ROLE_USER", "parts": [{"text": "Hi"}], "extensions": [EXT]}


def _agent(v03: bool, env: Any, extensions: list[str]) -> dict[str, Any]:
    msg: dict[str, Any] = {"messageId": "a-1", "contextId": "c-1", "metadata": {EXT: env}, "extensions": extensions}
    if v03:
        msg.update(kind="message", role="agent", parts=[{"kind": "text", "text": "Open 12-15."}])
    else:
        msg.update(role="ROLE_AGENT", parts=[{"text": "Open 12-15."}])
    return msg


WRONG = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    st.text(max_size=6),
    st.lists(st.integers(), max_size=2),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
)
# a value no envelope field may have (absent or empty is not wrong: the spec makes no field required)
WRONG_ENVELOPE = st.one_of(
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    st.sampled_from(["\u00bf?", "\x1b[2J", "\ud800"]),
    st.lists(st.integers(), min_size=1, max_size=2),
)
# a value no card field may have: every field is a string, a list or an object
WRONG_CARD = st.one_of(
    st.booleans(), st.integers(min_value=-(2**70), max_value=2**70), st.floats(), st.sampled_from([12, 1.5, True])
)
ENVELOPE_FIELDS = ["author", "answerCoverage", "ownership", "routine", "invocation", "citations"]
CARD_FIELDS = [
    "name",
    "version",
    "description",
    "supportedInterfaces",
    "skills",
    "capabilities",
    "url",
    "additionalInterfaces",
    "protocolVersion",
    "preferredTransport",
    "provider",
    "iconUrl",
]


def _card(secret_url: str, ext_params: Any) -> dict[str, Any]:
    return {
        "name": "Shop",
        "version": "1",
        "description": f"see {secret_url}",
        "supportedInterfaces": [{"url": secret_url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "url": secret_url,
        "additionalInterfaces": [{"url": secret_url, "transport": "GRPC"}],
        "iconUrl": secret_url,
        "provider": {"organization": "Shop", "url": secret_url},
        "skills": [{"id": "returns", "name": "Returns"}],
        "capabilities": {"extensions": [{"uri": EXT, "params": ext_params}]},
    }


@st.composite
def cases(draw: st.DrawFn) -> Case:
    kind = draw(st.sampled_from(["jsonrpc", "jsonrpc03", "rest", "stream", "card", "grpc", "error"]))
    v03 = kind == "jsonrpc03" or (draw(st.booleans()) and kind in ("rest", "card"))
    secret_path, secret_query = draw(st.sampled_from(SECRET_URL_PARTS))
    junk = draw(st.sampled_from(PATH_JUNK))
    host = draw(st.sampled_from(HOSTS))
    secret_url = draw(st.sampled_from(SECRET_URLS))
    malformed: list[str] = []
    env: Any = envelope(citations=[{"documentId": "d", "title": "t", "sourceUrl": secret_url}])
    wrong_fields = draw(st.sampled_from([[], [], ["one"], ENVELOPE_FIELDS]))
    for name in wrong_fields:  # one field of the wrong type, or every field
        env[draw(st.sampled_from(ENVELOPE_FIELDS)) if name == "one" else name] = draw(WRONG_ENVELOPE)
    if wrong_fields:
        malformed.append("message")
    headers = [
        ("content-type", "application/json"),
        ("authorization", f"Bearer {MARK}h1"),
        ("cookie", f"session={MARK}h2"),
        ("x-api-key", f"{MARK}h3"),
        ("a2a-version", draw(st.sampled_from(["0.3" if v03 else "1.0"] * 3 + ["", " 0.", "\udcff", "9" * 300]))),
        ("a2a-extensions", f"{EXT}, {secret_url}, tenant-{MARK}o1, " + draw(st.sampled_from(HEADER_JUNK))),
        ("traceparent", draw(st.sampled_from(["00-" + "a" * 32 + "-" + "b" * 16 + "-01", "zz", "\udcff", ""]))),
    ]
    exts = [EXT, secret_url]
    agent = _agent(v03, env, exts)
    rh = [
        ("content-type", draw(st.sampled_from(["application/json"] * 4 + ["application/a2a+json; x", "\x00", ""]))),
        ("a2a-extensions", f"{EXT},{secret_url}," + draw(st.sampled_from(HEADER_JUNK))),
    ]
    status = 200
    chunks = None
    trailers = None
    scheme = "http"
    method = "POST"
    if kind in ("jsonrpc", "jsonrpc03", "error"):
        name = "message/send" if v03 else "SendMessage"
        path = "/a2a/jsonrpc"
        body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": name, "params": {"message": _user(v03)}}).encode()
        if kind == "error":
            err = {"code": -32603, "message": f"upstream {secret_url} failed", "data": [{"reason": "X"}]}
            reply = json.dumps({"jsonrpc": "2.0", "id": 1, "error": err}).encode()
        else:
            reply = json.dumps({"jsonrpc": "2.0", "id": 1, "result": agent}).encode()
    elif kind == "rest":
        path = "/v1/message:send" if v03 else "/message:send"
        body = json.dumps({"message": _user(v03)}).encode()
        reply = json.dumps({"message": agent} if not v03 else agent).encode()
    elif kind == "stream":
        path = "/a2a/jsonrpc"
        body = json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage", "params": {"message": _user(False)}}
        ).encode()
        events = [
            {
                "jsonrpc": "2.0",
                "id": 1,
                "result": {
                    "statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}
                },
            },
            {
                "jsonrpc": "2.0",
                "id": 1,
                "result": {
                    "statusUpdate": {
                        "taskId": "t",
                        "contextId": "c",
                        "status": {"state": "TASK_STATE_COMPLETED", "message": agent},
                    }
                },
            },
        ]
        sep = draw(st.sampled_from(["\n", "\r\n", "\r"]))
        reply = "".join(f"data: {json.dumps(e)}{sep}{sep}" for e in events).encode()
        if draw(st.booleans()):
            reply = (
                draw(
                    st.sampled_from(
                        [
                            b": c\n",
                            b"data: {\n\n",
                            b"event: error\ndata: x\n\n",
                            b"\xff\xfe\n\n",
                            b"data:" + b"x" * 5000 + b"\n\n",
                            b"id: \x00\nretry: q\n\n",
                        ]
                    )
                )
                + reply
            )
        rh[0] = ("content-type", "text/event-stream")
        chunks = _split(reply, draw(st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=12)))
    elif kind == "card":
        method, body = "GET", None
        path = "/.well-known/agent-card.json"
        params: Any = {
            "mcp": {"url": secret_url, "serverCardUrl": secret_url + "/card"},
            "tools": [{"toolName": "returns", "description": secret_url, "inputSchema": {"x": secret_url}}],
        }
        card = _card(secret_url, params)
        wrong = draw(st.sampled_from([[], ["one"], ["nested"], CARD_FIELDS]))
        for name in wrong:
            if name == "nested":  # a field inside a list or object of the card
                where = draw(st.sampled_from(["capabilities", "supportedInterfaces", "skills", "extension"]))
                value = draw(WRONG_CARD)
                if where == "capabilities":
                    card["capabilities"]["extensions"] = value
                elif where == "supportedInterfaces":
                    card["supportedInterfaces"][0][draw(st.sampled_from(["url", "protocolBinding"]))] = value
                elif where == "skills":
                    card["skills"] = [value]
                else:
                    card["capabilities"]["extensions"][0]["required"] = value
            else:
                card[draw(st.sampled_from(CARD_FIELDS)) if name == "one" else name] = draw(WRONG_CARD)
        if wrong:
            malformed.append("card")
        headers = [h for h in headers if h[0] != "content-type"]
        reply = json.dumps(card).encode()
    else:  # grpc
        scheme = "https"
        package = draw(st.sampled_from(["lf.a2a.v1", "a2a.v1", "x.y"]))
        method_name = draw(st.sampled_from(["SendMessage", "SendStreamingMessage", "Frobnicate"]))
        path = f"/{package}.A2AService/{method_name}"
        headers[0] = ("content-type", "application/grpc")
        req_msg = pb.SendMessageRequest(
            message=pb.Message(message_id="u-1", role=pb.ROLE_USER, parts=[pb.Part(text="Hi")]),
            tenant=draw(st.sampled_from(["", "t1", f"a?token={MARK}g1", "../x", "\x00"])),
        )
        body = _frame(req_msg.SerializeToString(), 0)
        msg = pb.Message(message_id="a-1", context_id="c-1", role=pb.ROLE_AGENT, parts=[pb.Part(text="Ok")])
        msg.extensions.extend(exts)
        msg.metadata.update({EXT: envelope(citations=[{"documentId": "d", "sourceUrl": secret_url}])})
        malformed = [m for m in malformed if m != "message"]  # this envelope is not the mutated one
        data = pb.SendMessageResponse(message=msg).SerializeToString()
        flag = draw(st.sampled_from([0, 0, 1, 2, 255]))
        delta = draw(st.sampled_from([0, 0, -1, 1, 1 << 20]))
        reply = _frame(data, flag, delta)
        if flag or delta:
            malformed.append("exchange")
        reply += draw(st.sampled_from([b"", b"\x00", b"\x00\x00\x00\x00\x05ab"]))
        rh = [("content-type", "application/grpc"), ("grpc-encoding", draw(st.sampled_from(["", "gzip", "lz9"])))]
        trailers = [
            ("grpc-status", draw(st.sampled_from(["0", "13", "x"]))),
            ("grpc-message", f"see%20{secret_url}"),
            ("a2a-extensions", secret_url),
        ]
        chunks = _split(reply, draw(st.lists(st.integers(min_value=0, max_value=1 << 12), max_size=6)))
    # the bytes themselves: a byte changed or inserted, cut, compressed (well or badly)
    if kind != "grpc" and draw(st.integers(0, 5)) == 0:
        at = draw(st.integers(0, max(0, len(reply) - 1)))
        reply = reply[:at] + draw(st.sampled_from([b"\x00", b"\xff", b"{", b"\n\n", b'"', b"\\u"])) + reply[at + 1 :]
        if chunks is not None:
            chunks = _split(reply, draw(st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=8)))
        elif kind != "card" and status == 200:
            malformed.append("maybe")
    if body is not None and draw(st.integers(0, 9)) == 0:
        body = body[: draw(st.integers(1, max(1, len(body) - 1)))]
    if kind != "grpc" and draw(st.integers(0, 5)) == 0:
        cut = draw(st.integers(1, max(1, len(reply) - 1)))
        reply = reply[:cut]
        if chunks is not None:
            chunks = _split(reply, [cut // 2])
        # (an empty card body is recorded without an anomaly: extract.py's choice, reported to the lead)
        if kind != "stream" and not (kind == "card" and not reply.strip()):
            malformed.append("exchange")
    encoding = draw(st.sampled_from(["", "", "", "gzip", "deflate", "br", "gzip-corrupt", "x-unknown"]))
    encoded = None
    if encoding and kind != "grpc":
        encoded = _encode(reply, encoding)
        rh.append(("content-encoding", encoding.removesuffix("-corrupt")))
        if chunks is not None:
            chunks = _split(encoded, draw(st.lists(st.integers(min_value=0, max_value=1 << 16), max_size=8)))
    if kind != "grpc":  # a gRPC path is exactly /<package>.A2AService/<Method>
        path = junk + secret_path + path
    if secret_query:
        path += "?" + secret_query
    if host not in ("agent.test", "AGENT.test", "[::1]", "::1", "[fe80::1%25eth0]", "\u00e9x.test", "a..b", HOSTS[-1]):
        malformed.append("url")
    return Case(
        method=method,
        scheme=scheme,
        host=host,
        port=draw(st.sampled_from(PORTS)),
        path=path,
        headers=headers,
        body=body,
        status=draw(st.sampled_from([status, status, 400, 500, None])),
        response_headers=rh,
        response_body=reply if encoded is None else encoded,
        decoded_body=reply if encoded is None or encoding in ("gzip", "deflate", "br") else None,
        chunks=chunks,
        trailers=trailers,
        error=draw(st.sampled_from([None, None, f"connect to {secret_url} failed"])),
        userinfo=draw(st.sampled_from(["", f"user:{MARK}u1", f"{MARK}u2", f"a@b:{MARK}u3", f"u:{MARK}%40u4"])),
        malformed=malformed,
    )


def _encode(data: bytes, encoding: str) -> bytes:
    if encoding == "gzip":
        return gzip.compress(data, mtime=0)
    if encoding == "deflate":
        return zlib.compress(data)
    if encoding == "br":
        return brotli.compress(data)
    if encoding == "gzip-corrupt":
        packed = gzip.compress(data, mtime=0)
        return packed[:10] + bytes(b ^ 0x5A for b in packed[10:40]) + packed[40:]
    return data  # an encoding nobody knows: the bytes as they are


def _frame(data: bytes, flag: int, delta: int = 0) -> bytes:
    return bytes([flag]) + max(0, len(data) + delta).to_bytes(4, "big") + data


def worker_config(root: str) -> dict[str, Any]:
    """A recording worker's configuration for the fuzzers: a dataset in `root`, the operator's patterns on."""
    return {
        **{"dir": root, "text": "keep", "salt": "", "flush_interval": 60.0, "summary": "off"},
        **{"rollover_rows": 100000, "rollover_seconds": 3600.0, "max_body": 1 << 20, "max_events": 50},
        "redact": OPERATOR_PATTERNS,
    }
