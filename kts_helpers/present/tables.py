"""How a number with its interval, and a verdict with its evidence, read in every table, chart and sentence.

Why one module: an interval travels from ``analyse`` as an ``estimate.Estimate`` (in a table: ``<stat>_lo`` and
``<stat>_hi``, ±inf for a bound the data do not hold); it is turned into words here and nowhere else, so the
headline, the README's reference tables, the charts' tooltips and the prose cannot print the same interval two
ways.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from kts_helpers.analyse.estimate import Estimate
from kts_helpers.analyse.rules import series_label
from kts_helpers.analyse.summary import baseline_row
from kts_helpers.present import verdictline


def fmt_ci(est: Estimate, digits: int = 3, *, n: int | None = None, scale: float = 1.0, unit: str = "",
           ess: float | None = None) -> str:
    """"v [lo, hi]", or "v [≥ lo; no upper bound at 310 effective of n = 800]" where the data hold no upper bound
    (and the mirror for a lower one), "v" without an interval, "—" without a value: how every table shows a number.
    ``ess``: the effective sample size the interval was taken at (n / τ), the count that decides whether a bound
    exists (``rules.SAMPLE_SIZE_RULE``)."""
    v = est.value
    if v is None or v != v:
        return "—"

    def f(x: float) -> str:
        return f"{scale * x:{'+' if unit else ''}.{digits}f}{unit}"

    ci = est.pair()
    if not ci:
        return f(v)
    lo, hi = ci
    eff = ess is not None and ess == ess and n is not None and ess < n - 0.5
    at = f" at {ess:.0f} effective of n = {n}" if n and eff else f" at n = {n}" if n else ""
    if lo is not None and hi is not None:
        return f"{f(v)} [{f(lo)}, {f(hi)}]"
    if lo is not None:
        return f"{f(v)} [≥ {f(lo)}; no upper bound{at}]"
    return f"{f(v)} [≤ {f(hi)}; no lower bound{at}]"


def _present(value: object) -> bool:
    return value is not None and not (isinstance(value, float) and np.isnan(value))


def fmt_slow(r: pd.Series | dict) -> str:
    """The tail-exceedance estimand of a shared row: "2.0 % vs 0.25 % alone slower than the alone p99
    (0.70 ms): 8.0× [2.1, 30]" — how often a request was slow, shared against alone, and the ratio."""
    get = r.get
    if not _present(get("slow_shared")):
        return "—"

    def pct(stat: str) -> str:
        return fmt_ci(Estimate.from_row(r, stat), 1, scale=100) + " %"

    ratio = get("slow_ratio")
    ratio_text = fmt_ci(Estimate.from_row(r, "slow_ratio"), 2) + "×" if _present(ratio) and np.isfinite(ratio) else \
        "no alone iteration beyond it"
    return (f"{pct('slow_shared')} shared vs {pct('slow_alone')} "
            f"alone beyond {get('slow_threshold_source')} ({get('slow_threshold_ms'):.3g} ms): {ratio_text}")


def fmt_contrast(r: pd.Series | dict) -> str:
    """The same-moment control of a shared row: "12 of 14 collided beyond the clear launches' p99 (p = 4e-15);
    median +0.71 ms [0.30, 1.2]" -- collided launches against the same blocks' launches that found the GPU free."""
    get = r.get
    if not _present(get("contrast_n")):
        return "—"
    iv = fmt_ci(Estimate.from_row(r, "contrast_ms"), 2)
    return (f"{int(get('contrast_slow'))} of {int(get('contrast_n'))} collided beyond the p99 of the "
            f"{int(get('contrast_clear_n'))} clear launches (p = {get('contrast_p'):.2g}); median {iv} ms")


def headline(table: pd.DataFrame, metric: str = "wall") -> pd.DataFrame:
    """The report's headline table: one row per tenant and scenario group, numbers with their intervals and,
    on shared rows, the verdict's word and the number that decided it (``verdictline``); its derivation follows
    the table, folded (``verdictline.why_details``)."""
    t = table[table["metric"] == metric]
    rows = []
    for _, r in t.iterrows():
        base = baseline_row(table, r) if r["kind"] == "shared" else None
        change = (r["throughput_per_s"] / base["throughput_per_s"] - 1 if base is not None else float("nan"))
        shared = r["kind"] == "shared"
        n = int(r["n"])
        v = r.get("verdict")
        rows.append({
            "tenant": series_label(r["tenant"], r["phase"]),
            "scenario group": r["group"], "sharing": r["sharing"], "n": r["n"],
            "p50 ms [95% CI]": fmt_ci(Estimate.from_row(r, "p50", "p50_ms"), n=n),
            "p95 ms [95% CI]": fmt_ci(Estimate.from_row(r, "p95", "p95_ms"), n=n),
            "p99 ms [95% CI]": fmt_ci(Estimate.from_row(r, "p99", "p99_ms"), n=n, ess=r.get("ess")),
            "jitter p99/p50": fmt_ci(Estimate.from_row(r, "jitter"), n=n),
            "throughput change [95% CI]": fmt_ci(replace(Estimate.from_row(r, "throughput_change"), value=change), 1,
                                                 scale=100, unit=" %"),
            "DF [95% CI]": fmt_ci(Estimate.from_row(r, "df")) if shared else "—",
            "slow iterations [95% CI]": fmt_slow(r) if shared else "—",
            "verdict": (r.get("reading") or "—") if shared else "—",
            "decided by": verdictline.decided_by(v) if shared and v is not None else "—",
            "same moment: collided vs clear launches": fmt_contrast(r) if shared else "—",
        })
    return pd.DataFrame(rows)


def forest_frame(table: pd.DataFrame, metrics: tuple[str, ...] = ("wall", "device")) -> pd.DataFrame:
    """DF and its interval per shared tenant and metric, for the forest plot; a DF whose data hold no bound on a
    side (or none at all, at n = 300) is drawn with that side open, not left out."""
    rows = []
    for _, r in table[(table["kind"] == "shared") & table["metric"].isin(metrics)].iterrows():
        ci = Estimate.from_row(r, "df").pair() or (None, None)
        if r["df"] == r["df"]:
            label = series_label(r["tenant"], r["phase"])
            scen = "" if r["group"] == "shared" else f" · {r['group']}"
            rows.append({"tenant": label + scen, "metric": r["metric"], "df": r["df"],
                         "df_lo": -np.inf if ci[0] is None else ci[0], "df_hi": np.inf if ci[1] is None else ci[1],
                         "reading": r.get("reading")})
    return pd.DataFrame(rows)
