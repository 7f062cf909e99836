"""A stranger context on the measured GPU, seen from the device's used memory, per block (scenario).

Each tenant's worker ends a block's timed part with a reading (``workers/kts_gpumem.py``, in its ``KTS_END``): NVML's
used memory of the whole device, which is the same from any PID namespace, and its own footprint (NVML's memory of
its own process, context included; else torch's reservation plus ``CONTEXT_ALLOWANCE_BYTES``). The tenants of one
block run together when they read, so the device's used memory beyond the sum of their footprints (and the MPS
server's, under MPS) is memory none of them holds: a stranger context (another pod, a process on the host). More
than ``UNEXPLAINED_BYTES`` of it, in every tenant's reading, fails the block, naming the GPU, the memory, and the
host PIDs of the processes that are no tenant's where NVML shows them (a host, ``hostPID``; inside a container NVML
lists the caller's PID namespace only).

Without a reading (no nvidia-ml-py, no driver library, CPU) the check is recorded as "unknown", with why.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MIB = 1 << 20
CONTEXT_ALLOWANCE_BYTES = 1024 * MIB  # a CUDA context, cuBLAS/cuFFT workspaces, where NVML gives no process memory
MPS_SERVER_BYTES = 512 * MIB  # the MPS server's own context on the device
UNEXPLAINED_BYTES = 512 * MIB  # less than any CUDA context with a workload; more than the readings' jitter


def check_block(readings: Mapping[str, Mapping[str, Any] | None], *, mps: bool = False) -> dict[str, Any]:
    """The stranger check of one block from its tenants' readings (tenant -> ``gpu_memory`` of its KTS_END).

    Returns ``{"status": "ok" | "stranger" | "unknown", ...}``; a stranger comes with ``unexplained_mib``, the
    ``strangers`` NVML names (host PID and memory, where visible) and ``text``, a sentence naming it."""
    tenants = sorted(readings)
    missing = {t: (r or {}).get("reason", "no reading in its KTS_END") for t, r in readings.items()
               if not r or r.get("source") != "nvml"}
    if missing:
        return {"status": "unknown", "reason": "; ".join(f"{t}: {why}" for t, why in sorted(missing.items())),
                "tenants": tenants}
    rs = {t: dict(r or {}) for t, r in readings.items()}
    gpu = next((r.get("gpu_uuid") for r in rs.values() if r.get("gpu_uuid")), None)

    def footprint(r: Mapping[str, Any]) -> int:
        mine = r.get("own_process_bytes")
        return int(mine) if mine is not None else int(r.get("own_reserved_bytes") or 0) + CONTEXT_ALLOWANCE_BYTES

    own = {t: footprint(r) for t, r in rs.items()}
    theirs = sum(own.values()) + (MPS_SERVER_BYTES if mps else 0)
    # every reading must show the excess: a neighbour that grew between two readings is not a stranger
    unexplained = min(int(r.get("device_used_bytes") or 0) for r in rs.values()) - theirs
    tenant_pids = {int(r["own_pid"]) for r in rs.values() if r.get("own_pid") is not None}
    others: dict[int, int | None] = {}
    for r in rs.values():
        for p in r.get("processes") or []:
            if int(p["pid"]) not in tenant_pids:
                others[int(p["pid"])] = p.get("used_bytes")
    out: dict[str, Any] = {
        "status": "ok", "gpu_uuid": gpu, "source": "nvml (device used memory vs the tenants' own)",
        "device_used_mib": round(max(int(r.get("device_used_bytes") or 0) for r in rs.values()) / MIB, 1),
        "tenants_mib": {t: round(b / MIB, 1) for t, b in own.items()},
        "unexplained_mib": round(max(0, unexplained) / MIB, 1), "threshold_mib": round(UNEXPLAINED_BYTES / MIB, 1)}
    if unexplained > UNEXPLAINED_BYTES:
        named = [{"pid": pid, "used_mib": round(b / MIB, 1) if b is not None else None}
                 for pid, b in sorted(others.items(), key=lambda kv: -(kv[1] or 0))]
        who = (", ".join(f"pid {s['pid']} ({s['used_mib']} MiB)" for s in named) + " (host PIDs)" if named else
               "its process is not visible from the tenants' PID namespaces")
        out.update(status="stranger", strangers=named, text=(
            f"a stranger context on GPU {gpu or '?'}: {unexplained / MIB:.0f} MiB of the device's used memory is held "
            f"by none of the block's {len(tenants)} tenant(s) ({', '.join(tenants)}"
            f"{' and the MPS server' if mps else ''}); {who}: another process shared the GPU during the measurement"))
    return out
