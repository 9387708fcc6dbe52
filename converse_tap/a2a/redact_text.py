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
- userinfo without a scheme before a `host:port` (`user:pw@grpc.agent.test:443`) or a dotted host and a path
  (HTTPie's `http ann:pw@api.test/x`);
- echoed credentials of an `Authorization`/`Proxy-Authorization` header (`Authorization: Basic dXNl…`; without a
  scheme, any value but a word said about the header or a placeholder: `Authorization: sunshine` goes,
  `Authorization: required` and `Authorization: Bearer $TOKEN` stay), and a `Bearer` token wherever it stands,
  unless it is a word said about the scheme (`Bearer sunshine` goes, `Bearer authentication` stays) or `bearer` is
  a noun of prose (`the torch bearer carried the flame`);
- first of all, the values of secret-named `name=value` / `name: value` / `name is value` pairs (connection
  strings, cookies, echoed secret headers, JSON and dict text, prose: `redact_named.key_values`), of header
  lists written as pairs, of a header's pair alone and of credentials passed to a call (`[('X-Api-Key', '…')]`,
  `("X-Api-Key", "…")`, `HTTPBasicAuth('ann', '…')`: `redact_pairs`) and the credentials of command lines and
  `.netrc` entries (`curl -u ann:…`, `--password …`: `redact_cli`); last, webhook URLs written without a scheme
  (`hooks.slack.com/services/…/<secret>`: `redact_secrets.hook_words`), and words percent-encoded that decode to
  any of the above (`Authorization%3A%20Bearer%20…`: `redact_percent`).
  (Credentials written in base64 are found with the shapes: `redact_b64`.)
"""

from __future__ import annotations

import re
from collections.abc import Callable

from .redact_b64 import may_hold_base64
from .redact_cli import command_lines, may_hold_command
from .redact_code import code_secrets, may_hold_code_secret
from .redact_markup import elements, escaped, may_hold_escapes, may_hold_markup, may_hold_table, tables
from .redact_named import key_values, may_hold_key_value
from .redact_pairs import auth_calls, may_hold_auth_call, may_hold_pairs, pairs
from .redact_percent import may_hold_percent, percent_words
from .redact_prose import STATUS_WORDS, looks_generated
from .redact_secrets import hook_words
from .redact_url import _CANDIDATE, REDACTED, nested_url, redact_shapes

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
        or may_hold_command(text)
        or may_hold_percent(text)
        or may_hold_auth_call(text)
        or _may_hide_more(text)
    )


def _may_hide_more(text: str) -> bool:
    """The rules of the sixth hunt (escapes, code, mail transcripts, one-time codes): none changes an identifier
    (`answerCoverage`, `book_table`: most strings `may_change` sees are a document's keys and enum values), which
    one C call tells; then substring tests."""
    if text.isidentifier():
        return False
    # (`&quot;password&quot;:` holds a secret name's word: `may_hold_key_value`)
    return "&#" in text or "\\u00" in text or may_hold_code_secret(text)


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
# `user:pw@host:port` with no scheme: userinfo before a host and a port (a gRPC address), or before a dotted host
# and a path (HTTPie's `http ann:pw@api.test/x`), dropped. Possessive and bounded, so that no start is scanned twice
_SCHEMELESS = re.compile(
    rf"{_AFTER}[A-Za-z0-9._~%!$&*+-]++:[^\s'\"<>/@]{{0,256}}+@"
    r"(?=(?:\[[0-9A-Fa-f:.]*\]|[A-Za-z0-9.-]+):[0-9]{1,5}(?![0-9A-Za-z.-])|[A-Za-z0-9-]++(?:\.[A-Za-z0-9-]++)++/)"
)
# an echoed Authorization header (also as a list: Go's `map[Authorization:[…]]`; JSON escaped inside a string,
# `{\"Authorization\": \"…\"}`; Ruby's and PHP's `=>`; `headers["Authorization"] = …`; markdown's
# `**Authorization:** …`): its scheme stays, its credentials go; without a scheme, any run but a word said about
# the header (`_auth`: `Authorization: required` stays). Atomic, so that a value already redacted is not taken for
# the credentials of a scheme
_AUTH = re.compile(
    r"(?i)(?<![a-z0-9-])((?:proxy-)?authorization(?:\\{0,8}[\"']\]?+)?\*{0,2}+[ \t]*(?:=>|[:=])\*{0,2}+[ \t]*"
    r"(?P<fold>\r?\n[ \t]++)?(?:(?P<list>\[)(?!REDACTED\])[ \t]*)?"
    r"(?P<quote>\\{0,8}[\"'])?(?P<scheme>(?>(?:basic|bearer|digest|negotiate|ntlm|token|dpop|mac|hoba|apikey|"
    r"aws4-hmac-sha256)[ \t]+(?=[^\s'\",;\\])))?)"
    r"(?!\[REDACTED\])(?P<value>(?(list)[^\s'\",;\]\\]|[^\s'\",;\\])+)"
    r"(?:(?P<gap>[ \t]++)(?P<second>[^\s'\",;\\\[\]()]++))?"
)
_SYMBOL = re.compile(r"[0-9+/=._~-]")
_BEARER = re.compile(r"(?i)(?<![a-z0-9])(bearer(?:[ \t]++|[ \t]*+[:=][ \t]*+))([a-z0-9._~+/-]{3,}=*)")
# words that follow `Bearer` in what is said about the scheme rather than a token (`Bearer authentication`, `Bearer
# tokens only`, `the bearer of`...; and STATUS_WORDS: `Bearer required`, `bearer must`)
_ABOUT_BEARER_WORDS = """
    token tokens auth authentication authorization authorizations authorized scheme schemes header headers
    credential credentials realm prefix format formats flow flows grant grants jwt jwts access keyword word
    bond bonds instrument instruments
"""
_ABOUT_BEARER = frozenset(_ABOUT_BEARER_WORDS.split())
# an Authorization header's schemes, each named alone after it (`Authorization: Bearer`), and words that name the
# header before `bearer` (`authorization bearer …`: a token follows)
_SCHEMES_WORDS = "basic bearer digest negotiate ntlm token dpop mac hoba apikey aws4-hmac-sha256 oauth oauth2 none"
_SCHEMES = frozenset(_SCHEMES_WORDS.split())
_AUTH_WORDS = frozenset({"authorization", "auth", "header", "scheme", "using", "use", "send", "sent", "with"})


def _auth(m: re.Match[str]) -> str:
    """Credentials after an `Authorization:` name go: after a scheme, quoted, or a run of any other text (a header's
    value needs no scheme: `Authorization: sunshine`), unless the run is a word said about the header (STATUS_WORDS,
    a scheme's name alone: `Authorization: required`, `Authorization: Bearer`) or a placeholder (`$TOKEN`); the run
    after a scheme of the vendor's own (`Authorization: SSWS …`, `Splunk …`) goes too. A sentence stays: a short
    word of lower-case letters and two more, the first no word of STATUS_WORDS (`Authorization: manager approval
    needed`)
    is no header's value (a credential is one run, or a scheme and one run)."""
    tail = (m.group("gap") or "") + (m.group("second") or "")
    whole = m.group()[: len(m.group()) - len(tail)]
    head = _auth_value(m, whole)
    if head is whole or not tail or m.group("scheme"):
        return head + tail
    value = m.group("value")
    second = m.group("second").rstrip(_SENTENCE_END)
    low = second.lower()
    if value.isalpha() and value.islower() and len(value) <= _PROSE_WORD and second.isalpha() and second.islower():
        third = _NEXT_WORD.match(m.string, m.end())
        if low not in STATUS_WORDS and low not in _ABOUT_BEARER and third:
            return m.group()  # a sentence
    if value.islower() or low in STATUS_WORDS or low in _ABOUT_BEARER or not second or _PLACEHOLDER.fullmatch(second):
        return head + tail
    return head + m.group("gap") + REDACTED + m.group("second")[len(second) :]  # a vendor's scheme and its run


_PROSE_WORD = 12  # letters of a word of prose read after `Authorization:` at most
_YAML_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*+:")  # a mapping's key
_NEXT_WORD = re.compile(r"[ \t]++([a-z]{2,}+)(?![A-Za-z0-9_-])")


def _auth_value(m: re.Match[str], whole: str) -> str:
    """`whole` (the match up to its value) with the value replaced, or `whole` itself when it stays."""
    value = m.group("value")
    if m.group("fold") and _YAML_KEY.fullmatch(value):
        return whole  # YAML: `Authorization:` then a mapping under it (`type: bearer`), not `…(a:` of code
    if (not m.group("scheme") and value.lower() in _SCHEMES) or _PLACEHOLDER.fullmatch(value):
        return whole  # a scheme's name alone (before credentials redacted: `"Bearer [REDACTED]"`), `$TOKEN`
    if m.group("scheme") or m.group("quote") or (len(value) >= 8 and _SYMBOL.search(value)) or looks_generated(value):
        return m.group(1) + REDACTED
    head = _UNTIL_BRACKET.match(value)
    word = head.group().rstrip(_SENTENCE_END) if head else ""
    low = word.lower()
    if not word or low in STATUS_WORDS or low in _ABOUT_BEARER or low in _SCHEMES:
        return whole  # (and code: `"Authorization":[]string{…}`, Go's header literal, whose items are read alone)
    return m.group(1) + REDACTED + value[len(word) :]


# what documentation writes for credentials, not a credential: `$TOKEN`, `${API_KEY}`, `<your-token>`, `{token}`,
# `%TOKEN%`
_PLACEHOLDER = re.compile(
    r"\$\{?[A-Za-z_][A-Za-z0-9_]{0,63}\}?|<[^<>\s]{1,64}>|\{[A-Za-z_][A-Za-z0-9_.-]{0,63}\}|%[A-Z_]{1,64}%"
)
_UNTIL_BRACKET = re.compile(r"[^()\[\]{}<>]*+")


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
    if len(word) < 3 or low in STATUS_WORDS or low in _ABOUT_BEARER or _bearer_in_prose(m, word):
        return m.group()
    return m.group(1) + REDACTED + value[len(word) :]


# the word before `bearer` that makes it a noun (`the bearer cheque`, `a bearer bond`)
_DETERMINER_WORDS = "a an the this that these those its his her their our your my each every any no whose"
_DETERMINERS = frozenset(_DETERMINER_WORDS.split())
_WORD_BEFORE = re.compile(r"(?<![A-Za-z0-9_:'\"\[(=-])([A-Za-z]{1,20})[ \t]+\Z")
_SENTENCE_GOES_ON = re.compile(r"[ \t]+[a-z]")


def _bearer_in_prose(m: re.Match[str], word: str) -> bool:
    """`bearer` as a noun of prose, and the word after it a word of the sentence (`the torch bearer carried the
    flame`, `a bearer cheque is payable`), not a token: a word of lower-case letters that the sentence goes on
    after, with a determiner before `bearer`, or `bearer` written in lower case after a word of the sentence
    (not `authorization bearer …`, not after a word of STATUS_WORDS: `was bearer …`)."""
    if not (word.isalpha() and word.islower() and word == m.group(2)) or not m.group(1)[6:].isspace():
        return False  # (`bearer=…`, `bearer: …` is no prose)
    text, start = m.string, m.start()
    if not _SENTENCE_GOES_ON.match(text, m.end()):
        return False
    before = _WORD_BEFORE.search(text, max(0, start - 24), start)
    if before is None:
        return False
    prev = before.group(1).lower()
    if prev in _DETERMINERS:
        return True
    return m.group(1)[0] == "b" and before.group(1).islower() and prev not in STATUS_WORDS and prev not in _AUTH_WORDS


_SENTENCE_END = ".:!?"
_PARAM = re.compile(r"[A-Za-z]++=")


_DIGIT = re.compile(r"[0-9]")


def _text_url(m: re.Match[str], url: Callable[[str], str]) -> str:
    if m.group("esc"):  # `scheme:\/\/…`: read with its slashes, written with them escaped again
        return url(m.group().replace("\\/", "/")).replace("/", "\\/")
    if m.group("enc"):  # `https%3A%2F%2F…`: a URL percent-encoded whole (a query value quoted in a message)
        return nested_url(m.group())
    return url(m.group())


def free_text(text: str, url: Callable[[str], str], percent: bool = True) -> str:
    """`text` with the credentials this module's doc lists taken out (`url` redacts one URL); shapes are left
    to the caller. `percent`: also words percent-encoded (False for a word already decoded)."""
    # `&#112;assword=…`, `"\u0070assword": …`: decoded when they hid one
    if percent and ("&" in text or "\\u00" in text) and may_hold_escapes(text):
        done = escaped(text, lambda decoded: redact_shapes(free_text(decoded, url, False)))
        if done is not text:
            return done
    named = may_hold_key_value(text)
    if may_hold_auth_call(text) and may_hold_pairs(text):  # before `auth=` takes its callee for its value
        text = auth_calls(text)  # `auth=HTTPBasicAuth('ann', '…')`, `ftp.login('ann', '…')`
    # `jwt.encode(p, '…')`, `CURLOPT_USERPWD`, `AUTH PLAIN …`, `otp=123456`, `'Authorization', '…'` (before
    # `token = jwt.encode(…)` takes the call for its value)
    if (
        may_hold_code_secret(text)
        or (named and ("PASS " in text or "CURLOPT_" in text))  # (`pass`, `pwd`: a secret name's words)
        or ((named or _auth_hint(text)) and may_hold_pairs(text))
    ):
        text = code_secrets(text)
    if named:  # first: a value read as a URL would lose only its part before a `/`
        text = key_values(text)
    if (named or _auth_hint(text)) and may_hold_pairs(text):
        text = pairs(text)  # header lists as pairs: `[('X-Api-Key', '…')]`, `{"name": …, "value": …}`
    if named or may_hold_command(text):  # `curl -u ann:…`, `--password …`, `mysql -p…`, `.netrc` entries
        text = command_lines(text)
    hint = named or _auth_hint(text)
    if hint and "<" in text and may_hold_markup(text):  # `<password>…</password>`, `<input type="password" …>`
        text = elements(text)
    if hint and "|" in text and may_hold_table(text):  # `| password | … |`, a column headed `password`
        text = tables(text)
    if "b'" in text or 'b"' in text:
        text = quoted_heads(text, url)
    if " /" in text:
        text = _REQUEST_TARGET.sub(lambda m: m.group(1) + url(m.group(2)), text)
    if might_hold_url(text):
        text = _TEXT_USERINFO.sub(r"\1", _TEXT_URL.sub(lambda m: _text_url(m, url), text))
    if "@" in text:
        text = _SCHEMELESS.sub("", text)
    if _auth_hint(text):
        text = auth_headers(text)
    text = hook_words(text)
    if percent and may_hold_percent(text):
        text = percent_words(text, lambda decoded: redact_shapes(free_text(decoded, url, False)))
    return text


def auth_headers(text: str) -> str:
    """Echoed `Authorization` credentials and `Bearer` tokens replaced (the caller has seen `_auth_hint`)."""
    return _BEARER.sub(_bearer, _AUTH.sub(_auth, text))
