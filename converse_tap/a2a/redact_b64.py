"""Credentials written in base64: a `Basic` credential, and text that holds a credential encoded whole.

`encoded_secrets(text)` replaces
- the base64 after `Basic ` when it decodes to `user:password` text (`Basic dXNlcjpodW50ZXI=` anywhere in free text
  or a stored value, not only after an `Authorization:` name);
- a run of 10+ base64 characters (standard or URL-safe alphabet, padded or not) that decodes to UTF-8 text which
  the free-text rules would change: a JSON blob holding a token (`eyJ0b2tlbiI6…`, a `state` or cursor), a `data:`
  URL's payload, a JWT-like segment whose JSON holds a `password`, a URL with a secret query value or userinfo,
  another `Basic` credential, base64 inside base64.

What is decided: a base64 value is a credential when what it encodes is one by the rules the text around it is
read by, or a `Basic` credential. Base64 of anything else stays as it came (images, protobuf bytes, ids, cursors
and blobs of ordinary JSON: `{"page": 2}`), and so do runs that decode to no text at all, which every word and id
does. Each run is decoded once; the text it decodes to is read by the free-text rules, which decode the runs it
holds in turn: every level is three quarters of the one above it, so the whole stays linear in the text.
"""

from __future__ import annotations

import binascii
import re

from .redact_secrets import REDACTED

MIN_RUN = 10  # base64 characters of a run decoded: 7 bytes, `pwd=abc`
# a run of base64 characters starting where no such run goes on (read once from its start), with a capital, a digit,
# a `+` or a `/` in it (base64 of text has them; words and slugs have none); `=` padding after it
_RUN = re.compile(
    rf"(?<![A-Za-z0-9+/_-])(?=[a-z_-]*+[A-Z0-9+/])[A-Za-z0-9+/_-]{{{MIN_RUN},}}+(?:={{1,2}}+(?![A-Za-z0-9+_=-]))?"
)
# `Basic <token68>` as an Authorization header's value is written, wherever it stands
_BASIC = re.compile(r"(?i)(?<![a-z0-9_-])(basic[ \t]++)([A-Za-z0-9+/_-]{4,}+=*+)")
# what text decoded from base64 must not hold: controls other than tab and line breaks (bytes that are no text)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
# the base64 characters the first byte of ASCII text encodes to (its top six bits are under 32): a run that starts
# otherwise encodes binary data or text that starts with a non-ASCII character, and is not decoded
_ASCII_LEAD = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdef")
_URLSAFE = str.maketrans("-_", "+/")


def _decoded(run: str) -> str | None:
    """The text a base64 run encodes, or None when it encodes none (not UTF-8, or control characters)."""
    body = run.rstrip("=")
    if len(body) % 4 == 1:  # a run cut short (clipped in an anomaly or an error message): its whole quartets
        body = body[:-1]
    body += "=" * (-len(body) % 4)
    try:
        text = binascii.a2b_base64(body.translate(_URLSAFE)).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    return None if _CONTROL.search(text) else text


def _holds_a_credential(text: str) -> bool:
    from .redact import _builtin_text  # (redact imports this module's caller: read when first needed)

    return _builtin_text(text) != text


def _encodes_a_credential(run: str) -> bool:
    if run[0] not in _ASCII_LEAD:
        return False
    text = _decoded(run)
    return text is not None and _holds_a_credential(text)


def _run(m: re.Match[str]) -> str:
    run = m.group()
    if _encodes_a_credential(run):
        return REDACTED
    if "/" not in run:
        return run
    # a path (`/cb/<base64url>/x`): each segment of MIN_RUN characters read as a run of its own
    pieces = run.split("/")
    found = False
    for i, piece in enumerate(pieces):
        if len(piece) >= MIN_RUN and _encodes_a_credential(piece):
            pieces[i], found = REDACTED, True
    return "/".join(pieces) if found else run


def _basic(m: re.Match[str]) -> str:
    text = _decoded(m.group(2))
    return m.group(1) + REDACTED if text is not None and ":" in text else m.group()


def may_hold_base64(text: str) -> bool:
    """Whether `encoded_secrets` may change `text`: a `Basic`, or a run of MIN_RUN base64 characters."""
    if len(text) < MIN_RUN:  # (most strings of a document are keys and enum values: no regular expression)
        return "asic" in text or "ASIC" in text
    return "asic" in text or "ASIC" in text or _RUN.search(text) is not None


def encoded_secrets(text: str) -> str:
    """`text` with the base64 credentials this module's doc lists replaced."""
    if "asic" in text or "ASIC" in text:
        text = _BASIC.sub(_basic, text)
    return _RUN.sub(_run, text) if len(text) >= MIN_RUN else text
