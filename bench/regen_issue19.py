"""Re-measure the issue-19 reference tables in bench/reference with the parameters they were made with.

Run: ``python -m bench.regen_issue19 [--only wide|decisions|decisions-300]``. The wider coverage grid: 600
series per cell, 100 for the stationary bootstrap's rows, seed 1; the verdict's decisions at n = 800 and
2000: 700 pairs per row, seed 0; at n = 300: 400 pairs per row, seed 7 -- the seeds and sizes of the
committed files, so a change to an interval moves only what it moves. The README quotes the .md files
verbatim (``tests/test_readme.py``). ``make bench`` writes the same tables under bench/results/ at its own
defaults.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from kts_helpers.analyse import coverage
from kts_helpers.fsutil import atomic_write_json, atomic_write_text

REF = Path(__file__).resolve().parent / "reference"
STEM = "cpu-2026-11-30-issue19"


def wide() -> None:
    reps, boot, seed = 600, 100, 1
    t0 = time.perf_counter()
    cells = coverage.wide_grid(reps, seed=seed, bootstrap_reps=boot)
    dt = time.perf_counter() - t0
    atomic_write_json(REF / f"{STEM}-coverage-wide.json", {"reps": reps, "seed": seed, "bootstrap_reps": boot,
                                                           "seconds": round(dt, 1), "cells": [c.to_dict() for c in cells]})
    atomic_write_text(REF / f"{STEM}-coverage-wide.md",
                      f"Coverage on the wider grid, {reps} series per cell ({boot} for the bootstrap rows); an "
                      f"open side counts as covering; judged at n >= 800 (n = 300 in brackets); {dt:.0f} s.\n\n"
                      f"{coverage.wide_markdown(cells)}\n")
    print(f"coverage-wide: {dt:.0f} s")


def decisions() -> None:
    reps, seed = 700, 0
    t0 = time.perf_counter()
    rows = coverage.decision_grid(reps, ns=(800, 2000), seed=seed)
    dt = time.perf_counter() - t0
    atomic_write_json(REF / f"{STEM}-decisions.json",
                      {"reps": reps, "seed": seed, "rows": [{"measures": k, **d.to_dict()} for k, d in rows]})
    atomic_write_text(REF / f"{STEM}-decisions.md", f"The verdict rule's decisions, {reps} pairs per row (seed {seed}); "
                                                    f"{dt:.0f} s.\n\n{coverage.decisions_markdown(rows)}\n")
    print(f"decisions: {dt:.0f} s")


def decisions_300() -> None:
    reps, seed = 400, 7
    rows = coverage.decision_grid(reps, ns=(300,), seed=seed)
    atomic_write_text(REF / f"{STEM}-decisions-300.md",
                      "The verdict rule's decisions at n = 300 (below the 368 co-running samples DF needs: the exceedance "
                      f"test alone, at a quarter of its level), {reps} pairs per row (seed {seed}).\n\n"
                      f"{coverage.decisions_markdown(rows)}\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("wide", "decisions", "decisions-300"))
    args = ap.parse_args(argv)
    for name, fn in (("wide", wide), ("decisions", decisions), ("decisions-300", decisions_300)):
        if args.only in (None, name):
            fn()
    return 0


if __name__ == "__main__":
    sys.exit(main())
