"""Keeping pandas out of a process that only ingests: pyarrow imports it (1.5 s, ~40 MiB) the first time it
converts Python rows, only to ask whether a value is a pandas object, which ingest rows never are."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any


class _NoPandas:
    """An import finder that refuses pandas."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> None:
        if name == "pandas":
            raise ModuleNotFoundError("pandas is kept out of ingest processes", name=name)


@contextlib.contextmanager
def without_pandas() -> Iterator[None]:
    """While ingesting in a process that has not loaded pandas, keep it from being loaded."""
    if "pandas" in sys.modules:
        yield
        return
    finder = _NoPandas()
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)


def keep_pandas_out() -> None:
    """For the whole life of a process that only ingests (a worker)."""
    if "pandas" not in sys.modules:
        sys.meta_path.insert(0, _NoPandas())
