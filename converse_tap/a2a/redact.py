"""What must never reach a file: credentials in URLs, and message text under the hash/drop policies."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

REDACTED = "[REDACTED]"
SECRET_NAME = re.compile(
    r"(auth|token|secret|passw|pwd|session|sess_?id|cookie|api[-_]?key|apikey|key$|^key|signature|^sig$|^sid$|"
    r"credential|bearer|jwt|access[-_]?code|^code$)",
    re.IGNORECASE,
)
_B64 = r"[A-Za-z0-9_-]"
# credential shapes wherever they sit in a URL (path segments, query values):
# a JWS/JWE (header is base64url JSON, so it starts "eyJ"), any three long base64url segments joined by dots
# (the first with a capital letter: host names are written in lower case), and the prefixes of well-known API keys
_SHAPES = re.compile(
    rf"eyJ{_B64}*(?:\.{_B64}*){{2,4}}"
    rf"|(?<![A-Za-z0-9_.-])(?={_B64}*[A-Z]){_B64}{{12,}}\.{_B64}{{12,}}\.{_B64}{{12,}}(?![A-Za-z0-9_.-])"
    r"|\b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{12,}|\bsk-[A-Za-z0-9_-]{16,}"
    r"|\bgh[pousr]_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}|\bglpat-[A-Za-z0-9_-]{16,}"
    r"|\bxox[abprs]-[A-Za-z0-9-]{10,}|\bAKIA[0-9A-Z]{16}\b|\bAIza[0-9A-Za-z_-]{35}"
)
# `;name=value` path parameters (`;jsessionid=...`): the value of a secret-looking name
_PATH_PARAM = re.compile(r";([^;/=?#]*)=([^;/?#]*)")
# userinfo in a URL inside free text (a log line): `scheme://user:pw@host` -> `scheme://host`
_TEXT_USERINFO = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://)[^/\s@'\"<>]*@")
_TEXT_URL = re.compile(r"(?i)\b[a-z][a-z0-9+.-]*://[^\s'\"<>]+")


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def _path(path: str) -> str:
    def param(m: re.Match[str]) -> str:
        return f";{m.group(1)}={REDACTED}" if is_secret_name(m.group(1)) else m.group(0)

    return _SHAPES.sub(REDACTED, _PATH_PARAM.sub(param, path))


def _builtin(url: str) -> str:
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (raises on a malformed port, like an unparseable netloc)
    except ValueError:  # not a URL urlsplit can take apart: strip what looks like userinfo and shapes
        return _SHAPES.sub(REDACTED, _TEXT_USERINFO.sub(r"\1", url))
    netloc = parts.netloc.rpartition("@")[2]
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode(
            [(_SHAPES.sub(REDACTED, k), REDACTED if is_secret_name(k) else _SHAPES.sub(REDACTED, v)) for k, v in pairs],
            safe="[]:/",
        )
    return urlunsplit((parts.scheme, netloc, _path(parts.path), query, ""))


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
        """Drop userinfo and fragment, redact credential shapes and secret query values, then operator patterns."""
        return self.text(_builtin(url))

    def maybe_url(self, url: str | None) -> str | None:
        return None if url is None else self.url(url)

    def log_text(self, text: str) -> str:
        """Free text such as a log line: every URL in it redacted, userinfo anywhere dropped, shapes replaced."""
        text = _TEXT_URL.sub(lambda m: self.url(m.group(0)), text)
        return self.text(_SHAPES.sub(REDACTED, _TEXT_USERINFO.sub(r"\1", text)))

    def json_urls(self, value: Any) -> Any:
        """A copy of a JSON value with every string (keys too) redacted as free text (for a stored agent card)."""
        if isinstance(value, str):
            return self.log_text(value)
        if isinstance(value, dict):
            return {self.log_text(k) if isinstance(k, str) else k: self.json_urls(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.json_urls(v) for v in value]
        return value


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


def redact_card_json(card: Any, redaction: Redaction = NO_OPERATOR_PATTERNS) -> str:
    """A JSON document (a card, an envelope) as stored: every string in it redacted as free text."""
    text = json.dumps(card, sort_keys=True, ensure_ascii=False, default=str)
    if not redaction.patterns and "://" not in text and not _SHAPES.search(text):
        return text  # the common case, without walking the document
    return json.dumps(redaction.json_urls(card), sort_keys=True, ensure_ascii=False, default=str)


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
