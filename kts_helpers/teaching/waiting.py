"""The three kinds of waiting a tenant meets on a cluster, for the lesson: admission, placement, in service.

Why: "the GPU is slow" can mean three different waits, each fixed by something else. A job may wait to be
*admitted* before its pod even exists (quota: Kueue; more nodes do not help, a larger quota does); an
admitted pod may wait to be *placed* (the scheduler finds no node with a free GPU replica, then the image
is pulled and the container starts); and a running tenant's request may wait *in service*, for another
context's time slice (neither quota nor nodes help: the neighbour does). The first two are paid once per
pod, in seconds, and the Kubernetes backend records them from the API's timestamps (``analyse.waits``);
the third is paid on every request, in milliseconds, and the workers' clocks measure it (wall - device).
Which one dominates depends on how many requests a pod serves: ``budget`` adds them up.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import pandas as pd

from kts_helpers.analyse.load import RunManifest, read_manifest
from kts_helpers.analyse.waits import layered_waits
from kts_helpers.errors import RunError

EXAMPLE_DIR = Path("data") / "examples" / "k8s-emulated-waits"
KINDS = ("admission", "placement", "in service")
EMULATED = "emulated"  # the word an example run made on the kmock emulator carries in its label


def is_emulated(manifest: RunManifest) -> bool:
    """Whether the run was made on an emulated cluster (no real API server, no GPU)."""
    return EMULATED in manifest.label.lower() or bool(manifest.environment.get(EMULATED))


def layers(run_dir: str | os.PathLike) -> tuple[pd.DataFrame, RunManifest]:
    """The run's layered waits per scenario and tenant, grouped into the three kinds (seconds).

    ``admission_s`` (job created -> admitted by Kueue; 0 without a queue), ``placement_s`` (pod created ->
    scheduled, plus scheduled -> container started: image pull and start-up), and the recorded parts.
    """
    manifest = read_manifest(run_dir)
    table = layered_waits(manifest)
    if table.empty:
        raise RunError(f"run {manifest.run_id} has no Kubernetes records: its scenarios did not run on a cluster, "
                       "so there are no admission or placement waits to show")
    out = table.copy()
    out["queued"] = out["admission_wait_s"].notna()
    out["admission_s"] = out["admission_wait_s"].fillna(0.0)
    out["placement_s"] = out["placement_wait_s"].fillna(0.0) + out["startup_s"].fillna(0.0)
    return out, manifest


def budget(row: pd.Series, in_service_ms_per_request: float, requests: int) -> pd.DataFrame:
    """Seconds of each kind of waiting over one pod's life of ``requests`` requests.

    ``row``: one row of :func:`layers`; ``in_service_ms_per_request``: the mean time-slice wait per request.
    """
    if not (isinstance(requests, int | float) and math.isfinite(requests) and requests >= 0):
        raise RunError(f"requests must be a number >= 0, got {requests!r}")
    if not (math.isfinite(in_service_ms_per_request) and in_service_ms_per_request >= 0):
        raise RunError(f"the in-service wait per request must be >= 0 ms, got {in_service_ms_per_request}")
    startup = float(row["startup_s"]) if pd.notna(row["startup_s"]) else 0.0
    parts = [("admission", float(row["admission_s"]), "job created -> admitted (Kueue)" if row["queued"]
              else "not recorded (no queue, or no API timestamp)"),
             ("placement", float(row["placement_s"]), f"scheduling {float(row['placement_wait_s']):g} s + image pull "
              f"and start-up {startup:g} s"),
             ("in service", requests * in_service_ms_per_request / 1000.0,
              f"{requests:g} requests x {in_service_ms_per_request:.3f} ms of time-slice wait")]
    out = pd.DataFrame(parts, columns=["kind", "seconds", "what"])
    total = out["seconds"].sum()
    out["share"] = out["seconds"] / total if total > 0 else 0.0
    return out


def dominant(table: pd.DataFrame) -> str:
    """The kind with the most seconds in a :func:`budget` table."""
    return str(table.loc[table["seconds"].idxmax(), "kind"])


def example_row(table: pd.DataFrame, tenant: str) -> pd.Series:
    """The tenant's row with the most layers recorded (a shared pod that is stopped has no run time)."""
    mine = table[table["tenant"] == tenant]
    if mine.empty:
        raise RunError(f"no layered waits for tenant {tenant!r}; tenants: {sorted(set(table['tenant']))}")
    recorded = mine[["admission_wait_s", "placement_wait_s", "startup_s", "timed_loop_s"]].notna().sum(axis=1)
    return mine.loc[recorded.idxmax()]


def in_service_wait_ms(kernels: pd.DataFrame, tenant: str) -> float:
    """Mean time-slice waiting per request of a simulated tenant: issue to completion less its own work
    (the wait before its first instruction plus any neighbour's slice inside it; no host overhead)."""
    g = kernels[kernels["tenant"] == tenant]
    if g.empty:
        raise RunError(f"no kernel of tenant {tenant!r} in the simulation")
    return float((g["end_ms"] - g["arrival_ms"] - g["work_ms"]).mean())


def break_even_requests(row: pd.Series, in_service_ms_per_request: float) -> float:
    """How many requests before the in-service waiting outweighs the one-off admission and placement."""
    once = float(row["admission_s"]) + float(row["placement_s"])
    return math.inf if in_service_ms_per_request <= 0 else once * 1000.0 / in_service_ms_per_request
