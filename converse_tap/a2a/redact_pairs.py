"""Header lists written as pairs, in free text: a secret name's value goes, each value read once.

`pairs(text)` replaces the value of
- a `(name, value)` / `[name, value]` pair that is an item of a list (its bracket opens after a `[`, `(` or `,`):
  mitmproxy's `Headers[(b'Host', b'…'), (b'Authorization', b'…')]`, Python's `[('X-Api-Key', '…')]`, gRPC
  metadata `(('authorization', '…'),)`, JSON `[["Authorization", "…"]]`, escaped inside a JSON string too. A two-item
  list that is no item of a list (`tags: ["token", "password"]`) stays: it is not told from a list of two words;
- a name and its value written as two members: `{"name": "X-Api-Key", "value": "…"}` (HAR headers quoted in an
  error), `Metadata(key='x-api-key', value='…')`, `{'Key': 'api_key', 'Value': '…'}`.

A name is secret as a key of a stored document is (`redact_secrets.is_secret_json_key`: `Authorization`, `Cookie`,
`X-Api-Key`, `password`...). In stored documents the same pairs are read by `redact.Redaction.json_urls`.
"""

from __future__ import annotations

import re

from .redact_secrets import REDACTED, is_secret_json_key

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


def _value(m: re.Match[str]) -> str:
    value = m.group("value")
    if not value or value == REDACTED or not is_secret_json_key(m.group("name")):
        return m.group()
    start, end = m.span("value")
    base = m.start()
    whole = m.group()
    return whole[: start - base] + REDACTED + whole[end - base :]


def may_hold_pairs(text: str) -> bool:
    """Whether `pairs` may change `text` (substring tests; the caller has seen a secret name's word in it)."""
    return "," in text and ('"' in text or "'" in text)


def pairs(text: str) -> str:
    """`text` with the value of each secret-named pair this module's doc lists replaced."""
    if "[" in text or "(" in text:
        text = _PAIR.sub(_value, text)
    if "alue" in text:
        text = _MEMBERS.sub(_value, text)
    return text
