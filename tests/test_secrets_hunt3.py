"""Credentials that still reached a stored column or the log (a third hunt, 2026-12-06).

The first two hunts (`tests/test_secrets_hunt.py`, `tests/test_secrets_hunt2.py`) closed URLs, echoed headers,
connection strings, cookies, push configs and token shapes. What was left: a credential named only in prose whose
value does not look random (`Password: hunter`, `the password is correcthorse`, `the API key is …`), JSON text
escaped more than once inside a JSON string, tokens of lower-case letters only (after `Bearer`, `Token:`, in a
webhook's path), and an `Authorization` header kept as a key of a stored document. Each test runs the code the
proxy's worker and `ingest` run (`extract`, `LogRedactor`) and asserts that no planted secret is in any column of
any row; the last ones assert that prose about credentials stays readable, and that the new rules scan in linear
time.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from converse_tap.a2a.redact import REDACTED, Redaction, redact_card_json, stored_json
from converse_tap.a2a.redact_prose import looks_generated, random_letters
from tests.children import finishes_within
from tests.factories import EXT, a2a_flow, agent_message, envelope, jsonrpc_result
from tests.test_secrets_hunt import _card, _logged
from tests.test_secrets_hunt2 import (
    _AROUND,
    _DELIMITED,
    _REDACTIONS,
    _everywhere_text,
    _leaked,
    assert_planted_gone,
    assert_unchanged,
)

# tokens of lower-case letters only, as `random.choices(string.ascii_lowercase)` or a careless client makes them
LOWER_TOKEN = "qzvkxjwhtbpfmgdlrnyc"
LOWER_TOKEN2 = "vkqxwzjbfhpgtmdnlcrs"


# -- 1. a credential named in prose, whatever its value looks like -------------------------------------------------

PROSE = [
    ("Password: hunter", "hunter", "Password: [REDACTED]"),
    ("login failed: password is correcthorse", "correcthorse", "login failed: password is [REDACTED]"),
    ("the password was swordfish.", "swordfish", "the password was [REDACTED]."),
    ("login with password 'hunter' refused", "hunter", "login with password '[REDACTED]' refused"),
    ('retry with password "hunter"', "hunter", 'retry with password "[REDACTED]"'),
    ("pwd=hunterpwd", "hunterpwd", "pwd=[REDACTED]"),
    ("Secret: swordfish, rotate it", "swordfish", "Secret: [REDACTED], rotate it"),
    ("passwd: letmein", "letmein", "passwd: [REDACTED]"),
    ("apiKey: abcdefghij", "abcdefghij", "apiKey: [REDACTED]"),
    ("the API key is abcdefghij", "abcdefghij", "the API key is [REDACTED]"),
    ("API key: abcdefghij (expired)", "abcdefghij", "API key: [REDACTED] (expired)"),
    ("client secret: abcdefghij", "abcdefghij", "client secret: [REDACTED]"),
    ("access token is abcdefghij", "abcdefghij", "access token is [REDACTED]"),
    ("Passphrase: correct horse battery staple", "horse battery", "Passphrase: [REDACTED]"),
    ("Password: Hunter2 is not allowed", "Hunter2", "Password: [REDACTED] is not allowed"),
    ("credentials: admin:admin", "admin:admin", "credentials: [REDACTED]"),
]


@pytest.mark.parametrize(("text", "secret", "expected"), PROSE)
def test_a_credential_named_in_prose_goes_whatever_it_looks_like(text: str, secret: str, expected: str) -> None:
    """`Password: hunter` was stored: a value in prose went only when it looked random (a digit, or mixed case in
    16 characters), so a word-like password, `password is …` and `password '…'` were kept in every free-text
    column and the log."""
    for redaction in _REDACTIONS:
        assert redaction.log_text(text) == expected
        assert redaction.log_text(expected) == expected
    assert _leaked(_everywhere_text(f"upstream said: {text}"), secret) == []
    assert secret not in _logged(text)


# -- 2. JSON text inside JSON text, escaped once or more ------------------------------------------------------------

_CONFIG = {"api_key": "escapedkeyvalue", "password": "escapedpassword", "url": "https://client.test/cb"}


@pytest.mark.parametrize("depth", [1, 2, 3, 4])
def test_json_escaped_any_number_of_times_loses_its_secret_values(depth: int) -> None:
    """An error that quotes a body holding a JSON string that holds JSON (`"{\\"error\\": \\"{\\\\\\"token…`): the
    keys of JSON escaped twice or more were not seen, and their values stored."""
    text = json.dumps(_CONFIG)
    for _ in range(depth):
        text = json.dumps({"error": f"bad config {text}"})
    message = f"upstream returned {text}"
    flows = [
        *_everywhere_text(message),
        a2a_flow(response=jsonrpc_result({"message": agent_message(env=envelope(detail={"raw": message}))})),
    ]
    assert _leaked(flows, "escapedkeyvalue", "escapedpassword") == []
    clean = Redaction().log_text(message)
    assert "client.test" in clean and clean.count(REDACTED) == 2


# -- 3. tokens of lower-case letters only ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (f"Bearer {LOWER_TOKEN}", f"Bearer {REDACTED}"),
        (f"call it with bearer {LOWER_TOKEN} please", f"call it with bearer {REDACTED} please"),
        (f"Authorization: {LOWER_TOKEN}", f"Authorization: {REDACTED}"),
        (f'{{"authorization": "{LOWER_TOKEN[:10]}"}}', f'{{"authorization": "{REDACTED}"}}'),
        (f"Token: {LOWER_TOKEN}", f"Token: {REDACTED}"),
        (f"the token is {LOWER_TOKEN}", f"the token is {REDACTED}"),
        (f"token {LOWER_TOKEN} expired", f"token {REDACTED} expired"),
        (f"X-A2A-Notification-Token: {LOWER_TOKEN}", f"X-A2A-Notification-Token: {REDACTED}"),
        (f"see https://h/cb?token={LOWER_TOKEN}", f"see https://h/cb?token={REDACTED}"),
        (
            f"POST https://client.test/webhooks/push/{LOWER_TOKEN} failed",
            f"POST https://client.test/webhooks/push/{REDACTED} failed",
        ),
    ],
)
def test_tokens_of_lower_case_letters_go(text: str, expected: str) -> None:
    """A token without digits or capitals was kept after `Bearer`, `Authorization:` and `Token:`, and in a webhook's
    path: each rule wanted a digit or mixed case."""
    for redaction in _REDACTIONS:
        assert redaction.log_text(text) == expected
        assert redaction.log_text(expected) == expected
    assert _leaked(_everywhere_text(text), LOWER_TOKEN, LOWER_TOKEN[:10]) == []


def test_a_push_config_with_lower_case_secrets_stores_none_of_them() -> None:
    config = {
        "url": f"https://client.test/a2a/webhooks/{LOWER_TOKEN}",
        "token": LOWER_TOKEN2,
        "authentication": {"schemes": ["Bearer"], "credentials": LOWER_TOKEN2},
    }
    card = _card(capabilities={"extensions": [{"uri": EXT, "params": {"push": config}}]})
    reply = a2a_flow(response=jsonrpc_result({"message": agent_message(env=envelope(detail={"push": config}))}))
    flows = [card, reply, *_everywhere_text(f"push refused: {json.dumps(config)}")]
    flows += _everywhere_text(f"delivery to client.test/a2a/webhooks/{LOWER_TOKEN} failed")
    assert _leaked(flows, LOWER_TOKEN, LOWER_TOKEN2) == []


def test_form_encoded_pairs_inside_a_query_value_lose_their_secret_values() -> None:
    """A form body or a state blob passed on percent-encoded in one query value (`?state=user%3Dann%26password%3D…`):
    its names were never read, only shapes and nested URLs were looked for in a value; nor in pairs written in one value
    (`?d=pwd=…`)."""
    url = "https://agent.test/cb?state=user%3Dann%26password%3Dformsecret%26n%3D1&q=password%20policy&d=pwd=formsecret"
    expected = (
        "https://agent.test/cb?state=user%3Dann%26password%3D[REDACTED]%26n%3D1&q=password%20policy&d=pwd=[REDACTED]"
    )
    for redaction in _REDACTIONS:
        assert redaction.url(url) == expected
        assert redaction.url(expected) == expected
    flows = [_card(documentationUrl=url), a2a_flow(path=url.split("agent.test", 1)[1], response=_REPLY)]
    assert _leaked(flows + _everywhere_text(f"redirect to {url} failed"), "formsecret") == []


_REPLY = jsonrpc_result({"message": agent_message()})


# -- 4. an Authorization header kept as a key of a stored document ------------------------------------------------


def test_an_authorization_header_inside_a_stored_document_goes() -> None:
    """`{"headers": {"Authorization": "Bearer …"}}` in an envelope's detail or a card's extension params: JSON keys
    were tested by the text-name rule, which has no `authorization`, and the value alone (`Bearer abc`, a token
    without a digit) matched no shape."""
    headers = {"Authorization": "Bearer shortsecret", "proxy-authorization": "Basic c2hvcnQ6c2VjcmV0", "accept": "*/*"}
    reply = a2a_flow(response=jsonrpc_result({"message": agent_message(env=envelope(detail={"headers": headers}))}))
    card = _card(capabilities={"extensions": [{"uri": EXT, "params": {"headers": headers}}]})
    assert _leaked([reply, card], "shortsecret", "c2hvcnQ6c2VjcmV0") == []
    doc = {"headers": headers}
    assert json.loads(redact_card_json(doc)) == {
        "headers": {"Authorization": REDACTED, "proxy-authorization": REDACTED, "accept": "*/*"}
    }
    card_doc = {"securitySchemes": {"oauth": {"flows": {"authorizationCode": {"authorizationUrl": "https://a/x"}}}}}
    assert redact_card_json(card_doc) == stored_json(card_doc)


def test_a_secret_name_paired_with_its_value_loses_the_value() -> None:
    """Headers, cookies and query strings as HAR writes them (`{"name": "Authorization", "value": "…"}`), an
    environment list (`{"name": "DB_PASSWORD", "value": …}`), tags (`{"Key": "api_key", "Value": …}`): the name is
    a value there, so no key was secret-named, and the credential was stored."""
    request = {
        "headers": [{"name": "Authorization", "value": "Bearer pairsecretone"}, {"name": "Accept", "value": "*/*"}],
        "cookies": [{"name": "sessionid", "value": "pairsecrettwo"}],
        "queryString": [{"name": "access_token", "value": "pairsecretthree"}, {"name": "page", "value": "2"}],
        "env": [{"name": "DB_PASSWORD", "value": "pairsecretfour"}],
        "tags": [{"Key": "api_key", "Value": "pairsecretfive"}],
    }
    reply = a2a_flow(response=jsonrpc_result({"message": agent_message(env=envelope(detail={"request": request}))}))
    card = _card(capabilities={"extensions": [{"uri": EXT, "params": {"request": request}}]})
    secrets = ("pairsecretone", "pairsecrettwo", "pairsecretthree", "pairsecretfour", "pairsecretfive")
    assert _leaked([reply, card], *secrets) == []
    clean = json.loads(redact_card_json(request))
    assert clean["headers"][1] == {"name": "Accept", "value": "*/*"}
    assert clean["queryString"] == [{"name": "access_token", "value": REDACTED}, {"name": "page", "value": "2"}]
    plain = {"params": [{"name": "token_count", "value": "12"}, {"name": "password", "value": 8}]}
    assert redact_card_json(plain) == stored_json(plain)  # a name about a credential, a number: they stay


# -- 5. what is no credential stays --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "the password policy requires 8 characters",
        "token bucket is empty, retry in 2 s",
        "Password: required",
        "Password: must be at least 12 characters",
        "Password: 8 characters minimum",
        "password is too short",
        "the password was changed yesterday",
        "Your password must contain a digit",
        "password reset link sent to ann@example.test",
        "the token is invalid or expired",
        "token: expired",
        "Token: the one we texted you",
        "API key: missing",
        "Enter your API key in settings",
        "the secret is that there is none",
        "secret: see the vault",
        "credentials: invalid",
        "client secret expired",
        "Bearer authentication is required",
        "use the Bearer scheme",
        "Authorization: required",
        "Authorization: denied",
        "fields: password: string, token: string",
        "session: 3 of 5 used",
        "processed 1234 tokens in 2 s",
        "https://h/webhooks/slack-notifications-v2/processincomingevents",
        "see the docs at /docs/webhooks/configuring-outgoing-webhooks",
        "a token of authentication",
    ],
)
def test_prose_about_credentials_stays_readable(text: str) -> None:
    assert_unchanged(text)


@pytest.mark.parametrize(
    ("value", "generated"),
    [
        (LOWER_TOKEN, True),
        ("abcdefghijklmnop", True),
        ("f3kq9zvbx7", True),
        ("AbCdEfGhIjKlMnOpQr", True),
        ("authentication", False),
        ("processincomingevents", False),
        ("internationalization", False),
        ("expired", False),
        ("Bearer", False),
        ("12345", False),
    ],
)
def test_what_looks_generated(value: str, generated: bool) -> None:
    assert looks_generated(value) is generated


def test_words_and_identifiers_hold_few_rare_letter_pairs() -> None:
    """The letter-pair rule on the words and identifiers of 12+ letters of Python's standard library (what reads as
    random there is mostly alphabets and ROT13 test data): under 1 in 100."""
    import re
    import sysconfig
    from pathlib import Path

    stdlib = Path(sysconfig.get_paths()["stdlib"])
    words: set[str] = set()
    for path in [*stdlib.glob("*.py"), *stdlib.glob("email/*.py"), *stdlib.glob("http/*.py")]:
        found = re.findall(r"(?<![A-Za-z0-9])[A-Za-z]{12,}(?![A-Za-z0-9])", path.read_text(errors="replace"))
        words.update(w.lower() for w in found)
    random_ones = sorted(w for w in words if random_letters(w))
    assert len(words) > 1000
    assert len(random_ones) <= len(words) // 100, random_ones


# -- 6. every new form, any surroundings; a fixed point; linear time ------------------------------------------------

_PLANTS = st.sampled_from(
    [
        "Password: plantsecretone",
        "password is plantsecretone",
        "password 'plantsecretone'",
        "the API key is plantsecretone",
        f"Bearer plantsecretone{LOWER_TOKEN}",
        f"Token: plantsecretone{LOWER_TOKEN}",
        '\\\\\\"password\\\\\\": \\\\\\"plantsecretone\\\\\\"',
        f"Authorization: plantsecretone{LOWER_TOKEN}",
    ]
)


@given(_AROUND, _DELIMITED, _PLANTS, _DELIMITED, _AROUND)
def test_a_planted_prose_secret_never_survives_its_surroundings(
    before: str, left: str, plant: str, right: str, after: str
) -> None:
    assert_planted_gone(before + left + plant + right + after, "plantsecretone")


def test_the_prose_rules_run_in_linear_time() -> None:
    """Each new rule on 400 KB crafted against it (names before every word, `is` chains, status words, quotes that
    never close, backslashes before quotes, long runs of letters after `Bearer` and in webhook paths). In a child
    process, killed after 60 s."""
    code = (
        "from converse_tap.a2a.redact import Redaction\n"
        "n = 400_000\n"
        "texts = ['password ' * (n // 9), 'password is ' * (n // 12), 'Password: required ' * (n // 19),\n"
        "         'Password: ' + 'a ' * (n // 2), 'password: hunter ' * (n // 17), 'api key: ' * (n // 9),\n"
        "         'api key ' * (n // 8), 'password \\'' * (n // 10), 'token ' + 'q' * n, 'Bearer ' + 'qz' * (n // 2),\n"
        "         'Bearer ' * (n // 7), '\\\\' * n + '\"token\": \"x\"', ('\\\\' * 15 + '\"token') * (n // 21),\n"
        "         'hooks.x/' + '/'.join(['qzvkxjwhtbpfmgdl'] * (n // 17)), 'Authorization: ' * (n // 15),\n"
        "         'secret ' + 'a.' * (n // 2), 'Password: ' + 'aaaaaaa.' * (n // 8), 'key ' * (n // 4)]\n"
        "for r in (Redaction(), Redaction.from_patterns(['zz'])):\n"
        "    for text in texts:\n"
        "        r.log_text(text)\n"
        "print('done')\n"
    )
    finishes_within(code, 60, "the prose rules of redact_named and redact_prose on 400 KB of crafted text")
