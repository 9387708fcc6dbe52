from mitmproxy.test import tflow

from converse_tap.a2a.extract import extract
from converse_tap.a2a.redact import TextPolicy
from converse_tap.addon.flows import exchange_from_flow
from converse_tap.addon.summary import summary_lines
from tests.factories import a2a_flow, agent_message, envelope, jsonrpc_result

ROUTINE = {
    "name": "Book a table",
    "status": "waiting_for_input",
    "pendingInput": [
        {"key": "date", "type": "string", "required": True},
        {"key": "notes", "type": "string", "required": False},
    ],
}


def _ext(env):
    task = {
        "id": "t",
        "contextId": "c",
        "status": {"state": "TASK_STATE_INPUT_REQUIRED", "message": agent_message(env=env)},
    }
    out = extract(exchange_from_flow(a2a_flow(response=jsonrpc_result({"task": task}))), TextPolicy())
    assert out is not None
    return out


def test_one_line_per_exchange_and_one_per_reply() -> None:
    ext = _ext(envelope(routine=ROUTINE, invocation={"toolName": "book_table", "outcome": "started"}))
    assert summary_lines(ext, "exchanges") == [
        "A2A agent.test:9000/a2a/jsonrpc SendMessage [jsonrpc v1.0] 200 -> input_required | answered | by agent"
        " | Book a table: waiting_for_input (date) | call book_table: started"
    ]
    assert summary_lines(ext, "replies")[1] == (
        "    reply m-agent: answered | by agent | Book a table: waiting_for_input (date) | call book_table: started"
    )
    assert summary_lines(ext, "off") == []


def test_anomalies_are_counted_in_the_line() -> None:
    assert summary_lines(_ext(envelope(author="robot")), "exchanges")[0].endswith("| 1 anomaly")


def test_addon_prints_lines_for_a2a_only(tap, capfd) -> None:
    """The recording worker prints the lines on the stderr it shares with mitmproxy (stdout stays for data)."""
    addon, tctx, _ = tap
    tctx.configure(addon, converse_tap_summary="off")  # each change starts a new worker: this one
    tctx.configure(addon, converse_tap_summary="exchanges")  # is started while capfd listens
    for flow in (tflow.tflow(resp=True), a2a_flow(response=jsonrpc_result({"message": agent_message()}))):
        addon.request(flow)
        addon.responseheaders(flow)
        addon.response(flow)
    addon.done()
    out = capfd.readouterr().err
    lines = [line for line in out.splitlines() if line.startswith("A2A ")]
    assert lines == ["A2A agent.test:9000/a2a/jsonrpc SendMessage [jsonrpc v1.0] 200 | answered | by agent"]
    assert "converse-tap: 1 A2A exchanges, 1 envelope sightings" in out


def test_values_from_the_wire_are_cut_in_the_line() -> None:
    """A line quotes the agent, the method, the error message, routine names…: strings of the wire's making, so
    each summary line of an exchange with a 1 MB error message was a megabyte of log (and six once escaped)."""
    from converse_tap.addon.summary import MAX_VALUE

    long = "\x1b" * 1_000_000
    routine = {**ROUTINE, "name": "R" * 100_000, "pendingInput": [{"key": "k" * 100_000, "required": True}]}
    ext = _ext(envelope(routine=routine))
    ext.exchange.update(method="M" * 100_000, error_code=-32000, error_message=long)
    ext.messages[-1]["message_id"] = "i" * 100_000
    lines = summary_lines(ext, "replies")
    assert len(lines) == 2 and all(len(line) < 12 * MAX_VALUE for line in lines)
    assert "M" * MAX_VALUE + "…" in lines[0] and "\\x1b" * MAX_VALUE + "…" in lines[0]
    assert f"{'R' * MAX_VALUE}…: waiting_for_input ({'k' * MAX_VALUE}…)" in lines[1]
