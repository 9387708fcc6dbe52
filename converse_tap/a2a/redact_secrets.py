"""Credentials that are not a URL's userinfo or query: named values in free text, webhook tokens carried in a path,
and shapes that span more than one run of token characters.

- `key_values(text)`: the value of a secret-named `name=value` or `name: value` wherever it stands in free text:
  connection strings (`Password=…;`, `Pwd={…}`, `AccountKey=…`, `SharedAccessSignature=…`), the rest of an AWS
  SigV4 `Authorization` header (`Credential=…, SignedHeaders=…, Signature=…`), echoed secret headers
  (`X-Api-Key: …`, `X-A2A-Notification-Token: …`), cookies (`Cookie: a=b; c=d`, `Set-Cookie: …`), and JSON or
  Python-dict text (`"token": "…"`, `'credentials': '…'`, `{\\"client_secret\\":\\"…\\"}`). Names are looked
  for only where a word every secret name holds is (`find`), each value is read from where its name ends and never
  read again: linear.
- `hook_path(path, hook_host)`: random-looking path segments after a webhook segment (`/api/webhooks/<id>/<token>`,
  `/webhookb2/…`), or anywhere in the path of a webhook host (`hooks.slack.com/services/T…/B…/<secret>`).
- `wide_shapes(text)`: PEM private key blocks, and an AWS access key id with the secret key written after it.
"""

from __future__ import annotations

import re
from itertools import pairwise
from typing import Any

REDACTED = "[REDACTED]"

# -- names --------------------------------------------------------------------------------------------------------

# a name (lower case) that holds a credential: passwords, secrets, tokens (not `max_tokens`, `tokenizer` or a
# `pageToken`), API, access, account, private and signing keys, SAS and SigV4 signatures, credentials, cookies,
# session ids. Not `key` alone (slot keys, map keys), nor `author`
_SECRET_WORD = re.compile(
    r"passw|passphrase|pwd|secret|(?<!page)(?<!page[-_.])token(?!s|iz)|api[-_.]?key|access[-_.]?key|"
    r"account[-_.]?key|private[-_.]?key|signing[-_.]?key|auth[-_.]?key|subscription[-_.]?key|"
    r"signature|credential|cookie"
)
# names that are credentials whole, whatever the tail rule below says (`sid` ends like an `id`)
_SECRET_EXACT = frozenset({"pass", "pw", "pwd", "sig", "sid", "auth", "apikey", "sessid", "session", "token"})
# a name for something about a credential, not the credential: `token_type`, `tokenUrl`, `AccessKeyId`,
# `SharedAccessKeyName`, `password_hint`, `credential_provider`, `signatureAlgorithm`, `tokenUsage`
_NOT_SECRET_TAIL = re.compile(
    r"(?:name|id|ids|type|url|uri|endpoint|expiry|expires?|expires[-_]?(?:in|at)|count|length|len|size|header|"
    r"path|file|mode|scope|scopes|format|method|kind|hint|version|policy|provider|field|prompt|required|limit|"
    r"ttl|timeout|age|algorithm|location|in|enabled|rotation|set|usage|used|budget|total|remaining|estimate|cost|"
    r"rate|quota|limits)$"
)
_SESSION_ID = re.compile(r"(?:sess(?:ion)?[-_.]?id|(?:^|[-_.])sid)$")  # `JSESSIONID`, `PHPSESSID`, `connect.sid`


def is_secret_text_name(name: str) -> bool:
    """Whether `name` (of a `name=value` in text, or a JSON key) names a credential. Narrower than a URL's secret
    query names: free text and documents also carry names like `author`, `code` or `key` that are no credential."""
    low = name.lower().strip("-_.")
    if low in _SECRET_EXACT or _SESSION_ID.search(low):
        return True
    return bool(_SECRET_WORD.search(low)) and not _NOT_SECRET_TAIL.search(low)


_KEY_NAME = re.compile(r"[A-Za-z0-9_. -]{1,64}")  # a key that reads as a name (not `?token=T`, not a sentence)
_JSON_KEY_CACHE: dict[str, bool] = {}
_JSON_KEY_CACHE_MAX = 8192


def is_secret_json_key(key: str) -> bool:
    """A JSON key whose scalar value is a credential (`token`, `credentials`, `client_secret`, `password`...): the
    text-name rule, less `signature` (a card's `signatures[].signature` is a public JWS signature). Cached: the same
    few keys come back in every envelope and card."""
    got = _JSON_KEY_CACHE.get(key)
    if got is None:
        got = bool(_KEY_NAME.fullmatch(key)) and key.lower() != "signature" and is_secret_text_name(key)
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
    PLAIN_KEYS.update(k for k in d if type(k) is str and len(k) <= 64 and not is_secret_json_key(k))
    return False


# JSON keys that name no credential (`messageId`, `coverage`, `title`...), as `hides_a_secret` found them
PLAIN_KEYS: set[str] = set()


_HINT_WORDS = ("pass", "pw", "secret", "token", "key", "sig", "credential", "sess", "cookie", "auth", "sid")


def may_hold_key_value(text: str) -> bool:
    """Whether `key_values` may change `text`: a `=` or `:`, and a word every secret name holds. Substring scans
    (a case-insensitive regular expression took 650 µs on 2 KB without a hit; this takes 16)."""
    if "=" not in text and ":" not in text:
        return False
    low = text.lower()
    return any(w in low for w in _HINT_WORDS)


# -- named values in free text --------------------------------------------------------------------------------------

# `name` then `=` or `:`, the name optionally quoted (`"token":`, `'token':`, `\"token\":`). A name starts where a
# run of name characters starts (never inside one) and is at most 64 characters long: each start is tried once
_NAME_SEP = re.compile(
    r"(?<![A-Za-z0-9_.-])(?P<q>\\?[\"'])?(?P<name>[A-Za-z_-][A-Za-z0-9_.-]{0,63}+)(?(q)\\?[\"'])"
    r"[ \t]*+(?P<sep>[=:])(?![=:/])[ \t]*+"
)
# values, each read from where its name ends; a closing quote or brace is optional, so that a match never fails
# after reading (and so nothing is read twice)
_DQ = re.compile(r"\"((?:[^\"\\\r\n]++|\\[^\r\n])*+)")
_SQ = re.compile(r"'((?:[^'\\\r\n]++|\\[^\r\n])*+)")
_ESC_DQ = re.compile(r"\\\"([^\"\\\r\n]*+)")  # JSON text inside a JSON string: `\"token\":\"…\"`
_BRACE = re.compile(r"\{((?:[^}\r\n]++|\}\})*+)")  # ODBC: `Pwd={p;w}`, `}}` escapes a brace
_BARE = re.compile(r"([^\s;,&?#'\"<>\\(){}\[\]]++)")  # a value ends where a URL's query or fragment starts
# `word: value` in prose, whose value may be let through: it ends at the next `:` or `=` too, so that what is read
# and let through is never read again from a later name (`token:token:token:…` read to its end from each name
# took minutes for 400 KB)
_PROSE = re.compile(r"([^\s;,&?#'\"<>\\(){}\[\]:=]++)")
_COOKIE = re.compile(r"([^\s;,'\"]++(?:;[ \t]*+[^\s;,'\"]++)*+)")  # `a=b; c=d; Path=/; HttpOnly`
_USERINFO_REST = re.compile(r"[^\s/@'\"<>]{0,256}+@")  # the rest of a URL's userinfo, up to its `@`
_COOKIE_NAMES = frozenset({"cookie", "set-cookie", "cookie2", "set-cookie2"})
_NOT_VALUES = frozenset({"null", "none", "true", "false", "undefined", "nil"})
_DIGIT = re.compile(r"[0-9]")
_UPPER = re.compile(r"[A-Z]")
_LOWER = re.compile(r"[a-z]")


def _looks_like_credential(value: str) -> bool:
    """For `word: value` in prose (`token: expired` stays): a digit in six characters or more, or mixed case in 16."""
    if len(value) >= 6 and _DIGIT.search(value):
        return True
    return len(value) >= 16 and bool(_UPPER.search(value)) and bool(_LOWER.search(value))


def _value(text: str, pos: int, sep: str, quoted_name: bool, name: str) -> tuple[int, int] | None:
    """The span of the secret value that starts at `pos` (the quotes not in it), or None when there is none."""
    head = text[pos : pos + 2]
    if head[:1] == '"':
        m = _DQ.match(text, pos)
    elif head[:1] == "'":
        m = _SQ.match(text, pos)
    elif head == '\\"':
        m = _ESC_DQ.match(text, pos)
    elif head[:1] == "{" and sep == "=":
        m = _BRACE.match(text, pos)
    elif name in _COOKIE_NAMES:
        m = _COOKIE.match(text, pos)
    else:
        prose = sep == ":" and not quoted_name and "-" not in name and "_" not in name
        m = (_PROSE if prose else _BARE).match(text, pos)
        if m is None or m.group(1).lower() in _NOT_VALUES:
            return None
        if prose and not _looks_like_credential(m.group(1)):
            return None  # prose: `token: expired`, `password: required`
    if m is None or not m.group(1):
        return None
    return m.span(1)


_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


def _name_starts(text: str) -> list[int]:
    """Where a name holding one of the words every secret name holds may start: the start of its run of name
    characters, and the quote before it; in order. Only there is `_NAME_SEP` tried: trying it at every position of
    the text cost 9 µs for a 100-character error message; this costs a `find` per word. Each run start is found
    walking back no further than the word found before it, so `pwpwpw…` is walked once, not 64 times."""
    low = text.lower()
    found: list[int] = []
    for word in _HINT_WORDS:
        i = low.find(word)
        while i >= 0:
            found.append(i)
            i = low.find(word, i + 1)
    if not found:
        return found
    hits = sorted(set(found))
    starts: list[int] = []
    prev, run = -1, 0
    for i in hits:
        j = i
        while j > max(prev, 0) and text[j - 1] in _NAME_CHARS:
            j -= 1
        start = run if prev >= 0 and j == prev else j  # the walk met the word before: the same run
        prev, run = i, start
        if i - start >= 64 or (starts and starts[-1] == start):
            continue  # a name is at most 64 characters long; a run once
        if start and text[start - 1] in "\"'":
            if start > 1 and text[start - 2] == "\\":
                starts.append(start - 2)
            starts.append(start - 1)
        starts.append(start)
    return starts


def key_values(text: str) -> str:
    """`text` with the value of every secret-named `name=value` / `name: value` replaced (see the module's doc)."""
    out: list[str] = []
    pos = 0  # where the text not yet written starts (no name is read before it)
    for start in _name_starts(text):
        if start < pos:
            continue  # inside a value already replaced
        m = _NAME_SEP.match(text, start)
        if m is None:
            continue
        if (text.endswith("//", 0, start) or text.endswith("\\/\\/", 0, start)) and _USERINFO_REST.match(text, m.end()):
            continue  # `https://apikey:…@host`: userinfo, which the URL rules drop whole (the host stays)
        name = m.group("name")
        low = name.lower()
        if (low not in _COOKIE_NAMES or m.group("sep") != ":") and not is_secret_text_name(name):
            continue
        span = _value(text, m.end(), m.group("sep"), m.group("q") is not None, low)
        if span is None:
            continue
        start, end = span
        if text[start:end] == REDACTED:
            pos = end
            continue
        out += [text[pos:start], REDACTED]
        pos = end
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


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
    (camelCase words have far fewer capitals), or digits and letters of one case alternating often (base36).
    A slug (`slack-notifications-v2`) and an all-digit id (Discord's webhook id) are no secret."""
    if len(segment) < 16 or not _TOKENISH.fullmatch(segment):
        return False
    digits = sum(c.isdigit() for c in segment)
    upper = sum(c.isupper() for c in segment)
    lower = sum(c.islower() for c in segment)
    if not upper + lower:
        return False
    if digits and _HEXISH.fullmatch(segment):
        return True
    if upper and lower:
        return bool(digits) or (upper * 4 >= len(segment) and lower * 4 >= len(segment))
    if digits:  # one case: a base36 token alternates letters and digits, a slug does not
        switches = sum(a.isdigit() != b.isdigit() for a, b in pairwise(segment) if a.isalnum() and b.isalnum())
        return switches >= 6
    return False


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
# an AWS access key id (long-term `AKIA`, temporary `ASIA`) and the 40-character secret key written after it
_AWS_PAIR = re.compile(
    r"(?<![A-Za-z0-9])(?:AKIA|ASIA)[0-9A-Z]{16}(?![A-Za-z0-9])"
    r"(?:[\s:=,;|'\"/]{1,8}+[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+]))?"
)


def wide_shapes(text: str) -> str:
    """PEM private keys and AWS key pairs replaced (substring tests first: most text has neither)."""
    if "PRIVATE KEY" in text:
        text = _PEM.sub(REDACTED, text)
    if "AKIA" in text or "ASIA" in text:
        text = _AWS_PAIR.sub(REDACTED, text)
    return text
