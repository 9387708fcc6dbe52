"""Credential shapes in URLs, cards and log lines; the operator's own patterns."""

from __future__ import annotations

import io
import json
import logging
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

from converse_tap.a2a.exchange import HttpExchange
from converse_tap.a2a.extract import agent_of, extract
from converse_tap.a2a.redact import REDACTED, LogRedactor, Redaction, TextPolicy, redact_card_json, redact_url
from converse_tap.addon.flows import exchange_from_flow
from tests.children import finishes_within
from tests.factories import EXT, a2a_flow, agent_message, envelope, jsonrpc_result

BASE_URL = "http://agent.test:9000/a2a"
JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJKV1RTRUNSRVQifQ.c2lnbmF0dXJlX0pXVFNFQ1JFVA"


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://user:PW1@h:81/a2a", "http://h:81/a2a"),
        ("http://TOKENONLY@h/a2a", "http://h/a2a"),
        (f"https://h/agents/{JWT}/a2a", "https://h/agents/[REDACTED]/a2a"),
        ("https://h/a2a;jsessionid=JSESS1;v=2/x", "https://h/a2a;jsessionid=[REDACTED];v=2/x"),
        ("https://h/a2a;PHPSESSID=P1", "https://h/a2a;PHPSESSID=[REDACTED]"),
        (
            "https://h/a?token=T1&tenant=t1",
            "https://h/a?token=%5BREDACTED%5D&tenant=t1".replace("%5B", "[").replace("%5D", "]"),
        ),
        (f"https://h/a?state={JWT}", "https://h/a?state=[REDACTED]"),
        ("https://h/keys/sk-abcdefghijklmnop1234/x", "https://h/keys/[REDACTED]/x"),
        ("https://h/a#access_token=FRAG1", "https://h/a"),
        # a key in the path after a segment that names it, whatever its shape
        ("https://h/a2a/token/plainvalue1/x", "https://h/a2a/token/[REDACTED]/x"),
        ("https://h/API-Keys/k1?page=2", "https://h/API-Keys/[REDACTED]?page=2"),
        ("https://h/password/p%2F1", "https://h/password/[REDACTED]"),
        ("https://h/oauth/token", "https://h/oauth/token"),
        ("https://h/authors/ann/sessions/s1", "https://h/authors/ann/sessions/s1"),
        # what is not a credential stays
        ("https://h/agents/ag_7Qb3nT1xK9wZs2Pv0Lm4Rd", "https://h/agents/ag_7Qb3nT1xK9wZs2Pv0Lm4Rd"),
        ("https://h/v1.2.3/jquery.min.js?page=2", "https://h/v1.2.3/jquery.min.js?page=2"),
        ("https://h/a;v=2", "https://h/a;v=2"),
        (
            "https://my-agent-service.production-ns.svc-cluster/a",
            "https://my-agent-service.production-ns.svc-cluster/a",
        ),
        ("https://h/x/Abcdefghijklmn.opqrstuvwxyz12.Zyxwvutsrqpo9/y", "https://h/x/[REDACTED]/y"),
        # a broken IPv6 literal: userinfo and shapes still go, and the host is written so that parsers read it
        (f"http://user:PW2@[::1/{JWT}", "http://%5B%3A%3A1/[REDACTED]"),
    ],
)
def test_redact_url(url: str, expected: str) -> None:
    assert redact_url(url) == expected


def test_operator_patterns() -> None:
    r = Redaction.from_patterns([r"tenant-(\w+)", r"/customers/\d+", r"(?P<a>acct)_(?P<b>\d+)"])
    url = r.url("https://h/customers/42/a2a?t=tenant-acme&x=acct_77&q=1")
    # `/customers/42` took the host's `/`: `[REDACTED]` then sits in the host, written so that parsers read it
    assert url == "https://h%5BREDACTED%5D/a2a?t=tenant-[REDACTED]&x=[REDACTED]_[REDACTED]&q=1"
    assert pickle.loads(pickle.dumps(r)) == r  # travels to an extraction worker process
    assert Redaction.from_patterns(None) == Redaction.from_patterns([]) == Redaction()
    assert Redaction.from_patterns("x(y)").patterns[0].pattern == "x(y)"


@pytest.mark.parametrize(
    ("pattern", "message"),
    [
        ("(unclosed", "redaction pattern '(unclosed' is not a valid regular expression: missing )"),
        ("a*", "matches the empty string"),
        ("", "a redaction pattern is empty"),
    ],
)
def test_bad_operator_pattern_is_a_clear_error(pattern: str, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        Redaction.from_patterns(["ok", pattern])


@given(st.text())
def test_redaction_never_raises_and_drops_userinfo(s: str) -> None:
    out = Redaction().url(f"http://u:SECRETPW@h/{s}")
    assert "SECRETPW" not in out
    Redaction().log_text(s)


def test_agent_key_never_carries_a_credential() -> None:
    assert agent_of(f"http://user:PW3@h:9/agents/{JWT}") == ("h:9/agents/[REDACTED]", None)
    assert agent_of("http://h:9/a2a;jsessionid=JS2") == ("h:9/a2a;jsessionid=[REDACTED]", None)
    assert agent_of("http://h/a2a/tenant-acme", Redaction.from_patterns([r"tenant-\w+"])) == ("h/a2a/[REDACTED]", None)


def _exchange(url: str, body: bytes) -> HttpExchange:
    flow = a2a_flow(response=body)
    ex = exchange_from_flow(flow)
    ex.url = url  # e.g. a HAR entry, where the URL is whatever the browser wrote down
    return ex


def test_extract_redacts_every_stored_url() -> None:
    env = envelope(citations=[{"documentId": "d", "title": "t", "sourceUrl": "https://docs.test/x?token=CIT1"}])
    ex = _exchange(
        f"http://user:PW4@agent.test:9000/a2a/{JWT};jsessionid=JS3/rpc?api_key=K1&tenant=acme-TEN1",
        jsonrpc_result({"message": agent_message(env=env)}),
    )
    ex.error = "connection to http://user:PW5@agent.test/ failed"
    ext = extract(ex, TextPolicy(), redaction=Redaction.from_patterns([r"acme-(\w+)"]))
    assert ext is not None
    stored = json.dumps([ext.exchange, ext.messages], default=str)
    for secret in ("PW4", "PW5", "JWTSECRET", JWT.split(".")[0], "JS3", "K1", "TEN1", "CIT1"):
        assert secret not in stored, secret
    assert (
        ext.exchange["agent"] == ext.messages[0]["agent"] == "agent.test:9000/a2a/[REDACTED];jsessionid=[REDACTED]/rpc"
    )
    assert ext.exchange["url"].endswith("?api_key=[REDACTED]&tenant=acme-[REDACTED]")


CARD = {
    "name": "Shop",
    "url": "https://user:CARDPW1@agent.test/a2a?token=CARDTOK2",
    "preferredTransport": "JSONRPC",
    "additionalInterfaces": [{"url": f"https://agent.test/rest/{JWT}", "transport": "HTTP+JSON"}],
    "iconUrl": "https://cdn.test/icon.png?sig=ICONSIG3",
    "documentationUrl": "https://u:DOCPW4@docs.test/",
    "provider": {"organization": "Shop", "url": "https://shop.test/?access_token=PROVTOK5"},
    "capabilities": {
        "extensions": [
            {
                "uri": EXT,
                "params": {
                    "mcp": {
                        "url": "https://mcp.test/m?api_key=MCPKEY6",
                        "serverCardUrl": "https://mcp.test/m/server-card;jsessionid=MCPSESS7",
                    },
                    "tools": [{"toolName": "t", "inputSchema": {"$id": "https://u:SCHEMAPW8@s.test/t"}}],
                },
            }
        ]
    },
    "skills": [{"id": "t"}],
}


def test_card_urls_are_redacted_before_they_are_stored() -> None:
    flow = a2a_flow(method="GET", path="/.well-known/agent-card.json", response=json.dumps(CARD).encode())
    ext = extract(exchange_from_flow(flow), TextPolicy())
    assert ext is not None and len(ext.agent_cards) == 1
    card = ext.agent_cards[0]
    stored = json.dumps(card, default=str)
    for secret in (
        "CARDPW1",
        "CARDTOK2",
        "JWTSECRET",
        "ICONSIG3",
        "DOCPW4",
        "PROVTOK5",
        "MCPKEY6",
        "MCPSESS7",
        "SCHEMAPW8",
    ):
        assert secret not in stored, secret
    assert [i["url"] for i in card["interfaces"]] == [
        "https://agent.test/a2a?token=[REDACTED]",
        "https://agent.test/rest/[REDACTED]",
    ]
    assert card["mcp_url"] == "https://mcp.test/m?api_key=[REDACTED]"
    assert json.loads(card["card_json"])["provider"] == {
        "organization": "Shop",
        "url": "https://shop.test/?access_token=[REDACTED]",
    }


def test_log_redactor_cleans_every_record() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.addFilter(LogRedactor(Redaction.from_patterns(["OPERATOR\\d"])))
    logger = logging.getLogger("test_redact_probe")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning(
            "Bad HTTP request line: %r", b"GET http://user:LOGPW1@h/a;jsessionid=LOGJS2?token=LOGTOK3 HTTP/1.1"
        )
        logger.warning("plain %s OPERATOR7 %s", "http://h/" + JWT, "ok")
        try:
            raise ValueError("http://u:TRACEPW4@h/")
        except ValueError:
            logger.exception("failed")
    finally:
        logger.removeHandler(handler)
    log = stream.getvalue()
    for secret in ("LOGPW1", "LOGJS2", "LOGTOK3", "JWTSECRET", "OPERATOR7", "TRACEPW4"):
        assert secret not in log, secret
    assert "Bad HTTP request line: b'GET http://h/a;jsessionid=[REDACTED]?token=[REDACTED] HTTP/1.1'" in log
    assert f"plain http://h/{REDACTED} [REDACTED] ok" in log and "ValueError" in log
    host = "server connect my-agent-service.production-ns.svc-cluster-local:443"
    assert Redaction().log_text(host) == host


@given(st.text(alphabet=st.sampled_from(list("eyJskpr_-ghoustbAKIAza.XYZ0123456789abcdefghijklmnop:/ ")), max_size=120))
def test_the_fast_paths_never_miss_a_shape(text: str) -> None:
    from converse_tap.a2a.redact_secrets import wide_shapes
    from converse_tap.a2a.redact_url import _SHAPES, redact_shapes

    assert redact_shapes(text) == _SHAPES.sub(REDACTED, wide_shapes(text))


def _reference_log_text(text: str) -> str:
    """Redaction.log_text as it was written before its cache: named values (without the substring test that lets
    text through first), URLs, userinfo, then shapes."""
    from converse_tap.a2a.redact_named import key_values
    from converse_tap.a2a.redact_text import _TEXT_URL, _TEXT_USERINFO
    from converse_tap.a2a.redact_url import redact_shapes

    text = key_values(text)
    if "://" in text:
        text = _TEXT_USERINFO.sub(r"\1", _TEXT_URL.sub(lambda m: Redaction().url(m.group(0)), text))
    return redact_shapes(text)


_PIECES = st.sampled_from(
    ["https://h/a", "http://u:pw@h/x", "?token=T", JWT, "sk_live_ABCDEFGHIJKLMN", " ", '"', "\\", "\n", "é", "ab"]
)
_STRINGS = st.lists(_PIECES, max_size=6).map("".join)
_DOCS = st.recursive(
    st.none() | st.booleans() | st.integers() | _STRINGS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_STRINGS, inner, max_size=4),
    max_leaves=12,
)


@given(_STRINGS)
def test_cached_log_text_is_the_reference(text: str) -> None:
    assert Redaction().log_text(text) == _reference_log_text(text)
    assert Redaction().log_text(text * 100) == _reference_log_text(text * 100)  # past the cache's length


@given(_DOCS)
def test_stored_document_is_the_redacted_copy_serialised(doc: object) -> None:
    """The shortcut (no string would change: the first serialisation is kept) gives what the full path gives."""
    from converse_tap.a2a.redact import redact_card_json, stored_json

    form = {"sort_keys": True, "ensure_ascii": False, "default": str, "separators": (",", ":")}
    for redaction in (Redaction(), Redaction.from_patterns(["pw"])):
        full = json.dumps(redaction.json_urls(doc), **form)  # type: ignore[arg-type]
        assert redact_card_json(doc, redaction) == full
        assert redact_card_json(doc, redaction, stored_json(doc)) == full
    assert stored_json(doc) == json.dumps(doc, **form)  # type: ignore[arg-type]
    assert json.loads(stored_json(doc)) == doc


@pytest.mark.parametrize(
    "doc",
    [
        {"a": float("nan"), "b": [float("inf"), float("-inf")]},  # orjson would write null
        {"big": 2**70, "small": -(2**64)},  # past orjson's 64 bits
        {"lone": "\ud800"},  # orjson refuses lone surrogates
        {"n": None, "f": 0.1, "t": "nullable"},
    ],
    ids=["nan", "big-int", "surrogate", "null"],
)
def test_stored_json_keeps_every_value_orjson_cannot_write(doc: dict) -> None:
    from converse_tap.a2a.redact import stored_json

    text = stored_json(doc)
    assert text == json.dumps(doc, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    assert json.dumps(json.loads(text), sort_keys=True) == json.dumps(doc, sort_keys=True)  # NaN stays NaN


def test_the_caches_keep_no_long_string_from_the_wire() -> None:
    """URLs and agents are cached (the same few come back exchange after exchange), but only short ones: a flood of
    distinct long URLs cannot grow the recorder's memory through them."""
    from converse_tap.a2a import extract, redact

    long = "https://agent.test/" + "a" * 600 + "/ag_x?token=SECRETVALUE"
    urls, agents = redact._builtin.cache.cache_info().currsize, extract.agent_of.cache.cache_info().currsize
    assert "SECRETVALUE" not in Redaction().url(long)
    assert "SECRETVALUE" not in extract.agent_of(long)[0]
    assert redact._builtin.cache.cache_info().currsize == urls
    assert extract.agent_of.cache.cache_info().currsize == agents
    short = "https://agent.test/a2a/ag_short?token=SECRETVALUE"
    assert extract.agent_of(short) == extract.agent_of(short) == ("agent.test/a2a/ag_short", None)
    assert extract.agent_of.cache.cache_info().currsize == agents + 1


def test_urls_in_free_text_are_found_in_linear_time() -> None:
    """A text of n characters like `a.a.a.a… ://x` (a JSON-RPC error message, a card's description: both come
    from the wire) made the URL patterns start at each of its n/2 word starts and scan to the end of the run, O(n²):
    200 KB would hold the recording worker for minutes. Run in a child process, so that a regression fails here
    (killed after 60 s, where a linear scan takes milliseconds) instead of hanging the suite."""
    code = (
        "from converse_tap.a2a.redact import Redaction\n"
        "run = 'a.' * 100_000\n"
        "for r in (Redaction(), Redaction.from_patterns(['zz'])):\n"
        "    for tail in (' ://x', '://x', '://u:pw@h/', '+' * 1000 + ' http://x'):\n"
        "        r.log_text(run + tail)\n"
        "print('done')\n"
    )
    finishes_within(code, 60, "redacting a 200 KB run of scheme characters (the URL patterns backtrack)")
    # and what they find is what they found: userinfo goes after any run, URLs are redacted as URLs
    r = Redaction()
    assert r.log_text("a." * 1000 + "http://u:SECRETPW@h/x") == "a." * 1000 + "http://h/x"
    assert r.log_text("see http://u:pw@h/a?token=T1 now") == f"see http://h/a?token={REDACTED} now"
    assert r.log_text("1.x+y-z://u:pw@h/x") == "1.x+y-z://h/x"
    assert r.log_text("_http://u:pw@h/x and a.b.c") == "_http://h/x and a.b.c"


def _nested(depth: int, leaf: object) -> object:
    for i in range(depth):
        leaf = {"n": leaf} if i % 2 else [leaf]
    return leaf


def test_documents_nested_as_deep_as_json_reads_are_redacted() -> None:
    """An envelope or a card with a URL inside 1,200 levels of nesting (json.loads reads that deep): redacting its
    copy recursed past Python's limit and the whole exchange became `extraction_failed:RecursionError`, its
    messages and cards lost. The copy is made with a loop, as `changes` already was."""
    deep = _nested(1200, "https://user:DEEPPW1@docs.test/x?token=DEEPTOK2")
    env = envelope(detail=deep)
    ext = extract(_exchange(BASE_URL, jsonrpc_result({"message": agent_message(env=env)})), TextPolicy())
    assert ext is not None and [m["direction"] for m in ext.messages] == ["request", "response"]
    stored = ext.messages[1]["envelope_json"]
    assert "DEEPPW1" not in stored and "DEEPTOK2" not in stored
    assert json.loads(stored)["detail"] == _nested(1200, f"https://docs.test/x?token={REDACTED}")
    card = {**CARD, "provider": deep}
    flow = a2a_flow(method="GET", path="/.well-known/agent-card.json", response=json.dumps(card).encode())
    ext = extract(exchange_from_flow(flow), TextPolicy())
    assert ext is not None and len(ext.agent_cards) == 1
    assert json.loads(ext.agent_cards[0]["card_json"])["provider"] == _nested(
        1200, f"https://docs.test/x?token={REDACTED}"
    )
    # keys are redacted too, and a key that redacts to one already there replaces it, as a dict display does
    doc = {"http://u:pw@h/": 1, "http://h/": 2, "k": [{"http://a:b@h/": "x"}]}
    assert Redaction().json_urls(doc) == {"http://h/": 2, "k": [{"http://h/": "x"}]}


KEY = "sk-abcdefghijklmnopLEAK1"
AT = "https://u:PWLEAK2@x.test/p?token=TOKLEAK3"


def _planted() -> dict[str, object]:
    from tests.factories import jsonrpc_request

    env = envelope(
        author=KEY,
        citations=[{"documentId": "d", "title": "see " + AT, "chunkId": "c " + KEY}],
        routine={"name": "r " + KEY, "status": "awaiting_input", "pendingInput": [{"name": KEY, "prompt": AT}]},
    )
    msg = agent_message(env=env, role="ROLE_" + KEY, parts=[{"kind": KEY, "text": "hi"}])
    msg["extensions"] = [EXT, "https://ext.test/e?token=EXTTOK4"]
    user = {"messageId": "u", "role": "ROLE_USER", "parts": [{"text": "hi"}]}
    err = {"code": -32000, "message": f"bad key {KEY}", "data": {"reason": "at " + AT}}
    rest_err = {"error": {"code": 401, "status": "UNAUTH " + KEY, "message": AT, "details": [{"reason": KEY}]}}
    return {
        "reply": a2a_flow(
            body=jsonrpc_request("x/" + KEY, {"message": user}),
            headers={"a2a-extensions": EXT + ", https://ext.test/x?api_key=HDRKEY5"},
            response=jsonrpc_result({"message": msg}),
            response_headers={"a2a-extensions": f"https://e.test/y/{JWT}"},
        ),
        "task": a2a_flow(response=jsonrpc_result({"task": {"id": "t", "status": {"state": KEY}}})),
        "rpc_error": a2a_flow(response=json.dumps({"jsonrpc": "2.0", "id": "r-1", "error": err}).encode()),
        "rest_error": a2a_flow(
            path="/v1/message:send",
            body=json.dumps({"message": user}).encode(),
            status=401,
            response=json.dumps(rest_err).encode(),
            content_type="application/json; x=" + KEY,
        ),
        "card": a2a_flow(
            method="GET",
            path="/.well-known/agent-card.json",
            response=json.dumps(
                {
                    "name": "Shop " + KEY,
                    "version": KEY,
                    "skills": [{"id": KEY}],
                    "capabilities": {"extensions": [{"uri": EXT, "params": {"tools": [{"toolName": "t " + KEY}]}}]},
                }
            ).encode(),
        ),
    }


@pytest.mark.parametrize("name", ["reply", "task", "rpc_error", "rest_error", "card"])
def test_text_from_the_wire_that_carries_a_credential_is_redacted_in_every_column(name: str) -> None:
    """Extension URIs, error status/message/reason, unknown methods, roles, states and part kinds, the anomalies
    that quote them, citation titles, routine and slot names, card names and tool names: each kept a planted
    credential, while only the URL columns and the stored JSON documents were redacted."""
    ext = extract(exchange_from_flow(_planted()[name]), TextPolicy(), redaction=Redaction.from_patterns([]))
    assert ext is not None
    rows = [ext.exchange, *ext.messages, *ext.agent_cards]
    stored = json.dumps(rows, default=str)
    leaks = [s for s in ("LEAK1", "PWLEAK2", "TOKLEAK3", "EXTTOK4", "HDRKEY5", "JWTSECRET", JWT[:20]) if s in stored]
    columns = sorted({k for row in rows for k, v in row.items() if any(s in json.dumps(v, default=str) for s in leaks)})
    assert (leaks, columns) == ([], [])
    assert REDACTED in stored


def test_whatwg_shaped_urls_in_free_text_are_found_in_linear_time() -> None:
    """`http:u:pw@h` (a URL with userinfo to a WHATWG parser, no `//`) is looked for with a look ahead for its `@`:
    unbounded, `http:http:http:…` was scanned to its end from each of its colons (65 KB: 4.5 s). Bounded to 256
    characters. In a child process, killed after 60 s (300 KB took minutes), where it takes milliseconds."""
    code = (
        "from converse_tap.a2a.redact import Redaction\n"
        "for r in (Redaction(), Redaction.from_patterns(['zz'])):\n"
        "    for text in ('http:' * 60_000, 'ws:' * 100_000 + '@', 'x http:' + 'a:' * 150_000):\n"
        "        r.log_text(text)\n"
        "print('done')\n"
    )
    finishes_within(code, 60, "redacting 300 KB of `http:` (the look ahead for userinfo is unbounded)")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # quoted by the HTTP stack: a header line keeps its name, a header value goes whole, a request line's target
        # is redacted as a URL (spaces included), a status line and header names stay
        ("Invalid header line: b'Set-Cookie s=SECRET1'", f"Invalid header line: b'Set-Cookie {REDACTED}'"),
        ("Invalid header line: b'X-Key:SECRET1'", f"Invalid header line: b'X-Key:{REDACTED}'"),
        (
            "Received header value surrounded by whitespace b' a b '",
            f"Received header value surrounded by whitespace b'{REDACTED}'",
        ),
        (
            "Bad HTTP request line: b'GET /a?q=a b&token=SECRET1 HTTP/1.1'",
            f"Bad HTTP request line: b'GET /a?q=a%20b&token={REDACTED} HTTP/1.1'",
        ),
        ("Bad HTTP response line: b'HTTP/1.1 200 OK'", "Bad HTTP response line: b'HTTP/1.1 200 OK'"),
        ("Received duplicate pseudo-header field b':path'", "Received duplicate pseudo-header field b':path'"),
        ("Unknown HTTP version: b'HTTP/9'", "Unknown HTTP version: b'HTTP/9'"),
        ("the value b'hello world' is odd", "the value b'hello world' is odd"),
        # request lines in text (the HTTP+JSON method_raw column)
        ("GET /v1/tasks/T1;jsessionid=SECRET1", f"GET /v1/tasks/T1;jsessionid={REDACTED}"),
        ("GET /v1/tasks/T1", "GET /v1/tasks/T1"),
        ("POST /v1/message:send", "POST /v1/message:send"),
        # URLs written scheme-relative, with JSON-escaped slashes, or percent-encoded whole
        ("at //u:SECRET1@h.test/x?token=SECRET2 now", f"at //h.test/x?token={REDACTED} now"),
        ("a//b and // a comment", "a//b and // a comment"),
        ('{"dsn":"redis:\\/\\/u:SECRET1@cache\\/0"}', '{"dsn":"redis:\\/\\/cache\\/0"}'),
        ("to https%3A%2F%2Fu%3ASECRET1%40h%2Fx failed", "to https%3A%2F%2Fh%2Fx failed"),
        ("see https%3A%2F%2Fh%2Fx%3Fa%3D1", "see https%3A%2F%2Fh%2Fx%3Fa%3D1"),
        # userinfo before a host and a port, without a scheme; an address stays
        ("dial user:SECRET1@grpc.agent.test:443 failed", "dial grpc.agent.test:443 failed"),
        ("write to ann@example.com or note:ann@example.com", "write to ann@example.com or note:ann@example.com"),
        # an echoed Authorization header, a Bearer token
        ("Authorization: Basic U0VDUkVUMQ== refused", f"Authorization: Basic {REDACTED} refused"),
        ('"authorization":"key-SECRET1"', f'"authorization":"{REDACTED}"'),
        ("Authorization: required, see the docs", "Authorization: required, see the docs"),
        ("bad Bearer abc.SECRET1-x", f"bad Bearer {REDACTED}"),
        ("Bearer tokens only; Bearer authentication failed", "Bearer tokens only; Bearer authentication failed"),
        ("authorization failed", "authorization failed"),
        # secret-named values (redact_secrets.key_values): connection strings, echoed headers, cookies, dict text
        (
            "Server=db;User ID=sa;Password=SECRET1;Database=app",
            f"Server=db;User ID=sa;Password={REDACTED};Database=app",
        ),
        ("X-A2A-Notification-Token: nt-SECRET1", f"X-A2A-Notification-Token: {REDACTED}"),
        ("Cookie: a=SECRET1; b=2 sent", f"Cookie: {REDACTED} sent"),
        ("{'token': 'SECRET1', 'id': 'cfg-1'}", f"{{'token': '{REDACTED}', 'id': 'cfg-1'}}"),
        ("token: expired; key=destination; max_tokens=5", "token: expired; key=destination; max_tokens=5"),
        ("see https://apikey:KEY123@api.test/v1 failed", "see https://api.test/v1 failed"),  # userinfo: the host stays
    ],
)
def test_free_text_loses_credentials_and_keeps_the_rest(text: str, expected: str) -> None:
    for redaction in (Redaction(), Redaction.from_patterns(["NOTHERE"])):
        assert redaction.log_text(text) == expected
        assert redaction.log_text(expected) == expected  # redacted again (a re-ingest): stays put
    assert redact_card_json({"k": text}) == json.dumps({"k": expected}, ensure_ascii=False, separators=(",", ":"))


def test_the_free_text_rules_run_in_linear_time() -> None:
    """Each rule of `redact_text` on 400 KB crafted against it (unterminated quotes, a method or `//` or `@` or
    `Bearer` at every other position, runs with no end): a regression to a quadratic scan takes minutes; a linear
    one well under a second each. In a child process, killed after 60 s."""
    code = (
        "from converse_tap.a2a.redact import Redaction\n"
        "n = 400_000\n"
        "texts = [\"b'\" * (n // 2), \"b'\\\\\" * (n // 3), 'header b\\'' + 'a: b\\\\r\\\\n' * (n // 8) + \"'\",\n"
        "         'request line b\\'GET /' + ' HTTP/1.1' * (n // 9) + \"'\", 'GET /' * (n // 5), 'GET /' + 'a' * n,\n"
        "         '=a:b' * (n // 4), ' a:' + 'b' * n + '@', ' a:b@h' * (n // 6), ' a:b@' + 'h' * n + ':1',\n"
        "         '//' * (n // 2), ' //a' * (n // 4), ' //' + 'u' * n + '@',\n"
        "         'Bearer ' * (n // 7), 'Bearer 1' + 'a' * n,\n"
        "         'authorization: ' * (n // 15), 'x:\\\\/\\\\/' * (n // 6), 'a%3A%2F%2F' * (n // 10)]\n"
        "for r in (Redaction(), Redaction.from_patterns(['zz'])):\n"
        "    for text in texts:\n"
        "        r.log_text(text)\n"
        "        r.url(text)\n"
        "print('done')\n"
    )
    finishes_within(code, 60, "the free-text rules on 400 KB of crafted text")
