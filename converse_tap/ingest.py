"""Offline ingest: mitmproxy flow files and HAR files through the same extractor, into the same dataset."""

from __future__ import annotations

import json
import multiprocessing
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from mitmproxy import http
from mitmproxy.io import compat, har, tnetstring

from .a2a.exchange import HttpExchange
from .a2a.extract import extract
from .a2a.redact import NO_OPERATOR_PATTERNS, Redaction, TextPolicy
from .addon.flows import DEFAULT_MAX_BODY, exchange_from_flow, exchange_from_state
from .store.writer import DatasetWriter


class IngestError(Exception):
    """A capture file that cannot be read to its end. Everything before `position` was kept."""

    def __init__(self, path: Path, position: str, reason: str) -> None:
        super().__init__(f"{path}: {position}: {reason}")
        self.path, self.position, self.reason = path, position, reason


@dataclass
class IngestResult:
    files: int = 0
    flows: int = 0
    exchanges: int = 0
    errors: list[IngestError] = field(default_factory=list)


def _is_har(path: Path) -> bool:
    with open(path, "rb") as f:
        head = f.read(64).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith(b"{")


def read_flow_file(
    path: Path, max_body: int = DEFAULT_MAX_BODY, start: int = 0, end: int | None = None, before: int = 0
) -> Iterator[HttpExchange]:
    """The HTTP exchanges of a `mitmdump -w` file (or of its records in bytes [start, end), `before` flows
    into the file); a damaged file raises IngestError after the flows before it.

    Each record is read with mitmproxy's own tnetstring reader and migrated from older mitmproxy versions by
    its `compat` module, as `io.FlowReader` does, but the exchange is taken straight from the saved state:
    building `HTTPFlow` objects was a third of the time ingest took (docs/performance.md).
    """
    with open(path, "rb") as f:
        f.seek(start)
        count, offset = before, start
        while end is None or offset < end:
            try:
                state = tnetstring.load(f)
            except ValueError as e:
                if str(e) == "not a tnetstring: empty file":
                    return  # the end of the file
                raise _damaged(path, offset, count, f"{e}; the file looks truncated or corrupt") from e
            except (TypeError, IndexError, KeyError) as e:  # tnetstring surprises on damaged input
                raise _damaged(path, offset, count, f"unreadable flow: {e}") from e
            try:
                if not isinstance(state, dict):
                    raise ValueError(f"a {type(state).__name__}, not a flow")
                state = cast(dict[str, Any], compat.migrate_flow(state))  # a flow state has str keys
                exchange = exchange_from_state(state, max_body, "ingest") if state.get("type") == "http" else None
            except (ValueError, TypeError, KeyError, IndexError, AttributeError) as e:
                raise _damaged(path, offset, count, f"unreadable flow ({type(e).__name__}: {e})") from e
            count += 1
            offset = f.tell()
            if exchange is not None:
                yield exchange


def _damaged(path: Path, offset: int, count: int, reason: str) -> IngestError:
    return IngestError(path, f"byte {offset} (after flow {count})", reason)


def read_har(path: Path, max_body: int = DEFAULT_MAX_BODY) -> Iterator[HttpExchange]:
    try:
        doc = json.loads(path.read_bytes().decode("utf-8-sig"))
    except UnicodeDecodeError as e:
        raise IngestError(path, f"byte {e.start}", "not UTF-8 text, so not a HAR file") from e
    except json.JSONDecodeError as e:
        raise IngestError(path, f"line {e.lineno} column {e.colno}", f"invalid JSON ({e.msg})") from e
    entries = doc.get("log", {}).get("entries") if isinstance(doc, dict) else None
    if not isinstance(entries, list):
        raise IngestError(path, "log.entries", "missing; this is not a HAR file")
    for i, entry in enumerate(entries):
        try:
            flow = har.request_to_flow(entry)
            _har_times(flow, entry)
        except Exception as e:  # the library raises whatever the malformed entry provokes
            raise IngestError(path, f"log.entries[{i}]", f"malformed entry ({type(e).__name__}: {e})") from e
        yield exchange_from_flow(flow, max_body=max_body, source="ingest")


def _har_times(flow: http.HTTPFlow, entry: dict[str, Any]) -> None:
    start = datetime.fromisoformat(entry["startedDateTime"].replace("Z", "+00:00")).timestamp()
    timings = entry.get("timings") or {}
    before = sum(max(0.0, float(timings.get(k) or 0)) for k in ("blocked", "dns", "connect", "send", "wait"))
    flow.request.timestamp_start = start
    flow.request.timestamp_end = start
    if flow.response is not None:
        flow.response.timestamp_start = start + before / 1000.0
        flow.response.timestamp_end = start + float(entry.get("time") or 0) / 1000.0


PART_BYTES = 8 * 1024 * 1024  # flow files larger than this are split into parts ingested in parallel


@dataclass(frozen=True)
class Part:
    """A run of whole records of a flow file (or a whole HAR file): bytes [start, end), `before` flows ahead."""

    path: Path
    start: int = 0
    end: int | None = None
    before: int = 0
    har: bool = False


def split_flow_file(path: Path, part_bytes: int = PART_BYTES) -> list[Part]:
    """Cut a flow file at record boundaries into parts of about `part_bytes`, reading only the records'
    length prefixes. Where the prefixes stop making sense, the rest is one last part, whose reader reports
    the damage at its exact position."""
    size = path.stat().st_size
    parts: list[Part] = []
    start = offset = count = before = 0
    with open(path, "rb") as f:
        while offset < size:
            f.seek(offset)
            head = f.read(16)
            colon = head.find(b":")
            if colon <= 0 or not head[:colon].isdigit():
                break
            offset += colon + 1 + int(head[:colon]) + 1
            count += 1
            if offset - start >= part_bytes:
                parts.append(Part(path, start, offset, before))
                start, before = offset, count
    if start < size or not parts:
        parts.append(Part(path, start, None, before))
    return parts


def _read_part(part: Part, max_body: int) -> Iterator[HttpExchange]:
    if part.har:
        yield from read_har(part.path, max_body)
    else:
        yield from read_flow_file(part.path, max_body, part.start, part.end, part.before)


def _ingest_parts(
    parts: list[Part], out: Path, policy: TextPolicy, max_body: int, progress: Any, redaction: Redaction
) -> IngestResult:
    """One writer for these parts, in this process."""
    result = IngestResult()
    writer = DatasetWriter(out, flush_interval=5.0, rollover_rows=1_000_000, rollover_seconds=3600)
    writer.start(thread=False)
    try:
        for part in parts:
            try:
                for ex in _read_part(part, max_body):
                    result.flows += 1
                    extraction = extract(ex, policy, redaction=redaction)
                    if extraction is not None:
                        result.exchanges += 1
                        writer.write(extraction)
                    if progress is not None and result.flows % 1000 == 0:
                        progress(part.path, result.flows)
            except IngestError as e:
                result.errors.append(e)
    finally:
        writer.close()
    return result


def _ingest_in_worker(
    part: Part, out: Path, policy: TextPolicy, max_body: int, redaction: Redaction
) -> tuple[int, int, list[tuple[Path, str, str]]]:
    result = _ingest_parts([part], out, policy, max_body, None, redaction)
    return result.flows, result.exchanges, [(e.path, e.position, e.reason) for e in result.errors]


def ingest(
    paths: list[Path],
    out: Path,
    policy: TextPolicy,
    max_body: int = DEFAULT_MAX_BODY,
    progress: Callable[[Path, int], None] | None = None,
    jobs: int = 1,
    part_bytes: int = PART_BYTES,
    redaction: Redaction = NO_OPERATOR_PATTERNS,
) -> IngestResult:
    """Extract every file into `out`. A damaged file is reported and the rest still ingested.

    With `jobs` > 1, flow files are cut into parts of about `part_bytes` and the parts ingested by that many
    processes, each with its own writer into the same dataset (writers share a dataset safely); below one
    part's worth of input everything stays in this process. `redaction` carries the operator's own patterns
    (`Redaction.from_patterns`); the built-in credential shapes are always redacted.
    """
    parts: list[Part] = []
    for path in paths:
        if _is_har(path):
            parts.append(Part(path, har=True))
        else:  # cut only when there are processes to share the parts
            parts.extend(split_flow_file(path, part_bytes) if jobs > 1 else [Part(path)])
    if jobs <= 1 or len(parts) <= 1:
        result = _ingest_parts(parts, out, policy, max_body, progress, redaction)
        result.files = len(paths)
        return result
    result = IngestResult(files=len(paths))
    context = multiprocessing.get_context("spawn")  # no fork of a process that may hold threads
    with ProcessPoolExecutor(max_workers=jobs, mp_context=context) as pool:
        futures = [pool.submit(_ingest_in_worker, part, out, policy, max_body, redaction) for part in parts]
        for part, future in zip(parts, futures, strict=True):
            flows, exchanges, errors = future.result()
            result.flows += flows
            result.exchanges += exchanges
            result.errors.extend(IngestError(*e) for e in errors)
            if progress is not None:
                progress(part.path, result.flows)
    return result
