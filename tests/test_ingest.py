import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
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


def test_a_har_time_without_a_zone_is_utc_on_every_machine(tmp_path: Path) -> None:
    """`datetime.fromisoformat(...).timestamp()` of a naive time uses the machine's zone: the same HAR ingested in
    New York gave times five hours later than in London."""
    entry = _entry()
    entry["startedDateTime"] = "2026-12-01T10:00:00.250"
    _har(tmp_path / "naive.har", [entry])
    code = f"""
from pathlib import Path
from converse_tap.a2a.redact import TextPolicy
from converse_tap.ingest import ingest
from converse_tap.store.reader import load
ingest([Path({str(tmp_path / "naive.har")!r})], Path({str(tmp_path)!r}) / "out", TextPolicy())
ex = load(Path({str(tmp_path)!r}) / "out", "exchanges")
print(ex["ts_start"].iloc[0].isoformat(), list(ex["anomalies"].iloc[0]))
"""
    env = {**os.environ, "TZ": "America/New_York"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("2026-12-01T10:00:00.250000+00:00") and "har_time_without_zone" in proc.stdout


def test_har_http_versions_as_each_browser_writes_them(tmp_path: Path) -> None:
    """mitmproxy's importer knows `http/2.0`, `HTTP/2` and `HTTP/3` and takes any other spelling (Chrome's `h3`,
    `HTTP/2.0`, `HTTP/1.0`) for HTTP/1.1: the version column was silently wrong. Versions are stored as the live
    proxy names them (`HTTP/2.0`), so that HAR, flow-file and live rows agree."""
    spelled = {
        "h3": "HTTP/3",
        "HTTP/2": "HTTP/2.0",
        "http/2.0": "HTTP/2.0",
        "HTTP/1.0": "HTTP/1.0",
        "SPDY/3": "HTTP/1.1",
    }
    entries = []
    for i, version in enumerate(spelled):
        e = _entry(f"v{i}")
        e["request"]["httpVersion"] = e["response"]["httpVersion"] = version
        entries.append(e)
    _har(tmp_path / "v.har", entries)
    result = ingest([tmp_path / "v.har"], tmp_path / "out", TextPolicy())
    assert result.exchanges == len(spelled)
    ex = load(tmp_path / "out", "exchanges").sort_values("ts_start", kind="stable")
    msgs = load(tmp_path / "out", "messages")
    order = {t: i for i, t in enumerate(f"v{i}" for i in range(len(spelled)))}
    by_text = msgs[msgs["direction"] == "request"].set_index("exchange_id")["text"].map(order)
    got = ex.set_index("exchange_id")["http_version"].sort_index(key=lambda idx: idx.map(by_text)).tolist()
    assert got == list(spelled.values())
    spdy = ex.set_index("exchange_id").loc[by_text[by_text == 4].index[0], "anomalies"]
    assert "har_http_version:SPDY/3" in list(spdy)


def test_malformed_har_names_the_entry(tmp_path: Path) -> None:
    _har(tmp_path / "bad.har", [_entry(), {"request": {}}, _entry("another")])
    result = ingest([tmp_path / "bad.har"], tmp_path / "out", TextPolicy())
    assert result.exchanges == 2  # the malformed entry costs only itself
    (err,) = result.errors
    assert "log.entries[1]" in str(err)


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


@pytest.mark.parametrize("coding", ["gzip", "deflate", "zstd", "br", "br, gzip", "aes128gcm"])
def test_har_bodies_are_read_as_the_har_holds_them_whatever_their_content_encoding(tmp_path: Path, coding: str) -> None:
    """HAR stores bodies decoded. mitmproxy's importer encoded them again for their Content-Encoding and refused
    the whole entry for a coding it cannot apply (`br, gzip` is valid HTTP; `aes128gcm` it does not know): such
    entries are read now, with the headers as written. Some exporters write the base64 of the bytes on the wire
    instead, still encoded: such a body is decoded by its Content-Encoding (and noted); one that only looks
    encoded is left alone."""
    import base64
    import gzip
    import zlib

    import brotli

    from converse_tap.a2a.inflate import zstd

    pack = {"gzip": gzip.compress, "deflate": zlib.compress, "zstd": zstd.compress, "br": brotli.compress}

    still, decoded, looks = _entry("still"), _entry("decoded"), _entry("looks")
    for entry in (still, decoded, looks):
        entry["response"]["headers"].append({"name": "Content-Encoding", "value": coding})
        entry["request"]["headers"].append({"name": "Content-Encoding", "value": coding})
    wire = still["response"]["content"]["text"].encode()
    for c in coding.split(", "):
        wire = pack[c](wire) if c in pack else wire
    still["response"]["content"] = {"mimeType": "application/json", "encoding": "base64"}
    still["response"]["content"]["text"] = base64.b64encode(wire).decode()
    looks["response"]["content"] = {"mimeType": "application/octet-stream", "encoding": "base64"}
    looks["response"]["content"]["text"] = base64.b64encode(b"\x1f\x8b\x28\xb5\x2f\xfd\x78\x9c not data").decode()
    _har(tmp_path / "x.har", [still, decoded, looks])
    result = ingest([tmp_path / "x.har"], tmp_path / "out", TextPolicy())
    assert (result.exchanges, result.errors) == (3, [])
    ex = load(tmp_path / "out", "exchanges")
    notes = [a for row in ex["anomalies"] for a in row if "still_encoded" in a]
    assert notes == ([f"har_response_body_still_encoded:{coding}"] if coding != "aes128gcm" else [])
    msgs = load(tmp_path / "out", "messages")
    assert sorted(t for t in msgs["text"] if t in ("still", "decoded", "looks")) == ["decoded", "looks", "still"]
    assert len(msgs[msgs["role"] != "user"]) == 2  # the decoded reply's envelope, and the still-encoded one's


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


# -- issue 14: counted once, loud about what the capture lacks, clear about non-captures ---------------------


def test_reingest_and_a_flow_twice_add_no_duplicate_rows(tmp_path: Path) -> None:
    _flow_file(tmp_path / "a.mitm", 5)
    data = (tmp_path / "a.mitm").read_bytes()
    (tmp_path / "twice.mitm").write_bytes(data + data[: len(data) // 5])  # the first flow again
    first = ingest([tmp_path / "twice.mitm"], tmp_path / "out", TextPolicy())
    assert (first.flows, first.exchanges, first.duplicates) == (6, 5, 1)
    again = ingest([tmp_path / "a.mitm"], tmp_path / "out", TextPolicy())
    assert (again.flows, again.exchanges, again.duplicates) == (5, 0, 5)
    assert len(load(tmp_path / "out", "exchanges")) == 5
    r = CliRunner().invoke(cli, ["ingest", str(tmp_path / "a.mitm"), "--out", str(tmp_path / "out")])
    assert r.exit_code == 0 and "5 flows were already present and skipped" in r.stderr


def test_a_duplicate_across_parallel_shares_is_skipped(tmp_path: Path) -> None:
    _flow_file(tmp_path / "a.mitm", 40)
    data = (tmp_path / "a.mitm").read_bytes()
    (tmp_path / "twice.mitm").write_bytes(data + data)  # the second copy falls to the second process
    result = ingest([tmp_path / "twice.mitm"], tmp_path / "out", TextPolicy(), jobs=2, part_bytes=len(data) // 2)
    assert (result.flows, result.exchanges, result.duplicates) == (80, 40, 40)
    assert load(tmp_path / "out", "exchanges")["exchange_id"].is_unique


def test_the_same_har_twice_adds_nothing(tmp_path: Path) -> None:
    _har(tmp_path / "b.har", [_entry("one"), _entry("two")])
    assert ingest([tmp_path / "b.har"], tmp_path / "out", TextPolicy()).exchanges == 2
    again = ingest([tmp_path / "b.har"], tmp_path / "out", TextPolicy())
    assert (again.exchanges, again.duplicates) == (0, 2)


def test_streamed_bodies_not_stored_are_flagged_not_complete(tmp_path: Path) -> None:
    from tests.factories import jsonrpc_request, sse_body, status_event

    path = tmp_path / "nostore.mitm"
    with open(path, "wb") as f:
        w = io.FlowWriter(f)
        for i in range(3):
            flow = a2a_flow(
                body=jsonrpc_request("SendStreamingMessage"),
                response=sse_body(status_event("TASK_STATE_COMPLETED", agent_message(f"s{i}"))),
                content_type="text/event-stream",
            )
            if i < 2:
                assert flow.response is not None
                flow.response.data.content = None  # as mitmdump saves a stream without store_streamed_bodies
            w.add(flow)
    r = CliRunner().invoke(cli, ["ingest", str(path), "--out", str(tmp_path / "out")])
    assert r.exit_code == 0, r.stderr
    assert "2 response(s) have no body" in r.stderr and "store_streamed_bodies=true" in r.stderr
    ex = load(tmp_path / "out", "exchanges").sort_values("complete")
    assert list(ex["complete"]) == [False, False, True]
    assert ["response_body_not_stored" in a for a in ex["anomalies"]] == [True, True, False]
    assert ex["sse_events"].isna().tolist() == [True, True, False]


def test_non_captures_are_named_and_nothing_is_created(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("hello, this is not a capture\n")
    (tmp_path / "data.json").write_text('{"rows": [1, 2, 3]}')
    (tmp_path / "bytes.bin").write_bytes(b"12:not a flow,")
    for name in ("notes.txt", "data.json", "bytes.bin"):
        out = tmp_path / f"out-{name}"
        r = CliRunner().invoke(cli, ["ingest", str(tmp_path / name), "--out", str(out)])
        assert r.exit_code == 2, (name, r.stderr)
        assert f"{tmp_path / name}: " in r.stderr and "not a mitmproxy flow file or HAR" in r.stderr
        assert "export the capture in one of these" in r.stderr  # and what to do
        assert "Traceback" not in r.stderr and not out.exists()


def test_a_non_capture_among_captures_is_reported_and_the_rest_ingested(tmp_path: Path) -> None:
    _flow_file(tmp_path / "a.mitm", 2)
    (tmp_path / "notes.txt").write_text("not a capture")
    r = CliRunner().invoke(
        cli, ["ingest", str(tmp_path / "a.mitm"), str(tmp_path / "notes.txt"), "--out", str(tmp_path / "out")]
    )
    assert r.exit_code == 1 and "notes.txt: byte 0: not a mitmproxy flow file or HAR" in r.stderr
    assert len(load(tmp_path / "out", "exchanges")) == 2


# -- issue 12: hostile files -------------------------------------------------------------------------------


def test_absurd_record_length_keeps_what_came_before(tmp_path: Path) -> None:
    _flow_file(tmp_path / "a.mitm", 2)
    good = (tmp_path / "a.mitm").read_bytes()
    (tmp_path / "absurd.mitm").write_bytes(good + b"99999999999999999999:" + b"x" * 100)
    r = CliRunner().invoke(cli, ["ingest", str(tmp_path / "absurd.mitm"), "--out", str(tmp_path / "out")])
    assert r.exit_code == 1 and "Traceback" not in r.stderr
    assert f"{tmp_path / 'absurd.mitm'}: byte {len(good)} (after flow 2): " in r.stderr
    assert len(load(tmp_path / "out", "exchanges")) == 2


def test_har_timings_that_cannot_be_represented_become_null(tmp_path: Path) -> None:
    odd = []
    for i, (time_, wait) in enumerate([(float("inf"), 1), (1e300, 1e300), ("soon", 5), (12.5, float("-inf"))]):
        e = _entry(f"t{i}")
        e["time"], e["timings"]["wait"] = time_, wait
        odd.append(e)
    path = tmp_path / "odd.har"
    path.write_text(json.dumps({"log": {"entries": [*odd, _entry("fine")]}}))  # json writes Infinity
    assert "Infinity" in path.read_text()
    result = ingest([path], tmp_path / "out", TextPolicy())
    assert (result.exchanges, result.errors) == (5, [])
    ex = load(tmp_path / "out", "exchanges")
    flagged = ex[[any(a.startswith("har_timing_unrepresentable") for a in row) for row in ex["anomalies"]]]
    assert len(flagged) == 4
    assert flagged["ts_end"].isna().sum() == 3  # infinite, 1e300, "soon"; the fourth keeps its total time
    assert ex["ts_start"].notna().all()


def test_a_gzip_bomb_in_a_flow_file_costs_only_its_exchange(tmp_path: Path) -> None:
    import gzip
    import subprocess
    import sys

    bomb = gzip.compress(b"\0" * (256 * 1024 * 1024), compresslevel=9)
    path = tmp_path / "bomb.mitm"
    with open(path, "wb") as f:
        w = io.FlowWriter(f)
        w.add(a2a_flow(response=jsonrpc_result({"message": agent_message("before")})))
        w.add(a2a_flow(response=bomb, response_headers={"content-encoding": "gzip"}))
        w.add(a2a_flow(response=jsonrpc_result({"message": agent_message("after")})))
    code = (
        "import sys; from pathlib import Path; from converse_tap.ingest import ingest;"
        "from converse_tap.a2a.redact import TextPolicy;"
        "r = ingest([Path(sys.argv[1])], Path(sys.argv[2]), TextPolicy()); print(r.exchanges, len(r.errors));"
        "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0])"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(path), str(tmp_path / "out")], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr
    counts, peak_kib = proc.stdout.split("\n")[:2]
    assert counts == "3 0"
    assert int(peak_kib) < 256 * 1024  # the bomb inflates to 256 MiB; ingest stops at 16 MiB of it
    ex = load(tmp_path / "out", "exchanges")
    assert sum(any(a.startswith("response_body_too_large_decoded") for a in row) for row in ex["anomalies"]) == 1
    assert len(load(tmp_path / "out", "messages")) >= 4  # both neighbours' requests and replies


def test_flows_with_bodies_near_the_parse_limit_stay_within_the_memory_bound(tmp_path: Path) -> None:
    """Each 15 MiB text passes through several buffers its size (body, decoded text, Arrow column, the
    roll-over's Parquet pages, whose min/max statistics copied it again several times). Freed, glibc and Arrow's
    allocator kept them: three such flows took `converse-tap ingest` to 295 MB, past the 256 MiB bound."""
    path = tmp_path / "big.mitm"
    with open(path, "wb") as f:
        w = io.FlowWriter(f)
        for i in range(3):
            flow = a2a_flow(response=jsonrpc_result({"message": agent_message(f"big-{i}", text="x" * (15 << 20))}))
            flow.id = f"big-{i}"
            w.add(flow)
    code = (  # VmHWM: ru_maxrss would count the pytest process the child was forked from
        "import atexit, sys; from converse_tap.cli import cli; sys.argv[0] = 'converse-tap';"
        "hwm = lambda: [l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0];"
        "atexit.register(lambda: print('peak', hwm())); cli()"
    )
    args = ["ingest", str(path), "--out", str(tmp_path / "out"), "--jobs", "1"]
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    peak_kib = int(proc.stdout.rsplit("peak ", 1)[1])
    assert peak_kib < 256 * 1024, peak_kib
    texts = load(tmp_path / "out", "messages", columns=["text"])["text"].dropna()
    assert sorted(map(len, texts))[-3:] == [15 << 20] * 3  # every text stored whole


def _cli_process(args: list[str], fsize: int | None = None, **kw: Any) -> subprocess.Popen[str]:
    """`converse-tap ARGS` in its own process; `fsize` caps the size of any file it writes (RLIMIT_FSIZE),
    the way a full disk stops a write part-way."""
    code = "import sys; from converse_tap.cli import cli; sys.argv[0] = 'converse-tap'; cli()"
    if fsize is not None:
        code = (
            "import resource, signal; signal.signal(signal.SIGXFSZ, signal.SIG_IGN);"
            f"resource.setrlimit(resource.RLIMIT_FSIZE, ({fsize}, {fsize}));" + code
        )
    return subprocess.Popen([sys.executable, "-c", code, *args], text=True, **kw)


def _journaled(journals: Path) -> bool:
    """Whether a complete batch of exchanges rows has reached a journal."""
    from converse_tap.store.files import read_journal

    for path in journals.glob("*/exchanges-*.arrows"):
        data, _torn = read_journal(path)
        if data is not None and data.num_rows:
            return True
    return False


@pytest.fixture(scope="module")
def capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.captures import write_capture

    return write_capture(tmp_path_factory.mktemp("capture") / "capture.mitm", 3000)


def test_disk_full_says_what_was_not_written(tmp_path: Path, capture: Path) -> None:
    out = tmp_path / "out"
    proc = _cli_process(
        ["ingest", str(capture), "--out", str(out), "--jobs", "1"], fsize=1 << 20, stderr=subprocess.PIPE
    )
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 1, err
    assert "ingested" not in err and "Traceback" not in err
    assert f"Error: cannot write to {out}: " in err and "rows were not written" in err
    lost = int(err.split(f"Error: cannot write to {out}: ")[1].split(" rows")[0])
    written = len(load(out, "exchanges")) if (out / "exchanges").is_dir() else 0
    assert lost > 0 and written < 3000


def test_killed_ingest_is_completed_by_recover_then_ingest(tmp_path: Path, capture: Path) -> None:
    out = tmp_path / "out"
    proc = _cli_process(["ingest", str(capture), "--out", str(out), "--jobs", "1"], stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    journals = out / "_journal"
    while not _journaled(journals):  # wait for rows to reach a journal
        assert proc.poll() is None and time.monotonic() < deadline, "ingest ended before it journaled"
        time.sleep(0.01)
    proc.kill()
    proc.wait()
    assert not list(out.rglob("part-*.parquet")) or all(p.stat().st_size > 0 for p in out.rglob("part-*.parquet"))
    r = CliRunner().invoke(cli, ["recover", str(out)])
    assert r.exit_code == 0 and not any(journals.glob("*/*.arrows"))
    recovered = len(load(out, "exchanges"))
    assert recovered > 0
    again = ingest([capture], out, TextPolicy())
    assert again.duplicates == recovered and not again.errors
    assert load(out, "exchanges")["exchange_id"].is_unique
    assert len(load(out, "exchanges")) == recovered + again.exchanges


def test_interrupted_ingest_keeps_what_it_read_and_says_the_rest_is_missing(tmp_path: Path, capture: Path) -> None:
    out = tmp_path / "out"
    proc = _cli_process(["ingest", str(capture), "--out", str(out), "--jobs", "1"], stderr=subprocess.PIPE)
    deadline = time.monotonic() + 120
    while not _journaled(out / "_journal"):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 1 and "interrupted after" in err and "Run the same ingest again" in err, err
    assert "Traceback" not in err
    assert not any((out / "_journal").glob("*/*.arrows"))  # what was read is in Parquet
    assert 0 < len(load(out, "exchanges")) < 3000


def test_progress_bar_on_a_terminal_only(tmp_path: Path, capture: Path) -> None:
    import os
    import pty

    master, slave = pty.openpty()
    proc = _cli_process(["ingest", str(capture), "--out", str(tmp_path / "tty")], stderr=slave)
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the terminal closed: the command ended
            break
        if not chunk:
            break
        seen += chunk
    proc.wait(timeout=120)
    os.close(master)
    text = seen.decode()
    assert proc.returncode == 0 and "\r[" in text and "flows/s" in text and "ETA" in text and "MiB" in text
    piped = _cli_process(["ingest", str(capture), "--out", str(tmp_path / "piped")], stderr=subprocess.PIPE)
    _, err = piped.communicate(timeout=120)
    assert piped.returncode == 0 and "\r" not in err and "flows/s" not in err and err.startswith("ingested ")


def test_har_headers_as_name_value_pairs_with_a_content_encoding_mitmproxy_cannot_apply(tmp_path: Path) -> None:
    """Slack writes header fields as `[name, value]`: a Content-Encoding among them is taken apart as well."""
    entry = _entry("pairs")
    for side in ("request", "response"):
        entry[side]["headers"] = [[h["name"], h["value"]] for h in entry[side]["headers"]]
        entry[side]["headers"].append(["Content-Encoding", "br, gzip"])
    _har(tmp_path / "x.har", [entry])
    result = ingest([tmp_path / "x.har"], tmp_path / "out", TextPolicy())
    assert (result.exchanges, result.errors) == (1, [])
    msgs = load(tmp_path / "out", "messages")
    assert sorted(msgs["role"]) == ["agent", "user"]


def _attach(entry: dict, name: str) -> bytes:
    """The entry's reply kept as a file, as Playwright writes it with content "attach"; the reply's bytes."""
    reply = entry["response"]["content"].pop("text").encode()
    entry["response"]["content"]["_file"] = name
    return reply


def test_har_bodies_kept_as_files_beside_it_or_in_its_zip_are_read(tmp_path: Path) -> None:
    """Playwright records bodies as files (`"_file"` in place of `text`): beside the HAR, or in the `.har.zip` with
    it. They are read, so the replies' envelopes are; a name that is a path (`../secret.json`) is never followed,
    and an attachment that is not there is noted, the exchange kept."""
    import zipfile

    folder = tmp_path / "pw"
    folder.mkdir()
    found, away, missing = _entry("found"), _entry("away"), _entry("missing")
    (folder / "0a1b.json").write_bytes(_attach(found, "0a1b.json"))
    (tmp_path / "secret.json").write_bytes(_attach(away, "../secret.json"))
    _attach(missing, "gone.json")
    _har(folder / "session.har", [found, away, missing])
    zipped = tmp_path / "session.har.zip"
    with zipfile.ZipFile(zipped, "w", zipfile.ZIP_DEFLATED) as z:
        z.write(folder / "session.har", "har.har")
        z.write(folder / "0a1b.json", "0a1b.json")
        z.writestr("secret.json", (tmp_path / "secret.json").read_bytes())  # in the zip, but named as a path
    for capture in (folder / "session.har", zipped):
        out = tmp_path / f"out-{capture.suffix}"
        result = ingest([capture], out, TextPolicy())
        assert (result.exchanges, result.errors) == (3, [])
        notes = sorted(a for row in load(out, "exchanges")["anomalies"] for a in row if "attachment" in a)
        assert notes == ["har_response_attachment_missing:../secret.json", "har_response_attachment_missing:gone.json"]
        msgs = load(out, "messages")
        assert len(msgs[msgs["role"] != "user"]) == 1  # the reply read from its file


def test_a_zip_that_is_not_a_har_and_its_bodies_is_named(tmp_path: Path) -> None:
    import zipfile

    two = tmp_path / "two.zip"
    with zipfile.ZipFile(two, "w") as z:
        z.writestr("a.har", "{}")
        z.writestr("b.har", "{}")
    broken = tmp_path / "broken.zip"
    broken.write_bytes(b"PK\x03\x04" + b"\x00" * 40)
    r = CliRunner().invoke(cli, ["ingest", str(two), str(broken), "--out", str(tmp_path / "out")])
    assert r.exit_code == 1 and "Traceback" not in r.output, r.output
    assert "two.zip: byte 0 of the decompressed capture: a zip holding 2 files named *.har" in r.stderr
    assert "broken.zip: byte 0 of the decompressed capture: the zip data is damaged" in r.stderr


@pytest.mark.parametrize("har_name", ["session.har", "session.har.gz", "Session.HAR"])
def test_a_folder_of_a_har_and_its_bodies_kept_as_files_is_ingested_as_one_capture(
    tmp_path: Path, har_name: str
) -> None:
    """Playwright writes a HAR's bodies beside it (`<sha1>.json`, `<sha1>.dat`): a folder (or a shell's `pw/*`)
    holding them is ingested as the HAR alone, its bodies read with it. A JSON file no HAR names is still a file
    to ingest, and says it is not a capture; a flow file in the same folder is ingested as well."""
    import gzip

    folder = tmp_path / "pw"
    folder.mkdir()
    a, b = _entry("a"), _entry("b")
    (folder / "0a1b.json").write_bytes(_attach(a, "0a1b.json"))
    (folder / "9f9f.dat").write_bytes(_attach(b, "9f9f.dat"))
    _har(folder / "plain.har", [a, b])
    har = (folder / "plain.har").read_bytes()
    (folder / "plain.har").unlink()
    (folder / har_name).write_bytes(gzip.compress(har) if har_name.endswith(".gz") else har)
    (folder / "stray.json").write_text('{"jsonrpc": "2.0"}')
    _flow_file(folder / "other.mitm", 2)
    for args in ([folder], sorted(folder.iterdir())):
        out = tmp_path / f"out{len(args)}"
        r = CliRunner().invoke(cli, ["ingest", *map(str, args), "--out", str(out)])
        assert r.exit_code == 1 and "Traceback" not in r.output, r.output
        assert r.stderr.count("Error:") == 1 and "stray.json" in r.stderr, r.stderr
        assert "from 2 file(s)" in r.stderr
        msgs = load(out, "messages")
        assert len(msgs[msgs["role"] == "agent"]) == 2 + 2  # both replies read from their files, and the flows'


def test_attachment_names_are_found_across_reads_in_any_unicode_encoding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from converse_tap import ingest_plan

    monkeypatch.setattr(ingest_plan, "CHUNK", 5)  # every name straddles a read
    text = json.dumps({"log": {"entries": [{"response": {"content": {"_file": n}}} for n in NAMES]}}, indent=1)
    for encoding in ("utf-8", "utf-16", "utf-32"):
        (tmp_path / "x.har").write_bytes(text.encode(encoding))
        assert ingest_plan.attachment_names(tmp_path / "x.har") == {"0a1b.json", "é 2.dat"}, encoding


NAMES = ["0a1b.json", "é 2.dat", "../secret.json", "/etc/passwd", "..", "a\\b"]


def test_har_body_sizes_are_the_bytes_on_the_wire_when_the_body_was_encoded(tmp_path: Path) -> None:
    """A HAR holds bodies decoded; `bytes_out` is the body's size on the wire: the entry's `bodySize` where the
    response had a Content-Encoding, else its `content.size` less `content.compression`, else (neither stated)
    the decoded length; a body sent as it is keeps its own length whatever the entry states."""
    cases = {
        "body-size": ({"bodySize": 123}, True, 123),
        "compression": ({"bodySize": -1, "content": {"size": 1000, "compression": 950}}, True, 50),
        "unstated": ({"bodySize": -1}, True, None),
        "identity": ({"bodySize": 7}, False, None),
    }
    entries = []
    for name, (sizes, encoded, _) in cases.items():
        entry = _entry(name)
        content = {**entry["response"]["content"], **sizes.pop("content", {})}
        entry["response"] = {**entry["response"], **sizes, "content": content}
        if encoded:
            entry["response"]["headers"].append({"name": "Content-Encoding", "value": "gzip"})
        entries.append(entry)
    _har(tmp_path / "x.har", entries)
    assert ingest([tmp_path / "x.har"], tmp_path / "out", TextPolicy()).errors == []
    decoded = len(entries[0]["response"]["content"]["text"].encode())
    exchanges = load(tmp_path / "out", "exchanges")
    msgs = load(tmp_path / "out", "messages")
    texts = msgs[msgs["role"] == "user"].set_index("exchange_id")["text"]
    sizes_by_case = {texts[e]: b for e, b in zip(exchanges["exchange_id"], exchanges["bytes_out"], strict=True)}
    assert sizes_by_case == {n: want if want is not None else decoded for n, (_, _, want) in cases.items()}
