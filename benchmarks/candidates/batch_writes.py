"""bench_proxy --candidate: the channel's pipe writes coalesced, one per 10 ms instead of one per loop turn.

Patches `Channel._schedule` of the addon loaded before this script (same module object), so the change is
measured in the same interleaved rounds as the addon as it is. Measured 2026-12-03: no difference beyond noise.
"""

import asyncio
from typing import Any

from converse_tap.addon import channel

BATCH = 0.01


def _schedule(self: Any) -> None:
    if self._scheduled or self._watching:
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        self._drain_blocking(60.0)
        return
    self._loop = loop
    self._scheduled = True
    loop.call_later(BATCH, self._flush)


channel.Channel._schedule = _schedule  # type: ignore[method-assign]
addons: list[Any] = []
