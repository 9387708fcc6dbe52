"""The ingest progress bar on real pseudo-terminals: cut to the terminal's width, and not drawn where the terminal
cannot move its cursor."""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import termios

import pytest

from converse_tap.progress import ProgressBar


def _terminal(columns: int) -> tuple[int, int]:
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    return master, slave


def _everything(master: int) -> bytes:
    """All the terminal got: read until the other side is closed (one read may return part of it)."""
    seen = b""
    while True:
        try:
            chunk = os.read(master, 1 << 16)
        except OSError:  # (EIO: the terminal's other side is closed and nothing is left)
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    return seen


@pytest.mark.parametrize("columns", [20, 40, 200])
def test_the_bar_fits_the_terminal_it_is_drawn_on(columns: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A line longer than the terminal wrapped, and each redraw (five a second) scrolled the screen by a line."""
    monkeypatch.setenv("TERM", "xterm")
    master, slave = _terminal(columns)
    with open(slave, "w", encoding="utf-8", closefd=True) as stream:
        bar = ProgressBar.on_terminal(stream)
        assert bar is not None
        bar.interval = 0
        for done in (1 << 20, 512 << 20, 1 << 30):
            bar(done, 1 << 30, done // 4096)
        bar.close()
    seen = _everything(master).decode()
    lines = [part.replace("\x1b[K", "") for part in seen.split("\r") if part.replace("\x1b[K", "")]
    assert len(lines) == 3, seen
    assert all(len(line) < columns for line in lines), lines
    assert all(line.startswith("[") for line in lines)
    if columns == 200:  # a wide terminal shows the whole line
        assert "flows/s" in lines[-1] and "ETA" in lines[-1]


@pytest.mark.parametrize("term", ["dumb", "unknown"])
def test_no_bar_on_a_terminal_that_cannot_move_its_cursor(term: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`ESC[K` showed as text there, once per redraw."""
    monkeypatch.setenv("TERM", term)
    master, slave = _terminal(80)
    with open(slave, "w", encoding="utf-8", closefd=True) as stream:
        assert ProgressBar.on_terminal(stream) is None
    os.close(master)
