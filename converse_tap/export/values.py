"""Strings of the wire's making, made fit to leave the recorder in a span or a metric label.

Python text may hold lone surrogates (a JSON `\\ud800` escape, or bytes that were not UTF-8 carried as surrogate
escapes); UTF-8 cannot. Unfixed, one such value made every later scrape of /metrics fail (the exposition could not
be encoded) and was silently left out of a span by the OTLP encoder. They go out as the stored rows show them
(store/batches.py): bytes that were not UTF-8 as `\\xff`, other lone surrogates as `\\ud800`, so what a span or
a label carries is what the dataset holds. Span ids are checked the same way: an id a dataset holds that is not
one (not hex, the wrong length, all zeros) stopped a backfill or made the collector refuse its whole batch.
"""

from __future__ import annotations

import re
from typing import Any

_HEX = re.compile(r"[0-9a-fA-F]+")


def carriable(text: str) -> str:
    """`text` with its lone surrogates escaped as the stored rows escape them (itself when it has none)."""
    if text.isascii():
        return text
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        try:  # bytes that were not UTF-8, carried as surrogate escapes: shown as the bytes they were
            return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        except UnicodeEncodeError:  # other lone surrogates: shown as code points
            return text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


def fit(value: Any, limit: int | None = None) -> Any:
    """A string value made carriable (and cut to `limit` characters); other values as they are."""
    if not isinstance(value, str):
        return value
    if limit is None:
        return carriable(value)
    return carriable(value[:limit])[:limit]


def hex_id(value: Any, digits: int) -> str | None:
    """`value` as a W3C trace or span id (`digits` hex digits, not all zero), lower case; None if it is not one."""
    if not isinstance(value, str) or len(value) != digits or not _HEX.fullmatch(value) or not int(value, 16):
        return None
    return value.lower()
