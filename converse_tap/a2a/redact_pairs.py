"""Header lists written as pairs, in free text: a secret name's value goes, each value read once.

`pairs(text)` replaces the value of
- a `(name, value)` / `[name, value]` pair that is an item of a list (its bracket opens after a `[`, `(` or `,`):
  mitmproxy's `Headers[(b'Host', b'…'), (b'Authorization', b'…')]`, Python's `[('X-Api-Key', '…')]`, gRPC
  metadata `(('authorization', '…'),)`, JSON `[["Authorization", "…"]]`, escaped inside a JSON string too; its
  scheme stays (`('authorization', 'Bearer [REDACTED]')`);
- a header's pair alone, a two-item list or tuple (or call) that closes after its value: `("X-API-Key", "…")`,
  `headers.set('Authorization', '…')`, when `redact_secrets.lone_secret_pair` says so (a header's name, or a value
  that looks generated: `tags: ["token", "password"]` stays);
- a name and its value written as two members: `{"name": "X-Api-Key", "value": "…"}` (HAR headers quoted in an
  error), `Metadata(key='x-api-key', value='…')`, `{'Key': 'api_key', 'Value': '…'}`;
- the password passed with a user to what takes credentials: `auth=('ann', '…')`, `HTTPBasicAuth('ann', '…')`,
  `NetworkCredential("ann", "…")`, `ftp.login('ann', '…')`.

A name is secret as a key of a stored document is (`redact_secrets.is_secret_json_key`: `Authorization`, `Cookie`,
`X-Api-Key`, `password`...). In stored documents the same pairs are read by `redact.Redaction.json_urls`.
"""

from __future__ import annotations

import re

from .redact_prose import STATUS_WORDS
from .redact_secrets import REDACTED, hidden_text, is_secret_json_key, lone_secret_pair

_Q = r"\\*+[\"']"  # a quote, with the backslashes that escape it in JSON text inside a JSON string
_NAME = r"(?P<name>[A-Za-z_-][A-Za-z0-9_.-]{0,63}+)"
_VALUE = r"(?P<value>[^\"'\\\r\n]*+)"  # (a value with a quote or a backslash in it is not read)
# an item of a list that is a pair: its bracket opens after `[`, `(` or `,`; bytes literals (`b'…'`) too
_PAIR = re.compile(
    rf"(?<=[\[(,])[ \t]*+[\[(][ \t]*+b?(?P<q>{_Q}){_NAME}(?P=q)[ \t]*+,[ \t]*+b?(?P<q2>{_Q}){_VALUE}(?P=q2)"
)
# `name`/`key` then `value` members, JSON (`"name": "…", "value": "…"`) or keyword arguments (`key='…', value='…'`)
_MEMBERS = re.compile(
    rf"(?<![A-Za-z0-9_])(?P<nq>{_Q})?(?:name|key|Name|Key)(?(nq)(?P=nq))[ \t]*+[:=][ \t]*+(?P<q>{_Q}){_NAME}(?P=q)"
    rf"[ \t]*+,[ \t]*+(?P<vq>{_Q})?(?:value|Value)(?(vq)(?P=vq))[ \t]*+[:=][ \t]*+b?(?P<q2>{_Q}){_VALUE}(?P=q2)"
)


# a pair that is no item of a list: a two-item list or tuple that closes after its value (`("X-Api-Key", "…")`)
_LONE = re.compile(
    rf"[\[(][ \t]*+b?(?P<q>{_Q}){_NAME}(?P=q)[ \t]*+,[ \t]*+b?(?P<q2>{_Q}){_VALUE}(?P=q2)"
    r"[ \t]*+,?[ \t]*+[\])]"
)


# a user and a password passed to what takes credentials: `auth=('ann', '…')`, `HTTPBasicAuth('ann', '…')`,
# `req.SetBasicAuth("ann", "…")`, `NetworkCredential("ann", "…")`, `ftp.login('ann', '…')`: the callee's (or the
# keyword's) name, its last part ending in `auth`, `authentication`, `credential(s)` or `login`, then two strings
_AUTH_CALL = re.compile(
    r"(?i)(?<![A-Za-z0-9_])[A-Za-z_][A-Za-z0-9_]{0,63}+"
    r"(?:(?<=auth)|(?<=authentication)|(?<=credential)|(?<=credentials)|(?<=login))[ \t]*+(?:=[ \t]*+)?\([ \t]*+"
    rf"(?P<uq>{_Q})[^\"'\\\r\n]{{0,256}}+(?P=uq)[ \t]*+,[ \t]*+(?P<q2>{_Q}){_VALUE}(?P=q2)"
)


def may_hold_auth_call(text: str) -> bool:
    """Whether `_AUTH_CALL` may match `text` (substring tests)."""
    return "(" in text and (
        "auth" in text or "Auth" in text or "AUTH" in text or "redential" in text or "ogin" in text or "OGIN" in text
    )


def _call(m: re.Match[str]) -> str:
    value = m.group("value")
    return m.group() if not value or value == REDACTED or value.lower() in STATUS_WORDS else _hide(m)


def _lone(m: re.Match[str]) -> str:
    if not lone_secret_pair(m.group("name"), m.group("value"), any_case=True):
        return m.group()
    return _hide(m)


def _value(m: re.Match[str]) -> str:
    value = m.group("value")
    if not value or value == REDACTED or not is_secret_json_key(m.group("name")):
        return m.group()
    return _hide(m)


def _hide(m: re.Match[str]) -> str:
    """The match with its value replaced (its scheme kept: `('authorization', 'Bearer [REDACTED]')`)."""
    start, end = m.span("value")
    base = m.start()
    whole = m.group()
    hidden = hidden_text(m.group("value"))
    if whole[start - base : end - base] == hidden:
        return whole
    return whole[: start - base] + hidden + whole[end - base :]


def may_hold_pairs(text: str) -> bool:
    """Whether `pairs` may change `text` (substring tests; the caller has seen a secret name's word in it, or
    `may_hold_auth_call` says so)."""
    return "," in text and ('"' in text or "'" in text)


def pairs(text: str) -> str:
    """`text` with the value of each secret-named pair this module's doc lists replaced."""
    if "[" in text or "(" in text:
        text = _LONE.sub(_lone, _PAIR.sub(_value, text))
    if "alue" in text:
        text = _MEMBERS.sub(_value, text)
    return text


def auth_calls(text: str) -> str:
    """`text` with the password passed with a user to what takes credentials replaced (`_AUTH_CALL`); the caller
    has seen `may_hold_auth_call` and `may_hold_pairs` say so."""
    return _AUTH_CALL.sub(_call, text)
