"""The CLI as the tests drive it: in-process, exceptions not caught (a traceback fails the test)."""

from __future__ import annotations

from typing import Any

from click.testing import CliRunner

from converse_tap.cli import cli


def invoke(*args: str) -> Any:
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)
