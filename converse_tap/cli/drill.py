"""Drill-down commands (`sql`, `show`) and the check's examples and JUnit output: thin, over analysis/drill.py,
analysis/transcript.py and analysis/junit.py. Registered onto the `cli` group in cli/__init__.py."""

from __future__ import annotations

import json
import sys
from typing import IO, TYPE_CHECKING, Any, cast

import click

from ..textsafe import json_safe, safe_line, safe_text
from .common import UsageError, _memory_size, _skipped, _window, window_options
from .guards import DATASET, Dataset, SafeError, check_dataset, check_source, read_error

if TYPE_CHECKING:
    from ..analysis.engine import Engine
    from ..analysis.gate import Outcome
    from ..analysis.load import Window

SQL_FORMATS = ("table", "csv", "json", "jsonl")
TABLE_ROWS = 1000  # rows a terminal table shows; --format csv/json/jsonl stream every row


def _open(
    dataset: Dataset,
    window: Window,
    memory_limit: str | None,
    facts: tuple[str, ...],
    exclude: dict[str, str] | None = None,
) -> Engine:
    import duckdb

    from ..analysis.drill import open_views
    from ..analysis.engine import DEFAULT_MEMORY_LIMIT
    from ..store.changes import ReadInterrupted
    from ..store.reader import damaged_files

    check_dataset(dataset)  # a directory a writer never wrote into is no dataset: no empty answer from it
    limit = memory_limit or DEFAULT_MEMORY_LIMIT
    try:
        try:
            engine = open_views(dataset, window, limit, facts, exclude)
        except (OSError, ValueError, duckdb.Error) as e:
            skip = isinstance(e, duckdb.OutOfMemoryException | ReadInterrupted)
            damaged = None if skip else damaged_files(dataset)
            if not damaged:
                raise
            engine = open_views(dataset, window, limit, facts, exclude=damaged)  # as report: without them
    except (OSError, ValueError, duckdb.Error) as e:
        raise read_error(e, dataset, SafeError) from e  # (out of memory: which option to raise)
    _skipped(engine.skipped, None)  # what the views leave out, as report says it
    return engine


@click.command("sql")
@click.argument("dataset", type=DATASET)
@click.argument("query")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(SQL_FORMATS),
    help="Output format; default: table on a terminal, csv when piped.",
)
@window_options
def sql_command(
    dataset: Dataset,
    query: str,
    fmt: str | None,
    agents: tuple[str, ...],
    since: str | None,
    until: str | None,
    memory_limit: str | None,
) -> None:
    """Run one read-only SQL query over views named for the report's concepts.

    \b
    Views: exchanges, messages, agent_cards, capture_gaps (the stored tables, every column), and replies,
    turns, conversations, routine_instances (the facts exactly as the report computes them; docs/metrics.md).
    The query runs out of core like the report; --agent/--since/--until narrow every view.
    \b
    Examples:
        converse-tap sql data/ "SELECT coverage, count(*) FROM turns GROUP BY ALL"
        converse-tap sql data/ "SELECT * FROM routine_instances WHERE outcome = 'abandoned'" --format csv
    """
    from ..analysis.drill import QueryError, check_read_only, facts_named, run_query
    from ..analysis.sqlout import write_csv, write_json
    from ..analysis.sqlout import write_jsonl as jsonl

    try:
        check_read_only(query)
    except QueryError as e:
        raise UsageError(f"{e}\nthe views are {', '.join(_views())}; see docs/metrics.md") from e
    import duckdb
    import pyarrow as pa

    from ..store.changes import ReadInterrupted, settle
    from ..store.reader import damaged_files

    fmt = fmt or ("table" if sys.stdout.isatty() else "csv")
    window = _window(agents, since, until)
    # an --agent the dataset never saw is refused as `report` refuses it: an empty answer from a misspelt name
    # would read as "nothing happened" (a query whose own WHERE matches nothing is still an empty answer)
    check_source(dataset, window, memory_limit)
    engine = _open(dataset, window, memory_limit, facts_named(query))
    if not engine.present:  # an empty answer from no data is not an answer
        click.echo(safe_line(f"note: {dataset} holds no Parquet files yet: every view is empty"), err=True)
    try:
        try:
            reader = run_query(engine, query)
        except QueryError as e:
            # a read error (plain duckdb.Error or IO, not a binder or parser error): the dataset changed under
            # the query (a recorder rolled over: named, exit 2), or a file damaged inside?
            cause = e.__cause__
            if isinstance(cause, Exception):
                settled = settle(cause, engine.root, engine.listed)
                if isinstance(settled, ReadInterrupted):
                    raise UsageError(str(settled)) from e
            read = type(cause) is duckdb.Error or isinstance(cause, duckdb.IOException)
            damaged = damaged_files(dataset) if read else {}
            if not damaged:
                raise UsageError(_failed(e)) from e
            engine.close()
            engine = _open(dataset, window, memory_limit, facts_named(query), damaged)
            try:
                reader = run_query(engine, query)
            except QueryError as again:
                raise UsageError(_failed(again)) from again
        out: IO[str] = sys.stdout
        try:
            if fmt == "table":
                _table(reader, out)
            else:
                if fmt == "csv" and out.isatty():  # (the JSON formats escape them as JSON, keeping the value)
                    out = cast(IO[str], _Shown(out))
                {"csv": write_csv, "json": write_json, "jsonl": jsonl}[fmt](reader, out)
        except (duckdb.Error, OSError, pa.ArrowException) as e:  # a row the query fails on, found as it streams
            if isinstance(e, OSError) and e.errno is not None:
                raise  # the output's own error (a closed pipe, a full disk): `main` says so
            out.flush()
            raise UsageError(f"the query failed part-way (the output is incomplete): {_failed(e)}") from e
    finally:
        engine.close()


def _failed(e: BaseException) -> str:
    """What went wrong with a query, in this command's terms: an engine out of memory says which option to raise
    (not DuckDB's own `SET` advice, which `sql` refuses); other errors keep the engine's message."""
    from .guards import out_of_memory

    cause = e.__cause__ if isinstance(e.__cause__, Exception) else e
    advice = out_of_memory(cause, "the query")
    if advice is not None:
        return advice
    return f"{str(e).strip()}\nthe views are {', '.join(_views())}; see docs/metrics.md"


class _Shown:
    """A terminal written CSV: CSV has no escapes, so what a terminal would act on (ESC, CSI, OSC, a bidi override,
    CR) or show as nothing is written as the visible escape `safe_text` makes of it, a backslash doubled. Piped or
    redirected, the CSV is exact."""

    def __init__(self, out: IO[str]) -> None:
        self.out = out

    def write(self, text: str) -> int:
        return self.out.write(safe_text(text))


def _views() -> tuple[str, ...]:
    from ..analysis.drill import VIEWS

    return VIEWS


def _table(reader: Any, out: Any) -> None:
    from ..analysis.render import table_lines, terminal_width
    from ..analysis.sqlout import cell, rows

    cells: list[list[str]] = []
    more = False
    for row in rows(reader):
        if len(cells) == TABLE_ROWS:
            more = True
            break
        cells.append([cell(v) for v in row.values()])
    note = f"({len(cells)} rows)" if not more else f"(first {TABLE_ROWS} rows; --format csv gives them all)"
    for line in table_lines("", list(reader.schema.names), cells, note, terminal_width(out)):
        click.echo(line, file=out)


@click.command("show")
@click.argument("dataset", type=DATASET)
@click.argument("conversation")
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
@click.option(
    "--text",
    type=click.Choice(["keep", "hash"]),
    default="keep",
    show_default=True,
    help="Message text as recorded, or its SHA-256 to share safely (with the dataset's salt, or a random one for "
    "this output when it has none).",
)
@click.option(
    "--memory-limit", callback=_memory_size, help="Memory the analysis may hold (DuckDB's limit, e.g. 500MB)."
)
def show(dataset: Dataset, conversation: str, fmt: str, text: str, memory_limit: str | None) -> None:
    """Print one conversation as a transcript: each message in order with role, author, time and text, and each
    reply's envelope inline (coverage, ownership, routine and pending slots, invocation, citations).

    \b
    CONVERSATION is an id from the report's examples or the `conversations` view (a unique prefix will do).
    Example:
        converse-tap show data/ 5f0c2a9e-8d1b-4e0f-9a51-2c3d4e5f6a7b --format json
    """
    from ..analysis.transcript import UnknownConversation, transcript, transcript_text

    engine = _open(dataset, _window((), None, None), memory_limit, ("replies",))
    try:
        try:
            t = transcript(engine, conversation, text)
        except UnknownConversation as e:
            unique = [c for c in e.close if c.startswith(conversation.rstrip("…"))]
            if len(unique) != 1:
                from ..analysis.tables import suggested

                hint = "list them with: " + suggested("sql", str(dataset), "SELECT * FROM conversations")
                raise UsageError(f"{e}\n{hint}") from None
            t = transcript(engine, unique[0], text)
    except OSError as e:  # the dataset's salt is not one (show --text hash)
        raise UsageError(f"cannot hash the text: {e}") from e
    finally:
        engine.close()
    text = json_safe(json.dumps(t, indent=2, ensure_ascii=False)) if fmt == "json" else transcript_text(t)
    click.echo(text, nl=fmt == "json")


def check_examples(
    dataset: Dataset, window: Window, memory_limit: str | None, failed: list[Outcome], n: int = 5
) -> dict[tuple[str, str], list[dict[str, Any]]]:
    """Up to `n` examples behind each failed threshold, keyed by (scope, metric)."""
    from ..analysis.drill import threshold_examples

    if not failed:
        return {}
    engine = _open(dataset, window, memory_limit, ("replies", "turns", "routine_instances"))
    try:
        return {(o.scope, o.metric): threshold_examples(engine, o.metric, o.scope, n) for o in failed}
    finally:
        engine.close()


def example_lines(dataset: Dataset, found: list[dict[str, Any]]) -> list[str]:
    """The examples behind a failed threshold, and the command that opens the first, as lines safe to print: every
    value escaped (`safe_line`), the command's words quoted for a shell (`tables.suggested`: pasted, it runs that
    `show` and nothing else, whatever the conversation id or the dataset's path holds)."""
    from ..analysis.tables import suggested

    out = [
        safe_line(
            f"    {e['conversation']}  {e['agent'] or '–'}  {(e['at'] or '')[:19]}  {e['key']}"
            + (f"  “{e['text']}”" if e["text"] else "")
        )
        for e in found
    ]
    if found:
        out.append("    open one: " + suggested("show", str(dataset), str(found[0]["conversation"])))
    return out
