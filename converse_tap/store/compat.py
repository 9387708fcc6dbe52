"""Which column types of files that other writers made (pandas, Polars, Spark, DuckDB) hold a table's column:
the same values in another physical type. Readers convert them (pyarrow's scan casts, DuckDB's `sources.typed_columns`
casts); a type that may hold a value the column cannot (a wider integer, a float) is let through only when every
value of the file converts (`values_problem`)."""

from __future__ import annotations

from collections.abc import Iterable

import pyarrow as pa
import pyarrow.parquet as pq

_LISTS = (pa.types.is_list, pa.types.is_large_list, pa.types.is_list_view, pa.types.is_large_list_view)
_TEXT = (pa.types.is_string, pa.types.is_large_string, pa.types.is_string_view)


def _plain(t: pa.DataType) -> pa.DataType:
    return t.value_type if pa.types.is_dictionary(t) else t


def _any(tests: Iterable[object], t: pa.DataType) -> bool:
    return any(test(t) for test in tests)  # type: ignore[operator]


def _numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t)


def incompatible(found: pa.DataType, expected: pa.DataType, nested: bool = False) -> bool:
    """Whether a column of type `found` cannot hold the values of a column of type `expected`: another kind of
    value (text for a number, a list for text). Dictionary or not, string, large_string or string_view, list,
    large_list or list_view, any unit and zone of time, a column of nulls (pandas' type for a column of None)
    and a struct with fields of those types, by name, all hold them. A number of another width or a float holds
    them at the top level (its values are checked), not inside a list or struct."""
    found, expected = _plain(found), _plain(expected)
    if pa.types.is_null(found) or found.equals(expected):
        return False
    if _any(_TEXT, expected):
        return not _any(_TEXT, found)
    if pa.types.is_timestamp(expected):
        return not pa.types.is_timestamp(found)  # any unit and zone: pyarrow and DuckDB convert
    if pa.types.is_integer(expected):
        return nested or not _numeric(found)
    if _any(_LISTS, expected):
        return not _any(_LISTS, found) or incompatible(found.value_type, expected.value_type, True)
    if pa.types.is_struct(expected) and pa.types.is_struct(found):
        want = {f.name: f.type for f in expected}
        return any(incompatible(f.type, want[f.name], True) for f in found if f.name in want)
    return True


def narrowing(found: pa.DataType, expected: pa.DataType) -> bool:
    """Whether a top-level column of type `found` (compatible) may hold a value its table's type cannot: an
    integer wider than it or unsigned, a float (it holds fractions, NaN)."""
    found, expected = _plain(found), _plain(expected)
    if not (pa.types.is_integer(expected) and _numeric(found)) or found.equals(expected):
        return False
    if pa.types.is_floating(found):
        return True
    if pa.types.is_signed_integer(found):
        return found.bit_width > expected.bit_width
    return found.bit_width >= expected.bit_width


def values_problem(pf: pq.ParquetFile, columns: dict[str, pa.DataType]) -> str | None:
    """Why some value of these columns of the file (name -> the table's type) does not convert to its table's
    type, read one row group and one column at a time; None when every one converts."""
    for name, expected in columns.items():
        for g in range(pf.metadata.num_row_groups):
            values = pf.read_row_group(g, columns=[name]).column(0)
            try:
                values.cast(_plain(expected))  # safe: out of range, a fraction, NaN all fail
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                return f"{name} holds values that are not {_plain(expected)} ({str(e).strip().splitlines()[0]})"
    return None
