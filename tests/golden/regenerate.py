"""Regenerate the golden reports: `make golden` (python -m tests.golden.regenerate)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from click.testing import CliRunner

from converse_tap.analysis.render import _md_escape
from converse_tap.cli import cli
from tests.golden.sample import build_sample

HERE = Path(__file__).parent
CASES = {
    "report.txt": ["--stale-after", "1h"],
    "report.md": ["--format", "markdown", "--by", "agent"],
}


def render(dataset: Path, args: list[str]) -> str:
    result = CliRunner().invoke(cli, ["report", str(dataset), *args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    # the path as the report writes it (Markdown escapes it: a `_` at a word's end, a `.` before a letter)
    return result.stdout.replace(_md_escape(str(dataset)), "DATASET").replace(str(dataset), "DATASET")


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        build_sample(Path(tmp))
        for name, args in CASES.items():
            (HERE / name).write_text(render(Path(tmp), args), encoding="utf-8")
            print(f"wrote {HERE / name}")


if __name__ == "__main__":
    main()
