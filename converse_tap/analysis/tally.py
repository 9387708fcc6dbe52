"""Counting facts per key of a grouping, in one pass per grouping whatever the number of keys.

A frame of facts (or of facts already counted, with `n`: how many facts a row stands for) is summed with one pandas
grouping per counted column and grouping together (`tally`, `sizes`, `documents`); what comes out is as large as
the report it feeds (keys × values), and is shaped per key in plain Python (`shares`, `median`). Counting each
key's slice with pandas on its own cost about 12 ms of calls per key (a thousand agents: 12 s; performance.md,
section 1q). `metrics` defines what is counted; the ungrouped metrics are the same counts with one key, `ALL`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from .facts_sql import NONE
from .stats import wilson

ALL = "all"  # the one key of an ungrouped count
Row = dict[str, Any]
Tallies = dict[Any, dict[Any, int]]  # key -> counted value (a tuple for several columns) -> facts


def value_key(value: Any) -> str:
    """The key a counted value is reported under, one per value: `(none)` (NONE) for a missing value; a value from
    the data that starts like such a placeholder, `(`, or like a quoted value, `"`, is quoted (its `\\` and `"`
    escaped with a backslash), so that a wire value `(none)` is counted as `"(none)"`, apart from the missing
    ones (`facts_sql.value_key_sql` builds the same in SQL)."""
    if missing(value):
        return NONE
    text = str(value)
    if text.startswith(("(", '"')):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def missing(value: Any) -> bool:
    """None, NaN, NaT or pandas' NA (a list or other container is a value, not a missing one)."""
    if value is None:
        return True
    if isinstance(value, str):
        return False
    try:
        return bool(pd.isna(value))
    except (TypeError, ValueError):
        return False


def weights(frame: pd.DataFrame) -> pd.Series:
    return frame["n"] if "n" in frame.columns else pd.Series(1, index=frame.index)


def count(frame: pd.DataFrame) -> int:
    """How many facts a frame stands for (its rows, or the sum of its `n`)."""
    return int(weights(frame).sum())


def sizes(frame: pd.DataFrame, by: str | None) -> dict[Any, int]:
    """Facts per key of `by` (one key, ALL, when None)."""
    if frame.empty:
        return {}
    if by is None:
        return {ALL: count(frame)}
    return {k: int(n) for k, n in weights(frame).groupby(frame[by], sort=False).sum().items()}


def tally(frame: pd.DataFrame, by: str | None, *columns: str) -> Tallies:
    """Facts per key of `by` and counted value of `columns` (each by `value_key`; a tuple of them for several)."""
    if frame.empty:
        return {}
    values = [frame[c].astype(object).map(value_key) for c in columns]
    keys = [frame[by], *values] if by is not None else values
    sums = weights(frame).groupby(keys, sort=False).sum()
    out: Tallies = {}
    for index, n in sums.items():
        parts = index if isinstance(index, tuple) else (index,)
        key, counted = (parts[0], parts[1:]) if by is not None else (ALL, parts)
        out.setdefault(key, {})[counted if len(columns) > 1 else counted[0]] = int(n)
    return out


def shares(counts: Mapping[str, int], with_ci: bool) -> list[Row]:
    """One row per counted value, most facts first: count, share of all the counts, and its 95% Wilson interval."""
    total = sum(counts.values())
    rows = []
    for value, n in sorted(counts.items(), key=lambda kv: (-kv[1], str(kv[0]))):
        share, lo, hi = wilson(n, total)
        row: Row = {"value": value, "count": n, "share": share}
        if with_ci:
            row.update(ci_low=lo, ci_high=hi)
        rows.append(row)
    return rows


def documents(cited: pd.DataFrame, by: str | None, top: int) -> dict[Any, list[Row]]:
    """Per key: the `top` documents cited by the most replies (then by id), from per-document counts
    (`replies`, with the document's `title`: its first one given)."""
    if cited.empty:
        return {}
    keys = [cited[by], cited["document_id"]] if by is not None else [cited["document_id"]]
    frame = cited.groupby(keys, sort=False).agg(replies=("replies", "sum"), title=("title", "first"))
    found: dict[Any, list[tuple[int, Any, Any]]] = {}
    for index, replies, title in zip(frame.index, frame["replies"], frame["title"], strict=True):
        parts = index if isinstance(index, tuple) else (index,)
        key, doc = (parts[0], parts[1]) if by is not None else (ALL, parts[0])
        found.setdefault(key, []).append((-int(replies), doc, None if missing(title) else title))
    return {
        key: [{"document_id": doc, "title": title, "replies": -n} for n, doc, title in sorted(docs)[:top]]
        for key, docs in found.items()
    }


def split(rows: Iterable[Mapping[Any, Any]], column: str) -> dict[Any, list[Any]]:
    """Rows by their value of `column` (a missing value under None)."""
    out: dict[Any, list[Any]] = {}
    for row in rows:
        value = row[column]
        out.setdefault(None if missing(value) else value, []).append(row)
    return out


def median(values: Iterable[float]) -> float | None:
    """The middle value, or the mean of the two middle ones, as numpy takes it over float64 (None when empty)."""
    ordered = sorted(values)
    if not ordered:
        return None
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
