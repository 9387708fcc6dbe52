"""Credentials that still reached a stored column or the log (a fourth hunt, 2026-12-06).

The third hunt (`tests/test_secrets_hunt3.py`) left three known leaks: credentials written in base64 (a `Basic`
credential outside an `Authorization` header, a JSON blob or a `data:` URL holding a token), header lists written as
`[name, value]` pairs, and word-like tokens after `Bearer`. This one also found header maps as Go prints them
(`map[Authorization:[…] X-Api-Key:[…]]`), header lists as mitmproxy, Python and gRPC print them, name/value members
quoted in text (`Metadata(key='x-api-key', value='…')`), PHP's and Ruby's `'password' => '…'`, and the half of an
AWS secret key that a value clipped for an anomaly kept. Each test runs the code the proxy's worker and `ingest` run
(`extract`, `LogRedactor`) and asserts that no planted secret is in any column of any row; the last ones assert that
ordinary base64, tags and prose stay as they came, and that the new rules scan in linear time.
"""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from converse_tap.a2a.extract import extract
from converse_tap.a2a.redact import REDACTED, TextPolicy, redact_card_json, stored_json
from converse_tap.addon.flows import exchange_from_flow
from tests.children import finishes_within
from tests.factories import EXT, a2a_flow, agent_message, envelope, jsonrpc_result
from tests.test_secrets_hunt import _card, _leaks, _logged
from tests.test_secrets_hunt2 import (
    _AROUND,
    _DELIMITED,
    _REDACTIONS,
    _everywhere_text,
    _leaked,
    assert_planted_gone,
    assert_unchanged,
)

WORD = "sunshinez"  # a word-like secret: no digit, no capital, no rare letter pairs


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _b64url(text: str) -> str:
    return base64.urlsafe_b64encode(text.encode()).decode().rstrip("=")


def _in_documents(doc: Any) -> list[Any]:
    """An envelope's detail and a card's extension params holding `doc`."""
    return [
        a2a_flow(response=jsonrpc_result({"message": agent_message(env=envelope(detail=doc))})),
        _card(capabilities={"extensions": [{"uri": EXT, "params": doc}]}),
    ]


# -- 1. credentials written in base64 -------------------------------------------------------------------------------

_BASIC = _b64(f"ann:{WORD}")
_JWT_PAYLOAD = _b64url(json.dumps({"password": WORD}))
_CUT = _b64(json.dumps({"refresh_token": WORD + "and more text after it"}))[:40]
# the text, and the base64 in it that must go
ENCODED = {
    "basic alone": (f"Basic {_BASIC}", _BASIC),
    "basic in prose": (f"retried with basic {_BASIC} and failed", _BASIC),
    "json blob": ("cursor " + _b64(json.dumps({"access_token": WORD, "page": 2})), None),
    "json blob, url-safe, unpadded, non-ASCII": (_b64url(json.dumps({"password": WORD, "name": "Zoë ?>"})), None),
    "data url": ("data:application/json;base64," + _b64(json.dumps({"token": WORD})), None),
    "form pairs": (_b64(f"user=ann&password={WORD}"), None),
    "a url with userinfo": (_b64(f"https://ann:{WORD}@db.test/x"), None),
    "an Authorization header": (_b64(f"Authorization: Bearer {WORD}"), None),
    "base64 in base64": (_b64("state " + _b64(json.dumps({"client_secret": WORD}))), None),
    "a JWT-like value with another header": (f"ewogICJhbGciOiAibm9uZSIKfQ.{_JWT_PAYLOAD}", _JWT_PAYLOAD),
    "cut short": (f"error: {_CUT}…+40", _CUT),
}


@pytest.mark.parametrize("name", sorted(ENCODED))
def test_a_credential_written_in_base64_goes(name: str) -> None:
    """What a rule finds in text it did not find once the text was base64-encoded (a `state`, a cursor, a `data:`
    URL, a header value), nor a `Basic` credential outside an `Authorization` header: each was stored whole."""
    text, encoded = ENCODED[name]
    secret = (encoded or text.rsplit(" ", 1)[-1].rsplit(",", 1)[-1])[:16]
    for redaction in _REDACTIONS:
        clean = redaction.log_text(text)
        assert secret not in clean and REDACTED in clean
        assert redaction.log_text(clean) == clean
    flows = [*_everywhere_text(text), *_in_documents({"state": text}), _card(url=f"https://agent.test/a2a?s={text}")]
    assert _leaked(flows, secret) == []
    assert secret not in _logged(text)


def test_base64_in_a_url_path_or_query_goes() -> None:
    blob = _b64url(json.dumps({"token": WORD}))
    for url, expected in [
        (f"https://agent.test/cb?state={blob}&page=2", f"https://agent.test/cb?state={REDACTED}&page=2"),
        (f"https://agent.test/cb/{blob}/done", f"https://agent.test/cb/{REDACTED}/done"),
    ]:
        for redaction in _REDACTIONS:
            assert redaction.url(url) == expected
        path = url.split("agent.test", 1)[1]
        assert _leaked([a2a_flow(path=path, response=jsonrpc_result({"message": agent_message()}))], blob) == []


ORDINARY_BASE64 = [
    _b64(json.dumps({"page": 2, "sort": "date"})),  # a cursor of ordinary JSON
    _b64("arrayconnection:5"),  # a Relay cursor
    _b64("ann:reader"),  # `user:role`: not after `Basic`, so no credential
    base64.b64encode(bytes(range(48))).decode(),  # binary data
    base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(40)).decode(),  # an image
    _b64("the password policy requires 12 characters"),
    "Basic authentication is required",
    "CgRhYmMxMjM0NTY3ODk",  # a page token
    "0f8fad5b-d9cb-469f-a165-70867728950e",
    "internationalization and processincomingevents",
]


@pytest.mark.parametrize("text", ORDINARY_BASE64)
def test_base64_of_ordinary_data_stays(text: str) -> None:
    assert_unchanged(text)
    assert_unchanged(f"data:application/octet-stream;base64,{text}")


# -- 2. header lists written as [name, value] pairs -------------------------------------------------------------


def test_a_header_list_of_pairs_in_a_stored_document_loses_its_secret_values() -> None:
    """`[["Authorization", "Bearer …"], ["X-Api-Key", "…"]]` (a header list as Go, Node and Python write one) was
    stored whole: only `{"name": …, "value": …}` pairs were read. A two-word list (a skill's tags) stays."""
    doc = {
        "headers": [["Authorization", f"Bearer {WORD}"], ["X-Api-Key", WORD + "k"], ["Accept", "*/*"]],
        "cookies": [["sessionid", WORD + "c"]],
        "setCookie": [["Set-Cookie", [WORD + "s", "b=1"]]],
        "tags": ["token", "password"],
        "pairsOfWords": [["token", 5], ["page", "2"]],
    }
    assert _leaked(_in_documents(doc), WORD) == []
    assert json.loads(redact_card_json(doc)) == {
        "headers": [["Authorization", REDACTED], ["X-Api-Key", REDACTED], ["Accept", "*/*"]],
        "cookies": [["sessionid", REDACTED]],
        "setCookie": [["Set-Cookie", [REDACTED, REDACTED]]],
        "tags": ["token", "password"],
        "pairsOfWords": [["token", 5], ["page", "2"]],
    }
    plain = {"tags": ["token", "password"], "skills": [["api_key", 3]]}
    assert redact_card_json(plain) == stored_json(plain)


PAIRS = [
    (f"Headers[(b'Host', b'agent.test'), (b'X-Api-Key', b'{WORD}')]", "b'[REDACTED]'"),
    (f"[('Host', 'h'), ('X-Api-Key', '{WORD}')]", "('X-Api-Key', '[REDACTED]')"),
    (f"metadata=(('x-api-key', '{WORD}'),)", "(('x-api-key', '[REDACTED]'),)"),
    (f'[["Host", "h"], ["X-Api-Key", "{WORD}"]]', '["X-Api-Key", "[REDACTED]"]'),
    (json.dumps({"e": json.dumps([["Cookie", f"sid={WORD}"]])}), '\\"[REDACTED]\\"'),
    (f"map[Host:[h] X-Api-Key:[{WORD}]]", "X-Api-Key:[[REDACTED]]"),
    (f"{{'X-Api-Key': ['{WORD}']}}", "['[REDACTED]']"),
    (f"Metadata(key='x-api-key', value='{WORD}')", "value='[REDACTED]'"),
    (json.dumps({"headers": [{"name": "X-Api-Key", "value": WORD}]}), '"value": "[REDACTED]"'),
    (f"array('password' => '{WORD}', 'user' => 'ann')", "'password' => '[REDACTED]', 'user' => 'ann'"),
    (f'{{:api_key => "{WORD}"}}', ':api_key => "[REDACTED]"'),
]


@pytest.mark.parametrize(("text", "kept"), PAIRS)
def test_header_lists_quoted_in_text_lose_their_secret_values(text: str, kept: str) -> None:
    """Headers and metadata as HTTP and gRPC stacks print them in their errors: the name is a value there (`('X-Api-
    Key', '…')`), or takes a list (`X-Api-Key:[…]`) or a `=>`, and the value after it was kept."""
    for redaction in _REDACTIONS:
        clean = redaction.log_text(text)
        assert WORD not in clean and kept in clean
        assert redaction.log_text(clean) == clean
    assert _leaked(_everywhere_text(text), WORD) == []
    assert WORD not in _logged(text)


# -- 3. word-like tokens after `Bearer` ---------------------------------------------------------------------------

BEARERS = [
    (f"Bearer {WORD}", f"Bearer {REDACTED}"),
    (f"the header was Bearer {WORD}.", f"the header was Bearer {REDACTED}."),
    (f"map[Authorization:[Bearer {WORD}]]", f"map[Authorization:[Bearer {REDACTED}]]"),
    (f"map[Authorization:[Token {WORD}]]", f"map[Authorization:[Token {REDACTED}]]"),
    (f"(('authorization', 'Bearer {WORD}'),)", f"(('authorization', 'Bearer {REDACTED}'),)"),
    (f'http.Header{{"Authorization":[]string{{"Bearer {WORD}"}}}}', f'[]string{{"Bearer {REDACTED}"}}'),
    (f'{{\\"Authorization\\": \\"Bearer {WORD}\\"}}', f'\\"Bearer {REDACTED}\\"'),
    (f"authorization bearer {WORD}", f"authorization bearer {REDACTED}"),
    ("Bearer zyx1", f"Bearer {REDACTED}"),  # (no hex: ids in the rows are hex)
]


@pytest.mark.parametrize(("text", "expected"), BEARERS)
def test_a_word_like_bearer_token_goes(text: str, expected: str) -> None:
    """`Bearer sunshinez` was kept wherever no `Authorization:` stood right before it (a header map, a tuple, an
    escaped JSON string): a token after `Bearer` went only with a digit in 8+ characters or when it looked
    generated."""
    for redaction in _REDACTIONS:
        clean = redaction.log_text(text)
        assert expected in clean and WORD not in clean
        assert redaction.log_text(clean) == clean
    assert _leaked([*_everywhere_text(text), *_in_documents({"note": text})], WORD, "zyx1") == []


@pytest.mark.parametrize(
    "text",
    [
        "Bearer tokens only; Bearer authentication failed",
        "use the Bearer scheme, not Basic authentication",
        "token_type=Bearer expires_in=3600",
        '"token_type": "Bearer"',
        'WWW-Authenticate: Bearer realm="agent", error="invalid_token"',
        "the bearer of bad news",
        "Bearer token required",
        "a Bearer JWT in the header",
    ],
)
def test_what_is_said_about_bearer_stays(text: str) -> None:
    assert_unchanged(text)


# -- 4. push-notification configs as SDKs print them -------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        # Go's `%+v`: `Token:…` with no space after its colon is a field, not prose (`Token: expired` stays)
        f"&{{ID:cfg-1 URL:https://client.test/cb Token:{WORD} Authentication:{{Schemes:[Bearer] Credentials:{WORD}}}}}",
        f"PushNotificationConfig(url='https://client.test/cb', token='{WORD}', "
        f"authentication=AuthenticationInfo(schemes=['Bearer'], credentials='{WORD}'))",
        f'push_notification_config {{ url: "https://client.test/cb" token: "{WORD}" '
        f'authentication {{ schemes: "Bearer" credentials: "{WORD}" }} }}',
        json.dumps(
            {
                "pushNotificationConfig": {
                    "url": "https://client.test/cb",
                    "token": WORD,
                    "authentication": {"credentials": [WORD]},
                }
            }
        ),
    ],
)
def test_a_push_config_printed_by_an_sdk_loses_its_token_and_credentials(text: str) -> None:
    """A push config an agent quotes in an error, as Go, Python, protobuf's text format or JSON print it: Go's
    `Token:sunshinez` was read as prose (`Token: expired`), where a weak name's word-like value stays."""
    for redaction in _REDACTIONS:
        clean = redaction.log_text(text)
        assert WORD not in clean and "client.test/cb" in clean
        assert redaction.log_text(clean) == clean
    assert _leaked(_everywhere_text(f"push config refused: {text}"), WORD) == []
    assert_unchanged("Token: expired, session: 3 of 5")


# -- 5. half an AWS secret key kept by a clipped value --------------------------------------------------------------


def test_an_aws_key_pair_cut_by_an_anomaly_loses_what_is_left_of_its_secret() -> None:
    """An unknown method is quoted in an anomaly clipped to 100 characters (`…+N` after it): the AWS pair rule wanted
    the whole 40-character secret key, so its first characters were stored with the key id redacted."""
    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    method = "x" * 70 + f" AKIAIOSFODNN7EXAMPLE {secret}"
    body = json.dumps({"jsonrpc": "2.0", "id": "r-1", "method": method, "params": {}}).encode()
    flow = a2a_flow(body=body, response=jsonrpc_result({}))
    assert _leaks(flow, secret[:6]) == []


# -- 6. every new form, any surroundings; a fixed point; linear time -----------------------------------------------

_PLANTS = st.sampled_from(
    [
        "Bearer plantsecretone",
        "Basic " + _b64("ann:plantsecretone"),
        _b64(json.dumps({"token": "plantsecretone"})),
        "[('X-Api-Key', 'plantsecretone')]",
        "map[X-Api-Key:[plantsecretone]]",
        "'password' => 'plantsecretone'",
        "Metadata(key='authorization', value='plantsecretone')",
        "Token:plantsecretone",
    ]
)


@given(_AROUND, _DELIMITED, _PLANTS, _DELIMITED, _AROUND)
def test_a_planted_secret_of_the_new_forms_never_survives_its_surroundings(
    before: str, left: str, plant: str, right: str, after: str
) -> None:
    assert_planted_gone(before + left + plant + right + after, "plantsecretone", "cGxhbnRzZWNyZXRvbm")


def test_the_new_rules_run_in_linear_time() -> None:
    """Each new rule on 400 KB crafted against it: base64 runs that decode to text at every length (many short runs,
    one long run, base64 nested as deep as it goes, runs cut by `/`), `Basic` before every word, pairs and members
    that never close, list values and `=>` after every name, `Bearer` before every word, key ids before clipped
    secrets. A quadratic scan takes minutes; a linear one about a second each. In a child process, killed after
    60 s."""
    code = (
        "import base64\n"
        "from converse_tap.a2a.redact import Redaction\n"
        "n = 400_000\n"
        "nested = 'token=x'\n"
        "while len(nested) < n:\n"
        "    nested = base64.b64encode(nested.encode()).decode()\n"
        "run = base64.b64encode(b'token=abcdefgh').decode()\n"
        "texts = [(run + ' ') * (n // 21), run * (n // 20), nested, base64.b64encode(b'a' * n).decode(),\n"
        "         'QUJDREVGR0hJSktM/' * (n // 17), 'Basic ' * (n // 6), 'Basic QTpi ' * (n // 11),\n"
        "         \"[('token', '\" * (n // 12), \"(b'token', b'x\" * (n // 14), \"key='token', value='\" * (n // 20),\n"
        "         '\"name\": \"token\", ' * (n // 17), 'token:[' * (n // 7), 'token: [ ' * (n // 9),\n"
        "         \"'token' => \" * (n // 11), 'token=>' * (n // 7), 'Bearer ' * (n // 7), 'Bearer a ' * (n // 9),\n"
        "         'Authorization:[' * (n // 15), ('AKIAAAAAAAAAAAAAAAAA ' + 'A' * 39 + '\\u2026') * (n // 61),\n"
        "         'AKIAAAAAAAAAAAAAAAAA ' + 'A' * n]\n"
        "for r in (Redaction(), Redaction.from_patterns(['zz'])):\n"
        "    for text in texts:\n"
        "        r.log_text(text)\n"
        "        r.url(text)\n"
        "print('done')\n"
    )
    finishes_within(code, 60, "the rules of redact_b64, redact_pairs and the Bearer rule on 400 KB of crafted text")


def test_conversation_data_around_the_new_rules_is_stored_as_it_came() -> None:
    """A reply whose envelope holds ordinary base64 (a cursor, a thumbnail), tags named like credentials and a
    note about Bearer authentication is stored byte for byte."""
    env = envelope(
        detail={
            "cursor": _b64(json.dumps({"page": 2})),
            "thumbnail": "data:image/png;base64," + base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(30)).decode(),
            "tags": ["token", "password"],
            "note": "Bearer authentication is required",
        }
    )
    flow = a2a_flow(response=jsonrpc_result({"message": agent_message(env=env)}))
    ext = extract(exchange_from_flow(flow), TextPolicy())
    assert ext is not None
    assert ext.messages[-1]["envelope_json"] == stored_json(env)
