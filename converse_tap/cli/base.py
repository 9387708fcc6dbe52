"""The `converse-tap` group."""

from __future__ import annotations

import codecs
import contextlib
import errno
import io
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import click

from .. import __version__

if TYPE_CHECKING:  # the analysis imports pandas: only the commands that need it load it
    pass


INTERRUPTED = 130  # 128 + SIGINT: what a shell reports for a command Ctrl-C stopped
PIPE_CLOSED = 141  # 128 + SIGPIPE: what a shell reports for a command whose reader went away (`| head`)


class _Group(click.Group):
    """The top-level group: how a command ends when the user or the reader stops it, whatever the command.

    Ctrl-C: "Aborted!" on stderr and exit 130, no traceback. Python raises KeyboardInterrupt, which click reports as
    "Aborted!" with exit 1 (the status `report` gives an unreadable dataset); but DuckDB, interrupted inside a query,
    raises a plain `RuntimeError("Query interrupted")` instead, which showed a traceback, and a KeyboardInterrupt in
    a Python callback of a query (an Arrow scan) comes back as a DuckDB error, which `report` called "cannot read
    the dataset". For the commands that read a dataset (`READERS`), a SIGINT handler notes the signal, so that an
    error raised after it is known for what it is by the signal, not by its wording. (The others are left with
    Python's handler: `record` and `demo` run asyncio, which installs its own only in place of that one.)

    A closed output pipe (`report data/ | head`): nothing on stderr and exit 141, as a shell reports a command killed
    by SIGPIPE (click's own exit 1 is `report`'s "the dataset cannot be read")."""

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        name, command, rest = super().resolve_command(ctx, args)
        if command is not None and command.name in READERS and _NOTED not in ctx.meta:
            ctx.meta[_NOTED] = ctx.with_resource(_sigint_noted())  # restored when the command's context closes
        return name, command, rest

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            _stopped("Aborted!", INTERRUPTED)
        except OSError as e:
            if e.errno != errno.EPIPE:
                raise
            _stopped(None, PIPE_CLOSED)
        except Exception as e:
            noted = ctx.meta.get(_NOTED)
            if isinstance(e, click.exceptions.Exit | click.exceptions.Abort) or noted is None or not noted.is_set():
                raise
            _stopped("Aborted!", INTERRUPTED)


READERS = frozenset({"report", "check", "agents", "sql", "show"})  # the commands whose Ctrl-C is noted
_NOTED = "converse_tap.sigint"


def _stopped(message: str | None, status: int) -> None:
    """End the command at once: stdout's buffer, whose reader may be gone, dropped (not flushed into a closed pipe
    at exit, which failed again); `message` on stderr."""
    _drop_stdout()
    if message is not None:
        with contextlib.suppress(OSError, ValueError):
            click.echo(f"\n{message}", err=True)
    raise click.exceptions.Exit(status)


@contextlib.contextmanager
def _sigint_noted() -> Iterator[threading.Event]:
    """While a command runs, Ctrl-C is noted in the event it yields, then raises KeyboardInterrupt as usual. Left as
    it is when Python's default handler is not the one in place (a command or a host that set its own) or when not
    on the main thread (signals are set there only)."""
    noted = threading.Event()
    if threading.current_thread() is not threading.main_thread() or (
        signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield noted
        return

    def note(signum: int, frame: Any) -> None:
        noted.set()
        signal.default_int_handler(signum, frame)

    signal.signal(signal.SIGINT, note)
    try:
        yield noted
    finally:
        if signal.getsignal(signal.SIGINT) is note:
            signal.signal(signal.SIGINT, signal.default_int_handler)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="converse-tap")
def cli() -> None:
    """Record A2A agent traffic through mitmproxy and report on the converse extension envelope.

    \b
    Record:   converse-tap record --out data/      (or mitmdump -s "$(converse-tap addon-path)")
    Import:   converse-tap ingest flows.mitm session.har --out data/
    Report:   converse-tap report data/
    """


UNENCODABLE = "converse-tap-escape"


def _unencodable(e: UnicodeError) -> tuple[str, int]:
    """A character the output's encoding cannot hold written as its `\\uXXXX` escape (a pair of them beyond the
    BMP, as JSON writes it): visible text, and inside a JSON string the same JSON value."""
    if not isinstance(e, UnicodeEncodeError):
        raise e
    out = []
    for ch in e.object[e.start : e.end]:
        code = ord(ch)
        if code > 0xFFFF:
            code -= 0x10000
            out.append(f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}")
        else:
            out.append(f"\\u{code:04x}")
    return "".join(out), e.end


codecs.register_error(UNENCODABLE, _unencodable)


def writable_anywhere(stream: object) -> None:
    """A standard stream whose encoding is not UTF (a Latin-1 locale, `PYTHONIOENCODING=latin-1`) writes what it
    cannot encode as escapes instead of failing the command half-way with a traceback: the reports print `–`, `…`
    and whatever the wire said."""
    if not isinstance(stream, io.TextIOWrapper):
        return
    try:
        utf = codecs.lookup(stream.encoding).name.startswith("utf")
    except LookupError:
        utf = False
    if not utf:
        stream.reconfigure(errors=UNENCODABLE)


# an output that cannot take what is written: a full disk or quota (`report data/ > /full/r.txt`), a file too big
_FULL = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO}


class _ClosedOutput(io.RawIOBase):
    """Standard output when the command was started with it closed (`report data/ >&-`): Python leaves sys.stdout
    None, and click's echo then writes nothing, so `report` exited 0 having written no report (and `sql` failed
    with a traceback). Writing to this fails as writing to a closed descriptor does."""

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        raise OSError(errno.EBADF, "standard output is closed")


def main() -> None:
    if sys.stdout is None:
        sys.stdout = io.TextIOWrapper(_ClosedOutput(), encoding="utf-8", write_through=True)
    for stream in (sys.stdout, sys.stderr):
        writable_anywhere(stream)
    try:
        cli()
    except OSError as e:  # (a closed pipe, EPIPE, ends quietly in `_Group.invoke`)
        if e.errno == errno.EBADF and isinstance(sys.stdout.buffer, _ClosedOutput):
            sys.stdout = None  # (nothing left to flush at exit)
            click.echo(f"Error: {e.strerror}: {_where_to_write(sys.argv[1:])}", err=True)
            sys.exit(2)
        if e.errno not in _FULL:
            raise
        _drop_stdout()
        click.echo(f"Error: cannot write the output: {e.strerror or e}; what was written is incomplete", err=True)
        sys.exit(1)


def _where_to_write(argv: list[str]) -> str:
    """What to do about a closed stdout: redirect it, or give the command's own -o if it has one."""
    command = cli.commands.get(next((a for a in argv if not a.startswith("-")), ""))
    has_o = command is not None and any("-o" in p.opts for p in command.params if isinstance(p, click.Option))
    name = command.name if command is not None else ""
    return f"redirect it (> FILE), or give `{name}` -o FILE" if has_o else "redirect it (> FILE)"


def _drop_stdout() -> None:
    """Send what stdout still buffers nowhere: flushed at exit into a full disk, it failed again, with a traceback."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
