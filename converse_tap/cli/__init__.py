"""The converse-tap command line: a thin layer over the library, one module per command group."""

from __future__ import annotations

from .. import mempolicy

mempolicy.for_our_process()  # before pyarrow loads: Arrow's allocator is read from the environment once

from . import capture, demo, export, report  # noqa: E402, F401  (each registers its commands on the group)
from .base import cli, main  # noqa: E402
from .drill import show, sql_command  # noqa: E402

cli.add_command(sql_command)
cli.add_command(show)

__all__ = ["cli", "main"]
