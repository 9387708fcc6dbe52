"""Credentials percent-encoded in free text, outside a URL: an echoed header or query pair quoted as a query value
is (`Authorization%3A%20Bearer%20…`, `password%3D…`, `password%253D…` encoded twice, `Authorization%3A+Bearer+…`
with `+` for a space).

`percent_words(text, clean)` decodes each word of `text` that holds a `%` (the percent-encoding undone a few rounds,
and once more with `+` read as a space), has the decoded text redacted by `clean` (the free-text rules, which do not
come back here) and, when that changed it, writes the word again from the redacted text, encoded (the marker's
brackets as they are). A word that decodes to nothing a rule changes stays byte for byte; so does a URL (a word
with `://` or `%3A%2F%2F` in it), which the URL rules decode themselves. Each word is read once; a decoded word is
shorter than the word: linear.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import quote

from .redact_url import unquote_all

# a word of free text with a `%` in it: a run without spaces, quotes, angle brackets or backslashes (JSON text
# escaped inside a string keeps its `\\"`), read once from its start
_WORD = re.compile(r"(?<![^\s'\"<>\\])[^\s'\"<>\\%]*+%[^\s'\"<>\\]*+")


def may_hold_percent(text: str) -> bool:
    """Whether `percent_words` may change `text`: an escape of a space, `"`, `%`, `'`, `+`, `:`, `;`, `=`... (what
    separates a name from its value), as `%2…` or `%3…`. Substring tests only."""
    return "%2" in text or "%3" in text


def percent_words(text: str, clean: Callable[[str], str]) -> str:
    """`text` with each percent-encoded word that decodes to a credential written again without it."""

    def word(m: re.Match[str]) -> str:
        w = m.group()
        if "://" in w or "%3A%2F%2F" in w.upper():
            return w  # a URL, or one encoded whole: redacted by the URL rules
        for plus in (False, True) if "+" in w else (False,):
            decoded = unquote_all(w, plus)
            if decoded == w:
                continue
            cleaned = clean(decoded)
            if cleaned != decoded:
                return quote(cleaned, safe="[]")
        return w

    return _WORD.sub(word, text)
