"""Text from the wire made safe for a terminal: control characters and bidi overrides become visible escapes.

Imports nothing from the project, so every layer (addon live lines, reports, CLI) can use it.
"""

from __future__ import annotations

import re

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}

# C0 controls (ESC, BEL, CR, LF, TAB, ...), DEL, C1 controls (CSI U+009B, ...), bidi embeddings, overrides, isolates
# and marks, line/paragraph separators, and lone surrogates (undecodable bytes kept by surrogateescape).
_OTHER = r"\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_UNSAFE_LINE = re.compile(r"[\x00-\x1f" + _OTHER + "]")
_UNSAFE_TEXT = re.compile(r"[\x00-\x08\x0b-\x1f" + _OTHER + "]")  # keeps LF and TAB


def _escape(m: re.Match[str]) -> str:
    ch = m.group()
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def safe_line(text: object) -> str:
    """One line for a terminal: every control character, line break and bidi control shown as an escape."""
    s = text if isinstance(text, str) else str(text)
    return _UNSAFE_LINE.sub(_escape, s)


def safe_text(text: object) -> str:
    """Multi-line text for a terminal: as `safe_line`, but LF and TAB are kept (CR is not)."""
    s = text if isinstance(text, str) else str(text)
    return _UNSAFE_TEXT.sub(_escape, s)


def is_terminal_safe(text: str, multiline: bool = False) -> bool:
    return (_UNSAFE_TEXT if multiline else _UNSAFE_LINE).search(text) is None


_UNSAFE_IN_JSON = re.compile("[" + _OTHER + "]")  # JSON escapes C0 controls itself


def json_safe(text: str) -> str:
    """JSON text (as json.dumps writes it with ensure_ascii=False) with the characters a terminal acts on that JSON
    leaves raw (DEL, C1 controls, bidi controls, line separators, lone surrogates) written as \\uXXXX escapes: the
    same JSON value, safe to print. Outside strings JSON has only ASCII, so only strings change."""
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
