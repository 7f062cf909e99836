"""Benchmark: the full coverage grid of the kit's 95 % intervals -> bench/results/coverage.{md,json}.

Run: ``python -m bench.bench_coverage --out bench/results/coverage.json [--reps 1000]``. The same cells as
the test suite's fast subset (``tests/test_stats_coverage.py``) with many more replications, plus n = 2000
and phi = 0.9 (``coverage.BENCH_N``/``BENCH_PHI``) and the stationary bootstrap's p99 (as the kit had it)
for comparison. The README's statistics section states this table's numbers.
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
    args = ap.parse_args(argv)
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
