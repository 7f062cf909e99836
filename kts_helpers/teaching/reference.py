"""The measured numbers the lesson puts next to its models: the committed H200 references, read by the kit.

Why a module: the lesson must never type a measured number into its text. Every number here is computed
from ``data/reference/<run>`` by the report's own comparison of sharing modes (``analyse.compare.modes_table``:
co-running iterations, the alone baseline, DF with its stationary-bootstrap interval), for both clocks.
A reference with a ``mps-limited`` scenario is shown when one exists; until then the lesson says so.
The MPS section reads only the references that measured MPS in some form (``mode_references``): a run of
time-slicing alone says nothing about MPS, and loading every reference cost the lesson most of its run time.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from kts_helpers.analyse.compare import modes_table, plugin_mps_caps
from kts_helpers.analyse.estimate import Estimate
from kts_helpers.analyse.load import load_run, read_manifest
from kts_helpers.analyse.probe import MULTI_PREFIX, PROBE_PROFILE
from kts_helpers.errors import RunError
from kts_helpers.plan.engine import MPS_WEIGHTS_TUNED_ON, VALIDATION_ROOT, committed_probes
from kts_helpers.present.tables import fmt_ci
from kts_helpers.teaching import memo
from kts_helpers.teaching.mps import weight_for_share

REFERENCE_ROOT = Path("data") / "reference"
MODES = ("timeslice", "mps", "mps-limited")
MODE_COLUMNS = ["reference", "tenant", "phase", "mode", "clock", "thread_pct", "n", "p50_alone_ms", "p50_ms", "p99_ms",
                "p99_lo", "p99_hi", "df", "df_lo", "df_hi", "reading"]


def references_folder(root: str | os.PathLike) -> Path:
    """``root`` as a folder, or a one-line error: a mistyped path must not read as "no references"."""
    base = Path(root)
    if not base.is_dir():
        raise RunError(f"references folder {root} does not exist (give it from here or from the repository root)")
    return base


def reference_dirs(root: str | os.PathLike = REFERENCE_ROOT, *, probes: bool = False) -> list[Path]:
    """Committed reference runs under ``root`` (sorted): experiments, or with ``probes=True`` time-slice probes.

    A ``root`` that is not a folder is an error, not "no references": a mistyped path (or one read from the
    wrong folder) would otherwise drop the measured numbers from the lesson without a word.
    """
    base = references_folder(root)
    out = []
    for d in sorted(p for p in base.iterdir() if (p / "manifest.json").is_file()):
        m = read_manifest(d)
        is_probe = m.profile == PROBE_PROFILE
        # a multi-context probe (kts probe --multi) measures no quantum or switch: neither kind the lesson reads
        multi = is_probe and any(s.name.startswith(MULTI_PREFIX) for s in m.scenarios)
        if is_probe == probes and not multi:
            out.append(d)
    return out


def mode_references(root: str | os.PathLike = REFERENCE_ROOT) -> list[Path]:
    """The committed references with a shared scenario under local MPS (``mps`` or ``mps-limited``), sorted,
    read from their manifests alone: what the MPS section compares with time-slicing and with the model. A run
    under the Kubernetes device plugin's MPS (``compare.plugin_mps_caps``: every client capped) is another
    condition, and is left out of the lesson's local-MPS table and calibration."""
    out = []
    for d in reference_dirs(root):
        m = read_manifest(d)
        if any(s.sharing != "timeslice" for s in m.scenarios if s.kind == "shared") and not plugin_mps_caps(m):
            out.append(d)
    return out


def matching_probe(run_dir: str | os.PathLike, root: str | os.PathLike = REFERENCE_ROOT) -> Path | None:
    """The newest committed probe of the run's GPU model (same device name), or None: its quantum and switch
    cost are the best the lesson knows for a run that cannot be fitted itself. The planner's search
    (``plan.engine.committed_probes``): under ``root`` and the validation folder beside it, where a card no
    reference used keeps its probe (the H100's)."""
    manifest = read_manifest(run_dir)
    name = manifest.device_name
    if not name or manifest.profile == PROBE_PROFILE:  # a probe run is its own probe
        return None
    base = references_folder(root)
    roots = tuple(r for r in (base, base.parent / VALIDATION_ROOT.name) if r.is_dir())
    pair, _multi = committed_probes(name, roots)
    return Path(pair) if pair else None


def sharing_modes(run_dirs: list[str | os.PathLike] | list[Path], *, n_resamples: int = 1000) -> pd.DataFrame:
    """Per reference, tenant, sharing mode and clock: p50 alone and shared, p99 and DF with intervals.

    Kept on disk by ``memo`` (keyed by the runs' bytes, the kit's source and ``n_resamples``): the same table,
    computed once."""
    dirs = [Path(d) for d in run_dirs]
    return memo.table("sharing-modes", dirs, lambda: _sharing_modes(dirs, n_resamples), n_resamples=n_resamples)


def _sharing_modes(run_dirs: list[Path], n_resamples: int) -> pd.DataFrame:
    rows = []
    for d in run_dirs:
        data = load_run(d)
        for clock in ("wall", "device"):
            table = modes_table(data, metric=clock, n_resamples=n_resamples)
            # one alone p50 per tenant and phase (an LLM has two: prefill and decode)
            alone = table[table["mode"] == "alone"].set_index(["tenant", "phase"])["p50_ms"]
            for r in table[table["mode"] != "alone"].itertuples():
                rows.append({"reference": Path(d).name, "tenant": r.tenant, "phase": r.phase, "mode": r.mode,
                             "clock": clock, "thread_pct": r.thread_pct, "n": r.n,
                             "p50_alone_ms": float(alone.get((r.tenant, r.phase), math.nan)),
                             "p50_ms": r.p50_ms, "p99_ms": r.p99_ms, "p99_lo": r.p99_lo, "p99_hi": r.p99_hi,
                             "df": r.df, "df_lo": r.df_lo, "df_hi": r.df_hi, "reading": r.reading})
    return pd.DataFrame(rows, columns=MODE_COLUMNS)


def display_table(modes: pd.DataFrame) -> pd.DataFrame:
    """One row per reference, tenant and mode; both clocks' p50 alone -> shared and DF [interval] as text."""
    def df_text(r: Any) -> str:
        return fmt_ci(Estimate(r.df, r.df_lo, r.df_hi), 2)

    out = []
    for (ref, tenant, mode), g in modes.groupby(["reference", "tenant", "mode"], sort=False):
        row = {"reference": ref, "tenant": tenant, "mode": mode}
        for r in g.itertuples():
            row[f"{r.clock} p50 alone → shared (ms)"] = f"{r.p50_alone_ms:.3f} → {r.p50_ms:.3f}"
            row[f"{r.clock} DF [95% CI]"] = df_text(r)
        out.append(row)
    return pd.DataFrame(out)


def mps_limited_note(modes: pd.DataFrame) -> str:
    """Whether any reference measured MPS with a thread limit; the lesson says it when none did."""
    limited = modes[modes["mode"] == "mps-limited"]
    if limited.empty:
        return ("MPS with a thread limit (`mps-limited`): not measured yet; no committed reference has such a "
                "scenario, so the model's prediction below stands alone")
    refs = ", ".join(sorted(set(limited["reference"])))
    return f"MPS with a thread limit (`mps-limited`) measured in: {refs}"


@dataclass(frozen=True)
class MpsCalibration:
    """The victim's measured share of the GPU next to an always-busy neighbour under MPS, and its weight."""

    reference: str
    victim: str
    neighbour: str
    victim_kernel_ms: float
    victim_mps_ms: float
    victim_sleep_ms: float
    neighbour_kernel_ms: float
    neighbour_sleep_ms: float
    share: float
    weight: float
    victim_overhead_ms: float = 0.0  # the host's launch/sync cost alone: wall p50 - device p50
    neighbour_overhead_ms: float = 0.0

    def text(self) -> str:
        return (f"In `{self.reference}` the {self.victim}'s kernels took {self.victim_kernel_ms:.3f} ms alone and "
                f"{self.victim_mps_ms:.3f} ms under MPS next to the {self.neighbour} (device p50, the events): a "
                f"share of {100 * self.share:.1f} % of the GPU, i.e. a weight of {self.weight:.3f} against the "
                f"{self.neighbour}'s 1")


def _overhead(wall_p50: Any, device_p50: Any) -> float:
    """The host's own cost per operation alone (wall p50 - device p50); 0 when unknown."""
    d = float(wall_p50) - float(device_p50) if wall_p50 is not None else math.nan
    return d if math.isfinite(d) and d > 0 else 0.0


def calibrate_mps(run_dirs: list[str | os.PathLike] | list[Path], modes: pd.DataFrame, victim: str = "fft",
                  neighbour: str = "gemm") -> MpsCalibration:
    """From a reference measured under MPS: the victim's share = device p50 alone / under MPS.

    Meaningful when the neighbour never sleeps (then the victim always competes; the manifest says), so the
    run the planner's MPS weights were tuned on comes first (``plan.engine.MPS_WEIGHTS_TUNED_ON``: lesson and
    planner then read one run), then any run whose neighbour never sleeps, then the others, each in name order.
    """
    dev = modes[(modes["clock"] == "device") & (modes["mode"] == "mps")]
    wall = modes[(modes["clock"] == "wall") & (modes["mode"] == "mps")]

    def order(d: str | os.PathLike) -> tuple[int, str]:
        name = Path(d).name
        if name == MPS_WEIGHTS_TUNED_ON:
            return 0, name
        shared = [s for s in read_manifest(d).scenarios if s.sharing == "mps"]
        busy = any(t.name == neighbour and float(t.sleep_ms) == 0 for s in shared for t in s.tenants)
        return (1 if busy else 2), name

    for d in sorted(run_dirs, key=order):
        name = Path(d).name
        mine = dev[dev["reference"] == name].set_index("tenant")
        if victim not in mine.index or neighbour not in mine.index:
            continue
        v, nb = mine.loc[victim], mine.loc[neighbour]
        walls = wall[wall["reference"] == name].set_index("tenant")["p50_alone_ms"]
        share = float(v["p50_alone_ms"] / v["p50_ms"])
        shared = next(s for s in read_manifest(d).scenarios if s.sharing == "mps")
        sleeps = {t.name: float(t.sleep_ms) for t in shared.tenants}
        return MpsCalibration(name, victim, neighbour, float(v["p50_alone_ms"]), float(v["p50_ms"]),
                              sleeps.get(victim, math.nan), float(nb["p50_alone_ms"]), sleeps.get(neighbour, math.nan),
                              share, weight_for_share(min(share, 0.999)),
                              _overhead(walls.get(victim), v["p50_alone_ms"]),
                              _overhead(walls.get(neighbour), nb["p50_alone_ms"]))
    raise RunError(f"no reference measured {victim} and {neighbour} under MPS; nothing to calibrate the model on")


def lesson_references(root: str | os.PathLike = REFERENCE_ROOT, *, n_resamples: int = 1000,
                      victim: str = "fft", neighbour: str = "gemm") -> tuple[pd.DataFrame, MpsCalibration | None, str]:
    """What the MPS section shows: the modes of every reference that compares sharing modes
    (``mode_references``), the model's calibration (or None) and a note."""
    dirs = mode_references(root)
    if not dirs:
        return (pd.DataFrame(columns=MODE_COLUMNS), None,
                f"no reference run under {root} measured MPS: nothing measured to show")
    modes = sharing_modes(dirs, n_resamples=n_resamples)
    try:
        return modes, calibrate_mps(dirs, modes, victim, neighbour), ""
    except RunError as exc:
        return modes, None, f"{exc}: the model below gives both tenants the same weight"


def side_by_side(modes: pd.DataFrame, reference: str, models: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Measured (one reference) vs modelled DF per sharing mode, tenant and clock.

    ``models``: per mode, a table with ``df`` (wall) and ``device_df`` per tenant (``model.degradation`` or
    ``mps.mps_degradation``).
    """
    rows = []
    mine = modes[modes["reference"] == reference]
    for mode, table in models.items():
        model = table.set_index("tenant")
        for r in mine[mine["mode"] == mode].itertuples():
            if r.tenant not in model.index:
                continue
            sim = float(model.loc[r.tenant, "df" if r.clock == "wall" else "device_df"])
            rows.append({"mode": mode, "tenant": r.tenant, "clock": r.clock, "measured DF [95% CI]": fmt_ci(Estimate(r.df, r.df_lo, r.df_hi), 2),
                         "model DF": round(sim, 2), "measured_df": r.df, "model_df": sim})
    return pd.DataFrame(rows)
