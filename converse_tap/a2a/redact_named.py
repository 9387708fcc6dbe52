"""The value of a secret-named `name=value`, `name: value` or `name is value` wherever it stands in free text.

`key_values(text)` replaces it in: connection strings (`Password=…;`, `Pwd={…}`, `AccountKey=…`,
`SharedAccessSignature=…`), the rest of an AWS SigV4 `Authorization` header (`Credential=…, SignedHeaders=…,
Signature=…`), echoed secret headers (`X-Api-Key: …`, `X-A2A-Notification-Token: …`), cookies (`Cookie: a=b; c=d`,
`Set-Cookie: …`), JSON or Python-dict text (`"token": "…"`, `'credentials': '…'`, `'password': b'…'`), subscripts
(`os.environ["API_KEY"] = "…"`), markdown (`**Password:** …`), JSON text escaped once or more
inside a JSON string (`{\\"client_secret\\":\\"…\\"}`, `\\\\\\"token\\\\\\": …`), and prose (`Password: hunter`,
`the API key is abcdef`, `login with password 'hunter'`, `token f3kq9zvbx7`), where `redact_prose` says what is
a value and what a word about it.

Names are looked for only where a word every secret name holds is (`find`), each value is read from where its name
ends and never read again: linear.
"""

from __future__ import annotations

import re

from .redact_prose import looks_generated, prose_value, strong_name
from .redact_secrets import REDACTED, is_secret_text_name

# words every secret name holds (`may_hold_key_value` spells them out), and those of a name that may stand before a
# value without a `=` or `:` (`password is …`, `token f3kq…`)
_HINT_WORDS = ("pass", "pw", "secret", "token", "key", "sig", "credential", "sess", "cookie", "auth", "sid")
_WORD_HINTS = ("pass", "pwd", "secret", "token", "key", "credential")


def may_hold_key_value(text: str) -> bool:
    """Whether `key_values` may change `text`: a word every secret name holds, and a `=` or `:` or a name that
    takes a value without one. Substring scans (a case-insensitive regular expression took 650 µs on 2 KB without
    a hit; this takes 16)."""
    low = text.lower()  # (a chain of `in`, not `any()` over the words: a sixth of the time for a short text)
    if "=" not in text and ":" not in text:
        return "pass" in low or "pwd" in low or "secret" in low or "token" in low or "key" in low or "credential" in low
    return (
        "pass" in low
        or "pw" in low
        or "secret" in low
        or "token" in low
        or "key" in low
        or "sig" in low
        or "credential" in low
        or "sess" in low
        or "cookie" in low
        or "auth" in low
        or "sid" in low
    )


# `name`, then `=` or `:` (or `=>`: PHP's and Ruby's arrays and hashes, `'password' => '…'`; markdown's bold around
# it: `**Password:** …`), or a space and an optional `is`/`was` (`password is …`, `password 'hunter'`). The name may
# be quoted (`"token":`, `'token':`, `\"token\":`, `\\\"token\\\":`, JSON text escaped once or more), and a
# subscript (`os.environ["API_KEY"] = …`). A name starts where a run of name characters starts (never inside one)
# and is at most 64 characters long: each start is tried once
_NAME_SEP = re.compile(
    r"(?<![A-Za-z0-9_.-])(?P<q>\\*+[\"'])?(?P<name>[A-Za-z_-][A-Za-z0-9_.-]{0,63}+)(?(q)\\*+[\"']\]?+)"
    r"(?:\*{0,2}+[ \t]*+(?P<sep>[=:])(?![=:/])(?:(?<==)>)?\*{0,2}+[ \t]*+|[ \t]++(?:(?P<verb>is|was)[ \t]++)?)"
)
# values, each read from where its name ends; a closing quote or brace is optional, so that a match never fails
# after reading (and so nothing is read twice)
_DQ = re.compile(r"\"((?:[^\"\\\r\n]++|\\[^\r\n])*+)")
_SQ = re.compile(r"'((?:[^'\\\r\n]++|\\[^\r\n])*+)")
_ESC_DQ = re.compile(r"\\++\"([^\"\\\r\n]*+)")  # JSON text inside a JSON string: `\"token\":\"…\"`, deeper too
_ESC_SQ = re.compile(r"\\++'([^'\\\r\n]*+)")
_BRACE = re.compile(r"\{((?:[^}\r\n]++|\}\})*+)")  # ODBC: `Pwd={p;w}`, `}}` escapes a brace
_BARE = re.compile(r"([^\s;,&?#'\"<>\\(){}\[\]]++)")  # a value ends where a URL's query or fragment starts
# `word: value` in prose, whose value may be let through: it ends at the next `:` or `=` too, so that what is read
# and let through is never read again from a later name (`token:token:token:…` read to its end from each name
# took minutes for 400 KB)
_PROSE = re.compile(r"([^\s;,&?#'\"<>\\(){}\[\]:=]++)")
_COOKIE = re.compile(r"([^\s;,'\"]++(?:;[ \t]*+[^\s;,'\"]++)*+)")  # `a=b; c=d; Path=/; HttpOnly`
_USERINFO_REST = re.compile(r"[^\s/@'\"<>]{0,256}+@")  # the rest of a URL's userinfo, up to its `@`
_COOKIE_NAMES = frozenset({"cookie", "set-cookie", "cookie2", "set-cookie2"})
# the opening of a list whose first item is read as the value: a quoted item, or a bare one that closes the list
# (Go prints `map[X-Api-Key:[…]]`)
_LIST_ITEM = re.compile(r"\[[ \t]*+(?=\\*+[\"']|[^\s;,&?#'\"<>\\(){}\[\]]++\])")
_BYTES_OPEN = ("b'", 'b"')
_NOT_VALUES = frozenset({"null", "none", "true", "false", "undefined", "nil"})
_CAMEL = re.compile(r"[a-z][A-Z]")


def _prose_name(name: str, quoted: bool) -> bool:
    """A name written as a word of prose (`Password`, `token`), not as an identifier (`api_key`, `X-Api-Key`,
    `apiKey`, `spring.datasource.password`), whose value always goes."""
    return not quoted and not any(c in name for c in "-_.") and not _CAMEL.search(name)


def _run(text: str, pos: int, rule: re.Pattern[str], generated: bool) -> tuple[int, int] | None:
    m = rule.match(text, pos)
    if m is None or m.group(1).lower() in _NOT_VALUES:
        return None
    if generated and not looks_generated(m.group(1)):
        return None  # prose: `token: expired`, `session: 3 of 5 used`
    return m.span(1)


def _value(text: str, pos: int, m: re.Match[str], low: str, strong: bool) -> tuple[int, int] | None:
    """The span of the secret value that starts at `pos` (the quotes not in it), or None when there is none."""
    sep = m.group("sep")
    if sep is not None and text.startswith("[", pos) and not text.startswith(REDACTED, pos):
        item = _LIST_ITEM.match(text, pos)  # a list of values: `X-Api-Key:[…]` (Go's headers), `"token": ["…"]`
        if item is None:
            return None  # (`signatures=[f(x) for x in …]` is code, not a value)
        pos = item.end()
    head = text[pos : pos + 2]
    if head in _BYTES_OPEN:  # a bytes literal as Python prints one: `'password': b'…'`
        pos += 1
        head = text[pos : pos + 2]
    quote = head[:1] in "\"'\\"
    if sep is None:  # `password is …`, `password 'hunter'`, `token f3kq9zvbx7`: strong names, and `token`
        if not strong and "token" not in low:
            return None
        if quote and not strong:
            return None
        if not quote:
            return prose_value(text, pos) if m.group("verb") and strong else _run(text, pos, _PROSE, True)
    value: re.Match[str] | None
    if head[:1] == '"':
        value = _DQ.match(text, pos)
    elif head[:1] == "'":
        value = _SQ.match(text, pos)
    elif head[:1] == "\\":
        value = _ESC_DQ.match(text, pos) or _ESC_SQ.match(text, pos)
    elif head[:1] == "{" and sep == "=":
        value = _BRACE.match(text, pos)
    elif low in _COOKIE_NAMES:
        value = _COOKIE.match(text, pos)
    elif sep == ":" and text[pos - 1] != ":" and _prose_name(m.group("name"), m.group("q") is not None):
        # (`Token:…` with no space after its colon is a field as Go's `%+v` prints a struct, not prose)
        return prose_value(text, pos) if strong else _run(text, pos, _PROSE, True)
    else:
        return _run(text, pos, _BARE, False)
    if value is None or not value.group(1):
        return None
    return value.span(1)


_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")


def _name_starts(text: str, words: tuple[str, ...]) -> list[int]:
    """Where a name holding one of the words every secret name holds may start: the start of its run of name
    characters, and the quote (with the backslashes escaping it) before it; in order. Only there is `_NAME_SEP`
    tried: trying it at every position of the text cost 9 µs for a 100-character error message; this costs a
    `find` per word. Each run start is found walking back no further than the word found before it, so
    `pwpwpw…` is walked once, not 64 times."""
    low = text.lower()
    found: list[int] = []
    for word in words:
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
            k = start - 1
            while k > 0 and text[k - 1] == "\\" and start - k < 16:
                k -= 1
            if k < start - 1 and (not starts or k > starts[-1]):
                starts.append(k)
            starts.append(start - 1)
        starts.append(start)
    return starts


_WEAK, _STRONG = 1, 2
_KINDS: dict[str, int] = {}  # names as written: 0 (no secret), _WEAK (`token`) or _STRONG (`password`)
_KINDS_MAX = 8192


def _kind(name: str) -> int:
    """What `name` (at most 64 characters) names; cached: the same few names come back in every text."""
    got = _KINDS.get(name)
    if got is None:
        got = (_STRONG if strong_name(name.lower()) else _WEAK) if is_secret_text_name(name) else 0
        if len(_KINDS) >= _KINDS_MAX:
            _KINDS.clear()
        _KINDS[name] = got
    return got


# the word before a name that is no secret alone: `API key`, `private key`, `access token`
_PREV_WORD = re.compile(r"(?<![A-Za-z0-9_.-])[A-Za-z]{2,16}[ \t]\Z")


def _two_words(text: str, start: int, low: str) -> str | None:
    """`api_key` for `API key: …` (the name found, `key`, is no secret alone), or None."""
    if start < 3 or text[start - 1] not in " \t":
        return None
    prev = _PREV_WORD.search(text, max(0, start - 18), start)
    if prev is None:
        return None
    joined = f"{prev.group()[:-1].lower()}_{low}"
    return joined if is_secret_text_name(joined) else None


def key_values(text: str) -> str:
    """`text` with the value of every secret-named `name=value` / `name: value` replaced (see the module's doc)."""
    out: list[str] = []
    pos = 0  # where the text not yet written starts (no name is read before it)
    for start in _name_starts(text, _HINT_WORDS if "=" in text or ":" in text else _WORD_HINTS):
        if start < pos:
            continue  # inside a value already replaced
        m = _NAME_SEP.match(text, start)
        if m is None:
            continue
        if (
            m.group("sep")
            and (text.endswith("//", 0, start) or text.endswith("\\/\\/", 0, start))
            and _USERINFO_REST.match(text, m.end())
        ):
            continue  # `https://apikey:…@host`: userinfo, which the URL rules drop whole (the host stays)
        name = m.group("name")
        low = name.lower()
        kind = _kind(name)
        if not kind and (low not in _COOKIE_NAMES or m.group("sep") != ":"):
            joined = None if m.group("q") else _two_words(text, start, low)
            if joined is None:
                continue
            low, kind = joined, _STRONG if strong_name(joined) else _WEAK
        elif kind == _WEAK and not m.group("q"):  # `access token is …`: `token` alone is a weak name
            joined = _two_words(text, start, low)
            if joined is not None and strong_name(joined):
                low, kind = joined, _STRONG
        span = _value(text, m.end(), m, low, kind == _STRONG)
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
