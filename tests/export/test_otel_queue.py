"""The span queue's bound in bytes: a collector that hangs while spans carry values of the wire's making."""

from __future__ import annotations

from tests.export.collector import Collector
from tests.export.test_units import _row


def test_the_span_queue_is_bounded_in_bytes_not_only_in_spans() -> None:
    """4,096 spans were queued whatever they held: a span's name and attributes are strings from the wire (a
    JSON-RPC method name of a megabyte, with A2A headers, is recorded as an unknown method), so with the
    collector hanging the queue could hold gigabytes. Past MAX_QUEUE_BYTES spans are dropped and counted."""
    from converse_tap.export.otel import MAX_QUEUE_BYTES, SpanExport
    from converse_tap.export.spans import build_span

    big = 1 << 20
    n = 2 * MAX_QUEUE_BYTES // big
    with Collector("hang") as col:
        export = SpanExport(col.url)
        try:
            for i in range(n):
                method = f"{i:08d}" + "m" * big  # each its own megabyte
                export.add(build_span(_row(exchange_id=f"x-{i}", method=method), []))
            with export._cond:
                queued = sum(len(span.name) + len(span.attributes["a2a.method.name"]) for span in export._queue)
            assert queued <= MAX_QUEUE_BYTES
            assert export.stats.dropped > 0 and export.stats.queued + export.stats.dropped == n
        finally:
            export.close(0)
