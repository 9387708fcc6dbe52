"""`converse-tap export otlp`: the spans of recorded exchanges, with their original times, to a collector."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from ..store.changes import DatasetChanged, ReadInterrupted, settle
from ..store.reader import TableFiles, read_table, table_files
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


Listing = dict[str, TableFiles]
TABLES_READ = ("exchanges", "messages", "agent_cards")


def list_dataset(root: str | Path) -> Listing:
    """The files the export reads, listed once: each read goes to these files, and a failed read is checked
    against them (store.changes.settle)."""
    return {t: table_files(root, t) for t in TABLES_READ}


def _read(
    root: str | Path, listed: Listing, table: str, columns: list[str] | None = None, filter: ds.Expression | None = None
) -> pa.Table:
    """`read_table` over the listed files of `table`. Raises DatasetChanged when one of the listed files was
    removed, renamed or rewritten since the listing (StorageLost when the object storage stopped answering), or
    the reading's own error."""
    try:
        return read_table(root, table, columns=columns, filter=filter, files=listed[table].files)
    except (OSError, ValueError, pa.ArrowException) as e:
        settled = settle(e, root, listed)
        if settled is e:
            raise
        raise settled from e


def _spans(
    root: str | Path,
    listed: Listing,
    since: datetime | None,
    until: datetime | None,
    agents: tuple[str, ...],
    text: bool,
    sent: Collection[str] = (),
) -> tuple[int, Iterator[tuple[str, SpanData]]]:
    """(number of exchanges, an iterator of (exchange id, its SpanData)) over the listed files, leaving out the
    exchanges `sent` names."""
    exchanges = _read(root, listed, "exchanges", filter=_exchange_filter(since, until, agents))
    exchanges = exchanges.drop_columns([c for c in ("date",) if c in exchanges.column_names])
    if sent:
        exchanges = exchanges.filter(pc.invert(pc.is_in(exchanges["exchange_id"], pa.array(list(sent), pa.string()))))
    cards = _read(root, listed, "agent_cards", columns=["ts", "agent", "name", "interfaces"])
    names: dict[str, str] = {}
    for card in sorted(_pylist(cards), key=lambda c: c["ts"] or 0):
        if card["name"]:
            names.update(dict.fromkeys(card_agents(card), card["name"]))
    columns = _MESSAGE_COLUMNS if text else [c for c in _MESSAGE_COLUMNS if c != "text"]

    def spans() -> Iterator[tuple[str, SpanData]]:
        for start in range(0, exchanges.num_rows, CHUNK):
            rows = _pylist(exchanges.slice(start, CHUNK))
            ids = [r["exchange_id"] for r in rows]
            found = _read(root, listed, "messages", columns=columns, filter=ds.field("exchange_id").isin(ids))
            by_exchange: dict[str, list[dict[str, Any]]] = {}
            for m in _pylist(found):
                by_exchange.setdefault(m["exchange_id"], []).append(m)
            for row in rows:
                messages = sorted(
                    by_exchange.get(row["exchange_id"], []), key=lambda m: (m["seq"] is None, m["seq"] or 0)
                )
                yield row["exchange_id"], build_span(row, messages, names.get(row["agent"]), None, text)

    return exchanges.num_rows, spans()


def dataset_spans(
    root: str | Path,
    since: datetime | None = None,
    until: datetime | None = None,
    agents: tuple[str, ...] = (),
    text: bool = False,
) -> tuple[int, Iterator[SpanData]]:
    """(number of exchanges, an iterator of their SpanData)."""
    count, spans = _spans(root, list_dataset(root), since, until, agents, text)
    return count, (span for _id, span in spans)


class BackfillInterrupted(ReadInterrupted):
    """The dataset changed (or its storage failed) under a backfill that had sent some spans already: what
    changed, and that running the command again sends those spans again."""

    def __init__(self, cause: ReadInterrupted, accepted: int) -> None:
        sent = f". {accepted} exchange spans were accepted by the collector before it stopped: running the command "
        super().__init__(str(cause) + (sent + "again sends them again" if accepted else ""))


def export_otlp(
    root: str | Path,
    endpoint: str,
    since: datetime | None = None,
    until: datetime | None = None,
    agents: tuple[str, ...] = (),
    text: bool = False,
    timeout: float = 60.0,
    listed: Listing | None = None,
    on_listing: Callable[[Listing], None] | None = None,
) -> BackfillResult:
    """Send the spans of the dataset's exchanges (in the window) to the collector at `endpoint`. The dataset is
    read from one listing of its files (`listed`, or listed here); `on_listing` is shown each listing (the CLI
    warns about the files it skips). When a listed file changes before it is read (a file moved, replaced or
    removed), the dataset is listed again and the export goes on from there once, each exchange sent once
    (those already sent are left out); a second change raises DatasetChanged (BackfillInterrupted once spans
    were sent), as does the storage failing."""
    from .otel import SpanExport

    export = SpanExport(endpoint, wait=True)
    sent: set[str] = set()
    count = 0
    try:
        for again in (False, True):
            if listed is None or again:
                listed = list_dataset(root)
            if on_listing is not None:
                on_listing(listed)
            try:
                count, spans = _spans(root, listed, since, until, agents, text, sent)
                count += len(sent)
                for exchange_id, span in spans:
                    export.add(span)
                    sent.add(exchange_id)
                break
            except DatasetChanged:
                if again:
                    raise
    except ReadInterrupted as e:
        stats = export.close(timeout)
        if stats.exported:
            raise BackfillInterrupted(e, stats.exported) from e
        raise
    except BaseException:
        export.close(0)
        raise
    stats = export.close(timeout)
    return BackfillResult(count, stats.exported, stats.failed, stats.dropped)
