"""One logical conversation, every binding: the message rows (and the exchange's summary) must not depend on which
binding and dialect carried it.

A logical exchange (bindings_model.py: a user message; an agent reply that is a Message, a Task with
status.message, history and artifacts, or a stream, opened or not by the Task, of status and artifact updates
ending in a terminal state or a Message; text, data and file parts; converse envelopes with values at their
edges; ids, metadata and extensions absent, empty or null) is encoded faithfully in JSON-RPC, HTTP+JSON and gRPC
(proto, `+json`, gRPC-Web, gRPC-Web text), each in v1.0 and v0.3, and read by `extract`; each stream is also fed
to the recording worker in chunks. The gRPC messages are the a2a-sdk's own protobuf classes, filled from the
ProtoJSON of the v1.0 or v0.3 shape.

"Faithful" for a `google.protobuf.Struct` (message metadata, where the envelope rides): a Struct holds every
number as a double, so the generated envelopes' numbers are those a double carries exactly (integers within
±2^53, and binary fractions); an integer a JSON binding sends is read back from a Struct as that integer (see
`grpc_codecs.message_to_dict`). What no binding can carry alike is left out of the generator and pinned below: an
integer past 2^53 (a Struct rounds it; it stays a float), and a JSON `1.0` (kept as written by the JSON bindings;
a Struct cannot tell it from `1`, and gRPC reads the integer). A JSON null in a string field is proto3's unset
field: the generator writes nulls, and the rows agree (an empty or null id, name or metadata is none).

Columns that name the binding differ by design and are not compared: `binding`, `dialect`, `location` (where in
the document the object sat: `result.message`, `body.task.history[0]`, `result.history[0]`…), `agent_url` (a
JSON-RPC endpoint's URL keeps its path: `https://agent.test/`, the others `https://agent.test`) and, on the
exchange, everything but EXCHANGE_COLUMNS (`method_raw`, `url`, `jsonrpc_id`, `a2a_version`, `content_type`,
`http_version`, `bytes_*`, `streamed`, `sse_events`, times). Every other message column is compared, anomalies
included.
"""

from __future__ import annotations

import json
import tempfile
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from converse_tap.a2a.exchange import HttpExchange
from converse_tap.a2a.extract import Extraction, extract
from converse_tap.a2a.redact import TextPolicy
from converse_tap.addon.worker import Worker
from tests.a2a.bindings_model import (
    BINDINGS,
    GRPC_FORMS,
    Art,
    Exchange,
    Msg,
    encode,
    exchanges,
)

# ---- the comparison ----------------------------------------------------------------------------------------------

BINDING_MESSAGE_COLUMNS = frozenset({"binding", "dialect", "location", "agent_url"})
EXCHANGE_COLUMNS = (
    "method",
    "task_id",
    "context_id",
    "task_state",
    "messages",
    "replies",
    "converse_requested",
    "converse_echoed",
    "complete",
    "error_code",
    "anomalies",
)


def comparable(out: Extraction) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    row = {k: out.exchange[k] for k in EXCHANGE_COLUMNS}
    rows = [{k: v for k, v in m.items() if k not in BINDING_MESSAGE_COLUMNS} for m in out.messages]
    return row, rows


def run(ex: Exchange, binding: str, dialect: str, ctype: str | None) -> Extraction:
    out = extract(encode(ex, binding, dialect, ctype), TextPolicy("keep", b""))
    assert out is not None, (binding, dialect, ctype)
    return out


@settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(exchanges())
def test_every_binding_gives_the_same_rows(ex: Exchange) -> None:
    reference = run(ex, "jsonrpc", "v1.0", None)
    want = comparable(reference)
    assert reference.exchange["binding"] == "jsonrpc" and reference.exchange["dialect"] == "v1.0"
    disagreements = []
    for binding, dialect, ctype in BINDINGS[1:]:
        out = run(ex, binding, dialect, ctype)
        assert (out.exchange["binding"], out.exchange["dialect"]) == (binding, dialect)
        got = comparable(out)
        where = (binding, dialect, ctype)
        if got[0] != want[0]:
            disagreements.append((where, {k: (got[0][k], want[0][k]) for k in want[0] if got[0][k] != want[0][k]}))
        if len(got[1]) != len(want[1]):
            disagreements.append((where, "rows", len(got[1]), len(want[1])))
            continue
        for g, w in zip(got[1], want[1], strict=True):
            diff = {k: (g[k], w[k]) for k in w if g[k] != w[k]}
            if diff:
                disagreements.append((where, w["seq"], diff))
    assert not disagreements, disagreements


# ---- the live path: the recording worker fed each stream in chunks -----------------------------------------------


class KeepingWorker(Worker):
    """The recording worker (real: its writer, its journal), its finished extractions also kept by exchange id."""

    def __init__(self, root: str) -> None:
        super().__init__(
            {
                "dir": root,
                "text": "keep",
                "salt": "",
                "flush_interval": 0.05,
                "rollover_rows": 1000,
                "rollover_seconds": 300.0,
                "max_body": 1 << 20,
                "max_events": 1000,
                "summary": "off",
            }
        )
        self.got: dict[str, Extraction] = {}

    def _on_rows(self, ext: Extraction) -> None:
        self.got[ext.exchange["exchange_id"]] = ext
        super()._on_rows(ext)

    def feed(self, fid: str, ex: HttpExchange, cut: int) -> None:
        """`ex` as the proxy hands it on: the request and response head, the body in two chunks cut at `cut`, the
        end with any HTTP/2 trailers."""
        parts = urls_parts(ex.url)
        fields = [(k.encode(), v.encode()) for k, v in ex.request_headers._items]
        body = ex.request_body or b""
        req = (b"POST", parts, ex.http_version.encode(), fields, body, len(body), 1.0, None, None, False)
        head = [(k.encode(), v.encode()) for k, v in ex.response_headers._items]
        self.handle(("o", fid, req, (200, head, 1.1)))
        data = ex.response_body or b""
        cut %= len(data) + 1
        for chunk in (data[:cut], data[cut:]):
            self.handle(("c", fid, 1.5, chunk))
        trailers = [(k.encode(), v.encode()) for k, v in ex.response_trailers._items] if ex.response_trailers else None
        self.handle(("e", fid, (1.5, trailers), None, False))


def urls_parts(url: str) -> tuple[bytes, str, int, bytes]:
    scheme, rest = url.split("://", 1)
    host, _, path = rest.partition("/")
    return scheme.encode(), host, 443, f"/{path}".encode()


LIVE_EXCHANGE = ("method", "task_id", "context_id", "task_state", "messages", "replies", "converse_requested")


@settings(
    max_examples=12,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(exchanges().filter(lambda ex: ex.kind == "stream"), st.integers(min_value=0, max_value=1 << 16))
def test_a_stream_recorded_live_gives_the_same_rows(ex: Exchange, cut: int) -> None:
    """Each streaming binding fed to the worker in two chunks, cut anywhere: the rows of the JSON-RPC v1.0 stream
    read whole (`ts` aside: the writer stores it in microseconds)."""
    reference = comparable(run(ex, "jsonrpc", "v1.0", None))
    with tempfile.TemporaryDirectory() as root:
        w = KeepingWorker(root)
        for i, (binding, dialect, ctype) in enumerate(BINDINGS):
            w.feed(f"live-{i}", encode(ex, binding, dialect, ctype), cut)
        w.close()
    assert len(w.got) == len(BINDINGS)
    for i, where in enumerate(BINDINGS):
        row, rows = comparable(w.got[f"live-{i}"])
        assert {k: row[k] for k in LIVE_EXCHANGE} == {k: reference[0][k] for k in LIVE_EXCHANGE}, where
        assert row["anomalies"] == reference[0]["anomalies"] and row["complete"] is True, where
        strip = [{k: v for k, v in r.items() if k not in ("ts", "exchange_id")} for r in rows]
        assert strip == [{k: v for k, v in r.items() if k not in ("ts", "exchange_id")} for r in reference[1]], where


# ---- what a Struct carries: pinned -------------------------------------------------------------------------------


def _numbers_reply(env: Any, binding: str, dialect: str = "v1.0", ctype: str | None = None) -> dict[str, Any]:
    ex = Exchange(Msg("u", [("text", "hi")]), "message", reply=Msg("a", [("text", "ok")], "c-1", envelope=env))
    return run(ex, binding, dialect, ctype).messages[1]


def test_a_structs_whole_numbers_are_the_integers_json_sent() -> None:
    """A Struct holds `5` as the double 5.0: read back as 5, the gRPC reply's columns and anomalies are the JSON
    binding's (json_format alone printed `5.0`: `author` "5.0", `=float`, `"n":5.0` in envelope_json)."""
    env = {"author": 5, "ownership": {"state": "ai_owned", "suppressed": 0}, "n": [2**53, -(2**53), 0.5]}
    want = _numbers_reply(env, "jsonrpc")
    for dialect in ("v1.0", "v0.3"):
        for ctype in GRPC_FORMS:
            got = _numbers_reply(env, "grpc", dialect, ctype)
            assert (got["author"], got["envelope_json"], got["anomalies"]) == (
                want["author"],
                want["envelope_json"],
                want["anomalies"],
            )
    assert want["author"] == "5" and "wrong_type:author=int" in want["anomalies"]
    assert json.loads(want["envelope_json"])["n"] == [2**53, -(2**53), 0.5]


def test_what_a_struct_cannot_carry_differs_by_design() -> None:
    """Inherent to the wire, not fixed: an integer past 2^53 reaches a Struct rounded (it stays a float: printing
    it as an integer would claim digits the double does not hold), and a JSON `1.0` is the Struct's `1`."""
    big = 2**60 + 1
    json_row = _numbers_reply({"author": "agent", "n": big, "f": 1.0}, "jsonrpc")
    grpc_row = _numbers_reply({"author": "agent", "n": big, "f": 1.0}, "grpc", "v1.0", "application/grpc")
    assert json.loads(json_row["envelope_json"]) == {"author": "agent", "n": big, "f": 1.0}
    assert '"f":1.0' in json_row["envelope_json"]
    got = json.loads(grpc_row["envelope_json"])
    assert got["n"] == float(big) and isinstance(got["n"], float) and got["n"] != big
    assert got["f"] == 1 and isinstance(got["f"], int) and '"f":1,' in grpc_row["envelope_json"]


def test_an_empty_artifact_name_is_none_as_an_empty_id_is() -> None:
    """Proto3 cannot send `name: ""` (it is the unset default): the JSON bindings' empty name is none too."""
    ex = Exchange(Msg("u", [("text", "hi")]), "task", artifacts=[Art("a-1", "", [("text", "x")])])
    for binding, dialect, ctype in BINDINGS:
        rows = run(ex, binding, dialect, ctype).messages
        assert [(r["object_kind"], r["artifact_name"]) for r in rows] == [("message", None), ("artifact", None)]
