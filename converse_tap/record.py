"""`converse-tap record`: mitmproxy with the ConverseTap addon, in this process."""

from __future__ import annotations

import asyncio
import errno
import logging
import signal
from typing import Any

from mitmproxy import exceptions, options
from mitmproxy.tools.dump import DumpMaster

from .a2a.redact import TEXT_POLICIES, install_log_redactor
from .addon.tap import ConverseTap
from .store import objstore
from .store.files import claim_text_policy


class ListenError(OSError):
    """The proxy could not listen where it was told to (address in use, no permission, no such address)."""

    def __init__(self, reason: str, in_use: bool) -> None:
        super().__init__(reason)
        self.reason, self.in_use = reason, in_use


class _DropStartupErrors(logging.Filter):
    """mitmproxy logs a failed bind with advice in its own options' terms; run_proxy raises its own error."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < logging.ERROR


def _first_line(e: BaseException) -> str:
    text = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
    return text.splitlines()[0] if text else type(e).__name__


async def run_proxy(settings: dict[str, Any], sets: list[str]) -> None:
    """Run until SIGINT/SIGTERM. Before any traffic: raises mitmproxy's OptionsError for a bad setting,
    ListenError when the proxy cannot listen, store.files.TextPolicyConflict when the dataset holds another text
    policy. The proxy listens before the dataset is opened: a start-up that fails writes nothing and says nothing
    that looks like recording."""
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
    master.addons.add(tap)  # declares its options; the deferred values land before it is in the chain
    unknown = sorted(opts.deferred)
    if unknown:
        raise exceptions.OptionsError(f"unknown option(s): {', '.join(unknown)}")
    proxyserver = master.addons.get("proxyserver")
    stop = asyncio.Event()  # a signal during start-up, before master.run() would hear it

    def on_signal() -> None:
        stop.set()
        master.shutdown()

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, on_signal)
    quiet = _DropStartupErrors()
    server_log = logging.getLogger("mitmproxy.addons.proxyserver")
    server_log.addFilter(quiet)
    try:
        if not await proxyserver.setup_servers():  # master.run() finds them up and leaves them
            failed = [s.last_exception for s in proxyserver.servers if s.last_exception is not None]
            in_use = any(getattr(e, "errno", None) == errno.EADDRINUSE for e in failed)
            reason = "; ".join(_first_line(e) for e in failed) or "the proxy did not start"
            raise ListenError(reason, in_use)
        if opts.converse_tap_text not in TEXT_POLICIES:
            raise exceptions.OptionsError(
                f"converse_tap_text must be one of {', '.join(TEXT_POLICIES)}, not {opts.converse_tap_text!r}"
            )
        claim_text_policy(objstore.location(opts.converse_tap_dir), opts.converse_tap_text)
        # configured here, with the final options: a bad setting raises now, before any traffic
        tap.configure(set(opts.keys()))
    except BaseException:
        await proxyserver.servers.update([])  # closes whatever listens (a server that never started: logged, quiet)
        raise
    finally:
        server_log.removeFilter(quiet)
    if stop.is_set():  # stopped while starting: master.run() would forget it, so stop here, orderly
        await proxyserver.servers.update([])
        master.should_exit.set()  # (as master.shutdown() does, a turn of the loop later): `done` waits for the files
        tap.done()
        return
    await master.run()  # no await between the check and here: a later signal reaches the running master
