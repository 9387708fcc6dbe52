"""Load the frames a report needs: only the columns it reads, filters pushed down to the Parquet files."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from ..store import objstore
from ..store.changes import settle
from ..store.reader import Journals, TableFiles, read_journals, read_table, table_files
from ..store.schema import MESSAGES, PARTITION_TS, TABLES

# the sightings a reply is made of: messages the agent sent, as the agent's side of an exchange carried them. A
# request's message is the client's whatever role it claims: one claiming `agent`, with an envelope and a reply's
# message id, would otherwise count as (or, seen last, overwrite) that reply
AGENT_SAID = "role = 'agent' AND object_kind = 'message' AND direction = 'response'"
MESSAGE_COLUMNS = [
    "exchange_id", "seq", "ts", "agent", "message_id", "context_id", "task_id", "role", "direction", "has_envelope",
    "author", "coverage_availability", "coverage", "coverage_reason", "originating_turn_id", "ownership_state",
    "ownership_suppressed", "routine_tool_name", "routine_name", "routine_status", "pending_input",
    "invocation_tool_name", "invocation_outcome", "citations", "citation_count", "anomalies",
]  # fmt: skip
EXCHANGE_COLUMNS = [
    "exchange_id", "ts_start", "agent", "binding", "method", "converse_requested", "streamed", "status_code",
    "error_code", "complete", "anomalies", "task_id",
]  # fmt: skip
CARD_COLUMNS = [
    "ts", "agent", "agent_url", "source", "name", "version", "converse_declared", "converse_required", "mcp_url",
    "mcp_server_card_url", "tools", "skill_ids", "tools_match_skills", "interfaces", "anomalies",
]  # fmt: skip


@dataclass(frozen=True)
class Window:
    """Which rows a report covers: agents (None = all) and a half-open UTC time range."""

    agents: tuple[str, ...] | None = None
    since: datetime | None = None
    until: datetime | None = None

    def expression(self, ts_column: str) -> ds.Expression | None:
        expr: ds.Expression | None = None

        def both(e: ds.Expression) -> None:
            nonlocal expr
            expr = e if expr is None else expr & e

        if self.agents:
            both(ds.field("agent").isin(list(self.agents)))
        if self.since is not None:
            both(ds.field("date") >= self.since.strftime("%Y-%m-%d"))  # prunes whole partitions
            both(ds.field(ts_column) >= pa.scalar(self.since, pa.timestamp("us", tz="UTC")))
        if self.until is not None:
            both(ds.field("date") <= self.until.strftime("%Y-%m-%d"))
            both(ds.field(ts_column) < pa.scalar(self.until, pa.timestamp("us", tz="UTC")))
        return expr


def parse_when(text: str, end: bool = False) -> datetime:
    """ISO date or datetime -> aware UTC datetime. A bare date used as an end means the whole day."""
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    bare_date = len(text) <= 10
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    if end and bare_date:
        value += timedelta(days=1)
    return value.astimezone(UTC)


@dataclass
class Frames:
    exchanges: pd.DataFrame
    messages: pd.DataFrame
    agent_cards: pd.DataFrame
    present: list[str] = field(default_factory=list)
    root: str = ""
    skipped: list[tuple[str, str]] = field(default_factory=list)  # files not of this dataset: (path, why)
    journals: Journals = field(default_factory=Journals)  # rows read from journals, and whose writers live


def _frame(
    root: str | Path, table: str, columns: list[str], expr: ds.Expression | None, files: list[str], journals: Journals
) -> pd.DataFrame:
    try:
        data = read_table(root, table, columns=columns, filter=expr, files=files)
    except (OSError, ValueError) as e:  # (pyarrow's errors on a file are both)
        settled = settle(e, root, {table: TableFiles(files)})
        if settled is e:
            raise
        raise settled from e
    pending = journals.tables[table]
    if pending:  # rows not rolled into Parquet yet, after the files'
        rows = pa.concat_tables(pending)
        day = pc.strftime(rows[PARTITION_TS[table]], format="%Y-%m-%d")
        rows = ds.dataset(rows.append_column("date", day)).to_table(columns=columns, filter=expr)
        data = pa.concat_tables([data, rows.cast(data.schema)])
    frame = data.to_pandas()
    if table == "exchanges" and len(frame):  # an exchange ingested twice is one exchange
        frame = frame.drop_duplicates("exchange_id", keep="last").reset_index(drop=True)
    return frame


def load_frames(root: str | Path, window: Window | None = None, messages: bool = True) -> Frames:
    """The three tables, narrowed to the report's columns and window, as pandas frames (for a notebook or
    a small dataset; a report over a large one runs out of core, see `engine.Engine.over_dataset`). Agent
    messages only: the metrics count replies, and user messages are most of a dataset's rows. With
    `messages=False` the messages frame is left empty (exchanges and cards only). Exchanges come once per
    exchange id; files that are not the dataset's are skipped and listed in `skipped`."""
    root = root if objstore.is_remote(root) else Path(root)
    window = window or Window()
    first = window.since.strftime("%Y-%m-%d") if window.since else None
    last = window.until.strftime("%Y-%m-%d") if window.until else None
    journals = read_journals(root)  # before the files: a roll-over in between shows rows twice, not never
    listed = {t: table_files(root, t, first, last) for t in TABLES}
    present = [t for t in TABLES if listed[t].files or journals.tables[t]]
    skipped = [f for t in TABLES for f in listed[t].foreign] + journals.foreign
    msg_expr = (ds.field("role") == "agent") & (ds.field("object_kind") == "message")
    w = window.expression("ts")
    if messages:
        msgs = _frame(
            root,
            "messages",
            MESSAGE_COLUMNS,
            msg_expr if w is None else msg_expr & w,
            listed["messages"].files,
            journals,
        )
    else:
        msgs = pa.schema([MESSAGES.field(c) for c in MESSAGE_COLUMNS]).empty_table().to_pandas()
    exchanges = _frame(
        root, "exchanges", EXCHANGE_COLUMNS, window.expression("ts_start"), listed["exchanges"].files, journals
    )
    cards = _frame(root, "agent_cards", CARD_COLUMNS, window.expression("ts"), listed["agent_cards"].files, journals)
    return Frames(exchanges, msgs, cards, present, str(root), skipped, journals)


def journal_notes(journals: Journals, root: str | Path) -> list[str]:
    """What a reader must know about rows read from journals rather than Parquet files."""
    notes = []
    if journals.live:
        notes.append(f"includes {journals.rows['live']} rows journaled by a running recorder, not yet in Parquet files")
    if journals.dead:
        notes.append(
            f"includes {journals.rows['dead']} rows from the journals of a recorder that stopped without rolling "
            f"them into Parquet ({', '.join(journals.dead)}): run `converse-tap recover {shlex.quote(str(root))}` to "
            "keep them"
        )
    return notes
