"""Predict-then-check exercises: the student states a prediction, the model answers, the two are compared.

Why: a lesson that only shows results teaches less than one that first asks. Each check runs the model
with the notebook's parameters (nothing here knows the answer in advance), classifies what it sees in
the same words the student chose from, and says whether the prediction matched. A prediction left at
``None`` (the notebook's default) is "none yet": nothing is pre-filled for the student, and the rendered answer
sits in a closed ``<details>`` under the question, so a reader of the page predicts before opening it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd

from kts_helpers.plan.capacity import capacity_frame, capacity_of_run
from kts_helpers.teaching import waiting
from kts_helpers.teaching.model import DEFAULT_SLICE_TIMER, SimError, SimTenant, simulate
from kts_helpers.teaching.model import degradation as ts_degradation
from kts_helpers.teaching.mps import MpsTenant, mps_degradation

CHANGES = ("unchanged", "grows", "doubles", "shrinks")
CLOCK_ANSWERS = ("wall only", "device and wall", "neither")
TOLERANCE = 0.05  # a relative change below 5 % counts as "unchanged"
SEES = 0.01  # a clock "sees" the neighbour when its p99 grows by more than 1 %


@dataclass(frozen=True)
class Check:
    """One exercise: what was asked, predicted and found, and the model's numbers behind the answer."""

    question: str
    prediction: str | None  # None: the student has not predicted yet
    answer: str
    correct: bool | None  # None without a prediction
    explanation: str
    evidence: pd.DataFrame = field(repr=False, default_factory=pd.DataFrame)
    parameter: str = "predict_*"  # where the student writes the prediction

    def markdown(self) -> str:
        if self.prediction is None:
            said = (f"Your prediction: *none yet*. Write it in `{self.parameter}` (the parameters cell, or "
                    f"`make teach SET=\"{self.parameter.split(',')[0]}=...\"`) before you open the answer.")
            mark = ""
        else:
            said = f"Your prediction: *{self.prediction}*."
            mark = " (✔ your prediction matches)" if self.correct else " (✘ your prediction differs)"
        return (f"**{self.question}**\n\n{said}\n\n<details><summary>The model's answer (open it once you have "
                f"predicted)</summary>\n\nThe model: **{self.answer}**{mark}.\n\n{self.explanation}\n\n</details>")


def _choice(value: str | None, choices: Sequence[str], what: str) -> str | None:
    if value is None:  # not predicted yet
        return None
    v = str(value).strip().lower()
    if v not in choices:
        raise SimError(f"{what} must be one of {', '.join(repr(c) for c in choices)}, got {value!r}")
    return v


def change(before: float, after: float) -> str:
    """How a latency moved, in the exercise's words: unchanged (within 5 %), doubles (x1.9 or more), ..."""
    if not (math.isfinite(before) and math.isfinite(after) and before > 0):
        raise SimError(f"cannot compare latencies {before} and {after}")
    ratio = after / before
    if abs(ratio - 1) <= TOLERANCE:
        return "unchanged"
    if ratio >= 1.9:
        return "doubles"
    return "grows" if ratio > 1 else "shrinks"


def quantum_doubles(tenants: Sequence[SimTenant], quantum_ms: float, *, tenant: str = "fft",
                    predict_p50: str | None = None, predict_p99: str | None = None, context_switch_ms: float = 0.0,
                    duration_ms: float = 60_000.0, seed: int = 0, slice_timer: str = DEFAULT_SLICE_TIMER) -> Check:
    """What happens to a tenant's wall p50 and p99 when the quantum doubles? (simulated both ways)."""
    p50_guess, p99_guess = _choice(predict_p50, CHANGES, "predict_p50"), _choice(predict_p99, CHANGES, "predict_p99")
    rows = []
    for q in (quantum_ms, 2 * quantum_ms):
        g = simulate(tenants, q, context_switch_ms, duration_ms, seed, slice_timer=slice_timer)
        w = g.loc[g["tenant"] == tenant, "wall_ms"]
        if w.empty:
            raise SimError(f"tenant {tenant!r} completed no kernel; lengthen duration_ms")
        rows.append({"quantum_ms": q, "p50_ms": float(w.quantile(0.5)), "p99_ms": float(w.quantile(0.99))})
    ev = pd.DataFrame(rows)
    a50, a99 = change(ev.p50_ms[0], ev.p50_ms[1]), change(ev.p99_ms[0], ev.p99_ms[1])
    return Check(f"If the quantum doubles ({quantum_ms:g} → {2 * quantum_ms:g} ms), what do the {tenant} tenant's "
                 "wall p50 and p99 do?",
                 None if p50_guess is None or p99_guess is None else f"p50 {p50_guess}, p99 {p99_guess}",
                 f"p50 {a50}, p99 {a99}",
                 None if p50_guess is None or p99_guess is None else (p50_guess, p99_guess) == (a50, a99),
                 f"Simulated: p50 {ev.p50_ms[0]:.3f} → {ev.p50_ms[1]:.3f} ms, p99 {ev.p99_ms[0]:.3f} → "
                 f"{ev.p99_ms[1]:.3f} ms. Only the kernels that land on a neighbour's slice wait, and they wait up "
                 "to one quantum: the tail moves with the quantum (by about the quantum's change, not by a factor), "
                 "the median moves only if more than half of the kernels wait.", ev, "predict_p50, predict_p99")


def clock_verdict(alone_p99: float, shared_p99: float) -> bool:
    """Whether a clock saw the neighbour: its p99 grew by more than ``SEES``."""
    return shared_p99 > alone_p99 * (1 + SEES)


def _answer(sees_device: bool, sees_wall: bool) -> str:
    return "device and wall" if sees_device else ("wall only" if sees_wall else "neither")


def which_clock(ts_tenants: Sequence[SimTenant], mps_tenants: Sequence[MpsTenant], *, quantum_ms: float,
                tenant: str = "fft", mode: str = "mps", predict: str | None = None, context_switch_ms: float = 0.0,
                duration_ms: float = 60_000.0, seed: int = 0, slice_timer: str = DEFAULT_SLICE_TIMER) -> Check:
    """Which clock sees the neighbour under ``mode`` (``mps`` or ``timeslice``)? Both modes, both tenants shown."""
    guess = _choice(predict, CLOCK_ANSWERS, "predict_clock")
    mode = _choice(mode, ("mps", "timeslice"), "mode")
    tables = {"timeslice": ts_degradation(ts_tenants, quantum_ms, context_switch_ms, duration_ms, seed,
                                                slice_timer=slice_timer),
              "mps": mps_degradation(mps_tenants, duration_ms, seed)}
    rows = []
    for m, t in tables.items():
        for r in t.itertuples():
            dev = clock_verdict(r.device_p99_alone_ms, r.device_p99_shared_ms)
            wall = clock_verdict(r.p99_alone_ms, r.p99_shared_ms)
            rows.append({"mode": m, "tenant": r.tenant, "device_df": r.device_df, "wall_df": r.df,
                         "sees it": _answer(dev, wall)})
    ev = pd.DataFrame(rows)
    mine = ev[(ev["mode"] == mode) & (ev["tenant"] == tenant)]
    if mine.empty:
        raise SimError(f"tenant {tenant!r} is not among the exercise's tenants")
    answer = str(mine["sees it"].iloc[0])
    return Check(f"Under {'MPS' if mode == 'mps' else 'time-slicing'}, which clock of the {tenant} tenant sees its "
                 "neighbour?", guess, answer, None if guess is None else guess == answer,
                 "Under MPS there is no wait before a kernel starts: it runs at once, slower, on shared SMs, so the "
                 "interference is inside its CUDA events and the wall clock just carries it. Under time-slicing a "
                 "short kernel waits before its first instruction (wall only), while a long one is preempted mid-way "
                 "and carries the neighbour's slice inside its events (device and wall). The table shows each case "
                 "as the models find it (a clock 'sees' the neighbour when its p99 grows by more than "
                 f"{100 * SEES:.0f} %).", ev, "predict_clock")


def dominant_wait(row: pd.Series, in_service_ms_per_request: float, requests: int, *,
                  predict: str | None = None) -> Check:
    """Over a pod's life of ``requests`` requests, which kind of waiting dominates? (``waiting.budget``)."""
    guess = _choice(predict, waiting.KINDS, "predict_wait")
    table = waiting.budget(row, in_service_ms_per_request, requests)
    answer = waiting.dominant(table)
    even = waiting.break_even_requests(row, in_service_ms_per_request)
    startup = float(row["startup_s"]) if pd.notna(row["startup_s"]) else 0.0
    return Check(f"The {row['tenant']} tenant's pod took {startup:g} s from scheduling to a running container "
                 f"(image pull and start-up) and serves {requests:g} requests. Which kind of waiting dominates its "
                 "life?", guess, answer, None if guess is None else guess == answer,
                 f"Admission and placement are paid once per pod ({float(row['admission_s']) + float(row['placement_s']):g} s "
                 f"here); the time-slice wait is paid on every request ({in_service_ms_per_request:.3f} ms each). "
                 f"The in-service wait overtakes the one-off waits after about {even:,.0f} requests. A slow image "
                 "pull is fixed on the node (a pre-pulled or smaller image), not by a quota or the time slice.",
                 table, "predict_wait")



def how_many_replicas(run_dir: str, predict: int | None, *, slo_ms: dict[str, float] | None = None,
                      max_slow_share: float | None = None) -> Check:
    """How many pods of this run's workloads (filled in turn) can share the GPU and still meet the goal?

    Answered by the planner (``plan.capacity.capacity_of_run``, the report's "Capacity" section asks the same),
    from the run's alone baselines and the GPU's probe; the answer is the largest N under time-slicing.
    """

    if predict is not None and (isinstance(predict, bool) or not isinstance(predict, int) or predict < 0):
        raise SimError(f"predict_replicas must be a whole number of pods >= 0, got {predict!r}")
    answer = capacity_of_run(run_dir, slo_ms=slo_ms, max_slow_share=max_slow_share)
    n_ts, n_mps = answer.largest["timeslice"], answer.largest["mps"]
    goals = "; ".join(g.text() for g in answer.goals)
    return Check(f"How many replicas can this mix ({', '.join(answer.mix)}, filled in turn) take with {goals}?",
                 None if predict is None else str(predict), str(n_ts), None if predict is None else predict == n_ts,
                 f"The planner predicts every pod's wall p50/p99 for N = 1..{max(r.n for r in answer.rows)} from the "
                 f"alone runs and the GPU's probe: under time-slicing N = {n_ts} meets the goal, under MPS (each pod "
                 f"capped at 100/N % of the SMs, as the device plugin does) N = {n_mps}. A pod waits for the others' "
                 "slices (time-slicing) or runs on fewer SMs (MPS): the short tenant's p99 is what breaks first.",
                 capacity_frame(answer), "predict_replicas")
