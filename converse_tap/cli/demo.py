"""`converse-tap demo`: agents, the recording proxy and a client on loopback."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from .guards import (
    UsageError,
    needs_extra,
)

if TYPE_CHECKING:  # the analysis imports pandas: only the commands that need it load it
    pass
from .base import cli
from .common import _report, _window


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
    from ..analysis.render import FORMATS
    from ..store.files import check_writable, write_private

    with needs_extra("demo", "converse-tap demo"):
        from ..demo.run import NotDemoOutput, clear_demo_output, run_demo

    try:
        clear_demo_output(out)  # a second `make demo` replaces the first one's output, and only that
        check_writable(out)
    except NotDemoOutput as e:
        raise UsageError(f"{e}; pass another --out, so the report shows this run only") from e
    except OSError as e:
        raise UsageError(f"cannot write to --out {out}: {e}") from e
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
    report_dict = _report(out, _window((), None, None), None, by=("agent", "day"), examples=20, transcripts=True)
    html_path = out / "report.html"
    write_private(html_path, FORMATS["html"](report_dict))  # its counts open their examples
    report_dict = {k: v for k, v in report_dict.items() if k not in ("examples", "transcripts")}
    if fmt == "text":  # on a terminal, every table fits its width
        from ..analysis.render import terminal_width, to_text

        click.echo(to_text(report_dict, terminal_width(sys.stdout)), nl=False)
    else:
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
    with needs_extra("demo", "converse-tap demo agent"):
        from ..demo.agent import AGENTS, AgentServer

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
