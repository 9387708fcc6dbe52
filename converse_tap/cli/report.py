"""Commands that read a dataset: report, check, agents."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from ..textsafe import safe_line
from .guards import (
    DATASET,
    MIN_OPTIONS,
    NOTHING_MEASURED,
    Dataset,
    SafeError,
    UsageError,
    check_output,
    check_source,
    output_option,
    read_error,
    write_output,
)

if TYPE_CHECKING:  # the analysis imports pandas: only the commands that need it load it
    pass
from .base import cli
from .common import _duration, _engine_check, _fmt, _report, _skipped, _window, engine_options, window_options


@cli.command()
@click.argument("dataset", type=DATASET)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown", "html"]),
    default="text",
    show_default=True,
    help="Output format.",
)
@click.option(
    "--output",
    "-o",
    type=click.Path(dir_okay=False),
    callback=output_option,
    help="Write to FILE, not stdout (- is stdout).",
)
@click.option(
    "--by",
    "by",
    multiple=True,
    type=click.Choice(["agent", "day", "routine"]),
    help="Add a breakdown (repeatable).",
)
@window_options
@click.option(
    "--stale-after", help="Report open routine instances idle longer than this (e.g. 30min, 2h, 1d) as stale."
)
@click.option(
    "--examples",
    type=click.IntRange(0, 1000),
    help="Up to N example conversations under each breakdown, with the `show` command to open one "
    "(default: 0; 20 in HTML, where each count opens its examples and their transcripts).",
)
@engine_options
def report(
    dataset: Dataset,
    fmt: str,
    output: Path | None,
    by: tuple[str, ...],
    agents: tuple[str, ...],
    since: str | None,
    until: str | None,
    memory_limit: str | None,
    stale_after: str | None,
    examples: int | None,
    engine: str,
    spark_master: str | None,
) -> None:
    """Report coverage, authors, routines, invocations, citations and conformance of a dataset.

    \b
    Examples:
        converse-tap report data/
        converse-tap report data/ --by agent --since 2026-12-01 --format json
        converse-tap report data/ --format html -o report.html
    \b
    Exit status: 0 the report measured traffic; 3 the report is written but measured nothing (no A2A message
    in the dataset or the window); 2 not a dataset, an --agent the dataset never saw, a dataset
    that kept changing while it was read, or a usage error;
    1 the dataset cannot be read; 130 interrupted (Ctrl-C); 141 the output's reader went away.
    """
    from ..analysis.render import FORMATS
    from ..analysis.tables import measured

    _engine_check(engine, spark_master)
    window = _window(agents, since, until)
    stale = _duration(stale_after)
    if output is not None:
        check_output(output, dataset)
    check_source(dataset, window, memory_limit)
    if fmt == "html":  # the charts want these breakdowns
        by = tuple(dict.fromkeys((*by, "agent", "day")))
    if engine == "spark" and examples:
        raise UsageError("--examples runs on DuckDB only; leave it out with --engine spark")
    if examples is None:
        examples = 20 if fmt == "html" and engine == "duckdb" else 0
    report_dict = _report(
        dataset,
        window,
        memory_limit,
        by=by,
        stale_after=stale,
        examples=examples,
        transcripts=fmt == "html" and bool(examples),
        engine=engine,
        spark_master=spark_master,
    )
    if fmt == "text" and output is None:  # on a terminal, every table fits its width
        from ..analysis.render import terminal_width, to_text

        rendered = to_text(report_dict, terminal_width(sys.stdout))
    else:
        rendered = FORMATS[fmt](report_dict)
    if output is None:
        click.echo(rendered, nl=False)
    else:
        write_output(output, rendered)
        click.echo(safe_line(f"wrote {output}"), err=True)
    if not measured(report_dict):
        where = "in the selected window" if any(report_dict["dataset"]["filters"].values()) else "in it"
        click.echo(safe_line(f"Error: nothing measured: {dataset} holds no A2A message {where}"), err=True)
        sys.exit(NOTHING_MEASURED)


class _Share(click.FloatRange):
    """A share between 0 and 1; NaN, which compares false with both bounds, is refused too (it made every
    threshold fail, "<= nan%")."""

    def __init__(self) -> None:
        super().__init__(0, 1)

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        share = super().convert(value, param, ctx)
        if share != share:
            self.fail(f"{value!r} is not a number between 0 and 1", param, ctx)
        return share


SHARE = _Share()


@cli.command()
@click.argument("dataset", type=DATASET)
@click.option("--max-unanswered-share", type=SHARE, help="Fail above this share of unanswered turns.")
@click.option("--min-answered-share", type=SHARE, help="Fail below this share of answered turns.")
@click.option("--max-abandonment-rate", type=SHARE, help="Fail above this routine abandonment rate.")
@click.option("--max-human-share", type=SHARE, help="Fail above this share of human-written replies.")
@click.option("--no-anomalies", is_flag=True, help="Fail on any conformance anomaly.")
@click.option("--per-agent", is_flag=True, help="Apply the shares and rates to every agent on its own.")
@click.option(
    "--min-turns",
    type=click.IntRange(min=0),
    default=0,
    help="Fail a coverage share measured on fewer than N assessed turns.",
)
@click.option(
    "--min-routines",
    type=click.IntRange(min=0),
    default=0,
    help="Fail the abandonment rate measured on fewer than N closed routine instances.",
)
@click.option(
    "--min-replies",
    type=click.IntRange(min=0),
    default=0,
    help="Fail the human share measured on fewer than N replies with an author.",
)
@click.option(
    "--allow-empty",
    is_flag=True,
    help="Let a threshold with nothing to rest on (no turns, no closed routines) pass instead of exiting 2.",
)
@window_options
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "junit"]),
    default="text",
    show_default=True,
    help="junit: JUnit XML for CI, one test case per threshold and agent.",
)
@engine_options
def check(
    dataset: Dataset,
    max_unanswered_share: float | None,
    min_answered_share: float | None,
    max_abandonment_rate: float | None,
    max_human_share: float | None,
    no_anomalies: bool,
    per_agent: bool,
    min_turns: int,
    min_routines: int,
    min_replies: int,
    allow_empty: bool,
    agents: tuple[str, ...],
    since: str | None,
    until: str | None,
    memory_limit: str | None,
    fmt: str,
    engine: str,
    spark_master: str | None,
) -> None:
    """Gate on recorded traffic: exit 0 when every threshold holds, 1 when one fails, 2 on a usage or data error.

    \b
    Example (in CI, after a test run recorded through the proxy):
        converse-tap check data/ --max-unanswered-share 0.1 --max-abandonment-rate 0.25 --no-anomalies
    A threshold with nothing to rest on (no assessed turns, no closed routine instances, no exchanges: an empty
    window, an agent without traffic, a recording that saw only cards) exits 2, "nothing measured", unless
    --allow-empty is given. An --agent the dataset never saw exits 2 and lists the agents it saw.
    """

    from ..analysis.gate import Threshold, evaluate

    minimum = {"--min-turns": min_turns, "--min-routines": min_routines, "--min-replies": min_replies}
    thresholds = [
        Threshold(metric, bound, limit, minimum.get(MIN_OPTIONS.get(metric, ""), 0))
        for metric, bound, limit in (
            ("unanswered_share", "max", max_unanswered_share),
            ("answered_share", "min", min_answered_share),
            ("abandonment_rate", "max", max_abandonment_rate),
            ("human_share", "max", max_human_share),
            ("anomalies", "max", 0.0 if no_anomalies else None),
        )
        if limit is not None
    ]
    if not thresholds:
        raise UsageError("give at least one threshold, e.g. --max-unanswered-share 0.1 (see --help)")
    _engine_check(engine, spark_master)
    window = _window(agents, since, until)
    check_source(dataset, window, memory_limit)
    by = ("agent",) if per_agent else ()
    report = _report(
        dataset,
        window,
        memory_limit,
        error=UsageError,
        require_data=True,
        by=by,
        engine=engine,
        spark_master=spark_master,
    )
    outcomes = evaluate(report, thresholds, per_agent, allow_empty)
    failed = [o for o in outcomes if not o.passed]
    empty = [o for o in outcomes if o.empty and not allow_empty]
    from .drill import check_examples, example_lines

    examples = check_examples(dataset, window, memory_limit, failed)  # the turns or instances behind a failure

    def verdict(o: Any) -> str:
        return _verdict(o, allow_empty)

    if fmt == "json":
        checks = [{**o.as_dict(), "examples": examples.get((o.scope, o.metric), [])} for o in outcomes]
        click.echo(json.dumps({"schema": "converse-tap-check/1", "passed": not failed, "checks": checks}, indent=2))
    elif fmt == "junit":
        from ..analysis.junit import junit_xml

        click.echo(junit_xml(outcomes, verdict, examples), nl=False)
    else:
        for o in outcomes:
            click.echo(safe_line(("ok   " if o.passed else "FAIL ") + verdict(o)))
            if not o.passed:
                for line in example_lines(dataset, examples.get((o.scope, o.metric), [])):
                    click.echo(line)  # escaped already
    if empty:
        what = "; ".join(f"{o.scope}: {o.metric} (0 {o.basis_name})" for o in empty)
        raise UsageError(
            f"nothing measured for {what}. Check the window (--since/--until/--agent) and that the traffic "
            "carried the converse envelope, or pass --allow-empty to let an empty measure pass"
        )
    sys.exit(1 if failed else 0)


def _verdict(o: Any, allow_empty: bool = False) -> str:
    share = o.metric != "anomalies"
    line = (
        f"{o.scope}: {o.metric} {_fmt(o.value, share)} "
        f"({'<=' if o.bound == 'max' else '>='} {_fmt(o.limit, share)}) on {o.basis} {o.basis_name}"
    )
    if o.empty and not allow_empty:
        line += ", nothing measured"
    elif o.too_few:
        line += f", fewer than {MIN_OPTIONS[o.metric]} {o.min_basis}"
    elif not o.passed and o.margin is not None:
        line += f", off by {_fmt(o.margin, share)}"
    return line


@cli.command()
@click.argument("dataset", type=DATASET)
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def agents(dataset: Dataset, fmt: str) -> None:
    """List each agent seen: its card's converse declaration, MCP endpoint, and tools with their required inputs.

    \b
    Example:
        converse-tap agents data/ --format json
    """

    import duckdb

    from ..analysis.agents import agents_text, dataset_overview
    from ..analysis.load import journal_notes

    window = _window((), None, None)
    check_source(dataset, window)
    try:
        overview, engine = dataset_overview(dataset)
    except (OSError, ValueError, duckdb.Error) as e:
        raise read_error(e, dataset, SafeError) from e
    _skipped(engine.skipped, None)
    for note in journal_notes(engine.journals, dataset):
        click.echo(safe_line(f"note: {note}"), err=True)
    click.echo(
        json.dumps(overview, indent=2, allow_nan=False) if fmt == "json" else agents_text(overview), nl=fmt == "json"
    )
