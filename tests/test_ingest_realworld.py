"""Captures as other tools write them: the same traffic as a mitmproxy flow file and as a HAR (mitmproxy's own
export, and entries shaped as Chrome, Firefox and Playwright write them) gives the same rows, and what a HAR does
not state (the client's address, a body the exporter did not keep, a reply that never came) is left unknown rather
than made up."""

from __future__ import annotations

import base64
import copy
import gzip
import hashlib
import json
import lzma
import math
import zlib
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from mitmproxy import http, io
from mitmproxy.addons.savehar import SaveHar
from mitmproxy.test import tflow

from converse_tap.a2a.redact import TextPolicy
from converse_tap.ingest import ingest
from converse_tap.store.reader import load
from tests.addon.test_flows import _error_flow, _gzip_flow, _ipv6_https_flow
from tests.factories import a2a_flow, agent_message, jsonrpc_result, sse_body, status_event
from tests.golden.sample import sample_flows
from tests.test_ingest import _entry, _har

# columns a HAR cannot agree on with a flow file: ids (a HAR entry's is derived from its content), times (mitmproxy's
# export rounds them into timings), the addresses (a HAR states no client, and the server by its IP alone)
_ASIDE = {"exchange_id", "date", "source", "trace_id", "span_id", "ts_start", "ts_first_byte", "ts_end"}
_ADDRESSES = {"client_addr", "server_addr"}


def _reply(mid: str) -> bytes:
    return jsonrpc_result({"message": agent_message(mid)})


def _distinct(i: int) -> str:
    """A message id of its own for each flow (so that each compresses to bytes of its own)."""
    return f"m-{i}-" + "".join(hashlib.sha512(f"{i}.{j}".encode()).hexdigest() for j in range(8))


def _h(version: str, mid: str) -> http.HTTPFlow:
    flow = a2a_flow(response=_reply(mid))
    flow.request.http_version = flow.response.http_version = version  # type: ignore[union-attr]
    return flow


def _not_stored_request() -> http.HTTPFlow:
    flow = a2a_flow(response=_reply("request-not-kept"))
    flow.request.content = None  # a request body mitmproxy streamed and did not keep
    return flow


def _capture() -> list[http.HTTPFlow]:
    flows = [
        *sample_flows(),
        _gzip_flow(),
        _error_flow(),
        _ipv6_https_flow(),
        _h("HTTP/2.0", "over-h2"),
        _h("HTTP/3", "over-h3"),
        a2a_flow(
            response=sse_body(status_event("TASK_STATE_WORKING"), status_event("TASK_STATE_COMPLETED")),
            content_type="text/event-stream",
        ),
        a2a_flow(status=204, response=b""),
        _not_stored_request(),
    ]
    for i, flow in enumerate(flows):
        flow.id = f"00000000-0000-4000-8000-{i:012d}"
    return flows


def _rows(root: Path, table: str, drop: set[str]) -> list[dict[str, Any]]:
    out = [{str(k): _plain(v) for k, v in r.items() if k not in drop} for r in load(root, table).to_dict("records")]
    return sorted(out, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def _plain(v: Any) -> Any:
    """A cell as a value comparable across files (an integer column with a null reads back as floats)."""
    if hasattr(v, "tolist"):
        v = v.tolist()
    if isinstance(v, float) and math.isnan(v):
        return None
    if isinstance(v, float) and v.is_integer():
        return int(v)
    return v


def _row(tmp_path: Path, entry: dict[str, Any]) -> dict[str, Any]:
    """The one exchanges row of a HAR of `entry`."""
    _har(tmp_path / "x.har", [entry])
    assert ingest([tmp_path / "x.har"], tmp_path / "out", TextPolicy()).exchanges == 1
    (row,) = load(tmp_path / "out", "exchanges").to_dict("records")
    return {str(k): v for k, v in row.items()}


def _both(tmp_path: Path, flows: list[Any]) -> tuple[Path, Path]:
    """The flows as a flow file (with TCP, UDP and DNS flows between them, as `mitmdump -w` writes them) and as
    mitmproxy's own HAR export, each ingested."""
    path = tmp_path / "capture.mitm"
    with open(path, "wb") as f:
        w = io.FlowWriter(f)
        for i, flow in enumerate(flows):
            w.add(flow)
            if i % 4 == 1:
                w.add((tflow.ttcpflow, tflow.tudpflow, tflow.tdnsflow)[i % 3]())
    har = tmp_path / "capture.har"
    har.write_text(json.dumps(SaveHar().make_har([f for f in flows if isinstance(f, http.HTTPFlow)])))
    a, b = ingest([path], tmp_path / "flow", TextPolicy()), ingest([har], tmp_path / "har", TextPolicy())
    assert (a.errors, b.errors, a.skipped, b.skipped) == ([], [], 0, 0)
    assert a.exchanges == b.exchanges, (a.exchanges, b.exchanges)
    return tmp_path / "flow", tmp_path / "har"


def test_a_capture_as_flow_file_and_as_mitmproxys_har_export_gives_the_same_rows(tmp_path: Path) -> None:
    """A reply that never came (a flow with an error) was a reply of status 0 with an empty body in the HAR, and a
    request whose body mitmproxy did not keep was read as an empty request, not A2A: its row was lost."""
    flows = _capture()
    websocket = tflow.twebsocketflow()  # a WebSocket's handshake and messages: not A2A, in neither
    flow_rows, har_rows = _both(tmp_path, [*flows, websocket])
    aside = _ASIDE | _ADDRESSES
    exchanges = _rows(flow_rows, "exchanges", aside)
    assert exchanges == _rows(har_rows, "exchanges", aside)
    assert len(exchanges) == len(flows)
    failed = [r for r in exchanges if r["error"] is not None]
    assert [(r["status_code"], r["bytes_out"], r["anomalies"]) for r in failed] == [(None, None, [])]
    unkept = [r for r in exchanges if "request_body_not_stored" in r["anomalies"]]
    assert [(r["bytes_in"], r["status_code"]) for r in unkept] == [(None, 200)]
    for table in ("messages", "agent_cards"):
        assert _rows(flow_rows, table, _ASIDE | {"ts"}) == _rows(har_rows, table, _ASIDE | {"ts"}), table
    har = load(har_rows, "exchanges")
    assert har["client_addr"].isna().all()  # a HAR does not say where the client was: none made up


def _chrome_failure(entry: dict[str, Any]) -> None:
    entry["response"] = {
        "status": 0, "statusText": "", "httpVersion": "", "headers": [], "cookies": [],
        "content": {"size": 0, "mimeType": "x-unknown"}, "redirectURL": "", "headersSize": -1, "bodySize": -1,
        "_transferSize": 0, "_error": "net::ERR_CONNECTION_REFUSED",
    }  # fmt: skip
    entry["timings"] = {"blocked": 0.5, "dns": -1, "ssl": -1, "connect": -1, "send": 0, "wait": 0, "receive": 0}
    entry["time"] = 30000.5  # the time it took to fail


def _playwright_failure(entry: dict[str, Any]) -> None:
    entry["response"] = {
        "status": -1, "statusText": "", "httpVersion": "HTTP/1.1", "cookies": [], "headers": [],
        "content": {"size": -1, "mimeType": "x-unknown"}, "headersSize": -1, "bodySize": -1, "redirectURL": "",
        "_transferSize": -1, "_failureText": "net::ERR_CONNECTION_RESET",
    }  # fmt: skip
    entry["timings"] = {"send": -1, "wait": -1, "receive": -1}
    entry["time"] = -1


@pytest.mark.parametrize(
    ("shape", "error"),
    [(_chrome_failure, "net::ERR_CONNECTION_REFUSED"), (_playwright_failure, "net::ERR_CONNECTION_RESET")],
    ids=["chrome", "playwright"],
)
def test_a_request_that_got_no_reply_has_no_reply_in_its_row(tmp_path: Path, shape: Any, error: str) -> None:
    """Chrome writes a request that failed with status 0, Playwright with -1 and `_failureText`: no reply came,
    as a flow file's flow without response says. They were stored as replies of status 0 and 0 bytes
    (`empty_body`; Playwright's also `har_response_status_unreadable:-1`), and Playwright's reason was lost."""
    failed = _entry("failed")
    shape(failed)
    _har(tmp_path / "x.har", [failed, _entry("fine")])
    result = ingest([tmp_path / "x.har"], tmp_path / "out", TextPolicy())
    assert (result.exchanges, result.errors) == (2, [])
    rows = load(tmp_path / "out", "exchanges").set_index("error", drop=False)
    row = rows.loc[error]
    assert pd.isna(row["status_code"]) and pd.isna(row["bytes_out"]) and pd.isna(row["ts_first_byte"])
    assert list(row["anomalies"]) == [] and not row["complete"]
    failed_after = (row["ts_end"] - row["ts_start"]).total_seconds() if not pd.isna(row["ts_end"]) else None
    assert failed_after == (30.0005 if error.endswith("REFUSED") else None)  # (as a flow's error is dated)
    fine = rows[rows["error"].isna()].iloc[0]
    assert fine["status_code"] == 200 and fine["bytes_out"] > 0


@pytest.mark.parametrize(
    ("stated", "url", "address"),
    [
        ("[::1]", "https://localhost:8443/a2a", "[::1]:8443"),  # Chrome: an IPv6 address in brackets
        ("::1", "http://localhost:9000/a2a", "[::1]:9000"),  # Firefox: without
        ("10.0.0.7", "http://agent.test/a2a", "10.0.0.7:80"),
        ("10.0.0.7", "wss://agent.test/a2a", "10.0.0.7:443"),
        (" 10.0.0.7 ", "HTTPS://agent.test:9443/a2a", "10.0.0.7:9443"),
        (("[::1]", 8080), "https://agent.test/a2a", "[::1]:8080"),  # Playwright: the port it connected to
        (("10.0.0.7", 70000), "https://agent.test/a2a", "10.0.0.7:443"),  # (no port: the URL's)
        ("", "http://agent.test:9000/a2a", None),
        (None, "http://agent.test:9000/a2a", None),
        (12, "http://agent.test:9000/a2a", None),
    ],
)
def test_the_server_address_is_the_one_the_har_states_on_the_urls_port(
    tmp_path: Path, stated: Any, url: str, address: str | None
) -> None:
    """mitmproxy's importer put the address on port 80 for `http://` URLs and 443 for all others, whatever the
    URL's port, kept Chrome's brackets (`[[::1]]:443` for `[::1]` on 8443), and gave every entry the client
    address 127.0.0.1:0, which no HAR states. Through a proxy, the server a browser connects to is the proxy, on
    its port: Playwright says which (`_serverPort`), where the URL names the agent's."""
    entry = _entry("addressed", url=url)
    if isinstance(stated, tuple):
        entry["serverIPAddress"], entry["_serverPort"] = stated
    elif stated is not None:
        entry["serverIPAddress"] = stated
    row = _row(tmp_path, entry)
    assert (_plain(row["server_addr"]), _plain(row["client_addr"])) == (address, None)


@pytest.mark.parametrize(
    ("stated", "version"), [("", None), (None, None), (" h2 ", "HTTP/2.0"), ("HTTP/1.0", "HTTP/1.0")]
)
def test_an_http_version_the_har_does_not_state_is_unknown(tmp_path: Path, stated: Any, version: Any) -> None:
    """mitmproxy's importer takes a request without `httpVersion` (or `""`, as exporters write it for a request
    that failed) for HTTP/1.1."""
    entry = _entry("versionless")
    if stated is None:
        del entry["request"]["httpVersion"]
    else:
        entry["request"]["httpVersion"] = stated
    row = _row(tmp_path, entry)
    assert _plain(row["http_version"]) == version


def _chrome_sse_not_kept(entry: dict[str, Any]) -> None:
    entry["response"]["headers"] = [{"name": "content-type", "value": "text/event-stream"}]
    entry["response"]["content"] = {"size": 2048, "mimeType": "text/event-stream"}  # no text: not kept
    entry["response"]["bodySize"] = 2100


def _firefox_body_not_kept(entry: dict[str, Any]) -> None:
    entry["response"]["content"] = {"size": 512, "mimeType": "application/json", "text": None}
    entry["response"]["bodySize"] = -1


def _sized_on_the_wire_only(entry: dict[str, Any]) -> None:
    entry["response"]["content"] = {"size": 0, "mimeType": "application/json"}
    entry["response"]["bodySize"] = 730


@pytest.mark.parametrize(
    ("shape", "bytes_out"),
    [(_chrome_sse_not_kept, 2100), (_firefox_body_not_kept, None), (_sized_on_the_wire_only, 730)],
    ids=["sse", "json", "wire"],
)
def test_a_reply_the_har_did_not_keep_is_not_an_empty_reply(tmp_path: Path, shape: Any, bytes_out: Any) -> None:
    """A reply of 2,048 bytes whose text the exporter left out (Chrome keeps no EventSource stream, an exporter
    may drop any body) was an empty reply: a complete stream of no events, `sse_no_events`. It is a reply whose
    body the capture does not hold, as a flow file's streamed reply that mitmproxy did not store."""
    entry = _entry("unkept")
    shape(entry)
    _har(tmp_path / "x.har", [entry])
    result = ingest([tmp_path / "x.har"], tmp_path / "out", TextPolicy())
    assert (result.exchanges, result.not_stored) == (1, 1)
    (row,) = load(tmp_path / "out", "exchanges").to_dict("records")
    assert "response_body_not_stored" in row["anomalies"] and "sse_no_events" not in row["anomalies"]
    assert (row["status_code"], _plain(row["bytes_out"]), row["complete"]) == (200, bytes_out, False)
    kept = _entry("kept")  # an empty text, or a size of 0, is an empty reply
    kept["response"]["content"] = {"size": 0, "mimeType": "application/json"}
    _har(tmp_path / "y.har", [kept])
    ingest([tmp_path / "y.har"], tmp_path / "out2", TextPolicy())
    (row,) = load(tmp_path / "out2", "exchanges").to_dict("records")
    assert "response_body_not_stored" not in row["anomalies"] and row["bytes_out"] == 0


@pytest.mark.parametrize(
    ("post", "stored"),
    [
        ({"mimeType": "application/json", "text": None, "params": []}, False),  # mitmproxy's export
        (None, False),  # no postData at all, for a body of bodySize bytes
        ({"mimeType": "application/json"}, False),
        ({"mimeType": "application/json", "text": ""}, True),
    ],
)
def test_a_request_the_har_did_not_keep_is_not_an_empty_request(tmp_path: Path, post: Any, stored: bool) -> None:
    """mitmproxy writes a request body it did not keep as a `postData` whose text is null; other exporters leave
    `postData` or its text out and state the body's `bodySize`. It was read as an empty request, no A2A call: the
    row the flow file gives (the call unknown, its reply read) was lost."""
    entry = _entry("request-unkept")
    entry["request"]["headers"].append({"name": "A2A-Version", "value": "1.0"})
    if post is None:
        del entry["request"]["postData"]
    else:
        entry["request"]["postData"] = post
    entry["request"]["bodySize"] = 180
    _har(tmp_path / "x.har", [entry])
    result = ingest([tmp_path / "x.har"], tmp_path / "out", TextPolicy())
    if stored:  # an empty request: no A2A call to keep
        assert result.exchanges == 0
        return
    assert result.exchanges == 1  # its reply still says what was answered
    (row,) = load(tmp_path / "out", "exchanges").to_dict("records")
    assert "request_body_not_stored" in row["anomalies"] and _plain(row["bytes_in"]) is None
    assert (row["method"], row["status_code"]) == ("unknown", 200)
    msgs = load(tmp_path / "out", "messages")
    assert list(msgs["role"]) == ["agent"]


@pytest.mark.parametrize(("time", "anomaly"), [(-1, None), (-37.5, "har_timing_unrepresentable:time")])
def test_a_negative_duration_is_unknown_not_an_end_before_the_start(
    tmp_path: Path, time: float, anomaly: str | None
) -> None:
    """`"time": -1` (HAR's "not known") put the exchange's end a millisecond before its start."""
    entry = _entry("timeless")
    entry["time"] = time
    row = _row(tmp_path, entry)
    assert pd.isna(row["ts_end"]) and not pd.isna(row["ts_start"])
    assert [a for a in row["anomalies"] if a.startswith("har_")] == ([anomaly] if anomaly else [])


def test_a_chrome_http2_entry_reads_as_the_same_call_over_http1(tmp_path: Path) -> None:
    """Chrome lists an HTTP/2 request's pseudo-headers (`:authority`, `:path`...) among its headers, writes the
    version `h2` and sizes of -1: the call, its reply and its messages are read as from the HTTP/1.1 entry."""
    plain = _entry("same")
    chrome = copy.deepcopy(plain)
    chrome["request"]["httpVersion"] = chrome["response"]["httpVersion"] = "h2"
    chrome["request"]["headers"][:0] = [
        {"name": ":authority", "value": "agent.test"}, {"name": ":method", "value": "POST"},
        {"name": ":path", "value": "/a2a"}, {"name": ":scheme", "value": "http"},
    ]  # fmt: skip
    chrome["request"].update(headersSize=-1, bodySize=-1, cookies=[], queryString=[])
    chrome["response"].update(headersSize=-1, bodySize=-1, redirectURL="", _transferSize=-1, _error=None)
    chrome.update(_initiator={"type": "script"}, _priority="High", _resourceType="fetch", connection="71", cache={})
    chrome["startedDateTime"] = "2026-12-01T11:00:00.000+01:00"  # the same instant, in another zone
    _har(tmp_path / "plain.har", [plain])
    _har(tmp_path / "chrome.har", [chrome])
    ingest([tmp_path / "plain.har"], tmp_path / "plain", TextPolicy())
    ingest([tmp_path / "chrome.har"], tmp_path / "chrome", TextPolicy())
    drop = {"exchange_id", "date", "trace_id", "span_id"}
    a, b = _rows(tmp_path / "plain", "exchanges", drop), _rows(tmp_path / "chrome", "exchanges", drop)
    assert [r.pop("http_version") for r in a] == ["HTTP/1.1"] and [r.pop("http_version") for r in b] == ["HTTP/2.0"]
    assert a == b
    assert _rows(tmp_path / "plain", "messages", drop) == _rows(tmp_path / "chrome", "messages", drop)


@pytest.mark.parametrize(
    ("encoding", "encode", "anomaly"),
    [
        ("base64", True, None),
        ("BASE64", True, None),
        ("base64", False, "har_request_not_base64"),
        ("hex", False, "har_request_encoding_ignored:hex"),
    ],
)
def test_a_request_body_the_har_holds_as_base64_is_read_as_its_bytes(
    tmp_path: Path, encoding: str, encode: bool, anomaly: str | None
) -> None:
    """Exporters write a request body that is not text as base64, marked as a reply's is (`"encoding": "base64"`);
    the importer took the base64 text for the request, no A2A call, and the row was lost (a body past the parse
    limit was decoded for its first bytes all the same)."""
    entry = _entry("in base64")
    post = entry["request"]["postData"]
    sent = len(post["text"].encode())
    if encode:
        post["text"] = base64.b64encode(post["text"].encode()).decode()
    post["encoding"] = encoding
    row = _row(tmp_path, entry)
    assert (row["method"], row["bytes_in"]) == ("SendMessage", sent)
    assert [a for a in row["anomalies"] if a.startswith("har_")] == ([anomaly] if anomaly else [])
    msgs = load(tmp_path / "out", "messages")
    assert sorted(msgs["text"]) == sorted(["in base64", "You can return it within 30 days."])


def test_mitmproxys_compressed_har_export_is_a_capture(tmp_path: Path) -> None:
    """mitmproxy writes its HAR export zlib-compressed when the file is named `.zhar` (`save.har FILE.zhar`,
    `--set hardump=FILE.zhar`): ingest called it "not a mitmproxy flow file or HAR"."""
    flows = [a2a_flow(response=_reply(_distinct(i))) for i in range(3)]
    SaveHar().export_har(flows, str(tmp_path / "export.zhar"))
    SaveHar().export_har(flows, str(tmp_path / "export.har"))
    zipped = ingest([tmp_path / "export.zhar"], tmp_path / "z", TextPolicy())
    plain = ingest([tmp_path / "export.har"], tmp_path / "p", TextPolicy())
    assert (zipped.exchanges, zipped.errors) == (plain.exchanges, []) and plain.exchanges == 3
    assert _rows(tmp_path / "z", "messages", _ASIDE) == _rows(tmp_path / "p", "messages", _ASIDE)
    data = (tmp_path / "export.zhar").read_bytes()  # cut: the entries before the cut are kept, the cut named
    (tmp_path / "cut.zhar").write_bytes(data[: len(data) * 3 // 4])
    cut = ingest([tmp_path / "cut.zhar"], tmp_path / "c", TextPolicy())
    assert 1 <= cut.exchanges < 3 and "the zlib data is damaged" in cut.errors[0].reason
    (tmp_path / "trailing.zhar").write_bytes(data + b"\0junk")
    trailing = ingest([tmp_path / "trailing.zhar"], tmp_path / "t", TextPolicy())
    assert trailing.exchanges == 3 and len(trailing.errors) == 1 and "after the end" in trailing.errors[0].reason
    (tmp_path / "notes.txt").write_text("x^2 + y^2 = z^2, as text that starts as a zlib header could\n")
    assert (
        "not a mitmproxy flow file or HAR"
        in ingest([tmp_path / "notes.txt"], tmp_path / "n", TextPolicy()).errors[0].reason
    )


@pytest.mark.parametrize("compress", [gzip.compress, lzma.compress, zlib.compress], ids=["gzip", "xz", "zlib"])
@pytest.mark.parametrize("kind", ["flows", "har"])
def test_a_small_compressed_capture_cut_short_keeps_what_came_before_the_cut(
    tmp_path: Path, compress: Any, kind: str
) -> None:
    """Decompression read a megabyte at a time, and a read that met the damage dropped all it had decompressed:
    a cut capture of less than a megabyte gave nothing ("byte 0 of the decompressed capture")."""
    flows = [a2a_flow(response=_reply(_distinct(i))) for i in range(12)]
    plain = tmp_path / "plain"
    if kind == "har":
        SaveHar().export_har(flows, str(plain))
    else:
        with open(plain, "wb") as f:
            for flow in flows:
                io.FlowWriter(f).add(flow)
    data = compress(plain.read_bytes())
    (tmp_path / "cut").write_bytes(data[: len(data) * 2 // 3])
    result = ingest([tmp_path / "cut"], tmp_path / "out", TextPolicy())
    assert 3 <= result.exchanges < 12, result.errors
    assert "data is damaged" in result.errors[0].reason and "byte 0 " not in result.errors[0].position


@pytest.mark.parametrize(
    ("marks", "anomaly"),
    [
        ({"_fromCache": "memory"}, "har_from_cache:memory"),  # Chrome
        ({"_fromCache": "disk"}, "har_from_cache:disk"),
        ({"_fetchType": "Disk Cache"}, "har_from_cache:disk"),  # Safari
        ({"_fetchType": "Network Load"}, None),
        ({"_fromCache": None, "_fetchType": 3}, None),
    ],
)
def test_a_reply_the_browser_took_from_its_cache_is_told_from_a_call_on_the_wire(
    tmp_path: Path, marks: dict[str, Any], anomaly: str | None
) -> None:
    """A browser lists replies it served from its cache among the others: the agent never saw those requests, and
    no proxy recorded them. They were rows like any call; they are kept, noted."""
    entry = _entry("cached")
    entry.update(marks)
    row = _row(tmp_path, entry)
    assert [a for a in row["anomalies"] if a.startswith("har_")] == ([anomaly] if anomaly else [])
