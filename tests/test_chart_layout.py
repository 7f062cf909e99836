"""Log axes get ticks a reader can tell apart: Vega's own log ticks printed "0.10.20.3" at the report's width."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from kts_helpers.present import charts

PANEL_PX = charts.WIDTH // 2 - 30  # a tail-plot panel, the narrowest log axis in the report
MIN_GAP_PX = 30  # room for a label such as "0.02" at the report's font size


@pytest.mark.parametrize("lo, hi", [(0.3, 2.7), (0.05, 4.0), (1e-3, 1.0), (2e-4, 1.0), (0.4, 90.0), (7.0, 7.5)])
def test_log_ticks_cover_the_data_and_stay_apart(lo: float, hi: float) -> None:
    ticks = charts.log_ticks(np.geomspace(lo, hi, 50))
    assert ticks == sorted(ticks) and ticks[0] <= lo and ticks[-1] >= hi
    decades = math.ceil(math.log10(hi)) - math.floor(math.log10(lo))  # the widest domain: Vega's "nice" decades
    gaps = [PANEL_PX * math.log10(b / a) / decades for a, b in zip(ticks, ticks[1:], strict=False)]
    assert min(gaps) >= MIN_GAP_PX, (ticks, gaps)
    assert len(ticks) >= 2  # at least one label at each end of the data


def test_log_ticks_ignore_values_a_log_axis_cannot_show() -> None:
    assert charts.log_ticks([0.0, -1.0, float("nan"), 0.5, 3.0]) == charts.log_ticks([0.5, 3.0])
    assert charts.log_ticks([]) == [1.0]


def test_tail_plot_uses_the_explicit_ticks() -> None:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"tenant": ["fft"] * 400, "kind": ["baseline"] * 200 + ["shared"] * 200,
                          "wall_ms": np.r_[rng.lognormal(-1, 0.2, 200), rng.lognormal(-0.5, 0.8, 200)]})
    spec = charts.ccdf(frame).to_dict()["spec"]["encoding"]
    data = charts.ccdf_frame(frame)
    assert spec["x"]["axis"]["values"] == charts.log_ticks(data["latency_ms"])
    assert spec["y"]["axis"]["values"] == charts.log_ticks(data["exceedance"])
