"""Retained memory, for tests of bounds on what the wire can make a long-running process keep."""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable


def retained(run: Callable[[int], object]) -> int:
    """Bytes the second of two calls `run(0)`, `run(1)` leaves allocated (tracemalloc): the first fills the bounded
    caches (URLs, urlsplit's) with traced entries, which the second then only replaces."""
    tracemalloc.start()
    try:
        run(0)
        gc.collect()
        before = tracemalloc.get_traced_memory()[0]
        run(1)
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
