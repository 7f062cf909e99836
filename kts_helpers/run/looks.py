"""Where a shared tenant's interim looks fall (``shared_max_factor`` > 1), in one place for spec and tests.

Looks grow geometrically (n, 1.5 n, 2.25 n, ...) so each adds about as much evidence as the last; the judge
that reads them is ``analyse.sequential``, the worker's side ``workers/kts_worker.py`` (``Looks``).
Standard library only (the runner works on a bare GPU host).
"""

from __future__ import annotations

import math

LOOK_GROWTH = 1.5


def look_counts(n: int, factor: float) -> tuple[tuple[int, ...], int]:
    """(interim looks, maximum) for a design of n iterations that may grow to ``factor`` times n."""
    top = math.ceil(n * factor)
    looks, k = [], float(n)
    while round(k) < top:
        looks.append(int(round(k)))
        k *= LOOK_GROWTH
    return tuple(looks), top
