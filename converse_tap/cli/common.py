"""What the commands that read a dataset share: window options, dates, the report run."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import click

from ..textsafe import safe_line
from .guards import (
    Dataset,
    SafeError,
    UsageError,
    read_error,
)

if TYPE_CHECKING:  # the analysis imports pandas: only the commands that need it load it
    from ..analysis.load import Frames, Window


def _duration(text: str | None) -> object:
    if text is None:
        return None
    import pandas as pd

    if re.fullmatch(r"\s*[-+]?(\d+\.?\d*|\.\d+)\s*", text):  # pandas reads a bare number as nanoseconds
        raise click.BadParameter(
            f"{text!r} has no unit; write e.g. {text.strip()}s, {text.strip()}min or {text.strip()}h",
            param_hint="'--stale-after'",
        )
    try:
        value = pd.Timedelta(text)
    except ValueError:
        value = None
    if value is None or pd.isna(value) or value.total_seconds() <= 0:
        raise click.BadParameter(
            f"{text!r} is not a positive duration; write e.g. 90s, 30min, 2h or 1d", param_hint="'--stale-after'"
        )
    return value


def _when(text: str | None, end: bool, option: str) -> object:
    if text is None:
        return None
    from ..analysis.load import parse_when

    try:
        return parse_when(text, end=end)
    except OverflowError:  # a time only year 10000 or year 0 can hold, once in UTC (`--until 9999-12-31`: that
        # whole day): the latest or earliest time there is, which no recorded time passes
        from datetime import UTC, datetime

        return (datetime.max if text.lstrip().startswith("9999") else datetime.min).replace(tzinfo=UTC)
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is not an ISO date or time; write e.g. 2026-12-01 or 2026-12-01T09:30Z",
            param_hint=f"'{option}'",
        ) from None


def window_options(f: Any) -> Any:
    """--agent, --since, --until: which traffic a report or a check covers; --memory-limit: how much memory."""
    for option in reversed(
        [
            click.option("--agent", "agents", multiple=True, help="Only these agents (repeatable)."),
            click.option("--since", help="Only traffic at or after this UTC date/time (ISO 8601)."),
            click.option(
                "--until", help="Only traffic before this UTC date/time; a bare date includes that whole day."
            ),
            click.option(
                "--memory-limit",
                callback=_memory_size,
                help="Memory the analysis may hold (DuckDB's limit; default 500MB, e.g. 4GB is faster on a big "
                "dataset); beyond it, work spills to a temporary directory.",
            ),
        ]
    ):
        f = option(f)
    return f


def engine_options(f: Any) -> Any:
    """--engine, --spark-master: which engine runs the metric definitions (the same SQL on both)."""
    f = click.option(
        "--spark-master",
        metavar="URL",
        help="With --engine spark: the cluster master (spark://host:7077, yarn, k8s://..., local[4]); default "
        "spark-submit's master, else local[*].",
    )(f)
    return click.option(
        "--engine",
        type=click.Choice(["duckdb", "spark"]),
        default="duckdb",
        show_default=True,
        help="Run the report on DuckDB in this process, or on Apache Spark (the `spark` extra and Java 17).",
    )(f)


def _engine_check(engine: str, spark_master: str | None) -> None:
    """--spark-master names where Spark runs: without --engine spark it was silently ignored (the report ran on
    DuckDB on this machine, not on the cluster the user named)."""
    if spark_master is not None and engine != "spark":
        raise UsageError("--spark-master is for --engine spark: add --engine spark, or leave --spark-master out")


_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*(?:([KMGT])(i?)B|B)", re.IGNORECASE)
MAX_MEMORY = 2**62  # bytes: DuckDB refuses a limit much beyond (its parser says "value is too large")


def _memory_size(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is None:
        return value
    found = _SIZE.fullmatch(value.strip())
    if found is None:
        raise click.BadParameter(f"{value!r} is not a size; give a number and a unit, like 500MB or 4GB")
    number, unit, binary = found.groups()
    size = float(number) * (1024 if binary else 1000) ** ("KMGT".index(unit.upper()) + 1 if unit else 0)
    if size < 1 or size > MAX_MEMORY:
        what = "leaves the analysis no memory" if size < 1 else "is more than any limit DuckDB takes (4 EiB)"
        raise click.BadParameter(f"{value!r} {what}; give a limit like 500MB or 4GB")
    return value


def _window(agents: tuple[str, ...], since: str | None, until: str | None) -> Window:
    from ..analysis.load import Window

    window = Window(tuple(agents) or None, _when(since, False, "--since"), _when(until, True, "--until"))  # type: ignore[arg-type]
    if window.since and window.until and window.since >= window.until:
        raise UsageError("--since must be before --until")
    return window


def _load(dataset: Dataset, window: Window, error: type[click.ClickException] = SafeError) -> Frames:
    from ..analysis.load import load_frames
    from ..store.changes import ReadInterrupted

    try:
        return load_frames(dataset, window, messages=False)
    except ReadInterrupted as e:  # the dataset changed, or its storage failed, while it was read
        raise UsageError(str(e)) from e
    except (OSError, ValueError) as e:  # pyarrow's errors on unreadable files are ValueError/OSError subclasses
        raise error(f"cannot read the dataset {dataset}: {e}") from e


def _skipped(files: list[tuple[str, str]], error: type[click.ClickException] | None) -> None:
    """Files in a dataset that are not its own: warned about and skipped, or (`error`) refused."""
    if files and error is not None:
        named = "; ".join(safe_line(f"{path} ({why})") for path, why in files)
        raise error(f"files in the dataset that are not its own: {named}; move them out of the dataset")
    for path, why in files:
        click.echo(safe_line(f"warning: skipped {path}: {why}"), err=True)


def _report(
    dataset: Dataset,
    window: Window,
    memory_limit: str | None,
    error: type[click.ClickException] = SafeError,
    **options: Any,
) -> dict[str, Any]:
    """The report over a dataset on disk, computed out of core (see analysis/engine.py). When a file of the
    dataset turns out damaged inside (its footer fine, a page not), the report is made again without it, which is
    named like any file that is not the dataset's."""
    import duckdb

    from ..store.changes import DatasetChanged, ReadInterrupted
    from ..store.reader import damaged_files

    try:
        return _report_once(dataset, window, memory_limit, error, None, dict(options))
    except click.ClickException as e:
        cause = e.__cause__
        if options.get("engine") == "spark" or not isinstance(cause, duckdb.Error | OSError | ValueError):
            raise
        if isinstance(cause, DatasetChanged):  # a roll-over while it was read: once more, over the files now
            return _report_once(dataset, window, memory_limit, error, None, dict(options))
        if isinstance(cause, duckdb.OutOfMemoryException | ReadInterrupted):
            raise
        first = window.since.strftime("%Y-%m-%d") if window.since else None
        last = window.until.strftime("%Y-%m-%d") if window.until else None
        damaged = damaged_files(dataset, first, last)
        if not damaged:
            raise
        return _report_once(dataset, window, memory_limit, error, damaged, dict(options))


def _report_once(
    dataset: Dataset,
    window: Window,
    memory_limit: str | None,
    error: type[click.ClickException],
    exclude: dict[str, str] | None,
    options: dict[str, Any],
) -> dict[str, Any]:
    import duckdb

    from ..analysis.engine import DEFAULT_MEMORY_LIMIT, Engine
    from ..analysis.report import build_report
    from ..store.changes import settle

    kind, master = options.pop("engine", "duckdb"), options.pop("spark_master", None)
    failures: tuple[type[Exception], ...] = (OSError, ValueError, duckdb.Error)
    try:
        if kind == "spark":
            failures += _spark_errors()
            engine = _spark_engine(dataset, window, master)
        else:
            limit = memory_limit or DEFAULT_MEMORY_LIMIT
            engine = Engine.over_dataset(dataset, window, memory_limit=limit, exclude=exclude)
    except failures as e:
        raise read_error(e, dataset, error) from e
    try:
        _skipped(engine.skipped, error if options.get("require_data") else None)
        # a dataset (check_source said so) with no rows in the window: the empty basis is what `check` reports
        options.pop("require_data", None)
        return build_report(engine, window, **options)
    except failures as e:
        why = e if isinstance(e, duckdb.OutOfMemoryException) else settle(e, engine.root, engine.listed)
        raise read_error(why, dataset, error) from why
    finally:
        engine.close()


def _fmt(v: float | None, share: bool) -> str:
    if v is None:
        return "no data"
    return f"{v * 100:.1f}%" if share else f"{v:g}"


def _spark_errors() -> tuple[type[Exception], ...]:
    """What Spark raises on a dataset it cannot read (none without pyspark: `_spark_engine` says to install it)."""
    try:
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException
    except ImportError:
        return ()

    return (PySparkException, Py4JError)


def _spark_engine(dataset: Dataset, window: Window, master: str | None) -> Any:
    """A Spark engine over the dataset; pyspark or Java missing is a usage error saying what to install."""
    try:
        from ..analysis.spark import SparkEngine, SparkUnavailable
    except ImportError:  # sqlglot, which transpiles the SQL, comes with the extra too
        raise UsageError("--engine spark needs the spark extra: pip install 'a2a-converse-tap[spark]'") from None
    try:
        return SparkEngine.over_spark(dataset, window, master=master)
    except SparkUnavailable as e:
        raise UsageError(str(e)) from None
