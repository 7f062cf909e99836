"""The analysis notebook's code run in this process: a report's content without papermill, a kernel or nbconvert.

``run_analysis(run_dir)`` executes the code cells of ``notebooks/03-analysis.ipynb`` in order, with the
parameters papermill would inject (``run_dir``, ``static_charts=True``) set after the parameters cell, and
collects everything a cell displays, including a cell's last expression (IPython shows that value too). Each
chart is turned into its Vega-Lite specification, checked against the schema with its data inlined (what the
``svg`` renderer hands to vl-convert); drawing it is left to the full renders, one per kind of run.

Why: rendering a reference through papermill, nbconvert and Chromium takes ~30 s, most of it starting a kernel,
importing, drawing charts and the page; the analysis itself is the same functions either way. The calls are read
from the committed notebook, not copied here, so a cell added to the report is run here too, and a reference whose
data, or a table or chart function, breaks fails here just as its report would.
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import altair as alt
from IPython.display import HTML, Markdown

REPO = Path(__file__).resolve().parent.parent
NOTEBOOK = REPO / "notebooks" / "03-analysis.ipynb"

@dataclass
class Shown:
    """What one run of the analysis notebook showed, in order: Markdown (output and markdown cells), HTML tables,
    and each chart with its Vega-Lite specification."""

    markdown: list[str] = field(default_factory=list)
    html: list[str] = field(default_factory=list)
    charts: list[tuple[Any, dict[str, Any]]] = field(default_factory=list)
    namespace: dict[str, Any] = field(default_factory=dict)  # the notebook's variables after its last cell

    @property
    def text(self) -> str:
        """Everything a reader of the page reads (Markdown and tables), as one string to search."""
        return "\n".join(self.markdown + self.html)


def cells(notebook: Path = NOTEBOOK) -> list[dict[str, Any]]:
    return json.loads(notebook.read_text())["cells"]


def run_analysis(run_dir: str | Path, **parameters: Any) -> Shown:
    """Execute notebooks/03-analysis.ipynb's code against ``run_dir`` here, as papermill would (static charts)."""
    from kts_helpers.present import notebook as kn

    shown = Shown()

    def display(*objs: Any) -> None:
        for obj in objs:
            if isinstance(obj, Markdown):
                shown.markdown.append(obj.data)
            elif isinstance(obj, HTML):
                shown.html.append(obj.data)
            elif isinstance(obj, alt.TopLevelMixin):
                shown.charts.append((obj, obj.to_dict()))  # validated against the Vega-Lite schema
            else:
                raise AssertionError(f"the notebook displayed a {type(obj).__name__} the report cannot show: {obj!r}")

    injected = {"run_dir": str(run_dir), "static_charts": True, **parameters}
    namespace = shown.namespace
    namespace.update({"__name__": "__main__", "display": display})
    renderer, theme = alt.renderers.active, alt.theme.active
    try:
        with mock.patch.object(kn, "display", display):
            for cell in cells():
                source = "".join(cell["source"])
                if cell["cell_type"] == "markdown":
                    shown.markdown.append(source)
                    continue
                if cell["cell_type"] != "code":
                    continue
                tree = ast.parse(source)
                last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
                exec(compile(tree, f"03-analysis:{source[:40]!r}", "exec"), namespace)  # noqa: S102
                if last is not None:
                    value = eval(compile(ast.Expression(last.value), "03-analysis", "eval"), namespace)  # noqa: S307
                    if value is not None:
                        display(value)
                if "parameters" in cell.get("metadata", {}).get("tags", []):
                    namespace.update(injected)
    finally:
        alt.renderers.enable(renderer)
        alt.theme.enable(theme)
    return shown


def empty_charts(shown: Shown) -> list[str]:
    """Charts with a dataset that holds no row (a chart of nothing: its data lost on the way)."""
    return [type(chart).__name__ for chart, spec in shown.charts
            if not spec.get("datasets") or any(not rows for rows in spec["datasets"].values())]
