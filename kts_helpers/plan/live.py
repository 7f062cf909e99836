"""``kts plan --validate``: run the recommended N and N+1 on this GPU and put the prediction next to them.

Why a separate module: it is the planner's only step that runs anything (through ``run.experiment``, the
kit's one runner, exactly as ``kts run`` would), so it needs a GPU and minutes; everything else in ``plan``
is arithmetic on logs. The runs use the source run's profile, sizes and sleeps, 300 iterations, N pods
filled from the mix in turn (at most four: the kit's largest scenario), under the recommended sharing mode
(MPS as the device plugin gives it: every pod capped at 100/N % of the SMs).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from kts_helpers.analyse.load import load_run
from kts_helpers.analyse.summary import summarize_frame
from kts_helpers.errors import SpecError
from kts_helpers.plan.capacity import CAPACITY_ITERATIONS, CapacityAnswer, PodRow
from kts_helpers.plan.inputs import PlanInput
from kts_helpers.plan.validation import agrees
from kts_helpers.run.experiment import run_experiment
from kts_helpers.run.runs import open_run

MAX_TENANTS = 4


def validation_params(answer: CapacityAnswer, source_run: PlanInput | str | os.PathLike, n: int,
                      overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The ``kts run`` parameters of N pods of the answer's mix, with the source run's sizes and sleeps.

    ``overrides`` (``kts plan --validate --set key=value``): any other run parameter, e.g. fewer iterations so
    that N and N+1 fit a time budget, or ``device=cpu`` to try the loop on a machine without a GPU.
    """
    if not 1 <= n <= MAX_TENANTS:
        raise SpecError(f"--validate runs at most {MAX_TENANTS} pods in one scenario, not {n}")
    m = source_run.manifest if isinstance(source_run, PlanInput) else open_run(source_run).read()
    r = m.spec.resolved
    workloads = [answer.mix[i % len(answer.mix)] for i in range(n)]
    mode = answer.best_mode
    params: dict[str, Any] = {"profile": m.spec.profile if m.spec.profile != "simulated" else "tiny",
                              "workloads": ",".join(workloads), "iterations": CAPACITY_ITERATIONS,
                              "label": f"kts plan --validate: N = {n} ({mode})"}
    for key in ("fft_size", "gemm_size", "sleep_ms_fft", "sleep_ms_gemm", "sleep_ms_llm"):
        if r.get(key) is not None:
            params[key] = r[key]
    if mode == "mps" and n > 1:
        params["sharing"] = "mps-limited"
        params["mps_thread_percentage"] = {w: max(1, int(100 // n)) for w in set(workloads)}
    params.update(overrides or {})
    return params


def _measured(run_dir: Any, n: int) -> dict[tuple[str, int, str], tuple[float, float]]:
    """(workload, k-th pod of it, phase) -> measured wall (p50, p99), from the shared scenario (alone when N = 1)."""

    table = summarize_frame(load_run(run_dir).iterations, "wall")
    table = table[table["kind"] == ("shared" if n > 1 else "baseline")]
    pods: dict[str, list[str]] = {}
    out = {}
    for row in table.itertuples():
        names = pods.setdefault(row.workload, [])
        if row.tenant not in names:
            names.append(row.tenant)
        out[(row.workload, names.index(row.tenant) + 1, row.phase)] = (float(row.p50_ms), float(row.p99_ms))
    return out


def compare_rows(rows: Sequence[PodRow], measured: dict[tuple[str, int, str], tuple[float, float]]) -> list[str]:
    """One line per pod and phase: predicted p50/p99 with intervals against measured, and whether they agree
    (``plan.validation.agrees``, the README table's rule)."""
    out = []
    for r in rows:
        k = int(r.tenant.rsplit("-", 1)[1]) if "-" in r.tenant else 1
        got = measured.get((r.workload, k, r.phase))
        if got is None:
            out.append(f"  {r.pod}: not measured")
            continue
        p50, p99 = got
        p50_ok, p99_ok = agrees(r, p50, p99)
        verdict = "hit" if p50_ok and p99_ok else "miss: " + " and ".join(
            w for w, ok in (("p50", p50_ok), ("p99", p99_ok)) if not ok)
        out.append(f"  {r.pod}: p50 predicted {r.p50_ms:.3f} [{r.p50_lo:.3f}, {r.p50_hi:.3f}] measured {p50:.3f}; "
                   f"p99 predicted {r.p99_ms:.3f} [{r.p99_lo:.3f}, {r.p99_hi:.3f}] measured {p99:.3f} ({verdict})")
    return out


def validate_capacity(answer: CapacityAnswer, source_run: PlanInput | str | os.PathLike, *, root: str | os.PathLike,
                      progress: bool = True, overrides: dict[str, Any] | None = None) -> str:
    """Run N (the recommendation) and N+1 through the kit's runner; predicted against measured, as text."""

    mode = answer.best_mode
    best = max(answer.largest.get(mode, 0), 1)
    lines = [f"kts plan --validate: {mode}, recommended N = {answer.largest.get(mode, 0)}"]
    for n in (best, best + 1):
        if n > MAX_TENANTS:
            lines.append(f"N = {n}: more than {MAX_TENANTS} pods in one scenario; not run")
            continue
        run = run_experiment(validation_params(answer, source_run, n, overrides), root=root, progress=progress)
        lines.append(f"N = {n}: run {run.path}")
        rows = [r for r in answer.rows if r.n == n and r.mode == mode]
        if not rows:
            lines.append(f"  no prediction for N = {n} (beyond --max-n {max(r.n for r in answer.rows)})")
        lines += compare_rows(rows, _measured(run.path, n))
    return "\n".join(lines)
