"""What the commands that read a dataset share: window options, dates, the report run."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

import click

from .guards import (
    Dataset,
    UsageError,
    read_error,
)

if TYPE_CHECKING:  # the analysis imports pandas: only the commands that need it load it
    from ..analysis.load import Frames, Window


def _duration(text: str | None) -> object:
    if text is None:
        return None
    import pandas as pd

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


def _memory_size(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    if value is not None and not re.fullmatch(r"\d+(\.\d+)?\s*([KMGT]i?B|B)", value.strip(), re.IGNORECASE):
        raise click.BadParameter(f"{value!r} is not a size; give a number and a unit, like 500MB or 4GB")
    return value


def _window(agents: tuple[str, ...], since: str | None, until: str | None) -> Window:
    from ..analysis.load import Window

    window = Window(tuple(agents) or None, _when(since, False, "--since"), _when(until, True, "--until"))  # type: ignore[arg-type]
    if window.since and window.until and window.since >= window.until:
        raise UsageError("--since must be before --until")
    return window


def _load(dataset: Dataset, window: Window, error: type[click.ClickException] = click.ClickException) -> Frames:
    from ..analysis.load import load_frames

    try:
        return load_frames(dataset, window, messages=False)
    except (OSError, ValueError) as e:  # pyarrow's errors on unreadable files are ValueError/OSError subclasses
        raise error(f"cannot read the dataset {dataset}: {e}") from e


def _skipped(files: list[tuple[str, str]], error: type[click.ClickException] | None) -> None:
    """Files in a dataset that are not its own: warned about and skipped, or (`error`) refused."""
    if files and error is not None:
        named = "; ".join(f"{path} ({why})" for path, why in files)
        raise error(f"files in the dataset that are not its own: {named}; move them out of the dataset")
    for path, why in files:
        click.echo(f"warning: skipped {path}: {why}", err=True)


def _report(
    dataset: Dataset,
    window: Window,
    memory_limit: str | None,
    error: type[click.ClickException] = click.ClickException,
    **options: Any,
) -> dict[str, Any]:
    """The report over a dataset on disk, computed out of core (see analysis/engine.py)."""
    import duckdb

    from ..analysis.engine import DEFAULT_MEMORY_LIMIT, Engine
    from ..analysis.report import build_report

    try:
        engine = Engine.over_dataset(dataset, window, memory_limit=memory_limit or DEFAULT_MEMORY_LIMIT)
    except (OSError, ValueError, duckdb.Error) as e:
        raise read_error(e, dataset, error) from e
    try:
        _skipped(engine.skipped, error if options.get("require_data") else None)
        # a dataset (check_source said so) with no rows in the window: the empty basis is what `check` reports
        options.pop("require_data", None)
        return build_report(engine, window, **options)
    except (OSError, duckdb.Error) as e:
        raise read_error(e, dataset, error) from e
    finally:
        engine.close()


def _fmt(v: float | None, share: bool) -> str:
    if v is None:
        return "no data"
    return f"{v * 100:.1f}%" if share else f"{v:g}"
