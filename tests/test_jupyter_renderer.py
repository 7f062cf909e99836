"""JupyterLab's renderer (``charts._jupyter_renderer``): the same widget as Altair's own, without validating twice."""

from __future__ import annotations

from pathlib import Path

import altair as alt
import pytest

from kts_helpers.analyse.load import load_run
from kts_helpers.present import charts

RUN = Path(__file__).resolve().parent.parent / "data" / "reference" / "h200-2026-11-30-article"


@pytest.fixture(scope="module")
def built() -> dict[str, alt.TopLevelMixin]:
    charts.use_renderer("svg")  # as the notebook does first (it also lifts the 5,000-row limit)
    data = load_run(RUN)
    it = data.iterations
    return {"facet": charts.ccdf(it[it["in_overlap"]], "wall"), "vconcat": charts.explore(it, "fft"),
            "layer": charts.forest(charts_frame(data)), "plain": charts.telemetry_chart(data.telemetry.head(50),
                                                                                       ["sm_clock_mhz"]).spec}


def charts_frame(data):  # noqa: ANN001, ANN201 - the forest chart's input, as the notebook builds it
    from kts_helpers.analyse.summary import summarize_run
    from kts_helpers.present import notebook as kn

    return kn.forest_frame(summarize_run(data), kn.metrics(data))


@pytest.mark.parametrize("kind", ["facet", "vconcat", "layer", "plain"])
def test_the_widget_is_altairs_own_for_every_kind_of_chart(built: dict, kind: str) -> None:
    chart = built[kind]
    spec = chart.to_dict()
    stock = alt.JupyterChart(chart=alt.Chart.from_dict(spec))  # what Altair's jupyter renderer builds
    mine = charts.jupyter_widget(spec)
    assert type(mine.chart) is type(stock.chart) is type(chart) and mine.spec == stock.spec


def test_jupyterlab_mode_enables_it() -> None:
    try:
        assert charts.use_renderer("auto") == "jupyter" and alt.renderers.active == "kts-jupyter"
    finally:
        charts.use_renderer("svg")
