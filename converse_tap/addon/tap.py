"""ConverseTap: records A2A exchanges and their converse envelopes into a Parquet dataset.

The hooks run on mitmproxy's event loop and do only what cannot be done elsewhere: a cheap look at each request,
a stream callable that hands each chunk on untouched, and one record per exchange (or per chunk) to the
recording worker process (worker.py) through a pipe that never blocks (channel.py). Everything else —
decoding, parsing, extraction, Arrow, Parquet — costs the worker, never the proxy.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mitmproxy import ctx, exceptions, http
from mitmproxy.proxy.mode_specs import ReverseMode

from ..a2a.firstlook import maybe_a2a
from ..a2a.redact import TEXT_POLICIES, Redaction, install_log_redactor
from ..store import objstore
from ..store.files import TextPolicyConflict, check_writable, claim_text_policy, dataset_salt
from .channel import Channel
from .flows import PREFIX
from .summary import SUMMARY_LEVELS
from .taps import BodyTap, ChunkTap

log = logging.getLogger(__name__)
_STREAMED_TYPES = ("text/event-stream", "application/grpc")  # gRPC: relayed message by message


class ConverseTap:
    def __init__(self) -> None:
        self.channel: Channel | None = None
        self.max_body = 16 * 1024 * 1024
        self.counters: Counter[str] = Counter()
        self._tracked: dict[str, ChunkTap | None] = {}  # flows that may be A2A -> their stream tap, if streamed
        self._failures_logged: set[str] = set()
        self._open_failed = False

    def load(self, loader):
        loader.add_option(
            "converse_tap_dir",
            str,
            "converse-tap-data",
            "Directory of the Parquet dataset converse-tap writes, or s3://BUCKET/PREFIX.",
        )
        loader.add_option(
            "converse_tap_journal_dir",
            str,
            "",
            "Local directory of the journals when converse_tap_dir is on s3:// (default: a folder named for the "
            "dataset under ~/.cache/converse-tap/journals).",
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
            "Bodies and SSE events larger than this many bytes (once decoded) pass through untouched but are "
            "not parsed; the exchange is recorded with an anomaly.",
        )
        loader.add_option(
            "converse_tap_max_stream_events",
            int,
            10_000,
            "SSE events (gRPC messages) parsed per stream; later ones are counted, not parsed (the exchange says so).",
        )
        loader.add_option(
            "converse_tap_backlog",
            int,
            64 * 1024 * 1024,
            "Bytes of capture records the proxy holds while the recording worker catches up; past it, records "
            "are dropped and counted, traffic is never slowed.",
        )
        loader.add_option(
            "converse_tap_redact",
            Sequence[str],
            [],
            "Regular expressions whose matches (their groups, if they have any) are redacted in every stored URL, "
            "card URL and error text, besides the credential shapes always redacted (userinfo, JWTs, "
            ";jsessionid=, secret query values). Repeatable.",
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
        loader.add_option(
            "converse_tap_otlp_endpoint", str, "", "OTLP/HTTP collector for exchange spans (off when empty)."
        )
        loader.add_option("converse_tap_otlp_text", bool, False, "Message text in spans (text policy keep only).")
        loader.add_option("converse_tap_metrics_listen", str, "", "HOST:PORT serving Prometheus /metrics.")
        loader.add_option("converse_tap_metrics_agents", int, 100, "Agents labelled in metrics; more are other.")

    def configure(self, updated: set[str]) -> None:
        opts = ctx.options
        flush_interval = _seconds(opts.converse_tap_flush_interval, "converse_tap_flush_interval")
        rollover_seconds = _seconds(opts.converse_tap_rollover_seconds, "converse_tap_rollover_seconds")
        if opts.converse_tap_text not in TEXT_POLICIES:
            raise exceptions.OptionsError(
                f"converse_tap_text must be one of {', '.join(TEXT_POLICIES)}, not {opts.converse_tap_text!r}"
            )
        if opts.converse_tap_summary not in SUMMARY_LEVELS:
            raise exceptions.OptionsError(f"converse_tap_summary must be one of {', '.join(SUMMARY_LEVELS)}")
        for name, least in (
            ("converse_tap_max_body", 1024),
            ("converse_tap_rollover_rows", 1),
            ("converse_tap_max_stream_events", 1),
            ("converse_tap_backlog", 1024 * 1024),
        ):
            if getattr(opts, name) < least:
                raise exceptions.OptionsError(f"{name} must be at least {least}")
        try:
            redaction = Redaction.from_patterns(opts.converse_tap_redact)
        except ValueError as e:
            raise exceptions.OptionsError(f"converse_tap_redact: {e}") from e
        if "converse_tap_redact" in updated and opts.converse_tap_redact:
            # mitmproxy's own log lines quote URLs: the operator's patterns apply there too, not only the
            # credential shapes the entry points install
            install_log_redactor(redaction=redaction)
        self.max_body = opts.converse_tap_max_body
        if self.channel is None or any(k.startswith("converse_tap_") for k in updated):
            root = objstore.location(opts.converse_tap_dir)
            config = {
                "dir": str(root),
                "journal_dir": opts.converse_tap_journal_dir,
                "text": opts.converse_tap_text,
                "flush_interval": flush_interval,
                "rollover_rows": opts.converse_tap_rollover_rows,
                "rollover_seconds": rollover_seconds,
                "max_body": opts.converse_tap_max_body,
                "max_events": opts.converse_tap_max_stream_events,
                "summary": opts.converse_tap_summary,
                "redact": list(opts.converse_tap_redact),
                **_export_config(opts, self.channel),
            }
            self._open(root, config, opts.converse_tap_backlog)

    def _open(self, root: str | Path, config: dict[str, Any], backlog: int) -> None:
        try:
            check_writable(root)
            if objstore.is_remote(root):  # its journals are on local disk
                check_writable(
                    objstore.journal_root(root, Path(config["journal_dir"]) if config["journal_dir"] else None)
                )
            claim_text_policy(root, config["text"])
            config["salt"] = dataset_salt(root).hex() if config["text"] == "hash" else ""
        except TextPolicyConflict as e:
            raise exceptions.OptionsError(
                f"converse-tap: {e}".replace("use --text", "use --set converse_tap_text=")
            ) from e
        except (OSError, ValueError) as e:  # ValueError: an s3:// address that is not one
            raise exceptions.OptionsError(
                f"converse-tap cannot write its dataset to {root}: {e}. "
                "Choose another directory with --set converse_tap_dir=DIR."
            ) from e
        if self.channel is not None:  # replaced while traffic flows: its worker finishes its files off the loop
            self.channel.close(background=True)
        self.channel = Channel(config, max_backlog=backlog)
        try:
            self.channel.start()
        except OSError as e:
            self.channel = None
            raise exceptions.OptionsError(f"converse-tap cannot start its recording worker: {e}") from e
        log.info("converse-tap: recording A2A traffic into %s (text: %s)", root, config["text"])

    def running(self) -> None:
        self._ensure_channel()

    def _ensure_channel(self) -> None:
        """A host that never configured us (mitmproxy skips `configure` for a script when an option is set twice,
        and calls no `running` for scripts): start with the options as they are, or say loudly that we can't."""
        if self.channel is not None or self._open_failed:
            return
        try:
            self.configure(set(ctx.options.keys()))
        except exceptions.OptionsError as e:
            self._open_failed = True
            log.error("%s; A2A traffic is NOT being recorded", e)

    # -- hooks: short, and never raising into mitmproxy -----------------------------------------------------
    def request(self, flow: http.HTTPFlow) -> None:
        try:
            data = flow.request.data
            raw = data.content
            path = data.path.decode("latin-1")  # the routes are ASCII: any byte-preserving decoding will do
            if maybe_a2a(data.method.decode("latin-1"), path, data.headers, raw):
                self._ensure_channel()
                self._tracked[flow.id] = None
                self.counters["a2a_requests"] += 1
        except Exception:
            self._failed("request", flow)

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        try:
            if flow.id not in self._tracked or self.channel is None:
                return
            resp = flow.response
            if resp is None or (resp.stream and resp.stream is not True):  # another addon's callable: its own
                return
            if resp.headers.get("content-type", "").lower().startswith(_STREAMED_TYPES):
                tap = ChunkTap(self.channel, flow.id)
                kind = "o"
            elif resp.stream is True:  # mitmproxy streams it unchanged (stream_large_bodies): so do we, and record it
                tap = BodyTap(self.channel, flow.id, self.max_body)
                kind = "w"
            else:
                return
            if not self.channel.send((kind, flow.id, self._request(flow), _response_head(resp)), force=True):
                tap.opened, tap.lost = False, True  # relayed all the same, byte for byte
            tap.gen = self.channel.generation  # (the send may have started a new worker)
            self._tracked[flow.id] = tap
            resp.stream = tap
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
        channel, self.channel = self.channel, None
        if channel is None:
            return
        channel.reap()  # a worker found dead now: the streams it had open are lost with it (`knows`)
        # requests still waiting for their response are never recorded (the streams the worker has open, it
        # records as cut short): lost, and said so
        waiting = sum(1 for tap in self._tracked.values() if tap is None)
        if waiting:
            channel.count_lost("recorder_stopped", waiting)
        orphans = sum(
            1 for tap in self._tracked.values() if tap is not None and tap.opened and not channel.knows(tap.gen)
        )
        if orphans:  # streams whose start went to a worker that died
            channel.count_lost("worker_died", orphans)
        self._tracked.clear()
        if _serving():
            # the script reloaded (its file changed) or removed while the proxy serves: the loop never waits for the
            # old worker to write its files (a worker stopped or stuck held every flow 70 s), a thread does
            channel.close(background=True)
            self._log_counts(channel, "pending (it finishes its files in a thread of its own)")
            return
        self._log_counts(channel, channel.close())

    def _log_counts(self, channel: Channel, code: object) -> None:
        s = channel.stats
        log.info(
            "converse-tap: %d A2A requests seen, %d capture records, %d dropped (worker behind or down), "
            "%d worker restarts, %d hook failures, worker exit %s",
            self.counters["a2a_requests"],
            s.records,
            s.dropped,
            s.restarts,
            self.counters["hook_failures"],
            code,
        )

    # -- helpers ---------------------------------------------------------------------------------------------
    def _finish(self, flow: http.HTTPFlow) -> None:
        if flow.id not in self._tracked:
            return
        tap = self._tracked.pop(flow.id)
        if self.channel is None:
            return
        err = (flow.error.msg, flow.error.timestamp) if flow.error else None
        resp = flow.response
        if tap is not None:
            if not tap.opened:
                self.counters["exchanges_dropped"] += 1
                return
            if not self.channel.knows(tap.gen):  # its start went to a worker that died: the loss is said
                self.channel.count_lost("worker_died")
                self.counters["exchanges_dropped"] += 1
                return
            trailers = resp.trailers.fields if resp is not None and resp.trailers else None
            end = (resp.timestamp_end if resp is not None else None, trailers)
            gathered = (tap.size,) if isinstance(tap, BodyTap) else ()
            # an addon after ours set a `stream` of its own (mitmproxy's advice for SSE is `stream = True`)
            lost = "stream_replaced" if resp is not None and resp.stream is not tap else tap.lost
            if not self.channel.send(("e", flow.id, end, err, lost, *gathered), always=True):  # past FORCED_MAX
                short_err = (err[0][:200], err[1]) if err else None  # without trailers: still ends the stream
                self.channel.send(("e", flow.id, (end[0], None), short_err, True, *gathered), always=True)
            return
        response = None
        if resp is not None:
            body = resp.raw_content
            size = len(body) if body is not None else None
            if body is not None and len(body) > self.max_body:
                body = b""  # not parsed: the worker records its size
            response = (*_response_head(resp), resp.timestamp_end, body, size)
        if not self.channel.send(("x", flow.id, self._request(flow), response, err)):
            self.counters["exchanges_dropped"] += 1

    def _request(self, flow: http.HTTPFlow) -> tuple[Any, ...]:
        """The request as raw attributes (bytes, tuples): the worker decodes them, the event loop does not."""
        data = flow.request.data
        raw = data.content
        size = len(raw) if raw is not None else None
        if raw is not None and len(raw) > self.max_body:
            raw = raw[:PREFIX]  # enough to recognise the JSON-RPC method; the worker records the size
        return (
            data.method,
            (data.scheme, data.host, data.port, data.path),
            data.http_version,
            data.headers.fields,
            raw,
            size,
            data.timestamp_start,
            flow.client_conn.peername,
            flow.server_conn.address or flow.server_conn.peername,
            isinstance(flow.client_conn.proxy_mode, ReverseMode),
        )

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
            self._tracked.pop(flow.id, None)


def _serving() -> bool:
    """True while mitmproxy serves on (a `done` for a script reloaded or removed), False at its shutdown or
    without an event loop (a host driving the hooks itself), where `done` waits for the worker's files."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    should_exit = getattr(getattr(ctx, "master", None), "should_exit", None)
    return isinstance(should_exit, asyncio.Event) and not should_exit.is_set()


def _response_head(resp: http.Response) -> tuple[Any, ...]:
    return (resp.status_code, resp.headers.fields, resp.timestamp_start)


def _export_config(opts: Any, channel: Channel | None) -> dict[str, Any]:
    from ..export.live import export_config

    try:
        return export_config(
            opts.converse_tap_otlp_endpoint,
            opts.converse_tap_otlp_text,
            opts.converse_tap_metrics_listen,
            opts.converse_tap_metrics_agents,
            serving=channel.config.get("metrics_listen") if channel is not None else None,
        )
    except ValueError as e:
        raise exceptions.OptionsError(f"converse-tap: {e}") from e


def _seconds(text: str, name: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value != value or value == float("inf"):
        raise exceptions.OptionsError(f"{name} must be a positive number of seconds, not {text!r}")
    return value
