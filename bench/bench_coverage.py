"""Benchmark: the full coverage grid of the kit's 95 % intervals -> bench/results/coverage.{md,json}.

Run: ``python -m bench.bench_coverage --out bench/results/coverage.json [--reps 1000]``. The same cells as
the test suite's fast subset (``tests/test_stats_coverage.py``) with many more replications, plus n = 2000
and phi = 0.9 (``coverage.BENCH_N``/``BENCH_PHI``) and the stationary bootstrap's p99 (as the kit had it)
for comparison. The README's statistics section states this table's numbers.

Then the wider grid of issue 19 (``coverage.wide_grid``: bursty, periodic and random collisions, t3 tails,
slow drift; p99 and DF at n = 300, 800, 2000, with the stationary bootstrap's p99 rows) ->
``coverage-wide.{md,json}``, the verdict rule's false alarms and power at n = 800 and 2000 per estimand and
combined (``coverage.decision_grid``) -> ``decisions.{md,json}``, and the verdicts of the committed H200
article reference (the FFT's wall must read "degraded", its device clock must not). ``--wide-only`` skips
the log-AR(1) grid.
"""

from __future__ import annotations

import argparse
import platform
import sys
import time
from pathlib import Path

from kts_helpers.analyse import coverage
from kts_helpers.fsutil import atomic_write_json


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench/results/coverage.json")
    ap.add_argument("--reps", type=int, default=1000)
    ap.add_argument("--bootstrap-reps", type=int, default=300, help="replications of the (slow) bootstrap cells")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--wide-reps", type=int, default=600, help="replications per cell of the wider grid")
    ap.add_argument("--decision-reps", type=int, default=600, help="replications per cell of the decisions")
    ap.add_argument("--wide-bootstrap-reps", type=int, default=150)
    ap.add_argument("--wide-only", action="store_true", help="skip the log-AR(1) grid")
    args = ap.parse_args(argv)
    if not args.wide_only:
        _log_ar1_grid(args)
    _wide(args)
    return 0


def _wide(args: argparse.Namespace) -> None:
    out = Path(args.out).parent
    out.mkdir(parents=True, exist_ok=True)
    print(reference_verdicts())
    t0 = time.perf_counter()
    cells = coverage.wide_grid(args.wide_reps, seed=args.seed, bootstrap_reps=args.wide_bootstrap_reps)
    t1 = time.perf_counter()
    table = coverage.wide_markdown(cells)
    atomic_write_json(out / "coverage-wide.json", {"reps": args.wide_reps, "seed": args.seed,
                                                   "bootstrap_reps": args.wide_bootstrap_reps,
                                                   "seconds": round(t1 - t0, 1), "cells": [c.to_dict() for c in cells]})
    (out / "coverage-wide.md").write_text(
        f"Coverage on the wider grid, {args.wide_reps} series per cell ({args.wide_bootstrap_reps} for the "
        f"bootstrap rows); an open side counts as covering; judged at n >= 800 (n = 300 in brackets); "
        f"{t1 - t0:.0f} s.\n\n{table}\n")
    print(table)
    bad = [c for c in cells if c.n.isdigit() and int(c.n) >= 800 and "bootstrap" not in c.statistic
           and not coverage.holds(c)]
    print(f"\n{len(cells)} cells; {len(bad)} at n >= 800 (bootstrap rows excluded) miss the criterion: "
          + ", ".join(f"{c.statistic} {c.phi} n={c.n}" for c in bad))
    rows = coverage.decision_grid(args.decision_reps, seed=args.seed)
    t2 = time.perf_counter()
    dtable = coverage.decisions_markdown(rows)
    atomic_write_json(out / "decisions.json", {"reps": args.decision_reps, "seed": args.seed,
                                               "seconds": round(t2 - t1, 1),
                                               "rows": [{"measures": k, **d.to_dict()} for k, d in rows]})
    (out / "decisions.md").write_text(f"The verdict rule's decisions, {args.decision_reps} pairs per row; "
                                      f"{t2 - t1:.0f} s.\n\n{dtable}\n")
    print(dtable)


def reference_verdicts(run: str = "data/reference/h200-2026-11-30-article") -> str:
    """The verdicts of the committed H200 article reference, every tenant and clock."""
    from kts_helpers.analyse import rules, verdict
    from kts_helpers.analyse.load import load_run

    it = load_run(run).iterations
    lines = [f"verdicts of {run}:"]
    for clock in rules.METRICS:
        groups = {(meta["kind"], meta["tenant"]): runs for meta, runs in rules.series_groups(it, clock)}
        for (kind, tenant), runs in groups.items():
            if kind == "shared" and ("baseline", tenant) in groups:
                v = verdict.decide(runs, groups[("baseline", tenant)])
                lines.append(f"  {tenant} {clock}: {v.words}")
    return "\n".join(lines)


def _log_ar1_grid(args: argparse.Namespace) -> None:
    t0 = time.perf_counter()
    cells = coverage.grid(args.reps, phis=coverage.BENCH_PHI, ns=coverage.BENCH_N, seed=args.seed,
                          with_bootstrap=True, bootstrap_reps=args.bootstrap_reps)
    seconds = time.perf_counter() - t0
    table = coverage.markdown(cells)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out, {"reps": args.reps, "bootstrap_reps": args.bootstrap_reps, "seed": args.seed,
                            "seconds": round(seconds, 1), "python": sys.version.split()[0],
                            "machine": platform.machine(), "cells": [c.to_dict() for c in cells]})
    out.with_suffix(".md").write_text(f"Coverage of the kit's 95 % intervals, {args.reps} replications per cell "
                                      f"(bootstrap cells {args.bootstrap_reps}), log-AR(1) series, sigma = "
                                      f"{coverage.SIGMA}; {seconds:.0f} s.\n\n{table}\n")
    print(table)
    bad = [c for c in cells if c.verdict not in ("ok", "no bound") and "bootstrap" not in c.statistic]
    print(f"\n{len(cells)} cells in {seconds:.0f} s; {len(bad)} outside 92-98 % (bootstrap cells excluded)")


if __name__ == "__main__":
    sys.exit(main())
