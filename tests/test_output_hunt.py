"""Outputs fed by the wire, each test one defect found by feeding crafted A2A exchanges through the real extractor
(wire -> dataset -> output). Marked xfail(strict) until fixed: each asserts what the output should do."""

from __future__ import annotations

import json
import os
import re
import shlex
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from converse_tap.analysis import Engine, build_report
from converse_tap.analysis.render import to_markdown, to_text
from converse_tap.analysis.tables import report_sections
from tests.cli_helpers import invoke
from tests.factories import (
    EXT,
    a2a_flow,
    agent_message,
    envelope,
    jsonrpc_request,
    jsonrpc_result,
    user_message,
    write_dataset,
)

ANSWERED = {"availability": "assessed", "coverage": "answered"}
UNANSWERED = {"availability": "assessed", "coverage": "unanswered", "reason": "no_evidence"}


def _flow(
    mid: str,
    env: dict[str, Any] | None,
    minute: int = 0,
    *,
    ctx: str = "ctx-1",
    path: str = "/a2a/jsonrpc",
    text: str = "reply",
    user_text: str = "hi",
    user_mid: str | None = None,
) -> Any:
    """A SendMessage exchange: a user message and the agent's reply (with `env` as its converse envelope)."""
    reply = agent_message(mid, text=text, env=envelope(**env) if env is not None else None)
    reply["contextId"] = ctx
    asked = user_message(user_mid or f"u-{mid}", text=user_text)
    asked["contextId"] = ctx
    flow = a2a_flow(
        path=path,
        body=jsonrpc_request(params={"message": asked, "configuration": {}}),
        response=jsonrpc_result({"message": reply}),
    )
    for m in (flow.request, flow.response):
        assert m is not None
        m.timestamp_start += minute * 60
        m.timestamp_end = m.timestamp_start
    return flow


def _card(path: str, card: dict[str, Any] | str) -> Any:
    body = card if isinstance(card, str) else json.dumps(card)
    return a2a_flow(method="GET", path=path, response=body.encode())


def _write(out: Path, flows: list[Any]) -> Path:
    return Path(write_dataset(out, flows))


def _report(root: Path, *args: str) -> dict[str, Any]:
    r = invoke("report", str(root), "--format", "json", *args)
    assert r.exit_code == 0, r.stderr
    data: dict[str, Any] = json.loads(r.stdout)
    return data


def _no_nan(text: str) -> Any:
    def refuse(constant: str) -> Any:
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


# -- integrity: one party's wire values change what is reported about another -----------------------------------


def test_an_agent_cannot_erase_another_agents_reply_by_reusing_its_message_id(tmp_path: Path) -> None:
    root = _write(
        tmp_path / "d",
        [
            _flow("m1", {"answerCoverage": ANSWERED}, 0, ctx="c-alpha", path="/agents/alpha/a2a"),
            _flow("m1", {"answerCoverage": UNANSWERED}, 1, ctx="c-beta", path="/agents/beta/a2a"),
        ],
    )
    report = _report(root, "--by", "agent")
    agents = report["groups"]["agent"]
    assert "agent.test:9000/agents/alpha/a2a" in agents, sorted(agents)  # today: alpha vanished from the report
    assert report["coverage"]["turns_assessed"] == 2


def test_a_client_cannot_rewrite_an_agents_reply_in_the_transcript(tmp_path: Path) -> None:
    root = _write(
        tmp_path / "d",
        [
            _flow("m1", {"answerCoverage": UNANSWERED}, 0, ctx="c1", text="I cannot approve refunds."),
            # a later request whose user message reuses the reply's id
            _flow("m2", None, 1, ctx="c1", text="ok", user_text="Refund approved: 500 EUR.", user_mid="m1"),
        ],
    )
    r = invoke("show", str(root), "c1")
    assert r.exit_code == 0
    # today the agent's words are gone; the client's text is shown as "user (by agent)" with the reply's envelope
    assert "I cannot approve refunds." in r.stdout, r.stdout


def test_report_examples_show_the_agents_reply_not_a_client_message_with_its_id(tmp_path: Path) -> None:
    root = _write(
        tmp_path / "d",
        [
            _flow("m1", {"answerCoverage": UNANSWERED}, 0, ctx="c1", text="I cannot approve refunds."),
            _flow("m2", None, 1, ctx="c1", text="ok", user_text="Refund approved: 500 EUR.", user_mid="m1"),
        ],
    )
    report = _report(root, "--examples", "3")
    (example,) = report["examples"]["coverage"]["unanswered"]
    assert example["text"] == "I cannot approve refunds.", example


def test_transcript_text_cannot_forge_envelope_lines(tmp_path: Path) -> None:
    forged = "coverage: assessed / answered / sufficient_evidence (turn turn-1)"
    root = _write(
        tmp_path / "d",
        [_flow("m1", {"answerCoverage": UNANSWERED}, 0, ctx="c1", text=f"Sorry, I cannot help.\n{forged}")],
    )
    r = invoke("show", str(root), "c1")
    assert r.exit_code == 0
    assert f"    {forged}" not in r.stdout.splitlines(), r.stdout


def test_show_text_hash_hashes_every_text(tmp_path: Path) -> None:
    secret = "sha256: my card is 4111 1111 1111 1111, pin 1234"
    root = _write(tmp_path / "d", [_flow("m1", {"answerCoverage": ANSWERED}, 0, ctx="c1", user_text=secret)])
    for fmt in ("text", "json"):
        r = invoke("show", str(root), "c1", "--text", "hash", "--format", fmt)
        assert r.exit_code == 0
        assert "4111" not in r.stdout, r.stdout


# -- exactness: distinct values counted or shown as one -----------------------------------------------------------


def test_a_value_spelled_none_is_not_merged_with_missing_values(tmp_path: Path) -> None:
    root = _write(
        tmp_path / "d",
        [
            _flow("m1", {"answerCoverage": {**ANSWERED, "originatingTurnId": "t1"}}, 0, ctx="c1"),  # no reason
            _flow("m2", {"answerCoverage": {**ANSWERED, "originatingTurnId": "t2", "reason": "(none)"}}, 1, ctx="c2"),
        ],
    )
    reasons = _report(root)["coverage"]["by_reason"]
    assert len(reasons) == 2, reasons  # today {"(none)": {"count": 2, ...}}


def test_routine_slot_and_document_spelled_none_are_not_merged_with_missing_ones(tmp_path: Path) -> None:
    """The report's other keys of counted values: a routine, an abandoned-at slot and a cited document whose name
    on the wire is `(none)` are counted apart from replies without a routine, a slot without a key and a citation
    without a document id (and the examples behind each abandoned-at row are its own)."""

    def env(name: str | None, status: str, slot: Any = "k", doc: str | None = "d") -> dict[str, Any]:
        routine = {"status": status, "pendingInput": [{"key": slot, "required": True}] if slot != "-" else []}
        if name is not None:
            routine["name"] = name
        citation = {"title": "t"} if doc is None else {"documentId": doc, "title": "t"}
        return {"routine": routine, "citations": [citation]}

    root = _write(
        tmp_path / "d",
        [
            _flow("m1", env("(none)", "waiting_for_input", "(none)", "(none)"), 0, ctx="c1"),
            _flow("m2", env("(none)", "abandoned", "-"), 1, ctx="c1"),
            _flow("m3", env("r", "waiting_for_input", None, None), 2, ctx="c2"),
            _flow("m4", env("r", "abandoned", "-"), 3, ctx="c2"),
            _flow("m5", {"answerCoverage": ANSWERED}, 4, ctx="c3"),  # no routine
        ],
    )
    report = _report(root, "--by", "routine", "--examples", "3")
    assert {'"(none)"', "r", "(none)"} <= set(report["groups"]["routine"]), sorted(report["groups"]["routine"])
    slots = {(r["routine"], r["slot"]): r["abandoned"] for r in report["routines"]["abandoned_at"]}
    assert slots == {('"(none)"', '"(none)"'): 1, ("r", "(none)"): 1}, slots
    docs = {r["document_id"]: r["replies"] for r in report["citations"]["most_cited"]}
    assert docs['"(none)"'] == 1 and docs["(none)"] == 1, docs


def test_abandoned_at_examples_belong_to_their_own_row(tmp_path: Path) -> None:
    def status(name: str, st: str, slot: str | None = None) -> dict[str, Any]:
        pending = [{"key": slot, "required": True}] if slot else []
        return {"routine": {"name": name, "status": st, "pendingInput": pending}}

    root = _write(
        tmp_path / "d",
        [
            _flow("m1", status("a/b", "waiting_for_input", "c"), 0, ctx="c5"),
            _flow("m2", status("a/b", "abandoned"), 1, ctx="c5"),
            _flow("m3", status("a", "waiting_for_input", "b/c"), 2, ctx="c6"),
            _flow("m4", status("a", "abandoned"), 3, ctx="c6"),
        ],
    )
    with Engine.over_dataset(root) as engine:
        report = build_report(engine, examples=5)
    (table,) = [t for s in report_sections(report) for t in s.tables if t.title.startswith("Required input")]
    for i, row in enumerate(table.rows):
        shown = {e["conversation"] for e in table.examples.get(i, [])}
        assert len(shown) <= row[2], (row, shown)  # today each row's count "1" opens both conversations


# -- JSON validity ----------------------------------------------------------------------------------------------


def test_agents_json_is_json_for_a_card_without_mcp_urls(tmp_path: Path) -> None:
    card = {
        "name": "Conv agent",
        "capabilities": {"extensions": [{"uri": EXT, "params": {"mcp": {"url": "https://m.test/"}, "tools": []}}]},
        "skills": [{"id": "s"}],
    }
    root = _write(
        tmp_path / "d",
        [
            _card("/agents/p/.well-known/agent-card.json", {"name": "Plain agent", "skills": [{"id": "s"}]}),
            _card("/agents/q/.well-known/agent-card.json", card),
        ],
    )
    r = invoke("agents", str(root), "--format", "json")
    assert r.exit_code == 0
    _no_nan(r.stdout)
    assert "nan" not in invoke("agents", str(root)).stdout


def test_agents_json_is_json_whatever_numbers_a_tool_schema_holds(tmp_path: Path) -> None:
    schema = '{"type":"object","required":["a"],"properties":{"a":{"maximum":1e999,"minimum":-1e999,"x":NaN}}}'
    tool = '{"toolName":"t","inputSchema":' + schema + "}"
    mcp = '{"url":"https://m.test/","serverCardUrl":"https://m.test/card"}'
    extension = '{"uri":"' + EXT + '","params":{"mcp":' + mcp + ',"tools":[' + tool + "]}}"
    card = '{"name":"c","capabilities":{"extensions":[' + extension + ']},"skills":[{"id":"t"}]}'
    root = _write(tmp_path / "d", [_card("/agents/x/.well-known/agent-card.json", card)])
    r = invoke("agents", str(root), "--format", "json")
    assert r.exit_code == 0
    _no_nan(r.stdout)


# -- terminal ---------------------------------------------------------------------------------------------------


def test_check_suggests_a_show_command_that_is_safe_to_paste(tmp_path: Path) -> None:
    conversation = "c1;touch${IFS}/tmp/pwned"
    root = _write(tmp_path / "d", [_flow("m1", {"answerCoverage": UNANSWERED}, 0, ctx=conversation)])
    r = invoke("check", str(root), "--max-unanswered-share", "0")
    assert r.exit_code == 1
    (hint,) = [line.split("open one: ", 1)[1] for line in r.stdout.splitlines() if "open one: " in line]
    # pasted into a shell, it must run `show` of that conversation and nothing else
    words = list(shlex.shlex(hint, posix=True, punctuation_chars=True))  # `;` ends a command, as in a shell
    assert words == ["converse-tap", "show", str(root), conversation], hint


def test_the_suggested_show_command_opens_a_conversation_whose_id_looks_like_an_option(tmp_path: Path) -> None:
    """An id starting with `-` (`--format=json`) is read by `show` as an option when pasted; after `--` it is the
    conversation, and the command runs and opens it."""
    conversation = "--format=json"
    root = _write(tmp_path / "d", [_flow("m1", {"answerCoverage": UNANSWERED}, 0, ctx=conversation)])
    r = invoke("check", str(root), "--max-unanswered-share", "0")
    (hint,) = [line.split("open one: ", 1)[1] for line in r.stdout.splitlines() if "open one: " in line]
    words = shlex.split(hint)
    assert words[:3] == ["converse-tap", "show", str(root)] and words[3:] == ["--", conversation], hint
    shown = invoke(*words[1:])
    assert shown.exit_code == 0 and shown.stdout.startswith(f"conversation {conversation} "), shown.stdout[:200]


def test_check_junit_printed_to_a_terminal_holds_no_c1_control_or_bidi_override(tmp_path: Path) -> None:
    text = "hello \x9b31m\u202egnp.exe bye"
    root = _write(tmp_path / "d", [_flow("m1", {"answerCoverage": UNANSWERED}, 0, ctx="c\x9b2J\u202e", text=text)])
    r = invoke("check", str(root), "--max-unanswered-share", "0", "--format", "junit")
    assert r.exit_code == 1 and "<failure" in r.stdout
    assert "\x9b" not in r.stdout and "\u202e" not in r.stdout


def _routines(tmp_path: Path, names: list[str]) -> Path:
    flows = [
        _flow(f"m{i}", {"routine": {"name": n, "status": "completed"}}, i, ctx=f"c{i}") for i, n in enumerate(names)
    ]
    return _write(tmp_path / "d", flows)


def test_text_report_shows_invisible_characters(tmp_path: Path) -> None:
    invisible = ["book\u200b_table", "pay\U000e0069\U000e0067\U000e006e", "x\u2060y", "z\ufeff"]
    root = _routines(tmp_path, ["book_table", *invisible])
    out = invoke("report", str(root)).stdout
    for name in invisible:
        hidden = [c for c in name if unicodedata.category(c) == "Cf"]
        assert not [c for c in hidden if c in out], name


def test_text_report_tells_a_control_character_from_its_escape_spelled_out(tmp_path: Path) -> None:
    root = _routines(tmp_path, ["lit\x1b[2J", "lit\\x1b[2J"])
    rows = [line for line in invoke("report", str(root)).stdout.splitlines() if line.startswith("lit")]
    assert len(rows) == 2 and rows[0].split()[0] != rows[1].split()[0], rows


def _columns(line: str) -> int:
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


def test_text_report_fits_the_terminal_with_wide_characters(tmp_path: Path) -> None:
    root = _routines(tmp_path, ["予約する" * 10, "book"])
    with Engine.over_dataset(root) as engine:
        report = build_report(engine)
    lines = to_text(report, width=80).splitlines()
    assert max(_columns(line) for line in lines) <= 80, [line for line in lines if _columns(line) > 80]


def test_one_long_value_does_not_multiply_the_text_report(tmp_path: Path) -> None:
    long_name = "N" * 100_000
    flows = [_flow("m1", {"answerCoverage": ANSWERED}, 0, ctx="c1")]
    for i in range(30):
        card = {"name": long_name if i == 0 else f"agent {i}", "skills": [{"id": "s"}]}
        flows.append(_card(f"/agents/a{i:02d}/.well-known/agent-card.json", card))
    root = _write(tmp_path / "d", flows)
    for args in (
        ["report", str(root)],
        ["sql", str(root), "SELECT agent, name, source FROM agent_cards", "--format", "table"],
    ):
        size = len(invoke(*args).stdout)
        assert size < 500_000, (args[0], size)  # today ~30 x 100 kB: each row padded to it


# -- Markdown ---------------------------------------------------------------------------------------------------


def test_markdown_makes_no_link_of_a_url_in_the_data(tmp_path: Path) -> None:
    from markdown_it import MarkdownIt

    env = {
        "answerCoverage": ANSWERED,
        "citations": [{"documentId": "d1", "title": "https://evil.example/phish urgent"}],
    }
    root = _write(tmp_path / "d", [_flow("m1", env, 0, ctx="c1")])
    with Engine.over_dataset(root) as engine:
        md = to_markdown(build_report(engine))
    html = MarkdownIt("commonmark", {"html": True, "linkify": True}).enable(["table", "linkify"]).render(md)
    assert "<a " not in html, [line for line in html.splitlines() if "<a " in line]


# -- HTML -------------------------------------------------------------------------------------------------------


def test_html_chart_labels_tell_agents_apart(tmp_path: Path) -> None:
    prefix = "ag_" + "x" * 31  # 34 characters
    turn = {"answerCoverage": {**ANSWERED, "originatingTurnId": "t1"}}
    root = _write(
        tmp_path / "d",
        [
            _flow("m1", turn, 0, ctx="c1", path=f"/agents/{prefix}-real"),
            _flow("m2", {"answerCoverage": UNANSWERED}, 1, ctx="c2", path=f"/agents/{prefix}-fake"),
        ],
    )
    out = tmp_path / "r.html"
    assert invoke("report", str(root), "--by", "agent", "--format", "html", "-o", str(out)).exit_code == 0
    chart = out.read_text().split("Coverage of assessed turns, per agent", 1)[1].split("</svg>", 1)[0]
    labels = re.findall(r'<text x="214"[^>]*>([^<]*)</text>', chart)
    assert len(labels) == 2 and labels[0] != labels[1], labels


# -- notebook ---------------------------------------------------------------------------------------------------


def test_notebook_charts_survive_a_routine_name_with_dollar_signs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    root = _write(
        tmp_path / "d",
        [
            _flow("m1", {"routine": {"name": "$\\undefinedmacro$", "status": "completed"}}, 0, ctx="c1"),
            _flow("m2", {"routine": {"name": "book", "status": "abandoned"}}, 1, ctx="c2"),
        ],
    )
    monkeypatch.setenv("CONVERSE_TAP_DATASET", str(root))
    notebook = json.loads((Path(__file__).parents[1] / "notebooks" / "converse_report.ipynb").read_text())

    def show(*_: Any, **__: Any) -> None:  # render what the notebook would show
        for n in plt.get_fignums():
            plt.figure(n).canvas.draw()
        plt.close("all")

    monkeypatch.setattr(plt, "show", show)
    namespace: dict[str, Any] = {"display": lambda *_, **__: None}
    cwd = os.getcwd()
    try:
        os.chdir(tmp_path)
        for cell in notebook["cells"]:
            if cell["cell_type"] == "code":
                exec(compile("".join(cell["source"]), "notebook", "exec"), namespace)
    finally:
        os.chdir(cwd)
        plt.close("all")
