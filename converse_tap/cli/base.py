"""The `converse-tap` group."""

from __future__ import annotations

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


def main() -> None:
    cli()
