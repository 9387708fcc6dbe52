"""Load the frames a report needs: only the columns it reads, filters pushed down to the Parquet files."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds

from ..a2a.constants import PUSH_AGENT
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

    def expression(self, ts_column: str, times: bool = True) -> ds.Expression | None:
        """The window as a filter of a table's rows (`times=False`: but its times, see `times`)."""
        expr: ds.Expression | None = None

        def both(e: ds.Expression) -> None:
            nonlocal expr
            expr = e if expr is None else expr & e

        if self.agents:
            both(ds.field("agent").isin(list(self.agents)))
        if self.since is not None:
            both(ds.field("date") >= self.since.strftime("%Y-%m-%d"))  # prunes whole partitions
        if self.until is not None:
            both(ds.field("date") <= self.until.strftime("%Y-%m-%d"))
        within = self.times(ts_column)
        if times and within is not None:
            both(within)
        return expr

    def times(self, ts_column: str) -> ds.Expression | None:
        """The window's time range as a filter on `ts_column` (None: all times)."""
        parts = []
        if self.since is not None:
            parts.append(ds.field(ts_column) >= pa.scalar(self.since, pa.timestamp("us", tz="UTC")))
        if self.until is not None:
            parts.append(ds.field(ts_column) < pa.scalar(self.until, pa.timestamp("us", tz="UTC")))
        return parts[0] & parts[1] if len(parts) == 2 else (parts[0] if parts else None)


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
    # under an agent filter the pushed rows are already each under the agent they are attributed to (over every
    # agent's rows, agent_filter.py); those left under PUSH_AGENT are no agent's, whatever rows the frames hold
    attributed: bool = False
    listed: dict[str, TableFiles] = field(default_factory=dict)  # the Parquet files read, per table


def _pandas(table: str, data: pa.Table) -> pd.DataFrame:
    frame = data.to_pandas()
    if table == "exchanges" and len(frame):  # an exchange ingested twice is one exchange
        frame = frame.drop_duplicates("exchange_id", keep="last").reset_index(drop=True)
    return frame


def _read(
    root: str | Path,
    table: str,
    columns: list[str],
    expr: ds.Expression | None,
    files: list[str],
    journals: Journals,
    times: ds.Expression | None = None,
) -> pa.Table:
    """The rows of `files` and the journals matching `expr` and the time range `times`."""
    whole = expr if times is None else times if expr is None else expr & times
    try:
        try:
            data = read_table(root, table, columns=columns, filter=whole, files=files)
        except pa.ArrowInvalid:
            if times is None:
                raise
            # a file of another writer whose times pyarrow will not compare with the window's (times without a
            # zone): read without the range, then the range over the rows in the dataset's types
            data = read_table(root, table, columns=columns, filter=expr, files=files)
            data = ds.dataset(data).to_table(filter=times)
    except (OSError, ValueError) as e:  # (pyarrow's errors on a file are both)
        settled = settle(e, root, {table: TableFiles(files)})
        if settled is e:
            raise
        raise settled from e
    pending = journals.tables[table]
    if pending:  # rows not rolled into Parquet yet, after the files'
        rows = pa.concat_tables(pending)
        day = pc.strftime(rows[PARTITION_TS[table]], format="%Y-%m-%d")
        rows = ds.dataset(rows.append_column("date", day)).to_table(columns=columns, filter=whole)
        data = pa.concat_tables([data, rows.cast(data.schema)])
    return data


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
    skipped = skipped_files(listed, journals)
    msg_expr = (ds.field("role") == "agent") & (ds.field("object_kind") == "message")
    # a push delivery's rows are stored under PUSH_AGENT: under an agent filter they are read too, and kept under
    # the agent they are attributed to (`_attributed`), as the engines' views keep them (agent_filter.py)
    stored = Window((*window.agents, PUSH_AGENT), window.since, window.until) if window.agents else window
    empty = pa.schema([MESSAGES.field(c) for c in MESSAGE_COLUMNS]).empty_table()

    def read(table: str, columns: list[str], expr: ds.Expression | None, w: Window) -> pa.Table:
        ts = PARTITION_TS[table]
        narrow = w.expression(ts, times=False)
        both = expr if narrow is None else narrow if expr is None else expr & narrow
        return _read(root, table, columns, both, listed[table].files, journals, w.times(ts))

    msgs = read("messages", MESSAGE_COLUMNS, msg_expr, stored) if messages else empty
    exchanges = read("exchanges", EXCHANGE_COLUMNS, None, stored)
    if window.agents:
        times = Window(since=window.since, until=window.until)
        msgs, exchanges = _attributed(
            msgs,
            exchanges,
            lambda ids: read("messages", MESSAGE_COLUMNS, msg_expr & ds.field("task_id").isin(ids), times),
            lambda ids: read("exchanges", EXCHANGE_COLUMNS, ds.field("task_id").isin(ids), times),
            window.agents,
        )
    cards = _pandas("agent_cards", read("agent_cards", CARD_COLUMNS, None, window))
    frames = Frames(_pandas("exchanges", exchanges), msgs.to_pandas(), cards, present, str(root), skipped, journals)
    frames.attributed, frames.listed = bool(window.agents), listed
    return frames


def _attributed(
    msgs: pa.Table,
    exchanges: pa.Table,
    held_messages: Callable[[list[str]], pa.Table],
    held_exchanges: Callable[[list[str]], pa.Table],
    agents: tuple[str, ...],
) -> tuple[pa.Table, pa.Table]:
    """The messages and exchanges read for `agents` and PUSH_AGENT narrowed as the engines' views are under that
    agent filter (agent_filter.attributed, in DuckDB): a pushed row is in under the agent it is attributed to
    (push_owners, over every agent's rows holding a pushed task: `held_…` reads them, given the task ids), the
    rows in their order. Without pushed rows, the agents' own."""
    import duckdb

    from .agent_filter import attributed
    from .facts_sql import push_owners_sql

    pushed = pc.equal(msgs["agent"].cast(pa.string()), PUSH_AGENT)
    ids = pc.unique(msgs.filter(pc.fill_null(pushed, False))["task_id"].cast(pa.string()).drop_null()).to_pylist()
    con = duckdb.connect()
    try:
        con.register("_held_messages", held_messages(ids) if ids else msgs.slice(0, 0))
        con.register("_held_exchanges", held_exchanges(ids) if ids else exchanges.slice(0, 0))
        # (AGENT_SAID: the read kept the agent's messages alone)
        con.execute("CREATE VIEW _window_sightings AS SELECT * FROM _held_messages WHERE direction = 'response'")
        con.execute("CREATE VIEW _window_exchanges AS SELECT * FROM _held_exchanges")
        con.execute(f"CREATE TABLE push_owners AS {push_owners_sql('_window_sightings', '_window_exchanges')}")
        out = []
        for name, rows in (("messages", msgs), ("exchanges", exchanges)):
            keys = pa.table(
                {
                    "agent": rows["agent"].cast(pa.string()),
                    "task_id": rows["task_id"].cast(pa.string()),
                    "pos": pa.array(range(rows.num_rows), pa.int64()),
                }
            )
            con.register(f"_{name}_keys", keys)
            kept = con.sql(
                f"SELECT pos, agent FROM ({attributed(f'_{name}_keys', ['agent', 'task_id'], agents)}) ORDER BY pos"
            ).to_arrow_table()
            narrow = rows.take(kept["pos"])
            at = narrow.schema.get_field_index("agent")
            out.append(narrow.set_column(at, narrow.schema.field(at), kept["agent"].cast(narrow.schema.field(at).type)))
        return out[0], out[1]
    finally:
        con.close()


def skipped_files(listed: dict[str, TableFiles], journals: Journals) -> list[tuple[str, str]]:
    """The files found that are not the dataset's (path, why): every engine's, in this order (the tables the
    report reads from first, then the capture gaps' and the journals')."""
    tables = ("messages", "exchanges", "agent_cards", "capture_gaps")
    return [f for t in tables if t in listed for f in listed[t].foreign] + journals.foreign


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
