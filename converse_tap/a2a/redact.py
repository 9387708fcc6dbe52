"""What must never reach a file: credentials in URLs, and message text under the hash/drop policies."""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

REDACTED = "[REDACTED]"
SECRET_NAME = re.compile(
    r"(auth|token|secret|passw|pwd|session|sess_?id|cookie|api[-_]?key|apikey|key$|^key|signature|^sig$|credential|"
    r"bearer|jwt|access[-_]?code|^code$)",
    re.IGNORECASE,
)


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def redact_url(url: str) -> str:
    """Drop userinfo and replace values of secret-looking query parameters with a marker."""
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2] if "@" in parts.netloc else parts.netloc
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        query = urlencode([(k, REDACTED if is_secret_name(k) else v) for k, v in pairs], safe="[]:/")
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


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
