"""The recording worker's live exports: spans to an OTLP collector, metrics at /metrics. Both optional (off
unless configured), both fed from the extracted rows, neither able to slow the worker for long nor the proxy at
all (the proxy only ever writes into its never-blocking pipe)."""

from __future__ import annotations

import errno
import logging
import re
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from ..a2a.redact import SHORT_TEXT
from .spans import build_span, card_agents

log = logging.getLogger("converse_tap.export")
_HOSTPORT = re.compile(r"^(?:\[(?P<v6>[0-9A-Fa-f:.]+)\]|(?P<host>[^:\s\[\]]*)):(?P<port>\d{1,5})$")
MAX_CARD_NAMES = 10_000
# seconds a worker waits for its metrics port while the worker it replaced still holds it: that one has 60 s to
# write what the proxy buffered and 60 s more to finish its files, then SIGTERM and SIGKILL 10 s apart
# (addon.channel.Channel.close); it lets go of the port as it exits, after a few seconds in the usual case
PORT_WAIT = 150.0
_NOT_SERVED = "converse-tap: cannot serve metrics on %s (%s); recording goes on without them"
MAX_NAME = 256  # characters of a card's name kept for spans (a name, like the URLs keying it, is the card's making)


def parse_listen(text: str) -> tuple[str, int]:
    """`HOST:PORT` (or `[v6]:PORT`, or `:PORT` for every address) -> (host, port); ValueError with the reason."""
    m = _HOSTPORT.match(text.strip())
    if m is None or int(m["port"]) > 65535:
        raise ValueError(f"{text!r} is not HOST:PORT; give e.g. 127.0.0.1:9464 (port 0 picks a free one)")
    host = m["v6"] or m["host"] or "0.0.0.0"
    return host, int(m["port"])


def check_endpoint(endpoint: str) -> str | None:
    """Why spans cannot be sent to `endpoint`, or None (also for '': export off)."""
    if not endpoint:
        return None
    from .otel import available
    from .otel import check_endpoint as check

    return check(endpoint) or available()


def check_listen(text: str) -> str | None:
    """Why /metrics cannot be served at `text`, or None (also for '': metrics off). The port is tried, then
    released for the worker."""
    if not text:
        return None
    from importlib.util import find_spec

    if find_spec("prometheus_client") is None:
        return "serving metrics needs the otel extra: pip install 'a2a-converse-tap[otel]'"
    try:
        host, port = parse_listen(text)
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        with socket.socket(family, socket.SOCK_STREAM) as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            s.bind((host, port))
    except ValueError as e:
        return str(e)
    except OSError as e:
        return f"cannot listen on {text}: {e.strerror or e}"
    return None


def export_config(endpoint: str, text: bool, listen: str, agents: int, serving: str | None = None) -> dict[str, Any]:
    """The worker's export settings from the addon's options; ValueError says what is wrong. `serving`: the
    address a running worker already serves metrics on (not tried again: it is ours)."""
    why = check_endpoint(endpoint) or (None if listen and listen == serving else check_listen(listen))
    if why is None and agents < 1:
        why = f"converse_tap_metrics_agents must be at least 1, not {agents}"
    if why is not None:
        raise ValueError(why)
    return {"otlp_endpoint": endpoint, "otel_text": text, "metrics_listen": listen, "metrics_agents": agents}


class LiveExport:
    def __init__(self, config: dict[str, Any], health: Callable[[], dict[str, float]]) -> None:
        self.spans: Any = None
        self.metrics: Any = None
        self.text = bool(config.get("otel_text")) and config.get("text") == "keep"
        self._health = health
        self._lock = threading.Lock()  # serving the metrics port, and closing
        self._closed = False
        self._names: OrderedDict[str, str] = OrderedDict()  # agent -> name on its card, as cards are recorded
        endpoint = config.get("otlp_endpoint") or ""
        listen = config.get("metrics_listen") or ""
        if endpoint:
            from .otel import SpanExport

            self.spans = SpanExport(endpoint)
            log.info("converse-tap: exporting spans to %s", self.spans.shown)
        if listen:
            from .metrics import LiveMetrics

            self.metrics = LiveMetrics(max_agents=int(config.get("metrics_agents") or 100), health=self.health)
            host, port = parse_listen(listen)
            try:
                self._served(host, self.metrics.serve(host, port))
            except OSError as e:
                if e.errno != errno.EADDRINUSE:
                    log.error(_NOT_SERVED, listen, e)
                    self.metrics = None
                else:  # the worker the options replaced may still hold it while it finishes its files
                    waiting = threading.Thread(
                        target=self._serve_once_free, args=(host, port, listen), name="converse-tap-metrics-wait"
                    )
                    waiting.daemon = True
                    waiting.start()

    def _served(self, host: str, port: int) -> None:
        shown = f"[{host}]" if ":" in host else host
        log.info("converse-tap: metrics at http://%s:%d/metrics", shown, port)

    def _serve_once_free(self, host: str, port: int, listen: str) -> None:
        """Bind the metrics port as soon as it is free, for up to PORT_WAIT seconds: the options checked it was
        free or ours, so it is held by the worker they replaced, which lets go once its files are written."""
        deadline = time.monotonic() + PORT_WAIT
        while True:
            time.sleep(0.1)
            with self._lock:
                metrics = self.metrics
                if self._closed or metrics is None:
                    return
                try:
                    self._served(host, metrics.serve(host, port))
                    return
                except OSError as e:
                    if e.errno != errno.EADDRINUSE or time.monotonic() > deadline:
                        log.error(
                            "converse-tap: cannot serve metrics on %s (%s); recording goes on without them", listen, e
                        )
                        return

    @property
    def on(self) -> bool:
        return self.spans is not None or self.metrics is not None

    def health(self) -> dict[str, float]:
        out = dict(self._health())
        if self.spans is not None:
            s = self.spans.stats
            out.update(
                {
                    "export_spans": s.queued + s.dropped,
                    "export_spans_exported": s.exported,
                    "export_spans_failed": s.failed,
                    "export_queue_dropped": s.dropped,
                }
            )
        return out

    def on_rows(self, ext: Any) -> None:
        """One exchange's rows (an a2a.extract.Extraction), as the writer hands them on."""
        for card in ext.agent_cards:
            if not card.get("name"):
                continue
            name = card["name"][:MAX_NAME]
            for agent in card_agents(card):
                if len(agent) > SHORT_TEXT:  # a key that long is a URL of the card's making: not kept, not named
                    continue
                self._names[agent] = name
                self._names.move_to_end(agent)
                if len(self._names) > MAX_CARD_NAMES:
                    self._names.popitem(last=False)
        row = ext.exchange
        if self.metrics is not None:
            try:
                self.metrics.observe(row, ext.messages, ext.first_event)
            except Exception:
                log.exception("converse-tap: metrics update failed (logged once)")
                self.metrics.close()
                self.metrics = None
        if self.spans is not None:
            try:
                span = build_span(row, ext.messages, self._names.get(row["agent"]), ext.first_event, self.text)
                self.spans.add(span)
            except Exception:
                log.exception("converse-tap: span export failed (logged once); spans are off from here")
                self.spans.close(0)
                self.spans = None

    def close(self) -> str:
        """Stop both; returns a summary for the worker's last line ('' when neither ran)."""
        parts = []
        if self.spans is not None:
            s = self.spans.close()
            parts.append(f"spans exported {s.exported}, failed {s.failed}, dropped {s.dropped}")
        with self._lock:
            self._closed = True
            if self.metrics is not None:
                self.metrics.close()
        return "; ".join(parts)
