"""OTLP/HTTP export of exchange spans (the `otel` extra: opentelemetry-sdk and its OTLP/HTTP exporter).

Spans are made with the SDK's tracer, with the ids and times that export/spans.py computed from the rows
(a span joins the caller's trace when the request carried a `traceparent`), and handed to a bounded queue that
one thread drains in batches to the collector. Adding a span never waits: when the queue is full (a collector
that is down, slow or failing) the span is dropped and counted (full: 4096 spans, or MAX_QUEUE_BYTES of their
names and string values, which come from the wire), and the failure is logged once per interval.
`close` waits a bounded time for what is queued. In `wait` mode (the backfill) adding a span waits for room.
A request holds at most `batch` spans and MAX_BATCH_BYTES of them (a span bigger alone): collectors refuse a
request past a size (the OpenTelemetry Collector's default: 20 MiB), and with it every span it carried.

The standard OTEL_EXPORTER_OTLP_HEADERS / _TIMEOUT / _COMPRESSION (and their _TRACES_ forms), OTEL_SERVICE_NAME
and OTEL_RESOURCE_ATTRIBUTES are honoured by the SDK; the endpoint is the one given (a base URL, to which
`/v1/traces` is appended, as for OTEL_EXPORTER_OTLP_ENDPOINT).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections import deque
from dataclasses import dataclass
from typing import Any

from .spans import SpanData, span_bytes

log = logging.getLogger("converse_tap.export")
LOG_INTERVAL = 60.0
MAX_QUEUE_BYTES = 32 << 20  # of spans, as `span_bytes` counts them
MAX_BATCH_BYTES = 4 << 20  # of the spans of one request


def traces_url(endpoint: str) -> str:
    endpoint = endpoint.strip()
    if endpoint.rstrip("/").endswith("/v1/traces"):
        return endpoint
    return endpoint.rstrip("/") + "/v1/traces"


def shown(endpoint: str) -> str:
    """The endpoint as messages and logs show it: without userinfo (a collector's basic-auth password, which the
    exporter sends from there) and with secret query values redacted, as stored URLs are."""
    from ..a2a.redact import NO_OPERATOR_PATTERNS

    return NO_OPERATOR_PATTERNS.url(endpoint.strip())


def check_endpoint(endpoint: str) -> str | None:
    """Why an endpoint cannot be used, or None."""
    from urllib.parse import urlsplit

    try:
        parts = urlsplit(endpoint.strip())
    except ValueError as e:  # `http://[::1`: a bracket never closed
        return f"{shown(endpoint)!r} is not a URL ({e}); give e.g. http://127.0.0.1:4318 (an OTLP/HTTP collector)"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"{shown(endpoint)!r} is not an http(s) URL; give e.g. http://127.0.0.1:4318 (an OTLP/HTTP collector)"
    try:
        parts.port  # noqa: B018
    except ValueError as e:
        return f"{shown(endpoint)!r}: {e}"
    return None


def available() -> str | None:
    """None when the `otel` extra is installed, else what to install (nothing is imported to find out)."""
    from importlib.util import find_spec

    try:
        found = find_spec("opentelemetry.sdk") and find_spec("opentelemetry.exporter.otlp.proto.http")
    except ImportError:
        found = None
    return None if found else "OTLP export needs the otel extra: pip install 'a2a-converse-tap[otel]'"


@dataclass
class ExportStats:
    queued: int = 0
    exported: int = 0
    dropped: int = 0  # queue full, or not sent by the time the recorder stopped
    failed: int = 0  # sent, refused or not answered (the collector's 5xx, a timeout, a refused connection)


class SpanExport:
    def __init__(
        self,
        endpoint: str,
        *,
        max_queue: int = 4096,
        max_bytes: int = MAX_QUEUE_BYTES,
        batch: int = 512,
        batch_bytes: int = MAX_BATCH_BYTES,
        wait: bool = False,
        exporter: Any = None,
    ) -> None:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
        from opentelemetry.sdk.trace.id_generator import IdGenerator
        from opentelemetry.sdk.trace.sampling import ALWAYS_ON

        self._trace = trace
        self.endpoint = traces_url(endpoint)
        self.shown = shown(self.endpoint)  # for logs
        self.stats = ExportStats()
        self.max_queue = max_queue
        self.max_bytes = max_bytes
        self.batch = batch
        self.batch_bytes = batch_bytes
        self.wait = wait
        self._queue: deque[Any] = deque()
        self._sizes: deque[int] = deque()  # span_bytes of each queued span
        self._queued_bytes = 0
        self._adding = 0  # span_bytes of the span being ended (on_end runs in `add`, on the same thread)
        self._cond = threading.Condition()
        self._closing = False
        self._inflight = 0
        self._last_log = 0.0
        self._logged_drops = 0
        # the SDK's own loggers report each failed batch (with tracebacks on connection errors): ours says it
        # once per interval instead
        logging.getLogger("opentelemetry").setLevel(logging.CRITICAL)
        self.exporter = exporter or OTLPSpanExporter(endpoint=self.endpoint)
        outer = self

        class _Ids(IdGenerator):
            """The ids the rows name (set just before each span starts: spans are made on one thread)."""

            trace_id = 0
            span_id = 0

            def generate_trace_id(self) -> int:
                return self.trace_id

            def generate_span_id(self) -> int:
                return self.span_id

        class _Queue(SpanProcessor):
            def on_end(self, span: Any) -> None:
                outer._enqueue(span)

        self._ids = _Ids()
        name = os.environ.get("OTEL_SERVICE_NAME") or "converse-tap"
        self.provider = TracerProvider(
            sampler=ALWAYS_ON,  # every exchange is recorded, whatever the caller's sampling flag said
            resource=Resource.create({SERVICE_NAME: name}),
            id_generator=self._ids,
            shutdown_on_exit=False,
        )
        self.provider.add_span_processor(_Queue())
        self.tracer = self.provider.get_tracer("converse_tap")
        self._thread = threading.Thread(target=self._run, name="converse-tap-otlp", daemon=True)
        self._thread.start()

    # -- making spans (the worker's thread) ----------------------------------------------------------------
    def add(self, data: SpanData) -> None:
        trace = self._trace
        self._ids.trace_id = int(data.trace_id, 16)
        self._ids.span_id = int(data.span_id, 16)
        context = None
        if data.parent_span_id:
            parent = trace.SpanContext(
                trace_id=int(data.trace_id, 16),
                span_id=int(data.parent_span_id, 16),
                is_remote=True,
                trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
            )
            context = trace.set_span_in_context(trace.NonRecordingSpan(parent))
        span = self.tracer.start_span(
            data.name,
            context=context,
            kind=trace.SpanKind.CLIENT,
            attributes=data.attributes,
            start_time=data.start,
        )
        for ev in data.events:
            span.add_event(ev.name, ev.attributes, timestamp=ev.ts)
        if data.error is not None:
            span.set_status(trace.Status(trace.StatusCode.ERROR))
        self._adding = span_bytes(data)
        span.end(end_time=data.end)

    def _enqueue(self, span: Any) -> None:
        with self._cond:
            size = self._adding
            while self.wait and self._full(size) and not self._closing:
                self._cond.wait(1.0)
            if self._full(size):
                self.stats.dropped += 1
                self._maybe_log()
                return
            self._queue.append(span)
            self._sizes.append(size)
            self._queued_bytes += size
            self.stats.queued += 1
            if len(self._queue) >= self.batch or self._queued_bytes >= self.batch_bytes:
                self._cond.notify_all()

    def _full(self, size: int) -> bool:
        """No room for a span of `size` bytes (one span always fits an empty queue)."""
        if len(self._queue) >= self.max_queue:
            return True
        return bool(self._queue) and self._queued_bytes + size > self.max_bytes

    # -- sending (its own thread) -----------------------------------------------------------------------------
    def _run(self) -> None:
        from opentelemetry.sdk.trace.export import SpanExportResult

        while True:
            with self._cond:
                if not self._queue and not self._closing:
                    self._cond.wait(1.0)
                if not self._queue:
                    if self._closing:
                        return
                    continue
                batch = [self._queue.popleft()]
                size = self._sizes.popleft()
                while self._queue and len(batch) < self.batch and size + self._sizes[0] <= self.batch_bytes:
                    batch.append(self._queue.popleft())
                    size += self._sizes.popleft()
                self._queued_bytes -= size
                self._inflight = len(batch)
                self._cond.notify_all()  # room for a waiting producer
            try:
                ok = self.exporter.export(batch) == SpanExportResult.SUCCESS
            except Exception:
                ok = False
            with self._cond:
                self._inflight = 0
                if ok:
                    self.stats.exported += len(batch)
                else:
                    self.stats.failed += len(batch)
                    self._maybe_log(force=self.stats.failed == len(batch))

    def _maybe_log(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._last_log >= LOG_INTERVAL:
            self._last_log = now
            log.warning(
                "converse-tap: OTLP export to %s is failing or behind: %d spans not accepted, %d dropped "
                "(queue full) so far; %s",
                self.shown,
                self.stats.failed,
                self.stats.dropped,
                # the backfill (`wait`) reads a dataset and ends saying what the collector took; the live export
                # rides beside a proxy
                "the dataset is unchanged, and the command's last line counts them"
                if self.wait
                else "traffic and recording are unaffected",
            )

    def flush(self, timeout: float) -> bool:
        """Wait until what is queued has been sent (or refused); False on timeout."""
        deadline = time.monotonic() + timeout
        with self._cond:
            self._cond.notify_all()
            while self._queue or self.stats.exported + self.stats.failed < self.stats.queued:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.05))
        return True

    def close(self, timeout: float = 5.0) -> ExportStats:
        """Send what is queued within `timeout` seconds; what is left then is counted as dropped."""
        self.flush(timeout)
        with self._cond:
            self._closing = True
            self.stats.dropped += len(self._queue)
            self._queue.clear()
            self._sizes.clear()
            self._queued_bytes = 0
            self._cond.notify_all()
        self._thread.join(0.5)  # a request still hanging on a silent collector is abandoned with its thread
        with self._cond:
            if self._thread.is_alive():
                self.stats.dropped += self._inflight
                self._inflight = 0
        with contextlib.suppress(Exception):
            self.exporter.shutdown()
        return self.stats
