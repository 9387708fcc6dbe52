"""A one-line progress bar for long commands on a terminal: bytes of input read, flows per second, time left.
Nothing is drawn when the stream is not a terminal (piped, redirected, CI), or is one that cannot move its cursor
(`TERM=dumb`: its `ESC[K` showed as text). The line is cut to the terminal's width: a line longer than the
terminal wrapped, and each redraw scrolled the screen by a line."""

from __future__ import annotations

import os
import time
from typing import TextIO


def _clock(seconds: float) -> str:
    seconds = int(seconds)
    h, rest = divmod(seconds, 3600)
    return f"{h}:{rest // 60:02d}:{rest % 60:02d}" if h else f"{rest // 60:02d}:{rest % 60:02d}"


class ProgressBar:
    WIDTH = 24

    def __init__(self, stream: TextIO, interval: float = 0.2) -> None:
        self.stream, self.interval = stream, interval
        self.started = time.monotonic()
        self.shown = 0.0
        self.drawn = False

    @classmethod
    def on_terminal(cls, stream: TextIO) -> ProgressBar | None:
        isatty = getattr(stream, "isatty", None)
        if isatty is None or not isatty() or os.environ.get("TERM", "") in ("dumb", "unknown"):
            return None
        return cls(stream)

    def columns(self) -> int:
        """The terminal's width now (a window can be resized during a long ingest); 80 when it cannot say."""
        try:
            return os.get_terminal_size(self.stream.fileno()).columns or 80
        except (AttributeError, OSError, ValueError):
            return 80

    def __call__(self, done: int, total: int, flows: int) -> None:
        now = time.monotonic()
        if now - self.shown < self.interval and done < total:
            return
        self.shown = now
        line = self.line(done, total, flows, now - self.started)[: max(1, self.columns() - 1)]
        self.stream.write("\r" + line + "\x1b[K")
        self.stream.flush()
        self.drawn = True

    def line(self, done: int, total: int, flows: int, elapsed: float) -> str:
        share = min(1.0, done / total) if total else 1.0
        full = int(share * self.WIDTH)
        bar = "#" * full + "-" * (self.WIDTH - full)
        rate = flows / elapsed if elapsed > 0 else 0.0
        eta = _clock(elapsed * (1 - share) / share) if share > 0 else "--:--"
        return (
            f"[{bar}] {share:4.0%} {done / 2**20:,.0f}/{total / 2**20:,.0f} MiB  "
            f"{flows:,} flows  {rate:,.0f} flows/s  ETA {eta}"
        )

    def close(self) -> None:
        if self.drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
