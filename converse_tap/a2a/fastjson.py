"""`json.loads`, about twice as fast, with exactly its results and errors.

orjson parses first; whatever it refuses (NaN and Infinity, lone surrogates, numbers out of its range, a UTF-8
BOM, UTF-16 bodies, nesting past its limit, or malformed input) is parsed again by `json.loads`, which gives
today's value or error. The one case where orjson accepts input but answers differently, an integer beyond
64 bits (which it turns into a float), is kept from it: a document with a run of 19 or more digits is parsed
again by `json.loads`. `tests/a2a/test_fastjson.py` holds the two equal.

A document that would make more than MAX_VALUES values is refused before either parser sees it
(`TooManyValues`, a ValueError): a dense array or object takes 14-25 times its size in Python objects (three
bytes of `{},` are a 64-byte dict and a pointer), so a 16 MiB body of `{}` was some 400 MB in the recording worker
while it was parsed.

One difference from `json.loads`, on purpose: an integer of more digits than Python converts (4,300) refuses the
whole document there; here that one value is kept as the string of its digits, so a huge number in a reply costs
only itself (the field it sits in is then of the wrong type, which the callers note).
"""

from __future__ import annotations

import json
from typing import Any

import orjson

_TO_ZERO = bytes.maketrans(b"123456789", b"000000000")
_RUN = b"0" * 19  # after _TO_ZERO, a run of 19 digits


def _long_digits(data: bytes | str) -> bool:
    """Whether the document holds a run of 19 or more digits: one C-speed pass (translate, then a literal
    search), linear in its size whatever it holds (a regular expression costs ~25 ms per MiB here)."""
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass")
    return raw.translate(_TO_ZERO).find(_RUN) >= 0


# values one document may hold (about 100 MB of objects at most); a task with a 20,000-message history holds
# about 300,000, and prose has a comma every few dozen characters
MAX_VALUES = 1_000_000
_CHECKED_FROM = MAX_VALUES  # a document no longer than this has no more of the characters counted


class TooManyValues(ValueError):
    """The document would hold more than MAX_VALUES values; it is not parsed."""


def too_many_values(data: bytes | bytearray | str) -> bool:
    """Whether `data` has more `,`, `{` and `[` than MAX_VALUES: counted in C, those in strings too, so an upper
    bound of the values a parse would make (only documents of over 1 MB are counted)."""
    if len(data) <= _CHECKED_FROM:
        return False
    if isinstance(data, str):
        return data.count(",") + data.count("{") + data.count("[") > MAX_VALUES
    return data.count(b",") + data.count(b"{") + data.count(b"[") > MAX_VALUES


def loads(data: bytes | str) -> Any:
    kind = type(data)
    if kind is bytes or kind is str:
        if len(data) > _CHECKED_FROM and too_many_values(data):
            raise TooManyValues(f"over {MAX_VALUES} values")
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError:
            pass  # json.loads gives today's value or error
        else:
            raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data  # (_long_digits, inline)
            if raw.translate(_TO_ZERO).find(_RUN) < 0:
                return value
    elif isinstance(data, (bytes, bytearray, str)) and too_many_values(data):
        raise TooManyValues(f"over {MAX_VALUES} values")
    try:
        return json.loads(data)
    except ValueError as e:
        if "integer string conversion" not in str(e):
            raise
    return json.loads(data, parse_int=_int_or_digits)


def _int_or_digits(digits: str) -> int | str:
    return int(digits) if len(digits) <= _INT_DIGITS else digits


_INT_DIGITS = 4000  # below sys.get_int_max_str_digits()'s default of 4,300
