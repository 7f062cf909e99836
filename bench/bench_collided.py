"""Benchmark: the verdict with the neighbours' timestamps (the collided launches' test) -> bench/results/collided.{md,json}.

Run: ``python -m bench.bench_collided --out bench/results/collided.json [--reps 400] [--jobs 2]``.
Every false-alarm pair of ``coverage.decision_pairs`` (DF = 1) with collision flags drawn independently of the
values -- random, in Markov bursts, on the article's beat: launches that met a neighbour which cost nothing --
then collisions that cost time, flagged (the article's U[0, 2.4 ms] and a small U[0, 0.3 ms]). Each row also
reads the same pairs without flags, so the table shows what the timestamps add. One n per process.
"""

from __future__ import annotations

import argparse
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from kts_helpers.analyse import coverage
from kts_helpers.analyse.verdict import collided_alpha
from kts_helpers.fsutil import atomic_write_json


def _rows(n: int, reps: int, seed: int) -> list[tuple[str, coverage.CollidedDecisions]]:
    rows = coverage.collided_grid(reps, ns=(n,), seed=seed)
    for kind, d in rows:
        print(f"n={n} {kind} {d.alone} / {d.shared} [{d.flags}]: collided {d.collided_degraded / d.reps:.3f} "
              f"verdict degraded {d.degraded / d.reps:.3f} (without flags {d.degraded_without / d.reps:.3f})", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench/results/collided.json")
    ap.add_argument("--reps", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--ns", type=int, nargs="+", default=[800, 2000])
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        parts = list(pool.map(_rows, args.ns, [args.reps] * len(args.ns), [args.seed] * len(args.ns)))
    rows = [r for part in parts for r in part]
    seconds = time.perf_counter() - t0
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out, {"reps": args.reps, "seed": args.seed, "seconds": round(seconds, 1),
                            "collided_alpha": collided_alpha(), "rows": [{"measures": k, **d.to_dict()} for k, d in rows]})
    table = coverage.collided_markdown(rows)
    out.with_suffix(".md").write_text(f"The verdict with collision flags, {args.reps} pairs per row (seed {args.seed}; "
                                      f"the collided launches' test at p <= {collided_alpha():.2%}); {seconds:.0f} s.\n\n"
                                      f"{table}\n")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
