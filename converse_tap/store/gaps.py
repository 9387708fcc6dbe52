"""What a recorder lost before it became rows: the `capture_gaps` table's records."""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class CaptureGap:
    """Records a recorder lost before they became rows (a `capture_gaps` row): written like any row, so a report
    can say which period its figures undercount."""

    reason: str
    records: int
    bytes: int
    ts_from: float | None
    ts_to: float | None

    def row(self) -> dict[str, Any]:
        now = time.time()
        return {
            "exchange_id": f"gap-{os.getpid()}-{time.time_ns()}",
            "ts": now,
            "ts_from": self.ts_from,
            "ts_to": self.ts_to,
            "reason": self.reason,
            "records": self.records,
            "bytes": self.bytes,
        }
