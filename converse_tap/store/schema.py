"""Explicit Arrow schemas of the three tables. Bump SCHEMA_VERSION on any change and teach the reader."""

from __future__ import annotations

import pyarrow as pa

SCHEMA_VERSION = 2  # 2: exchanges.trace_id, span_id, parent_span_id
METADATA_KEY = b"converse_tap.schema_version"

_TS = pa.timestamp("us", tz="UTC")
_STR = pa.string()
_DICT = pa.dictionary(pa.int32(), pa.string())  # low-cardinality enums: dictionary-encoded in memory and on disk
_LIST_STR = pa.list_(pa.string())


def _f(name: str, type_: pa.DataType, nullable: bool = True) -> pa.Field:
    return pa.field(name, type_, nullable=nullable)


EXCHANGES = pa.schema(
    [
        _f("exchange_id", _STR, False),
        _f("ts_start", _TS),
        _f("ts_first_byte", _TS),
        _f("ts_end", _TS),
        _f("client_addr", _STR),
        _f("server_addr", _STR),
        _f("url", _STR),
        _f("http_method", _DICT),
        _f("http_version", _DICT),
        _f("agent", _STR, False),
        _f("agent_url", _STR, False),
        _f("agent_id", _STR),
        _f("binding", _DICT, False),
        _f("dialect", _DICT, False),
        _f("method", _DICT, False),
        _f("method_raw", _STR),
        _f("jsonrpc_id", _STR),
        _f("a2a_version", _DICT),
        _f("extensions_requested", _LIST_STR),
        _f("extensions_echoed", _LIST_STR),
        _f("converse_requested", pa.bool_(), False),
        _f("converse_echoed", pa.bool_(), False),
        _f("status_code", pa.int32()),
        _f("content_type", _DICT),
        _f("error_code", pa.int64()),
        _f("error_status", _DICT),
        _f("error_message", _STR),
        _f("error_reason", _DICT),
        _f("streamed", pa.bool_(), False),
        _f("sse_events", pa.int32()),
        _f("bytes_in", pa.int64()),
        _f("bytes_out", pa.int64()),
        _f("context_id", _STR),
        _f("task_id", _STR),
        _f("task_state", _DICT),
        _f("complete", pa.bool_(), False),
        _f("error", _STR),
        _f("messages", pa.int32(), False),
        _f("replies", pa.int32(), False),
        _f("source", _DICT),
        _f("anomalies", _LIST_STR),
        _f("trace_id", _STR),
        _f("span_id", _STR),
        _f("parent_span_id", _STR),
    ]
)

SLOT = pa.struct([_f("key", _STR), _f("type", _STR), _f("required", pa.bool_()), _f("description", _STR)])
CITATION = pa.struct([_f("document_id", _STR), _f("chunk_id", _STR), _f("title", _STR), _f("source_url", _STR)])

MESSAGES = pa.schema(
    [
        _f("exchange_id", _STR, False),
        _f("seq", pa.int32(), False),
        _f("ts", _TS),
        _f("direction", _DICT, False),
        _f("event_index", pa.int32()),
        _f("event_kind", _DICT),
        _f("location", _STR, False),
        _f("object_kind", _DICT, False),
        _f("agent", _STR, False),
        _f("agent_url", _STR, False),
        _f("agent_id", _STR),
        _f("binding", _DICT, False),
        _f("dialect", _DICT, False),
        _f("method", _DICT, False),
        _f("message_id", _STR),
        _f("artifact_name", _STR),
        _f("context_id", _STR),
        _f("task_id", _STR),
        _f("role", _DICT),
        _f("task_state", _DICT),
        _f("text", _STR),
        _f("text_length", pa.int32()),
        _f("part_kinds", _LIST_STR),
        _f("extensions", _LIST_STR),
        _f("has_envelope", pa.bool_(), False),
        _f("author", _DICT),
        _f("coverage_availability", _DICT),
        _f("coverage", _DICT),
        _f("coverage_reason", _DICT),
        _f("originating_turn_id", _STR),
        _f("originating_request_id", _STR),
        _f("ownership_state", _DICT),
        _f("ownership_suppressed", pa.bool_()),
        _f("routine_tool_name", _DICT),
        _f("routine_name", _DICT),
        _f("routine_status", _DICT),
        _f("pending_input", pa.list_(SLOT)),
        _f("pending_required_open", pa.int32()),
        _f("invocation_tool_name", _DICT),
        _f("invocation_outcome", _DICT),
        _f("citations", pa.list_(CITATION)),
        _f("citation_count", pa.int32()),
        _f("envelope_json", _STR),
        _f("anomalies", _LIST_STR),
    ]
)

INTERFACE = pa.struct([_f("url", _STR), _f("binding", _STR), _f("protocol_version", _STR)])
TOOL = pa.struct(
    [
        _f("tool_name", _STR),
        _f("description", _STR),
        _f("input_schema_json", _STR),
        _f("required_fields", _LIST_STR),
    ]
)

AGENT_CARDS = pa.schema(
    [
        _f("exchange_id", _STR, False),
        _f("ts", _TS),
        _f("url", _STR),
        _f("agent", _STR, False),
        _f("agent_url", _STR, False),
        _f("agent_id", _STR),
        _f("source", _DICT, False),
        _f("name", _STR),
        _f("version", _STR),
        _f("description", _STR),
        _f("protocol_version", _STR),
        _f("interfaces", pa.list_(INTERFACE)),
        _f("skill_ids", _LIST_STR),
        _f("converse_declared", pa.bool_(), False),
        _f("converse_required", pa.bool_()),
        _f("mcp_url", _STR),
        _f("mcp_server_card_url", _STR),
        _f("tools", pa.list_(TOOL)),
        _f("tools_match_skills", pa.bool_()),
        _f("unmatched_tools", _LIST_STR),
        _f("card_json", _STR),
        _f("anomalies", _LIST_STR),
    ]
)

# what a recorder lost before it became rows, so that a report over the dataset can say which figures undercount
# (one row per note: the proxy sends one at most every second while it loses records)
CAPTURE_GAPS = pa.schema(
    [
        _f("exchange_id", _STR, False),  # the note's own id (every table is keyed by this column)
        _f("ts", _TS, False),  # when the note was written
        _f("ts_from", _TS),  # the first record lost
        _f("ts_to", _TS),  # the last record lost
        _f("reason", _DICT, False),  # recorder_backlog_full | worker_down | worker_died | recorder_stopped
        _f("records", pa.int64()),  # capture records lost: exchanges, or a stream's start, chunks and end
        _f("bytes", pa.int64()),
    ]
)

TABLES: dict[str, pa.Schema] = {
    "exchanges": EXCHANGES,
    "messages": MESSAGES,
    "agent_cards": AGENT_CARDS,
    "capture_gaps": CAPTURE_GAPS,
}
# the column whose UTC date names a row's partition
PARTITION_TS = {"exchanges": "ts_start", "messages": "ts", "agent_cards": "ts", "capture_gaps": "ts"}


def with_version(schema: pa.Schema) -> pa.Schema:
    return schema.with_metadata({METADATA_KEY: str(SCHEMA_VERSION).encode()})


def parquet_options(schema: pa.Schema) -> dict[str, object]:
    """How every Parquet file of the dataset is written. Min/max statistics only for the columns of fixed width
    (times, numbers, flags), which readers prune row groups by: for a text from the wire the writer copied the
    value several times over to compute them (a 15 MiB message text cost 60 MB of memory at the roll-over),
    and random ids or free text prune nothing."""
    fixed = [f.name for f in schema if pa.types.is_temporal(f.type) or pa.types.is_integer(f.type)]
    fixed += [f.name for f in schema if pa.types.is_floating(f.type) or pa.types.is_boolean(f.type)]
    return {
        "compression": "zstd",
        "row_group_size": 1_000_000,
        "use_dictionary": True,
        "write_statistics": [name for name in schema.names if name in fixed],
    }
