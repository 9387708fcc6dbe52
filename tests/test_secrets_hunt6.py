"""Credentials that still reached a stored column or the log (a sixth hunt, 2026-12-07).

The fifth hunt (`tests/test_secrets_hunt5.py`) left these: SMTP/IMAP/POP3 logins (`AUTH PLAIN <base64>`, whose
NUL-separated text the base64 rule refuses, `AUTH LOGIN` answers, `a001 LOGIN ann …`, `PASS …`), Markdown tables
(`| password | … |`, a column headed `password`), a folded `Authorization:` header, a header's pair without
brackets, `jwt.encode(p, '…')`, `CURLOPT_USERPWD, "ann:…"`, one-time codes and PINs in text; and the
`Authorization:` rule took a word of prose (`Authorization: manager approval needed`) while it let the token after a
vendor's own scheme through (`Authorization: SSWS <token>`). New places: XML and HTML (`<password>…</password>`,
WS-Security's `<wsse:Password>`, `<input type="password" value="…">`), private JSON Web Keys (`"d"`, `"p"`, `"q"`,
in text and in a stored card), names hidden by escapes (`&#112;assword=…`, `&quot;token&quot;`,
`"\\u0070assword"`), `DB_PASS=…`, and a Telegram bot's token that reads as a word. Each test runs the code the
proxy's worker and `ingest` run and asserts that no planted secret is in any column of any row and that the
marker is; the last ones assert that prose, code and markup without a credential stay, and that the new rules
scan in linear time.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path
from urllib.parse import quote

import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from converse_tap.a2a.extract import extract
from converse_tap.a2a.redact import REDACTED, TextPolicy, redact_card_json, redact_url, stored_json
from converse_tap.addon.flows import exchange_from_flow
from converse_tap.ingest import ingest
from tests.children import finishes_within
from tests.factories import a2a_flow, agent_message, envelope, jsonrpc_result
from tests.test_ingest import _entry, _har
from tests.test_secrets_hunt2 import _AROUND, _DELIMITED, assert_planted_gone, assert_unchanged
from tests.test_secrets_hunt4 import WORD  # a word-like secret: no digit, no capital, no rare letter pairs
from tests.test_secrets_hunt5 import _assert_gone


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


PLAIN = _b64(f"\0ann\0{WORD}")  # SASL PLAIN: authorization id, user and password separated by NUL bytes

# -- 1. what the fifth hunt left alone ---------------------------------------------------------------------------

LEFT_ALONE = [
    (f"C: AUTH PLAIN {PLAIN}\r\nS: 235 2.7.0 Authentication successful", "235 2.7.0", PLAIN),
    (f"AUTH PLAIN {_b64(f'ann\0ann\0{WORD}')}", "AUTH PLAIN", _b64(f"ann\0ann\0{WORD}")),
    (
        f"C: AUTH LOGIN\nS: 334 VXNlcm5hbWU6\nC: {_b64('ann')}\nS: 334 UGFzc3dvcmQ6\nC: {_b64(WORD)}",
        "AUTH LOGIN",
        _b64(WORD),
    ),
    (f"a001 LOGIN ann {WORD}\r\na001 OK LOGIN completed", "a001 OK", WORD),
    (f"USER ann\r\n+OK\r\nPASS {WORD}\r\n+OK logged in", "+OK logged in", WORD),
    (f"| user | password |\n|---|---|\n| ann | {WORD} |", "| ann |", WORD),
    (f"| Name | Value |\n|------|-------|\n| password | {WORD} |\n| user | ann |", "| user | ann |", WORD),
    (f"| password | {WORD} |", "| password |", WORD),
    (f"| Authorization | {WORD} |", "| Authorization |", WORD),
    (f"Authorization:\n  {WORD}", "Authorization:", WORD),
    (f"Authorization:\r\n\t{WORD}\r\n", "Authorization:", WORD),
    (f"header 'Authorization', '{WORD}'", "header 'Authorization'", WORD),
    (f'add_header "X-Api-Key", "{WORD}"', '"X-Api-Key"', WORD),
    (f"token = jwt.encode(payload, '{WORD}', algorithm='HS256')", "algorithm='HS256'", WORD),
    (f'jwt.encode({{"sub": "ann"}}, "{WORD}")', '"sub": "ann"', WORD),
    (f"jwt.sign(claims, '{WORD}')", "jwt.sign(claims", WORD),
    (f'curl_setopt($ch, CURLOPT_USERPWD, "ann:{WORD}");', "ann:", WORD),
    (f"curl_setopt($ch, CURLOPT_PASSWORD, '{WORD}');", "CURLOPT_PASSWORD", WORD),
    ("your otp=483920 expires in 5 minutes", "expires in 5 minutes", "483920"),
    ("PIN: 4839", "PIN: ", "4839"),
    ("the verification code is 771203.", "verification code is ", "771203"),
]


@pytest.mark.parametrize(("text", "kept", "secret"), LEFT_ALONE)
def test_what_the_fifth_hunt_left_alone_loses_its_credentials(text: str, kept: str, secret: str) -> None:
    _assert_gone(text, kept, secret)


@pytest.mark.parametrize(
    "text",
    [
        "250-AUTH PLAIN LOGIN XOAUTH2",
        "S: 250 AUTH LOGIN PLAIN CRAM-MD5",
        "PASS src/app.test.js (5.2 s)",
        "Then LOGIN with your account",
        "a001 OK LOGIN completed",
        "| Name | Type | Description |\n|---|---|---|\n| password | string | The user's password |",
        "| Parameter | Description |\n|---|---|\n| api_key | Your API key |\n| token | Access token |",
        "| Provider | API Key |\n|---|---|\n| OpenAI | OPENAI_API_KEY |\n| Local | none |",
        "| Token | Description |\n|---|---|\n| `{{name}}` | the name |",
        "cat notes.txt | grep password | wc -l",
        "Authorization:\n  type: bearer",
        "'Authorization', 'Content-Type'",
        '("X-Api-Key", "Accept")',
        'we support "api-key", "oauth2" and "basic"',
        "jwt.decode(token, key, algorithms=['HS256'])",
        "jwt.encode(payload, settings.SECRET_KEY)",
        "curl_setopt($ch, CURLOPT_URL, 'https://x.test');",
        "the pin is on the board; pin the version to 2.31",
        "error code: 4040; exit code is 1234",
        "GPIO pin: 13",
    ],
)
def test_protocols_tables_and_code_without_a_credential_stay(text: str) -> None:
    assert_unchanged(text)


# -- 2. a header line, not a sentence ------------------------------------------------------------------------------

HEADER_VALUES = [
    (f"Authorization: SSWS {WORD}", "Authorization: "),
    (f"Authorization: Splunk {WORD}", "Authorization: "),
    ("Authorization: Zoho-oauthtoken 1000.f3kq9zvbx7aa", "Authorization: "),
    (f"Authorization: {WORD} rejected", "rejected"),
    (f"Authorization: {WORD} is invalid", "is invalid"),
    (f"Authorization: {WORD}", "Authorization: "),
]


@pytest.mark.parametrize(("text", "kept"), HEADER_VALUES)
def test_a_header_value_after_a_vendors_scheme_goes(text: str, kept: str) -> None:
    """`Authorization: SSWS <token>` kept the token: the scheme, a word the rule did not know, was taken for the
    value."""
    secret = "f3kq9zvbx7aa" if "Zoho" in text else WORD
    _assert_gone(text, kept, secret)


@pytest.mark.parametrize(
    "text",
    [
        "Authorization: pending approval",
        "Authorization: manager approval needed",
        "Authorization: requires the admin role",
        "authorization: granted by the owner",
        "Authorization: see the policy page",
        "Authorization header missing",
    ],
)
def test_a_sentence_that_uses_the_word_keeps_its_words(text: str) -> None:
    """`Authorization: manager approval needed` lost `manager`: a credential is one run, or a scheme and one run; a
    short word of prose and two more words are a sentence."""
    assert_unchanged(text)


# -- 3. new hiding places ------------------------------------------------------------------------------------------

MARKUP = [
    (f"<password>{WORD}</password>", "<password>"),
    (f"<apiKey>{WORD}</apiKey>", "<apiKey>"),
    (
        '<wsse:UsernameToken><wsse:Username>ann</wsse:Username><wsse:Password Type="http://docs.oasis-open.org/'
        f'wss/2004/01/oasis-200401-wss-username-token-profile-1.0#PasswordText">{WORD}</wsse:Password>'
        "</wsse:UsernameToken>",
        "<wsse:Username>ann</wsse:Username>",
    ),
    (f'<input type="password" name="pw" value="{WORD}">', 'name="pw"'),
    (f"<input value='{WORD}' type=password>", "type=password"),
    (f"&#112;assword={WORD}", "assword="),
    (f"&#x70;assword: {WORD}", "assword"),
    (f"&quot;password&quot;: &quot;{WORD}&quot;", "password"),
    (f"Authorization: Bearer&#32;{WORD}", "Authorization"),
    (f'{{"\\u0070assword": "{WORD}"}}', "assword"),
    (f"export DB_PASS={WORD}", "export DB_PASS="),
    (f"SMTP_PW={WORD}", "SMTP_PW="),
]


@pytest.mark.parametrize(("text", "kept"), MARKUP)
def test_markup_escapes_and_short_names_lose_their_credentials(text: str, kept: str) -> None:
    _assert_gone(text, kept)


JWK_D = "X4cTteJY_gn4FYPsXB8rdXix5vwsg1FLN"
JWK_P = "83i-7IvMGXoMXCskv73TKr8637FiO7Z27zv8oj6pbWUQ"


def test_a_private_json_web_key_loses_its_private_members() -> None:
    """A JWK's `d`/`p`/`q` (RSA), `d` (EC, OKP) and `k` (a symmetric key) were stored, as text and in a card."""
    key = {"kty": "RSA", "n": "0vx7agoebGcQ", "e": "AQAB", "d": JWK_D, "p": JWK_P, "q": "3dfOR9cuYq"}
    _assert_gone("the signing key: " + json.dumps(key), '"kty": "RSA"', JWK_D)
    _assert_gone(json.dumps(key), '"n": "0vx7agoebGcQ"', JWK_P)
    card = {"name": "Shop", "jwks": {"keys": [key, {"kty": "oct", "k": "GawgguFyGrWKav7AX4VKUg"}]}}
    stored = redact_card_json(card)
    assert JWK_D not in stored and JWK_P not in stored and "GawgguFyGrWKav7AX4VKUg" not in stored
    assert '"n":"0vx7agoebGcQ"' in stored and '"e":"AQAB"' in stored


def test_a_public_json_web_key_stays() -> None:
    card = {"name": "Shop", "jwks": {"keys": [{"kty": "RSA", "n": "0vx7agoebGcQ", "e": "AQAB", "kid": "k1"}]}}
    assert redact_card_json(card) == stored_json(card)
    assert_unchanged(json.dumps(card["jwks"]))


def test_a_telegram_bot_token_that_reads_as_a_word_goes() -> None:
    url = f"https://api.telegram.org/bot123456789:{WORD}xyz/sendMessage"
    assert redact_url(url) == f"https://api.telegram.org/bot123456789:{REDACTED}/sendMessage"
    _assert_gone(f"posted to {url}", "api.telegram.org")
    assert redact_url("https://api.telegram.org/bot123456789/getMe") == "https://api.telegram.org/bot123456789/getMe"


def test_a_url_within_a_sentence_in_a_query_value_is_redacted_as_a_url() -> None:
    """A query value that is a sentence holding a URL (`?note=see https://x.test/token/…`) was read as free text with
    its URLs left as they were (only a value that was a URL whole was redacted as one): a named path segment or a bot
    token in it was stored."""
    for inner, secret in (
        (f"see https://x.test/token/{WORD} now", WORD),
        (f"posted to https://api.telegram.org/bot123456789:{WORD}/sendMessage", WORD),
    ):
        clean = redact_url("https://agent.test/a2a?note=" + quote(inner))
        assert secret not in clean and REDACTED in clean and clean.startswith("https://agent.test/a2a?note=")
    assert redact_url("https://agent.test/a2a?note=" + quote("see https://x.test/docs now")) == (
        "https://agent.test/a2a?note=" + quote("see https://x.test/docs now")
    )


@pytest.mark.parametrize(
    "text",
    [
        "<title>Password reset</title>",
        "<passwordPolicy>min 8</passwordPolicy>",
        "<password>******</password>",
        "<token>${TOKEN}</token>",
        '<input type="text" value="ann">',
        '<input type="password" name="pw" placeholder="Password">',
        "<UsernameToken>\n  <Username>ann</Username>\n</UsernameToken>",
        "AT&amp;T &quot;quoted&quot; text &#169; 2024",
        "caf\\u00e9 na\\u0069ve",
        "export PATH=/usr/bin; bypass=true; compass=north",
    ],
)
def test_markup_and_escapes_without_a_credential_stay(text: str) -> None:
    assert_unchanged(text)


# -- 4. every form, any surroundings; through ingest; linear time ---------------------------------------------------

_PLANTS = st.sampled_from(
    [
        "<password>plantsecretone</password>",
        "| password | plantsecretone |",
        "Authorization:\n  plantsecretone",
        "Authorization: SSWS plantsecretone",
        "jwt.encode(p, 'plantsecretone')",
        'CURLOPT_USERPWD, "ann:plantsecretone"',
        "'Authorization', 'plantsecretone'",
        "&#112;assword=plantsecretone",
        "export DB_PASS=plantsecretone",
        '<input type="password" value="plantsecretone">',
    ]
)


@given(_AROUND, _DELIMITED, _PLANTS, _DELIMITED, _AROUND)
def test_a_planted_secret_of_the_new_forms_never_survives_its_surroundings(
    before: str, left: str, plant: str, right: str, after: str
) -> None:
    assert_planted_gone(before + left + plant + right + after, "plantsecretone")


def test_no_planted_secret_reaches_a_parquet_file_through_har_ingest(tmp_path: Path) -> None:
    """Every form above, as a JSON-RPC method (kept in an anomaly), in a card-less HAR entry's URL query and in a
    URL's path, through `ingest`: no Parquet value holds a secret, and the marker is stored. (Message text under
    `--text keep` is stored as it came, by design: the operator picks `hash` or `drop` for it.)"""
    texts = [t for t, _, _ in LEFT_ALONE] + [t for t, _ in HEADER_VALUES + MARKUP]
    entries = []
    for i, text in enumerate(texts):
        entry = _entry("hi", "http://agent.test/a2a?note=" + base64.urlsafe_b64encode(text.encode()).decode())
        body = json.loads(entry["request"]["postData"]["text"])
        body["method"] = f"x {text}"
        body["id"] = i
        entry["request"]["postData"]["text"] = json.dumps(body)
        entries.append(entry)
    entries.append(_entry("hi", f"https://api.telegram.org/bot123456789:{WORD}/sendMessage"))
    _har(tmp_path / "hunt6.har", entries)
    ingest([tmp_path / "hunt6.har"], tmp_path / "out", TextPolicy())
    stored = ""
    for file in sorted((tmp_path / "out").rglob("*.parquet")):
        stored += json.dumps(pq.read_table(file).to_pylist(), default=str)
    assert stored and REDACTED in stored
    for secret in (WORD, "483920", "4839", "771203", JWK_D, "f3kq9zvbx7aa", PLAIN[:16]):
        assert secret not in stored, secret


_CRAFTED = [
    [
        "'<password>' * (n // 10)",
        "'<a:password x>' + 'a' * n",
        "'<password>' + 'a' * n + '</passwor'",
        "'</' * (n // 2) + 'password'",
        "'<input ' * (n // 7) + 'password'",
        "'<input type=password' + ' value=a' * (n // 8) + '>'",
        "'| password | a |\\n' * (n // 17)",
        "'| password ' * (n // 11) + '|\\n|---|\\n' + '| a ' * (n // 4)",
        "'|' * n + ' password\\n'",
        "'&#112;' * (n // 6) + 'assword=x'",
        "'\\\\u0070' * (n // 6) + 'assword=x'",
        "'&amp;' * (n // 5) + 'password=x'",
    ],
    [
        "'jwt.encode(' * (n // 11)",
        "'jwt.encode({' + 'a' * n",
        "'jwt.encode(a, \"' * (n // 15)",
        "'CURLOPT_USERPWD, \"' * (n // 18)",
        "\"'Authorization', '\" * (n // 18)",
        "\"'X-Api-Key', '\" + 'a' * n",
        "'AUTH PLAIN ' * (n // 11)",
        "'AUTH PLAIN ' + 'A' * n",
        "'334 UGFzc3dvcmQ6\\n' * (n // 17)",
        "'a1 LOGIN ' * (n // 9)",
        "'USER a\\nPASS ' * (n // 12)",
        "'USER ' + 'a' * n + '\\n' + 'b' * n",
    ],
    [
        "'otp: ' * (n // 5)",
        "'pin=' + '1' * n",
        "'verification code is ' * (n // 21)",
        '\'"kty"\' + \'"d":"\' * (n // 5)',
        "'Authorization:\\n ' * (n // 16)",
        "'Authorization: a ' * (n // 17)",
        "'Authorization: Splunk ' * (n // 22)",
        "'https://api.telegram.org' + '/bot1234:' * (n // 9)",
        "'DB_PASS=' * (n // 8)",
    ],
]


@pytest.mark.parametrize("texts", _CRAFTED, ids=["markup-tables-escapes", "code-mail", "codes-headers-urls"])
def test_the_new_rules_run_in_linear_time(texts: list[str]) -> None:
    """Each new rule on 400 KB crafted against it: elements and inputs that never close, table lines at every line,
    escapes at every position, JWT and libcurl calls and pairs that never close, mail commands without their
    arguments, code names without digits, folded and vendor-scheme headers, bot segments. A quadratic scan takes
    minutes; a linear one about a second each. In a child process, killed after 60 s."""
    code = (
        "from converse_tap.a2a.redact import Redaction\n"
        "n = 400_000\n"
        f"texts = [{', '.join(texts)}]\n"
        "for r in (Redaction(), Redaction.from_patterns(['zz'])):\n"
        "    for text in texts:\n"
        "        r.log_text(text)\n"
        "        r.url(text)\n"
        "print('done')\n"
    )
    finishes_within(code, 60, "the rules of redact_markup, redact_code and the Authorization rule on 400 KB")


def test_conversation_data_around_the_new_rules_is_stored_as_it_came() -> None:
    """A reply whose envelope holds a table, markup, prose about authorization, a public key and an SMTP banner is
    stored byte for byte."""
    env = envelope(
        detail={
            "table": "| Name | Type |\n|---|---|\n| password | string |",
            "html": '<input type="password" name="pw"> <p>AT&amp;T</p>',
            "note": "Authorization: manager approval needed",
            "jwks": {"keys": [{"kty": "EC", "crv": "P-256", "x": "f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU"}]},
            "smtp": "250-AUTH PLAIN LOGIN",
        }
    )
    flow = a2a_flow(response=jsonrpc_result({"message": agent_message(env=env)}))
    ext = extract(exchange_from_flow(flow), TextPolicy())
    assert ext is not None
    assert ext.messages[-1]["envelope_json"] == stored_json(env)


@pytest.mark.parametrize("after", ["(a: b", "{a: b", "[a: b", "(x=1, y: z"])
def test_a_folded_authorization_value_before_code_goes(after: str) -> None:
    """`Authorization:` with its value on the next line is read as YAML's mapping under it (`type: bearer`) only
    when that line starts with a key: a value running into code that holds a colon (`…(a: b`) goes."""
    assert_planted_gone(f" Authorization:\n  plantsecretone{after}", "plantsecretone")
    assert_unchanged("Authorization:\n  type: bearer")
