"""The recording worker: a process of its own that turns the proxy's raw capture records into dataset rows.

It runs as `python -m converse_tap.addon.workerproc`, started by the addon (channel.py) with a pipe on stdin
(workerproc.py reads the records and hands them to `Worker.handle`). Everything that
costs CPU or memory in proportion to what the wire says — decompression, SSE splitting, JSON, the envelope,
Arrow and Parquet — happens here, so that none of it can slow, grow or stop the proxy. Summary lines go to
stderr, which it shares with mitmproxy: chatter, never mixed into what a command prints as data.
"""

from __future__ import annotations

import logging
import struct
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mitmproxy.net.http import url as urls

from ..a2a.exchange import HttpExchange
from ..a2a.exchange_row import failed_extraction
from ..a2a.extract import Extraction, Extractor
from ..a2a.grpc_codecs import grpc_content
from ..a2a.headers import Headers
from ..a2a.inflate import Inflater, TooLarge, decoded_prefix
from ..a2a.redact import Redaction, TextPolicy, install_log_redactor
from ..a2a.sse import SseParser
from ..export.live import LiveExport
from ..store import objstore
from ..store.gaps import CaptureGap
from ..store.recovery import recover
from ..store.writer import DatasetWriter
from .bodies import Gathered, drop_texts, incomplete, row_bytes
from .bypass import BypassCheck
from .flows import PREFIX, _addr, _body
from .grpc_live import GrpcLive
from .summary import summary_lines

log = logging.getLogger("converse_tap.worker")
_LEN = struct.Struct(">I")


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value


def _headers(fields: Any) -> Headers:
    return Headers.decoded(fields)  # (each name and value as `_text` gives it)


@dataclass(slots=True)
class _Stream:
    ex: HttpExchange
    extractor: Extractor
    parser: SseParser
    inflater: Inflater | None
    bytes: int = 0
    failed: str | None = None
    grpc: GrpcLive | None = None  # a gRPC response (any form): length-prefixed messages instead of SSE events
    reverse: bool = False  # a GET captured by a reverse-mode proxy: a card it returns is checked
    held: int = 0  # bytes it holds as last counted: its parser's unfinished event, its rows' texts, its decoder
    counted: int = 0  # its message rows whose texts are counted in `row_bytes`
    kept_upto: int = 0  # its message rows that have given up their long texts already (_shed)
    row_bytes: int = 0  # of the texts (and stored envelopes) of its message rows, kept until the stream ends


MAX_OTHER_STREAMS = 10_000  # ids of open streams that are not A2A, kept until their end
# bytes the open streams may hold together until they end: unfinished events (SSE) and messages (gRPC), up to
# max_body (16 MiB) each, the texts of the rows they have made, their decoders' windows. A hundred streams
# stalled mid-event held 1.6 GB; 10,000 events of 16 MiB texts, 160 GB
MAX_HELD = 64 * 1024 * 1024


class Worker:
    def __init__(self, config: dict[str, Any]) -> None:
        self.max_body: int = config["max_body"]
        self.max_events: int = config["max_events"]
        self.summary: str = config["summary"]
        self.policy = TextPolicy(config["text"], bytes.fromhex(config["salt"]))
        self.redaction = Redaction.from_patterns(config.get("redact") or None)
        install_log_redactor(redaction=self.redaction)
        self.root = objstore.location(config["dir"])
        journal_dir = Path(config["journal_dir"]) if config.get("journal_dir") else None
        recovered = recover(self.root, journal_dir)
        if any(recovered.values()):
            log.info("converse-tap: recovered journals left by an earlier run: %s", recovered)
        self.writer = DatasetWriter(
            self.root,
            flush_interval=config["flush_interval"],
            rollover_rows=config["rollover_rows"],
            rollover_seconds=config["rollover_seconds"],
            on_rows=self._on_rows,
            journal_dir=journal_dir,
        )
        self.writer.start(thread=False)
        exports = config.get("otlp_endpoint") or config.get("metrics_listen")
        self.live = LiveExport(config, self._health) if exports else None
        self.streams: dict[str, _Stream] = {}
        self.bodies: dict[str, Gathered] = {}  # bodies mitmproxy streams that are read whole (bodies.py)
        # streams opened that are not A2A: their end is expected, not a lost stream (oldest forgotten past a bound)
        self.others: dict[str, None] = {}
        self.replies = 0
        self.anomalies = 0
        self.failures = 0
        self.lost_streams = 0
        self.held = 0  # what the open streams hold together (MAX_HELD)
        self.bypass = BypassCheck()  # cards of reverse-mode GETs that send clients around the recorder

    # -- records -----------------------------------------------------------------------------------------
    def handle(self, record: tuple[Any, ...]) -> None:
        kind = record[0]
        if kind == "x":
            _, fid, req, resp, err = record
            ex = self._exchange(fid, req, resp, err)
            self._submit(ex, lambda: self._extract_whole(ex), _reverse_get(req, ex))
        elif kind == "o":
            self._open(*record[1:])
        elif kind == "c":
            stream = self.streams.get(record[1])
            if stream is not None:
                self._chunk(stream, record[2], record[3])
            elif (body := self.bodies.get(record[1])) is not None:
                self.held += body.add(record[3], self.max_body)
                if self.held > MAX_HELD:
                    self._shed()
        elif kind == "e":
            if record[1] in self.bodies:
                self._body_end(*record[1:])
            else:
                self._close(*record[1:5])
        elif kind == "w":  # a body mitmproxy streams that is no stream: gathered, read whole at its end
            self.bodies[record[1]] = Gathered(record[2], record[3])
        elif kind == "g":  # records the proxy lost: a `capture_gaps` row
            _, reason, records, nbytes, first, last = record
            self.writer.write(CaptureGap(reason, records, nbytes, first, last))

    def _exchange(self, fid: str, req: tuple[Any, ...], resp: tuple[Any, ...] | None, err: Any) -> HttpExchange:
        method, (scheme, host, port, path), version, fields, body, body_len, ts_start, client, server, _reverse = req
        anomalies: list[str] = []
        headers = _headers(fields)
        too_large = body is not None and body_len > len(body)
        path = _text(path)
        ex = HttpExchange(
            id=fid,
            method=_text(method).upper(),
            url=urls.unparse(_text(scheme), host, port, path if path != "*" else ""),  # as Request.url builds it
            request_headers=headers,
            request_body=None if too_large else _body(body, headers, self.max_body, "request", anomalies),
            request_prefix=body[:PREFIX] if too_large else None,
            http_version=_text(version),
            ts_start=ts_start,
            client_addr=_addr(client),
            server_addr=_addr(server),
            bytes_in=body_len,
            source="live",
            anomalies=anomalies,
        )
        if too_large:
            anomalies.append(f"request_body_too_large:{body_len}")
        elif ex.request_body is None and body and any(a.startswith("request_body_too_large") for a in anomalies):
            # a request that inflates past the limit is still recognised from its decoded start
            ex.request_prefix = decoded_prefix(body, ", ".join(headers.get_all("content-encoding")), PREFIX)
        if resp is not None:
            status, rfields, ts_first = resp[:3]
            ex.status = status
            ex.response_headers = _headers(rfields)
            ex.ts_first_byte = ts_first
            if len(resp) > 3:
                ts_end, rbody, rlen = resp[3:]
                ex.ts_end = ts_end
                ex.bytes_out = rlen
                if rbody is None:  # streamed past the hooks (another addon's stream): kept by no one, and said
                    if rlen is None:  # (a size: a gathered body given up, whose note says why)
                        anomalies.append("response_body_not_stored")
                elif rlen > len(rbody):
                    anomalies.append(f"response_body_too_large:{rlen}")
                else:
                    ex.response_body = _body(rbody, ex.response_headers, self.max_body, "response", anomalies)
        if err is not None:
            ex.error, ts_err = err
            ex.ts_end = ex.ts_end or ts_err
        return ex

    def _extract_whole(self, ex: HttpExchange) -> Extraction | None:
        extractor = Extractor.start(ex, self.policy, redaction=self.redaction)
        return extractor.finish() if extractor is not None else None

    def _open(self, fid: str, req: tuple[Any, ...], resp_head: tuple[Any, ...]) -> None:
        ex = self._exchange(fid, req, resp_head, None)
        reverse = _reverse_get(req, ex)
        ex.sse_events = []  # tapped live: events go to the extractor as they come and are not kept
        try:
            extractor = Extractor.start(ex, self.policy, redaction=self.redaction)
        except Exception as e:
            error = e
            self._submit(ex, lambda: failed_extraction(ex, error, self.redaction), reverse)
            return
        if extractor is None:
            if len(self.others) >= MAX_OTHER_STREAMS:
                del self.others[next(iter(self.others))]
            self.others[fid] = None
            return
        content = grpc_content(ex.response_headers.get("content-type"))
        if content is not None and extractor.req.binding == "grpc":
            ex.sse_events = None
            ex.grpc_frames = []  # none kept: each goes to the extractor as it comes
            grpc = GrpcLive(content, self.max_body, ex.response_headers.get("grpc-encoding") or "")
            self.streams[fid] = _Stream(ex, extractor, SseParser(self.max_body), None, grpc=grpc, reverse=reverse)
            return
        inflater = None
        failed = None
        ce = ", ".join(ex.response_headers.get_all("content-encoding"))
        try:
            inflater = Inflater(ce, None) if ce else None
        except ValueError as e:  # noted on the row (the exchange's own anomalies were copied at `start`)
            failed = "unsupported content-encoding"
            extractor.note(f"sse_not_parsed:{e}"[:200])
        self.streams[fid] = _Stream(ex, extractor, SseParser(self.max_body), inflater, failed=failed, reverse=reverse)

    def _chunk(self, stream: _Stream, received: float, chunk: bytes) -> None:
        self._parse(stream, received, chunk)
        rows = stream.extractor.out.messages
        stream.row_bytes += sum(map(row_bytes, rows[stream.counted :]))
        stream.counted = len(rows)
        self._count(stream)
        if self.held > MAX_HELD:
            self._shed()

    def _count(self, stream: _Stream) -> None:
        parser = stream.grpc if stream.grpc is not None else stream.parser
        held = parser.held + stream.row_bytes + (stream.inflater.held if stream.inflater is not None else 0)
        self.held += held - stream.held
        stream.held = held

    def _body_end(self, fid: str, resp_end: tuple[Any, ...], err: Any, lost: bool | str, size: int) -> None:
        body = self.bodies.pop(fid)
        self.held -= body.held
        resp, note = body.response(resp_end, size, lost)
        ex = self._exchange(fid, body.req, resp, err)
        if note:
            ex.anomalies.append(note)
        if resp_end[1]:
            ex.response_trailers = _headers(resp_end[1])
        self._submit(ex, lambda: self._extract_whole(ex), _reverse_get(body.req, ex))

    def _shed(self) -> None:
        """Over MAX_HELD, the streams holding most give up, until they hold half of it together: first the
        event they are gathering (dropped), then the texts of the rows they have made so far (each such row
        keeps its other columns and says so), then, if its decoder's window is what holds the memory
        (compressed SSE), the decoding of the rest. The streams go on; every row says what it lost."""
        for stream in sorted(self.streams.values(), key=lambda s: s.held, reverse=True):
            if self.held <= MAX_HELD // 2 or stream.held == 0:
                break
            parser = stream.grpc if stream.grpc is not None else stream.parser
            if parser.held:
                kind = "grpc_message" if stream.grpc is not None else "sse_event"
                stream.extractor.note(f"{kind}_not_parsed:worker_buffer_full:{parser.held}")
                parser.shed()
                self._count(stream)
            rows = stream.extractor.out.messages
            if stream.kept_upto < len(rows) and self.held > MAX_HELD // 2:  # each row gives up its texts once
                stream.row_bytes -= sum(map(drop_texts, rows[stream.kept_upto :]))
                stream.kept_upto = len(rows)
                self._count(stream)
            if stream.inflater is not None and stream.inflater.held and self.held > MAX_HELD // 2:
                stream.extractor.note(f"sse_not_parsed:worker_buffer_full:{stream.inflater.held}")
                stream.inflater, stream.failed = None, "worker buffer full"
                self._count(stream)
        for body in sorted(self.bodies.values(), key=lambda b: b.held, reverse=True):
            if self.held <= MAX_HELD // 2 or not body.held:
                break
            self.held -= body.shed()

    def _parse(self, stream: _Stream, received: float, chunk: bytes) -> None:
        stream.bytes += len(chunk)
        if stream.failed is not None:
            return
        if stream.grpc is not None:  # each message parsed as it comes and not kept; past max_events, counted
            stream.grpc.feed(stream.extractor, chunk, received, self.max_events)
            return
        try:
            pieces = stream.inflater.pieces(chunk) if stream.inflater is not None else (chunk,)
            for piece in pieces:
                for ev in stream.parser.feed(piece, received):
                    stream.extractor.event(ev)
                if not stream.parser.count_only and stream.parser.dispatched >= self.max_events:
                    stream.parser.count_only = True
                    stream.extractor.note(f"sse_events_not_parsed_past:{self.max_events}")
        except TooLarge:
            stream.failed = "too large"
        except Exception as e:  # corrupt compression, or a bug: the stream stays recorded, unparsed from here
            stream.failed = f"{type(e).__name__}: {e}"
            stream.extractor.note(f"sse_parse_failed:{stream.failed}"[:200])

    def _close(self, fid: str, resp_end: tuple[Any, ...], err: Any, lost: bool | str = False) -> None:
        stream = self.streams.pop(fid, None)
        if stream is not None:
            self.held -= stream.held
        if stream is None:
            if self.others.pop(fid, 0) is not None:  # not a stream this worker saw open
                self.lost_streams += 1  # opened before this worker started (a restart): nothing to attach it to
            return
        ex = stream.ex
        if lost:  # the proxy could not hand on every chunk (worker behind): what came is parsed, no more
            stream.extractor.note(incomplete(lost))
            stream.failed = stream.failed or "recorder backlog"
        ex.ts_end, trailers = resp_end
        if trailers:
            ex.response_trailers = _headers(trailers)
        ex.bytes_out = stream.bytes
        if err is not None:
            ex.error, ts_err = err
            ex.ts_end = ex.ts_end or ts_err
        if stream.grpc is not None:
            stream.grpc.close(stream.extractor, ex.ts_end, self.max_events)
        partial = stream.failed is not None or (ex.error is not None and stream.parser.pending)
        if stream.failed is None and ex.error is None and stream.grpc is None:
            try:  # a clean end: a last event without its blank line still counts
                for ev in stream.parser.close(ex.ts_end):
                    stream.extractor.event(ev)
            except Exception as e:
                stream.failed = f"{type(e).__name__}: {e}"
        ex.sse_comments = stream.parser.comments
        extractor = stream.extractor
        extractor.n_events = max(extractor.n_events, stream.parser.dispatched)

        def finish() -> Extraction | None:
            return extractor.finish(partial=partial)

        self._submit(ex, finish, stream.reverse)

    def _submit(self, ex: HttpExchange, job: Any, reverse: bool = False) -> None:
        """`reverse`: a GET captured by a reverse-mode proxy. It travels with the job: nothing is kept per flow
        outside the stream table, which a stream's end empties."""

        def safe() -> Extraction | None:
            try:
                ext = job()
            except Exception as e:  # a bug or an input we did not foresee: the exchange is kept, flagged
                self.failures += 1
                if self.failures == 1:
                    log.exception("converse-tap: extraction failed on %s (logged once)", ex.id)
                return failed_extraction(ex, e, self.redaction)
            if reverse and ext is not None and ext.agent_cards:
                self.bypass(ext)
            return ext

        self.writer.write(safe)

    def _on_rows(self, ext: Extraction) -> None:
        self.replies += ext.exchange["replies"]
        self.anomalies += len(ext.exchange["anomalies"]) + sum(len(m["anomalies"]) for m in ext.messages)
        if self.live is not None:  # before the summary line: a line seen means the metrics count it
            self.live.on_rows(ext)
        for line in summary_lines(ext, self.summary):
            print(line, file=sys.stderr, flush=True)

    def _health(self) -> dict[str, float]:
        s = self.writer.stats
        out: dict[str, float] = {f"rows_journaled/{t}": n for t, n in s.rows_written.items()}
        out.update({f"rows_written/{t}": n for t, n in s.rows_rolled.items()})
        out.update(
            rows_lost=s.rows_dropped,
            flush_failures=s.flush_failures,
            extraction_failures=self.failures + s.extract_failures,
            streams_lost=self.lost_streams,
        )
        return out

    # -- end ---------------------------------------------------------------------------------------------
    def close(self) -> None:
        stopped = ("recorder stopped before the stream ended", time.time())
        for fid in list(self.streams):
            self._close(fid, (None, None), stopped)
        for fid, body in list(self.bodies.items()):
            self._body_end(fid, (None, None), stopped, False, body.held)
        self.writer.close()
        exported = self.live.close() if self.live is not None else ""
        s = self.writer.stats
        print(
            f"converse-tap: {s.exchanges} A2A exchanges, {self.replies} envelope sightings (replies as the report "
            f"counts them need `converse-tap report`), {self.anomalies} anomalies, "
            f"rows written "
            f"{s.rows_written}, {s.rows_dropped} dropped, {self.failures} extraction failures"
            + (f"; {exported}" if exported else ""),
            file=sys.stderr,
            flush=True,
        )


def _reverse_get(req: tuple[Any, ...], ex: HttpExchange) -> bool:
    return bool(req[-1]) and ex.method == "GET"
