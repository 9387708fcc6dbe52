"""Terminal-safe text: nothing from the wire can move the cursor, retitle the window, erase a line or reorder it."""

from __future__ import annotations

import ast
import json
import unicodedata
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from converse_tap import textsafe
from converse_tap.a2a.extract import extract
from converse_tap.a2a.redact import TextPolicy
from converse_tap.addon.flows import exchange_from_flow
from converse_tap.addon.summary import summary_lines
from converse_tap.textsafe import is_terminal_safe, json_safe, safe_line, safe_text
from tests.factories import a2a_flow, agent_message, envelope, jsonrpc_result

UNSAFE = [chr(c) for c in [*range(0x20), *range(0x7F, 0xA0)]]
UNSAFE += ["\u061c", "\u200e", "\u200f", "\u2028", "\u2029", *map(chr, range(0x202A, 0x202F))]
UNSAFE += [*map(chr, range(0x2066, 0x206A)), "\ud800", "\udfff"]
# invisible: every format character (Cf: zero-width space and joiners, word joiner, BOM, soft hyphen, tags, ...)
FORMAT = [chr(c) for c in range(0x110000) if unicodedata.category(chr(c)) == "Cf"]
UNSAFE += [*FORMAT, "\\"]  # and the backslash, doubled so that an escape is never the same as its spelling


def test_every_unsafe_character_becomes_a_visible_escape() -> None:
    for ch in UNSAFE:
        out = safe_line(f"a{ch}b")
        assert out.startswith("a\\") and out.endswith("b") and is_terminal_safe(out), repr(ch)
    assert safe_line("\x1b[2J\x07\r\n\t\x9b1m\u202e") == "\\x1b[2J\\x07\\r\\n\\t\\x9b1m\\u202e"
    assert safe_text("one\ttwo\nthree\r\x1b") == "one\ttwo\nthree\\r\\x1b"  # layout kept, CR is not


def test_invisible_characters_and_escapes_spelled_out_are_told_apart() -> None:
    assert all(safe_line(ch).startswith("\\") for ch in FORMAT), "a format character of this Unicode is not escaped"
    assert safe_line("book\u200b_table \U000e0069 \xad\ufeff") == "book\\u200b_table \\U000e0069 \\xad\\ufeff"
    assert safe_line("lit\x1b[2J") != safe_line("lit\\x1b[2J") == "lit\\\\x1b[2J"
    assert safe_text("a\\b\x1b", backslash=False) == "a\\b\\x1b"  # for text whose values were escaped already


@given(st.text())
def test_output_is_always_safe_and_printable_text_unchanged(s: str) -> None:
    assert is_terminal_safe(safe_line(s)) and is_terminal_safe(safe_text(s), multiline=True)
    if not any(ch in UNSAFE for ch in s):
        assert safe_line(s) == s


def test_textsafe_imports_nothing_from_the_project() -> None:
    tree = ast.parse(Path(textsafe.__file__).read_text())
    imported = [n.module or "" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    imported += [a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
    assert not [m for m in imported if m.startswith(("converse_tap", "."))] and all(
        m in ("__future__", "re") for m in imported
    )


def test_live_lines_escape_what_the_wire_said() -> None:
    evil = "\x1b]0;owned\x07\x1b[2K\rfake line\u202e"
    env = envelope(routine={"toolName": evil, "name": evil, "status": "waiting_for_input"}, author=evil)
    body = json.loads(jsonrpc_result({"message": agent_message(evil, env=env)}))
    flow = a2a_flow(path="/a2a/\x1b[31m", response=json.dumps(body).encode())
    ext = extract(exchange_from_flow(flow), TextPolicy())
    assert ext is not None
    lines = summary_lines(ext, "replies")
    assert len(lines) == 2 and all(is_terminal_safe(line) for line in lines)
    assert "\\x1b]0;owned\\x07\\x1b[2K\\rfake line\\u202e" in lines[1]


@settings(derandomize=True, max_examples=300)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(), lambda c: st.lists(c) | st.dictionaries(st.text(), c)
    )
)
def test_json_safe_keeps_the_value_and_is_safe_to_print(value: object) -> None:
    text = json_safe(json.dumps(value, ensure_ascii=False))
    assert json.loads(text) == value
    assert is_terminal_safe(text, multiline=True)
