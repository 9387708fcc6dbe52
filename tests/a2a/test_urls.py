"""converse_tap.a2a.urls: one lenient URL parser that never raises and names what is odd about a URL."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from converse_tap.a2a import urls
from converse_tap.a2a.redact import REDACTED, Redaction, redact_url

ODD_URLS = [
    "http://[::1/a2a",  # urlsplit: "Invalid IPv6 URL"
    "http://[/",
    "http://[::1]]/",
    "http://W]:443/a",  # found by tests/fuzz/atheris_driver.py: a `]` alone went through the fast path whole
    "http://a]b[c/",
    "http://[::\x7f\x7f]/a",  # found by the atheris driver: the zone passed, `urlsplit` refused it
    "http://[::1%]/a",
    "http://[::%25a%25b]/a",
    "http://[v1.x]/",
    "http://[fe80::1%25eth0]:8080/a",
    "http://[::1]:99999/a",
    "http://h:abc/a",
    "http://h:-1/",
    "http://h:\u0668\u0660/",  # Arabic-Indic digits: str.isdigit() says yes, sockets say no
    "http://u:p%40x@h@i/",
    "http://h\udcff/a",
    "http://h/\udcff?a=\ud800",
    "http://\x00h/a\x1b[31m",
    "http://h\\@evil/a",
    "http:/\\u:p@h/",
    "javascript:alert(1)",
    "http://xn--a.com/",
    "http://a..b\u00e9/",
    "http://" + "a" * 64 + "\u00e9.test/",  # a label IDNA refuses
    "http://h\uff03x/",  # NFKC-normalises to '#': urlsplit raises
    " \t http://h/a \n",
    "http://" + "a" * 65536 + "/",
    "",
    "::::",
    "//h/a",
]


@pytest.mark.parametrize("url", ODD_URLS, ids=range(len(ODD_URLS)))
def test_odd_urls_never_raise_and_redact_to_a_url_every_parser_reads(url: str) -> None:
    u = urls.parse(url)
    assert urls.split(url)[1] == u.netloc
    urls.host_port(url)
    clean = redact_url(url)
    parts = urlsplit(clean)  # raised on several of these before
    assert clean.isprintable() or not clean
    assert "\\" not in parts.netloc


@pytest.mark.parametrize(
    ("url", "found"),
    [
        ("https://agent.test/a2a", []),
        ("http://[::1]:8080/a", []),
        ("http://[fe80::1%25eth0]/a", []),
        ("http://[::1/a2a", ["url_malformed:ipv6"]),
        ("http://[v1.x]/", ["url_malformed:ipv6"]),
        ("http://h:99999/a", ["url_malformed:port"]),
        ("http://h:abc/a", ["url_malformed:port"]),
        ("http://h:\u0668\u0660/", ["url_malformed:port"]),
        ("http://h\udcff/a", ["url_not_utf8"]),
        ("http://h/a\x1bb", ["url_malformed:control_character"]),
        ("http://a b/", ["url_malformed:whitespace"]),
        ("http://h\\@evil/a", ["url_malformed:backslash"]),
        ("http:u:p@h/", ["url_malformed:slashes"]),
        ("javascript:alert(1)", ["url_malformed:scheme"]),
        ("/a2a", ["url_malformed:no_scheme"]),
        ("http://xn--a.com/", ["url_malformed:idna"]),
        ("http://" + "a" * 64 + "\u00e9.test/", ["url_malformed:idna"]),
        ("http://h<x>/", ["url_malformed:host"]),
        ("http://h/" + "a" * 9000, ["url_malformed:too_long"]),
    ],
)
def test_problems_name_what_is_odd(url: str, found: list[str]) -> None:
    assert urls.anomalies(url) == found


def test_anomalies_say_where() -> None:
    assert urls.anomalies("http://h:x/", "mcp.url") == ["url_malformed:port:mcp.url"]
    assert urls.anomalies(None) == []


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://u:p@h:81/a", ("h", 81)),
        ("https://H.Test/a", ("h.test", 443)),
        ("http://[::1]:9/a", ("::1", 9)),
        ("http://h:99999/a", ("h", None)),
        ("http://h:abc/a", ("h", None)),
        ("http://[::1/a", ("[::1", 80)),
        ("javascript:alert(1)", (None, None)),
        ("ws://h/", ("h", 80)),
    ],
)
def test_host_port(url: str, expected: tuple[str | None, int | None]) -> None:
    assert urls.host_port(url) == expected


@pytest.mark.parametrize(
    "url",
    [
        "http://user:SECRET1#@host/",  # the password lands in the port position of every parser
        "http://user:SECRET1?@host/x",
        "http://user:SECRET1/@host/",
        "http:/\\user:SECRET1@host/",  # WHATWG: a backslash is a slash, so this has userinfo
        "http:user:SECRET1@host/x",
        "http://[::1/?token=SECRET1",  # not parseable by urlsplit: the query was left whole
        "http://h/a?x=\udcff&token=SECRET1",  # urlencode raised on the surrogate
        "http://h/a?to\nken=SECRET1",  # WHATWG drops the line break: the client sent `token=`
        "http://u:SECRET1\\@h/",
    ],
)
def test_credentials_go_whatever_shape_the_url_has(url: str) -> None:
    clean = redact_url(url)
    assert "SECRET1" not in clean
    urlsplit(clean)


def test_a_redacted_query_keeps_what_is_not_a_credential_byte_for_byte() -> None:
    assert redact_url("https://h/a?q=a%20b+c&token=T&x") == f"https://h/a?q=a%20b+c&token={REDACTED}&x"


URLISH = st.lists(
    st.sampled_from(
        [
            "http",
            "https",
            "javascript",
            ":",
            "//",
            "/",
            "\\",
            "@",
            "[",
            "]",
            "::1",
            "%25",
            "%",
            "?",
            "#",
            "&",
            "=",
            "token",
            "user",
            "pw",
            ":80",
            ":99999",
            ":x",
            "\udcff",
            "\x00",
            " ",
            "\n",
            "\u00e9",
            "xn--",
            ".",
            "h",
            ";",
            "\x7f",
            "[::",
            "%7F",
            "tenant-acme",
        ]
    )
    | st.text(max_size=4),
    max_size=14,
).map("".join)
URLS = st.tuples(st.sampled_from(["http://", "https://", "http:", "ws://", ""]), URLISH).map("".join)


@settings(derandomize=True, max_examples=1500, deadline=None)
@given(URLS)
def test_any_text_parses_and_redacts_to_something_urlsplit_reads(url: str) -> None:
    u = urls.parse(url)
    assert all(isinstance(p, str) for p in u.problems)
    urls.host_port(url)
    for redaction in (Redaction(), Redaction.from_patterns([r"tenant-(\w+)"])):
        clean = redaction.url(url)
        urlsplit(clean)
        clean.encode("utf-8")  # storable: no lone surrogates
        assert urls.parse(clean).userinfo is None
        if u.host or u.opaque:  # (without a host, `http:////x` is read again as `http://x`)
            assert redaction.url(clean) == clean  # a stored URL redacted again (a re-ingest) stays put


def _exchange(url: str) -> Any:
    from converse_tap.a2a.exchange import HttpExchange
    from converse_tap.a2a.headers import Headers

    body = b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"ROLE_USER","messageId":"m"}}}'
    reply = b'{"jsonrpc":"2.0","id":1,"result":{"role":"ROLE_AGENT","messageId":"r","parts":[{"text":"ok"}]}}'
    json_headers = Headers([("content-type", "application/json")])
    return HttpExchange(
        "x", "POST", url, json_headers, body, status=200, response_headers=json_headers, response_body=reply
    )


@pytest.mark.parametrize(
    "url", ["http://u:SECRET1@[::1/a2a", "http://[/", "http://h\uff03x/a2a", "http://W]:443/message:send"]
)
def test_an_exchange_with_a_broken_url_is_kept_with_an_anomaly(url: str) -> None:
    """classify's and agent_of's urlsplit raised "Invalid IPv6 URL": the worker's failure row too (its
    fallback parsed the same URL), so the exchange was lost."""
    from converse_tap.a2a.exchange_row import failed_extraction
    from converse_tap.a2a.extract import extract
    from converse_tap.a2a.redact import TextPolicy

    ext = extract(_exchange(url), TextPolicy())
    assert ext is not None
    row = ext.exchange
    assert any(a.startswith("url_malformed:") for a in row["anomalies"])
    assert "SECRET1" not in repr(row)
    failed = failed_extraction(_exchange(url), ValueError("x")).exchange
    assert "SECRET1" not in repr(failed)


@pytest.mark.parametrize(
    "text",
    [
        "connect to http:/\\u:SECRET1@h/x failed",
        "connect to http:u:SECRET1@h/x failed",
        "see https://h\\u:SECRET1@evil/x",
    ],
)
def test_log_text_reads_the_urls_a_whatwg_parser_reads(text: str) -> None:
    """Error messages and log lines: `http:/\\u:pw@h` is a URL with userinfo to a browser or an SDK, and was
    left whole (only `scheme://` was looked for)."""
    from converse_tap.a2a.redact import NO_OPERATOR_PATTERNS

    assert "SECRET1" not in NO_OPERATOR_PATTERNS.log_text(text)


def test_extension_uris_are_redacted() -> None:
    """Extension URIs (the A2A-Extensions header, a message's `extensions`) were stored as sent."""
    from converse_tap.a2a.headers import split_uris

    assert split_uris(["https://ext.test/x?token=SECRET1, https://u:SECRET2@ext.test/y"]) == [
        f"https://ext.test/x?token={REDACTED}",
        "https://ext.test/y",
    ]


def test_card_and_citation_urls_carry_their_anomalies() -> None:
    """Odd URLs in a card (interfaces, MCP) or a citation were redacted but not flagged."""
    from converse_tap.a2a.card import card_fields
    from converse_tap.a2a.envelope import flatten_envelope
    from tests.factories import EXT

    card = {
        "name": "c",
        "supportedInterfaces": [
            {"url": "http://[::1/a2a", "protocolBinding": "JSONRPC"},
            {"url": "grpc.test:443", "protocolBinding": "GRPC"},
        ],
        "capabilities": {"extensions": [{"uri": EXT, "params": {"mcp": {"url": "javascript:alert(1)"}}}]},
    }
    anomalies: list[str] = []
    card_fields(card, anomalies)
    assert "url_malformed:ipv6:interfaces[0].url" in anomalies
    assert "url_malformed:scheme:mcp.url" in anomalies
    assert not any("interfaces[1]" in a for a in anomalies)
    notes: list[str] = []
    flatten_envelope({"citations": [{"sourceUrl": "https://h:x/\udcff"}]}, notes)
    assert notes == [
        "url_not_utf8:citations[].sourceUrl",
        "url_malformed:port:citations[].sourceUrl",
        "missing:citations[].documentId",
        "missing:author",
    ]


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://h/a?a=1;token=SECRET1;b=2&c=3", f"http://h/a?a=1;token={REDACTED};b=2&c=3"),
        ("http://h/a?q=1;%74oken=SECRET1", f"http://h/a?q=1;%74oken={REDACTED}"),
        ("http://h/a?token=abc;SECRET1", f"http://h/a?token={REDACTED}"),
        ("http://h/a?x=a;b", "http://h/a?x=a;b"),
    ],
)
def test_query_parameters_after_a_semicolon_are_read_too(url: str, expected: str) -> None:
    """Servers that split a query at `;` as well as `&` (Java servlet containers, older CGI) read `token` in
    `?a=1;token=…`: its value was kept, as part of `a`'s."""
    assert redact_url(url) == expected


def test_the_path_is_the_request_target_as_sent() -> None:
    """mitmproxy records the request target as the server received it: a backslash in the host must not move
    the path (`http://h\\x:9000/lf.a2a.v1.A2AService/SendMessage` was read with the path `/x:9000/lf…`, so the
    gRPC call was not recognised and not recorded), nor is a backslash in the path a slash to the server."""
    assert urls.parse("http://h\\x:9000/lf.a2a.v1.A2AService/SendMessage").path == "/lf.a2a.v1.A2AService/SendMessage"
    assert urls.parse("http://h/a\\b/message:send").path == "/a\\b/message:send"
    assert urls.anomalies("http://h\\x:9000/a") == ["url_malformed:backslash", "url_malformed:host"]


def test_an_operator_pattern_that_matches_in_the_host_costs_nothing() -> None:
    """`--redact 'tenant-(\\w+)'` against an agent at `tenant-acme.agents.test`: the agent URL became
    `http://tenant-[REDACTED].agents.test/…`, whose brackets `urlsplit` reads as a broken IPv6 literal, so the
    agent key raised and every exchange with that agent was a failure row."""
    from converse_tap.a2a.extract import extract
    from converse_tap.a2a.redact import Redaction, TextPolicy

    redaction = Redaction.from_patterns([r"tenant-(\w+)"])
    ext = extract(_exchange("http://tenant-acme.agents.test/a2a/jsonrpc"), TextPolicy(), redaction=redaction)
    assert ext is not None
    row = ext.exchange
    assert "acme" not in row["url"] + row["agent"] + row["agent_url"]
    assert row["agent"] == "tenant-%5BREDACTED%5D.agents.test/a2a/jsonrpc"
    assert row["url"] == row["agent_url"] == "http://tenant-%5BREDACTED%5D.agents.test/a2a/jsonrpc"
    assert urlsplit(row["url"]).hostname  # raised when the host was stored as `tenant-[REDACTED]…`


def test_short_urls_are_parsed_once() -> None:
    """classify reads every exchange's URL with `urls.parse` (13 µs, where `urlsplit`, with its cache, took
    0.3): short URLs come from a cache; long ones never enter it, so distinct long URLs cannot grow it."""
    from converse_tap.a2a.urls import _parse_cached

    url = "http://agent.test:9000/a2a/jsonrpc/cache-test"
    assert urls.parse(url) is urls.parse(url)
    size = _parse_cached.cache_info().currsize
    long = "http://agent.test/" + "a" * 600
    assert urls.parse(long) == urls.parse(long)
    assert _parse_cached.cache_info().currsize == size


@pytest.mark.parametrize(
    ("url", "stored", "agent", "endpoint"),
    [
        ("http://::1/a2a", "http://[::1]/a2a", "[::1]/a2a", ("::1", 80)),
        ("http://::1:8080/a2a", "http://[::1]:8080/a2a", "[::1]:8080/a2a", ("::1", 8080)),
        ("https://2001:db8::1/a", "https://[2001:db8::1]/a", "[2001:db8::1]/a", ("2001:db8::1", 443)),
    ],
)
def test_an_ipv6_host_as_mitmproxy_writes_it(url: str, stored: str, agent: str, endpoint: tuple[str, int]) -> None:
    """mitmproxy's `Request.url` (and the worker, which builds URLs the same way) writes an IPv6 host without
    brackets: `http://::1:8080/a2a`. Read as host and port, it is stored bracketed, with no anomaly (this parser
    read it as an empty host with the port `:1:8080`, dropped it, and stored `http:///a2a`)."""
    from converse_tap.a2a.extract import agent_of

    assert urls.anomalies(url) == []
    assert redact_url(url) == stored
    assert agent_of(stored)[0] == agent
    assert urls.host_port(url) == endpoint


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        # names that suggest a password or a signature
        (
            "https://h/a?user=bob&pass=S1&pw=S2&passcode=S3&hmac=S4",
            "https://h/a?user=bob&pass={R}&pw={R}&passcode={R}&hmac={R}",
        ),
        ("https://h/a?passport=p&bypass=1&page=2", "https://h/a?passport=p&bypass=1&page=2"),
        # one-time passwords, CAS service tickets, SAML assertions (a signed login)
        (
            "https://h/a?otp=S1&ticket=ST-S2&SAMLResponse=PHNhbWw%2B&RelayState=r",
            "https://h/a?otp={R}&ticket={R}&SAMLResponse={R}&RelayState=r",
        ),
        # percent-encoded credentials in the path: decoded (a few rounds) before the checks; what is clean stays
        ("https://h/a/eyJhbGciOiJIUzI1NiJ9%2EeyJzdWIiOiIxMjM0NTY3ODkwIn0%2EsigSECRET1/x", "https://h/a/{R}/x"),
        ("https://h/a/sk%2DSECRET1abcdefghijklmn", "https://h/a/{R}"),
        ("https://h/a/%74oken/SECRET1/x", "https://h/a/%74oken/{R}/x"),
        ("https://h/a/%2574oken/SECRET1", "https://h/a/%2574oken/{R}"),
        ("https://h/T1;%74oken=SECRET1/x", "https://h/T1;token={R}/x"),
        ("https://h/a%20b/c%2Fd/%2E%2E/e?x=1", "https://h/a%20b/c%2Fd/%2E%2E/e?x=1"),
        # a URL inside a query value, encoded or not
        (
            "https://h/?next=https%3A%2F%2Fa.test%2Fcb%3Fcode%3DS1&x=1",
            "https://h/?next=https://a.test/cb%3Fcode%3D{R}&x=1",
        ),
        ("https://h/?cb=https%3A%2F%2Fu%3AS1%40a.test%2F", "https://h/?cb=https://a.test/"),
        ("https://h/?cb=https%253A%252F%252Fu%253AS1%2540a.test%252F", "https://h/?cb=https://a.test/"),
        ("https://h/?back=/cb?code=S1", "https://h/?back=/cb?code={R}"),
        ("https://h/?n=https%3A%2F%2Fa.test%2F%23access_token%3DS1", "https://h/?n=https://a.test/"),
        (
            "https://h/?a=https://x/?b=https://y/?c=https://z/?d=https://w/?token=S1",
            "https://h/?a=https://x/?b=https://y/?c=https://z/?d={R}",
        ),
        ("https://h/?next=https%3A%2F%2Fa.test%2Fp%3Fq%3D1%23top&email=ann@example.com&p=/a%20b", None),
        # userinfo without a scheme before a host and a port (gRPC interfaces); an address stays
        ("user:S1@grpc.agent.test:443", "grpc.agent.test:443"),
        ("bot@grpc.agent.test:443/x", "grpc.agent.test:443/x"),
        ("ann@example.com", None),
        ("mailto:ann@example.com", None),
        ("sip:bob@x.test:5060", None),
        ("grpc.agent.test:443", None),
    ],
)
def test_credentials_hidden_by_encoding_nesting_or_a_missing_scheme_go(url: str, expected: str | None) -> None:
    want = url if expected is None else expected.replace("{R}", REDACTED)
    assert redact_url(url) == want
    assert redact_url(want) == want  # a stored URL redacted again stays put
    if "//" in url:
        urlsplit(want)
