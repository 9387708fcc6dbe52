"""`json.loads`, about twice as fast, with exactly its results and errors.

orjson parses first; whatever it refuses (NaN and Infinity, lone surrogates, numbers out of its range, a UTF-8
BOM, UTF-16 bodies, nesting past its limit, or malformed input) is parsed again by `json.loads`, which gives
today's value or error. The one case where orjson accepts input but answers differently, an integer beyond
64 bits (which it turns into a float), is kept from it: a document with a run of 19 or more digits goes to
`json.loads` directly. `tests/a2a/test_fastjson.py` holds the two equal.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

_LONG_DIGITS = re.compile(rb"[0-9]{19}")
_LONG_DIGITS_STR = re.compile(r"[0-9]{19}")


def loads(data: bytes | str) -> Any:
    if isinstance(data, bytes):
        fast = type(data) is bytes and _LONG_DIGITS.search(data) is None
    else:
        fast = type(data) is str and _LONG_DIGITS_STR.search(data) is None
    if fast:
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(data)
