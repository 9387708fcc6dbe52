"""The extractor under hostile traffic: every exchange of `hostile.cases` through the recording worker (the
records the proxy sends it, streams split where hypothesis chooses) and through ingest's `extract`, then the
invariants: nothing raises (the worker's safety net stays unused), every row fits the store's Arrow schema and
goes into a Parquet file, no planted credential is in any column of any row, a malformed input carries an
anomaly. Deterministic (`derandomize=True`)."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings

from converse_tap.a2a.extract import Extraction, extract
from converse_tap.a2a.redact import Redaction, TextPolicy
from converse_tap.addon.worker import Worker
from converse_tap.store.batches import TS_COLUMNS, mend_rows, to_micros
from converse_tap.store.schema import TABLES
from tests.fuzz.hostile import MARK, OPERATOR_PATTERNS, Case, cases, worker_config

# columns that hold URLs or URIs: a stored one must be UTF-8 as it is (never left for the writer to mend)
URL_COLUMNS = {"url", "agent_url", "agent", "mcp_url", "mcp_server_card_url"}
# anomalies that mean an exception was caught: the harness is to find them
CAUGHT = ("extraction_failed:", "grpc_message_failed:", "sse_parse_failed:")


class _Capture:
    """The worker's writer, keeping what it is handed (the jobs run as the real writer runs them)."""

    def __init__(self) -> None:
        self.out: list[Extraction] = []

    def write(self, job: Any) -> None:
        ext = job() if callable(job) else job
        if ext is not None:
            self.out.append(ext)

    def close(self) -> None:
        pass


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory) -> Worker:
    root: Path = tmp_path_factory.mktemp("fuzz")
    w = Worker(worker_config(str(root)))
    w.writer.close()
    w.writer = _Capture()  # type: ignore[assignment]
    return w


def _rows(ext: Extraction) -> dict[str, list[dict[str, Any]]]:
    return {"exchanges": [ext.exchange], "messages": ext.messages, "agent_cards": ext.agent_cards}


def check(ext: Extraction, case: Case, sink: dict[str, list[pa.RecordBatch]]) -> None:
    tables = _rows(ext)
    every = repr(tables)
    assert MARK not in every, [k for t in tables.values() for r in t for k, v in r.items() if MARK in repr(v)]
    caught = [
        a
        for t in tables.values()
        for r in t
        for a in r.get("anomalies") or []
        if a.startswith(CAUGHT) and not a.startswith("sse_parse_failed:ValueError: cannot decode")
    ]
    assert not caught
    for table, rows in tables.items():
        for r in rows:
            for column in URL_COLUMNS & r.keys():
                if isinstance(r[column], str):
                    r[column].encode("utf-8")
            for itf in r.get("interfaces") or []:
                if itf.get("url"):
                    itf["url"].encode("utf-8")
            uris = [*(r.get("extensions") or []), *(r.get("extensions_requested") or [])]
            uris += [*(r.get("extensions_echoed") or []), *(c["source_url"] or "" for c in r.get("citations") or [])]
            for uri in uris:
                uri.encode("utf-8")  # extension URIs and citation URLs are carried as every stored URL is
        copies = [dict(r, anomalies=list(r.get("anomalies") or [])) for r in rows]
        to_micros(copies, TS_COLUMNS[table])
        kept = mend_rows(copies, TABLES[table])
        assert len(kept) == len(copies)  # a row the writer would drop
        if kept:
            sink[table].append(pa.RecordBatch.from_pylist(kept, schema=TABLES[table]))
    if "url" in case.malformed:
        assert any(a.startswith(("url_malformed:", "url_not_utf8")) for a in ext.exchange["anomalies"])
    if "exchange" in case.malformed and case.status == 200:
        assert ext.exchange["anomalies"], "a malformed response without an anomaly"
    if "card" in case.malformed and case.status == 200:
        assert all(c["anomalies"] for c in ext.agent_cards), "a card field of the wrong type without an anomaly"
    if "message" in case.malformed and case.status == 200:
        replies = [m for m in ext.messages if m["has_envelope"]]
        assert all(m["anomalies"] for m in replies), "an envelope field of the wrong type without an anomaly"


SINK: dict[str, list[pa.RecordBatch]] = {t: [] for t in TABLES}
REDACTION = Redaction.from_patterns(OPERATOR_PATTERNS)


# what a live stream and the same exchange read whole from a capture must agree on
SAME = (
    "url",
    "agent",
    "agent_url",
    "agent_id",
    "binding",
    "method",
    "sse_events",
    "messages",
    "replies",
    "error_code",
    "error_message",
    "extensions_requested",
    "extensions_echoed",
    "task_state",
    "context_id",
)


@settings(derandomize=True, max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(case=cases())
def test_hostile_exchanges_through_the_worker_and_ingest(worker: Worker, case: Case) -> None:
    """The worker (the proxy's records; a stream in the chunks hypothesis chose) and ingest (the exchange read
    whole from a capture) each make rows that pass `check`; and where the capture has the same URL (no userinfo,
    which mitmproxy never forwards), the two make the same exchange row, a stream cut by an error included."""
    capture: _Capture = worker.writer  # type: ignore[assignment]
    capture.out.clear()
    failures = worker.failures
    for record in case.records("f"):
        worker.handle(record)
    assert worker.failures == failures
    assert not worker.streams
    for ext in capture.out:
        check(ext, case, SINK)
    ingested = extract(case.exchange("f"), TextPolicy(), redaction=REDACTION)
    if ingested is not None:
        check(ingested, case, SINK)
    if case.userinfo:
        return
    assert (ingested is None) == (not capture.out)
    if ingested is not None:
        live = capture.out[0].exchange
        assert {k: live[k] for k in SAME} == {k: ingested.exchange[k] for k in SAME}


def test_every_row_the_fuzzers_made_goes_into_parquet() -> None:
    """Runs after the one above (file order): what it made is written as Parquet files and read back."""
    assert any(SINK.values())
    for table, batches in SINK.items():
        if not batches:
            continue
        buf = io.BytesIO()
        pq.write_table(pa.Table.from_batches(batches, schema=TABLES[table]), buf)
        assert pq.read_table(io.BytesIO(buf.getvalue())).num_rows == sum(b.num_rows for b in batches)
