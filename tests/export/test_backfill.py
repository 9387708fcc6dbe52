"""`converse-tap export otlp` of the golden dataset: exactly its exchanges, as spans with their own times,
decoded from the exporter's real protobuf by a receiver on loopback."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from converse_tap.a2a.traceparent import own_trace_id, span_id_for
from converse_tap.cli import cli
from converse_tap.store.reader import read_table
from tests.export.collector import Collector, attrs
from tests.golden.sample import build_sample


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("golden")
    build_sample(out)
    return out


def _rows(root: Path, table: str) -> list[dict]:
    t = read_table(root, table)
    return t.drop_columns(["date"]).to_pylist()


def test_export_otlp_sends_exactly_the_datasets_exchanges(golden: Path) -> None:
    exchanges = {r["exchange_id"]: r for r in _rows(golden, "exchanges")}
    messages = _rows(golden, "messages")
    with Collector() as col:
        r = CliRunner().invoke(cli, ["export", "otlp", str(golden), "--endpoint", col.url])
        assert r.exit_code == 0, r.output
        assert f"{len(exchanges)} of {len(exchanges)} exchange spans accepted" in r.stderr
    assert set(col.paths) == {"/v1/traces"}
    spans = [s for _res, s in col.spans()]
    assert len(spans) == len(exchanges) == 9
    by_span_id = {s.span_id.hex(): s for s in spans}
    assert len(by_span_id) == len(spans)
    for row in exchanges.values():
        span = by_span_id[row["span_id"]]
        a = attrs(span.attributes)
        assert span.trace_id.hex() == row["trace_id"] and span.parent_span_id == b""
        assert span.name == a["a2a.method.name"] == row["method"]
        assert a["converse.exchange.id"] == row["exchange_id"]
        assert span.start_time_unix_nano == int(row["ts_start"].timestamp() * 1e6) * 1000
        assert a.get("gen_ai.conversation.id") == row["context_id"]
        assert a.get("http.response.status_code") == row["status_code"]
        replies = [e for e in span.events if e.name == "converse.reply"]
        assert len(replies) == row["replies"]
        mine = [m for m in messages if m["exchange_id"] == row["exchange_id"] and m["has_envelope"]]
        for ev, m in zip(replies, mine, strict=True):
            ea = attrs(ev.attributes)
            assert ea["a2a.message.id"] == m["message_id"]
            assert ea.get("converse.author") == m["author"]
            assert ea.get("converse.coverage") == m["coverage"]
            assert ea.get("converse.routine.status") == m["routine_status"]
            assert ea.get("converse.invocation.outcome") == m["invocation_outcome"]
            assert ev.time_unix_nano == int(m["ts"].timestamp() * 1e6) * 1000
        verdicts = [attrs(e.attributes) for e in span.events if e.name == "gen_ai.evaluation.result"]
        assert [v["gen_ai.evaluation.score.label"] for v in verdicts] == [
            m["coverage"] for m in mine if m["coverage_availability"] == "assessed"
        ]
    # the card the dataset recorded names its agent (here only the card fetch: the card lists no interface)
    cards = [r for r in _rows(golden, "agent_cards") if r["name"]]
    named = {
        exchanges[attrs(s.attributes)["converse.exchange.id"]]["agent"]: attrs(s.attributes).get("gen_ai.agent.name")
        for s in spans
    }
    assert cards and named[cards[0]["agent"]] == cards[0]["name"] == "Support"
    # the text the dataset kept is not sent unless asked for
    texts = [m["text"] for m in messages if m["text"]]
    assert texts and not any(t.encode() in b for t in texts for b in col.bodies)


def test_export_otlp_window_and_text_opt_in(golden: Path) -> None:
    with Collector() as col:
        r = CliRunner().invoke(
            cli, ["export", "otlp", str(golden), "--endpoint", col.url, "--agent", "nobody", "--text"]
        )
        assert r.exit_code == 2 and "never saw this agent" in r.stderr and not col.requests
        r = CliRunner().invoke(
            cli, ["export", "otlp", str(golden), "--endpoint", col.url, "--since", "2999-01-01", "--text"]
        )
        assert r.exit_code == 2 and "no exchanges" in r.stderr and not col.requests
        r = CliRunner().invoke(cli, ["export", "otlp", str(golden), "--endpoint", col.url, "--text"])
        assert r.exit_code == 0, r.output
    texts = {
        a["converse.text"] for _res, s in col.spans() for e in s.events if "converse.text" in (a := attrs(e.attributes))
    }
    assert texts and texts <= {m["text"] for m in _rows(golden, "messages")}


def test_export_otlp_to_a_failing_collector_exits_1(golden: Path) -> None:
    with Collector("fail") as col:
        endpoint = col.url.replace("http://", "http://tap:COLLECTORPW@")  # (sent as basic auth, never shown)
        r = CliRunner().invoke(cli, ["export", "otlp", str(golden), "--endpoint", endpoint])
    assert r.exit_code == 1 and "0 of 9 exchange spans accepted" in r.stderr and "Traceback" not in r.output
    assert col.requests  # it did try
    assert col.url.removeprefix("http://") in r.stderr and "COLLECTORPW" not in r.stderr + r.stdout


@pytest.mark.parametrize(
    ("endpoint", "message"),
    [("localhost:4318", "not an http(s) URL"), ("http://[::1", "is not a URL (Invalid IPv6 URL)")],  # (a traceback)
)
def test_export_otlp_bad_endpoint_is_a_usage_error(golden: Path, endpoint: str, message: str) -> None:
    r = CliRunner().invoke(cli, ["export", "otlp", str(golden), "--endpoint", endpoint])
    assert r.exit_code == 2 and message in r.stderr, r.output
    assert isinstance(r.exception, SystemExit)  # not a ValueError from urlsplit


def test_a_version_1_dataset_backfills_with_the_ids_a_version_2_recorder_would_store() -> None:
    v1 = Path(__file__).parents[1] / "fixtures" / "dataset-v1"
    rows = _rows(v1, "exchanges")
    assert rows and all(r["span_id"] is None and r["trace_id"] is None for r in rows)
    with Collector() as col:
        r = CliRunner().invoke(cli, ["export", "otlp", str(v1), "--endpoint", col.url])
        assert r.exit_code == 0, r.output
    sent = {s.span_id.hex(): s.trace_id.hex() for _res, s in col.spans()}
    assert sent == {span_id_for(r["exchange_id"]): own_trace_id(r["exchange_id"]) for r in rows}
