"""What must never reach a file: credentials in URLs, and message text under the hash/drop policies."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache, wraps
from typing import Any, TypeVar
from urllib.parse import quote, quote_plus, unquote_plus

import orjson

from . import urls

REDACTED = "[REDACTED]"
SECRET_NAME = re.compile(
    r"(auth|token|secret|passw|pwd|session|sess_?id|cookie|api[-_]?key|apikey|key$|^key|signature|^sig$|^sid$|"
    r"credential|bearer|jwt|access[-_]?code|^code$)",
    re.IGNORECASE,
)
_B64 = r"[A-Za-z0-9_-]"
# credential shapes wherever they sit in a URL (path segments, query values) or a string of a stored document:
# a JWS/JWE (header is base64url JSON, so it starts "eyJ") and the prefixes of well-known API keys; and (in
# `_shape`) three base64url runs of 12+ characters joined by dots, the first with a capital letter (host names
# are written in lower case)
# A key prefix starts after anything but a letter or digit: `\b` missed one glued to an underscore
# (`ROLE_sk-…`, `token_ghp_…`)
_START = "(?<![A-Za-z0-9])"
_SHAPES = re.compile(
    rf"(?<![A-Za-z0-9_-])eyJ{_B64}*(?:\.{_B64}*){{2,4}}"
    rf"|{_START}(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{{12,}}|{_START}sk-[A-Za-z0-9_-]{{16,}}"
    rf"|{_START}gh[pousr]_[A-Za-z0-9]{{20,}}|{_START}github_pat_[A-Za-z0-9_]{{20,}}|{_START}glpat-[A-Za-z0-9_-]{{16,}}"
    rf"|{_START}xox[abprs]-[A-Za-z0-9-]{{10,}}|{_START}AKIA[0-9A-Z]{{16}}\b|{_START}AIza[0-9A-Za-z_-]{{35}}"
)
_SHAPE_HINTS = ("eyJ", "sk", "pk_", "rk_", "gh", "github_pat_", "glpat-", "xox", "AKIA", "AIza")
_HINT = re.compile("|".join(map(re.escape, _SHAPE_HINTS)))  # any hint as a substring, in one scan
# every shape is a run of these characters at least this long: text without such a run is let through at once
_CANDIDATE = re.compile(r"[A-Za-z0-9_.-]{14,}")
# `;name=value` path parameters (`;jsessionid=...`): the value of a secret-looking name
_PATH_PARAM = re.compile(r";([^;/=?#]*)=([^;/?#]*)")
# userinfo in a URL inside free text (a log line): `scheme://user:pw@host` -> `scheme://host`. A match starts
# where a run of scheme characters starts (the lookbehind), never inside one: from `\b`, a text like `a.a.a.a…`
# was scanned from each of its word starts to the end of the run, O(n²) (16 KB took seconds). The whole run
# before `://` is the scheme; userinfo after any run goes (also after `_` or a digit, where `\b[a-z]` missed it)
_TEXT_USERINFO = re.compile(r"(?i)(?<![a-z0-9+.-])([a-z0-9+.-]*://)[^/\s@'\"<>]*@")
# a URL in free text: `scheme://…`, and the forms WHATWG parsers (browsers, SDKs) also read as URLs of the special
# schemes: `http:/\\u:pw@h`, `http:\\\\h`, `http:u:pw@h` (an `@` within 256 characters: a bounded look, so that
# `http:http:http:…` is not scanned to its end from each of its colons)
_TEXT_URL = re.compile(
    r"(?i)(?<![a-z0-9+.-])(?:[a-z0-9+.-]*://|(?:https?|wss?|ftp):(?:[/\\]+|(?=[^\s'\"<>/\\@]{0,256}@)))[^\s'\"<>]+"
)


_SPECIAL = ("http:", "https:", "ws:", "wss:", "ftp:")


def might_hold_url(text: str) -> bool:
    """Whether `text` may hold a URL that `log_text` would change (`scheme://`, or a special scheme's `http:`).
    Substring scans, at C speed: a case-insensitive regular expression took 9 µs for a small envelope and 0.9 s
    for 16 MiB; a lower-cased copy is made only when a `p:` or `s:` is there at all."""
    if "://" in text:
        return True
    if not ("p:" in text or "s:" in text or "P:" in text or "S:" in text):
        return False
    low = text.lower()
    return any(scheme in low for scheme in _SPECIAL)


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def _shape(m: re.Match[str]) -> str:
    """One run of token characters, with the shapes in it replaced (cheap tests first: runs are mostly words)."""
    token = m.group()
    if token.count(".") == 2:
        segments = token.split(".")
        if all(len(x) >= 12 for x in segments) and any(c.isupper() for c in segments[0]):
            return REDACTED
    return _SHAPES.sub(REDACTED, token) if _HINT.search(token) else token


def redact_shapes(text: str) -> str:
    """Credential shapes (JWTs, long dotted tokens, API-key prefixes) anywhere in `text` replaced."""
    return _CANDIDATE.sub(_shape, text) if _CANDIDATE.search(text) else text


# a path segment after one that names a credential (`/token/T`, `/api-keys/K`, `/password/P`): a key carried in
# the path without a shape of its own. Whole names only: `/authors/x` and `/sessions/x` stay
_NAMED_SEGMENT = re.compile(
    r"(?i)(/(?:(?:api|access|auth|bearer|refresh|id)[-_]?)?(?:keys?|tokens?|secrets?|passwords?|passwd|pwd|"
    r"credentials?|signatures?|sig|jwt|bearer)/)([^/;?#]+)"
)


def _path(path: str) -> str:
    def param(m: re.Match[str]) -> str:
        return f";{m.group(1)}={REDACTED}" if is_secret_name(m.group(1)) else m.group(0)

    if ";" in path:
        path = _PATH_PARAM.sub(param, path)
    if "/" in path:
        path = _NAMED_SEGMENT.sub(rf"\1{REDACTED}", path)
    return redact_shapes(path)


SHORT_TEXT = 512  # strings up to this long may be kept in a cache (keys, titles, URLs); longer ones never are
_F = TypeVar("_F", bound=Callable[..., Any])


def cached_for_short(maxsize: int) -> Callable[[_F], _F]:
    """An LRU cache of a pure function whose first argument is a string from the wire, for strings of up to
    SHORT_TEXT characters: the same few agents, URLs and keys come back exchange after exchange, while a flood of
    distinct long strings is computed each time and cannot grow the process's memory through the cache.
    The cache is the wrapper's `cache` (its `cache_info()` for tests)."""

    def decorate(fn: _F) -> _F:
        cache = lru_cache(maxsize=maxsize)(fn)

        @wraps(fn)
        def call(text: str, *args: Any) -> Any:
            return cache(text, *args) if len(text) <= SHORT_TEXT else fn(text, *args)

        call.cache = cache  # type: ignore[attr-defined]
        return call  # type: ignore[return-value]

    return decorate


_PLAIN = re.compile(r"[@;?#\\\[\]\x00-\x20\x7f-\x9f\ud800-\udfff]")  # a URL without these has nothing to take out


def _query(query: str) -> str:
    """Each `name=value` of a query in place: a secret name's value replaced, shapes replaced (in the text as
    written and as decoded), everything else byte for byte as it came."""
    out = []
    for piece in query.split("&"):
        name, eq, value = piece.partition("=")
        name = _query_part(name)
        if is_secret_name(unquote_plus(name)):
            out.append(f"{name}={REDACTED}")
        else:
            value = _query_part(value)
            if ";" in value:  # `a=1;token=…`: servers that split queries at `;` too read a secret name here
                value = _SEMI_PARAM.sub(_secret_param, value)
            out.append(f"{name}{eq}{value}")
    return "&".join(out)


_SEMI_PARAM = re.compile(r";([^;=]*)=([^;]*)")


def _secret_param(m: re.Match[str]) -> str:
    return f";{m.group(1)}={REDACTED}" if is_secret_name(unquote_plus(m.group(1))) else m.group(0)


def _query_part(raw: str) -> str:
    decoded = unquote_plus(raw)
    clean = redact_shapes(decoded)
    if clean != decoded or redact_shapes(raw) != raw:
        return quote_plus(redact_shapes(clean), safe="[]:/")
    return raw


@cached_for_short(4096)
def _builtin(url: str) -> str:
    if (
        url.isascii()
        and not _PLAIN.search(url)
        and not _CANDIDATE.search(url)
        and not _ODD_PORT.match(url)
        and not _NAMED_SEGMENT.search(url)
    ):
        return url  # no userinfo, parameters, query, fragment, odd text, odd port, shape or named key: nothing to do
    u = urls.parse(url)  # never raises; the text made carriable (no controls, no lone surrogates)
    query = "" if u.query is None else "?" + _query(u.query)
    scheme = f"{u.scheme}:" if u.scheme else ""
    if u.opaque:
        return f"{scheme}{_path(u.path)}{query}"
    host = u.host
    if {"ipv6", "host", "idna"} & set(u.problems):  # written so that any URL parser reads it back as a host
        host = quote(host, safe="!$&'()*+,;=-._~%")
    # a port that is no number may be a password whose `@` came after a `/`, `?` or `#`: it is dropped
    port = "" if u.port is None or not _DIGITS.fullmatch(u.port or "0") else f":{u.port}"
    return f"{scheme}//{host}{port}{_path(u.path)}{query}"


_DIGITS = re.compile(r"[0-9]*")
_ODD_PORT = re.compile(r"[^/:]*:/*[^/:]*:[0-9]*[^0-9/]")  # an authority whose port is not a number


@dataclass(frozen=True, slots=True)
class Redaction:
    """Built-in credential shapes plus the operator's own patterns (regular expressions).

    An operator pattern with groups replaces what its groups matched; one without replaces its whole match.
    Picklable, so it can travel to an extraction worker process.
    """

    patterns: tuple[re.Pattern[str], ...] = ()

    @classmethod
    def from_patterns(cls, patterns: Iterable[str] | str | None) -> Redaction:
        """Compile operator patterns; ValueError naming the bad pattern when one does not compile."""
        if patterns is None:
            return cls()
        if isinstance(patterns, str):
            patterns = [patterns]
        compiled = []
        for p in patterns:
            if not p:
                raise ValueError("a redaction pattern is empty; give a regular expression, e.g. 'tenant=([^&]+)'")
            try:
                compiled.append(re.compile(p))
            except re.error as e:
                raise ValueError(f"redaction pattern {p!r} is not a valid regular expression: {e}") from e
            if compiled[-1].search(""):
                raise ValueError(f"redaction pattern {p!r} matches the empty string; it would mark every position")
        return cls(tuple(compiled))

    def text(self, s: str) -> str:
        """Apply the operator's patterns only."""
        for pattern in self.patterns:
            s = pattern.sub(_replacer(pattern), s)
        return s

    def url(self, url: str) -> str:
        """Drop userinfo and fragment, redact credential shapes and secret query values, then operator patterns;
        a URL an operator pattern changed is written again so that every parser reads it (`[REDACTED]` inside a
        host reads as a broken IPv6 literal: it becomes `%5BREDACTED%5D`)."""
        clean = _builtin(url)
        if not self.patterns:
            return clean
        out = self.text(clean)
        return out if out == clean else _builtin(out)

    def maybe_url(self, url: str | None) -> str | None:
        return None if url is None else self.url(url)

    def log_text(self, text: str) -> str:
        """Free text such as a log line: every URL in it redacted, userinfo anywhere dropped, shapes replaced."""
        if not self.patterns:  # built-in rules only: a pure function of the text
            return _builtin_text(text)
        if might_hold_url(text):
            text = _TEXT_USERINFO.sub(r"\1", _TEXT_URL.sub(lambda m: self.url(m.group(0)), text))
        return self.text(redact_shapes(text))

    def changes(self, value: Any) -> bool:
        """Whether `json_urls` would change any string of a JSON value (keys too). A loop, not a recursion:
        it runs over every envelope, so it is kept tight (strings seen clean before are skipped first)."""
        strings: list[str] = []
        stack = [value]
        pop, extend, keep = stack.pop, stack.extend, strings.append
        clean = _UNCHANGED if not self.patterns else set()
        while stack:
            v = pop()
            t = type(v)
            if t is str:
                if v not in clean:
                    keep(v)
            elif t is dict:
                for k in v:
                    if k not in clean and isinstance(k, str):
                        keep(k)
                extend(v.values())
            elif t is list:
                extend(v)
            elif isinstance(v, str):
                keep(str(v))
            elif isinstance(v, dict):
                strings.extend(k for k in v if isinstance(k, str))
                extend(v.values())
            elif isinstance(v, list):
                extend(v)
        if self.patterns:
            return any(self.log_text(s) != s for s in strings)
        search = _CANDIDATE.search
        for s in strings:
            if (might_hold_url(s) or search(s)) and self.log_text(s) != s:  # only a URL or a shape's run can change
                return True
            if len(s) <= SHORT_TEXT:
                if len(clean) >= _UNCHANGED_MAX:
                    clean.clear()
                clean.add(s)
        return False

    def json_urls(self, value: Any) -> Any:
        """A copy of a JSON value with every string (keys too) redacted as free text (for a stored agent card).
        A loop, not a recursion: a document is nested as deep as json.loads reads (over 1,000 levels)."""
        pending: list[tuple[Any, Any]] = []

        def copy(v: Any) -> Any:
            if isinstance(v, str):
                return self.log_text(v)
            if isinstance(v, dict | list):
                out: Any = {} if isinstance(v, dict) else []
                pending.append((v, out))
                return out
            return v

        root = copy(value)
        while pending:
            source, target = pending.pop()
            if isinstance(source, dict):
                for k, v in source.items():  # a key redacted into one already there replaces its value, in order
                    target[self.log_text(k) if isinstance(k, str) else k] = copy(v)
            else:
                target.extend(copy(v) for v in source)
        return root


def _replacer(pattern: re.Pattern[str]) -> Any:
    if not pattern.groups:
        return REDACTED

    def sub(m: re.Match[str]) -> str:
        whole, start = m.group(0), m.start()
        out, pos = [], 0
        for g in range(1, pattern.groups + 1):
            s, e = m.span(g)
            if s < 0 or s - start < pos:  # group did not take part, or nests inside one already replaced
                continue
            out += [whole[pos : s - start], REDACTED]
            pos = e - start
        out.append(whole[pos:])
        return "".join(out)

    return sub


NO_OPERATOR_PATTERNS = Redaction()


def redact_url(url: str, redaction: Redaction = NO_OPERATOR_PATTERNS) -> str:
    """Drop userinfo and fragment; replace credential shapes (JWTs, `;jsessionid=`, secret query values)."""
    return redaction.url(url)


# short strings the built-in rules leave as they are (keys, enum values, titles): a set lookup, not a redaction
_UNCHANGED: set[str] = set()
_UNCHANGED_MAX = 8192


@cached_for_short(8192)
def _builtin_text(text: str) -> str:
    """`Redaction.log_text` without operator patterns."""
    if might_hold_url(text):
        text = _TEXT_USERINFO.sub(r"\1", _TEXT_URL.sub(lambda m: _builtin(m.group(0)), text))
    return redact_shapes(text)


# json.dumps(sort_keys=True, ensure_ascii=False, default=str, separators=(",", ":")), one encoder for every call
_STORED_JSON = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str, separators=(",", ":"))


def stored_json(value: Any) -> str:
    """A JSON document as stored (`envelope_json`, `card_json`): compact, keys sorted, non-ASCII text as is.

    orjson writes it (~1 µs for an envelope with five citations, against 16 for json's encoder). What orjson
    refuses (integers past 64 bits, lone surrogates, keys that are not strings, values that are not JSON) and
    every document in which it wrote a `null` (orjson also writes NaN and the infinities as null) is written by
    json's encoder in the same form instead, so no value changes: NaN stays NaN, as `json.loads` read it."""
    try:
        out = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        return _STORED_JSON.encode(value)
    return _STORED_JSON.encode(value) if b"null" in out else out.decode()


def redact_card_json(card: Any, redaction: Redaction = NO_OPERATOR_PATTERNS, text: str | None = None) -> str:
    """A JSON document (a card, an envelope) as stored: every string in it (keys too) redacted as free text —
    URLs, and credential shapes wherever they sit. `text`: the document's `stored_json`, when the caller has it
    already; it is returned itself when nothing changes."""
    if text is None:
        text = stored_json(card)
    if not redaction.patterns and not _CANDIDATE.search(text) and not might_hold_url(text):
        return text  # the common case (no URL, no run a credential shape could be), without walking it
    if not redaction.changes(card):
        return text  # nothing to redact: the copy would serialise to the same text
    return stored_json(redaction.json_urls(card))


class LogRedactor(logging.Filter):
    """A logging filter for handlers: URLs in every record lose userinfo and credential shapes.

    mitmproxy logs request lines it cannot parse (`GET http://user:pw@host/ ...`) and URLs of failed
    connections; put this on the handlers that write the log (e.g. the root logger's) before traffic flows.
    """

    def __init__(self, redaction: Redaction = NO_OPERATOR_PATTERNS) -> None:
        super().__init__()
        self.redaction = redaction

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a record whose args do not fit its format: leave it to the handler to report
            return True
        clean = self.redaction.log_text(message)
        if clean != message or record.args:
            record.msg, record.args = clean, ()
        if record.exc_info and not record.exc_text:  # tracebacks quote URLs too
            record.exc_text = self.redaction.log_text(logging.Formatter().formatException(record.exc_info))
        return True


def install_log_redactor(logger: logging.Logger | None = None, redaction: Redaction = NO_OPERATOR_PATTERNS) -> None:
    """Put a LogRedactor on every handler of `logger` (the root logger by default) that lacks one."""
    target = logger or logging.getLogger()
    for handler in target.handlers:
        for f in list(handler.filters):
            if isinstance(f, LogRedactor):
                handler.removeFilter(f)
        handler.addFilter(LogRedactor(redaction))


TEXT_POLICIES = ("keep", "hash", "drop")


@dataclass(frozen=True, slots=True)
class TextPolicy:
    """keep: store text as is. hash: salted SHA-256 (equal texts stay comparable within a dataset). drop: store none."""

    mode: str = "keep"
    salt: bytes = b""

    def __post_init__(self) -> None:
        if self.mode not in TEXT_POLICIES:
            raise ValueError(f"text policy must be one of {', '.join(TEXT_POLICIES)}, not {self.mode!r}")

    def apply(self, text: str | None) -> str | None:
        if text is None or self.mode == "keep":
            return text
        if self.mode == "drop":
            return None
        return "sha256:" + hashlib.sha256(self.salt + text.encode("utf-8", "surrogatepass")).hexdigest()
