"""The one carrier of a number with its interval from ``analyse`` to ``present`` (issue 20: before it, an
interval travelled as a list with None, as lo/hi columns with NaN and as lo/hi with ±inf).

Inside the kit an interval is an ``Estimate``, and in a DataFrame the two columns ``<stat>_lo``/``<stat>_hi``
beside its value; the public JSON's ``[lo, hi]`` list is made at one edge (``summary.public_table``), and
words only in ``present.tables.fmt_ci``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from kts_helpers.analyse.stats import Interval


@dataclass(frozen=True)
class Estimate:
    """A number and its interval as it travels from ``analyse`` to ``present``: the one carrier.

    Why not ``Interval``: that one records how an interval was made (method, block length, resamples, ess),
    which a table cell, a chart tooltip or a sentence never needs and a row of a table cannot rebuild. Here
    ``lo`` is -inf and ``hi`` inf where the data hold no such bound, both NaN where no interval was computed.
    In a DataFrame an estimate is ``<stat>_lo``/``<stat>_hi`` beside its value (``columns``/``from_row``);
    ``pair`` is the public JSON form (``[lo, hi]``, None for a missing bound, None for none at all).
    """

    value: float
    lo: float = math.nan
    hi: float = math.nan

    @classmethod
    def of(cls, iv: Interval) -> Estimate:
        """The estimate and bounds of a computed interval (how it was made stays with the ``Interval``)."""
        return cls(iv.estimate, iv.lo, iv.hi)

    @classmethod
    def from_row(cls, row: object, stat: str, value: str | None = None) -> Estimate:
        """``row[value]`` (default: ``row[stat]``) with ``row[<stat>_lo]``/``row[<stat>_hi]``; a missing or None
        bound column reads as NaN (no interval)."""
        get = row.get if hasattr(row, "get") else lambda k, d=None: getattr(row, k, d)

        def num(key: str) -> float:
            v = get(key, None)
            return math.nan if v is None else float(v)

        return cls(get(value or stat), num(f"{stat}_lo"), num(f"{stat}_hi"))

    def columns(self, stat: str) -> dict[str, float]:
        """The DataFrame convention: ``{<stat>_lo: lo, <stat>_hi: hi}``."""
        return {f"{stat}_lo": self.lo, f"{stat}_hi": self.hi}

    def pair(self) -> list[float | None] | None:
        """[lo, hi], None for a missing bound; None without an interval (NaN, or no bound on either side)."""
        lo, hi = self.lo, self.hi
        if np.isnan(lo) or np.isnan(hi) or not (np.isfinite(lo) or np.isfinite(hi)):
            return None
        return [float(lo) if np.isfinite(lo) else None, float(hi) if np.isfinite(hi) else None]
