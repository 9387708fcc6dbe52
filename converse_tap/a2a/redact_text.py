"""Credentials in free text (error messages, log lines, the strings of a stored document), besides shapes.

`free_text(text, url)` finds, each with a linear scan and only when a substring test says it may be there:
- request and header lines quoted as bytes (`b'…'`) by the HTTP stack's protocol errors (mitmproxy:
  `Bad HTTP request line: b'POST /a?access_token=… HTTP/1.1'`, `Invalid header line: b'Set-Cookie s=…'`;
  h2: `Illegal character '\\n' in header value: b'Bearer …\\n'`): header values are never stored, so a quoted
  header line keeps its name and loses its value, a quoted header value is replaced whole, and a request line's
  target goes through URL redaction whole (spaces included);
- request lines in text (`GET /tasks/T1;jsessionid=…`, the HTTP+JSON `method_raw`): the target as a URL;
- URLs: `scheme://…`, `scheme:\\/\\/…` (JSON-escaped slashes), the WHATWG forms of the special schemes
  (`http:/\\u:pw@h`, `http:u:pw@h`) and scheme-relative `//host/…`; userinfo after any of them is dropped;
- userinfo without a scheme before a `host:port` (`user:pw@grpc.agent.test:443`);
- echoed credentials of an `Authorization`/`Proxy-Authorization` header (`Authorization: Basic dXNl…`; without a
  scheme, a value quoted, or of 8+ characters with a digit or a symbol, or that `redact_prose.looks_generated`),
  and a `Bearer` token wherever it stands, unless it is a word said about the scheme (`Bearer sunshine` goes,
  `Bearer authentication` stays);
- first of all, the values of secret-named `name=value` / `name: value` / `name is value` pairs (connection
  strings, cookies, echoed secret headers, JSON and dict text, prose: `redact_named.key_values`) and of header
  lists written as pairs (`[('X-Api-Key', '…')]`, `{"name": "X-Api-Key", "value": "…"}`: `redact_pairs`), and
  last, webhook URLs written without a scheme (`hooks.slack.com/services/…/<secret>`: `redact_secrets.hook_words`).
  (Credentials written in base64 are found with the shapes: `redact_b64`.)
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .redact_b64 import may_hold_base64
from .redact_named import key_values, may_hold_key_value
from .redact_pairs import may_hold_pairs, pairs
from .redact_prose import STATUS_WORDS, looks_generated
from .redact_secrets import hook_words
from .redact_url import _CANDIDATE, REDACTED, nested_url

# where a URL may start in text: after a delimiter (or at the start), never inside a word or a path
_AFTER = r"(?<![^\s'\"<>(\[{=,])"
# userinfo in a URL inside free text (a log line): `scheme://user:pw@host` -> `scheme://host`. A match starts
# where a run of scheme characters starts (the lookbehind), never inside one: from `\b`, a text like `a.a.a.a…`
# was scanned from each of its word starts to the end of the run, O(n²) (16 KB took seconds). The whole run
# before `://` is the scheme; userinfo after any run goes (also after `_` or a digit, where `\b[a-z]` missed it)
_TEXT_USERINFO = re.compile(
    rf"(?i)((?<![a-z0-9+.-])[a-z0-9+.-]*://|(?<![a-z0-9+.-])[a-z0-9+.-]+:\\/\\/|{_AFTER}//)[^/\s@'\"<>]*@"
)
# a URL in free text: `scheme://…`, `scheme:\/\/…` (JSON-escaped), and the forms WHATWG parsers (browsers, SDKs)
# also read as URLs of the special schemes: `http:/\\u:pw@h`, `http:\\\\h`, `http:u:pw@h` (an `@` within 256
# characters: a bounded look, so that `http:http:http:…` is not scanned to its end from each of its colons);
# and a scheme-relative `//host…` that starts a word
_TEXT_URL = re.compile(
    r"(?i)(?<![a-z0-9+.-])(?:[a-z0-9+.-]*://|(?P<esc>[a-z0-9+.-]+:\\/\\/)"
    r"|(?:https?|wss?|ftp):(?:[/\\]+|(?=[^\s'\"<>/\\@]{0,256}@)))[^\s'\"<>]+"
    rf"|{_AFTER}//(?=[a-z0-9\[%_~-])[^\s'\"<>]+"
    r"|(?<![a-z0-9+.-])(?P<enc>[a-z0-9+.-]+%3A%2F%2F)[^\s'\"<>]+"
)
_SPECIAL = ("http:", "https:", "ws:", "wss:", "ftp:")


def might_hold_url(text: str) -> bool:
    """Whether `text` may hold a URL that `free_text` would change (`scheme://`, `//host`, `scheme:\\/\\/`, or a
    special scheme's `http:`). Substring scans, at C speed: a case-insensitive regular expression took 9 µs for
    a small envelope and 0.9 s for 16 MiB; a lower-cased copy is made only when a `p:` or `s:` is there at all."""
    if "//" in text or "\\/\\/" in text or "%2F%2F" in text or "%2f%2f" in text:
        return True
    if not ("p:" in text or "s:" in text or "P:" in text or "S:" in text):
        return False
    low = text.lower()
    return any(scheme in low for scheme in _SPECIAL)


def _auth_hint(text: str) -> bool:
    return "earer" in text or "EARER" in text or "uthorization" in text or "UTHORIZATION" in text


def may_change(text: str) -> bool:
    """Whether the built-in free-text rules may change `text` (or a JSON document's text holding it): False means
    they certainly do not. Substring scans only."""
    return bool(
        might_hold_url(text)
        or _CANDIDATE.search(text)
        or "@" in text
        or " /" in text
        or "b'" in text
        or 'b"' in text
        or 'b\\"' in text
        or "\\/" in text
        or _auth_hint(text)
        or "PRIVATE KEY" in text
        or may_hold_key_value(text)
        or may_hold_base64(text)
    )


# a bytes literal as Python's repr writes it (mitmproxy's and h2's errors quote what they refuse this way)
_BYTES = re.compile(r"(?<![A-Za-z0-9_])b(?:'(?:[^'\\\n]++|\\.)*+'|\"(?:[^\"\\\n]++|\\.)*+\")")
_REPR_BREAK = re.compile(r"(\\r\\n|\\n|\\r)")  # a line break inside a bytes literal, as repr escapes it
_HEADER_LINE = re.compile(r"(:?[!#$%&*+.^_`|~0-9A-Za-z-]+)([ \t]*:?[ \t]*)(.*)", re.S)
_HEADER_COLON = re.compile(r"[!#$%&*+.^_`|~0-9A-Za-z-]+[ \t]*:")
_METHOD = re.compile(r"[A-Za-z][A-Za-z-]{0,23}")
_VERSION = re.compile(r"HTTP/[0-9.]{0,8}")
_CONTEXT = 80  # characters before a literal read for what it is (`… in header value: b'…'`)


def _request_line(line: str, url: Callable[[str], str], forced: bool) -> str | None:
    """A request line with its target redacted as a URL (spaces and all), or None when `line` is none."""
    method, sp, rest = line.partition(" ")
    if sp and _METHOD.fullmatch(method):
        version = ""
        at = rest.rfind(" HTTP/")
        if at >= 0 and _VERSION.fullmatch(rest[at + 1 :]):
            rest, version = rest[:at], rest[at:]
        target = rest.strip(" ")
        if target and (forced or version or target[0] in "/*" or "://" in target):
            return f"{method}{sp}{rest[: len(rest) - len(rest.lstrip(' '))]}{url(target)}{version}"
    return url(line) if forced and line else None


def _header_line(line: str) -> str:
    m = _HEADER_LINE.fullmatch(line)
    if m is None:  # a folded line, or no name: all of it is a value
        return REDACTED if line else line
    return f"{m.group(1)}{m.group(2)}{REDACTED}" if m.group(3) else line


def _quoted(content: str, context: str, url: Callable[[str], str]) -> str:
    """What a bytes literal quoted by a protocol error may keep: see the module's doc."""
    if not content:
        return content
    if "header value" in context or "value for" in context:
        return REDACTED
    headers = "header" in context
    parts = _REPR_BREAK.split(content)
    for i in range(0, len(parts), 2):
        line = parts[i]
        if i == 0:
            if line.startswith("HTTP/"):
                continue  # a status line
            done = _request_line(line, url, "request line" in context)
            if done is not None:
                parts[i] = done
                continue
            if not headers and not _HEADER_COLON.match(line):
                continue
        parts[i] = _header_line(line)
    return "".join(parts)


def quoted_heads(text: str, url: Callable[[str], str]) -> str:
    out: list[str] = []
    pos = 0
    for m in _BYTES.finditer(text):
        start, end = m.span()
        context = text[max(pos, start - _CONTEXT) : start].lower()
        literal = m.group()
        out += [text[pos:start], literal[:2], _quoted(literal[2:-1], context, url), literal[-1]]
        pos = end
    if not out:
        return text
    out.append(text[pos:])
    return "".join(out)


_REQUEST_TARGET = re.compile(
    r"(?<![A-Za-z0-9_-])((?:GET|HEAD|POST|PUT|DELETE|PATCH|OPTIONS|TRACE|CONNECT) +)(/[^\s'\"<>]*)"
)
# `user:pw@host:port` with no scheme: userinfo before a host and a port (a gRPC address), dropped. Possessive and
# bounded, so that no start is scanned twice
_SCHEMELESS = re.compile(
    rf"{_AFTER}[A-Za-z0-9._~%!$&*+-]++:[^\s'\"<>/@]{{0,256}}+@"
    r"(?=(?:\[[0-9A-Fa-f:.]*\]|[A-Za-z0-9.-]+):[0-9]{1,5}(?![0-9A-Za-z.-]))"
)
# an echoed Authorization header (also as a list: Go's `map[Authorization:[…]]`): its scheme stays, its credentials
# go; without a scheme, a quoted value, or one that looks like a credential (`_auth`: `Authorization: required`
# stays). Atomic, so that a value already redacted is not taken for the credentials of a scheme
_AUTH = re.compile(
    r"(?i)(?<![a-z0-9-])((?:proxy-)?authorization[\"']?[ \t]*[:=][ \t]*(?:(?P<list>\[)(?!REDACTED\])[ \t]*)?"
    r"(?P<quote>[\"'])?(?P<scheme>(?>(?:basic|bearer|digest|negotiate|ntlm|token|dpop|mac|hoba|apikey|"
    r"aws4-hmac-sha256)[ \t]+(?=[^\s'\",;])))?)"
    r"(?!\[REDACTED\])(?P<value>(?(list)[^\s'\",;\]]|[^\s'\",;])+)"
)
_SYMBOL = re.compile(r"[0-9+/=._~-]")
_BEARER = re.compile(r"(?i)(?<![a-z0-9])(bearer[ \t]+)([a-z0-9._~+/-]{3,}=*)")
# words that follow `Bearer` in what is said about the scheme rather than a token (`Bearer authentication`, `Bearer
# tokens only`, `the bearer of`...; and STATUS_WORDS: `Bearer required`, `bearer must`)
_ABOUT_BEARER_WORDS = """
    token tokens auth authentication authorization authorizations authorized scheme schemes header headers
    credential credentials realm prefix format formats flow flows grant grants jwt jwts access keyword word
    bond bonds instrument instruments
"""
_ABOUT_BEARER = frozenset(_ABOUT_BEARER_WORDS.split())


def _auth(m: re.Match[str]) -> str:
    value = m.group("value")
    if m.group("scheme") or m.group("quote") or (len(value) >= 8 and _SYMBOL.search(value)) or looks_generated(value):
        return m.group(1) + REDACTED
    return m.group()


def _bearer(m: re.Match[str]) -> str:
    """A token after `Bearer`: 8+ characters with a digit or that look generated go whole (as they did); any other
    run goes too (`Bearer sunshine`), unless it is a word said about the scheme (`_ABOUT_BEARER`, STATUS_WORDS:
    `Bearer authentication`, `Bearer required`) or the start of a longer name (`Bearer expires_in=…`). The
    punctuation that ends a sentence after a word stays."""
    value = m.group(2)
    if len(value) >= 8 and (_DIGIT.search(value) or looks_generated(value)):
        return m.group(1) + REDACTED
    after = m.string[m.end() : m.end() + 1]
    if after and (after.isalnum() or after in "_=-" or (after in "\"'" and _PARAM.fullmatch(value))):
        return m.group()  # a longer name, or an auth-param (`WWW-Authenticate: Bearer realm="…"`)
    word = value.rstrip(_SENTENCE_END)
    low = word.lower()
    if len(word) < 3 or low in STATUS_WORDS or low in _ABOUT_BEARER:
        return m.group()
    return m.group(1) + REDACTED + value[len(word) :]


_SENTENCE_END = ".:!?"
_PARAM = re.compile(r"[A-Za-z]++=")


_DIGIT = re.compile(r"[0-9]")


def _text_url(m: re.Match[str], url: Callable[[str], str]) -> str:
    if m.group("esc"):  # `scheme:\/\/…`: read with its slashes, written with them escaped again
        return url(m.group().replace("\\/", "/")).replace("/", "\\/")
    if m.group("enc"):  # `https%3A%2F%2F…`: a URL percent-encoded whole (a query value quoted in a message)
        return nested_url(m.group())
    return url(m.group())


def free_text(text: str, url: Callable[[str], str]) -> str:
    """`text` with the credentials this module's doc lists taken out (`url` redacts one URL); shapes are left
    to the caller."""
    if may_hold_key_value(text):  # first: a value read as a URL would lose only its part before a `/`
        text = key_values(text)
        if may_hold_pairs(text):  # header lists as pairs: `[('X-Api-Key', '…')]`, `{"name": …, "value": …}`
            text = pairs(text)
    if "b'" in text or 'b"' in text:
        text = quoted_heads(text, url)
    if " /" in text:
        text = _REQUEST_TARGET.sub(lambda m: m.group(1) + url(m.group(2)), text)
    if might_hold_url(text):
        text = _TEXT_USERINFO.sub(r"\1", _TEXT_URL.sub(lambda m: _text_url(m, url), text))
    if "@" in text:
        text = _SCHEMELESS.sub("", text)
    if _auth_hint(text):
        text = _BEARER.sub(_bearer, _AUTH.sub(_auth, text))
    return hook_words(text)
