"""Code that must finish in linear time, run in a child process killed after a deadline: a regression to
quadratic time fails its test instead of hanging the suite."""

from __future__ import annotations

import subprocess
import sys

import pytest


def finishes_within(code: str, seconds: float, what: str) -> None:
    """Run `code` (which prints `done` at its end) in a child interpreter; fail naming `what` past `seconds`."""
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=seconds)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what} took over {seconds:.0f} s")
    assert proc.stdout == "done\n", proc.stderr
