"""ConverseTap: records A2A exchanges and their converse envelopes into a Parquet dataset."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter, deque
from dataclasses import dataclass
from functools import partial
from pathlib import Path

from mitmproxy import ctx, exceptions, http

from ..a2a.classify import A2ARequest, classify
from ..a2a.extract import Extraction, extract
from ..a2a.grpc import is_grpc
from ..a2a.headers import Headers
from ..a2a.redact import TEXT_POLICIES, TextPolicy
from ..store.files import check_writable, dataset_salt
from ..store.writer import DatasetWriter, recover
from .flows import PREFIX, exchange_from_flow
from .stream_tap import GrpcTap, SseTap
from .summary import SUMMARY_LEVELS, summary_lines

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Pending:
    req: A2ARequest
    tap: SseTap | None = None
    grpc: GrpcTap | None = None


class ConverseTap:
    def __init__(self) -> None:
        self.writer: DatasetWriter | None = None
        self.policy = TextPolicy()
        self.max_body = 16 * 1024 * 1024
        self.flush_interval = 1.0
        self.rollover_seconds = 300.0
        self.counters: Counter[str] = Counter()
        self._pending: dict[str, _Pending] = {}
        self._failures_logged: set[str] = set()
        self.summary = "exchanges"
        self._loop: asyncio.AbstractEventLoop | None = None
        self._open_failed = False
        self._lines: deque[str] = deque()  # summary lines from the writer thread, logged on the event loop

    def load(self, loader):
        loader.add_option(
            "converse_tap_dir",
            str,
            "converse-tap-data",
            "Directory of the Parquet dataset converse-tap writes.",
        )
        loader.add_option(
            "converse_tap_text",
            str,
            "keep",
            "Message text policy: keep it, hash it (salted SHA-256, per dataset) or drop it.",
            choices=list(TEXT_POLICIES),
        )
        loader.add_option(  # a string: mitmproxy's --set parses no floats
            "converse_tap_flush_interval",
            str,
            "1",
            "Seconds between journal flushes (e.g. 1 or 0.25): at most this much is lost if the proxy is killed.",
        )
        loader.add_option(
            "converse_tap_max_body",
            int,
            16 * 1024 * 1024,
            "Bodies and SSE events larger than this many bytes pass through untouched but are not parsed.",
        )
        loader.add_option(
            "converse_tap_summary",
            str,
            "exchanges",
            "Live summary: one line per A2A exchange, also one per reply, or none.",
            choices=list(SUMMARY_LEVELS),
        )
        loader.add_option(
            "converse_tap_rollover_rows",
            int,
            250_000,
            "Journal rows that trigger a roll-over into a Parquet file.",
        )
        loader.add_option(
            "converse_tap_rollover_seconds",
            str,
            "300",
            "Seconds after which journaled rows are rolled into a Parquet file.",
        )

    def configure(self, updated: set[str]) -> None:
        opts = ctx.options
        self.flush_interval = _seconds(opts.converse_tap_flush_interval, "converse_tap_flush_interval")
        self.rollover_seconds = _seconds(opts.converse_tap_rollover_seconds, "converse_tap_rollover_seconds")
        if opts.converse_tap_text not in TEXT_POLICIES:
            raise exceptions.OptionsError(
                f"converse_tap_text must be one of {', '.join(TEXT_POLICIES)}, not {opts.converse_tap_text!r}"
            )
        if opts.converse_tap_summary not in SUMMARY_LEVELS:
            raise exceptions.OptionsError(f"converse_tap_summary must be one of {', '.join(SUMMARY_LEVELS)}")
        self.summary = opts.converse_tap_summary
        if "converse_tap_max_body" in updated and opts.converse_tap_max_body < 1024:
            raise exceptions.OptionsError("converse_tap_max_body must be at least 1024 bytes")
        if "converse_tap_rollover_rows" in updated and opts.converse_tap_rollover_rows < 1:
            raise exceptions.OptionsError("converse_tap_rollover_rows must be at least 1")
        self.max_body = opts.converse_tap_max_body
        keys = {"converse_tap_dir", "converse_tap_text", "converse_tap_flush_interval"}
        keys |= {"converse_tap_rollover_rows", "converse_tap_rollover_seconds"}
        if self.writer is None or updated & keys:
            self._open(Path(opts.converse_tap_dir))

    def _open(self, root: Path) -> None:
        opts = ctx.options
        try:
            check_writable(root)
            salt = dataset_salt(root) if opts.converse_tap_text == "hash" else b""
            recovered = recover(root)
        except OSError as e:
            raise exceptions.OptionsError(
                f"converse-tap cannot write its dataset to {root}: {e}. "
                "Choose another directory with --set converse_tap_dir=DIR."
            ) from e
        if any(recovered.values()):
            log.info("converse-tap: recovered journals left by an earlier run: %s", recovered)
        if self.writer is not None:
            self.writer.close()
        self.policy = TextPolicy(opts.converse_tap_text, salt)
        self.writer = DatasetWriter(
            root,
            flush_interval=self.flush_interval,
            rollover_rows=opts.converse_tap_rollover_rows,
            rollover_seconds=self.rollover_seconds,
            on_rows=self._on_rows,
        )
        self.writer.start()
        log.info("converse-tap: recording A2A traffic into %s (text: %s)", root, self.policy.mode)

    def running(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._ensure_writer()

    def _ensure_writer(self) -> None:
        """A host that never configured us (mitmproxy skips `configure` for a script when an option is set twice,
        and calls no `running` for scripts): start with the options as they are, or say loudly that we can't."""
        if self.writer is not None or self._open_failed:
            return
        try:
            self.configure(set(ctx.options.keys()))
        except exceptions.OptionsError as e:
            self._open_failed = True
            log.error("%s; A2A traffic is NOT being recorded", e)

    # -- hooks: short, and never raising into mitmproxy -----------------------------------------------------
    def request(self, flow: http.HTTPFlow) -> None:
        try:
            self._request(flow)
        except Exception:
            self._failed("request", flow)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        try:
            self._responseheaders(flow)
        except Exception:
            self._failed("responseheaders", flow)

    def response(self, flow: http.HTTPFlow) -> None:
        try:
            self._finish(flow)
        except Exception:
            self._failed("response", flow)

    def error(self, flow: http.HTTPFlow) -> None:
        try:
            self._finish(flow)
        except Exception:
            self._failed("error", flow)

    def done(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self._log_lines()  # the exchanges the close drained have not been logged yet
            s = self.writer.stats
            log.info(
                "converse-tap: %d A2A exchanges, %d replies, %d anomalies, rows written %s, %d dropped, "
                "%d extraction failures, %d hook failures",
                s.exchanges,
                self.counters["replies"],
                self.counters["anomalies"],
                s.rows_written,
                s.rows_dropped,
                s.extract_failures,
                self.counters["hook_failures"],
            )
            self.writer = None

    # -- helpers ---------------------------------------------------------------------------------------------
    def _request(self, flow: http.HTTPFlow) -> None:
        req = flow.request
        raw = req.raw_content
        body = None
        if raw is not None and len(raw) <= self.max_body:
            try:
                body = req.get_content(strict=True)
            except ValueError:
                body = None
        prefix = raw[:PREFIX] if raw is not None and len(raw) > self.max_body else None
        a2a = classify(req.method, req.url, _headers(req), body, prefix)
        if a2a is not None:
            self._ensure_writer()
            self._pending[flow.id] = _Pending(a2a)
            self.counters["a2a_requests"] += 1

    def _responseheaders(self, flow: http.HTTPFlow) -> None:
        pending = self._pending.get(flow.id)
        if pending is None or flow.response is None or flow.response.stream:
            return
        ctype = flow.response.headers.get("content-type", "").lower()
        if pending.req.binding == "grpc" and is_grpc(ctype):  # relay each message as it comes; reassemble aside
            pending.grpc = GrpcTap(self.max_body, flow.response.headers.get("grpc-encoding", ""))
            flow.response.stream = pending.grpc
        elif ctype.startswith("text/event-stream"):
            try:
                tap = SseTap(self.max_body, flow.response.headers.get("content-encoding", ""))
            except ValueError as e:
                pending.req.anomalies.append(f"sse_not_parsed:{e}")
                flow.response.stream = True
                return
            pending.tap = tap
            flow.response.stream = tap

    def _finish(self, flow: http.HTTPFlow) -> None:
        pending = self._pending.pop(flow.id, None)
        if pending is None or self.writer is None:
            return
        tap, grpc = pending.tap, pending.grpc
        extra = [f"sse_parse_failed:{tap.failed}"] if tap is not None and tap.failed else None
        if grpc is not None:
            extra = grpc.anomalies()
        ex = exchange_from_flow(
            flow,
            sse_events=tap.events if tap else None,
            sse_comments=tap.comments if tap else 0,
            streamed_bytes=tap.bytes if tap else grpc.bytes if grpc else None,
            max_body=self.max_body,
            extra_anomalies=extra,
            grpc_frames=grpc.frames if grpc else None,
        )
        self.writer.submit(partial(extract, ex, self.policy, pending.req))

    def _on_rows(self, ext: Extraction) -> None:
        """Runs on the writer thread: count, and hand the summary lines to the event loop to log."""
        self.counters["replies"] += ext.exchange["replies"]
        self.counters["anomalies"] += len(ext.exchange["anomalies"]) + sum(len(m["anomalies"]) for m in ext.messages)
        lines = summary_lines(ext, self.summary)
        if not lines:
            return
        self._lines.extend(lines)
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(self._log_lines)

    def _log_lines(self) -> None:
        """Log the summary lines waiting in the buffer (on the event loop, or from `done`)."""
        while True:
            try:
                line = self._lines.popleft()
            except IndexError:
                return
            log.info(line)

    def _failed(self, hook: str, flow: http.HTTPFlow) -> None:
        self.counters["hook_failures"] += 1
        if hook not in self._failures_logged:
            self._failures_logged.add(hook)
            log.exception(
                "converse-tap: %s hook failed on %s (logged once per hook); traffic is unaffected",
                hook,
                flow.request.pretty_url,
            )
        if hook in ("response", "error"):
            self._pending.pop(flow.id, None)


def _seconds(text: str, name: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value != value or value == float("inf"):
        raise exceptions.OptionsError(f"{name} must be a positive number of seconds, not {text!r}")
    return value


def _headers(req: http.Request) -> Headers:
    return Headers(req.headers.items(multi=True))
