import itertools
import json
from pathlib import Path

from click.testing import CliRunner
from mitmproxy import io

from converse_tap.a2a.redact import TextPolicy
from converse_tap.cli import cli
from converse_tap.ingest import ingest
from converse_tap.store.reader import load
from tests.factories import a2a_flow, agent_message, jsonrpc_result


def _flow_file(path: Path, n: int) -> None:
    with open(path, "wb") as f:
        w = io.FlowWriter(f)
        for i in range(n):
            w.add(a2a_flow(response=jsonrpc_result({"message": agent_message(f"m-{i}")})))


def _har(path: Path, entries: list) -> None:
    path.write_text(json.dumps({"log": {"version": "1.2", "entries": entries}}))


def _entry(text: str = "hi", url: str = "http://agent.test/a2a") -> dict:
    body = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "SendMessage",
            "params": {"message": {"messageId": "u", "role": "ROLE_USER", "parts": [{"text": text}]}},
        }
    )
    reply = jsonrpc_result({"message": agent_message()}, rid=1).decode()
    return {
        "startedDateTime": "2026-12-01T10:00:00.000Z",
        "time": 12.5,
        "request": {
            "method": "POST",
            "url": url,
            "httpVersion": "HTTP/1.1",
            "headers": [
                {"name": "Content-Type", "value": "application/json"},
                {"name": "Authorization", "value": "Bearer SEKRIT"},
            ],
            "postData": {"mimeType": "application/json", "text": body},
        },
        "response": {
            "status": 200,
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": "Content-Type", "value": "application/json"}],
            "content": {"mimeType": "application/json", "text": reply},
        },
        "timings": {"send": 1, "wait": 10, "receive": 1.5},
    }


def test_flow_file_and_har(tmp_path: Path) -> None:
    _flow_file(tmp_path / "a.mitm", 3)
    _har(tmp_path / "b.har", [_entry("one"), _entry("two")])
    result = ingest([tmp_path / "a.mitm", tmp_path / "b.har"], tmp_path / "out", TextPolicy())
    assert (result.files, result.flows, result.exchanges, result.errors) == (2, 5, 5, [])
    ex = load(tmp_path / "out", "exchanges")
    assert sorted(ex["source"]) == ["ingest"] * 5
    har_rows = ex[ex["url"] == "http://agent.test/a2a"]
    assert str(har_rows["ts_start"].iloc[0]) == "2026-12-01 10:00:00+00:00"
    assert not any("SEKRIT" in p.read_bytes().decode("latin-1") for p in (tmp_path / "out").rglob("*") if p.is_file())


def test_truncated_flow_file_keeps_what_came_before(tmp_path: Path) -> None:
    _flow_file(tmp_path / "a.mitm", 4)
    data = (tmp_path / "a.mitm").read_bytes()
    (tmp_path / "cut.mitm").write_bytes(data[: len(data) - 200])
    result = ingest([tmp_path / "cut.mitm"], tmp_path / "out", TextPolicy())
    assert result.exchanges == 3
    (err,) = result.errors
    assert err.path == tmp_path / "cut.mitm" and err.position.startswith("byte ") and "after flow 3" in err.position
    assert len(load(tmp_path / "out", "exchanges")) == 3


def test_malformed_har_names_the_entry(tmp_path: Path) -> None:
    _har(tmp_path / "bad.har", [_entry(), {"request": {}}, _entry()])
    result = ingest([tmp_path / "bad.har"], tmp_path / "out", TextPolicy())
    assert result.exchanges == 1
    assert "log.entries[1]" in str(result.errors[0])


def test_cli_exit_code_and_message_on_damage(tmp_path: Path) -> None:
    (tmp_path / "broken.har").write_text('{"log": {"entries": [')
    r = CliRunner().invoke(cli, ["ingest", str(tmp_path / "broken.har"), "--out", str(tmp_path / "out")])
    assert r.exit_code == 1
    assert f"Error: {tmp_path / 'broken.har'}: line 1 column 22: invalid JSON" in r.stderr


def test_har_with_huge_and_binary_bodies_is_recorded_with_anomalies(tmp_path: Path) -> None:
    import base64

    huge = _entry(text="x" * (17 * 1024 * 1024))  # above the 16 MiB parse limit
    binary = _entry()
    binary["response"]["content"] = {
        "mimeType": "application/json",
        "encoding": "base64",
        "text": base64.b64encode(b"\x00\xff\xfe binary \x80").decode(),
    }
    _har(tmp_path / "odd.har", [huge, binary])
    result = ingest([tmp_path / "odd.har"], tmp_path / "out", TextPolicy())
    assert (result.exchanges, result.errors) == (2, [])
    anomalies = [a for row in load(tmp_path / "out", "exchanges")["anomalies"] for a in row]
    assert any(a.startswith("invalid_json") for a in anomalies)  # the binary reply
    assert "request_not_parsed:body_too_large" in anomalies  # the huge request, still recognised
    assert any(a.startswith("request_body_too_large:") for a in anomalies)


def test_text_policy_reaches_history_and_artifacts(tmp_path: Path) -> None:
    from converse_tap.a2a.extract import extract
    from converse_tap.addon.flows import exchange_from_flow
    from tests.factories import user_message

    task = {
        "id": "t",
        "contextId": "c",
        "status": {"state": "TASK_STATE_COMPLETED", "message": agent_message()},
        "history": [user_message(text="my card number is 4111")],
        "artifacts": [{"artifactId": "a", "parts": [{"text": "booking for Ada Lovelace"}]}],
    }
    out = extract(exchange_from_flow(a2a_flow(response=jsonrpc_result({"task": task}))), TextPolicy("drop"))
    assert out is not None
    assert [m["text"] for m in out.messages] == [None] * 4 and all(m["text_length"] for m in out.messages)


def test_parallel_parts_give_the_same_dataset_and_the_same_damage_report(tmp_path: Path) -> None:
    from converse_tap.ingest import split_flow_file

    path = tmp_path / "a.mitm"
    _flow_file(path, 40)
    whole = path.read_bytes()
    path.write_bytes(whole + whole[: len(whole) // 80])  # 40 flows, then half a flow
    parts = split_flow_file(path, part_bytes=len(whole) // 4)
    assert len(parts) >= 4 and parts[0].start == 0
    assert all(a.end == b.start for a, b in itertools.pairwise(parts))  # contiguous, whole records
    one = ingest([path], tmp_path / "one", TextPolicy())
    many = ingest([path], tmp_path / "many", TextPolicy(), jobs=2, part_bytes=len(whole) // 4)
    assert (many.flows, many.exchanges) == (one.flows, one.exchanges) == (40, 40)
    assert [str(e) for e in many.errors] == [str(e) for e in one.errors]
    assert len(one.errors) == 1 and "(after flow 40)" in str(one.errors[0])
    assert len({p.name for p in (tmp_path / "many" / "messages").rglob("*.parquet")}) > 1  # several writers
    for table, key in (("exchanges", ["exchange_id"]), ("messages", ["exchange_id", "seq"])):
        a, b = (load(tmp_path / d, table).sort_values(key).reset_index(drop=True) for d in ("one", "many"))
        assert len(a) >= 40 and a.equals(b), table
