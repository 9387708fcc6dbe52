"""A coverage-guided driver for the same invariants as test_wire_fuzz.py, for long runs (not run by pytest).

    pip install atheris
    python -m tests.fuzz.atheris_driver -atheris_runs=200000 /tmp/corpus

Each input is cut into a URL, a request body, a response body, a content type and where a stream's chunks
end, and goes through the recording worker as the proxy's records and through ingest's `extract`. A crash
file atheris writes (crash-*) is never committed: turn it into a regression test under tests/ and a fix.
"""

from __future__ import annotations

import sys
import tempfile
from typing import Any

from converse_tap.a2a.extract import extract
from converse_tap.a2a.redact import Redaction, TextPolicy
from converse_tap.addon.worker import Worker
from converse_tap.store.schema import TABLES
from tests.fuzz.hostile import MARK, OPERATOR_PATTERNS, Case, worker_config
from tests.fuzz.test_wire_fuzz import _Capture, check

CONTENT_TYPES = ["application/json", "text/event-stream", "application/grpc", "application/a2a+json", ""]
PATHS = [
    "/a2a/jsonrpc",
    "/message:send",
    "/message:stream",
    "/.well-known/agent-card.json",
    "/lf.a2a.v1.A2AService/SendMessage",
    "/a2a.v1.A2AService/SendStreamingMessage",
    "/v1/tasks/t1:cancel",
]


def _case(data: bytes) -> Case:
    import atheris

    fdp = atheris.FuzzedDataProvider(data)
    path = PATHS[fdp.ConsumeIntInRange(0, len(PATHS) - 1)]
    url_tail = fdp.ConsumeUnicodeNoSurrogates(fdp.ConsumeIntInRange(0, 64))
    host = fdp.ConsumeUnicode(fdp.ConsumeIntInRange(0, 24)) or "agent.test"
    ctype = CONTENT_TYPES[fdp.ConsumeIntInRange(0, len(CONTENT_TYPES) - 1)]
    body = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 4096))
    cuts = [fdp.ConsumeIntInRange(0, 1 << 16) for _ in range(fdp.ConsumeIntInRange(0, 8))]
    reply = fdp.ConsumeBytes(1 << 20)
    streamed = ctype in ("text/event-stream", "application/grpc")
    chunks = None
    if streamed:
        points = sorted({c % (len(reply) + 1) for c in cuts})
        chunks = [reply[a:b] for a, b in zip([0, *points], [*points, len(reply)], strict=True)]
    headers = [
        ("content-type", "application/grpc" if "A2AService" in path else "application/json"),
        ("authorization", f"Bearer {MARK}h1"),
        ("a2a-extensions", f"https://e.test/?token={MARK}e1"),
    ]
    return Case(
        method="GET" if "well-known" in path else "POST",
        scheme="https" if "A2AService" in path else "http",
        host=host,
        port=443,
        path=f"{path}?token={MARK}q1&{url_tail}",
        headers=headers,
        body=body,
        status=200,
        response_headers=[("content-type", ctype)],
        response_body=reply,
        decoded_body=reply,
        chunks=chunks,
        userinfo=f"user:{MARK}u1",
    )


def main() -> None:
    import atheris

    worker = Worker(worker_config(tempfile.mkdtemp(prefix="converse-tap-atheris-")))
    worker.writer.close()
    capture = _Capture()
    worker.writer = capture  # type: ignore[assignment]
    redaction = Redaction.from_patterns(OPERATOR_PATTERNS)
    sink: dict[str, list[Any]] = {t: [] for t in TABLES}

    def one(data: bytes) -> None:
        case = _case(data)
        capture.out.clear()
        failures = worker.failures
        for record in case.records("f"):
            worker.handle(record)
        assert worker.failures == failures, "the worker's safety net caught an exception"
        for ext in capture.out:
            check(ext, case, sink)
        ext = extract(case.exchange("f"), TextPolicy(), redaction=redaction)
        if ext is not None:
            check(ext, case, sink)
        for batches in sink.values():
            batches.clear()

    atheris.instrument_all()  # coverage of everything loaded: the extractor, the worker, the parsers
    atheris.Setup(sys.argv, one)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
