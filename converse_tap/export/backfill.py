"""`converse-tap export otlp`: the spans of recorded exchanges, with their original times, to a collector."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from ..store.reader import read_table
from ..store.schema import TABLES
from .spans import SpanData, build_span, card_agents

_MESSAGE_COLUMNS = [
    c for c in TABLES["messages"].names if c not in ("envelope_json", "pending_input", "citations", "part_kinds")
]
CHUNK = 5000  # exchanges per read of their messages


@dataclass
class BackfillResult:
    exchanges: int
    exported: int
    failed: int
    dropped: int


# a span's times are unsigned 64-bit nanoseconds since 1970: a time outside (a tampered file, -infinity) is null
_SPAN_MICROS = (0, (2**64 - 1) // 1000)


def _pylist(table: pa.Table) -> list[dict[str, Any]]:
    """Rows with timestamps as integer microseconds, as the writer hands them to the live export; one a span cannot
    carry is null (it costs that time, not the span and not the batch the span is sent in)."""
    columns = []
    for col in table.columns:
        if pa.types.is_timestamp(col.type):
            col = pc.cast(col, pa.timestamp("us", tz="UTC")).cast(pa.int64())
            low, high = _SPAN_MICROS
            inside = pc.and_(pc.greater_equal(col, low), pc.less_equal(col, high))
            col = pc.if_else(inside, col, pa.scalar(None, pa.int64()))
        columns.append(col)
    return pa.table(columns, names=table.column_names).to_pylist()


def _exchange_filter(since: datetime | None, until: datetime | None, agents: tuple[str, ...]) -> ds.Expression | None:
    expr: ds.Expression | None = None

    def both(e: ds.Expression) -> None:
        nonlocal expr
        expr = e if expr is None else expr & e

    if since is not None:
        both(ds.field("ts_start") >= pa.scalar(since, pa.timestamp("us", tz="UTC")))
    if until is not None:
        both(ds.field("ts_start") < pa.scalar(until, pa.timestamp("us", tz="UTC")))
    if agents:
        both(ds.field("agent").isin(list(agents)))
    return expr


def dataset_spans(
    root: str | Path,
    since: datetime | None = None,
    until: datetime | None = None,
    agents: tuple[str, ...] = (),
    text: bool = False,
) -> tuple[int, Any]:
    """(number of exchanges, an iterator of their SpanData)."""
    exchanges = read_table(root, "exchanges", filter=_exchange_filter(since, until, agents))
    exchanges = exchanges.drop_columns([c for c in ("date",) if c in exchanges.column_names])
    cards = read_table(root, "agent_cards", columns=["ts", "agent", "name", "interfaces"])
    names: dict[str, str] = {}
    for card in sorted(_pylist(cards), key=lambda c: c["ts"] or 0):
        if card["name"]:
            names.update(dict.fromkeys(card_agents(card), card["name"]))
    columns = _MESSAGE_COLUMNS if text else [c for c in _MESSAGE_COLUMNS if c != "text"]

    def spans() -> Any:
        for start in range(0, exchanges.num_rows, CHUNK):
            rows = _pylist(exchanges.slice(start, CHUNK))
            ids = [r["exchange_id"] for r in rows]
            found = read_table(root, "messages", columns=columns, filter=ds.field("exchange_id").isin(ids))
            by_exchange: dict[str, list[dict[str, Any]]] = {}
            for m in _pylist(found):
                by_exchange.setdefault(m["exchange_id"], []).append(m)
            for row in rows:
                messages = sorted(
                    by_exchange.get(row["exchange_id"], []), key=lambda m: (m["seq"] is None, m["seq"] or 0)
                )
                yield build_span(row, messages, names.get(row["agent"]), None, text)

    return exchanges.num_rows, spans()


def export_otlp(
    root: str | Path,
    endpoint: str,
    since: datetime | None = None,
    until: datetime | None = None,
    agents: tuple[str, ...] = (),
    text: bool = False,
    timeout: float = 60.0,
) -> BackfillResult:
    from .otel import SpanExport

    count, spans = dataset_spans(root, since, until, agents, text)
    export = SpanExport(endpoint, wait=True)
    span: SpanData
    for span in spans:
        export.add(span)
    stats = export.close(timeout)
    return BackfillResult(count, stats.exported, stats.failed, stats.dropped)
