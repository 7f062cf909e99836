"""Small display helpers so the notebooks stay thin: Markdown, tables, and short error messages."""

from __future__ import annotations

from typing import Any

import pandas as pd


def md(text: str) -> None:
    from IPython.display import Markdown, display

    display(Markdown(text))


def table(df: pd.DataFrame, *, floatfmt: str = "{:.3f}", caption: str | None = None) -> None:
    """Show a table (escaped HTML, no index) that reads well in the rendered report."""
    from IPython.display import HTML, display

    styled = df.style.hide(axis="index").format(precision=3, na_rep="—", escape="html")
    if caption:
        styled = styled.set_caption(caption)
    display(HTML(styled.to_html()))


def params_dict(**values: Any) -> dict[str, Any]:
    """Notebook parameters -> experiment parameters: ``None`` means "use the profile's value"."""
    extra = values.pop("extra_params", None) or {}
    out = {k: v for k, v in values.items() if v is not None}
    out.update(extra)
    return out
