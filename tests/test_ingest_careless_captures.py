"""Captures as other tools and careless hands leave them: HARs concatenated or padded, start times in RFC 3339's
lower case, a `log` that is no object, replies a service worker gave, gRPC-Web and aborted streams in a HAR, and
folders holding dangling links or pipes. Each gives the rows the same exchange gives from a flow file, or is named
with what to do; what came before the oddity is kept."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mitmproxy import flow as mflow
from mitmproxy import io
from mitmproxy.addons.savehar import SaveHar

from converse_tap.a2a.redact import TextPolicy
from converse_tap.ingest import IngestError, ingest, kind
from converse_tap.store.reader import load
from tests.addon.test_worker_grpc_web import DONE, SEND, WORKING, frame, trailers
from tests.factories import a2a_flow, sse_body, status_event
from tests.test_ingest import _entry, _har
from tests.test_ingest_realworld import _ADDRESSES, _ASIDE, _rows

CLI = [sys.executable, "-m", "converse_tap"]


def _cli(*args: Any) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "ingest", *map(str, args)], capture_output=True, text=True, timeout=300)


def _doc(*texts: str) -> str:
    return json.dumps({"log": {"version": "1.2", "entries": [_entry(t) for t in texts]}})


@pytest.mark.parametrize(
    "after",
    ["\n" + _doc("second"), "\0" * 64, "\n]", "garbage"],
    ids=["another-har", "nul-padding", "bracket", "garbage"],
)
def test_text_after_the_end_of_a_har_is_named_and_what_came_before_kept(tmp_path: Path, after: str) -> None:
    """A second HAR appended to a first (`cat a.har b.har`), or padding after it, was passed over in silence: the
    second HAR's entries were lost, and the ingest said it had read the whole file (exit 0)."""
    path = tmp_path / "x.har"
    path.write_text(_doc("first", "also-first") + after)
    proc = _cli(path, "--out", tmp_path / "out", "--jobs", "1")
    assert proc.returncode == 1, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "text after the end of the HAR (another HAR appended to it?), not read" in proc.stderr
    assert "give each HAR a file of its own" in proc.stderr
    assert len(load(tmp_path / "out", "exchanges")) == 2  # the first HAR's entries, all of them


def test_text_after_a_striped_har_is_named_once(tmp_path: Path) -> None:
    path = tmp_path / "x.har"
    path.write_text(_doc(*(f"m{i}" for i in range(40))) + "\n" + _doc("second"))
    result = ingest([path], tmp_path / "out", TextPolicy(), jobs=2, part_bytes=1000)
    assert result.exchanges == 40
    (error,) = result.errors
    assert (error.position, error.reason.split(" (")[0]) == ("line 2 column 1", "text after the end of the HAR")


def test_whitespace_after_a_har_is_no_damage(tmp_path: Path) -> None:
    path = tmp_path / "x.har"
    path.write_text(_doc("first") + " \r\n\t\n")
    result = ingest([path], tmp_path / "out", TextPolicy())
    assert (result.exchanges, result.errors) == (1, [])


def test_a_start_time_with_rfc3339s_lower_case_z_is_read(tmp_path: Path) -> None:
    """RFC 3339 allows `z` (and `t`) in lower case; Python's reader and mitmproxy's importer refused `z`: the
    exchange's times were lost (`har_started_unreadable`)."""
    rows = {}
    for stamp in ("2026-12-01T10:00:00.250Z", "2026-12-01t10:00:00.250z", "2026-12-01T15:30:00.250+05:30"):
        entry = _entry("clock")
        entry["startedDateTime"] = stamp
        _har(tmp_path / "x.har", [entry])
        out = tmp_path / stamp.replace(":", "")
        assert ingest([tmp_path / "x.har"], out, TextPolicy()).exchanges == 1
        (row,) = load(out, "exchanges").to_dict("records")
        rows[stamp] = (row["ts_start"].timestamp(), row["ts_end"].timestamp(), tuple(row["anomalies"]))
    assert len(set(rows.values())) == 1, rows
    assert rows["2026-12-01T10:00:00.250Z"][:2] == (1796119200.25, 1796119200.2625)


@pytest.mark.parametrize("log", ["null", "[]", '"x"', "3"])
def test_a_log_that_is_no_object_is_named_as_such(tmp_path: Path, log: str) -> None:
    """It was named `invalid JSON (Expecting value)`, of a file any JSON reader reads."""
    path = tmp_path / "x.har"
    path.write_text('{"log": ' + log + "}")
    result = ingest([path], tmp_path / "out", TextPolicy())
    (error,) = result.errors
    assert (error.position, error.reason.split(";")[0]) == ("log", "not an object")
    proc = _cli(path, "--out", tmp_path / "out2")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert f"Error: {path}: log: not an object; not a mitmproxy flow file or HAR" in proc.stderr
    assert "ingested 0 flows from 0 file(s)" not in proc.stderr  # (no dataset was made: none is named)
    assert not (tmp_path / "out2").exists()


@pytest.mark.parametrize(
    ("response", "noted"),
    [
        ({"_fetchedViaServiceWorker": True, "_serviceWorkerResponseSource": "network"}, "network"),
        ({"_fetchedViaServiceWorker": True, "_serviceWorkerResponseSource": "cache-storage"}, "cache-storage"),
        ({"_fetchedViaServiceWorker": True}, "unknown"),
        ({"_fetchedViaServiceWorker": False, "_serviceWorkerResponseSource": "network"}, None),
        ({"_fetchedViaServiceWorker": "true"}, None),
    ],
)
def test_a_reply_a_service_worker_gave_is_told_from_a_call_on_the_wire(
    tmp_path: Path, response: dict[str, Any], noted: str | None
) -> None:
    """Chrome marks a reply a service worker answered the page with (`_fetchedViaServiceWorker`): the page's
    request is not the one on the wire, and a worker that fetched it over the network has an entry of its own."""
    entry = _entry("worker")
    entry["response"].update(response)
    _har(tmp_path / "x.har", [entry])
    assert ingest([tmp_path / "x.har"], tmp_path / "out", TextPolicy()).exchanges == 1
    (row,) = load(tmp_path / "out", "exchanges").to_dict("records")
    worker = [a for a in row["anomalies"] if a.startswith("har_via_service_worker:")]
    assert worker == ([f"har_via_service_worker:{noted}"] if noted else [])


def _grpc_web_and_aborted() -> list[Any]:
    flows = []
    reply = frame(WORKING.SerializeToString()) + frame(DONE.SerializeToString()) + trailers("grpc-status: 0")
    for ctype in ("application/grpc-web+proto", "application/grpc-web-text"):
        request, response = frame(SEND.SerializeToString()), reply
        if ctype.endswith("text"):
            request, response = base64.b64encode(request), base64.b64encode(response)
        flows.append(
            a2a_flow(
                path="/lf.a2a.v1.A2AService/SendStreamingMessage",
                body=request,
                headers={"content-type": ctype, "x-grpc-web": "1"},
                response=response,
                content_type=ctype,
            )
        )
    aborted = a2a_flow(response=sse_body(status_event("TASK_STATE_WORKING")), content_type="text/event-stream")
    aborted.error = mflow.Error("net::ERR_ABORTED")  # the page left the stream: a reply, cut, and an error
    flows.append(aborted)
    for i, flow in enumerate(flows):
        flow.id = f"00000000-0000-4000-8000-{i:012d}"
    return flows


def test_grpc_web_and_an_aborted_stream_in_a_har_give_the_flow_files_rows(tmp_path: Path) -> None:
    """gRPC-Web calls (binary and text) and an SSE stream the page aborted, as mitmproxy's export writes them and
    as Chrome and Charles do (binary bodies as base64, Chrome's `_error` beside the reply it cut): the rows of
    the flow file."""
    flows = _grpc_web_and_aborted()
    with open(tmp_path / "c.mitm", "wb") as f:
        writer = io.FlowWriter(f)
        for flow in flows:
            writer.add(flow)
    exported = SaveHar().make_har(flows)
    browser = json.loads(json.dumps(exported))
    for entry, flow in zip(browser["log"]["entries"], flows, strict=True):
        request, content = entry["request"], entry["response"]["content"]
        request["postData"] = {
            "mimeType": flow.request.headers["content-type"],
            "text": base64.b64encode(flow.request.content).decode(),
            "encoding": "base64",
        }
        content["text"] = base64.b64encode(flow.response.content).decode()
        content["encoding"] = "base64"
        entry["response"]["_error"] = flow.error.msg if flow.error else None
    for name, har in (("mitmproxy.har", exported), ("browser.har", browser)):
        (tmp_path / name).write_text(json.dumps(har))
    want = ingest([tmp_path / "c.mitm"], tmp_path / "flow", TextPolicy())
    rows = _rows(tmp_path / "flow", "exchanges", _ASIDE | _ADDRESSES)
    assert sorted((r["binding"], r["replies"], r["complete"], r["error"] or "") for r in rows) == [
        ("grpc", 1, True, ""),
        ("grpc", 1, True, ""),
        ("jsonrpc", 0, False, "net::ERR_ABORTED"),
    ]
    for name in ("mitmproxy.har", "browser.har"):
        got = ingest([tmp_path / name], tmp_path / name.split(".")[0], TextPolicy())
        assert (got.exchanges, got.errors) == (want.exchanges, []) == (3, [])
        # (mitmproxy's export writes `_error` only for a flow without reply: the one it cut is lost to the HAR)
        lost = {"error", "complete"} if name == "mitmproxy.har" else set()
        assert _rows(tmp_path / name.split(".")[0], "exchanges", _ASIDE | _ADDRESSES | lost) == _rows(
            tmp_path / "flow", "exchanges", _ASIDE | _ADDRESSES | lost
        ), name


def test_a_dangling_link_in_a_folder_is_named_and_the_rest_ingested(tmp_path: Path) -> None:
    """It was named `cannot read it (No such file or directory)` of a file the folder lists."""
    folder = tmp_path / "captures"
    folder.mkdir()
    _har(folder / "a capture.har", [_entry("kept")])
    os.symlink(tmp_path / "gone.har", folder / "link.har")
    proc = _cli(folder, "--out", tmp_path / "out")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert f"Error: {folder / 'link.har'}: byte 0: a link to {tmp_path / 'gone.har'}, which does not exist" in (
        proc.stderr
    )
    assert len(load(tmp_path / "out", "exchanges")) == 1


def test_a_pipe_is_refused_saying_to_save_it_to_a_file(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    with pytest.raises(IngestError) as e:
        kind(tmp_path / "pipe")
    assert e.value.reason.startswith("a FIFO, not a capture file (a pipe: save what it carries to a file")


def _flows_bytes(tag: str, n: int) -> bytes:
    from tests.factories import agent_message, jsonrpc_result
    from tests.fuzz.flowfile_mutations import mitm_dumps

    reply = (jsonrpc_result({"message": agent_message(f"{tag}-{i}")}) for i in range(n))
    return b"".join(mitm_dumps(a2a_flow(response=r).get_state()) for r in reply)


@pytest.mark.parametrize(
    ("second", "damaged"),
    [
        (lambda s: s, False),  # pbzip2, lbzip2 and `cat` write several streams
        (lambda s: b"\0" * 512 + s + b"\0" * 512, False),  # padded as xz pads its streams
        (lambda s: b"BZh0" + s[4:], True),  # a later stream damaged at its start
        (lambda s: s[:40] + bytes([s[40] ^ 0xFF]) + s[41:], True),
        (lambda s: b"garbage", True),
    ],
    ids=["streams", "padded", "magic", "block", "garbage"],
)
def test_a_damaged_later_bzip2_stream_is_reported_not_passed_over(tmp_path: Path, second: Any, damaged: bool) -> None:
    """`bz2.BZ2File` took a stream after the first that failed at once for trailing garbage, and stopped reading
    there in silence: the captures of that stream and of every stream after it were lost, the ingest a success."""
    import bz2

    path = tmp_path / "x.mitm.bz2"
    path.write_bytes(bz2.compress(_flows_bytes("a", 3)) + second(bz2.compress(_flows_bytes("b", 3))))
    result = ingest([path], tmp_path / "out", TextPolicy())
    if not damaged:
        assert (result.exchanges, result.errors) == (6, [])
        return
    assert result.exchanges == 3  # the first stream's, all of them
    (error,) = result.errors
    assert error.path == path and "the bzip2 data is damaged" in error.reason, error


def test_half_a_surrogate_pair_costs_its_character_not_the_entry(tmp_path: Path) -> None:
    """A text cut inside a character by an exporter holds half of its surrogate pair (`\\ud83d` alone), which no
    bytes can stand for: mitmproxy's importer refused the whole entry (UnicodeEncodeError), so one character
    in a reply, a request body or a header value cost the exchange."""
    reply, call, header = _entry("in-reply"), _entry("in-call"), _entry("in-header")
    content = reply["response"]["content"]
    content["text"] = content["text"].replace("You can", "You \ud83d can")
    call["request"]["postData"]["text"] = call["request"]["postData"]["text"].replace("in-call", "in \udc00 call")
    header["request"]["headers"].append({"name": "x-note", "value": "a\ud800b"})
    _har(tmp_path / "x.har", [reply, call, header])
    result = ingest([tmp_path / "x.har"], tmp_path / "out", TextPolicy())
    assert (result.exchanges, result.errors) == (3, [])
    rows = load(tmp_path / "out", "exchanges")
    assert all("har_unpaired_surrogate" in list(a) for a in rows["anomalies"])
    texts = load(tmp_path / "out", "messages")["text"].tolist()
    assert "You \ufffd can return it within 30 days." in texts and "in \ufffd call" in texts
    again = ingest([tmp_path / "x.har"], tmp_path / "out", TextPolicy())  # the same ids: nothing added twice
    assert (again.exchanges, again.duplicates) == (0, 3)
