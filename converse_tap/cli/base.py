"""The `converse-tap` group."""

from __future__ import annotations

import codecs
import errno
import io
import os
import sys
from typing import TYPE_CHECKING

import click

from .. import __version__

if TYPE_CHECKING:  # the analysis imports pandas: only the commands that need it load it
    pass


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
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


def main() -> None:
    for stream in (sys.stdout, sys.stderr):
        writable_anywhere(stream)
    try:
        cli()
    except OSError as e:  # (click ends quietly on a closed pipe, EPIPE, itself)
        if e.errno not in _FULL:
            raise
        _drop_stdout()
        click.echo(f"Error: cannot write the output: {e.strerror or e}; what was written is incomplete", err=True)
        sys.exit(1)


def _drop_stdout() -> None:
    """Send what stdout still buffers nowhere: flushed at exit into a full disk, it failed again, with a traceback."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
