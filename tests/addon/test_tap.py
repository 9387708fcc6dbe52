import json
import logging
import os
import stat
from pathlib import Path

import pytest
from mitmproxy import exceptions
from mitmproxy.test import tflow

from converse_tap.addon import tap as tap_module
from converse_tap.store.reader import load
from tests.factories import a2a_flow, agent_message, jsonrpc_request, jsonrpc_result, sse_body


def finish(addon, out: Path) -> None:
    addon.done()


def run_hooks(addon, flow) -> None:
    addon.request(flow)
    addon.responseheaders(flow)
    addon.response(flow)


def test_unary_exchange_lands_in_parquet(tap) -> None:
    addon, _, out = tap
    run_hooks(addon, a2a_flow(response=jsonrpc_result({"message": agent_message()})))
    addon.done()
    ex = load(out, "exchanges")
    msgs = load(out, "messages")
    assert ex["method"].tolist() == ["SendMessage"]
    assert msgs["role"].tolist() == ["user", "agent"]
    assert msgs["coverage"].tolist()[1] == "answered"
    assert list((out / "exchanges").glob("date=*/part-*.parquet"))
    assert not list(out.rglob("*.arrows")) and not list(out.rglob(".*.tmp"))


def test_non_a2a_traffic_is_neither_touched_nor_recorded(tap) -> None:
    addon, _, out = tap
    flow = tflow.tflow(resp=True)
    flow.response.headers["content-type"] = "text/event-stream"
    run_hooks(addon, flow)
    assert flow.response.stream is False
    addon.done()
    assert load(out, "exchanges").empty


def test_sse_is_tapped_chunk_by_chunk_and_forwarded_unchanged(tap) -> None:
    addon, _, out = tap
    body = sse_body(
        {"result": {"statusUpdate": {"taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_WORKING"}}}},
        {
            "result": {
                "statusUpdate": {
                    "taskId": "t",
                    "contextId": "c",
                    "status": {"state": "TASK_STATE_COMPLETED", "message": agent_message()},
                }
            }
        },
    )
    flow = a2a_flow(body=jsonrpc_request("SendStreamingMessage"), response=b"", content_type="text/event-stream")
    addon.request(flow)
    addon.responseheaders(flow)
    stream = flow.response.stream
    assert callable(stream)
    forwarded = [stream(body[i : i + 7]) for i in range(0, len(body), 7)] + [stream(b"")]
    assert b"".join(forwarded) == body
    assert all(a == body[i * 7 : i * 7 + 7] for i, a in enumerate(forwarded[:-1]))
    flow.response.data.content = None  # what a streamed response looks like in the response hook
    addon.response(flow)
    addon.done()
    ex = load(out, "exchanges").iloc[0]
    assert (ex["streamed"], ex["sse_events"], ex["task_state"], ex["complete"]) == (
        True,
        2,
        "TASK_STATE_COMPLETED",
        True,
    )
    assert ex["bytes_out"] == len(body)


def test_client_disconnect_mid_stream_keeps_rows_and_marks_incomplete(tap) -> None:
    addon, _, out = tap
    first = sse_body(
        {
            "result": {
                "statusUpdate": {
                    "taskId": "t",
                    "status": {"state": "TASK_STATE_INPUT_REQUIRED", "message": agent_message()},
                }
            }
        }
    )
    flow = a2a_flow(body=jsonrpc_request("SendStreamingMessage"), response=b"", content_type="text/event-stream")
    addon.request(flow)
    addon.responseheaders(flow)
    flow.response.stream(first + b'data: {"result": {"statusUp')
    flow.response.data.content = None
    flow.error = tflow.terr("Client disconnected.")
    addon.error(flow)
    addon.done()
    ex = load(out, "exchanges").iloc[0]
    assert (ex["complete"], ex["error"], ex["sse_events"]) == (False, "Client disconnected.", 1)
    assert load(out, "messages")["message_id"].tolist() == ["m-user", "m-agent"]


def test_gzip_sse_is_parsed_but_forwarded_compressed(tap) -> None:
    import gzip

    addon, _, out = tap
    body = gzip.compress(sse_body({"result": {"message": agent_message()}}))
    flow = a2a_flow(
        body=jsonrpc_request("SendStreamingMessage"),
        response=b"",
        content_type="text/event-stream",
        response_headers={"content-encoding": "gzip"},
    )
    addon.request(flow)
    addon.responseheaders(flow)
    assert flow.response.stream(body[:10]) + flow.response.stream(body[10:]) + flow.response.stream(b"") == body
    flow.response.data.content = None
    addon.response(flow)
    addon.done()
    assert load(out, "messages")["coverage"].tolist()[-1] == "answered"


def test_a_bug_in_the_addon_never_reaches_mitmproxy(tap, monkeypatch, caplog) -> None:
    addon, _, _ = tap

    def broken(*args, **kwargs):
        raise RuntimeError("bug")

    monkeypatch.setattr(tap_module, "maybe_a2a", broken)
    caplog.set_level(logging.ERROR)
    for _ in range(3):
        run_hooks(addon, a2a_flow(response=jsonrpc_result({"message": agent_message()})))
    assert addon.counters["hook_failures"] == 3
    assert sum("request hook failed" in r.message for r in caplog.records) == 1


def test_bad_options_fail_at_startup(tap, tmp_path) -> None:
    addon, tctx, _ = tap
    with pytest.raises(exceptions.OptionsError, match="flush_interval"):
        tctx.configure(addon, converse_tap_flush_interval="0")
    (tmp_path / "a-file").write_text("x")
    with pytest.raises(exceptions.OptionsError, match="cannot write its dataset"):
        tctx.configure(addon, converse_tap_dir=str(tmp_path / "a-file"))
    with pytest.raises(exceptions.OptionsError):
        tctx.configure(addon, converse_tap_text="rot13")


def test_a_dataset_whose_journal_folder_is_a_link_is_refused(tap, tmp_path) -> None:
    """The writer followed a symlinked `_journal`: its journals were written (and removed at roll-over) wherever
    the link pointed."""
    addon, tctx, _ = tap
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    root = tmp_path / "linked"
    root.mkdir()
    (root / "_journal").symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(exceptions.OptionsError, match=r"_journal is a symbolic link.*remove the link"):
        tctx.configure(addon, converse_tap_dir=str(root))
    assert list(elsewhere.iterdir()) == []


def test_hash_policy_uses_one_salt_per_dataset(tap) -> None:
    addon, tctx, out = tap
    out = out.with_name("hashed")  # the fixture's dataset is claimed for the keep policy
    tctx.configure(addon, converse_tap_dir=str(out), converse_tap_text="hash")
    run_hooks(addon, a2a_flow(response=jsonrpc_result({"message": agent_message(text="hello")})))
    addon.done()
    salt = (out / "_salt").read_bytes()
    assert len(salt) == 32 and stat.S_IMODE(os.stat(out / "_salt").st_mode) == 0o600
    texts = load(out, "messages")["text"].tolist()
    assert all(t.startswith("sha256:") for t in texts) and "hello" not in json.dumps(texts)


def test_files_are_owner_only(tap) -> None:
    addon, _, out = tap
    run_hooks(addon, a2a_flow(response=jsonrpc_result({"message": agent_message()})))
    addon.done()
    for p in [out, *out.rglob("*")]:
        mode = stat.S_IMODE(os.stat(p).st_mode)
        assert mode & 0o077 == 0, f"{p} is {oct(mode)}"


def test_a_host_that_never_configures_the_addon_still_gets_a_recording(tmp_path, monkeypatch) -> None:
    from mitmproxy.test import taddons

    from converse_tap.addon.tap import ConverseTap

    monkeypatch.chdir(tmp_path)
    addon = ConverseTap()
    with taddons.context(addon):
        assert addon.channel is None
        run_hooks(addon, a2a_flow(response=jsonrpc_result({"message": agent_message()})))
        addon.done()
    assert load(tmp_path / "converse-tap-data", "exchanges")["method"].tolist() == ["SendMessage"]


def test_a_dataset_keeps_one_text_policy_under_mitmdump_too(tap) -> None:
    addon, tctx, _ = tap
    run_hooks(addon, a2a_flow(response=jsonrpc_result({"message": agent_message()})))
    with pytest.raises(exceptions.OptionsError, match=r"'keep' policy, not 'hash'.*converse_tap_text="):
        tctx.configure(addon, converse_tap_text="hash")


def test_grpc_is_tapped_message_by_message_and_forwarded_unchanged(tap) -> None:
    from a2a.types import a2a_pb2 as pb
    from mitmproxy import http

    from tests.factories import grpc_flow, grpc_frame

    addon, _, out = tap
    reply = pb.Message(message_id="a-1", context_id="c", role=pb.ROLE_AGENT, parts=[pb.Part(text="Done")])
    states = [pb.TaskStatus(state=pb.TASK_STATE_WORKING), pb.TaskStatus(state=pb.TASK_STATE_COMPLETED, message=reply)]
    body = b"".join(
        grpc_frame(pb.StreamResponse(status_update=pb.TaskStatusUpdateEvent(task_id="t", context_id="c", status=s)))
        for s in states
    )
    request = pb.SendMessageRequest(
        message=pb.Message(message_id="u-1", role=pb.ROLE_USER, parts=[pb.Part(text="Book it")])
    )
    flow = grpc_flow("SendStreamingMessage", request)
    addon.request(flow)
    addon.responseheaders(flow)
    stream = flow.response.stream
    assert callable(stream)
    forwarded = [stream(body[i : i + 3]) for i in range(0, len(body), 3)] + [stream(b"")]
    assert forwarded[:-1] == [body[i : i + 3] for i in range(0, len(body), 3)] and forwarded[-1] == b""
    flow.response.data.content = None
    flow.response.trailers = http.Headers(grpc_status="0")
    addon.response(flow)
    addon.done()
    ex = load(out, "exchanges").iloc[0]
    assert (ex["binding"], ex["streamed"], ex["sse_events"], ex["task_state"], ex["complete"], ex["bytes_out"]) == (
        "grpc",
        True,
        2,
        "TASK_STATE_COMPLETED",
        True,
        len(body),
    )
    msgs = load(out, "messages").sort_values("seq")
    assert msgs["text"].tolist() == ["Book it", "Done"]
    assert msgs["ts"].iloc[1] >= msgs["ts"].iloc[0]


def test_operator_patterns_reach_mitmproxys_own_log_lines(tap) -> None:
    """mitmproxy logs URLs it could not handle; converse_tap_redact applies to those lines, not only to rows."""
    import io

    from converse_tap.a2a.redact import LogRedactor

    addon, tctx, _ = tap
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        tctx.configure(addon, converse_tap_redact=["tenant=([^&\\s]+)"])
        assert any(isinstance(f, LogRedactor) for f in handler.filters)
        logging.getLogger("mitmproxy.proxy.server").warning("Bad request: http://h/a?tenant=ACME42&x=1")
    finally:
        root.removeHandler(handler)
    line = stream.getvalue()
    assert "ACME42" not in line and "tenant=[REDACTED]&x=1" in line


def test_forced_records_are_small_or_bounded_by_the_backlog(tmp_path: Path) -> None:
    """A stream's start must reach the worker so that its end closes it, so it may pass a full backlog; but it
    carries the request's body (up to converse_tap_max_body): while the worker was behind, a flood of streamed
    requests with large bodies grew the proxy's backlog past its bound without limit. Only records of up to
    FORCED_MAX bytes pass a full backlog now, and starts only up to FORCED_OVERFLOW past it (a flood of streams
    with 60 KB bodies while the worker was stopped grew the proxy by one body per stream, without bound); a
    stream's end always passes."""
    import asyncio

    from converse_tap.addon.channel import FORCED_OVERFLOW, Channel

    config = {
        **{"dir": str(tmp_path / "data"), "text": "keep", "salt": "", "summary": "off"},
        **{"flush_interval": 0.05, "rollover_rows": 1000, "rollover_seconds": 300.0},
        **{"max_body": 1 << 20, "max_events": 100},
    }
    channel = Channel(config, max_backlog=1 << 20)
    channel.start()
    body = b"x" * (256 << 10)
    url = (b"http", "agent.test", 9000, b"/a2a/jsonrpc")
    request = (b"POST", url, b"HTTP/1.1", [], body, len(body), 1.0, None, None, False)
    head = (200, [(b"content-type", b"text/event-stream")], 1.1)

    body60 = b"x" * 60_000
    start60 = (b"POST", url, b"HTTP/1.1", [], body60, len(body60), 1.0, None, None, False)

    async def flood() -> tuple[int, int, int, int, int]:  # all in one turn of the event loop: nothing is written
        while channel.send(("c", "nobody", 1.0, b"y" * 4096)):
            pass
        small = sum(channel.send(("e", f"s-{i}", (None, None), None, False), always=True) for i in range(100))
        large = sum(channel.send(("o", f"o-{i}", request, head), force=True) for i in range(100))
        starts = sum(channel.send(("o", f"m-{i}", start60, head), force=True) for i in range(1_000))
        ends = sum(channel.send(("e", f"m-{i}", (None, None), None, False), always=True) for i in range(starts))
        return small, large, starts, ends, channel._backlog

    try:
        small, large, starts, ends, backlog = asyncio.run(flood())
    finally:
        assert channel.close() == 0
    assert small == 100 and large == 0
    assert 0 < starts <= FORCED_OVERFLOW // 60_000 and ends == starts
    assert backlog <= (1 << 20) + FORCED_OVERFLOW + (100 + ends) * 200


def test_a_stream_whose_start_the_backlog_refuses_is_relayed_and_counted(tap) -> None:
    """With the worker's backlog full, a streamed exchange whose start is too large to force past it is relayed
    untouched and counted as dropped; no end goes to the worker for a stream it never opened."""
    import asyncio

    from tests.factories import jsonrpc_request, sse_body, status_event

    addon, _, out = tap
    text = "x" * (128 << 10)
    body = jsonrpc_request("SendStreamingMessage", {"message": {"messageId": "u", "parts": [{"text": text}]}})
    events = sse_body(status_event("TASK_STATE_COMPLETED"))
    flow = a2a_flow(body=body, response=b"", content_type="text/event-stream")
    channel = addon.channel

    async def hooks() -> list[bytes]:  # one turn of the event loop: the backlog stays full meanwhile
        while channel.send(("c", "nobody", 1.0, b"y" * 4096)):
            pass
        records = channel.stats.records
        addon.request(flow)
        addon.responseheaders(flow)
        relayed = [flow.response.stream(events), flow.response.stream(b"")]
        addon.response(flow)
        assert channel.stats.records == records  # neither start, chunks nor end
        return relayed

    assert asyncio.run(hooks()) == [events, b""]
    addon.done()
    assert addon.counters["exchanges_dropped"] == 1
    assert not (out / "exchanges").exists() or load(out, "exchanges").empty


def test_a_call_with_an_escaped_jsonrpc_key_is_recorded(tap) -> None:
    """`"\\u006asonrpc"` is `"jsonrpc"` to the agent's JSON parser; the proxy's first look searched the raw
    bytes, so the call went through unrecorded."""
    addon, _, out = tap
    body = jsonrpc_request().replace(b'"jsonrpc"', b'"\\u006asonrpc"')
    assert b"jsonrpc" not in body and json.loads(body)["jsonrpc"] == "2.0"
    flow = a2a_flow(
        body=body, headers={"a2a-version": ""}, extensions=False, response=jsonrpc_result({"message": agent_message()})
    )
    run_hooks(addon, flow)
    addon.done()
    ex = load(out, "exchanges")
    assert ex["method"].tolist() == ["SendMessage"]
    assert list(ex["anomalies"].iloc[0]) == ["request_json_disguised", "envelope_not_requested"]


def test_a_client_spoofing_an_agent_reply_moves_no_figure(tap) -> None:
    """Recorded by the addon, reported from the Parquet files: a request whose message claims the agent's role
    and carries an envelope with the message id of the agent's reply (`answered` where the agent said
    `partial`) counted as a reply and overwrote the verdict."""
    from converse_tap.analysis.engine import Engine
    from converse_tap.analysis.report import build_report
    from tests.factories import envelope, user_message

    addon, _, out = tap
    partial = envelope(answerCoverage={"availability": "assessed", "coverage": "partial", "reason": "partial_evidence"})
    run_hooks(addon, a2a_flow(response=jsonrpc_result({"message": agent_message("m-1", env=partial)})))
    spoof = agent_message("m-1", env=envelope())  # role agent, coverage answered, the reply's id
    spoof["contextId"] = "ctx-1"
    flow = a2a_flow(
        body=jsonrpc_request(params={"message": spoof}), response=jsonrpc_result({"message": user_message()})
    )
    flow.request.timestamp_start += 60
    run_hooks(addon, flow)
    addon.done()
    assert load(out, "messages")["direction"].tolist().count("request") == 2  # both requests were recorded
    report = build_report(Engine.over_dataset(out))
    coverage = {k: v["count"] for k, v in report["coverage"]["by_coverage"].items() if v["count"]}
    assert coverage == {"partial": 1}


def test_records_the_proxy_drops_are_written_down_and_reported(tmp_path: Path) -> None:
    """While the worker was behind, records the proxy dropped were counted in its log and nowhere else: a report
    over the dataset gave its figures as if the capture were whole. Now each loss becomes a `capture_gaps` row,
    and the report says how many records were lost, when and why."""
    import asyncio

    from converse_tap.addon.channel import Channel
    from converse_tap.addon.tap import ConverseTap, _response_head
    from converse_tap.analysis.engine import Engine
    from converse_tap.analysis.report import build_report

    config = {
        **{"dir": str(tmp_path / "data"), "text": "keep", "salt": "", "summary": "off"},
        **{"flush_interval": 0.05, "rollover_rows": 1000, "rollover_seconds": 300.0},
        **{"max_body": 1 << 20, "max_events": 100},
    }
    tap = ConverseTap()
    records = []
    for i in range(200):
        flow = a2a_flow(response=jsonrpc_result({"message": agent_message(f"m-{i}")}))
        flow.id = f"flow-{i}"
        resp = flow.response
        response = (*_response_head(resp), resp.timestamp_end, resp.raw_content, len(resp.raw_content or b""))
        records.append(("x", flow.id, tap._request(flow), response, None))
    channel = Channel(config, max_backlog=64 << 10)
    channel.start()

    async def burst() -> int:  # one turn of the event loop: nothing reaches the pipe meanwhile
        sent = sum(channel.send(r) for r in records)
        channel.send(("e", "nobody", (None, None), None, False), always=True)  # a later record carries the note
        return sent

    try:
        sent = asyncio.run(burst())
    finally:
        assert channel.close() == 0
    dropped = len(records) - sent
    assert 0 < dropped == channel.stats.dropped
    gaps = load(tmp_path / "data", "capture_gaps")
    assert (gaps["reason"].astype(str).tolist(), gaps["records"].tolist()) == (["recorder_backlog_full"], [dropped])
    assert len(load(tmp_path / "data", "exchanges")) == sent
    notes = build_report(Engine.over_dataset(tmp_path / "data"))["dataset"]["notes"]
    assert any(f"the recorder lost {dropped} capture records between " in n for n in notes), notes


def test_capture_gaps_are_a_view_of_sql(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from converse_tap.cli import cli
    from converse_tap.store.gaps import CaptureGap
    from converse_tap.store.writer import DatasetWriter

    writer = DatasetWriter(tmp_path, flush_interval=60)
    writer.start()
    writer.submit(CaptureGap("worker_died", 12, 3400, 1.0e9, 1.0e9 + 5))
    writer.close()
    query = "SELECT reason, records FROM capture_gaps"
    result = CliRunner().invoke(cli, ["sql", str(tmp_path), query, "--format", "csv"])
    assert (result.exit_code, result.stdout) == (0, "reason,records\nworker_died,12\n"), result.output
    # an --agent this dataset never saw is refused (as report refuses it); that --agent leaves capture_gaps whole is
    # tests/test_cli_unknown_agent.py's, over a dataset with an agent
    result = CliRunner().invoke(cli, ["sql", str(tmp_path), query, "--format", "csv", "--agent", "a"])
    assert (result.exit_code, result.stdout) == (2, ""), result.output
    assert "never saw this agent" in result.stderr


def test_records_lost_with_a_dead_worker_are_written_down_by_the_next(tmp_path: Path) -> None:
    """A worker killed with records queued for it, and records refused while none ran: the next worker writes
    both losses into the dataset."""
    import os
    import signal

    from converse_tap.addon.channel import Channel

    config = {
        **{"dir": str(tmp_path / "data"), "text": "keep", "salt": "", "summary": "off"},
        **{"flush_interval": 0.05, "rollover_rows": 1000, "rollover_seconds": 300.0},
        **{"max_body": 1 << 20, "max_events": 100},
    }
    channel = Channel(config)
    channel.start()
    proc = channel._proc
    assert proc is not None
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    record = ("e", "nobody", (None, None), None, False)  # a stream end the worker never saw open: no rows
    assert channel.send(record)  # queued, then found dead on the write: lost with the worker
    assert not channel.send(record)  # no worker during the back-off: refused
    channel._down_until = 0.0  # the back-off is over
    assert channel.send(record)  # a new worker, which is told what was lost
    assert channel.close() == 0
    gaps = load(tmp_path / "data", "capture_gaps").sort_values("reason")
    assert (gaps["reason"].astype(str).tolist(), gaps["records"].tolist()) == (["worker_died", "worker_down"], [1, 1])


def test_a_stream_cut_mid_event_is_recorded_alike_live_and_from_a_capture(tap) -> None:
    """Live, the recorder keeps back an event a connection error cut; ingest of the same flow dispatched it (one
    event more and an invalid_json anomaly): the two records of one exchange disagreed."""
    from converse_tap.a2a.extract import extract
    from converse_tap.a2a.redact import TextPolicy
    from converse_tap.addon.flows import exchange_from_flow

    addon, _, out = tap
    first = sse_body({"result": {"statusUpdate": {"taskId": "t", "status": {"state": "TASK_STATE_WORKING"}}}})
    body = first + b'data: {"result": {"statusUp'
    flow = a2a_flow(body=jsonrpc_request("SendStreamingMessage"), response=b"", content_type="text/event-stream")
    addon.request(flow)
    addon.responseheaders(flow)
    flow.response.stream(body)
    flow.response.data.content = None
    flow.error = tflow.terr("Client disconnected.")
    addon.error(flow)
    addon.done()
    live = load(out, "exchanges").iloc[0]
    saved = a2a_flow(body=jsonrpc_request("SendStreamingMessage"), response=body, content_type="text/event-stream")
    saved.error = tflow.terr("Client disconnected.")
    ingested = extract(exchange_from_flow(saved), TextPolicy())
    assert ingested is not None
    row = ingested.exchange
    assert (row["sse_events"], list(row["anomalies"])) == (live["sse_events"], list(live["anomalies"])) == (1, [])


def test_close_stops_a_worker_that_is_stopped_or_stuck(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker stopped (SIGSTOP), or stuck in I/O, never acts on SIGTERM: Ctrl-C waited for it forever. It is
    killed after a bounded wait, and the proxy's close returns."""
    import os
    import signal
    import time

    from converse_tap.addon import channel as channel_module

    monkeypatch.setattr(channel_module, "KILL_AFTER", 0.5)
    config = {
        **{"dir": str(tmp_path / "data"), "text": "keep", "salt": "", "summary": "off"},
        **{"flush_interval": 0.05, "rollover_rows": 1000, "rollover_seconds": 300.0},
        **{"max_body": 1 << 20, "max_events": 100},
    }
    channel = channel_module.Channel(config)
    channel.start()
    assert channel.pid is not None
    os.kill(channel.pid, signal.SIGSTOP)
    started = time.monotonic()
    code = channel.close(timeout=0.5)
    assert code == -signal.SIGKILL
    assert time.monotonic() - started < 30  # (bounded: it never returned before)


def test_an_option_changed_at_run_time_never_waits_for_the_old_worker(tap) -> None:
    """Changing a `converse_tap_*` option replaces the recording worker. The old one was closed on the event loop:
    0.3-0.5 s of every flow waiting while it wrote its files, and with a worker stopped or stuck, minutes. It
    finishes in a thread of its own now, and its rows still reach the dataset."""
    import os
    import signal
    import threading
    import time

    addon, tctx, out = tap
    run_hooks(addon, a2a_flow(response=jsonrpc_result({"message": agent_message("before")})))
    old = addon.channel
    assert old is not None and old.pid is not None
    os.kill(old.pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        tctx.configure(addon, converse_tap_flush_interval="2")
        took = time.monotonic() - started
    finally:
        os.kill(old.pid, signal.SIGCONT)
    assert addon.channel is not old and took < 5, took  # (a stopped worker held it 60 s and more)
    run_hooks(addon, a2a_flow(response=jsonrpc_result({"message": agent_message("after")})))
    addon.done()
    for t in threading.enumerate():
        if t.name == "converse-tap-close":
            t.join(60)
    replies = load(out, "messages").query("direction == 'response'")["message_id"]
    assert sorted(replies) == ["after", "before"]
