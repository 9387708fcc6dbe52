"""Write docs/cli.md from the commands' own --help: `python -m scripts.cli_doc`."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from click.testing import CliRunner

from converse_tap.cli import cli

DOC = Path(__file__).parents[1] / "docs" / "cli.md"


def _commands(group: click.Group, prefix: list[str]) -> list[list[str]]:
    out = []
    for name in sorted(group.commands):
        cmd = group.commands[name]
        out.append([*prefix, name])
        if isinstance(cmd, click.Group):
            out += _commands(cmd, [*prefix, name])
    return out


def render_cli_doc() -> str:
    parts = [
        "# converse-tap command reference",
        "",
        "Generated from `--help` by `python -m scripts.cli_doc`; a test fails when it is out of date.",
        "",
    ]
    for path in [[], *_commands(cli, [])]:
        text = CliRunner().invoke(cli, [*path, "--help"], prog_name="converse-tap", terminal_width=100).output
        parts += [f"## converse-tap {' '.join(path)}".rstrip(), "", "```", text.rstrip(), "```", ""]
    return "\n".join(parts)


if __name__ == "__main__":
    if len(sys.argv) > 1:  # (`--help` wrote the file too)
        sys.exit(f"usage: python -m scripts.cli_doc  (writes {DOC}; takes no arguments)")
    DOC.write_text(render_cli_doc(), encoding="utf-8")
    print(f"wrote {DOC}")
