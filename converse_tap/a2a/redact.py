"""What must never reach a file: credentials in URLs, and message text under the hash/drop policies."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import orjson

from .redact_secrets import (
    JWK_PRIVATE,
    PLAIN_KEYS,
    hidden,
    hidden_text,
    hides_a_secret,
    is_secret_json_key,
    jwk_private,
    lone_secret_pair,
    named_secret_value,
    pair_list,
    secret_pair,
    secret_text_in,
)
from .redact_text import free_text, may_change
from .redact_url import REDACTED, SHORT_TEXT, _builtin, cached_for_short, redact_shapes


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
        """Free text such as a log line: every URL in it redacted, userinfo anywhere dropped, the values of
        secret-named `name=value` / `name: value` pairs (`Password=…;`, `Cookie: …`, `"token": "…"`) and shapes
        replaced."""
        if not self.patterns:  # built-in rules only: a pure function of the text
            return _builtin_text(text)
        return self.text(redact_shapes(free_text(text, self.url)))

    def changes(self, value: Any) -> bool:
        """Whether `json_urls` would change any string of a JSON value (keys too). A loop, not a recursion:
        it runs over every envelope, so it is kept tight (strings seen clean before are skipped first)."""
        strings: list[str] = []
        stack = [value]
        pop, extend, keep = stack.pop, stack.extend, strings.append
        clean = _UNCHANGED if not self.patterns else set()
        plain_keys = PLAIN_KEYS
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
                if not v.keys() <= plain_keys and hides_a_secret(v):  # (keys known plain: one C comparison; JWKs)
                    return True
                if ("value" in v or "Value" in v) and named_secret_value(v):  # `{"name": "Authorization", …}`
                    return True
                extend(v.values())
            elif t is list:
                if v and type(v[0]) is list and pair_list(v) and any(secret_pair(x) for x in v):
                    return True  # `[["Authorization", "Bearer …"], …]`
                if len(v) == 2 and type(v[0]) is str and lone_secret_pair(v[0], v[1], False):
                    return True  # `["X-Api-Key", "…"]`
                extend(v)
            elif isinstance(v, str):
                keep(str(v))
            elif isinstance(v, dict):
                strings.extend(k for k in v if isinstance(k, str))
                if hides_a_secret(v) or named_secret_value(v):
                    return True
                extend(v.values())
            elif isinstance(v, list):
                if v and pair_list(v) and any(secret_pair(x) for x in v):
                    return True
                if len(v) == 2 and isinstance(v[0], str) and lone_secret_pair(v[0], v[1], False):
                    return True
                extend(v)
        if self.patterns:
            return any(self.log_text(s) != s for s in strings)
        for s in strings:
            if may_change(s) and self.log_text(s) != s:  # only a URL, a shape's run or a quoted head can change
                return True
            if len(s) <= SHORT_TEXT:
                if len(clean) >= _UNCHANGED_MAX:
                    clean.clear()
                clean.add(s)
        return False

    def json_urls(self, value: Any) -> Any:
        """A copy of a JSON value with every string (keys too) redacted as free text (for a stored agent card), and
        the text under a secret-named key (`token`, `credentials`, `client_secret`: a push-notification config; the
        `value` of a `{"name": <secret name>, "value": …}` pair; the value of a `[<secret name>, …]` pair in a list
        of pairs, or of a header's pair alone: `redact_secrets.lone_secret_pair`) replaced whole.
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
                pair = named_secret_value(source)  # `{"name": "Authorization", "value": "…"}`: the value goes
                jwk = "kty" in source and jwk_private(source)  # a JSON Web Key: its private members go
                for k, v in source.items():  # a key redacted into one already there replaces its value, in order
                    if (
                        isinstance(k, str)
                        and (k == pair or is_secret_json_key(k) or (jwk and k in JWK_PRIVATE))
                        and secret_text_in(v)
                    ):
                        v = hidden(v)  # `"token": "…"`, `"credentials": […]`: the text goes, whatever its shape
                    target[self.log_text(k) if isinstance(k, str) else k] = copy(v)
            elif source and pair_list(source):  # `[["Authorization", "Bearer …"], …]`: a secret name's value goes
                target.extend(copy([x[0], hidden(x[1])] if secret_pair(x) else x) for x in source)
            elif len(source) == 2 and isinstance(source[0], str) and lone_secret_pair(source[0], source[1], False):
                target.extend((copy(source[0]), hidden_text(source[1])))  # `["X-Api-Key", "…"]`: a header's pair
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
    return redact_shapes(free_text(text, _builtin))


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
    if not redaction.patterns and not may_change(text):
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
