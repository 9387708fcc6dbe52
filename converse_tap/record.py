"""`converse-tap record`: mitmproxy with the ConverseTap addon, in this process."""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import Any

from mitmproxy import exceptions, options
from mitmproxy.tools.dump import DumpMaster

from .a2a.redact import install_log_redactor
from .addon.tap import ConverseTap


async def run_proxy(settings: dict[str, Any], sets: list[str]) -> None:
    """Run until SIGINT/SIGTERM. Raises mitmproxy's OptionsError for a bad setting, before any traffic."""
    # as mitmproxy's own entry point does: let every record through, termlog filters by termlog_verbosity
    logging.getLogger().setLevel(logging.DEBUG)
    for noisy in ("asyncio", "hpack", "tornado"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    opts = options.Options()
    master = DumpMaster(opts, with_termlog=True, with_dumper=False)
    # mitmproxy's own lines quote URLs (a request line it cannot parse, with `user:password@` in it, is logged
    # whole): every handler the master installed redacts them first
    install_log_redactor()
    # deferred: applied the moment the addon below declares its options, so it configures once, correctly
    opts.update_defer(**settings)
    opts.set(*sets, defer=True)
    tap = ConverseTap()
    master.addons.add(tap)
    unknown = sorted(opts.deferred)
    if unknown:
        raise exceptions.OptionsError(f"unknown option(s): {', '.join(unknown)}")
    # the deferred values land before the addon is in the chain, so configure it with the final options here:
    # a bad setting raises now, before any traffic
    tap.configure(set(opts.keys()))
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, master.shutdown)
    await master.run()
