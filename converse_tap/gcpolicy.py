"""Fewer cyclic garbage collections in the loops that turn traffic into rows (the recording worker, ingest).

Rows are dicts and lists without reference cycles, so the cyclic collector frees nothing in them; yet with
CPython's default thresholds it runs after every 700 net allocations and walks every row still waiting for its
flush, plus, now and then, every module and class loaded. In the recording worker that was 22.5 µs of CPU per
unary exchange (7% of its work; `gc.callbacks` timing, docs/performance.md); with these settings, under 1.
Reference counting still frees every row the moment it is written; cycles (an exception's traceback, for
instance) are still collected, only in larger batches.

Imports nothing from the project, so every layer can use it.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

THRESHOLDS = (50_000, 20, 100)  # net allocations before a young collection; young, middle collections per next


def for_process() -> None:
    """For a process of our own that only records (the recording worker): what it has loaded so far (modules,
    classes, the schema) is moved out of every future collection, and collections start after 50,000 net
    allocations rather than 700."""
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)


@contextlib.contextmanager
def fewer_collections() -> Iterator[None]:
    """The same thresholds for a while, the caller's restored afterwards (ingest runs in a user's process too,
    e.g. a notebook's)."""
    before = gc.get_threshold()
    gc.set_threshold(*THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)
