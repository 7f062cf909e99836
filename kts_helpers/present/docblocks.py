"""Every block of the docs generated from the committed runs, by name: what `python -m bench.regen_reference_tables`
writes and what the tests compare each page with.

Why one home: when the verdict changes, every number and word the docs quote from a verdict must follow in one
command. The blocks sit between ``<!-- KIND[:ARG]:start -->`` and ``<!-- KIND[:ARG]:end -->`` markers:

* ``reference-table:RUN`` -- a run's table, one line per verdict, and each verdict's derivation folded
  (``reference.reference_markdown``);
* ``headline`` -- the README's GPU table: ``reference.HEADLINE_RUN``, the article profile in the design `make
  report` runs, named with its design;
* ``verdict-example:WORD`` -- the verdict page's example of one word (its slug, ``slug``): the first row that reads
  it in ``EXAMPLE_RUNS`` (the current design first), its one line and its derivation;
* ``verdict-forms`` -- the forms a verdict's line takes (``FORMS``), each with a committed run's own line;
* ``reference-summary`` -- a results page's one-screen summary: each run with a table there, its design, its verdicts;
* ``holm-example`` -- the report's family correction on the headline run, step by step (``verdictline.family_steps``);
* ``auto-runs`` -- the real-model GPU runs at the kit's defaults (``AUTO_RUNS``, under ``data/validation``): their
  looks, how many verdicts decided, alone against alone and the host covariate's balance (``auto_runs_markdown``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable

from kts_helpers.analyse import design
from kts_helpers.analyse import verdict as V
from kts_helpers.analyse.rules import series_label
from kts_helpers.plan.engine import VALIDATION_ROOT
from kts_helpers.present import verdictline
from kts_helpers.present.reference import (
    HEADLINE_PENDING,
    HEADLINE_RUN,
    REFERENCE_ROOT,
    analysed,
    design_name,
    reference_markdown,
)

# Where the verdict page looks for an example of each word: the headline run first, then the other runs in the
# warm design, then the bracketed design, then the one-block runs (``reference.design_name``).
EXAMPLE_RUNS = (HEADLINE_RUN, "h200-2026-12-04-article-warm", "h200-2026-12-06-rm-warm-ts-24", "h200-2026-12-02-article-blocks",
                "h200-2026-12-02-saturating-blocks", "h200-2026-12-03-saturating-mps-blocks",
                "h200-2026-12-03-four-tenants-blocks", "h200-2026-11-30-article", "h200-2026-12-02-article",
                "h200-2026-11-30-saturating", "h200-2026-11-30-four-tenants")
# Real models on the GPU at the kit's defaults (`blocks=auto`), fresh runs the verdict was never tuned on (issue 52):
# committed under data/validation (outside the references every test renders), read by ``auto_runs_markdown``
AUTO_RUNS = ("h100-2026-12-06-rm-auto", "h100-2026-12-06-mps-gpt2-vit-auto",
             "h100-2026-12-06-mps-whisper-convnext-auto")
BLOCK = re.compile(r"(<!-- ([\w-]+)(?::(\S+))?:start -->\n)(.*?)(\n<!-- \2(?::\3)?:end -->)", re.S)


def slug(word: str) -> str:
    """"small slowdown (< 10 %)" -> "small-slowdown": a verdict word as a block's name."""
    return re.sub(r"[^a-z]+", "-", word.split(" (")[0].split(" within")[0].lower()).strip("-")


def headline_markdown() -> str:
    """The README's GPU table: the headline run, named with its design, and its generated table."""
    run = REFERENCE_ROOT / HEADLINE_RUN
    pending = f" **Not yet current:** {HEADLINE_PENDING}" if HEADLINE_PENDING else ""
    return (f"From `data/reference/{HEADLINE_RUN}`, the article profile in the {design_name(run)} that `make report` "
            f"runs on a GPU.{pending}\n\n{reference_markdown(run)}")


def _shared_rows(run: str) -> list[tuple[str, str, tuple[object, str], V.Verdict]]:
    """(label, clock, (question, clock), verdict) of every shared row of a committed run with a verdict, wall before
    device; the question as the report's family keys it (``intervals.questions``)."""
    _, table = analysed(REFERENCE_ROOT / run)
    if table is None:
        return []
    out = []
    for metric in ("wall", "device"):
        rows = table[(table["kind"] == "shared") & (table["metric"] == metric)]
        for _, r in rows.iterrows():
            if r.get("verdict") is not None:
                where = "" if r["group"] in ("shared", f"shared-{r['sharing']}") else f" · {r['group']}"
                label = f"{series_label(r['tenant'], r['phase'])}{where} ({r['sharing']})"
                question = (r["group"], r["sharing"], r["tenant"], r["phase"])
                out.append((label, metric, (question, metric), r["verdict"]))
    return out


def _shared_verdicts(run: str) -> list[tuple[str, str, V.Verdict]]:
    """(label, clock, verdict) of every shared row of a committed run with a verdict, wall before device."""
    return [(label, metric, v) for label, metric, _, v in _shared_rows(run)]


def verdict_example(word_slug: str) -> str:
    """One committed row that reads the word: its one line, then its derivation, folded."""
    words = {slug(w): w for w in V.readings()}
    if word_slug not in words:
        raise ValueError(f"{word_slug!r} is no verdict word's slug ({', '.join(words)})")
    word = words[word_slug]
    found = [(run, label, metric, v) for run in EXAMPLE_RUNS for label, metric, v in _shared_verdicts(run)
             if v.reading == word]
    if not found:
        return f"*Example*: none of the committed runs the page draws on reads *{word}* now."
    # an inconclusive verdict whose tests ran (not one with too few samples to test) is what a reader meets most
    run, label, metric, v = min(found, key=lambda f: (not f[3].p_tests, f[3].rule != "nothing decides"))
    return (f"*Example*, from `{run}` ({design_name(REFERENCE_ROOT / run)}): **{label}** by {metric} time reads "
            f"**{word}**, decided by {verdictline.decided_by(v)}.\n\n"
            f"<details markdown=\"1\"><summary>Why</summary>\n\n{verdictline.why(v)}\n\n</details>")


# The forms a verdict's line takes, each with the test that decided it and what its number is, in the page's order.
FORMS = (
    ("level, blocks", "the [level test](#the-level-test-the-medians), warm design",
     "each shared block's median against its two neighbouring alone blocks: the ratio with its 95 % interval, and "
     "how many shared blocks were above (or, faster, below) their neighbours"),
    ("level", "the level test, without interleaved blocks",
     "the shared blocks' mean log median against the alone blocks', its 95 % interval from the drift between blocks "
     "(or the [prior](#the-prior) where one alone block measures none)"),
    ("DF", "the [DF test](#df-the-degradation-factor)", "shared p99 / alone p99 and its interval, widened by the drift"),
    ("collided median", "the [collided median test](#the-same-moment-contrast)",
     "the collided launches' median against the same blocks' clear launches', with its 95 % interval"),
    ("collided", "the [collided test](#the-same-moment-contrast)",
     "launches that found a neighbour's operation in flight, and how many were slower than the p99 of the same "
     "blocks' launches that found the GPU free"),
    ("tail", "the [tail test](#the-tail-test-slow-iterations)",
     "shared iterations beyond the alone tail (each block scaled to its median) against the alone series' own count"),
    ("block tail", "the [block tail test](#the-block-tail-test-the-tails-shape)",
     "each block's p95 / p50, shared against its neighbouring alone blocks"),
    ("no change, blocks", "[no change](#no-change-by-design), warm design",
     "the block-paired median's 95 % interval inside the margin, and the tail's shape"),
    ("inconclusive, blocks", "nothing decided, warm design",
     "the block-paired median as measured, and about how many shared blocks would decide"),
    ("inconclusive", "nothing decided", "the strongest estimate, and what would decide"),
    ("disagree", "tests decided both ways", "the slower test's number against the faster test's"),
)


def _form(v: V.Verdict) -> str | None:
    """Which of ``FORMS`` a verdict's line takes."""
    m = v.margin
    if v.reading in V.slower_readings(m) or v.reading in V.faster_readings(m):
        test = v.slower_by if v.reading in V.slower_readings(m) else v.faster_by
        return "level, blocks" if test == "level" and v.blocks is not None else test
    if v.reading == V.no_change(m):
        return "no change, blocks" if v.blocks is not None else None
    if v.rule == "the estimands disagree":
        return "disagree"
    if not v.p_tests:
        return None
    return "inconclusive, blocks" if v.blocks is not None else "inconclusive"


def verdict_forms() -> str:
    """The verdict page's table of one-line forms, each with a committed run's own line (``EXAMPLE_RUNS``)."""
    seen: dict[str, tuple[str, str, str, V.Verdict]] = {}
    for run in EXAMPLE_RUNS:
        for label, metric, v in _shared_verdicts(run):
            seen.setdefault(_form(v) or "", (run, label, metric, v))
    lines = ["| the line reads | from | the test that decided | what the number is |", "|---|---|---|---|"]
    for key, test, meaning in FORMS:
        if key in seen:
            run, label, metric, v = seen[key]
            lines.append(f"| {v.reading}: {verdictline.decided_by(v)} | `{run}`, {label}, {metric} | {test} | "
                         f"{meaning} |")
    return "\n".join(lines)


def _g(v: float, digits: int = 3) -> str:
    return f"{v:.{digits}g}" if math.isfinite(v) else "—"


def holm_markdown(run: str = HEADLINE_RUN) -> str:
    """The headline run's family correction, each side in a table a reader can redo by hand (``family_steps``), then
    the decided verdicts' adjusted p-values as their derivations print them."""
    rows = [(f"{label}, {metric}", q, v) for label, metric, q, v in _shared_rows(run)]
    fam = [v for _, _, v in rows if v.p_tests]
    out = [f"From `{run}`: {len(fam)} verdicts in the family (its tenants × clocks), each side corrected apart. Each "
           "tenant's wall clock is a primary, its device clock a secondary: the primaries start with equal shares of "
           "the level, a wall clock set aside passes its share to its own device clock, a device clock set aside "
           "passes its share on to the other tenants' wall clocks."]
    for slower in (True, False):
        steps = verdictline.family_steps(rows, slower=slower)
        out += ["", f"**{'Slower' if slower else 'Faster'}** (each verdict's strongest test for a "
                    f"{'slowdown' if slower else 'speed-up'}):", "",
                "| step | verdict | clock | strongest test | its p | its weight | p ÷ weight | share of the level "
                "| family p |", "|---|---|---|---|---|---|---|---|---|"]
        out += [f"| {r.step} | {r.label} | {'primary' if r.primary else 'secondary'} | {r.test} | {_g(r.p)} | "
                f"{r.weight:g} | {_g(r.p_verdict)} | {r.share:.3g} | {_g(r.adjusted, 2)} |" for r in steps]
    decided = [(label, v) for label, _, v in rows if v.decided and v.reading != V.no_change(v.margin)]
    if decided:
        out += ["", "The family p is (p ÷ weight) ÷ share, never below the step before (at most 1). The decided "
                    "verdicts print theirs: " + "; ".join(
                        f"{label}, *{v.reading}*: \"the report's family of {v.family} verdicts, wall clock first: p = "
                        f"{_g(v.p_slower_adjusted if v.reading in V.slower_readings(v.margin) else v.p_faster_adjusted, 2)}"
                        f"\"" for label, v in decided) + "."]
    return "\n".join(out)


def auto_runs_markdown(runs: tuple[str, ...] = AUTO_RUNS) -> str:
    """One row per run of ``AUTO_RUNS``: its card, its mix, the looks ``blocks=auto`` took and what each decided, the
    verdicts decided in the end, alone against alone (loud readings of all), and the host probe's balance (rows the
    verdicts adjusted for of all). Every number from the run's data by the report's own computation."""
    lines = ["| run | card | sharing | looks (shared blocks: verdicts decided, seconds into the run) | verdicts decided "
             "| by wall time | alone against alone: loud | host probe balanced (adjusted for) |",
             "|---|---|---|---|---|---|---|---|"]
    for name in runs:
        data, table = analysed(VALIDATION_ROOT / name)
        env = data.manifest.environment
        card = f"{env.get('gpu_name', '?')} `{str(env.get('gpu_uuid', ''))[:12]}`"
        verdicts, sharing, wall = [], "", ""
        if table is not None:  # None for a probe run
            rows = table[(table["kind"] == "shared") & table["verdict"].notna()]
            verdicts = list(rows["verdict"])
            sharing = ", ".join(dict.fromkeys(str(t) for t in rows["sharing"]))
            wall = "; ".join(f"{series_label(r['tenant'], r['phase'])} *{r['verdict'].reading}*"
                             for _, r in rows[rows["metric"] == "wall"].iterrows())
        looks = "; ".join(f"{lk['blocks']}: {lk['decided']} of {lk['verdicts']}, {lk['elapsed_s']:.0f} s"
                          for lk in data.manifest.looks)
        aa = design.alone_against_alone(data)
        hb = design.host_balance(data)
        lines.append(f"| `{name}` | {card} | {sharing} | {looks or 'fixed blocks'} | "
                     f"{sum(v.decided for v in verdicts)} of {len(verdicts)} | {wall} | "
                     f"{int(aa['loud'].sum()) if len(aa) else 0} of {len(aa)} | "
                     f"{int(hb['adjusted'].sum()) if len(hb) else 0} of {len(hb)} |")
    return "\n".join(lines)


def reference_summary(page: str) -> str:
    """A results page's one-screen summary: each run with a table on the page (its ``reference-table`` blocks, in
    order), its design, and its verdicts by wall time, the word only."""
    lines = ["| run | design | by wall time |", "|---|---|---|"]
    for name in dict.fromkeys(m.group(3) for m in BLOCK.finditer(page) if m.group(2) == "reference-table"):
        words = [f"{label} *{v.reading}*" for label, metric, v in _shared_verdicts(name) if metric == "wall"]
        lines.append(f"| `{name}` | {design_name(REFERENCE_ROOT / name)} | {'; '.join(words) or 'the probe (no verdict)'} |")
    return "\n".join(lines)


GENERATORS: dict[str, Callable[[str | None, str], str]] = {
    "reference-table": lambda arg, page: reference_markdown(REFERENCE_ROOT / str(arg)),
    "headline": lambda arg, page: headline_markdown(),
    "verdict-example": lambda arg, page: verdict_example(str(arg)),
    "holm-example": lambda arg, page: holm_markdown(),
    "verdict-forms": lambda arg, page: verdict_forms(),
    "reference-summary": lambda arg, page: reference_summary(page),
    "auto-runs": lambda arg, page: auto_runs_markdown(),
}


def render(kind: str, arg: str | None, page: str = "") -> str:
    """The block ``<!-- kind[:arg]:start -->`` of ``page`` holds."""
    return GENERATORS[kind](arg, page)


def blocks(text: str) -> list[tuple[str, str | None, str]]:
    """(kind, arg, body) of every generated block of a page that this module writes."""
    return [(m.group(2), m.group(3), m.group(4)) for m in BLOCK.finditer(text) if m.group(2) in GENERATORS]


def rewrite(text: str, only: set[str] | None = None, cache: dict | None = None) -> str:
    """The page with every block of this module regenerated (``only``: these kinds or names)."""
    cache = {} if cache is None else cache

    def sub(m: re.Match) -> str:
        kind, arg = m.group(2), m.group(3)
        if kind not in GENERATORS or (only and kind not in only and arg not in only):
            return m.group(0)
        key = (kind, arg) if kind != "reference-summary" else (kind, text)
        if key not in cache:
            cache[key] = render(kind, arg, text)
        return m.group(1) + cache[key] + m.group(5)

    return BLOCK.sub(sub, text)
