"""The span queue's bound in bytes: a collector that hangs while spans carry values of the wire's making."""

from __future__ import annotations

from tests.export.collector import Collector
from tests.export.test_units import _row
from tests.memory import retained


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


def test_agent_names_from_cards_are_kept_short() -> None:
    """Spans name their agent as its card does; the names of the last 10,000 agents are kept. Names and the
    interface URLs that key them are strings of the card's making: cards with names of 20 KB kept 200 MB."""
    from converse_tap.a2a.rows import Extraction
    from converse_tap.export.live import MAX_NAME, LiveExport

    live = LiveExport({"metrics_listen": "127.0.0.1:0"}, dict)
    assert live.metrics is not None

    def cards(round_: int) -> None:
        for i in range(300):
            url = f"http://agent-{round_}-{i}.test/" + "p" * 2000
            card = {"agent": f"agent-{round_}-{i}", "name": f"{i}" + "n" * 20_000, "interfaces": [{"url": url}]}
            live.on_rows(Extraction(_row(exchange_id=f"x-{round_}-{i}", agent=card["agent"]), [], [card]))

    try:
        kept = retained(cards)
    finally:
        live.close()
    assert kept < 1_000_000, kept  # 300 names of 20 KB held are 6 MB
    assert live._names["agent-1-5"] == "5" + "n" * (MAX_NAME - 1)


def test_a_failing_collector_is_reported_in_the_terms_of_the_export_that_meets_it(caplog) -> None:
    """The live export rides beside a proxy (traffic and recording go on); the backfill (`export otlp`, which waits
    for room) reads a dataset and ends saying what the collector took: its warning said "recording unaffected"."""
    import logging

    from converse_tap.export.otel import SpanExport
    from converse_tap.export.spans import build_span

    with Collector("fail") as col:
        for wait, said, not_said in ((False, "traffic and recording", "dataset"), (True, "dataset", "recording")):
            caplog.clear()
            export = SpanExport(col.url, wait=wait)
            with caplog.at_level(logging.WARNING, logger="converse_tap"):
                try:
                    export.add(build_span(_row(exchange_id="x-1"), []))
                    export.flush(10)
                finally:
                    export.close(1)
            lines = [r.getMessage() for r in caplog.records if "OTLP export" in r.getMessage()]
            assert lines and export.stats.failed == 1
            assert all(said in line and not_said not in line for line in lines), lines
