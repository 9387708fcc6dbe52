"""Credentials that still reached a stored column or the log (a fifth hunt, 2026-12-07).

The fourth hunt (`tests/test_secrets_hunt4.py`) left these: an `Authorization` header echoed with a value that has no
scheme and reads as a word (`Authorization: sunshine`, in prose, JSON text escaped in a string, an HTTP dump), a
header's `(name, value)` pair written alone (`("X-API-Key", "…")`, `["Authorization", "…"]` in a document),
command lines (`curl -u ann:…`, `--password …`, `mysql -p…`, `docker login -p …`, `redis-cli -a …`, HTTPie's
`ann:…@api.test/x`), `.netrc` entries, headers and pairs percent-encoded outside a URL or in a query value
(`Authorization%3A%20Bearer%20…`, `password%253D…`), a bytes literal after a secret name (`'password': b'…'`) and
`bearer=…`; and the Bearer rule took the word after `bearer` in prose (`the torch bearer carried the flame`). Each
test runs the code the proxy's worker and `ingest` run (`extract`, `LogRedactor`; one runs `converse-tap ingest`
and reads every Parquet value) and asserts that no planted secret is in any column of any row and that the marker
is; the last ones assert that prose, code, command lines and base64 that hold no credential stay as they came,
and that the new rules scan in linear time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st
from mitmproxy import io

from converse_tap.a2a.extract import extract
from converse_tap.a2a.redact import REDACTED, TextPolicy, redact_card_json, stored_json
from converse_tap.addon.flows import exchange_from_flow
from converse_tap.cli import cli
from tests.children import finishes_within
from tests.factories import a2a_flow, agent_message, envelope, jsonrpc_result
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
from tests.test_secrets_hunt4 import WORD, _b64  # a word-like secret; base64 of a text


def _flows(text: str) -> list[Any]:
    """Flows that store `text` as free text: `_everywhere_text`'s, an unknown method (quoted in an anomaly), a
    routine's pending input and a card's URL (percent-encoded in a query value)."""
    slots = [{"key": "k", "type": "string", "required": True, "description": text}]
    env = envelope(routine={"name": "r", "toolName": "t", "status": "awaiting_input", "pendingInput": slots})
    body = json.dumps({"jsonrpc": "2.0", "id": "r-1", "method": f"x {text}", "params": {}}).encode()
    return [
        *_everywhere_text(text),
        a2a_flow(body=body, response=jsonrpc_result({})),
        a2a_flow(response=jsonrpc_result({"message": agent_message(env=env)})),
        _card(url=f"https://agent.test/a2a?note={quote(text)}"),
    ]


def _assert_gone(text: str, kept: str, secret: str = WORD) -> None:
    """`secret` gone from `text` as free text (with `kept` there, the marker in it), a fixed point; and from every
    column of every flow that stores it, and from the log."""
    for redaction in _REDACTIONS:
        clean = redaction.log_text(text)
        assert secret not in clean and kept in clean, clean
        assert REDACTED in clean
        assert redaction.log_text(clean) == clean
    assert _leaked(_flows(text), secret) == []
    assert secret not in _logged(text)


# -- 1. header lines whose value has no scheme ---------------------------------------------------------------------

HEADER_LINES = [
    (f"Authorization: {WORD}", f"Authorization: {REDACTED}"),
    (f"Proxy-Authorization: {WORD}", f"Proxy-Authorization: {REDACTED}"),
    (f"rejected: bad header Authorization: {WORD}, retry", f"Authorization: {REDACTED}, retry"),
    (f"GET /a2a HTTP/1.1\r\nHost: agent.test\r\nAuthorization: {WORD}\r\nAccept: */*\r\n", "Host: agent.test"),
    (json.dumps({"error": json.dumps({"headers": {"Authorization": WORD}})}), f'\\"{REDACTED}\\"'),
    (f"Authorization={WORD}", f"Authorization={REDACTED}"),
    (f"{{'Authorization' => '{WORD}'}}", f"'{REDACTED}'"),
    (f"curl -H 'Authorization: {WORD}' https://agent.test/a2a", "https://agent.test/a2a"),
    (f"X-Api-Key: {WORD}", f"X-Api-Key: {REDACTED}"),
    (f"Cookie: theme=dark; sid={WORD}", f"Cookie: {REDACTED}"),
    (f"Set-Cookie: sid={WORD}; Path=/; HttpOnly", f"Set-Cookie: {REDACTED}"),
    ("Authorization: " + _b64(f"ann:{WORD}"), f"Authorization: {REDACTED}"),
    ("auth=" + _b64(f"ann:{WORD}"), f"auth={REDACTED}"),
    (f"'password': b'{WORD}'", f"'password': b'{REDACTED}'"),
    (f"bearer={WORD}", f"bearer={REDACTED}"),
]


@pytest.mark.parametrize(("text", "kept"), HEADER_LINES)
def test_a_header_echoed_without_a_scheme_loses_its_value(text: str, kept: str) -> None:
    """`Authorization: sunshinez` was stored: without a scheme, a value went only with a digit or a symbol in 8+
    characters or when it looked generated; escaped JSON text and `=>` were not read as the header at all."""
    _assert_gone(text, kept, WORD if WORD in text else _b64(f"ann:{WORD}")[:12])


@pytest.mark.parametrize(
    "text",
    [
        "Authorization: required",
        "Authorization: missing, see the docs",
        "authorization: denied by policy",
        "Authorization: Bearer",
        "Authorization header missing",
        "authorization: granted",
        "curl -H 'Authorization: Bearer $OPENAI_API_KEY' https://api.test",
        "send Authorization: Bearer <your-token>, or Authorization: ${API_KEY}",
        "Zm9vOmJhcg== is the base64 of foo:bar",
        _b64("ann:reader"),
    ],
)
def test_what_is_said_about_the_header_stays(text: str) -> None:
    assert_unchanged(text)


# -- 2. a header's pair written alone ------------------------------------------------------------------------------

LONE_PAIRS = [
    (f'("X-API-Key", "{WORD}")', f'("X-API-Key", "{REDACTED}")'),
    (f"('Authorization', '{WORD}')", f"('Authorization', '{REDACTED}')"),
    (f"headers: ['authorization', 'Bearer {WORD}']", f"'Bearer {REDACTED}'"),
    (f"metadata ('x-api-key', b'{WORD}') refused", f"b'{REDACTED}'"),
    ("('token', 'Tk7vQ2xR9mL4wZ8p')", f"('token', '{REDACTED}')"),
]


@pytest.mark.parametrize(("text", "kept"), LONE_PAIRS)
def test_a_header_pair_written_alone_loses_its_value(text: str, kept: str) -> None:
    """A pair was read only as an item of a list of pairs (`[('X-Api-Key', '…')]`): alone, it was stored whole."""
    _assert_gone(text, kept, WORD if WORD in text else "Tk7vQ2xR9mL4wZ8p")


def test_a_header_pair_alone_in_a_stored_document_loses_its_value() -> None:
    doc = {
        "header": ["X-Api-Key", WORD],
        "pair": ["Authorization", f"Bearer {WORD}"],
        "tags": ["token", "password"],
        "topics": ["api-key", "security"],
        "counts": ["token", 5],
    }
    assert json.loads(redact_card_json(doc)) == {
        **doc,
        "header": ["X-Api-Key", REDACTED],
        "pair": ["Authorization", f"Bearer {REDACTED}"],
    }
    flows = [
        a2a_flow(response=jsonrpc_result({"message": agent_message(env=envelope(detail=doc))})),
        _card(capabilities={"extensions": [{"uri": "https://x.test/ext", "params": doc}]}),
    ]
    assert _leaked(flows, WORD) == []
    plain = {"tags": ["token", "password"], "topics": ["api-key", "security"], "pair": ["Authorization", "none"]}
    assert redact_card_json(plain) == stored_json(plain)


@pytest.mark.parametrize("text", ["tags: ['token', 'password']", "('password', 'reset')", "f(token, key)"])
def test_two_words_that_are_no_header_pair_stay(text: str) -> None:
    assert_unchanged(text)


# -- 3. command lines and .netrc -------------------------------------------------------------------------------------

COMMANDS = [
    (f"curl -u ann:{WORD} https://api.test/v1", f"-u ann:{REDACTED} https://api.test/v1"),
    (f"curl --user 'ann:{WORD}' https://api.test/v1", f"--user 'ann:{REDACTED}'"),
    (f"curl -uann:{WORD} https://api.test/v1", f"-uann:{REDACTED}"),
    (f"curl --proxy-user ann:{WORD} -x proxy.test:3128 https://api.test", f"--proxy-user ann:{REDACTED}"),
    (f"http -a ann:{WORD} api.test/x", f"-a ann:{REDACTED}"),
    (f"wget --user=ann --password {WORD} https://x.test/f", f"--password {REDACTED}"),
    (f"gh auth login --with-token {WORD}", f"--with-token {REDACTED}"),
    (f"az login -u ann --client-secret '{WORD}'", f"--client-secret '{REDACTED}'"),
    (f"vault login -method=userpass -password {WORD}", f"-password {REDACTED}"),
    (f"curl --oauth2-bearer {WORD} https://api.test", f"--oauth2-bearer {REDACTED}"),
    (f"mysql -u root -p{WORD} shop", f"-p{REDACTED} shop"),
    (f"mysqldump -u root -p'{WORD}' shop", f"-p'{REDACTED}'"),
    (f"docker login -u ann -p {WORD} registry.test", f"-p {REDACTED} registry.test"),
    (f"sshpass -p {WORD} ssh ann@host.test", f"-p {REDACTED}"),
    (f"redis-cli -h cache.test -a {WORD} ping", f"-a {REDACTED} ping"),
    (f"machine api.test login ann password {WORD}", f"login ann password {REDACTED}"),
    (f"machine api.test\n  login ann\n  password {WORD}\n", f"password {REDACTED}"),
    (f"default login ann password {WORD}", f"password {REDACTED}"),
]


@pytest.mark.parametrize(("text", "kept"), COMMANDS)
def test_a_command_line_an_agent_quotes_loses_its_credentials(text: str, kept: str) -> None:
    """An agent that shows how it called a service (or an error that echoes the command that failed) stored the
    password of `-u user:pw`, of an option named for a credential and a space, of `-p`, and of `.netrc` entries."""
    _assert_gone(text, kept)


def test_userinfo_before_a_dotted_host_and_a_path_is_dropped() -> None:
    """HTTPie's `http ann:pw@api.test/x`: userinfo without a scheme was dropped only before a `host:port`."""
    text = f"http ann:{WORD}@api.test/x"
    for redaction in _REDACTIONS:
        assert redaction.log_text(text) == "http api.test/x"
    assert _leaked(_flows(text), WORD) == []
    assert_unchanged("mail ann@api.test/x or note:ann@x.test")


@pytest.mark.parametrize(
    "text",
    [
        "docker run -u 1000:1000 -p 8080:80 shop",
        "git push -u origin main && sort -u names.txt",
        "ssh -p 2222 ann@host.test",
        "pip install --user requests",
        "docker login --password-stdin registry.test",
        "pass --token to authenticate, or --token-file ~/.tok",
        "--token-url https://auth.test/token --key-file key.pem --token-audience api://agent",
        "mysql -h db -P 3306 -p shop",
        "the machine learning model's login flow",
        "the default password policy requires 12 characters",
        "python -m pytest -p no:cacheprovider",
        "ls -la /tmp && git commit -a -m 'role user:admin'",
    ],
)
def test_command_lines_without_a_credential_stay(text: str) -> None:
    assert_unchanged(text)


# -- 4. code and markdown an agent writes in a reply ------------------------------------------------------------------

SNIPPETS = [
    (f"requests.get(url, auth=('ann', '{WORD}'))", f"auth=('ann', '{REDACTED}')"),
    (f"auth = HTTPBasicAuth('ann', '{WORD}')", f"('ann', '{REDACTED}')"),
    (f'req.SetBasicAuth("ann", "{WORD}")', f'SetBasicAuth("ann", "{REDACTED}")'),
    (f'var c = new NetworkCredential("ann", "{WORD}");', f'NetworkCredential("ann", "{REDACTED}")'),
    (f"ftp.login('ann', '{WORD}')", f"ftp.login('ann', '{REDACTED}')"),
    (f'headers.set("Authorization", "{WORD}")', f'headers.set("Authorization", "{REDACTED}")'),
    (f'os.environ["OPENAI_API_KEY"] = "{WORD}"', f'os.environ["OPENAI_API_KEY"] = "{REDACTED}"'),
    (f"headers['Authorization'] = '{WORD}'", f"headers['Authorization'] = '{REDACTED}'"),
    (f"**Password:** {WORD}", f"**Password:** {REDACTED}"),
    (f"**Authorization**: {WORD}", f"**Authorization**: {REDACTED}"),
]


@pytest.mark.parametrize(("text", "kept"), SNIPPETS)
def test_code_and_markdown_in_a_reply_lose_their_credentials(text: str, kept: str) -> None:
    """A user and password passed to what takes credentials, a subscript assigned a secret, and markdown's bold
    around a name (`**Password:** …` lost its `**`, not the password) were stored."""
    _assert_gone(text, kept)


@pytest.mark.parametrize(
    "text",
    [
        "author=('ann', 'bob')",
        "a.login(user, pw)",
        "**Password:** required",
        "headers['Accept'] = 'application/json'",
    ],
)
def test_code_without_a_credential_stays(text: str) -> None:
    assert_unchanged(text)


# -- 5. percent-encoded headers and pairs ---------------------------------------------------------------------------

PERCENT = [
    f"q=Authorization%3A%20Bearer%20{WORD}",
    f"Authorization%3A+{WORD}",
    f"state=password%3D{WORD}%26page%3D2",
    f"password%253D{WORD}",
    f"X-Api-Key%3A%20{WORD}",
    f"see /cb?next=%2Fdone%3Ftoken%3D{WORD}",
]


@pytest.mark.parametrize("text", PERCENT)
def test_a_percent_encoded_header_or_pair_outside_a_url_loses_its_value(text: str) -> None:
    """A header or pair percent-encoded (as a query value quoted in a message is) was read only inside a URL."""
    _assert_gone(text, "[REDACTED]")


def test_a_percent_encoded_header_in_a_query_value_loses_its_value() -> None:
    for url in (
        f"https://agent.test/a2a?q=Authorization%3A+Bearer+{WORD}",
        f"https://agent.test/a2a?q=Authorization%3A%20{WORD}",
    ):
        for redaction in _REDACTIONS:
            clean = redaction.url(url)
            assert WORD not in clean and clean.startswith("https://agent.test/a2a?q=Authorization")
        assert _leaked([_card(url=url), *_everywhere_text(f"see {url}")], WORD) == []


@pytest.mark.parametrize(
    "text", ["hello%20world", "50%25 done", "q=caf%C3%A9&page=2", "a%2Fb%2Fc", "token%20count%3A%205", "100%3A1"]
)
def test_percent_encoded_text_without_a_credential_stays(text: str) -> None:
    assert_unchanged(text)


# -- 6. the word after `bearer` in prose ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "the torch bearer carried the flame",
        "a bearer cheque is payable to whoever holds it",
        "the bearer of this letter",
        "bearer bonds are rare now",
        "the standard bearer marched first",
        "each bearer shares the load",
    ],
)
def test_prose_about_a_bearer_stays(text: str) -> None:
    """The Bearer rule took any word after `bearer` that it did not know as a word about the scheme."""
    assert_unchanged(text)


@pytest.mark.parametrize(
    "text",
    [
        f"authorization bearer {WORD} was rejected",
        f"using bearer {WORD} for the call",
        f"the header was bearer {WORD} and failed",
        f"Bearer {WORD} rejected",
        f"(('authorization', 'bearer {WORD}'),)",
    ],
)
def test_a_token_after_bearer_in_a_sentence_still_goes(text: str) -> None:
    _assert_gone(text, REDACTED)


# -- 7. keys of model and tool providers ---------------------------------------------------------------------------

PROVIDER_KEYS = {
    "groq": "gsk_" + "Q7vX2mL9" * 7,
    "replicate": "r8_" + "Q7vX2mL9" * 5,
    "perplexity": "pplx-" + "Q7vX2mL9" * 6,
    "xai": "xai-" + "Q7vX2mL9" * 10,
    "langsmith": "lsv2_pt_" + "q7vx2ml9" * 4 + "_" + "0a1b2c3d4e",
    "tavily": "tvly-dev-" + "Q7vX2mL9" * 4,
    "pinecone": "pcsk_" + "Q7vX2mL9" * 6,
    "pypi": "pypi-AgEIcHlwaS5vcmcCJD" + "Q7vX2mL9" * 8,
    "databricks": "dapi" + "0f8fad5bd9cb469f" * 2,
    "digitalocean": "dop_v1_" + "0f8fad5bd9cb469f" * 4,
    "linear": "lin_api_" + "Q7vX2mL9" * 5,
    "notion": "ntn_" + "Q7vX2mL9" * 5 + "abc",
    "vault": "hvs." + "Q7vX2mL9" * 12,
    "grafana": "glsa_" + "Q7vX2mL9" * 4 + "_0a1b2c3d",
    "atlassian": "ATATT3xFfGF0" + "Q7vX2mL9" * 20,
}


@pytest.mark.parametrize("name", sorted(PROVIDER_KEYS))
def test_keys_of_model_and_tool_providers_go_from_every_free_text_column(name: str) -> None:
    """Keys an agent holds for the models and tools it calls had no shape the rules knew: an agent that echoed one
    (`your Groq key gsk_… was rejected`) had it stored."""
    key = PROVIDER_KEYS[name]
    _assert_gone(f"upstream rejected key {key}: 401", "upstream rejected key [REDACTED]: 401", key[8:24])


# -- 8. every new form, any surroundings; end to end; a fixed point; linear time -------------------------------------

_PLANTS = st.sampled_from(
    [
        "Authorization: plantsecretone",
        '("X-Api-Key", "plantsecretone")',
        "curl -u ann:plantsecretone",
        "--password plantsecretone",
        "mysql -pplantsecretone",
        "machine h login a password plantsecretone",
        "Authorization%3A%20plantsecretone",
        "password%253Dplantsecretone",
        "'token': b'plantsecretone'",
        "HTTPBasicAuth('ann', 'plantsecretone')",
        "**Password:** plantsecretone",
        "env['API_KEY'] = 'plantsecretone'",
    ]
)


@given(_AROUND, _DELIMITED, _PLANTS, _DELIMITED, _AROUND)
def test_a_planted_secret_of_the_new_forms_never_survives_its_surroundings(
    before: str, left: str, plant: str, right: str, after: str
) -> None:
    assert_planted_gone(before + left + plant + right + after, "plantsecretone")


def test_no_planted_secret_reaches_a_parquet_file_through_ingest(tmp_path: Path) -> None:
    """Every form above, in the error messages and citation titles of a capture, through `converse-tap ingest`:
    no Parquet value holds a secret, and the marker is stored."""
    texts = [t for t, _ in HEADER_LINES + LONE_PAIRS + COMMANDS + SNIPPETS] + PERCENT
    path = tmp_path / "hunt5.mitm"
    with open(path, "wb") as f:
        w = io.FlowWriter(f)
        for text in texts:
            for flow in _flows(text)[:4]:  # (the card's and the method's are covered above)
                w.add(flow)
    r = CliRunner().invoke(cli, ["ingest", str(path), "--out", str(tmp_path / "out")])
    assert r.exit_code == 0, r.stderr
    stored = ""
    for file in sorted((tmp_path / "out").rglob("*.parquet")):
        stored += json.dumps(pq.read_table(file).to_pylist(), default=str)
    assert stored and REDACTED in stored
    assert WORD not in stored and "Tk7vQ2xR9mL4wZ8p" not in stored


_CRAFTED = [
    [
        "'Authorization: ' * (n // 15)",
        "'Authorization\\\\\": \\\\\"' * (n // 19)",
        "'Authorization => ' * (n // 17)",
        "'Authorization: ' + 'a' * n",
        "\"('X-Api-Key', '\" * (n // 15)",
        "\"('X-Api-Key', 'v')\" * (n // 18)",
        "'-u a:' * (n // 5)",
        "'-u ' + 'a' * n",
        '"--token \'" * (n // 9)',
        "'-password -password ' * (n // 20)",
        "'mysql -p' * (n // 8)",
        "'login -p ' * (n // 9)",
        "'redis -a ' * (n // 9)",
        "'machine a login b ' * (n // 18)",
    ],
    [
        "'machine ' * (n // 8) + 'password x'",
        "'default login a ' * (n // 16)",
        "'x%3Ay ' * (n // 6)",
        "'%25' * (n // 3)",
        "'Authorization%3A%20' * (n // 19)",
        "'password%253D' + 'a' * n",
        "' a:b@x.y' * (n // 8)",
        "'a:b@' + 'x.' * (n // 2) + '/'",
        "'x bearer y ' * (n // 10)",
        "\"'password': b'\" * (n // 14)",
    ],
    [
        "\"HTTPBasicAuth('a', '\" * (n // 20)",
        "'login' * (n // 5) + \"('a', '\"",
        "'**Password:** ' * (n // 14)",
        "'env[\"token\"] ' * (n // 13)",
    ],
    [
        "'gsk_' * (n // 4)",
        "'dapi' + '0' * n",
        "'https://agent.test/a?' + 'q=Authorization%3A+a&' * (n // 21)",
    ],
]


@pytest.mark.parametrize(
    "texts", _CRAFTED, ids=["headers-pairs-options", "netrc-percent-hosts", "code", "keys-queries"]
)
def test_the_new_rules_run_in_linear_time(texts: list[str]) -> None:
    """Each new rule on 400 KB crafted against it: `Authorization` names without values or before escaped quotes,
    pairs that never close, options and user options at every word, `-p` after `mysql`, `.netrc` words that never
    reach a password, percent escapes at every position and words that decode to names, `user:pw@` before dotted
    hosts, `bearer` between words, provider key prefixes, a URL of many query values read as text. A quadratic
    scan takes minutes; a linear one about a second each. In a child process, killed after 60 s."""
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
    finishes_within(code, 60, "the rules of redact_cli, redact_percent, lone pairs and Authorization on 400 KB")


def test_conversation_data_around_the_new_rules_is_stored_as_it_came() -> None:
    """A reply whose envelope holds prose about a bearer, tags that name credentials, a command line without one and
    percent-encoded text is stored byte for byte."""
    env = envelope(
        detail={
            "note": "the torch bearer carried the flame; Authorization: required",
            "tags": ["token", "password"],
            "run": "docker run -u 1000:1000 -p 8080:80 shop && git push -u origin main",
            "query": "q=caf%C3%A9&page=2",
        }
    )
    flow = a2a_flow(response=jsonrpc_result({"message": agent_message(env=env)}))
    ext = extract(exchange_from_flow(flow), TextPolicy())
    assert ext is not None
    assert ext.messages[-1]["envelope_json"] == stored_json(env)
