"""Credentials that are not a URL's userinfo or query: the names that mark them, webhook tokens carried in a path,
and shapes that span more than one run of token characters.

- `is_secret_text_name(name)`, `is_secret_json_key(key)`: names whose value is a credential, in free text (read by
  `redact_named.key_values`) and as a key of a stored document (`hides_a_secret`, `hidden`); `lone_secret_pair`:
  a header's `[name, value]` pair written alone (`["X-Api-Key", "…"]`), told from a list of two tags.
- `hook_path(path, hook_host)`: random-looking path segments after a webhook segment (`/api/webhooks/<id>/<token>`,
  `/webhookb2/…`), or anywhere in the path of a webhook host (`hooks.slack.com/services/T…/B…/<secret>`).
- `wide_shapes(text)`: PEM private key blocks, and an AWS access key id with the secret key written after it.
"""

from __future__ import annotations

import re
from itertools import pairwise
from typing import Any

from .redact_prose import STATUS_WORDS, looks_generated, random_letters

REDACTED = "[REDACTED]"

# -- names --------------------------------------------------------------------------------------------------------

# a name (lower case) that holds a credential: passwords, secrets, tokens (not `max_tokens`, `tokenizer` or a
# `pageToken`), API, access, account, private and signing keys, SAS and SigV4 signatures, credentials, cookies,
# session ids. Not `key` alone (slot keys, map keys), nor `author`
_SECRET_WORD = re.compile(
    r"passw|passphrase|pwd|secret|(?<!page)(?<!page[-_.])token(?!s|iz)|api[-_. ]?key|access[-_. ]?key|"
    r"account[-_. ]?key|private[-_. ]?key|signing[-_. ]?key|auth[-_. ]?key|subscription[-_. ]?key|"
    r"signature|credential|cookie"
)
# names that are credentials whole, whatever the tail rule below says (`sid` ends like an `id`)
_SECRET_EXACT = frozenset({"pass", "pw", "pwd", "sig", "sid", "auth", "apikey", "sessid", "session", "token", "bearer"})
# a name for something about a credential, not the credential: `token_type`, `tokenUrl`, `AccessKeyId`,
# `SharedAccessKeyName`, `password_hint`, `credential_provider`, `signatureAlgorithm`, `tokenUsage`
_NOT_SECRET_TAIL = re.compile(
    r"(?:name|id|ids|type|url|uri|endpoint|expiry|expires?|expires[-_]?(?:in|at)|count|length|len|size|header|"
    r"path|file|mode|scope|scopes|format|method|kind|hint|version|policy|provider|field|prompt|required|limit|"
    r"ttl|timeout|age|algorithm|location|in|enabled|rotation|set|usage|used|budget|total|remaining|estimate|cost|"
    r"rate|quota|limits|stdin|audience|issuer|lifetime)$"
)
_PASS_TAIL = re.compile(r"[-_.](?:pass|pw)$")  # `DB_PASS`, `SMTP_PW`: a password's name cut short
_SESSION_ID = re.compile(r"(?:sess(?:ion)?[-_.]?id|(?:^|[-_.])sid)$")  # `JSESSIONID`, `PHPSESSID`, `connect.sid`


def is_secret_text_name(name: str) -> bool:
    """Whether `name` (of a `name=value` in text, or a JSON key) names a credential. Narrower than a URL's secret
    query names: free text and documents also carry names like `author`, `code` or `key` that are no credential."""
    low = name.lower().strip("-_.")
    if low in _SECRET_EXACT or _SESSION_ID.search(low) or _PASS_TAIL.search(low):
        return True
    return bool(_SECRET_WORD.search(low)) and not _NOT_SECRET_TAIL.search(low)


_KEY_NAME = re.compile(r"[A-Za-z0-9_. -]{1,64}")  # a key that reads as a name (not `?token=T`, not a sentence)
_JSON_KEY_CACHE: dict[str, bool] = {}
_JSON_KEY_CACHE_MAX = 8192


# header names whose value is a credential, as keys of a stored document (`{"headers": {"Authorization": …}}`);
# in free text, `redact_text` reads them with their scheme (`Authorization: Basic [REDACTED]`)
_AUTH_KEYS = frozenset({"authorization", "proxy-authorization"})


def is_secret_json_key(key: str) -> bool:
    """A JSON key whose scalar value is a credential (`token`, `credentials`, `client_secret`, `password`,
    `Authorization`...): the text-name rule, less `signature` (a card's `signatures[].signature` is a public JWS
    signature). Cached: the same few keys come back in every envelope and card."""
    got = _JSON_KEY_CACHE.get(key)
    if got is None:
        low = key.lower()
        got = bool(_KEY_NAME.fullmatch(key)) and low != "signature" and (low in _AUTH_KEYS or is_secret_text_name(key))
        if len(key) <= 64:
            if len(_JSON_KEY_CACHE) >= _JSON_KEY_CACHE_MAX:
                _JSON_KEY_CACHE.clear()
            _JSON_KEY_CACHE[key] = got
    return got


def _text(v: object) -> bool:
    """A value a secret-named key hides: text, not empty and not redacted already (a number under such a name is
    a count far more often than a credential: `tokenCount`, `maxTokens`)."""
    return isinstance(v, str) and v != "" and v != REDACTED


def secret_text_in(v: object) -> bool:
    """Whether the value of a secret-named key holds what it hides: text, or a list with text in it."""
    return _text(v) or (isinstance(v, list) and any(_text(x) for x in v))


def hidden(v: object) -> object:
    """The value of a secret-named key as stored: `[REDACTED]`, or a list with its text so (objects in it are
    redacted as any other)."""
    if isinstance(v, list):
        return [REDACTED if _text(x) else x for x in v]
    return REDACTED


def hides_a_secret(d: dict[Any, Any]) -> bool:
    """Whether an object of a document has a secret-named key (`token`, `credentials`, `client_secret`...) whose
    value `Redaction.json_urls` replaces: a push-notification config's `token` and `authentication.credentials`.
    It runs on every object of every envelope: values that cannot be text are skipped first, keys are looked up."""
    if d.keys() <= PLAIN_KEYS:  # every key known to name no credential: one set comparison, at C speed
        return False
    if "kty" in d and jwk_private(d):  # a JSON Web Key with its private members (`kty` is never a plain key)
        return True
    known = _JSON_KEY_CACHE.get
    for k, v in d.items():
        t = type(v)
        if t is not str and t is not list and not isinstance(v, str | list):
            continue
        secret = known(k)
        if secret is None:
            secret = type(k) is str and is_secret_json_key(k)
        if secret and secret_text_in(v):
            return True
    if len(PLAIN_KEYS) >= _JSON_KEY_CACHE_MAX:
        PLAIN_KEYS.clear()
    PLAIN_KEYS.update(k for k in d if type(k) is str and len(k) <= 64 and k != "kty" and not is_secret_json_key(k))
    return False


# a JSON Web Key's private members (RFC 7518: RSA's `d`, `p`, `q`, `dp`, `dq`, `qi`, `oth`; EC's and OKP's `d`;
# a symmetric key's `k`)
JWK_PRIVATE = frozenset({"d", "p", "q", "dp", "dq", "qi", "oth", "k"})


def jwk_private(d: dict[Any, Any]) -> bool:
    """Whether an object is a JSON Web Key (it has a `kty`) holding private members (the caller has seen `kty`)."""
    return type(d.get("kty")) is str and any(k in d and secret_text_in(d[k]) for k in JWK_PRIVATE)


_PAIR_NAMES = ("name", "key", "Name", "Key")


def named_secret_value(d: dict[Any, Any]) -> str | None:
    """`value` (or `Value`) when an object pairs a secret name with its value: `{"name": "Authorization", "value":
    "Bearer …"}` (HAR headers, cookies and query strings), `{"name": "DB_PASSWORD", "value": "…"}` (an environment
    list), `{"Key": "api_key", "Value": "…"}`; else None."""
    for field in ("value", "Value"):
        if field in d:
            if not secret_text_in(d[field]):
                return None
            for name_field in _PAIR_NAMES:
                name = d.get(name_field)
                if type(name) is str and is_secret_json_key(name):
                    return field
            return None
    return None


def pair_list(v: list[Any]) -> bool:
    """Whether a list is one of `[name, value]` pairs: a header list as Go, Node and Python write one
    (`[["Authorization", "Bearer …"], ["Accept", "*/*"]]`). A list of two words (`["token", "password"]`, a
    skill's tags) is none: its items are no pairs."""
    return all(type(x) is list and len(x) == 2 and type(x[0]) is str for x in v)


def secret_pair(x: list[Any]) -> bool:
    """A `[name, value]` pair (of a `pair_list`) whose value the name marks as a credential."""
    return is_secret_json_key(x[0]) and secret_text_in(x[1])


# an Authorization header's scheme at the start of a value (`Bearer …`, `AWS4-HMAC-SHA256 Credential=…`)
_SCHEME = re.compile(
    r"(?i)(?:basic|bearer|digest|negotiate|ntlm|token|dpop|mac|hoba|apikey|aws4-hmac-sha256)[ \t]++(?=\S)"
)


def hidden_text(value: str) -> str:
    """A header's value as stored: `[REDACTED]`, after its scheme when it starts with one (`Bearer [REDACTED]`)."""
    scheme = _SCHEME.match(value)
    return REDACTED if scheme is None else scheme.group() + REDACTED


# names of headers whose value is a credential, written without a `-` (`Authorization`, `Cookie`)
_HEADER_NAMES = frozenset({"authorization", "cookie", "cookie2"})


# a header's name as written (`Content-Type`, `X-Api-Key`; one word of the common ones: `Accept`): in a pair, a
# second name (a list of two headers), not a value
_HEADER_NAME = re.compile(r"[A-Z][a-z0-9]*+(?:-[A-Za-z0-9][a-z0-9]*+)++")
_ONE_WORD_HEADERS_TEXT = """
    Accept Allow Authorization Connection Cookie Date Expect Forwarded From Host Link Location Origin Pragma Prefer
    Priority Range Referer Server Trailer Upgrade Vary Via
"""
_ONE_WORD_HEADERS = frozenset(_ONE_WORD_HEADERS_TEXT.split())


def is_header_name(value: str) -> bool:
    """Whether `value` reads as a header's name (`Content-Type`, `Accept`), not a credential."""
    return value in _ONE_WORD_HEADERS or _HEADER_NAME.fullmatch(value) is not None


def secret_header_name(name: str) -> bool:
    """A secret name written as a header's: with a `-` or `Authorization`/`Cookie`, and a capital letter."""
    return ("-" in name or name.lower() in _HEADER_NAMES) and not name.islower() and is_secret_json_key(name)


def lone_secret_pair(name: str, value: object, any_case: bool) -> bool:
    """Whether a two-item list or tuple that is no item of a list of pairs (`["X-Api-Key", "…"]`, `("Authorization",
    "…")`) pairs a header's name with its value: the name a secret name written as a header's (with a `-`, or
    `Authorization`/`Cookie`; with a capital letter unless `any_case`: gRPC metadata in text is lower case) and the
    value text that is no word about it (STATUS_WORDS); or any secret name and a value that `looks_generated` and
    is no secret name itself. A list of two tags (`["token", "password"]`, `["api-key", "security"]` in a
    document) and of two headers (`["X-Api-Key", "Accept"]`) stays."""
    if not _text(value) or not is_secret_json_key(name):
        return False
    assert isinstance(value, str)
    if value.lower() in STATUS_WORDS or is_header_name(value):
        return False
    if ("-" in name or name.lower() in _HEADER_NAMES) and (any_case or not name.islower()):
        return True
    return looks_generated(value) and not is_secret_json_key(value)


# JSON keys that name no credential (`messageId`, `coverage`, `title`...), as `hides_a_secret` found them
PLAIN_KEYS: set[str] = set()


# -- webhook tokens in a path ----------------------------------------------------------------------------------------

_HOOK_SEGMENT = re.compile(r"(?i)(?:web[-_]?)?hooks?|webhookb2|incomingwebhooks?")
_HOOK_LABELS = frozenset({"hook", "hooks", "webhook", "webhooks"})
_TOKENISH = re.compile(r"[A-Za-z0-9_@-]{16,}")
_HEXISH = re.compile(r"[0-9A-Fa-f_@-]+")


def is_hook_host(host: str) -> bool:
    """A host that receives webhooks (`hooks.slack.com`, `contoso.webhook.office.com`, `webhook.site`)."""
    if "ook" not in host and "OOK" not in host:
        return False
    return any(label in _HOOK_LABELS or label.startswith("webhook") for label in host.lower().split("."))


def random_looking(segment: str) -> bool:
    """A segment that reads as a generated secret, not a word: 16+ token characters, and either hex with digits
    and letters (a UUID, a hex key), or digits and both cases (base62/64), or both cases with a quarter of each
    (camelCase words have far fewer capitals), or digits and letters of one case alternating often (base36), or
    letters with three pairs that words hardly hold (`redact_prose.random_letters`: a token of lower-case letters
    only). A slug (`slack-notifications-v2`) and an all-digit id (Discord's webhook id) are no secret."""
    if len(segment) < 16 or not _TOKENISH.fullmatch(segment):
        return False
    digits = sum(c.isdigit() for c in segment)
    upper = sum(c.isupper() for c in segment)
    lower = sum(c.islower() for c in segment)
    if not upper + lower:
        return False
    if digits and _HEXISH.fullmatch(segment):
        return True
    if upper and lower and (digits or (upper * 4 >= len(segment) and lower * 4 >= len(segment))):
        return True
    if digits and not (upper and lower):  # one case: a base36 token alternates letters and digits, a slug does not
        switches = sum(a.isdigit() != b.isdigit() for a, b in pairwise(segment) if a.isalnum() and b.isalnum())
        if switches >= 6:
            return True
    return random_letters(segment, 16)


def hook_path(path: str, hook_host: bool) -> str:
    """`path` with its random-looking segments replaced: all of them on a webhook host, else those after a webhook
    segment (`/api/webhooks/123/<token>`). Other paths stay as they are."""
    if not hook_host and "ook" not in path and "OOK" not in path:
        return path
    segments = path.split("/")
    after = hook_host
    changed = False
    for i, segment in enumerate(segments):
        # the token characters a segment starts with: a URL quoted in text may end in `)`, `\` or `.`
        head = _TOKENISH.match(segment)
        if after and head and random_looking(head.group()):
            segments[i] = REDACTED + segment[head.end() :]
            changed = True
        elif _HOOK_SEGMENT.fullmatch(segment):
            after = True
    return "/".join(segments) if changed else path


# a word of free text (a run without spaces, quotes or brackets), read once from its start
_WORD = re.compile(r"(?<![^\s'\"<>()\[\]{},])[^\s'\"<>()\[\]{},]++")


def hook_words(text: str) -> str:
    """Webhook URLs written without a scheme in free text (`hooks.slack.com/services/T…/B…/…`, `see
    discord.com/api/webhooks/1/…`): each word with a `/` read as a host and a path. (With a scheme, a URL is
    redacted as a URL.)"""
    if "/" not in text or ("ook" not in text and "OOK" not in text):
        return text

    def word(m: re.Match[str]) -> str:
        w = m.group()
        if "/" not in w or "://" in w:
            return w
        host, _, path = w.partition("/")
        return host + hook_path("/" + path, is_hook_host(host))

    return _WORD.sub(word, text)


# -- shapes wider than a run of token characters ---------------------------------------------------------------

# a PEM private key block: its header, body and footer go whole. The body never crosses a `-----`, so a text of
# headers without footers is read once
_PEM = re.compile(
    r"-----BEGIN[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----(?:[A-Za-z0-9+/=\s\\:,.]++|-(?!----))*+"
    r"(?:-----END[ A-Z0-9]{0,40}PRIVATE KEY(?: BLOCK)?-----)?"
)
# an AWS access key id (long-term `AKIA`, temporary `ASIA`) and the 40-character secret key written after it, or
# the part of it a value clipped for an anomaly kept (`…+N` after it: `envelope.clip`)
_AWS_PAIR = re.compile(
    r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])"
    r"(?:[\s:=,;|'\"/]{1,8}+(?:[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])|[A-Za-z0-9/+]{1,39}+(?=\u2026)))?"
)


def wide_shapes(text: str) -> str:
    """PEM private keys and AWS key pairs replaced (substring tests first: most text has neither)."""
    if "PRIVATE KEY" in text:
        text = _PEM.sub(REDACTED, text)
    if "AKIA" in text or "ASIA" in text:
        text = _AWS_PAIR.sub(REDACTED, text)
    return text
