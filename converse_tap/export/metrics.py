"""Live Prometheus metrics of the recorded traffic and of the recorder itself (`prometheus-client`, `otel` extra).

Updated by the recording worker as each exchange's rows arrive, served at `/metrics` by prometheus-client's
WSGI app on the HTTP server of export/serve.py, on its own threads: a scraper that is slow or never reads holds
only its own connection's thread, for a bounded time, and only a bounded number of connections are served at once.
Label sets are bounded: no ids as labels, agents past `max_agents` count as `other`, every other label keeps at
most a fixed number of distinct values (the rest are `other`), and each agent at most MAX_SERIES combinations
of them per metric (the rest count under `other` in every label but the agent): values bounded one by one still
multiply (50 authors × 50 coverages × 50 reasons from one agent's envelopes). The values the spec names (A2A
methods and bindings, the envelope's enums) always have series of their own, whatever else the wire sent first;
an agent's slot is given to another agent once it has been idle AGENT_IDLE seconds (its series are removed: a
counter that comes back starts from zero, which `rate` and `increase` take as a reset), so agents that came
once, or a burst of made-up ones, do not keep today's agents under `other` for the worker's life. What each
bound folds into `other` is counted (`converse_tap_metric_labels_folded_total`, by label). Label values are made
carriable (export/values.py): one lone surrogate in a label made every later scrape fail.

Live counters are not the report's definitions: see docs/operations.md ("Live metrics").
"""

from __future__ import annotations

import contextlib
import hashlib
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from typing import Any, ClassVar

from ..a2a.constants import (
    AUTHORS,
    CARD_METHOD,
    COVERAGE,
    COVERAGE_REASONS,
    INVOCATION_OUTCOMES,
    JSONRPC_V1_METHODS,
    PUSH_BINDING,
    PUSH_METHOD,
    ROUTINE_STATUSES,
)
from ..a2a.redact import SHORT_TEXT
from .spans import is_reply
from .values import fit

OTHER = "other"
MAX_VALUES = 50  # distinct values kept per label (other than agent)
MAX_LABEL_LENGTH = 80
MAX_SERIES = 200  # combinations of the other labels per agent and metric
SEEN_REPLIES = 100_000  # message ids remembered to count each distinct reply once
AGENT_IDLE = 3600.0  # seconds without an exchange after which an agent's slot may go to another agent
# values of a label that are always its own (beside at most MAX_VALUES others, first come)
KNOWN = {
    "method": frozenset(JSONRPC_V1_METHODS) | {CARD_METHOD, PUSH_METHOD},
    "binding": frozenset({"jsonrpc", "rest", "grpc", "card", PUSH_BINDING}),
    "author": AUTHORS | {""},
    "coverage": COVERAGE | {""},
    "reason": COVERAGE_REASONS | {""},
    "status": ROUTINE_STATUSES,
    "invocation": INVOCATION_OUTCOMES,
    "outcome": frozenset({"ok", "error", "incomplete"}),  # (of an exchange: ours, never the wire's)
    "routine": frozenset(),  # names are the agent's
}
_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


def label_value(value: Any) -> str:
    """A label value of the wire's making as it is kept: at most MAX_LABEL_LENGTH characters, carriable."""
    return "" if value is None else fit(str(value), MAX_LABEL_LENGTH)


class Bounded:
    """Maps a label value to itself if it is `known`, or while fewer than `limit` other distinct values have been
    seen; then to `other`."""

    def __init__(self, limit: int, known: frozenset[str] = frozenset()) -> None:
        self.limit = limit
        self.known = known
        self.values: set[str] = set()

    def __call__(self, value: Any) -> str:
        text = label_value(value)
        if text in self.known or text in self.values:
            return text
        if len(self.values) < self.limit:
            self.values.add(text)
            return text
        return OTHER


class AgentSlots:
    """Maps an agent to itself while it holds one of `limit` slots, else to `other`. A slot idle for `idle`
    seconds goes to the next new agent, and `evicted(agent)` is told (its series are removed)."""

    def __init__(
        self,
        limit: int,
        evicted: Callable[[str], None],
        idle: float = AGENT_IDLE,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.limit, self.idle, self.clock, self.evicted = limit, idle, clock, evicted
        self.last: OrderedDict[str, float] = OrderedDict()  # agent -> when last seen, least recent first

    def __call__(self, value: Any) -> str:
        text = label_value(value)
        now = self.clock()
        if text in self.last:
            self.last[text] = now
            self.last.move_to_end(text)
            return text
        if len(self.last) >= self.limit:
            oldest, seen = next(iter(self.last.items()))
            if now - seen < self.idle:
                return OTHER
            del self.last[oldest]
            self.evicted(oldest)
        self.last[text] = now
        return text


def outcome(row: dict[str, Any]) -> str:
    """`error` (a JSON-RPC or REST error, or HTTP >= 400), `incomplete` (no whole exchange seen) or `ok`."""
    if row.get("error_code") is not None or (row.get("status_code") or 0) >= 400:
        return "error"
    if not row.get("complete"):
        return "incomplete"
    return "ok"


class LiveMetrics:
    """`health` is called at scrape time and returns the recorder's own counters (name -> value)."""

    def __init__(self, max_agents: int = 100, health: Callable[[], dict[str, float]] | None = None) -> None:
        from prometheus_client import CollectorRegistry, Counter, Histogram, disable_created_metrics

        disable_created_metrics()  # no `_created` series beside each counter (this process serves only ours)
        self.registry = CollectorRegistry(auto_describe=True)
        self.agent = AgentSlots(max_agents, self._forget_agent)
        self._bound: dict[str, Bounded] = {}
        self._seen: OrderedDict[tuple[str, str], None] = OrderedDict()
        self._series: dict[tuple[Any, str], set[tuple[str, ...]]] = {}  # (metric, agent) -> combinations
        self.health = health
        r = self.registry
        self.exchanges = Counter(
            "converse_tap_exchanges",
            "A2A exchanges recorded",
            ["agent", "method", "binding", "outcome"],
            registry=r,
        )
        self.replies = Counter(
            "converse_tap_replies",
            "Distinct replies with the converse envelope (a reply seen again, e.g. by a poll, counts once)",
            ["agent", "author", "coverage", "reason"],
            registry=r,
        )
        self.routines = Counter(
            "converse_tap_routine_status",
            "Distinct replies reporting a routine status",
            ["agent", "routine", "status"],
            registry=r,
        )
        self.invocations = Counter(
            "converse_tap_invocations",
            "Distinct replies reporting a tool invocation",
            ["agent", "outcome"],
            registry=r,
        )
        self.duration = Histogram(
            "converse_tap_exchange_duration_seconds",
            "From request start to response end (a stream: to its end)",
            ["agent", "method"],
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.first_event = Histogram(
            "converse_tap_time_to_first_event_seconds",
            "From request start to a stream's first SSE event",
            ["agent"],
            buckets=_DURATION_BUCKETS,
            registry=r,
        )
        self.anomalies = Counter(
            "converse_tap_anomalies", "Conformance and capture anomalies by kind", ["kind"], registry=r
        )
        self.folded = Counter(
            "converse_tap_metric_labels_folded",
            "Label values counted as `other` because the label's bound was reached (agent: every slot busy; "
            "series: the agent's combinations of one metric)",
            ["label"],
            registry=r,
        )
        self.refused = Counter(
            "converse_tap_metrics_connections_refused",
            "Connections to /metrics closed unanswered: MAX_CONNECTIONS were open already",
            registry=r,
        )
        # which KNOWN values each metric's labels (but the agent) take
        self._kinds: dict[Any, tuple[str, ...]] = {
            self.exchanges: ("method", "binding", "outcome"),
            self.replies: ("author", "coverage", "reason"),
            self.routines: ("routine", "status"),
            self.invocations: ("invocation",),
            self.duration: ("method",),
            self.first_event: (),
        }
        if health is not None:
            r.register(_Health(health))
        self._server: Any = None

    def _b(self, label: str, value: Any) -> str:
        bound = self._bound.get(label)
        if bound is None:
            bound = self._bound[label] = Bounded(MAX_VALUES, KNOWN.get(label, frozenset()))
        return self._fold(label, value, bound(value))

    def _fold(self, label: str, value: Any, kept: str) -> str:
        """`kept`, counting it when a bound made it `other`."""
        if kept == OTHER and label_value(value) != OTHER:
            self.folded.labels(label).inc()
        return kept

    def _forget_agent(self, agent: str) -> None:
        """Remove every series of an agent whose slot goes to another."""
        for key in [k for k in self._series if k[1] == agent]:
            metric = key[0]
            for values in self._series.pop(key):
                with contextlib.suppress(KeyError):
                    metric.remove(agent, *values)

    def _labels(self, metric: Any, agent: str, *values: str) -> Any:
        """`metric.labels(agent, *values)`, the values `other` once the agent has MAX_SERIES combinations, unless
        each is a value the spec names (those combinations are few, and keep their series whatever came first).
        Every combination used is remembered, `other` too: an agent's series are all removed with its slot."""
        seen = self._series.setdefault((metric, agent), set())
        if values not in seen:
            if len(seen) >= MAX_SERIES and not self._spec_named(metric, values):
                values = (OTHER,) * len(values)
                self.folded.labels("series").inc()
            seen.add(values)
        return metric.labels(agent, *values)

    def _spec_named(self, metric: Any, values: tuple[str, ...]) -> bool:
        kinds = self._kinds[metric]
        return all(v in KNOWN[k] for k, v in zip(kinds, values, strict=True))

    def observe(self, row: dict[str, Any], messages: list[dict[str, Any]], first_event: float | None = None) -> None:
        """One exchange's rows (timestamps in integer microseconds, as the writer hands them on)."""
        agent = self._fold("agent", row.get("agent"), self.agent(row.get("agent")))
        method = self._b("method", row.get("method"))
        self._labels(self.exchanges, agent, method, self._b("binding", row.get("binding")), outcome(row)).inc()
        start, end = row.get("ts_start"), row.get("ts_end")
        if start is not None and end is not None and end >= start:
            self._labels(self.duration, agent, method).observe((end - start) / 1e6)
        if first_event is not None and start is not None and row.get("streamed"):
            self._labels(self.first_event, agent).observe(max(0.0, first_event - start / 1e6))
        kinds = [a.split(":", 1)[0] for a in row.get("anomalies") or ()]
        for m in messages:
            kinds += [a.split(":", 1)[0] for a in m.get("anomalies") or ()]
            if is_reply(m) and self._first_sighting(row, m):
                self._labels(
                    self.replies,
                    agent,
                    self._b("author", m.get("author")),
                    self._b("coverage", m.get("coverage")),
                    self._b("reason", m.get("coverage_reason")),
                ).inc()
                if m.get("routine_status") is not None:
                    routine = m.get("routine_name") or m.get("routine_tool_name")
                    self._labels(
                        self.routines, agent, self._b("routine", routine), self._b("status", m["routine_status"])
                    ).inc()
                if m.get("invocation_outcome") is not None:
                    self._labels(self.invocations, agent, self._b("invocation", m["invocation_outcome"])).inc()
        for kind in kinds:
            self.anomalies.labels(self._b("anomaly", kind)).inc()

    def _first_sighting(self, row: dict[str, Any], m: dict[str, Any]) -> bool:
        mid = m.get("message_id")
        if not mid:
            return True  # nothing to recognise it by: each sighting counts
        key = (_short(str(row.get("agent"))), _short(str(mid)))
        if key in self._seen:
            self._seen.move_to_end(key)
            return False
        self._seen[key] = None
        if len(self._seen) > SEEN_REPLIES:
            self._seen.popitem(last=False)
        return True

    # -- serving ----------------------------------------------------------------------------------------------
    def serve(self, host: str, port: int) -> int:
        """Serve /metrics; returns the port (0 picks a free one)."""
        from prometheus_client import make_wsgi_app

        from .serve import serve

        self._server, port = serve(make_wsgi_app(self.registry), host, port, self.refused.inc)
        return port

    def close(self) -> None:
        if self._server is not None:
            with contextlib.suppress(Exception):
                self._server.shutdown()
                self._server.server_close()
            self._server = None

    def text(self) -> bytes:
        from prometheus_client import generate_latest

        return generate_latest(self.registry)


def _short(text: str) -> str:
    """A string from the wire as a key to remember: itself, or a digest of it when it is long."""
    if len(text) <= SHORT_TEXT:
        return text
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class _Health:
    """The recorder's own counters, read at scrape time."""

    HELP: ClassVar[dict[str, str]] = {
        "rows_journaled": "Rows journaled (fsync'd), by table",
        "rows_written": "Rows written to Parquet, by table",
        "rows_lost": "Rows lost (held past the memory bound while the disk failed, or journaled into a "
        "directory removed under the recorder)",
        "flush_failures": "Journal flushes that failed (the rows are held and retried)",
        "extraction_failures": "Exchanges whose extraction failed (kept, flagged)",
        "streams_lost": "Stream ends whose start the worker never saw",
        "export_spans": "Spans handed to the OTLP exporter",
        "export_spans_exported": "Spans the collector accepted",
        "export_spans_failed": "Spans the collector refused or did not answer for",
        "export_queue_dropped": "Spans dropped because the export queue was full",
    }

    def __init__(self, health: Callable[[], dict[str, float]]) -> None:
        self.health = health

    def describe(self) -> list[Any]:
        return []

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily

        families: dict[str, Any] = {}
        for key, value in self.health().items():
            name, _, table = key.partition("/")
            fam = families.get(name)
            if fam is None:
                fam = families[name] = CounterMetricFamily(
                    f"converse_tap_{name}", self.HELP.get(name, name), labels=["table"] if table else []
                )
            fam.add_metric([table] if table else [], value)
        yield from families.values()
