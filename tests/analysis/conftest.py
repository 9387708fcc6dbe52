"""The Spark session of a test module that asks for `spark`: one `local[2]` session per module, stopped after it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="module")
def spark() -> Iterator[Any]:
    from converse_tap.analysis.spark import spark_session

    session = spark_session("local[2]")
    yield session
    session.stop()
