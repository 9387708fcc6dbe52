"""bench_proxy --candidate: the recording worker at nice 10, so that waking it never preempts the proxy.

Renices workers started from now on (`Channel.start`) and, once mitmdump runs, the one the addon started before
this script was loaded. Measured 2026-12-03: no difference beyond noise.
"""

import os
from pathlib import Path
from typing import Any

from converse_tap.addon import channel

NICE = 10
_start = channel.Channel.start


def _nice_start(self: Any) -> None:
    _start(self)
    os.setpriority(os.PRIO_PROCESS, self.pid, NICE)


class Renice:
    def running(self) -> None:
        pid = os.getpid()
        for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split():
            os.setpriority(os.PRIO_PROCESS, int(child), NICE)


channel.Channel.start = _nice_start  # type: ignore[method-assign]
addons = [Renice()]
