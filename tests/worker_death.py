"""A redaction pattern that kills the ingest worker using it (kept apart from the tests: worker processes
unpickle it and must not import pandas)."""

from __future__ import annotations

import multiprocessing
import os
from typing import Any


class DiesOnUrl:
    """Kills the worker process that applies it to the URL of a flow to `die.test`: a real death of a real
    worker, as the kernel's OOM killer or a SIGBUS would cause."""

    groups = 0
    pattern = "die.test"

    def sub(self, repl: Any, s: str, count: int = 0) -> str:
        if "die.test" in s and multiprocessing.parent_process() is not None:
            os._exit(3)
        return s

    def search(self, s: str, *args: Any) -> None:
        return None
