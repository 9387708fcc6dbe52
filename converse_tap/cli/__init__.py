"""The converse-tap command line: a thin layer over the library, one module per command group."""

from __future__ import annotations

from . import capture, demo, export, report  # noqa: F401  (each registers its commands on the group)
from .base import cli, main
from .drill import show, sql_command

cli.add_command(sql_command)
cli.add_command(show)

__all__ = ["cli", "main"]
