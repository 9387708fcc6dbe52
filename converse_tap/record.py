"""`converse-tap record`: mitmproxy with the ConverseTap addon, in this process."""

from __future__ import annotations

import asyncio
import errno
import io
import logging
import signal
import sys
from typing import IO, Any, cast

from mitmproxy import exceptions, options
from mitmproxy.addons.termlog import TermLog
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


class LogOutput(io.TextIOBase):
    """mitmproxy's log lines, written to the first of `streams` that takes them, then to none. mitmproxy's log
    handler exits the process on a line it cannot print: a recorder whose stdout reader went away (`record | tee
    FILE`, the tee killed; a restarted journald) stopped serving at its next client connection, and every client
    configured to use it was refused."""

    def __init__(self, *streams: IO[str] | None) -> None:
        super().__init__()
        self._streams = [s for s in streams if s is not None]

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        while self._streams:
            stream = self._streams[0]
            try:
                stream.write(text)
                if "\n" in text:
                    stream.flush()
                return len(text)
            except (OSError, ValueError):  # (ValueError: a stream closed under us)
                self._streams.pop(0)
        return len(text)

    def isatty(self) -> bool:
        try:
            return bool(self._streams) and self._streams[0].isatty()
        except (OSError, ValueError):
            return False


def _first_line(e: BaseException) -> str:
    text = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
    return text.splitlines()[0] if text else type(e).__name__


async def run_proxy(
    settings: dict[str, Any], sets: list[str], log_to: tuple[IO[str] | None, ...] | None = None
) -> None:
    """Run until SIGINT, SIGTERM or SIGHUP. Before any traffic: raises mitmproxy's OptionsError for a bad setting,
    ListenError when the proxy cannot listen, store.files.TextPolicyConflict when the dataset holds another text
    policy. The proxy listens before the dataset is opened: a start-up that fails writes nothing and says nothing
    that looks like recording. `log_to`: where mitmproxy's log lines go, the first that takes them (by default
    stdout, as mitmdump prints them, then stderr)."""
    # as mitmproxy's own entry point does: let every record through, termlog filters by termlog_verbosity
    logging.getLogger().setLevel(logging.DEBUG)
    for noisy in ("asyncio", "hpack", "tornado"):
        logging.getLogger(noisy).setLevel(logging.WARNING)
    opts = options.Options()
    master = DumpMaster(opts, with_termlog=False, with_dumper=False)
    # (as Master.__init__ adds it for stdout; its `run` uninstalls it at the end)
    output = LogOutput(*(log_to if log_to is not None else (sys.stdout, sys.stderr)))
    master._termlog_addon = TermLog(out=cast(IO[str], output))
    master.addons.add(master._termlog_addon)
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
    # SIGHUP too (a closed terminal, `kill -HUP`): its default killed the proxy on the spot, with no shutdown line
    # and the requests waiting for their response lost unsaid; its worker was left to finish alone. Unless it was
    # ignored when we started (`nohup converse-tap record …`): a hangup then stops nothing, as asked
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        if sig != signal.SIGHUP or signal.getsignal(sig) is not signal.SIG_IGN:
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
