"""The report's SQL (engine.py, written for DuckDB) as Spark SQL: sqlglot transpiles each statement, and the few
constructs Spark has no spelling for are rewritten here by rule, on the parsed statement, so the definitions stay
written once (docs/operations.md, "Apache Spark").

The rules, each exact for what engine.py writes:
- the 128-bit sort key `(coalesce(epoch_us(ts), NO_TIME)::HUGEINT * 2**64) + pos` becomes the struct
  `named_struct('t', coalesce(unix_micros(ts), NO_TIME), 'p', pos)`: Spark orders structs field by field, which is
  the order of the packed key (both parts are BIGINT, `pos` is never negative; a time before 1970 is, which is
  why the key multiplies rather than shifts); taking the low 64 bits back, `(key & LOW64)::BIGINT`, becomes the
  struct's field `p`;
- DuckDB's `arg_max`/`arg_min` skip rows whose value is NULL, Spark's `max_by`/`min_by` do not: the ordering is
  nulled where the value is (Spark skips NULL orderings); `arg_max_null` is Spark's `max_by` as it is;
- `len(list)` is Spark's `size` (Spark's `length` is for strings), for the dataset's list columns.
"""

from __future__ import annotations

from functools import lru_cache

import pyarrow as pa
import sqlglot
from sqlglot import exp

from ..store.schema import TABLES

# the dataset's list-typed columns, and the lists the facts derive (a routine instance's abandoned slots): `len`
# of one of these is the list's size
LIST_COLUMNS = frozenset(
    f.name for schema in TABLES.values() for f in schema if pa.types.is_list(f.type) or pa.types.is_large_list(f.type)
) | {"abandoned_at"}
_LOW64 = 18446744073709551615


def _is_int128(node: exp.Expression) -> bool:
    return isinstance(node, exp.Cast) and node.to.this == exp.DataType.Type.INT128


def _rewrite(node: exp.Expression) -> exp.Expression:
    if isinstance(node, exp.Anonymous) and node.name.lower() == "epoch_us":
        return exp.Anonymous(this="unix_micros", expressions=node.expressions)
    if isinstance(node, exp.Add):  # (x::HUGEINT * 2**64) + pos -> named_struct('t', x, 'p', pos)
        left = node.this.unnest() if isinstance(node.this, exp.Paren) else node.this
        factor = left.expression if isinstance(left, exp.Mul) else None
        if factor is not None and _is_int128(left.this) and _is_int128(factor) and factor.this.name == str(2**64):
            return exp.Anonymous(
                this="named_struct",
                expressions=[exp.Literal.string("t"), left.this.this, exp.Literal.string("p"), node.expression],
            )
    if isinstance(node, exp.BitwiseAnd) and _is_int128(node.expression) and node.expression.this.name == str(_LOW64):
        return exp.Dot(this=exp.Paren(this=node.this), expression=exp.to_identifier("p"))
    if isinstance(node, (exp.ArgMax, exp.ArgMin)):  # skip NULL values, as DuckDB does
        value, order = node.this, node.expression
        nulled = exp.Case(ifs=[exp.If(this=exp.Not(this=exp.Is(this=value.copy(), expression=exp.Null())), true=order)])
        name = "max_by" if isinstance(node, exp.ArgMax) else "min_by"
        return exp.Anonymous(this=name, expressions=[value, nulled])
    if isinstance(node, exp.Anonymous) and node.name.lower() in ("arg_max_null", "arg_min_null"):
        name = "max_by" if node.name.lower() == "arg_max_null" else "min_by"
        return exp.Anonymous(this=name, expressions=node.expressions)
    if isinstance(node, exp.Length) and isinstance(node.this, exp.Column) and node.this.name in LIST_COLUMNS:
        return exp.ArraySize(this=node.this)
    return node


@lru_cache(maxsize=256)
def to_spark(sql: str) -> str:
    """One DuckDB statement of the report as Spark SQL (raises sqlglot's errors on what it cannot transpile)."""
    tree = sqlglot.parse_one(sql, read="duckdb")
    for _ in range(8):  # a rewritten node's children are rewritten on the next pass
        before = tree.sql(dialect="duckdb")
        tree = tree.transform(_rewrite)
        if tree.sql(dialect="duckdb") == before:
            break
    return tree.sql(dialect="spark", unsupported_level=sqlglot.ErrorLevel.RAISE)
