"""Credentials that still reached a stored column or the log (a second hunt, 2026-12-06).

The first hunt (`tests/test_secrets_hunt.py`) closed URLs, userinfo and echoed `Authorization` headers. This one
plants what agents, SDKs and HTTP stacks really write besides: webhook URLs whose path is the secret (Slack,
Discord, Teams, Telegram), connection strings and signed requests quoted in errors, cookies echoed, the A2A
push-notification token and config, and well-known token shapes in any stored free text. Each test runs the code
the proxy's worker and `ingest` run (`extract`, `LogRedactor`) and asserts that no planted secret is in any column
of any row; the last ones assert that what is no credential (ids, routine and slot names, coverage values, slugs,
page tokens, prose) is stored as it came, and that the new rules scan in linear time.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from converse_tap.a2a.extract import extract
from converse_tap.a2a.redact import REDACTED, Redaction, TextPolicy, redact_card_json, stored_json
from converse_tap.addon.flows import exchange_from_flow
from tests.children import finishes_within
from tests.factories import EXT, a2a_flow, agent_message, envelope, jsonrpc_request, jsonrpc_result, user_message
from tests.test_secrets_hunt import _card, _leaks, _logged

_REDACTIONS = (Redaction(), Redaction.from_patterns(["NOTHERE"]))  # built-in rules alone, and with operator patterns


def _rpc_error(message: str, reason: str | None = None) -> Any:
    err: dict[str, Any] = {"code": -32603, "message": message}
    if reason is not None:
        err["data"] = {"reason": reason}
    return a2a_flow(response=json.dumps({"jsonrpc": "2.0", "id": "r-1", "error": err}).encode())


def _rest_error(message: str) -> Any:
    body = {"error": {"code": 500, "status": "INTERNAL", "message": message, "details": [{"reason": message}]}}
    return a2a_flow(
        path="/v1/message:send",
        body=json.dumps({"message": user_message()}).encode(),
        status=500,
        response=json.dumps(body).encode(),
    )


def _down(message: str) -> Any:
    flow = a2a_flow(response=None, err=True)
    assert flow.error is not None
    flow.error.msg = message
    return flow


def _everywhere_text(text: str) -> list[Any]:
    """Flows that store `text` as free text: a JSON-RPC error (message and reason), an HTTP+JSON error, the
    connection error of a failed exchange, a citation title and a card's description."""
    env = envelope(citations=[{"documentId": "d", "title": text}])
    return [
        _rpc_error(text, text),
        _rest_error(text),
        _down(text),
        a2a_flow(response=jsonrpc_result({"message": agent_message(env=env)})),
        _card(description=text),
    ]


def _leaked(flows: list[Any], *secrets: str) -> list[tuple[str, str]]:
    return sorted({leak for flow in flows for leak in _leaks(flow, *secrets)})


# -- 1. webhook URLs whose path is the secret ---------------------------------------------------------------------

SLACK_SECRET = "Xq9LmP2vRt7WkZ4bNc8HdF3s"
DISCORD_SECRET = "Zq3_Vt9-Lm2PkR8sWx4YbN7cHd1FgJ6aKe5Qo0UiTy3RzXw8Vp2Ns6Mb1Lc9Dk4Hf7Gj0"
TEAMS_SECRET = "3fa85f6457174562b3fc2c963f66afa6"
TELEGRAM_SECRET = "AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsaw"
WEBHOOKS = {
    "slack": f"https://hooks.slack.com/services/T0123ABCD/B0456EFGH/{SLACK_SECRET}",
    "discord": f"https://discord.com/api/webhooks/1234567890123456789/{DISCORD_SECRET}",
    "teams": f"https://contoso.webhook.office.com/webhookb2/0f8fad5b-d9cb-469f-a165-70867728950e@9a1b2c3d-0000-4000-"
    f"8000-123456789abc/IncomingWebhook/{TEAMS_SECRET}/7c9e6679-7425-40de-944b-e07fc1f90ae7",
    "telegram": f"https://api.telegram.org/bot123456789:{TELEGRAM_SECRET}/sendMessage",
    "generic": "https://client.test/a2a/webhooks/push/Tk7vQ2xR9mL4wZ8pN3bJ6cY1",
}
HOOK_SECRETS = (SLACK_SECRET, DISCORD_SECRET, TEAMS_SECRET, TELEGRAM_SECRET, "Tk7vQ2xR9mL4wZ8pN3bJ6cY1")


@pytest.mark.parametrize("name", sorted(WEBHOOKS))
def test_webhook_urls_lose_the_token_their_path_carries(name: str) -> None:
    """Slack, Discord and Teams incoming webhooks and Telegram's bot API carry their only secret in the path, where
    no query name or named segment marks it: each was stored whole in card URLs, citation URLs and error text."""
    url = WEBHOOKS[name]
    schemeless = url.split("://", 1)[1]
    params = {"notifyUrl": url}
    flows = [
        _card(
            iconUrl=url,
            provider={"organization": "x", "url": url},
            capabilities={"extensions": [{"uri": EXT, "params": params}]},
        ),
        a2a_flow(
            response=jsonrpc_result(
                {"message": agent_message(env=envelope(citations=[{"documentId": "d", "sourceUrl": url}]))}
            )
        ),
        *_everywhere_text(f"POST {url} failed: 404"),
        *_everywhere_text(f"delivery to {schemeless} refused"),
    ]
    assert _leaked(flows, *HOOK_SECRETS) == []
    assert "hooks" not in name or "T0123ABCD" in Redaction().url(url)  # the workspace and channel ids stay


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        (WEBHOOKS["slack"], f"https://hooks.slack.com/services/T0123ABCD/B0456EFGH/{REDACTED}"),
        (WEBHOOKS["discord"], f"https://discord.com/api/webhooks/1234567890123456789/{REDACTED}"),
        (WEBHOOKS["telegram"], f"https://api.telegram.org/bot123456789:{REDACTED}/sendMessage"),
        (
            WEBHOOKS["teams"],
            f"https://contoso.webhook.office.com/webhookb2/{REDACTED}/IncomingWebhook/{REDACTED}/{REDACTED}",
        ),
        # what is no token stays: slugs, camelCase names, ids of digits, short ids, paths without a webhook word
        ("https://h/webhooks/slack-notifications-v2/processIncomingEvents", None),
        ("https://h/api/webhooks/1234567890123456789", None),
        ("https://hooks.zapier.test/hooks/catch/123456/abcdef/", None),
        ("https://h/a2a/tasks/0f8fad5b-d9cb-469f-a165-70867728950e", None),
        ("https://h/agents/ag_7Qb3nT1xK9wZs2Pv0Lm4Rd/a2a", None),
        ("https://h/books/isbn/9780262033848/chapter12", None),
    ],
)
def test_a_webhook_url_keeps_all_but_its_token(url: str, expected: str | None) -> None:
    for redaction in _REDACTIONS:
        assert redaction.url(url) == (expected or url)
        assert redaction.log_text(f"see {url} now") == f"see {expected or url} now"


def test_a_webhook_url_passed_on_in_a_query_value_or_percent_encoded_loses_its_token() -> None:
    encoded = "https%3A%2F%2Fhooks.slack.com%2Fservices%2FT0%2FB0%2F" + SLACK_SECRET
    for redaction in _REDACTIONS:
        assert (
            redaction.url(f"https://h/cb?next={encoded}")
            == f"https://h/cb?next=https://hooks.slack.com/services/T0/B0/{REDACTED}"
        )
        assert redaction.log_text(f"to {encoded} failed") == f"to {encoded[: -len(SLACK_SECRET)]}{REDACTED} failed"


# -- 2. connection strings and signed requests in error text --------------------------------------------------

CONNECTION_STRINGS = [
    ("Server=tcp:db.test,1433;User ID=sa;Password=Hunter2!xQ;Database=app", ["Hunter2!xQ"], ["Database=app"]),
    ("Driver={ODBC Driver 18};Server=db;Uid=sa;Pwd={p;w}}CONNSECRET1};Encrypt=yes", ["CONNSECRET1", "p;w"], ["Uid=sa"]),
    (
        "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=q1w2CONNSECRET2+/e3r4==;EndpointSuffix=core.windows.net",
        ["CONNSECRET2"],
        ["AccountName=acct", "EndpointSuffix=core.windows.net"],
    ),
    (
        "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;SharedAccessKey=AbCONNSECRET3/de+f=",
        ["CONNSECRET3", "de+f="],
        ["SharedAccessKeyName=Root"],
    ),
    (
        "BlobEndpoint=https://a.blob.core.windows.net/;SharedAccessSignature=sv=2020-08-04&ss=b&sig=CONNSECRET4%3D",
        ["CONNSECRET4"],
        ["BlobEndpoint=https://a.blob.core.windows.net/"],
    ),
    ("host=db.internal port=5432 user=app password=CONNSECRET5 dbname=shop", ["CONNSECRET5"], ["dbname=shop"]),
    ("jdbc:postgresql://db.internal/shop?user=app&password=CONNSECRET6&ssl=true", ["CONNSECRET6"], ["ssl=true"]),
    ("spring.datasource.password='CONNSECRET7 with spaces'", ["CONNSECRET7", "with spaces"], []),
    ("mongo: auth failed for --password=CONNSECRET8 --db shop", ["CONNSECRET8"], ["--db shop"]),
]


@pytest.mark.parametrize(("text", "secrets", "kept"), CONNECTION_STRINGS)
def test_connection_strings_in_error_text_lose_their_secrets(text: str, secrets: list[str], kept: list[str]) -> None:
    """ADO.NET, ODBC, Azure Storage and Service Bus connection strings, libpq keywords, JDBC URLs, properties and
    command lines, as agents quote them in their errors (`Login failed: …`)."""
    message = f"cannot connect ({text})"
    assert _leaked(_everywhere_text(message), *secrets) == []
    for redaction in _REDACTIONS:
        clean = redaction.log_text(message)
        assert [k for k in kept if k not in clean] == [], clean
        assert redaction.log_text(clean) == clean  # a re-ingest leaves it as it is


SIGV4 = (
    "Authorization: AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20260101/us-east-1/s3/aws4_request, "
    "SignedHeaders=host;x-amz-date, Signature=fe5f80f77d5fa3beca038a248ff027d0445342fe2855ddc963176630326f1024"
)
PRESIGNED = [
    "https://b.s3.amazonaws.com/o?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=ASIAEXAMPLEKEY%2F20260101"
    "&X-Amz-Security-Token=FwoGZXIvYXdzSIGSECRET1&X-Amz-Signature=beefSIGSECRET2",
    "https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=svc%40p.iam.gserviceaccount"
    ".com%2FSIGSECRET3&X-Goog-Signature=0a1bSIGSECRET4",
    "https://acct.blob.core.windows.net/c/b.pdf?sv=2022-11-02&se=2026-12-31&sr=b&sp=r&sig=SIGSECRET5%2Bx%3D",
]


def test_signed_requests_lose_their_signatures_and_credentials() -> None:
    """An echoed SigV4 `Authorization` header kept `SignedHeaders=…, Signature=…` after its first credential; a
    presigned S3, GCS or Azure SAS URL is redacted by its query names wherever it is stored."""
    flows = _everywhere_text(f"S3 refused the request ({SIGV4})")
    for url in PRESIGNED:
        flows += [_card(documentationUrl=url), *_everywhere_text(f"download {url} expired")]
    assert _leaked(flows, "fe5f80f77d5", "AKIAIOSFODNN7EXAMPLE", *[f"SIGSECRET{i}" for i in range(1, 6)]) == []
    assert Redaction().log_text(SIGV4) == (
        f"Authorization: AWS4-HMAC-SHA256 {REDACTED}, SignedHeaders=host;x-amz-date, Signature={REDACTED}"
    )


# -- 3. cookies ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("rejected Cookie: session=CKSECRET1; csrftoken=CKSECRET2 (expired)", f"rejected Cookie: {REDACTED} (expired)"),
        ("Set-Cookie: sid=CKSECRET1; Path=/; HttpOnly", f"Set-Cookie: {REDACTED}"),
        ('{"headers": {"cookie": "a=CKSECRET1; b=CKSECRET2"}}', f'{{"headers": {{"cookie": "{REDACTED}"}}}}'),
        ("JSESSIONID=CKSECRET1 expired", f"JSESSIONID={REDACTED} expired"),
        ("connect.sid=s%3ACKSECRET1.abc; Path=/", f"connect.sid={REDACTED}; Path=/"),
    ],
)
def test_cookies_echoed_in_error_text_go(text: str, expected: str) -> None:
    for redaction in _REDACTIONS:
        assert redaction.log_text(text) == expected
        assert redaction.log_text(expected) == expected
    assert _leaked(_everywhere_text(text), "CKSECRET1", "CKSECRET2") == []


# -- 4. A2A push notifications ----------------------------------------------------------------------------------

PUSH_CONFIG = {
    "id": "cfg-1",
    "url": "https://client.test/a2a/webhooks/push/Tk7vQ2xR9mL4wZ8pN3bJ6cY1",
    "token": "PUSHSECRET1-opaque",
    "authentication": {"schemes": ["Bearer"], "credentials": "PUSHSECRET2-opaque"},
}
PUSH_SECRETS = ("PUSHSECRET1", "PUSHSECRET2", "Tk7vQ2xR9mL4wZ8pN3bJ6cY1")


def test_push_notification_secrets_echoed_in_errors_are_not_stored() -> None:
    """An agent that refuses a push config quotes it back (`json.dumps`, Python's repr, the header it would send):
    its `token`, `authentication.credentials` and webhook URL were stored in `error_message` and `error_reason`."""
    texts = [
        f"invalid push config {json.dumps(PUSH_CONFIG)}",
        f"invalid push config {PUSH_CONFIG!r}",
        "notification rejected: X-A2A-Notification-Token: PUSHSECRET1-opaque",
        json.dumps(f"escaped {json.dumps(PUSH_CONFIG)}"),  # JSON text inside a JSON string: `\"token\":\"…\"`
    ]
    flows = [flow for text in texts for flow in _everywhere_text(text)]
    assert _leaked(flows, *PUSH_SECRETS) == []


def test_push_configs_inside_stored_documents_lose_their_secrets_and_nothing_else() -> None:
    """A config an agent keeps in an envelope or a card (`detail`, extension params) was stored whole in
    `envelope_json` and `card_json`: a secret-named key's value goes, whatever its shape; every other value and
    every column taken from the document stays."""
    env = envelope(detail={"push": PUSH_CONFIG})
    reply = a2a_flow(response=jsonrpc_result({"message": agent_message(env=env)}))
    card = _card(
        capabilities={"extensions": [{"uri": EXT, "params": {"push": PUSH_CONFIG, "tools": [{"toolName": "t"}]}}]}
    )
    assert _leaked([reply, card], *PUSH_SECRETS) == []
    ext = extract(exchange_from_flow(reply), TextPolicy())
    assert ext is not None
    push = json.loads(ext.messages[-1]["envelope_json"])["detail"]["push"]
    assert push == {
        "id": "cfg-1",
        "url": f"https://client.test/a2a/webhooks/push/{REDACTED}",
        "token": REDACTED,
        "authentication": {"schemes": ["Bearer"], "credentials": REDACTED},
    }


def test_push_config_calls_store_no_secret() -> None:
    """The push-config calls themselves (v1.0, v0.3, HTTP+JSON), SendMessage with a config, and a delivery to the
    client's webhook through the proxy: none stores the token, the credentials or the webhook's secret."""
    v03 = {"taskId": "t1", "pushNotificationConfig": PUSH_CONFIG}
    flows = [
        a2a_flow(
            body=jsonrpc_request("CreateTaskPushNotificationConfig", {"taskId": "t1", **PUSH_CONFIG}),
            response=jsonrpc_result({"taskId": "t1", **PUSH_CONFIG}),
        ),
        a2a_flow(body=jsonrpc_request("tasks/pushNotificationConfig/set", v03), response=jsonrpc_result(v03)),
        a2a_flow(
            body=jsonrpc_request("tasks/pushNotificationConfig/list", {"id": "t1"}), response=jsonrpc_result([v03])
        ),
        a2a_flow(
            path="/v1/tasks/t1/pushNotificationConfigs",
            body=json.dumps(PUSH_CONFIG).encode(),
            response=json.dumps({"taskId": "t1", **PUSH_CONFIG}).encode(),
        ),
        a2a_flow(
            body=jsonrpc_request(
                "SendMessage", {"message": user_message(), "configuration": {"taskPushNotificationConfig": PUSH_CONFIG}}
            ),
            response=jsonrpc_result({"message": agent_message()}),
        ),
    ]
    assert _leaked(flows, *PUSH_SECRETS) == []
    delivery = a2a_flow(
        path="/a2a/webhooks/push/Tk7vQ2xR9mL4wZ8pN3bJ6cY1",
        headers={"x-a2a-notification-token": "PUSHSECRET1-opaque"},
        body=json.dumps({"id": "t1", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}).encode(),
    )
    ext = extract(exchange_from_flow(delivery), TextPolicy())
    assert ext is None or not [s for s in PUSH_SECRETS if s in json.dumps([ext.exchange, ext.messages], default=str)]


# -- 5. well-known token shapes in any stored free text -------------------------------------------------------

PEM_BODY = "MIIEowIBAAKCAQEA7PEMSECRET+/x9Qe3\nZm5vZ2VuZXJhdGVkLWtleS1ib2R5LWJ5dGVz\n"
TOKENS = {
    "jwt": "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJUT0tTRUNSRVQifQ.c2lnVE9LU0VDUkVU",
    "jwt_clipped": "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJUT0tTRUNSRVQ",  # an error message cut at 500 characters
    "pem_rsa": f"-----BEGIN RSA PRIVATE KEY-----\n{PEM_BODY}-----END RSA PRIVATE KEY-----",
    "pem_openssh": f"-----BEGIN OPENSSH PRIVATE KEY-----\n{PEM_BODY}-----END OPENSSH PRIVATE KEY-----",
    "pem_encrypted": "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,3F17\n\n"
    f"{PEM_BODY}-----END RSA PRIVATE KEY-----",
    "pem_json_escaped": json.dumps(f"-----BEGIN PRIVATE KEY-----\n{PEM_BODY}-----END PRIVATE KEY-----\n")[1:-1],
    "pem_truncated": f"-----BEGIN EC PRIVATE KEY-----\n{PEM_BODY}",
    "github": "ghp_TOKSECRETabcdefghijklmnopqrstuvwxyz01",
    "github_fine": "github_pat_11ABCDEFG0TOKSECRET_abcdefghijklmnopqrstuvwxyz0123456789",
    "slack_bot": "xoxb-1234567890-1234567890123-TOKSECRETabcdefghijklm",
    "slack_app": "xapp-1-A0123TOKSECRET-4567890123-abcdef0123456789abcdef",
    "openai": "sk-proj-TOKSECRETabcdefghijklmnopqrstuvwxyz0123",
    "aws_pair": "AKIAIOSFODNN7TOKSECR wJalrXUtnFEMI/K7MDENG/bPxRfiTOKSECRETKEY",
    "aws_temporary": "ASIAIOSFODNN7TOKSECR: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",
    "google": "AIzaSyTOKSECRET-abcdefghijklmnopqrstuvw",
    "huggingface": "hf_TOKSECRETabcdefghijklmnopqrstuvwxyz",
    "telegram": f"123456789:{TELEGRAM_SECRET}",
    "google_client_secret": "GOCSPX-TOKSECRETabcdefghijklmnopq",
    "google_access_token": "ya29.a0TOKSECRETabcdefghijklmnopqrstuvwxyz",
    "shopify": "shpat_" + "0123456789abcdef" * 2,
    "sendgrid": "SG.TOKSECRETabcdefghijkl.mnopqrstuvwxyzTOKSECRET0123456789abcdefghij",
}


@pytest.mark.parametrize("name", sorted(TOKENS))
def test_token_shapes_go_from_every_free_text_column(name: str) -> None:
    token = TOKENS[name]
    secrets = [
        token,
        "eyJzdWIiOiJUT0tTRUNSRVQ",
        "TOKSECRET",
        "PEMSECRET",
        "Zm5vZ2VuZXJhdGVk",
        TELEGRAM_SECRET,
        "wJalrXUtnFEMI",
        "TOKSECR",
    ]
    text = f"upstream said: {token} (retry later)"
    assert _leaked(_everywhere_text(text), *secrets) == []
    for redaction in _REDACTIONS:
        clean = redaction.log_text(text)
        assert clean.startswith("upstream said: ") and REDACTED in clean
        assert redaction.log_text(clean) == clean
    assert [s for s in secrets if s in _logged(text)] == []


# -- 6. what is no credential is stored as it came -------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "token: expired",
        "Password: required",
        "session: 3 of 5 used",
        "max_tokens=4096 exceeds the limit",
        "tokenUsage=1234 of 5000, input_tokens: 1234",
        "nextPageToken: CgRhYmMxMjM0NTY3ODk",
        "token_type=Bearer expires_in=3600",
        "tokenUrl: https://auth.test/oauth/token",
        "missing key=destination for routine book_trip",
        "author: agent, coverage=answered",
        "SharedAccessKeyName=RootManageSharedAccessKey",
        "aws_access_key_id=none",
        "see webhooks docs at /docs/webhooks/configuring-outgoing-webhooks",
        "signatureAlgorithm=RS256",
        "time 12:34:56 at 2026-12-06T09:13:35Z",
    ],
)
def test_prose_and_names_that_hold_no_credential_stay(text: str) -> None:
    assert_unchanged(text)


def assert_unchanged(text: str) -> None:
    """`text` left as it is, as free text (with and without operator patterns) and inside a stored document."""
    for redaction in _REDACTIONS:
        assert redaction.log_text(text) == text
    assert redact_card_json({"k": text}) == stored_json({"k": text})


def assert_planted_gone(text: str, mark: str, *also: str) -> None:
    """The planted secret `mark` (and each of `also`, another spelling of it) gone from `text` as free text, under
    every redaction, which leaves its own output as it is; and `mark` gone from a stored document holding `text`
    as a key and as values."""
    for redaction in _REDACTIONS:
        clean = redaction.log_text(text)
        for m in (mark, *also):
            assert m not in clean
        assert redaction.log_text(clean) == clean
    assert mark not in redact_card_json({"k": text, text: [text]})


def test_conversation_data_is_stored_as_it_came() -> None:
    """The columns the tool measures (ids, routine and slot names, coverage values, citations) keep their values
    when the envelope around them holds a credential, and an envelope or card without one is stored byte for byte:
    slot keys named like credentials, a card's JWS signature, OAuth token URLs and API-key scheme names stay."""
    slots = [
        {"key": "password", "type": "string", "required": True, "description": "token: the one we texted you"},
        {"key": "api_key", "type": "string", "required": False, "description": "Session 2"},
    ]
    routine = {
        "name": "reset_password",
        "toolName": "credentials.rotate",
        "status": "awaiting_input",
        "pendingInput": slots,
    }
    usage = {"tokenCount": 512, "input_tokens": 10, "tokenUsage": "high", "maxTokens": 4096, "session": 3}
    plain = envelope(routine=routine, detail={"usage": usage, "nextPageToken": "CgRhYmMxMjM0NTY3ODk"})
    for env in (plain, {**plain, "detail": {"push": PUSH_CONFIG}}):
        msg = agent_message(mid="0f8fad5b-d9cb-469f-a165-70867728950e", env=env, contextId="ctx-Tk7vQ2xR9mL4wZ8pN3bJ6")
        ext = extract(exchange_from_flow(a2a_flow(response=jsonrpc_result({"message": msg}))), TextPolicy())
        assert ext is not None
        row = ext.messages[-1]
        assert (row["message_id"], row["context_id"]) == (
            "0f8fad5b-d9cb-469f-a165-70867728950e",
            "ctx-Tk7vQ2xR9mL4wZ8pN3bJ6",
        )
        assert (row["routine_name"], row["routine_tool_name"], row["routine_status"]) == (
            "reset_password",
            "credentials.rotate",
            "awaiting_input",
        )
        assert [(s["key"], s["description"]) for s in row["pending_input"]] == [
            ("password", "token: the one we texted you"),
            ("api_key", "Session 2"),
        ]
        assert (row["coverage_availability"], row["coverage"], row["coverage_reason"]) == (
            "assessed",
            "answered",
            "sufficient_evidence",
        )
    assert redact_card_json(plain) == stored_json(plain)
    card = {
        "name": "Shop",
        "url": "https://agent.test/a2a",
        "securitySchemes": {
            "oauth": {
                "type": "oauth2",
                "flows": {"clientCredentials": {"tokenUrl": "https://auth.test/token", "scopes": {}}},
            },
            "key": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
        },
        "signatures": [{"protected": "eyJhbGciOiJFUzI1NiJ9", "signature": "MEUCIQDx7-card-jws-signature"}],
        "skills": [{"id": "reset_password", "tags": ["token", "password"]}],
    }
    assert redact_card_json(card) == stored_json(card)


# -- 7. every form at once, any surroundings; a fixed point; linear time ---------------------------------------

_PLANTS = st.sampled_from(
    [
        "Password=PLANTSECRET1x;",
        "pwd = 'PLANTSECRET1 x'",
        '"client_secret": "PLANTSECRET1"',
        "'token':'PLANTSECRET1'",
        "X-Api-Key: PLANTSECRET1",
        "Cookie: a=PLANTSECRET1; b=c",
        "AccountKey=PLANTSECRET1/+x==",
        "Signature=PLANTSECRET1",
        f"https://hooks.slack.com/services/T1/B2/PLANTSECRET1{SLACK_SECRET}",
        f"-----BEGIN PRIVATE KEY-----\nPLANTSECRET1{PEM_BODY}-----END PRIVATE KEY-----",
        "ghp_PLANTSECRET1abcdefghijklmnopqrstuv",
        "Bearer PLANTSECRET1",
    ]
)
_AROUND = st.lists(
    st.sampled_from([" ", "\n", "(", ")", ",", ";", '"', "'", "{", "}", "[", "]", "word", "x=1", "a: b", "é", "\\"]),
    max_size=5,
).map("".join)
_DELIMITED = st.sampled_from([" ", "\n", "(", ",", ";", "{", "[", "> "])


@given(_AROUND, _DELIMITED, _PLANTS, _DELIMITED, _AROUND)
def test_a_planted_secret_never_survives_its_surroundings(
    before: str, left: str, plant: str, right: str, after: str
) -> None:
    assert_planted_gone(before + left + plant + right + after, "PLANTSECRET1")


def test_the_new_rules_run_in_linear_time() -> None:
    """Each new rule on 400 KB crafted against it (names and separators at every other position, quotes and escapes
    that never close, PEM headers without a footer, key ids without a secret, webhook words and segments): a
    quadratic scan takes minutes (`token:token:…` took 530 s before values of prose were bounded by the next
    separator); a linear one well under a second each. In a child process, killed after 60 s."""
    code = (
        "from converse_tap.a2a.redact import Redaction\n"
        "n = 400_000\n"
        "texts = ['token=' * (n // 6), 'token:' * (n // 6), 'Password: ' * (n // 10), '\"token\":\"' * (n // 9),\n"
        "         \"'token':'\" + \"\\\\'\" * (n // 2), '\\\\\"token\\\\\":\\\\\"' * (n // 12), 'pwd={' * (n // 5),\n"
        "         'Cookie: ' + 'a=b;' * (n // 4), 'Cookie: a ' * (n // 10), 'a' * n + '=x', 'token' * (n // 5) + '=',\n"
        "         'password=\"' + '\\\\\"' * (n // 2), '-----BEGIN PRIVATE KEY-----' * (n // 27),\n"
        "         '-----BEGIN PRIVATE KEY-----' + 'A' * n, '-----BEGIN PRIVATE KEY-----' + '-a' * (n // 2),\n"
        "         'AKIAAAAAAAAAAAAAAAAA ' * (n // 21), ('AKIAAAAAAAAAAAAAAAAA' + ':' * 8) * (n // 28),\n"
        "         'hooks.x/' + '/'.join(['Ab1' * 8] * (n // 25)), 'hook/ ' * (n // 6), 'hook/' + 'a' * n,\n"
        "         '1:AA' * (n // 4), ('123:' + 'AA' * 17) * (n // 38), 'pass ' * (n // 5) + '=']\n"
        "for r in (Redaction(), Redaction.from_patterns(['zz'])):\n"
        "    for text in texts:\n"
        "        r.log_text(text)\n"
        "        r.url(text)\n"
        "print('done')\n"
    )
    finishes_within(code, 60, "the credential rules of redact_secrets on 400 KB of crafted text")


def test_an_error_that_is_no_object_is_cut_after_redaction() -> None:
    """An error that is no object is stored as its text, cut to 500 characters: it was cut first and redacted
    after, so a credential across the cut (an AWS key id and the secret key after it) reached the redactor as a
    fragment no rule knows, and half the secret key was stored."""
    from converse_tap.a2a.rows import ERROR_TEXT

    secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    text = "x" * (ERROR_TEXT - 40) + f" AKIAIOSFODNN7EXAMPLE {secret} and more words after it"
    flow = a2a_flow(response=json.dumps({"jsonrpc": "2.0", "id": "r-1", "error": text}).encode())
    ext = extract(exchange_from_flow(flow), TextPolicy())
    assert ext is not None
    stored = ext.exchange["error_message"]
    assert len(stored) <= ERROR_TEXT and stored.startswith("x" * (ERROR_TEXT - 40))
    assert secret[:8] not in stored
