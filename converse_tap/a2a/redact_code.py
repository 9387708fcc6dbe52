"""Credentials in code, protocol transcripts and key documents quoted in free text, where no `name=value` marks them.

`code_secrets(text)` replaces
- the key passed to a JWT library: `jwt.encode(payload, '…')`, `jwt.decode(token, '…', …)`, `jwt.sign(p, "…")`;
- the value passed with a libcurl credential option: `curl_setopt($ch, CURLOPT_USERPWD, "ann:…")` (the password of
  `user:password`), `CURLOPT_PASSWORD`, `CURLOPT_PROXYUSERPWD`, `CURLOPT_XOAUTH2_BEARER`, `CURLOPT_KEYPASSWD`;
- a header's name and value written as two strings without brackets: `header 'Authorization', '…'` (Ruby),
  when the name is a secret one written as a header's (`redact_secrets.secret_header_name`: with a capital) and
  the value no header's name itself;
- SMTP, IMAP and POP3 logins as a transcript shows them: `AUTH PLAIN <base64>` (user and password separated by NUL
  bytes, which the base64 rule refuses as binary), `AUTH XOAUTH2`/`OAUTHBEARER <base64>`, the line answering a
  `334 UGFzc3dvcmQ6` (base64 of `Password:`) prompt, `a001 LOGIN ann …`, `PASS …` after a `USER` line;
- one-time codes and PINs: `otp=123456`, `PIN: 1234`, `verification code is 483920` (4 to 10 digits);
- the private members of a JSON Web Key written as text (`"d"`, `"p"`, `"q"`, `"dp"`, `"dq"`, `"qi"`, `"k"`) when
  the text holds a `"kty"`.

Each rule is a regular expression read once from where its word stands, behind a substring test: linear.
"""

from __future__ import annotations

import re

from .redact_prose import STATUS_WORDS
from .redact_secrets import REDACTED, hidden_text, is_header_name, secret_header_name

_Q = r"\\*+[\"']"
_STR = rf"(?P<q>{_Q})(?P<value>[^\"'\\\r\n]{{1,4096}}+)(?P=q)"
# `jwt.encode(<one argument without brackets or quotes>, '…'`
_JWT = re.compile(
    r"(?<![A-Za-z0-9_])(?i:jwt)\.(?:encode|decode|sign|verify)[ \t]*+\([ \t]*+"
    r"(?:\{[^{}\r\n]{0,512}+\}|[^,()'\"{}\r\n]{1,256}+)[ \t]*+,[ \t]*+" + _STR
)
_CURLOPT = re.compile(
    r"(?<![A-Za-z0-9_])CURLOPT_(?P<opt>USERPWD|PROXYUSERPWD|PASSWORD|PROXYPASSWORD|XOAUTH2_BEARER|KEYPASSWD|"
    r"TLSAUTH_PASSWORD|PROXY_TLSAUTH_PASSWORD)[ \t]*+,[ \t]*+" + _STR
)
# two strings, a header's name and its value, with no bracket around them (`_LONE` of `redact_pairs` reads those)
_BARE_PAIR = re.compile(
    rf"(?<![A-Za-z0-9_])(?P<nq>{_Q})(?P<name>[A-Za-z][A-Za-z0-9_-]{{0,63}}+)(?P=nq)[ \t]*+,[ \t]*+" + _STR
)
# SMTP/IMAP/POP3: `AUTH PLAIN <b64>` and friends, the answer to a `Password:` prompt, `tag LOGIN user pw`, `PASS pw`
_MAIL = re.compile(
    r"(?<![A-Za-z0-9_])(?:AUTH|AUTHENTICATE)[ \t]++(?:PLAIN|XOAUTH2|OAUTHBEARER)[ \t]++"
    r"(?=[A-Z0-9]*+[a-z+/=])(?P<b64>[A-Za-z0-9+/]{4,}+=*+)"  # (not a mechanism's name: `250-AUTH PLAIN LOGIN`)
    r"|334[ \t]++UGFzc3dvcmQ6[ \t]*+\r?\n(?:[ \t]*+C:[ \t]*+)?(?P<answer>[A-Za-z0-9+/]{2,}+=*+)"
    # IMAP's `a001 LOGIN ann …`: a tag of letters and digits (`a001`, `A1`; not `IMAP4rev1`); POP3's and FTP's
    # `PASS …` on the line after (or the one after the server's answer to) a `USER` line. Each starts a word (a
    # line, or after `C:` or a prompt's `>`)
    r"|(?<![^\s:>])[A-Za-z]{0,4}+[0-9]{1,6}+[ \t]++LOGIN[ \t]++[^\s]{1,256}+[ \t]++"
    r"(?P<login>[^\s]++)"
    r"|(?<![^\s:>])USER[ \t]++[^\s]{1,256}+[ \t]*+\r?\n(?:[^\r\n]{0,256}+\r?\n)?"
    r"[ \t]*+(?:C:[ \t]*+)?PASS[ \t]++(?P<pass>[^\s]++)"
)
# one-time codes and PINs: their digits
_CODE = re.compile(
    r"(?i)(?<![A-Za-z0-9_])(?:otp|totp|pin|passcode|(?:one[- ]time|verification|mfa|2fa|security|auth)[ _-]?code)"
    r"(?:[ \t]*+[:=][ \t]*+|[ \t]++(?:is|was)[ \t]++)[\"']?(?P<digits>[0-9]{4,10}+)(?![0-9A-Za-z])"
)
# a JSON Web Key's private members (`"d": "…"`), in the text of a key document (its `"kty"` seen first)
_JWK_PRIVATE = re.compile(r"(?P<nq>\\*+\")(?:d|p|q|dp|dq|qi|k|oth)(?P=nq)[ \t]*+:[ \t]*+" + _STR)


# the words a secret header's name written as a header's holds (`Authorization`, `Cookie`, `X-Api-Key`,
# `X-Auth-Token`): `_BARE_PAIR` (a regular expression tried at every quote) runs only where one is
_HEADER_WORDS = ("uthorization", "ookie", "-Key", "-KEY", "-Token", "-TOKEN", "-Auth", "-AUTH", "-Secret", "-Pass")


def _pair_hint(text: str) -> bool:
    return ("'" in text or '"' in text) and "," in text and any(word in text for word in _HEADER_WORDS)


def _mail_hint(text: str) -> bool:
    return "AUTH" in text or "UGFzc3dvcmQ6" in text or "LOGIN" in text or ("PASS " in text and "USER " in text)


# where a one-time code's name and its separator may be: its last letters and the separator (`otp=`, `PIN:`,
# `code is`; `_CODE` reads the rest)
_CODE_HINTS = ("otp", "OTP", "PIN", "in:", "in=", "in is", "ode:", "ode=", "ode is", "ODE")


def _code_hint(text: str) -> bool:
    return any(hint in text for hint in _CODE_HINTS)


def may_hold_code_secret(text: str) -> bool:
    """Whether `code_secrets` may change `text` when `redact_named.may_hold_key_value` says no: substring tests.
    `may_change` asks this of every string of every document not seen before: a flat chain of the cheapest tests,
    no function calls, no lower-cased copy. (`PASS …` and the `CURLOPT_` options hold a word `may_hold_key_value`
    looks for: `pass`, `pwd`, `auth`, `bearer`.)"""
    return (
        "AUTH" in text
        or "LOGIN" in text
        or "jwt." in text
        or '"kty"' in text
        or "otp" in text
        or "OTP" in text
        or "PIN" in text
        or "in:" in text
        or "in=" in text
        or "ode:" in text
        or "ode is" in text
    )


def _replace(text: str, rule: re.Pattern[str], groups: tuple[str, ...]) -> str:
    out: list[str] = []
    pos = 0
    for m in rule.finditer(text):
        for group in groups:
            start, end = m.span(group)
            if start < 0:
                continue
            value = text[start:end]
            if start < pos or value == REDACTED or value.lower() in STATUS_WORDS:
                continue
            if m.re is _CURLOPT and m.group("opt").endswith("USERPWD"):
                cut = value.find(":")
                if cut < 0 or cut == len(value) - 1:
                    continue
                start += cut + 1
            out += [text[pos:start], REDACTED]
            pos = end
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


def _header_pair(m: re.Match[str]) -> str:
    """A header's name and value as two strings: the value goes, its scheme kept (`'Bearer [REDACTED]'`)."""
    value = m.group("value")
    if REDACTED in value or value.lower() in STATUS_WORDS or not secret_header_name(m.group("name")):
        return m.group()
    if is_header_name(value):
        return m.group()  # two names: `'Authorization', 'Content-Type'`
    start, end = m.span("value")
    whole, base = m.group(), m.start()
    return whole[: start - base] + hidden_text(value) + whole[end - base :]


def code_secrets(text: str) -> str:
    """`text` with the credentials this module's doc lists replaced; each rule after a substring test of its own."""
    if "jwt." in text or "JWT." in text:
        text = _JWT.sub(_keep_or_hide, text)
    if "CURLOPT_" in text:
        text = _replace(text, _CURLOPT, ("value",))
    if _pair_hint(text):
        text = _BARE_PAIR.sub(_header_pair, text)
    if _mail_hint(text):
        text = _replace(text, _MAIL, ("b64", "answer", "login", "pass"))
    if _code_hint(text):
        text = _replace(text, _CODE, ("digits",))
    if '"kty"' in text:
        text = _replace(text, _JWK_PRIVATE, ("value",))
    return text


def _keep_or_hide(m: re.Match[str]) -> str:
    value = m.group("value")
    if value == REDACTED or value.lower() in STATUS_WORDS:
        return m.group()
    start, end = m.span("value")
    whole, base = m.group(), m.start()
    return whole[: start - base] + REDACTED + whole[end - base :]
