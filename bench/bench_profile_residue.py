"""Does a profile leave its mark on the times that follow it in the same process?  (GPU only.)

Why: each alone worker profiles its tenant before the timed iterations (``workers/kts_profile.py``); Kineto keeps
CUPTI attached after the profiler stops unless ``TEARDOWN_CUPTI=1``, and every later launch then pays CUPTI's
callbacks. On the H200 every real-model tenant read 7-32 % faster shared than alone until this was found.

Each trial is a fresh process: build the model, warm it, time it (M0: a 500-launch host loop, microseconds per
launch, and the tenant's closed loop, p50 wall per phase), then P: profile as the worker does with
``TEARDOWN_CUPTI=0`` (the old default) / T: with ``TEARDOWN_CUPTI=1`` (the worker now) / N: no profile, then time
twice more (M1, M2). Modes rotate within each round so drift of the host does not line up with one mode.

    KTS_MODELS=bert,llama-decode LIMIT=230 python -m bench.bench_profile_residue   (on a GPU, transformers installed)

The 2026-12-03 H200 result is ``bench/reference/h200-2026-12-03-profile-residue.json``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

SIZES = {"bert": ("make_bert", 0.010, 60), "llama-decode": ("make_llama_decode", 0.020, 12),
         "vit": ("make_vit", 0.010, 60)}  # factory, closed-loop sleep (s) and iterations per window, as sealed runs
ROUNDS = ("NPT", "PTN", "TNP", "NTP", "PTN")


def child(model: str, mode: str) -> dict:
    """One trial in this (fresh) process."""
    os.environ["TEARDOWN_CUPTI"] = "1" if mode == "T" else "0"  # P: as the worker did before the fix
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "workers"))
    import kts_models
    import kts_profile
    import torch

    dev = torch.device("cuda")
    factory, sleep_s, n = SIZES[model]
    wl = getattr(kts_models, factory)(torch, dev, {"device_type": "cuda", "seed": 0})
    x = torch.zeros(1, device=dev)

    def launches() -> float:
        out = []
        for _ in range(15):
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(500):
                x.add_(1)
            out.append((time.perf_counter() - t) * 1e6 / 500)
            torch.cuda.synchronize()
        return round(statistics.median(out), 3)

    def window() -> dict:
        walls: dict[str, list[float]] = {}
        for _ in range(n):
            for phase, fn in wl.step():
                t = time.perf_counter()
                fn()
                torch.cuda.synchronize()
                walls.setdefault(phase, []).append((time.perf_counter() - t) * 1e3)
            time.sleep(sleep_s)
        return {"launch_us": launches(), **{ph: round(statistics.median(v), 3) for ph, v in walls.items()}}

    for _ in range(3):
        for _phase, fn in wl.step():
            fn()
    torch.cuda.synchronize()
    row = {"model": model, "mode": mode, "M0": window()}
    if mode in "PT":
        prof = kts_profile.profile_workload(torch, dev, wl.step, 10)
        row.update(cost_s=prof["cost_s"], residue=prof.get("residue"), teardown=prof.get("cupti_teardown"))
    else:
        time.sleep(1.0)
    row["M1"] = window()
    row["M2"] = window()
    return row


def main() -> None:
    models = os.environ.get("KTS_MODELS", "bert,llama-decode").split(",")
    limit = float(os.environ.get("LIMIT", 480))
    plan = [(models[i % len(models)], mode) for i, modes in enumerate(ROUNDS) for mode in modes]
    rows, t0 = [], time.time()
    for model, mode in plan:
        if time.time() - t0 > limit:
            print("SKIP", model, mode, flush=True)
            continue
        p = subprocess.run([sys.executable, __file__, "child", model, mode], capture_output=True, text=True,
                           check=False)
        got = [line[4:] for line in p.stdout.splitlines() if line.startswith("ROW ")]
        if not got:
            print("FAIL", model, mode, p.returncode, p.stderr[-800:], flush=True)
            continue
        row = {**json.loads(got[0]), "t": round(time.time() - t0, 1)}
        rows.append(row)
        print(json.dumps(row), flush=True)
    out = Path(os.environ.get("OUT", "/tmp")) / "residue.json"
    out.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "child":
        print("ROW " + json.dumps(child(sys.argv[2], sys.argv[3])), flush=True)
    else:
        main()
