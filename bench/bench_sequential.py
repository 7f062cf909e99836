"""Benchmark: the interim-looks design's verdicts on the coverage grid's pairs -> bench/results/sequential.{md,json}.

Run: ``python -m bench.bench_sequential --out bench/results/sequential.json [--reps 600] [--designs ...]``.
Three designs on every pair of ``coverage.decision_pairs`` (false alarms under DF = 1, then power): the fixed
800 (the default), the built one (``shared_max_factor=2``: the shared series grows to 1600 with looks at 800
and 1200 read at 99.8 %, the alone stays at 800) and, for comparison, one whose alone series grows in step
(not built). Each design runs in its own process when ``--jobs`` > 1.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from kts_helpers.analyse import coverage, sequential
from kts_helpers.fsutil import atomic_write_json

DESIGNS = {"fixed": {"factor": 1.0}, "shared": {"factor": 2.0}, "both": {"factor": 2.0, "grow_alone": True}}


def _design(name: str, reps: int, seed: int) -> list[tuple[str, sequential.DesignDecisions]]:
    rows = []
    for j, (kind, a, s) in enumerate(coverage.decision_pairs()):
        d = sequential.design_decisions(a, s, reps, seed=seed + 100 * j, **DESIGNS[name])
        print(f"{name}: {kind} {d.alone} / {d.shared}: degraded {d.degraded:.3f} faster {d.faster:.3f} "
              f"no change {d.no_change:.3f}", flush=True)
        rows.append((kind, d))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench/results/sequential.json")
    ap.add_argument("--reps", type=int, default=600)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--designs", nargs="+", default=list(DESIGNS), choices=list(DESIGNS))
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        parts = list(pool.map(_design, args.designs, [args.reps] * len(args.designs),
                              [args.seed] * len(args.designs)))
    rows = [r for part in parts for r in part]
    seconds = time.perf_counter() - t0
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out, {"reps": args.reps, "seed": args.seed, "seconds": round(seconds, 1),
                            "interim_confidence": sequential.INTERIM_CONFIDENCE,
                            "rows": [{"measures": k, **d.to_dict()} for k, d in rows]})
    table = sequential.designs_markdown(sorted(rows, key=lambda r: (r[1].alone, r[1].shared, r[0])))
    out.with_suffix(".md").write_text(f"The interim-looks design's verdicts, {args.reps} pairs per row (interim "
                                      f"looks at {sequential.INTERIM_CONFIDENCE:.1%}); {seconds:.0f} s.\n\n{table}\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
