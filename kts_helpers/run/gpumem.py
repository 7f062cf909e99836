"""A stranger context on the measured GPU, seen from the device's used memory, per block (scenario).

Each tenant's worker ends a block's timed part with a reading of the whole device (``workers/kts_gpumem.py``, in its
``KTS_END``): NVML's used memory and compute processes, which a container sees across PID namespaces, and the
tenant's own reserved memory. The tenants of one block read the same device at about the same moment, so:

* more compute processes than the block has tenants (plus the MPS server under MPS) is a context that is none
  of them: named by its host PID and memory, the processes that best match the tenants' own memory left aside;
* where NVML cannot list the processes' memory, device memory beyond the tenants' own reservations and a
  context allowance each (``CONTEXT_ALLOWANCE_BYTES``) by more than ``UNEXPLAINED_BYTES`` is flagged, unnamed.

Without a reading (no nvidia-ml-py, no driver library, CPU) the check is recorded as "unknown", with why.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MIB = 1 << 20
CONTEXT_ALLOWANCE_BYTES = 1024 * MIB  # a CUDA context, cuBLAS/cuFFT workspaces, the caching allocator's slack
UNEXPLAINED_BYTES = 1024 * MIB


def check_block(readings: Mapping[str, Mapping[str, Any] | None], *, mps: bool = False) -> dict[str, Any]:
    """The stranger check of one block from its tenants' readings (tenant -> ``gpu_memory`` of its KTS_END).

    Returns ``{"status": "ok" | "stranger" | "unknown", ...}``; a stranger comes with ``strangers`` (each
    ``{"pid", "used_mib"}``, or an unnamed excess) and ``text``, a sentence naming it."""
    tenants = sorted(readings)
    missing = {t: (r or {}).get("reason", "no reading in its KTS_END") for t, r in readings.items()
               if not r or r.get("source") != "nvml"}
    if missing:
        return {"status": "unknown", "reason": "; ".join(f"{t}: {why}" for t, why in sorted(missing.items())),
                "tenants": tenants}
    rs = [dict(r) for r in readings.values() if r]
    gpu = next((r.get("gpu_uuid") for r in rs if r.get("gpu_uuid")), None)
    used = max(int(r.get("device_used_bytes") or 0) for r in rs)
    own = {t: int((readings[t] or {}).get("own_reserved_bytes") or 0) for t in tenants}
    procs: dict[int, int | None] = {}
    for r in rs:
        for p in r.get("processes") or []:
            b = p.get("used_bytes")
            procs[int(p["pid"])] = max(procs.get(int(p["pid"])) or 0, int(b)) if b is not None else procs.get(
                int(p["pid"]))
    expected = len(tenants) + (1 if mps else 0)
    out: dict[str, Any] = {"status": "ok", "gpu_uuid": gpu, "device_used_mib": round(used / MIB, 1),
                           "tenants_reserved_mib": {t: round(b / MIB, 1) for t, b in own.items()},
                           "processes": len(procs), "expected_processes": expected, "source": "nvml"}
    strangers: list[dict[str, Any]] = []
    if len(procs) > expected:
        # leave aside, for each tenant, the process whose memory best matches its own reservation (+ a context);
        # the MPS server (no memory of its own to match) is the smallest left, under MPS
        left = dict(procs)
        for t in sorted(own, key=lambda t: -own[t]):
            best = min(left, key=lambda pid: abs((left[pid] or 0) - own[t] - CONTEXT_ALLOWANCE_BYTES // 2))
            left.pop(best)
        if mps and left:
            left.pop(min(left, key=lambda pid: left[pid] or 0))
        strangers = [{"pid": pid, "used_mib": round(b / MIB, 1) if b is not None else None}
                     for pid, b in sorted(left.items(), key=lambda kv: -(kv[1] or 0))]
    unexplained = used - sum(own.values()) - expected * CONTEXT_ALLOWANCE_BYTES
    out["unexplained_mib"] = round(max(0, unexplained) / MIB, 1)
    if not strangers and unexplained > UNEXPLAINED_BYTES and any(v is None for v in procs.values()):
        strangers = [{"pid": None, "used_mib": round(unexplained / MIB, 1)}]
    if strangers:
        named = ", ".join(f"pid {s['pid']} ({s['used_mib']} MiB)" if s["pid"] is not None else
                          f"{s['used_mib']} MiB that no tenant reserved" for s in strangers)
        out.update(status="stranger", strangers=strangers, text=(
            f"a stranger context on GPU {gpu or '?'}: {named} (host PID, seen through NVML; {len(procs)} compute "
            f"processes where the block has {len(tenants)} tenant(s){' and the MPS server' if mps else ''}): "
            "another process shared the GPU during the measurement"))
    return out
