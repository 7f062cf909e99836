"""Benchmark: bootstrap quantile intervals (ours vs scipy / arch) and log-parser throughput.

Run: ``python -m bench.bench_stats --out bench/results/stats.json``. One run measures, side by
side, on 100,000 lognormal samples and 10,000 resamples of a p99 interval:

* ours ``method="iid"`` vs ``scipy.stats.bootstrap`` (percentile, vectorized); scipy is given
  ``batch=500`` because batch=None would hold 10,000 x 100,000 indices and values (~16 GB);
* ours ``method="stationary"`` vs ``arch.bootstrap.StationaryBootstrap(...).conf_int``, at the
  block length Politis-White picks for this data, and at block length 20 (a typical value for
  autocorrelated GPU latencies, which exercises the block tail path rather than the b=1 path);

and the parse speed of ``kts_helpers.analyse.logparse.parse_bytes`` on 2,000,000 KTS_APP v2 lines.
Ours: best of ``--repeats``; the slow baselines run once (that is what users would wait).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from kts_helpers.analyse.logparse import parse_bytes
from kts_helpers.analyse.stats import quantile_ci, resolve_block_length
from kts_helpers.fsutil import atomic_write_json

N, RESAMPLES, Q = 100_000, 10_000, 0.99
GOAL_SECONDS, GOAL_RATIO, GOAL_LINES_PER_S = 2.0, 10.0, 2e6


def _best(fn: Callable[[], object], repeats: int) -> tuple[float, object]:
    best, out = float("inf"), None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


def _once(fn: Callable[[], object]) -> tuple[float, object]:
    return _best(fn, 1)


def bench_iid(x: np.ndarray, repeats: int) -> dict:
    from scipy.stats import bootstrap

    ours_s, ours = _best(lambda: quantile_ci(x, Q, method="iid", n_resamples=RESAMPLES, seed=1), repeats)
    ref_s, ref = _once(lambda: bootstrap((x,), lambda s, axis: np.quantile(s, Q, axis=axis), method="percentile",
                                         vectorized=True, n_resamples=RESAMPLES, batch=500,
                                         random_state=np.random.default_rng(2)).confidence_interval)
    return {"ours_s": ours_s, "baseline": "scipy.stats.bootstrap(percentile, vectorized, batch=500)",
            "baseline_s": ref_s, "speedup": ref_s / ours_s, "ours_ci": list(ours),
            "baseline_ci": [float(ref.low), float(ref.high)],
            "goal_seconds_met": ours_s <= GOAL_SECONDS, "goal_speedup_met": ref_s / ours_s >= GOAL_RATIO}


def bench_stationary(x: np.ndarray, block: int, repeats: int, label: str) -> dict:
    from arch.bootstrap import StationaryBootstrap

    ours_s, ours = _best(lambda: quantile_ci(x, Q, method="stationary", block_length=block,
                                             n_resamples=RESAMPLES, seed=3), repeats)
    bs = StationaryBootstrap(block, x, seed=4)
    ref_s, ref = _once(lambda: bs.conf_int(lambda a: np.quantile(a, Q), reps=RESAMPLES, method="percentile"))
    return {"block_length": block, "block_length_source": label, "ours_s": ours_s,
            "baseline": "arch StationaryBootstrap.conf_int(percentile)", "baseline_s": ref_s,
            "speedup": ref_s / ours_s, "ours_ci": list(ours), "baseline_ci": [float(ref[0, 0]), float(ref[1, 0])],
            "goal_seconds_met": ours_s <= GOAL_SECONDS, "goal_speedup_met": ref_s / ours_s >= GOAL_RATIO}


def _log_blob(n_lines: int) -> tuple[bytes, np.ndarray]:
    rng = np.random.default_rng(5)
    t0 = 1_767_225_600_123_456_789  # 19 digits; above 2**53, so a float round-trip would corrupt it
    intended = t0 + np.arange(n_lines, dtype=np.int64) * 10_000_019
    start = intended + rng.integers(0, 50_000, n_lines)
    end = start + rng.integers(5_000_000, 20_000_000, n_lines)
    dev = rng.uniform(4, 19, n_lines).round(3)
    wall = ((end - start) / 1e6).round(3)
    body = "\n".join(f"KTS_APP,v2,resnet50,tenant-a,{i},{'warmup' if i < 50 else 'measure'},{a},{s},{e},{d},{w}"
                     for i, (a, s, e, d, w) in enumerate(zip(intended.tolist(), start.tolist(), end.tolist(),
                                                             dev.tolist(), wall.tolist(), strict=True)))
    junk = ('KTS_META,v2,{"workload": "resnet50", "tenant": "tenant-a"}\n'
            "Traceback (most recent call last):\n  File \"x.py\", line 1\nRuntimeError: CUDA hiccup\n")
    return (junk + body + "\nKTS_APP,v2,resnet50,tenant-a,17,meas").encode(), intended


def bench_logparse(n_lines: int, repeats: int) -> dict:
    blob, intended = _log_blob(n_lines)
    secs, parsed = _best(lambda: parse_bytes(blob), repeats)
    frame = parsed.frame  # type: ignore[attr-defined]
    exact = len(frame) == n_lines and bool(np.array_equal(frame["intended_ns"].to_numpy(np.int64), intended))
    return {"lines": n_lines, "bytes": len(blob), "seconds": secs, "lines_per_s": n_lines / secs,
            "goal_lines_per_s": GOAL_LINES_PER_S, "goal_met": n_lines / secs >= GOAL_LINES_PER_S,
            "rows": len(frame), "malformed": parsed.malformed, "other": parsed.other,  # type: ignore[attr-defined]
            "epoch_ns_19_digits_exact": exact}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="bench/results/stats.json")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--lines", type=int, default=2_000_000)
    args = ap.parse_args(argv)
    x = np.random.default_rng(0).lognormal(0.0, 0.5, N)
    quantile_ci(x[:1000], Q, n_resamples=100, seed=0)  # warm imports (arch) outside the timings
    auto_b, _ = resolve_block_length(x, "stationary")
    res = {
        "machine": {"cpus": os.cpu_count(), "python": sys.version.split()[0], "platform": platform.platform(),
                    "numpy": np.__version__},
        "setup": {"n": N, "n_resamples": RESAMPLES, "q": Q, "data": "lognormal(0, 0.5), seed 0",
                  "ours": f"best of {args.repeats}", "baselines": "one run each"},
        "iid_vs_scipy": bench_iid(x, args.repeats),
        "stationary_vs_arch": bench_stationary(x, auto_b, args.repeats, "Politis-White (auto)"),
        "stationary_b20_vs_arch": bench_stationary(x, 20, args.repeats, "fixed 20"),
        "logparse": bench_logparse(args.lines, args.repeats),
    }
    res["goals_met"] = all(v["goal_seconds_met"] and v["goal_speedup_met"]
                           for k, v in res.items() if k.endswith("_vs_scipy") or k.endswith("_vs_arch"))
    print(f"{'p99 CI, n=100k, 10k resamples':38s} {'ours s':>8s} {'base s':>8s} {'speedup':>8s}  ours CI / baseline CI")
    for k in ("iid_vs_scipy", "stationary_vs_arch", "stationary_b20_vs_arch"):
        v = res[k]
        name = k + (f" (b={v['block_length']})" if "block_length" in v else "")
        print(f"{name:38s} {v['ours_s']:8.3f} {v['baseline_s']:8.2f} {v['speedup']:8.1f}x  "
              f"[{v['ours_ci'][0]:.4f}, {v['ours_ci'][1]:.4f}] / [{v['baseline_ci'][0]:.4f}, {v['baseline_ci'][1]:.4f}]")
    lp = res["logparse"]
    print(f"logparse: {lp['lines']:,} lines in {lp['seconds']:.2f} s = {lp['lines_per_s']:,.0f} lines/s "
          f"(goal {GOAL_LINES_PER_S:,.0f}: {'met' if lp['goal_met'] else 'NOT met'}); "
          f"19-digit epoch ns exact: {lp['epoch_ns_19_digits_exact']}")
    print(f"quantile goals (<= {GOAL_SECONDS} s and >= {GOAL_RATIO}x) met: {res['goals_met']}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out, res)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
