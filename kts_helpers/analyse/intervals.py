"""Confidence intervals for every number of the summary table, and the table views that show them.

Each row's samples come from ``rules.series_groups`` (so the intervals describe exactly the numbers in
the table); quantiles, DF, jitter and throughput change get their intervals from ``rules`` (``quantile``,
``degradation``, ``jitter``, ``throughput_change``: the order-statistic interval at the effective sample
size, ratios by MOVER). Each interval is ``<stat>_lo``/``<stat>_hi`` in the table (``estimate.Estimate``: ±inf for
a bound the data do not hold, NaN for no interval); ``summary.public_table`` turns them into the JSON's lists.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from kts_helpers.analyse import prior, stats, verdict
from kts_helpers.analyse.estimate import Estimate
from kts_helpers.analyse.rules import (
    df_reading,
    jitter,
    quantile,
    sample_note,
    series_groups,
    throughput_change,
)
from kts_helpers.analyse.summary import VERDICT_COLUMNS, VERDICT_OBJECT, baseline_row, verdict_columns

CI_COLUMNS = ("p50_lo", "p50_hi", "p95_lo", "p95_hi", "p99_lo", "p99_hi", "jitter_lo", "jitter_hi", "df_lo", "df_hi",
              "throughput_change", "throughput_change_lo", "throughput_change_hi",
              "block_length", "ess", "lag1", "sample_note", "ci_note")


def _put(out: pd.DataFrame, i: object, stat: str, est: Estimate) -> None:
    for col, value in est.columns(stat).items():
        out.at[i, col] = value


def _write_verdict(out: pd.DataFrame, i: object, v: verdict.Verdict) -> None:
    for col, value in verdict_columns(v).items():
        out.at[i, col] = value
    out.at[i, VERDICT_OBJECT] = v  # the object itself, for what present/ words from its fields (never published)


def add_intervals(table: pd.DataFrame, frame: pd.DataFrame, metric: str, *, n_resamples: int = 2000,
                  seed: int | None = 0, method: str = "order", confidence: float = 0.95,
                  margin: float = verdict.DEFAULT_MARGIN, slo_ms: dict[str, float] | None = None,
                  verdicts: dict | None = None, on_host: bool = False, verdicts_only: bool = False) -> pd.DataFrame:
    """Add the intervals of p50/p95/p99/jitter/df/throughput_change (``<stat>_lo``/``<stat>_hi``, ±inf for a bound
    the data do not hold, NaN where none was computed), sample-size notes, and on shared rows the verdict (``VERDICT_COLUMNS``: the reading
    within ``margin``, the share of iterations slower than the alone p99 or the tenant's ``slo_ms``);
    ``ess`` and ``lag1`` are the p99's. Each verdict gets its blocks' start instants (a drift is removed in time,
    ``blocks.order``) and, where the workers probed the host, each block's probes (the host covariate,
    ``blocks.block_pair``); ``on_host``: the host is the contended device (a CPU run), never a covariate.
    ``verdicts_only``: the verdicts and nothing else (``blockseq``'s looks, read while the run waits)."""
    out = table.copy()
    samples = {(k["kind"], k["group"], k["sharing"], k["tenant"], k["phase"]): runs
               for k, runs in series_groups(frame, metric)}
    def per_block(column: str) -> dict:
        return ({(k["kind"], k["group"], k["sharing"], k["tenant"], k["phase"]): runs
                 for k, runs in series_groups(frame, metric, column=column)} if column in frame else {})

    flags = per_block("collided")
    starts = per_block("start_ns")
    probes = per_block("host_probe_ms")
    for col in CI_COLUMNS + VERDICT_COLUMNS + (VERDICT_OBJECT,):
        if col not in out:
            out[col] = np.nan if col.endswith(("_lo", "_hi")) else None
    slo = slo_ms or {}
    found: dict = {} if verdicts is None else verdicts  # the verdicts, read as one family below (or by the caller)
    opts = {"n_resamples": n_resamples, "seed": seed, "method": method, "confidence": confidence}
    for i, row in out.iterrows():
        if row["metric"] != metric:
            continue
        key = (row["kind"], row["group"], row["sharing"], row["tenant"], row["phase"])
        runs = [r for r in samples[key] if len(r)]
        hit = [c for r, c in zip(samples[key], flags[key], strict=True) if len(r)] if key in flags else None
        x = np.concatenate(runs) if runs else np.zeros(0)
        shared_ratio = row["kind"] == "shared" and metric != "wait"  # a wait is often 0: no ratio interval
        if len(x) < 2:  # nothing to resample: the row stays, saying why
            if shared_ratio:
                out.at[i, "reading"] = df_reading(len(x), None)
            continue
        for q, stat in () if verdicts_only else ((0.50, "p50"), (0.95, "p95"), (0.99, "p99")):
            iv = quantile(runs, q, **opts)
            _put(out, i, stat, Estimate.of(iv))
            if q == 0.99:
                out.at[i, "block_length"] = iv.block_length
                out.at[i, "ci_note"] = iv.note or None
                ess = float(iv.ess) if isinstance(iv.ess, float) else stats.effective_sample_size(x) \
                    if len(x) >= 3 else float(len(x))
                out.at[i, "ess"] = ess
                out.at[i, "lag1"] = iv.lag1
        jit = jitter(runs, **opts) if not verdicts_only else None
        if jit is not None:
            _put(out, i, "jitter", Estimate.of(jit))
        if not verdicts_only:
            out.at[i, "sample_note"] = sample_note(len(x), ess)
        if shared_ratio:
            base = baseline_row(out, row)
            alone = (samples[(base["kind"], base["group"], base["sharing"], base["tenant"], base["phase"])]
                     if base is not None else [])
            if alone:
                akey = (base["kind"], base["group"], base["sharing"], base["tenant"], base["phase"])
                v = verdict.decide(runs, [r for r in alone if len(r)], q=0.99, margin=margin,
                                   slo_ms=slo.get(row["tenant"]), collided=hit, kind=prior.kind_of(frame, row["tenant"]),
                                   times=_block_times(starts.get(key), starts.get(akey)),
                                   host=_block_probes(probes.get(key), probes.get(akey)), on_host=on_host, **opts)
                _put(out, i, "df", v.df.bounds)
                _write_verdict(out, i, v)
                found[i] = v
            else:
                out.at[i, "reading"] = "no alone series to compare with"
            change = throughput_change(runs, alone, **opts) if not verdicts_only else None
            if change is not None:
                out.at[i, "throughput_change"] = change.estimate
                _put(out, i, "throughput_change", Estimate.of(change))
    if verdicts is None and len(found) > 1:  # a table of its own: its verdicts are one family
        keys = list(found)
        for j, v in zip(keys, verdict.family([found[key] for key in keys], questions(out, keys)), strict=True):
            _write_verdict(out, j, v)
    return out


def questions(table: pd.DataFrame, rows: list) -> list[tuple[tuple, str]]:
    """Each verdict row's question (group, sharing, tenant, phase) and clock: ``verdict.family``'s graph."""
    return [((table.at[i, "group"], table.at[i, "sharing"], table.at[i, "tenant"], table.at[i, "phase"]),
             str(table.at[i, "metric"])) for i in rows]


def _block_times(shared: list[np.ndarray] | None, alone: list[np.ndarray] | None
                 ) -> tuple[list[float], list[float]] | None:
    """Each non-empty block's first start (ns), shared and alone, in the verdict's order of blocks."""
    if shared is None or alone is None:
        return None
    return [float(r.min()) for r in shared if len(r)], [float(r.min()) for r in alone if len(r)]


def _block_probes(shared: list[np.ndarray] | None, alone: list[np.ndarray] | None
                  ) -> tuple[list[np.ndarray], list[np.ndarray]] | None:
    """Each non-empty block's host probes (ms, NaN where none), or None where no block has a probe."""
    if shared is None or alone is None:
        return None
    sh, al = [r for r in shared if len(r)], [r for r in alone if len(r)]
    return (sh, al) if any(np.isfinite(r).any() for r in sh + al) else None


def add_all_intervals(table: pd.DataFrame, frame: pd.DataFrame, metrics: tuple[str, ...] = ("wall", "device"),
                      **options: object) -> pd.DataFrame:
    """Every clock's intervals and verdicts; the verdicts of the whole table are then read as one family
    (``verdict.family``: each question's wall clock a primary, its device clock a secondary after it), so the
    report's false alarms are controlled."""
    found: dict = {}
    for metric in metrics:
        table = add_intervals(table, frame, metric, verdicts=found, **options)  # type: ignore[arg-type]
    if len(found) > 1:
        keys = list(found)
        for i, v in zip(keys, verdict.family([found[k] for k in keys], questions(table, keys)), strict=True):
            _write_verdict(table, i, v)
    return table


def trim_effect(trimmed: pd.DataFrame, untrimmed: pd.DataFrame,
                metrics: tuple[str, ...] = ("wall", "device")) -> pd.DataFrame:
    """DF with and without the warm-up cut, per shared row; ``differs`` where the two are further apart than
    the trimmed DF interval's half-width (the Methods section then shows both).

    A missing bound makes that side's half-width the distance to the other bound; no bound at all: inf.
    """
    key = ["kind", "group", "sharing", "tenant", "phase", "metric"]
    other = untrimmed.set_index(key)
    rows = []
    for _, r in trimmed[(trimmed["kind"] == "shared") & trimmed["metric"].isin(metrics)].iterrows():
        k = tuple(r[c] for c in key)
        if k not in other.index or r["df"] != r["df"]:
            continue
        ci = Estimate.from_row(r, "df").pair() or [None, None]
        ends = [abs(b - r["df"]) for b in ci if b is not None]
        half = (ci[1] - ci[0]) / 2 if len(ends) == 2 else ends[0] if ends else np.inf
        untrim = float(other.loc[k, "df"]) if not isinstance(other.loc[k, "df"], pd.Series) else float(
            other.loc[k, "df"].iloc[0])
        rows.append({"tenant": r["tenant"], "group": r["group"], "metric": r["metric"], "df": r["df"],
                     "df_lo": r.get("df_lo"), "df_hi": r.get("df_hi"), "df_untrimmed": untrim, "half_width": half,
                     "differs": bool(abs(r["df"] - untrim) > half)})
    return pd.DataFrame(rows, columns=["tenant", "group", "metric", "df", "df_lo", "df_hi", "df_untrimmed", "half_width",
                                       "differs"])
