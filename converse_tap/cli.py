"""The converse-tap command line: a thin layer over the library."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from . import __version__
from .a2a.redact import TEXT_POLICIES, TextPolicy
from .textsafe import safe_line

if TYPE_CHECKING:  # the analysis imports pandas: only the commands that need it load it
    from .analysis.load import Frames, Window


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="converse-tap")
def cli() -> None:
    """Record A2A agent traffic through mitmproxy and report on the converse extension envelope.

    \b
    Record:   converse-tap record --out data/      (or mitmdump -s "$(converse-tap addon-path)")
    Import:   converse-tap ingest flows.mitm session.har --out data/
    Report:   converse-tap report data/
    """


@cli.command("addon-path")
def addon_path() -> None:
    """Print the path of the addon script for `mitmdump -s` / `mitmweb -s`.

    \b
    Example:
        mitmdump -s "$(converse-tap addon-path)" --set converse_tap_dir=data/
    """
    from .addon import mitmdump_script

    click.echo(Path(mitmdump_script.__file__).resolve())


@cli.command()
@click.option("--out", "out", default="converse-tap-data", show_default=True, help="Dataset directory.")
@click.option("--listen-host", default="127.0.0.1", show_default=True, help="Address the proxy listens on.")
@click.option("--listen-port", default=8080, show_default=True, type=int, help="Port (0 picks a free one).")
@click.option(
    "--mode",
    "modes",
    multiple=True,
    help="mitmproxy mode, e.g. regular (default) or reverse:http://127.0.0.1:9999 in front of one agent.",
)
@click.option(
    "--text", type=click.Choice(TEXT_POLICIES), default="keep", show_default=True, help="Message text policy."
)
@click.option("--flush-interval", type=float, default=1.0, show_default=True, help="Seconds between journal flushes.")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="Any mitmproxy option (repeatable).")
def record(
    out: str,
    listen_host: str,
    listen_port: int,
    modes: tuple[str, ...],
    text: str,
    flush_interval: float,
    sets: tuple[str, ...],
) -> None:
    """Run a recording proxy: A2A traffic through it lands in a Parquet dataset.

    \b
    Example:
        converse-tap record --out data/ --listen-port 8080
        HTTPS_PROXY=http://127.0.0.1:8080 my-a2a-client ...
    Stop with Ctrl-C; everything recorded is flushed to Parquet.
    """
    from mitmproxy import exceptions

    from .record import run_proxy

    settings = {
        "converse_tap_dir": out,
        "converse_tap_text": text,
        "converse_tap_flush_interval": str(flush_interval),
        "listen_host": listen_host,
        "listen_port": listen_port,
    }
    if modes:
        settings["mode"] = list(modes)
    try:
        asyncio.run(run_proxy(settings, list(sets)))
    except exceptions.OptionsError as e:
        raise click.ClickException(str(e)) from e


@cli.command()
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path), help="Dataset directory."
)
@click.option(
    "--text", type=click.Choice(TEXT_POLICIES), default="keep", show_default=True, help="Message text policy."
)
@click.option(
    "--jobs",
    type=click.IntRange(min=1),
    help="Processes sharing the input (above 8 MiB of it); default: one per CPU core.",
)
@click.option(
    "--redact",
    "redact",
    multiple=True,
    metavar="REGEX",
    help="Also redact what this regular expression matches in every stored URL (its groups only, if it has any); "
    "repeatable. Credentials in userinfo, JWTs, ;jsessionid= and secret query values are always redacted.",
)
def ingest(files: tuple[Path, ...], out: Path, text: str, jobs: int | None, redact: tuple[str, ...]) -> None:
    """Import mitmproxy flow files (mitmdump -w) and HAR files into a dataset.

    \b
    Example:
        converse-tap ingest capture.mitm browser.har --out data/
    A damaged file is reported with its position; what came before the damage is kept (exit 1). Exchanges
    already in the dataset are skipped. A progress bar shows on a terminal.
    """
    from .a2a.redact import Redaction
    from .ingest import NOT_A_CAPTURE, IngestError, kind
    from .ingest import ingest as run_ingest
    from .ingest_report import forget_dataset, report_lines
    from .nopandas import without_pandas
    from .progress import ProgressBar
    from .store.files import check_writable, dataset_salt

    try:
        redaction = Redaction.from_patterns(redact)
    except ValueError as e:
        raise UsageError(f"--redact: {e}") from e
    unreadable: list[IngestError] = []
    for path in files:
        try:
            kind(path)
        except IngestError as e:
            unreadable.append(e)
    if len(unreadable) == len(files):  # nothing to read: nothing is created
        for err in unreadable:
            click.echo(safe_line(redaction.log_text(f"Error: {err}")), err=True)
        sys.exit(2)
    existed = out.exists()
    try:
        check_writable(out)
        policy = TextPolicy(text, dataset_salt(out) if text == "hash" else b"")
    except OSError as e:
        raise click.ClickException(f"cannot write the dataset to {out}: {e}") from e
    bar = ProgressBar.on_terminal(sys.stderr)
    try:
        with without_pandas():
            result = run_ingest(
                list(files), out, policy, progress=bar, jobs=jobs or min(os.cpu_count() or 1, 8), redaction=redaction
            )
    finally:
        if bar is not None:
            bar.close()
    if not existed and result.exchanges == 0 and not result.write_error:
        forget_dataset(out)  # nothing was read into it: leave nothing behind
    for level, line in report_lines(result, out):
        prefix = "Error: " if level == "error" else "Warning: " if level == "warning" else ""
        click.echo(safe_line(redaction.log_text(prefix + line)), err=True)
    if result.errors and all(e.reason.endswith(NOT_A_CAPTURE) for e in result.errors) and result.flows == 0:
        sys.exit(2)
    if result.errors or result.write_error or result.interrupted:
        sys.exit(1)


@cli.command()
@click.argument("dataset", type=click.Path(exists=True, file_okay=False, path_type=Path))
def recover(dataset: Path) -> None:
    """Roll journals left by a proxy that died into Parquet files.

    The proxy does this itself when it starts again; this command is for datasets you only read.
    """
    from .store.writer import recover as run_recover

    counts = run_recover(dataset)
    click.echo(", ".join(f"{n} {table} rows" for table, n in counts.items()) + " recovered", err=True)


def _duration(text: str | None) -> object:
    if text is None:
        return None
    import pandas as pd

    try:
        value = pd.Timedelta(text)
    except ValueError:
        value = None
    if value is None or pd.isna(value) or value.total_seconds() <= 0:
        raise click.BadParameter(f"{text!r} is not a positive duration; write e.g. 90s, 30min, 2h or 1d")
    return value


def _when(text: str | None, end: bool) -> object:
    if text is None:
        return None
    from .analysis.load import parse_when

    try:
        return parse_when(text, end=end)
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is not an ISO date or time; write e.g. 2026-12-01 or 2026-12-01T09:30Z"
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
    from .analysis.load import Window

    window = Window(tuple(agents) or None, _when(since, end=False), _when(until, end=True))  # type: ignore[arg-type]
    if window.since and window.until and window.since >= window.until:
        raise click.BadParameter("--since must be before --until")
    return window


def _load(dataset: Path, window: Window, error: type[click.ClickException] = click.ClickException) -> Frames:
    from .analysis.load import load_frames

    try:
        return load_frames(dataset, window, messages=False)
    except (OSError, ValueError) as e:  # pyarrow's errors on unreadable files are ValueError/OSError subclasses
        raise error(f"cannot read the dataset {dataset}: {e}") from e


def _report(
    dataset: Path,
    window: Window,
    memory_limit: str | None,
    error: type[click.ClickException] = click.ClickException,
    **options: Any,
) -> dict[str, Any]:
    """The report over a dataset on disk, computed out of core (see analysis/engine.py)."""
    import duckdb

    from .analysis.engine import DEFAULT_MEMORY_LIMIT, Engine
    from .analysis.report import build_report

    try:
        engine = Engine.over_dataset(dataset, window, memory_limit=memory_limit or DEFAULT_MEMORY_LIMIT)
    except (OSError, ValueError, duckdb.Error) as e:
        raise error(f"cannot read the dataset {dataset}: {e}") from e
    try:
        if not engine.present and options.pop("require_data", False):
            raise error(f"{dataset} holds no Parquet files: nothing to check")
        options.pop("require_data", None)
        return build_report(engine, window, **options)
    except duckdb.OutOfMemoryException as e:
        first = str(e).splitlines()[0]  # DuckDB goes on with SET statements a CLI user cannot type
        raise error(f"the report needs more memory than its limit allows; raise --memory-limit ({first})") from e
    except (OSError, duckdb.Error) as e:
        raise error(f"cannot read the dataset {dataset}: {e}") from e
    finally:
        engine.close()


@cli.command()
@click.argument("dataset", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown", "html"]),
    default="text",
    show_default=True,
    help="Output format.",
)
@click.option("--output", "-o", type=click.Path(dir_okay=False, path_type=Path), help="Write to FILE, not stdout.")
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
def report(
    dataset: Path,
    fmt: str,
    output: Path | None,
    by: tuple[str, ...],
    agents: tuple[str, ...],
    since: str | None,
    until: str | None,
    memory_limit: str | None,
    stale_after: str | None,
) -> None:
    """Report coverage, authors, routines, invocations, citations and conformance of a dataset.

    \b
    Examples:
        converse-tap report data/
        converse-tap report data/ --by agent --since 2026-12-01 --format json
        converse-tap report data/ --format html -o report.html
    """
    from .analysis.render import FORMATS
    from .store.files import write_private

    window = _window(agents, since, until)
    stale = _duration(stale_after)
    if fmt == "html":  # the charts want these breakdowns
        by = tuple(dict.fromkeys((*by, "agent", "day")))
    rendered = FORMATS[fmt](_report(dataset, window, memory_limit, by=by, stale_after=stale))
    if output is None:
        click.echo(rendered, nl=False)
    else:
        try:
            write_private(output, rendered)
        except OSError as e:
            raise UsageError(f"cannot write the report to {output}: {e}") from e
        click.echo(f"wrote {output}", err=True)


@cli.group(invoke_without_command=True)
@click.option(
    "--out",
    "out",
    default="converse-tap-demo",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Where the dataset, ground truth and HTML report go.",
)
@click.option(
    "--conversations",
    default=60,
    show_default=True,
    type=click.IntRange(1, 100_000),
    help="How many conversations.",
)
@click.option("--seed", default=3, show_default=True, type=int, help="Chooses the conversation mix.")
@click.option("--concurrency", default=4, show_default=True, type=click.IntRange(1, 256), help="Conversations at once.")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json", "markdown"]),
    default="text",
    show_default=True,
    help="Format of the report printed at the end.",
)
@click.option("--keep-running", is_flag=True, help="Leave agent and proxy up after the traffic (Ctrl-C stops them).")
@click.pass_context
def demo(
    ctx: click.Context,
    out: Path,
    conversations: int,
    seed: int,
    concurrency: int,
    fmt: str,
    keep_running: bool,
) -> None:
    """Run the whole pipeline on loopback: a converse agent, the recording proxy, a client driving traffic.

    \b
    Example:
        converse-tap demo --conversations 100 --seed 3
    Prints the report; the dataset, ground truth and an HTML report stay in --out.
    """
    if ctx.invoked_subcommand is not None:
        return
    from .analysis.render import FORMATS
    from .demo.run import run_demo
    from .store.files import check_writable, write_private

    try:
        if out.exists() and any((out / t).exists() for t in ("exchanges", "messages", "agent_cards")):
            raise click.ClickException(
                f"{out} already holds a dataset; pass another --out or delete it, so the report shows this run only"
            )
        check_writable(out)
    except OSError as e:
        raise click.ClickException(f"cannot write to {out}: {e}") from e
    with click.progressbar(length=conversations, label="conversations", file=sys.stderr) as bar:
        result = asyncio.run(
            run_demo(
                out,
                conversations,
                seed,
                concurrency,
                keep_running,
                progress=lambda _plan: bar.update(1),
                announce=lambda msg: click.echo(msg, err=True),
            )
        )
    report_dict = _report(out, _window((), None, None), None, by=("agent", "day"))
    html_path = out / "report.html"
    write_private(html_path, FORMATS["html"](report_dict))
    click.echo(FORMATS[fmt](report_dict), nl=False)
    s = result.stats
    click.echo(
        f"\n{s.conversations} conversations, {s.turns} turns, {s.requests} A2A calls ({s.polls} polls, "
        f"{s.resubscribes} resubscribes) through {result.proxy_url}\n"
        f"dataset: {out}/  ground truth: {out}/ground_truth.json  HTML report: {html_path}",
        err=True,
    )
    for err in s.errors:
        click.echo(f"Error: {err}", err=True)
    if s.errors:
        sys.exit(1)


@demo.command("agent")
@click.option("--host", default="127.0.0.1", show_default=True)
@click.option("--port", default=9999, show_default=True, type=int, help="Port (0 picks a free one).")
def demo_agent(host: str, port: int) -> None:
    """Serve the demo agents alone, for your own client.

    \b
    Cards: http://HOST:PORT/agents/ag_trattoria01/.well-known/agent-card.json (and ag_osteria02)
    """
    from .demo.agent import AGENTS, AgentServer

    async def serve() -> None:
        server = AgentServer(host, port)
        await server.start()
        for agent_id in AGENTS:
            click.echo(f"{server.base}/agents/{agent_id}/.well-known/agent-card.json", err=True)
        try:
            await server.task  # type: ignore[misc]
        finally:
            await server.stop()

    try:
        asyncio.run(serve())
    except KeyboardInterrupt:
        pass
    except OSError as e:
        raise click.ClickException(f"cannot serve on {host}:{port}: {e}") from e


class UsageError(click.ClickException):
    exit_code = 2


def _fmt(v: float | None, share: bool) -> str:
    if v is None:
        return "no data"
    return f"{v * 100:.1f}%" if share else f"{v:g}"


@cli.command()
@click.argument("dataset", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--max-unanswered-share", type=click.FloatRange(0, 1), help="Fail above this share of unanswered turns.")
@click.option("--min-answered-share", type=click.FloatRange(0, 1), help="Fail below this share of answered turns.")
@click.option("--max-abandonment-rate", type=click.FloatRange(0, 1), help="Fail above this routine abandonment rate.")
@click.option("--max-human-share", type=click.FloatRange(0, 1), help="Fail above this share of human-written replies.")
@click.option("--no-anomalies", is_flag=True, help="Fail on any conformance anomaly.")
@click.option("--per-agent", is_flag=True, help="Apply the shares and rates to every agent on its own.")
@window_options
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def check(
    dataset: Path,
    max_unanswered_share: float | None,
    min_answered_share: float | None,
    max_abandonment_rate: float | None,
    max_human_share: float | None,
    no_anomalies: bool,
    per_agent: bool,
    agents: tuple[str, ...],
    since: str | None,
    until: str | None,
    memory_limit: str | None,
    fmt: str,
) -> None:
    """Gate on recorded traffic: exit 0 when every threshold holds, 1 when one fails, 2 on a usage or data error.

    \b
    Example (in CI, after a test run recorded through the proxy):
        converse-tap check data/ --max-unanswered-share 0.1 --max-abandonment-rate 0.25 --no-anomalies
    A share with nothing to rest on (no assessed turns, no closed routines) passes and says "no data".
    """
    import json

    from .analysis.gate import Threshold, evaluate

    thresholds = [
        Threshold(metric, bound, limit)
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
    window = _window(agents, since, until)
    by = ("agent",) if per_agent else ()
    report = _report(dataset, window, memory_limit, error=UsageError, require_data=True, by=by)
    outcomes = evaluate(report, thresholds, per_agent)
    failed = [o for o in outcomes if not o.passed]
    if fmt == "json":
        click.echo(
            json.dumps(
                {"schema": "converse-tap-check/1", "passed": not failed, "checks": [o.as_dict() for o in outcomes]},
                indent=2,
            )
        )
    else:
        for o in outcomes:
            share = o.metric != "anomalies"
            verdict = "ok  " if o.passed else "FAIL"
            line = (
                f"{verdict} {o.scope}: {o.metric} {_fmt(o.value, share)} "
                f"({'<=' if o.bound == 'max' else '>='} {_fmt(o.limit, share)}) on {o.basis} {o.basis_name}"
            )
            if not o.passed and o.margin is not None:
                line += f", off by {_fmt(o.margin, share)}"
            click.echo(safe_line(line))
    sys.exit(1 if failed else 0)


@cli.command()
@click.argument("dataset", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True)
def agents(dataset: Path, fmt: str) -> None:
    """List each agent seen: its card's converse declaration, MCP endpoint, and tools with their required inputs.

    \b
    Example:
        converse-tap agents data/ --format json
    """
    import json

    from .analysis.agents import agents_overview, agents_text

    overview = agents_overview(_load(dataset, _window((), None, None)))
    click.echo(json.dumps(overview, indent=2) if fmt == "json" else agents_text(overview), nl=fmt == "json")


def main() -> None:
    cli()
