"""`json.loads`, about twice as fast, with exactly its results and errors.

orjson parses first; whatever it refuses (NaN and Infinity, lone surrogates, numbers out of its range, a UTF-8
BOM, UTF-16 bodies, nesting past its limit, or malformed input) is parsed again by `json.loads`, which gives
today's value or error. The one case where orjson accepts input but answers differently, an integer beyond
64 bits (which it turns into a float), is kept from it: a document with a run of 19 or more digits is parsed
again by `json.loads`. `tests/a2a/test_fastjson.py` holds the two equal.
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


def loads(data: bytes | str) -> Any:
    if type(data) is bytes or type(data) is str:
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError:
            pass  # json.loads gives today's value or error
        else:
            if not _long_digits(data):
                return value
    return json.loads(data)
