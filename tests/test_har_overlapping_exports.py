"""Two HAR exports of one session that overlap hold the same calls, stated with what belongs to each export (page
numbers, a connection's set-up counted in the first entry of a server, exporters' private keys): each call is
one exchange, whichever exports it came from."""

import copy
import json
from pathlib import Path
from typing import Any

from mitmproxy.addons.savehar import SaveHar

from converse_tap.a2a.redact import TextPolicy
from converse_tap.harentry import entry_id
from converse_tap.ingest import ingest
from converse_tap.store.reader import load
from tests.factories import a2a_flow, agent_message, jsonrpc_request, jsonrpc_result


def _har(path: Path, entries: list[dict[str, Any]], pages: int = 0) -> Path:
    log = {"version": "1.2", "creator": {"name": "test", "version": "1"}, "entries": entries}
    if pages:
        log["pages"] = [
            {"id": f"page_{i}", "startedDateTime": "2026-12-01T10:00:00.000Z", "title": "t", "pageTimings": {}}
            for i in range(1, pages + 1)
        ]
    path.write_text(json.dumps({"log": log}))
    return path


def _call(i: int) -> dict[str, Any]:
    """A browser's entry of one SendMessage call, `i` apart from the others."""
    return {
        "startedDateTime": f"2026-12-01T10:00:0{i}.000Z",
        "time": 12.5 + i,
        "request": {
            "method": "POST",
            "url": "http://agent.test/a2a",
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": "Content-Type", "value": "application/json"}],
            "postData": {"mimeType": "application/json", "text": jsonrpc_request("SendMessage", rid=i).decode()},
        },
        "response": {
            "status": 200,
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": "Content-Type", "value": "application/json"}],
            "content": {
                "mimeType": "application/json",
                "text": jsonrpc_result({"message": agent_message(f"m-{i}")}, rid=i).decode(),
            },
        },
        "cache": {},
        "timings": {"blocked": 0.5, "dns": -1, "connect": -1, "ssl": -1, "send": 1, "wait": 10 + i, "receive": 1.5},
    }


def _as_exported(entry: dict[str, Any], page: int, extra: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(entry)
    out["pageref"] = f"page_{page}"
    out.update(extra)
    return out


def test_overlapping_browser_exports_count_each_call_once(tmp_path: Path) -> None:
    calls = [_call(i) for i in range(4)]
    # the first export: calls 0-2 on pages 1-3; the second, made later: calls 1-3, its pages numbered from 1 again,
    # by a browser version that adds private keys of its own
    first = _har(
        tmp_path / "first.har", [_as_exported(c, i + 1, {"_priority": "High"}) for i, c in enumerate(calls[:3])], 3
    )
    second = _har(
        tmp_path / "second.har",
        [
            _as_exported(c, i + 1, {"_priority": "VeryHigh", "_initiator": {"type": "script"}})
            for i, c in enumerate(calls[1:])
        ],
        3,
    )
    assert json.loads(first.read_text())["log"]["entries"][1] != json.loads(second.read_text())["log"]["entries"][0]
    one = ingest([first], tmp_path / "out", TextPolicy())
    two = ingest([second], tmp_path / "out", TextPolicy())
    assert (one.exchanges, one.duplicates) == (3, 0)
    assert (two.exchanges, two.duplicates) == (1, 2)
    exchanges = load(tmp_path / "out", "exchanges")
    assert len(exchanges) == 4 and exchanges["exchange_id"].is_unique
    both = ingest([first, second], tmp_path / "both", TextPolicy())  # one run reading both
    assert (both.exchanges, both.duplicates) == (4, 2)
    assert sorted(load(tmp_path / "both", "exchanges")["exchange_id"]) == sorted(exchanges["exchange_id"])


def test_overlapping_mitmproxy_exports_count_each_call_once(tmp_path: Path) -> None:
    """mitmproxy's own HAR export counts a connection's set-up in the first entry of its server in that export:
    the call both exports hold is stated with other timings in each."""
    flows = [a2a_flow(response=jsonrpc_result({"message": agent_message(f"m-{i}", f"reply {i}")})) for i in range(3)]
    for f in flows[1:]:
        f.server_conn = flows[0].server_conn  # one connection, as a client keeping it alive
    har = SaveHar()
    early, late = har.make_har(flows[:2]), har.make_har(flows[1:])
    assert early["log"]["entries"][1]["timings"] != late["log"]["entries"][0]["timings"]  # the same call
    assert early["log"]["entries"][1]["time"] != late["log"]["entries"][0]["time"]
    paths = []
    for name, doc in (("early.har", early), ("late.har", late)):
        (tmp_path / name).write_text(json.dumps(doc))
        paths.append(tmp_path / name)
    result = ingest(paths, tmp_path / "out", TextPolicy())
    assert (result.exchanges, result.duplicates) == (3, 1)
    messages = load(tmp_path / "out", "messages")
    replies = messages[messages["message_id"].isin(["m-0", "m-1", "m-2"])]
    assert sorted(replies["text"]) == ["reply 0", "reply 1", "reply 2"]


def test_calls_alike_but_for_their_own_timings_stay_two() -> None:
    """Two polls of one task, sent and answered alike in the same millisecond, are two calls when they took
    different times: what is dropped from an entry's identity is only what an export states of itself."""
    a = _call(1)
    b = copy.deepcopy(a)
    b["timings"]["wait"] += 3
    b["time"] += 3
    assert entry_id(a) != entry_id(b)
    moved = copy.deepcopy(a)  # the same call, its connection's set-up counted in another export
    moved["timings"].update(connect=20.5, ssl=12.0, dns=1.0, blocked=3.0)
    moved["time"] += 36.5
    assert entry_id(a) == entry_id(moved)
    for changed in ({"startedDateTime": "2026-12-01T10:00:01.001Z"}, {"serverIPAddress": "10.0.0.2"}):
        assert entry_id({**a, **changed}) != entry_id(a)


def test_an_entry_of_any_shape_still_has_an_id() -> None:
    for odd in ([], "x", None, {"timings": [1, 2]}, {"request": "GET /", "_x": 1}, {"timings": {"wait": {"deep": []}}}):
        assert len(entry_id(odd)) == 36
    assert entry_id({"_x": 1}) == entry_id({}) == entry_id({"pageref": "p", "time": 3})
