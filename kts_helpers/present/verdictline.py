"""A verdict in one line: its word, the number that decided it with its interval, and its block count.

Why: a verdict's full derivation (``Verdict.words``) runs 90-258 words -- every test, its weight, Holm, the drift
term -- and a table cell that holds it cannot be read. The one line says what decided the word, in the unit of the
test that decided it: the block-paired median ratio ("median ×1.29 [1.15, 1.45], 17 of 19 blocks"), DF ("DF 2.44
[1.90, 3.10]"), the launches that found a neighbour in flight ("collided 12 of 14") or the tail's share. Where the
word is sized by another number than the deciding test's (a collided test decides, DF sizes "degraded" against
"small slowdown": ``verdict.effect_size``), that number follows, so the word never stands beside a number that
contradicts it. The derivation stays one click away (``why``: a ``<details>`` in HTML, a second line in Markdown).

Everything here reads the ``analyse.verdict.Verdict`` (its fields, ``effect_size``, ``weights``); nothing decides.
``GLOSSARY`` lists the terms a verdict can print: the verdict page defines each (a test holds them together), and
``family_steps`` lays out the report's family correction step by step, so its example can be checked by hand.
"""

from __future__ import annotations

import html
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from kts_helpers.analyse import verdict as V
from kts_helpers.analyse.rules import series_label

# The terms a verdict's line or its derivation prints, each defined on the verdict page
# (docs/guide/reading-a-verdict.md, a test checks every one has its definition there).
GLOSSARY = (
    "median", "block-paired", "blocks", "against its neighbours", "trend removed", "t with", "df", "DF",
    "upper bound open", "no bound", "collided", "clear", "same blocks", "tail", "p99.75", "each block scaled to its median",
    "tail's shape", "p95", "weight", "family", "drift", "prior", "within", "effective", "level test", "block tail test",
    "tail test", "collided test", "collided median test", "DF test",
)


def _x(v: float, digits: int = 2) -> str:
    return "no bound" if not math.isfinite(v) else f"{v:.{digits}f}"


def _interval(lo: float, hi: float, digits: int = 2) -> str:
    return f"[{_x(lo, digits)}, {_x(hi, digits)}]"


def _median_test(v: V.Verdict):
    """The block-paired median test the verdict reads (the local pairing where it exists, as ``decide`` does)."""
    return None if v.blocks is None else (v.blocks.local or v.blocks.median)


def _blocks_count(test, slower: bool | None) -> str:
    """"17 of 19 blocks" above (or below) their neighbours, or "19 blocks" where the reading has no side."""
    ratios = [r for r in test.ratios if math.isfinite(r)]
    if slower is None:
        return f"{len(ratios)} blocks"
    side = sum(r > 1 for r in ratios) if slower else sum(r < 1 for r in ratios)
    return f"{side} of {len(ratios)} blocks {'above' if slower else 'below'} their neighbours"


def _median(v: V.Verdict, slower: bool | None) -> str:
    """"median ×1.29 [1.15, 1.45], 17 of 19 blocks above their neighbours" (blocks), or the medians' ratio against
    the drift's standard error where the design has no interleaved blocks."""
    test = _median_test(v)
    if test is not None:
        lo, hi = test.interval(v.confidence)
        return f"median ×{test.ratio:.2f} {_interval(lo, hi)}, {_blocks_count(test, slower)}"
    dr = v.drift
    if dr is None or not math.isfinite(v.level) or v.level <= 0:
        return f"median ×{_x(v.level)}"
    h = dr.quantile((1 - v.confidence) / 2) * dr.se
    where = (f"{dr.shared_blocks} shared, {dr.alone_blocks} alone blocks" if dr.measured else
             "one alone block, prior drift")
    return f"median ×{v.level:.2f} {_interval(v.level * math.exp(-h), v.level * math.exp(h))}, {where}"


def _df(v: V.Verdict) -> str:
    d = v.df
    if not math.isfinite(d.estimate):
        return "DF —"
    if math.isnan(d.lo) or math.isnan(d.hi):
        return f"DF {d.estimate:.2f}"
    return f"DF {d.estimate:.2f} {_interval(d.lo, d.hi)}"


def _collided(v: V.Verdict) -> str:
    if v.contrast is not None:
        return f"collided {v.contrast.beyond} of {v.contrast.n_collided} beyond the clear launches' p99"
    if v.collided is not None:
        s = v.collided.decisive
        return f"collided {s.shared_count} of {v.collided.shared.n} beyond the {s.label}"
    return "collided —"


def _collided_median(v: V.Verdict) -> str:
    """"collided median ×1.20 [1.10, 1.31]" (against the same blocks' clear launches, over blocks), or the shift in
    ms where it was read from one series."""
    c = v.contrast
    if c is None:
        return "collided median —"
    ratio = getattr(c, "median_ratio", None)
    if ratio is not None:
        return f"collided median ×{ratio[0]:.2f} {_interval(ratio[1], ratio[2])} against the clear launches"

    def ms(x: float) -> str:
        return "no bound" if not math.isfinite(x) else f"{x:+.2f}"
    return f"collided median {ms(c.median_ms)} ms [{ms(c.lo_ms)}, {ms(c.hi_ms)}] against the clear launches"


def _tail(v: V.Verdict, slower: bool) -> str:
    ex = v.tail or v.exceedance
    if ex is None:
        return "tail —"
    s = min(ex.steps, key=lambda t: t.p_more if slower else t.p_less)
    return f"tail {s.shared_count}/{ex.shared.n} vs {s.alone_count}/{ex.alone.n} alone beyond the {s.label}"


def _block_tail(v: V.Verdict, slower: bool) -> str:
    t = v.blocks.tail if v.blocks is not None else v.grouped_tail
    if t is None:
        return "tail shape —"
    lo, hi = t.interval(v.confidence)
    return f"tail shape ×{t.ratio:.2f} {_interval(lo, hi)}, {_blocks_count(t, slower)}"


def _by(v: V.Verdict, test: str, slower: bool) -> str:
    """The deciding test's own number, in its unit."""
    if test == "level":
        return _median(v, slower)
    if test == "DF":
        return _df(v)
    if test == "collided":
        return _collided(v)
    if test == "collided median":
        return _collided_median(v)
    if test == "block tail":
        return _block_tail(v, slower)
    return _tail(v, slower)


def _size(v: V.Verdict, test: str, slower: bool) -> str:
    """The number that sized the word (``effect_size``), where it is not the deciding test's own: ", DF 1.76"."""
    size = V.effect_size(v, slower=slower)
    if not math.isfinite(size) or (test == "level" and math.isclose(size, v.level)):
        return ""
    if test == "DF" and math.isclose(size, v.df.estimate):
        return ""
    name = "DF" if math.isclose(size, v.df.estimate) else "median"
    return f", sized by the median ×{size:.2f}" if name == "median" else f", sized by DF {size:.2f}"


def decided_by(v: V.Verdict) -> str:
    """The deciding number with its interval and its block count, in a few words (see the module's doc)."""
    slower, faster = V.slower_readings(v.margin), V.faster_readings(v.margin)
    if v.reading in slower or v.reading in faster:
        side = v.reading in slower
        test = v.slower_by if side else v.faster_by
        return _by(v, test, side) + _size(v, test, side)
    if v.reading == V.no_change(v.margin):
        test = _median_test(v)
        if test is not None:
            lo, hi = test.interval(v.confidence)
            t = v.blocks.tail if v.blocks is not None else None
            shape = f", tail shape ×{t.ratio:.2f}" if t is not None else ""
            return (f"median ×{test.ratio:.2f} {_interval(lo, hi)} inside ±{100 * v.margin:g} %, "
                    f"{_blocks_count(test, None)}{shape}")
        return f"p{100 * v.q:g} within ±{100 * v.margin:g} %: {_df(v)}"
    # inconclusive: what was measured, and what would decide
    if not v.p_tests:
        n = min(v.df.n_shared, v.df.n_alone)
        return f"n = {n}: too few samples to test"
    if v.rule == "the estimands disagree" and "never read as faster" in v.missing:
        return f"{_by(v, v.faster_by, False)} (faster) but {_df(v)} (the p{100 * v.q:g} rose)"
    if v.rule == "the estimands disagree":
        both = f"{_by(v, v.slower_by, True)} (slower) but {_by(v, v.faster_by, False)} (faster)"
        return both.replace(" their neighbours", "")
    # the strongest test either way, the number closest to deciding, in its own unit; where no test even leans
    # (both p at least 0.5), the headline estimand: the block-paired median, else DF
    side = v.p_slower <= v.p_faster
    test = (v.slower_by if side else v.faster_by) or "DF"
    if min(v.p_slower, v.p_faster) >= 0.5:
        test = "level" if _median_test(v) is not None else "DF"
    shown = _median(v, None) if test == "level" else _by(v, test, side)
    if v.blocks_needed:
        need = f", about {v.blocks_needed} blocks would decide"
    elif v.iterations_needed:
        need = f", about {v.iterations_needed:,} iterations would decide"
    elif v.drift is not None and v.drift.se > 0 and _median_test(v) is None:
        need = ", more blocks would decide"
    else:
        need = ""
    return shown + need


def one_line(v: V.Verdict) -> str:
    """The verdict readable in one line: "degraded: median ×1.29 [1.15, 1.45], 17 of 19 blocks above their
    neighbours"."""
    return f"{v.reading}: {decided_by(v)}"


def why(v: V.Verdict) -> str:
    """The derivation behind the line: every test with its p-value, the weights, Holm and the drift term."""
    return v.words


def why_details(table: pd.DataFrame, metric: str = "wall") -> str:
    """Under a report's headline table: each shared row's derivation (``why``), folded in a ``<details>`` element, so
    the table reads in one line per verdict and the why is one click away (HTML, escaped here)."""
    esc = html.escape
    items = [f"<li><b>{esc(series_label(r['tenant'], r['phase']))}</b> ({esc(r['group'])}, {esc(metric)} time): "
             f"{esc(why(r['verdict']))}</li>"
             for _, r in table[(table["metric"] == metric) & (table["kind"] == "shared")].iterrows()
             if r.get("verdict") is not None]
    if not items:
        return ""
    return ("<details><summary>Why: how each verdict above was decided (every test, its weight, the family, the "
            "drift)</summary><ul>" + "".join(items) + "</ul></details>")


# ----------------------------------------------------------------------------- the family, step by step


@dataclass(frozen=True)
class FamilyStep:
    """One step of the report's family correction on one side (slower or faster): the verdict set aside at it."""

    step: int  # 1 = the first verdict the procedure sets aside (the smallest p over its share)
    label: str
    clock: str
    primary: bool  # a question's wall clock (a primary); its device clock is a secondary
    test: str  # the verdict's strongest test that way
    p: float  # that test's own one-sided p-value
    weight: float  # its share of the verdict's level in its design (``verdict.weights``)
    p_verdict: float  # min over tests of p / weight: the verdict's own p-value that way (at most 1)
    share: float  # the verdict's share of the family's level at this step
    adjusted: float  # max over the steps so far of min(1, p_verdict / share): its family-adjusted p-value


def family_steps(verdicts: Sequence[tuple[str, tuple[object, str], V.Verdict]], *, slower: bool = True
                 ) -> list[FamilyStep]:
    """The report's family (``verdict.family``: each question's wall clock a primary, its device clock a secondary
    after it) laid out as the graphical procedure runs it (Bretz et al. 2009, Algorithm 1): at each step the verdict
    with the smallest p over its share of the level is set aside, its adjusted p the running maximum of those
    ratios, and its share passed along the graph's edges (``verdict._graph``). ``verdicts``: (label, (question,
    clock), verdict) of the family, read after the correction. The shares are replayed here to be shown; a test
    holds every adjusted p to the verdict's own (``p_slower_adjusted`` / ``p_faster_adjusted``)."""
    fam = [(label, q, v) for label, q, v in verdicts if v.p_tests]
    m = len(fam)
    if m == 0:
        return []
    p = [v.p_slower if slower else v.p_faster for _, _, v in fam]
    if m == 1:
        w, g = np.ones(1), np.zeros((1, 1))
    else:
        w, g = V._graph([q for _, q, _ in fam], m)
    rows: list[FamilyStep] = []
    for i, floor, share in V.graph_steps(p, w, g):
        label, (question, clock), v = fam[i]
        test = v.slower_by if slower else v.faster_by
        rows.append(FamilyStep(len(rows) + 1, label, clock, clock == V.PRIMARY_CLOCK or not any(
            q2 == question and c2 == V.PRIMARY_CLOCK for _, (q2, c2), _ in fam), test, v.p_of(test, slower),
            V.weights(v.short, v.design).get(test, 1.0), p[i], share, floor))
    return rows
