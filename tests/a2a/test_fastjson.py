"""fastjson.loads is json.loads: the same values (types included) and the same errors, whatever the input."""

from __future__ import annotations

import json
import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from converse_tap.a2a import fastjson


def _same(a: Any, b: Any) -> bool:
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _outcome(f: Any, data: bytes | str) -> Any:
    try:
        return ("ok", f(data))
    except (ValueError, RecursionError) as e:
        return ("error", type(e).__name__)


def _check(data: bytes | str) -> None:
    want, got = _outcome(json.loads, data), _outcome(fastjson.loads, data)
    assert want[0] == got[0] and (_same(want[1], got[1]) if want[0] == "ok" else want[1] == got[1]), data


@pytest.mark.parametrize(
    "data",
    [
        b'{"a":1,"b":2,"a":3}',
        b"[1e400]",
        b"[-1e400, NaN, Infinity, -Infinity]",
        b"[18446744073709551616]",
        b"[18446744073709551615, 9223372036854775808, -9223372036854775808]",
        b"[-9223372036854775809]",
        b'["12345678901234567890123"]',
        b"[0.1000000000000000055511151231257827, 1.5E+3, 0.1e-400, -0, -0.0]",
        b'"\\ud800"',
        b'["\xed\xa0\x80"]',
        b"\xef\xbb\xbf[1]",
        "[1]".encode("utf-16"),
        b'["\x01"]',
        b'{"a":1}x',
        b"[1,]",
        b"[01]",
        b'["\xc3"]',
        b"",
        b"[" * 2000 + b"]" * 2000,
        b"[" * 100_000,
        '{"é": "\u2028"}',
        "\ufeff[1]",
        '"\ud800"',
    ],
)
def test_odd_inputs(data: bytes | str) -> None:
    _check(data)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=15,
)


@given(_JSON)
def test_documents(doc: Any) -> None:
    text = json.dumps(doc)
    _check(text)
    _check(text.encode())
    _check(json.dumps(doc, ensure_ascii=False).encode("utf-8", "surrogatepass"))


@given(st.binary(max_size=40) | st.text(alphabet='[]{}",:0123456789.eE+-tfnrul \\ud8a', max_size=40))
def test_garbage(data: bytes | str) -> None:
    _check(data)


def test_a_document_of_too_many_values_is_refused_before_it_is_parsed() -> None:
    """Three bytes of `{},` are a 64-byte dict: a 16 MiB body of them was some 400 MB of objects in the worker."""
    import tracemalloc

    n = fastjson.MAX_VALUES // 2 + 1  # each `{},` counts twice: a value and its separator
    flood = b"[" + b"{}," * (n - 1) + b"{}]"
    tracemalloc.start()
    try:
        with pytest.raises(fastjson.TooManyValues):
            fastjson.loads(flood)
        with pytest.raises(ValueError):  # what callers catch for a document they cannot read
            fastjson.loads(flood.decode())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < len(flood) * 2  # the str copy, not n dicts (n * 64 bytes)
    # as many values as allowed, in a document long enough to be counted: parsed as json.loads parses it
    _check(b"[" + b"1," * (fastjson.MAX_VALUES - 2) + b"1]")
    with pytest.raises(fastjson.TooManyValues):
        fastjson.loads(b"[" + b"1," * fastjson.MAX_VALUES + b"1]")
    _check(json.dumps({"text": "x" * 3_000_000, "parts": [{"a": [1]}] * 10}))


def test_an_integer_too_long_for_python_costs_only_itself() -> None:
    """json.loads refuses a whole reply for one 5,000-digit number (a DoS guard of Python's int parser): the
    envelope and messages beside it were lost with an invalid_json anomaly."""
    huge = "9" * 5000
    doc = fastjson.loads(f'{{"id": {huge}, "n": 12, "x": [-{huge}]}}'.encode())
    assert doc == {"id": huge, "n": 12, "x": ["-" + huge]}
    with pytest.raises(ValueError, match="Expecting"):
        fastjson.loads(f'{{"id": {huge},'.encode())  # a document that is also malformed is still refused
