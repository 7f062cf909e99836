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
``holm_rows`` lays out the report's family correction step by step, so its example can be checked by hand.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from kts_helpers.analyse import verdict as V

# The terms a verdict's line or its derivation prints, each defined on the verdict page
# (docs/guide/reading-a-verdict.md, a test checks every one has its definition there).
GLOSSARY = (
    "median", "block-paired", "blocks", "against its neighbours", "trend removed", "t with", "df", "DF",
    "upper bound open", "no bound", "collided", "clear", "same blocks", "tail", "p99.75", "each block scaled to its median",
    "tail's shape", "p95", "weight", "Holm", "drift", "prior", "within", "effective", "level test", "block tail test",
    "tail test", "collided test", "DF test",
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


def _tail(v: V.Verdict, slower: bool) -> str:
    ex = v.tail or v.exceedance
    if ex is None:
        return "tail —"
    s = min(ex.steps, key=lambda t: t.p_more if slower else t.p_less)
    return f"tail {s.shared_count} of {ex.shared.n} vs {s.alone_count} of {ex.alone.n} alone beyond the {s.label}"


def _block_tail(v: V.Verdict, slower: bool) -> str:
    t = v.blocks.tail if v.blocks is not None else None
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
    if v.exceedance is None:
        n = min(v.df.n_shared, v.df.n_alone)
        return f"n = {n}: too few samples to test"
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


# ----------------------------------------------------------------------------- Holm, step by step


@dataclass(frozen=True)
class HolmRow:
    """One verdict's step in the report's family correction (one side: slower or faster)."""

    label: str
    test: str  # the verdict's strongest test that way
    p: float  # that test's own one-sided p-value
    weight: float  # its share of the verdict's level in its design (``verdict.weights``)
    p_verdict: float  # min over tests of p / weight: the verdict's own p-value that way (at most 1)
    rank: int  # 1 = the smallest p_verdict of the family
    times: int  # Holm's multiplier: m - rank + 1
    holm: float  # max over ranks so far of min(1, times x p_verdict): the adjusted p-value


def holm_rows(verdicts: Sequence[tuple[str, V.Verdict]], *, slower: bool = True) -> list[HolmRow]:
    """Holm's step-down over a report's family (``verdict.family``), laid out so it can be redone by hand: each
    verdict's strongest test, its own p and weight, the verdict's p, its rank, the multiplier and the adjusted p.
    The verdicts passed are the family's, read after the correction; their unadjusted p-values are ``p_slower`` /
    ``p_faster``."""
    fam = [(label, v) for label, v in verdicts if v.exceedance is not None]
    m = len(fam)
    order = sorted(range(m), key=lambda i: (fam[i][1].p_slower if slower else fam[i][1].p_faster))
    rows, run = [], 0.0
    for rank, i in enumerate(order, 1):
        label, v = fam[i]
        test = v.slower_by if slower else v.faster_by
        p_v = v.p_slower if slower else v.p_faster
        run = max(run, min(1.0, (m - rank + 1) * p_v))
        rows.append(HolmRow(label, test, v.p_of(test, slower), V.weights(v.short, v.design).get(test, 1.0), p_v, rank,
                            m - rank + 1, run))
    return rows
