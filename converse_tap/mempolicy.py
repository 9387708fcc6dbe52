"""Memory a long run gives back (ingest): large blocks returned to the system as soon as they are freed.

A flow with a 15 MiB body passes through several buffers of its size (the body, its decoded text, the Arrow
column, the roll-over's Parquet pages). Freed, they stayed in the process: glibc raises its mmap threshold to the
largest block freed (up to 32 MiB) and keeps later blocks of that size in its heap, and pyarrow's default
allocator (mimalloc) keeps freed pages for reuse. Three such flows took an ingest process to 295 MB, past the
256 MiB bound of docs/operations.md, while what it held at any time was a fraction of that. Here glibc's
threshold is fixed at 128 KiB (blocks that large are mapped on their own and unmapped when freed) and Arrow
allocates from jemalloc, which returns freed pages within a second (218 MB; docs/performance.md, section 4).

Arrow reads its allocator's name from the environment when it first allocates, and only then applies it to
every allocation (Parquet and IPC included; `pyarrow.set_memory_pool` reaches fewer of them): our own processes
(the CLI, and the ingest processes it starts, which inherit its environment) set it before pyarrow loads
(`for_our_process`); a run in someone else's process switches what it can for its duration
(`returning_memory`).

Imports nothing from the project, and pyarrow only when a run starts, so every layer can use it.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import sys
from collections.abc import Iterator

M_MMAP_THRESHOLD = -3  # glibc's mallopt parameter
MMAP_THRESHOLD = 128 * 1024  # glibc's default; setting it turns the dynamic raising off
ENVIRONMENT = {"ARROW_DEFAULT_MEMORY_POOL": "jemalloc"}  # for processes of our own, before pyarrow loads


def for_our_process() -> None:
    """At the start of a process of our own (the CLI), before pyarrow is imported: Arrow's allocator, unless
    the user chose one. (glibc's threshold is fixed only when an ingest runs: `converse-tap record` runs the
    proxy in this process, where mapping every large body afresh would cost it CPU.)"""
    for name, value in ENVIRONMENT.items():
        os.environ.setdefault(name, value)


def fixed_mmap_threshold() -> bool:
    """glibc only (Linux); elsewhere, or without mallopt, nothing changes. Process-wide and not undone: blocks of
    128 KiB or more are then always mapped on their own, which is glibc's starting behaviour anyway."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
    except (OSError, AttributeError):  # not glibc (musl has no mallopt)
        return False


@contextlib.contextmanager
def returning_memory() -> Iterator[None]:
    """For a run that must stay within a memory bound: the fixed threshold, and Arrow's default allocator set to
    jemalloc for the run (the caller's restored afterwards; ingest also runs in a user's process, e.g. a
    notebook's)."""
    import pyarrow as pa

    fixed_mmap_threshold()
    before = pa.default_memory_pool()
    with contextlib.suppress(NotImplementedError):  # a pyarrow built without jemalloc: its default, as before
        pa.set_memory_pool(pa.jemalloc_memory_pool())
    try:
        yield
    finally:
        pa.set_memory_pool(before)
