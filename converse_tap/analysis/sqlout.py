"""A query's rows as the `sql` command writes them: CSV (spreadsheet formulas quoted), JSON, JSON lines, and values
made plain for them (Arrow scalars to Python: decimals, dates, intervals, infinities)."""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
from collections.abc import Iterator
from typing import IO, Any

import numpy as np
import pyarrow as pa

from ..textsafe import json_safe


def rows(reader: pa.RecordBatchReader) -> Iterator[dict[str, Any]]:
    for batch in reader:
        yield from pylist(batch)


def pylist(data: pa.RecordBatch | pa.Table) -> list[dict[str, Any]]:
    """Rows as dicts; a date or time Python cannot hold (a tampered file, DuckDB's infinity) as ISO 8601 text."""
    try:
        return data.to_pylist()
    except (OverflowError, ValueError):  # value by value
        return [
            {name: _value(data.column(j)[i]) for j, name in enumerate(data.schema.names)} for i in range(data.num_rows)
        ]


# DuckDB's infinite dates and times, as their integers
_INFINITE = {2**63 - 1: "infinity", -(2**63 - 1): "-infinity", 2**31 - 1: "infinity", -(2**31 - 1): "-infinity"}


def _value(scalar: pa.Scalar) -> Any:
    """A scalar as Python, a date or time beyond Python's years (0001-9999) or infinite as ISO 8601 text."""
    try:
        return scalar.as_py()
    except (OverflowError, ValueError):
        pass
    t = scalar.type
    if pa.types.is_struct(t):
        return {name: _value(v) for name, v in scalar.items()}
    if pa.types.is_map(t):
        return [(_value(k), _value(v)) for k, v in zip(scalar.values.field(0), scalar.values.field(1), strict=True)]
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return [_value(v) for v in scalar.values]
    if pa.types.is_timestamp(t) or pa.types.is_date(t):
        raw = scalar.cast(pa.int64() if not pa.types.is_date32(t) else pa.int32()).as_py()
        if raw in _INFINITE:
            return _INFINITE[raw]
        unit = "D" if pa.types.is_date32(t) else "ms" if pa.types.is_date64(t) else t.unit
        text = str(np.datetime_as_string(np.datetime64(raw, unit)))  # type: ignore[arg-type]
        return text + "+00:00" if pa.types.is_timestamp(t) and t.tz else text
    return str(scalar)


def plain(value: Any) -> Any:
    """A JSON-ready value: times in ISO 8601, decimals and huge integers as numbers, bytes as hex, NaN and the
    infinities as the strings "NaN", "Infinity", "-Infinity" (JSON has no such number)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, dt.timedelta):
        return value.total_seconds()
    if isinstance(value, decimal.Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, bytes):
        return value.hex()
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    return value


def cell(value: Any) -> str:
    """A value as one line of text (lists and structs as JSON, null as empty)."""
    value = plain(value)
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


# a text cell a spreadsheet would run as a formula (OWASP's list): opened in Excel or LibreOffice, `=HYPERLINK(...)`
# or `@SUM(...)` from the wire would act; such a cell gets a leading apostrophe, which spreadsheets show as text
_FORMULA = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any, text: bool) -> str:
    """A CSV field: `cell`, quoted when it holds a comma, quote, CR or LF (Python's csv module leaves a lone CR
    unquoted, which splits the row for every reader); a value of a text column that starts like a formula
    prefixed with an apostrophe (numbers, times and the JSON of lists and structs are no text from the wire)."""
    s = cell(value)
    if text and s.startswith(_FORMULA):
        s = "'" + s
    return '"' + s.replace('"', '""') + '"' if any(c in s for c in ',"\r\n') else s


def write_csv(reader: pa.RecordBatchReader, out: IO[str]) -> int:
    out.write(",".join(csv_cell(name, True) for name in reader.schema.names) + "\n")
    text = [_may_be_text(f.type) for f in reader.schema]
    n = 0
    for row in rows(reader):
        out.write(",".join(csv_cell(v, t) for v, t in zip(row.values(), text, strict=True)) + "\n")
        n += 1
    return n


def _plain_type(t: pa.DataType) -> pa.DataType:
    return t.value_type if pa.types.is_dictionary(t) else t


def _may_be_text(t: pa.DataType) -> bool:
    """Whether a column's cells may be wire text as it was: any type but numbers, times, flags (only strings were
    guarded, and a UNION, `union_value(t := reason)`, wrote `=cmd|' /C calc'!A0` as it was)."""
    t = _plain_type(t.storage_type if isinstance(t, pa.ExtensionType) else t)
    fixed = (pa.types.is_integer, pa.types.is_floating, pa.types.is_decimal, pa.types.is_temporal, pa.types.is_boolean)
    return not (any(is_a(t) for is_a in fixed) or pa.types.is_null(t))


def write_jsonl(reader: pa.RecordBatchReader, out: IO[str]) -> int:
    n = 0
    for row in rows(reader):
        out.write(json_safe(json.dumps(plain(row), ensure_ascii=False, allow_nan=False)) + "\n")
        n += 1
    return n


def write_json(reader: pa.RecordBatchReader, out: IO[str]) -> int:
    out.write("[")
    n = 0
    for row in rows(reader):
        out.write(("," if n else "") + "\n  " + json_safe(json.dumps(plain(row), ensure_ascii=False, allow_nan=False)))
        n += 1
    out.write("\n]\n" if n else "]\n")
    return n
