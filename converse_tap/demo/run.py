"""`converse-tap demo`: agent, recording proxy and driver on loopback, then the report."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mitmproxy import options
from mitmproxy.tools.dump import DumpMaster

from ..addon.tap import ConverseTap
from ..store.files import is_dataset
from .agent import AGENTS, AgentServer
from .driver import Driver, DriveStats
from .plans import Plan, Truth, build_plans


class _Ready:
    """Sets an event once mitmproxy's servers listen (the `running` hook)."""

    def __init__(self) -> None:
        self.event = asyncio.Event()

    def running(self) -> None:
        self.event.set()


@dataclass
class DemoResult:
    out: Path
    stats: DriveStats
    truth: Truth
    plans: list[Plan]
    proxy_url: str
    agent_base: str


async def start_proxy(out: Path, mode: str | None = None) -> tuple[DumpMaster, asyncio.Task[None], str]:
    """mitmproxy with ConverseTap in this event loop, on a free loopback port; returns its URL once listening."""
    opts = options.Options()
    master = DumpMaster(opts, with_termlog=False, with_dumper=False)
    ready = _Ready()
    opts.update_defer(
        converse_tap_dir=str(out),
        converse_tap_summary="off",  # the demo prints its report, not a line per exchange
        listen_host="127.0.0.1",
        listen_port=0,
        flow_detail=0,
        **({"mode": [mode]} if mode else {}),
    )
    tap = ConverseTap()
    master.addons.add(tap, ready)
    tap.configure(set(opts.keys()))  # see record.run_proxy: the deferred options arrive before the addon
    task = asyncio.create_task(master.run())
    waiter = asyncio.create_task(ready.event.wait())
    await asyncio.wait({task, waiter}, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        waiter.cancel()
        task.result()
        raise RuntimeError("mitmproxy stopped during start-up")
    host, port = master.addons.get("proxyserver").listen_addrs()[0][:2]
    return master, task, f"http://{host}:{port}"


GROUND_TRUTH = "ground_truth.json"
DEMO_OUTPUT = ("exchanges", "messages", "agent_cards", "_journal", "_salt", "_text_policy", GROUND_TRUTH, "report.html")


class NotDemoOutput(ValueError):
    """The directory holds a dataset the demo did not write: it is never replaced."""


def clear_demo_output(out: Path) -> None:
    """Make `out` ready for a demo run: what an earlier demo wrote there goes; a dataset that is not a demo's output
    (no ground truth beside it) raises NotDemoOutput and stays untouched."""
    if not out.is_dir():
        return
    if is_dataset(out) and not (out / GROUND_TRUTH).is_file():
        raise NotDemoOutput(f"{out} holds a dataset that is not a demo's output")
    for name in DEMO_OUTPUT:
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()


async def run_demo(
    out: Path,
    conversations: int = 60,
    seed: int = 3,
    concurrency: int = 4,
    keep_running: bool = False,
    progress: Callable[[Plan], None] | None = None,
    announce: Callable[[str], None] | None = None,
) -> DemoResult:
    logging.getLogger("mitmproxy").setLevel(logging.WARNING)
    logging.getLogger("a2a").setLevel(logging.ERROR)  # warns about subscriptions the driver closes on purpose
    agent = AgentServer()
    await agent.start()
    master: DumpMaster | None = None
    proxy_task: asyncio.Task[None] | None = None
    try:
        master, proxy_task, proxy_url = await start_proxy(out)
        plans = build_plans(conversations, seed, list(AGENTS))
        stats = await Driver(agent.base, proxy_url, concurrency).run(plans, progress)
        truth = Truth()
        for plan in plans:
            truth.add(plan.truth)
        write_ground_truth(out, truth, stats, seed, plans)
        if keep_running:
            message = f"agent on {agent.base}, recording proxy on {proxy_url}; Ctrl-C stops both and prints the report"
            await _until_stopped(announce or (lambda _msg: None), message)
        return DemoResult(out, stats, truth, plans, proxy_url, agent.base)
    finally:
        if master is not None and proxy_task is not None:
            await master.addons.get("proxyserver").servers.update([])  # closes the listening socket
            master.shutdown()
            await proxy_task
        await agent.stop()


async def _until_stopped(announce: Callable[[str], None], message: str) -> None:
    """Wait for SIGINT or SIGTERM, then return normally: the caller goes on to its report."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    signals = (signal.SIGINT, signal.SIGTERM)
    for sig in signals:
        loop.add_signal_handler(sig, stop.set)
    try:
        announce(message)  # once the handlers are in: a Ctrl-C right after the message is heard
        await stop.wait()
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)


def write_ground_truth(out: Path, truth: Truth, stats: DriveStats, seed: int, plans: list[Plan]) -> None:
    doc: dict[str, Any] = {
        "seed": seed,
        "conversations": len(plans),
        "conversations_with_extension": sum(p.extension for p in plans),
        "requests": stats.requests,
        "requests_with_extension": stats.requests_with_extension,
        "polls": stats.polls,
        "resubscribes": stats.resubscribes,
        "errors": stats.errors,
        "expected": truth.as_report_keys(),
        "mix": {k: sum(1 for p in plans if p.kind == k) for k in sorted({p.kind for p in plans})},
        "transports": {
            f"{b} v{d} {'stream' if s else 'unary'}": sum(
                1 for p in plans if (p.binding, p.dialect, p.streaming) == (b, d, s)
            )
            for b in ("JSONRPC", "HTTP+JSON")
            for d in ("1.0", "0.3")
            for s in (False, True)
        },
    }
    path = out / GROUND_TRUTH
    path.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    path.chmod(0o600)


def report_actuals(report: dict[str, Any]) -> dict[str, Any]:
    """The report's values under the ground truth's keys, zero counts dropped, for an exact comparison."""
    cov, auth, rout = report["coverage"], report["authors"], report["routines"]

    def nonzero(d: dict[str, int]) -> dict[str, int]:
        return {k: v for k, v in sorted(d.items()) if v}

    return {
        "coverage.turns_with_coverage": cov["turns_with_coverage"],
        "coverage.turns_assessed": cov["turns_assessed"],
        "coverage.by_coverage": nonzero({k: v["count"] for k, v in cov["by_coverage"].items()}),
        "coverage.by_reason": nonzero({k: v["count"] for k, v in cov["by_reason"].items()}),
        "coverage.by_availability": nonzero(cov["by_availability"]),
        "authors.by_author": nonzero(auth["by_author"]),
        "authors.conversations": auth["conversations"],
        "authors.conversations_with_human": auth["conversations_with_human"],
        "authors.suppressed_turns": auth["suppressed_turns"],
        "authors.handoffs_to_human": auth["handoffs_to_human"],
        "authors.handbacks_to_agent": auth["handbacks_to_agent"],
        "routines.instances": rout["instances"],
        "routines.completed": rout["completed"],
        "routines.abandoned": rout["abandoned"],
        "routines.open": rout["open"],
        "routines.by_routine": {
            r["routine"]: {o: r[o] for o in ("completed", "abandoned", "open")} for r in rout["by_routine"]
        },
        "routines.abandoned_at": {f"{r['routine']}/{r['slot']}": r["abandoned"] for r in rout["abandoned_at"]},
        "invocations.by_outcome": nonzero(report["invocations"]["by_outcome"]),
    }
