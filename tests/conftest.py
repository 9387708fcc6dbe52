from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from mitmproxy.test import taddons

from converse_tap.addon.tap import ConverseTap
from tests.golden.sample import build_sample

# property tests assert what happens, never how fast: no per-example deadline on a machine that may be loaded. By
# default every run tries the same examples (derandomized), so that `make test` passes or fails alike on every
# machine and every run; `HYPOTHESIS_PROFILE=explore` tries new ones each run, to look for what they miss
settings.register_profile("repeatable", deadline=None, derandomize=True)
settings.register_profile("explore", deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))


@pytest.fixture
def tap(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[ConverseTap, taddons.context, Path]]:
    """A ConverseTap under mitmproxy's real option machinery, writing to tmp_path/data."""
    monkeypatch.chdir(tmp_path)
    addon = ConverseTap()
    out = tmp_path / "data"
    with taddons.context(addon) as tctx:
        tctx.configure(addon, converse_tap_dir=str(out), converse_tap_flush_interval="0.05")
        yield addon, tctx, out
        addon.done()


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The golden sample dataset (tests/golden/sample.py), built once per test module."""
    out = tmp_path_factory.mktemp("sample")
    build_sample(out)
    return out


@pytest.fixture(scope="module")
def moto() -> Iterator[Any]:
    """moto's standalone S3 server on loopback (tests/integration/test_objstore.py `Moto`), one per test module."""
    from tests.integration.test_objstore import Moto

    server = Moto().start()
    try:
        yield server
    finally:
        server.stop()
