"""Small statistics: the Wilson score interval for a proportion."""

from __future__ import annotations

import math

Z95 = 1.959963984540054


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float | None, float | None, float | None]:
    """(share, low, high) of a 95% Wilson interval; all None when n is 0 (a rate with nothing to rest on)."""
    if n <= 0:
        return None, None, None
    p = successes / n
    z2 = z * z
    denom = 1 + z2 / n
    centre = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return p, max(0.0, centre - half), min(1.0, centre + half)
