"""The extractor's fast paths give what the definitions they stand in for give, whatever the input: a message's
text and part kinds in one pass, the trace ids, extension URIs remembered per header value, the two header names
looked up at once, and the wire text and keys of rows where nothing is to be done."""

from __future__ import annotations

import hashlib
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from converse_tap.a2a.constants import CONVERSE_URI, MAX_URIS
from converse_tap.a2a.headers import Headers, split_uris
from converse_tap.a2a.objects import part_kind, parts_of, text_and_kinds, text_of
from converse_tap.a2a.redact import NO_OPERATOR_PATTERNS, Redaction
from converse_tap.a2a.rows import Extraction
from converse_tap.a2a.traceparent import own_trace_id, span_id_for, trace_columns, trace_ids
from converse_tap.a2a.wiretext import MAX_KEY, bound_keys, bounded_key, redact_wire_text


class _Dict(dict[str, Any]):
    """A dict of another class: the fast paths must leave it to the definitions."""


_VALUES = st.one_of(st.none(), st.text(max_size=5), st.integers(), st.booleans(), st.lists(st.integers(), max_size=2))
_PART = st.one_of(
    st.dictionaries(st.sampled_from(["text", "kind", "data", "raw", "url", "file", "x"]), _VALUES, max_size=4),
    st.builds(_Dict, st.dictionaries(st.sampled_from(["text", "kind"]), _VALUES, max_size=2)),
    _VALUES,
)


@given(st.one_of(st.none(), st.lists(_PART, max_size=5), _VALUES), st.sampled_from(["parts", "content"]))
def test_text_and_kinds_is_parts_of_then_text_of_and_part_kind(parts: Any, key: str) -> None:
    obj = {} if parts is None else {key: parts}
    want_notes: list[str] = []
    want_parts = parts_of(obj, want_notes)
    got_notes: list[str] = []
    assert text_and_kinds(obj, got_notes) == (text_of(want_parts), [part_kind(p) for p in want_parts])
    assert got_notes == want_notes


def _derived(kind: bytes, exchange_id: str, nbytes: int) -> str:
    value = hashlib.sha256(b"converse-tap " + kind + b" " + exchange_id.encode("utf-8", "surrogateescape"))
    raw = value.digest()[:nbytes]
    return (raw if any(raw) else b"\x01" + raw[1:]).hex()


@given(
    st.text(max_size=40),
    st.lists(
        st.sampled_from(
            [
                "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
                "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                "not a traceparent",
            ]
        ),
        max_size=2,
    ),
)
def test_trace_ids_are_the_ids_derived_from_the_exchange_id(exchange_id: str, parents: list[str]) -> None:
    headers = Headers([("traceparent", p) for p in parents])
    trace_id, span_id, parent = trace_ids(headers, exchange_id)
    assert span_id == span_id_for(exchange_id) == _derived(b"span", exchange_id, 8)
    if parent is None:
        assert trace_id == own_trace_id(exchange_id) == _derived(b"trace", exchange_id, 16)
    else:
        assert len(parents) == 1 and parents[0].startswith("00-4bf9") and (trace_id, parent)[1] == "00f067aa0ba902b7"
    assert trace_columns(headers, exchange_id) == {"trace_id": trace_id, "span_id": span_id, "parent_span_id": parent}


_NAMES = st.sampled_from(["a2a-extensions", "x-a2a-extensions", "content-type", "A2A-Extensions"])


@given(st.lists(st.tuples(_NAMES, st.text(max_size=8)), max_size=8))
def test_get_both_is_get_all_of_each(items: list[tuple[str, str]]) -> None:
    h = Headers(items)
    assert h.get_both("a2a-extensions", "x-a2a-extensions") == h.get_all("a2a-extensions") + h.get_all(
        "x-a2a-extensions"
    )


def test_extension_uris_remembered_per_header_value_are_the_same_each_time() -> None:
    value = f" {CONVERSE_URI} , https://ext.test/x?token=s3cr3t, {CONVERSE_URI}"
    first = split_uris([value])
    second = split_uris([value])
    assert first == second == [CONVERSE_URI, "https://ext.test/x?token=[REDACTED]"]
    second.append("changed")  # each call gets a list of its own
    assert split_uris([value]) == first
    # an operator's pattern is applied, not what was remembered for the built-in rules
    operator = Redaction.from_patterns([r"ext\.test"])
    assert split_uris([value], operator) == [CONVERSE_URI, operator.url("https://ext.test/x?token=s3cr3t")]
    assert "ext.test" not in split_uris([value], operator)[1]


def test_a_header_value_of_too_many_uris_is_said_at_every_call() -> None:
    value = ",".join(f"https://ext.test/{i}" for i in range(MAX_URIS + 3))
    for _ in range(2):
        notes: list[str] = []
        assert len(split_uris([value], NO_OPERATOR_PATTERNS, notes, "extensions_requested")) == MAX_URIS
        assert notes == [f"uris_not_recorded:extensions_requested:{MAX_URIS + 3}"]


# the definitions the fast paths stand in for: every column of wire text redacted value by value, every key looked at
_EXCHANGE_TEXT = ("method", "method_raw", "a2a_version", "content_type", "task_state", "error_status")
_MESSAGE_TEXT = ("method", "role", "task_state", "event_kind", "artifact_name", "part_kinds", "anomalies")
_KEYS = ("agent", "agent_url", "agent_id", "method", "context_id", "task_id")
_EXCHANGE_KEYS = ("agent", "agent_url", "agent_id", "method", "method_raw", "context_id", "task_id")
_MESSAGE_KEYS = (*_KEYS, "message_id")


def _reference(out: Extraction, redaction: Redaction) -> None:
    for row, columns in [(out.exchange, (*_EXCHANGE_TEXT, "error_message", "error_reason", "anomalies"))] + [
        (m, _MESSAGE_TEXT) for m in out.messages
    ]:
        for key in columns:
            value = row[key]
            if isinstance(value, str):
                row[key] = redaction.log_text(value)
            elif value:
                row[key] = [redaction.log_text(v) for v in value]
    for row, keys in [(out.exchange, _EXCHANGE_KEYS)] + [(m, _MESSAGE_KEYS) for m in out.messages]:
        for key in keys:
            value = row.get(key)
            if isinstance(value, str) and len(value) > MAX_KEY:
                row[key] = bounded_key(value)
                row["anomalies"].append(f"value_clipped:{key}")


_TEXT = st.one_of(
    st.none(),
    st.sampled_from(["SendMessage", "user", "agent", "statusUpdate", "request", "text", "envelope_missing"]),
    st.sampled_from(["https://u:pw@h.test/x", "token=abc123", "Bearer eyJhbGciOiJIUzI1NiJ9.e30.x", "ok"]),
    st.just("k" * (MAX_KEY + 1)),
)
_LIST = st.lists(st.sampled_from(["text", "data", "envelope_missing", "see https://u:pw@h.test/", "odd"]), max_size=3)


def _row(draw: Any, columns: tuple[str, ...]) -> dict[str, Any]:
    row: dict[str, Any] = {c: draw(_TEXT) for c in (*columns, *_KEYS, "method_raw", "message_id")}
    row.update(part_kinds=draw(_LIST), anomalies=draw(_LIST), error_message=None, error_reason=None)
    if draw(st.booleans()):
        del row["message_id"]  # (a row without one of its keys is looked at key by key)
    return row


@st.composite
def _extractions(draw: Any) -> Extraction:
    out = Extraction(_row(draw, _EXCHANGE_TEXT))
    out.messages = [_row(draw, _MESSAGE_TEXT) for _ in range(draw(st.integers(0, 3)))]
    return out


@given(_extractions(), st.booleans())
def test_wire_text_and_keys_are_what_the_column_by_column_definition_gives(out: Extraction, patterns: bool) -> None:
    redaction = Redaction.from_patterns(["okk"]) if patterns else NO_OPERATOR_PATTERNS
    want = Extraction(dict(out.exchange), [dict(m) for m in out.messages])
    for row in (want.exchange, *want.messages):
        row["anomalies"] = list(row["anomalies"])
    _reference(want, redaction)
    redact_wire_text(out, redaction)
    bound_keys(out)
    assert out.exchange == want.exchange and out.messages == want.messages
