"""Text from the wire made safe for a terminal: control characters, bidi overrides and invisible (format)
characters become visible escapes, and a backslash is written doubled, so an escape can be told apart from the
same text spelled out.

Imports nothing from the project, so every layer (addon live lines, reports, CLI) can use it.
"""

from __future__ import annotations

import re

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\"}

# C0 controls (ESC, BEL, CR, LF, TAB, ...), DEL, C1 controls (CSI U+009B, ...), line/paragraph separators, lone
# surrogates (undecodable bytes kept by surrogateescape), and the format characters (Unicode category Cf: bidi
# embeddings, overrides, isolates and marks, zero-width space/joiners, word joiner, invisible operators, BOM, soft
# hyphen, tag characters, ...), which a terminal shows as nothing, so that two different values would look the same.
# (tests/test_terminal_safety.py checks that every Cf character of the running Python's Unicode is here.)
_FORMAT = (
    r"\xad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f\u202a-\u202e\u2060-\u206f"
    r"\ufeff\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    r"\U000e0000-\U000e007f"
)
_OTHER = r"\x7f-\x9f\u2028\u2029\ud800-\udfff" + _FORMAT
_UNSAFE_LINE = re.compile(r"[\x00-\x1f" + _OTHER + "]")
_UNSAFE_TEXT = re.compile(r"[\x00-\x08\x0b-\x1f" + _OTHER + "]")  # keeps LF and TAB
_ESCAPE_LINE = re.compile(r"[\\\x00-\x1f" + _OTHER + "]")  # and the backslash, doubled: escapes are unambiguous
_ESCAPE_TEXT = re.compile(r"[\\\x00-\x08\x0b-\x1f" + _OTHER + "]")


def _escape(m: re.Match[str]) -> str:
    ch = m.group()
    named = _NAMED.get(ch)
    if named is not None:
        return named
    code = ord(ch)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def safe_line(text: object) -> str:
    """One line for a terminal: every control character, line break, bidi control and invisible character shown
    as an escape, and a backslash doubled (so `\\x1b` in the output is an ESC, `\\\\x1b` the text `\\x1b`)."""
    s = text if isinstance(text, str) else str(text)
    return _ESCAPE_LINE.sub(_escape, s)


def safe_text(text: object, backslash: bool = True) -> str:
    """Multi-line text for a terminal: as `safe_line`, but LF and TAB are kept (CR is not). With `backslash`
    False, a backslash is left as it is: for a message whose values were escaped already (by `safe_line`), so
    that their escapes are not escaped again."""
    s = text if isinstance(text, str) else str(text)
    return (_ESCAPE_TEXT if backslash else _UNSAFE_TEXT).sub(_escape, s)


def is_terminal_safe(text: str, multiline: bool = False) -> bool:
    """Whether nothing in `text` acts on a terminal or is invisible there (a backslash is safe: it is printed)."""
    return (_UNSAFE_TEXT if multiline else _UNSAFE_LINE).search(text) is None


_UNSAFE_IN_JSON = re.compile("[" + _OTHER + "]")  # JSON escapes C0 controls itself


def _json_escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    code -= 0x10000  # JSON writes a character beyond the BMP as its UTF-16 surrogate pair
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


def json_safe(text: str) -> str:
    """JSON text (as json.dumps writes it with ensure_ascii=False) with the characters a terminal acts on, or shows
    as nothing, that JSON leaves raw (DEL, C1 controls, bidi and other format characters, line separators, lone
    surrogates) written as \\uXXXX escapes: the same JSON value, safe to print. Outside strings JSON has only ASCII,
    so only strings change."""
    return _UNSAFE_IN_JSON.sub(_json_escape, text)


_SHELL_PLAIN = re.compile(r"[A-Za-z0-9@%+=:,./_-]+")


def shell_word(text: str) -> str:
    """`text` as one shell word, safe to paste into a POSIX shell and to print: plain words as they are, others
    single-quoted, and text holding a character `safe_line` would escape as bash's $'...' with the same escapes
    (bash, zsh and ksh read them back as the very characters)."""
    if _SHELL_PLAIN.fullmatch(text):
        return text
    if _UNSAFE_LINE.search(text) is None:
        return "'" + text.replace("'", "'\"'\"'") + "'"
    return "$'" + _ESCAPE_LINE.sub(_shell_escape, text).replace("'", "\\'") + "'"


def _shell_escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    return f"\\u{code:04x}" if 0x80 <= code <= 0xFF else _escape(m)  # in $'...', \xHH is a byte, not a character


def xml_safe(text: str) -> str:
    """XML text (serialised, with every character an XML 1.0 character) with the characters a terminal acts on,
    or shows as nothing, written as character references (`&#x9b;`): the same document, safe to print. Markup
    has only ASCII, so only text and attribute values change."""
    return _UNSAFE_IN_JSON.sub(lambda m: f"&#x{ord(m.group()):x};", text)
