"""Benchmark: the verdict on series whose speed moves between phases (issue 30) -> bench/results/drift.{md,json}.

Run: ``python -m bench.bench_drift --out bench/results/drift.json [--reps 100] [--report-reps 100] [--jobs 2]``.
``driftgrid.grid``: every no-effect cell (drift between blocks sd 0-2 %, OS hiccups, i.i.d. and AR 0.9 bulk, with
and without the neighbours' timestamps, n = 800 and 2000; both directions counted), the power table, "no change"
under a clean null, no-effect reports of 2 and 4 tenants x 2 clocks read as one family (Holm), and the old design
(one alone block) under sd 2 % drift for comparison. The committed reference: bench/reference/cpu-2026-12-03-issue30-drift.md.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from kts_helpers.analyse import driftgrid
from kts_helpers.fsutil import atomic_write_json


def _row(job: tuple[int, int, int, int]) -> driftgrid.DriftRow:
    """One row, by its index in the grid (generators hold closures: each process builds the grid itself)."""
    k, reps, report_reps, seed = job
    row = driftgrid.run_spec(driftgrid.specs(reps, report_reps=report_reps, seed=seed)[k])
    print(driftgrid.markdown([row]).splitlines()[-1], flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench/results/drift.json")
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--report-reps", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    specs = driftgrid.specs(args.reps, report_reps=args.report_reps, seed=args.seed)
    # longest first (a report row reads 4-8 verdicts a run), the table in the grid's own order
    order = sorted(range(len(specs)), key=lambda k: -specs[k][1]["reps"] * specs[k][1]["n"]
                   * (8 if specs[k][0] == "report_row" else 1))
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        done = dict(zip(order, pool.map(_row, [(k, args.reps, args.report_reps, args.seed) for k in order]),
                        strict=True))
    rows = [done[k] for k in range(len(specs))]
    seconds = time.perf_counter() - t0
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out, {"reps": args.reps, "report_reps": args.report_reps, "seed": args.seed,
                            "seconds": round(seconds, 1), "rows": [r.to_dict() for r in rows]})
    table = driftgrid.markdown(rows)
    out.with_suffix(".md").write_text(
        f"The verdict under drift between blocks, `python -m bench.bench_drift --reps {args.reps} "
        f"--report-reps {args.report_reps}` (seed {args.seed}; {seconds:.0f} s on {args.jobs} processes): {args.reps} "
        f"runs per verdict row, {args.report_reps} reports per report row, a report row counting the reports with at "
        f"least one verdict of that reading; drift: each block's level times exp(N(0, sd)); hiccups: "
        f"{100 * driftgrid.HICCUP_SHARE:g} % of iterations {driftgrid.HICCUP_FACTOR[0]:g}-{driftgrid.HICCUP_FACTOR[1]:g}x; "
        f"timestamps: the shared generator's own collisions flagged, or {100 * driftgrid.FLAG_SHARE:g} % random flags "
        f"that cost nothing.\n\n{table}\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
