"""`converse-tap export`: recorded exchanges into an observability stack."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from .guards import (
    DATASET,
    Dataset,
    UsageError,
    check_source,
)

if TYPE_CHECKING:
    from ..store.reader import TableFiles
from .base import cli
from .common import _skipped, _window


@cli.group()
def export() -> None:
    """Send recorded exchanges into an observability stack."""


@export.command("otlp")
@click.argument("dataset", type=DATASET)
@click.option("--endpoint", required=True, metavar="URL", help="OTLP/HTTP collector, e.g. http://127.0.0.1:4318.")
@click.option("--agent", "agents", multiple=True, help="Only these agents (repeatable).")
@click.option("--since", help="Only exchanges started at or after this UTC date/time (ISO 8601).")
@click.option("--until", help="Only exchanges started before this UTC date/time; a bare date includes that day.")
@click.option("--text", "text", is_flag=True, help="Put message text into spans (when the dataset kept it).")
def export_otlp(
    dataset: Dataset, endpoint: str, agents: tuple[str, ...], since: str | None, until: str | None, text: bool
) -> None:
    """Send one span per recorded exchange, with its original times, to an OTLP/HTTP collector.

    \b
    Example (backfill a capture or an ingested HAR into Tempo, Jaeger, ...):
        converse-tap export otlp data/ --endpoint http://127.0.0.1:4318 --since 2026-12-01
    Exits 1 when the collector did not accept every span.
    """
    from ..export.backfill import export_otlp as run_export
    from ..export.live import check_endpoint
    from ..export.otel import shown

    why = check_endpoint(endpoint)
    if why is not None:
        raise UsageError(why)
    window = _window(agents, since, until)
    check_source(dataset, window)  # not a dataset, or an --agent it never saw: refused as `report` refuses them
    from ..store.changes import ReadInterrupted

    warned: set[str] = set()

    def skipping(listed: dict[str, TableFiles]) -> None:  # what the export leaves out, as report says it
        for found in listed.values():
            _skipped([(path, why) for path, why in found.foreign if path not in warned], None)
            warned.update(path for path, _why in found.foreign)

    try:
        result = run_export(dataset, endpoint, window.since, window.until, tuple(agents), text, on_listing=skipping)
    except ReadInterrupted as e:  # the dataset changed, or its storage failed, while it was read
        raise UsageError(str(e)) from e
    except (OSError, ValueError) as e:
        raise UsageError(f"cannot read the dataset {dataset}: {e}") from e
    if result.exchanges == 0:
        raise UsageError(f"no exchanges in {dataset} match; nothing was sent (check --since/--until/--agent)")
    click.echo(
        f"{result.exported} of {result.exchanges} exchange spans accepted by {shown(endpoint)}"
        + (
            f"; {result.failed} refused or unanswered, {result.dropped} not sent"
            if result.exported < result.exchanges
            else ""
        ),
        err=True,
    )
    if result.exported < result.exchanges:
        sys.exit(1)
