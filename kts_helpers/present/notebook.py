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

    df = df.rename(columns=lambda c: str(c).replace("_", " "))  # headers can wrap
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


def compact(df: pd.DataFrame, max_columns: int = 9) -> pd.DataFrame:
    """Fit a wide table to a page: ``x, x_lo, x_hi`` become one "x [lo, hi]" column; constant columns go."""
    out = df.copy()
    for lo_col in [c for c in df.columns if c.endswith("_lo") and f"{c[:-3]}_hi" in df]:
        base = lo_col[:-3]
        col = base if base in df else f"{base}_ms" if f"{base}_ms" in df else None
        if col is None:
            continue
        out[col] = [("—" if v != v else f"{v:.3f} [{lo:.3f}, {hi:.3f}]" if lo == lo else f"{v:.3f}")
                    for v, lo, hi in zip(df[col], df[lo_col], df[f"{base}_hi"], strict=True)]
        out = out.drop(columns=[lo_col, f"{base}_hi"])
    if len(out.columns) > max_columns and len(out) > 1:
        constant = [c for c in out.columns if out[c].astype(str).nunique() <= 1]
        out = out.drop(columns=constant)
    return out


def show(item: Any) -> None:
    """A table as a (page-wide) table, anything else (a chart) through IPython's display."""
    if isinstance(item, pd.DataFrame):
        table(compact(item))
    else:
        from IPython.display import display

        display(item)
