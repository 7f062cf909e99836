"""A stranger context on the measured GPU, seen from the device's used memory, per block (scenario).

Each tenant's worker ends a block's timed part with a reading (``workers/kts_gpumem.py``, in its ``KTS_END``): NVML's
allocated memory of the whole device (version 2 of its memory info: the driver's own reserve apart), which is the same
from any PID namespace, and its own footprint (NVML's memory of its own process, context included; else torch's
reservation plus ``CONTEXT_ALLOWANCE_BYTES``). The tenants of one block run together when they read, so the device's
allocated memory beyond the sum of their footprints, the experiment's other processes on the GPU (``companions``: the
warm design's idle neighbours, by host PID, on a host where NVML lists them) and the MPS server's (its own process
where NVML names it, else ``MPS_SERVER_BYTES``) is memory none of them holds: a stranger context (another pod, a
process on the host). More than ``UNEXPLAINED_BYTES`` of it, in every tenant's reading, fails the block, naming the
GPU, the memory, and the processes that are nobody's of the experiment where NVML shows them (a host, ``hostPID``;
inside a container NVML lists the caller's PID namespace only).

The driver's reserve is never a stranger: version 1 of NVML's memory info counts it as used (635 MiB on the H200 of
the committed runs, about 500 MiB on an H100, above the threshold), so a version-1 reading (an old driver or
nvidia-ml-py) leaves the check "unknown", with why. Without a reading (no nvidia-ml-py, no driver library, CPU) the
check is "unknown" too.

Used by every backend: the local and warm designs after each block (``backends.procs.gpu_memory_check``), Kubernetes
after each scenario.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MIB = 1 << 20
CONTEXT_ALLOWANCE_BYTES = 1024 * MIB  # a CUDA context, cuBLAS/cuFFT workspaces, where NVML gives no process memory
# the MPS server's own process where NVML does not show it (a container): 66 MiB on the H200 (its process in the
# telemetry of h200-2026-11-30-hold-gemm6k-fft, shared-mps, named by its control log), about twice that allowed
MPS_SERVER_BYTES = 128 * MIB
UNEXPLAINED_BYTES = 512 * MIB  # less than any CUDA context with a workload; more than the readings' jitter
MPS_SERVER_NAME = "nvidia-cuda-mps-server"
V1_REASON = ("NVML served only version 1 of its memory info, whose used memory includes the driver's own reserve "
             "(about 500-650 MiB on an H100/H200): the check needs version 2 (nvmlDeviceGetMemoryInfo_v2: "
             "nvidia-ml-py 11.515 or later, an R510 or later driver)")


def _missing(r: Mapping[str, Any] | None) -> str:
    if not r or r.get("source") != "nvml":
        return str((r or {}).get("reason") or "no reading in its KTS_END")
    if int(r.get("memory_info") or 1) < 2 or r.get("device_reserved_bytes") is None:
        return V1_REASON
    return ""


def check_block(readings: Mapping[str, Mapping[str, Any] | None], *, mps: bool = False,
                companions: Mapping[str, int] | None = None) -> dict[str, Any]:
    """The stranger check of one block from its tenants' readings (tenant -> ``gpu_memory`` of its KTS_END).

    ``mps``: an MPS server serves the block's processes (any block on an MPS node or in an MPS session, alone ones
    included). ``companions``: the experiment's other processes on the GPU (name -> host PID), counted from the
    readings' process lists. Returns ``{"status": "ok" | "stranger" | "unknown", ...}``; a stranger comes with
    ``unexplained_mib``, the ``strangers`` NVML names (PID, memory, name, where visible) and ``text``, a sentence."""
    tenants = sorted(readings)
    missing = {t: why for t, r in readings.items() if (why := _missing(r))}
    if missing:
        return {"status": "unknown", "reason": "; ".join(f"{t}: {why}" for t, why in sorted(missing.items())),
                "tenants": tenants}
    rs = {t: dict(r or {}) for t, r in readings.items()}
    gpu = next((r.get("gpu_uuid") for r in rs.values() if r.get("gpu_uuid")), None)

    def footprint(r: Mapping[str, Any]) -> int:
        mine = r.get("own_process_bytes")
        return int(mine) if mine is not None else int(r.get("own_reserved_bytes") or 0) + CONTEXT_ALLOWANCE_BYTES

    own = {t: footprint(r) for t, r in rs.items()}
    seen: dict[int, tuple[int | None, str | None]] = {}  # every process some reading lists: pid -> (bytes, name)
    for r in rs.values():
        for p in r.get("processes") or []:
            b, name = p.get("used_bytes"), p.get("name")
            old = seen.get(int(p["pid"]), (None, None))
            seen[int(p["pid"])] = (max(b, old[0] or 0) if b is not None else old[0], name or old[1])
    tenant_pids = {int(r["own_pid"]) for r in rs.values() if r.get("own_pid") is not None}
    comp = {n: int(pid) for n, pid in (companions or {}).items() if int(pid) not in tenant_pids}
    theirs = {n: int(seen[pid][0] or 0) for n, pid in comp.items() if pid in seen}
    server = {pid: b for pid, (b, name) in seen.items() if name == MPS_SERVER_NAME and pid not in tenant_pids}
    if mps:
        theirs["MPS server"] = sum(int(b or 0) for b in server.values()) if server else MPS_SERVER_BYTES
    known = sum(own.values()) + sum(theirs.values())
    # every reading must show the excess: a neighbour that grew between two readings is not a stranger
    unexplained = min(int(r.get("device_used_bytes") or 0) for r in rs.values()) - known
    ours = tenant_pids | set(comp.values()) | (set(server) if mps else set())
    others = {pid: v for pid, v in seen.items() if pid not in ours}
    out: dict[str, Any] = {
        "status": "ok", "gpu_uuid": gpu, "source": "nvml v2 (device allocated memory vs the tenants' own)",
        "device_used_mib": round(max(int(r.get("device_used_bytes") or 0) for r in rs.values()) / MIB, 1),
        "device_reserved_mib": round(max(int(r.get("device_reserved_bytes") or 0) for r in rs.values()) / MIB, 1),
        "tenants_mib": {t: round(b / MIB, 1) for t, b in own.items()},
        "unexplained_mib": round(max(0, unexplained) / MIB, 1), "threshold_mib": round(UNEXPLAINED_BYTES / MIB, 1)}
    if theirs:
        out["companions_mib"] = {n: round(b / MIB, 1) for n, b in sorted(theirs.items())}
    if unexplained > UNEXPLAINED_BYTES:
        named = [{"pid": pid, "used_mib": round(b / MIB, 1) if b is not None else None, **({"name": n} if n else {})}
                 for pid, (b, n) in sorted(others.items(), key=lambda kv: -(kv[1][0] or 0))]
        who = (", ".join(f"pid {s['pid']}{' ' + s['name'] if s.get('name') else ''} ({s['used_mib']} MiB)"
                         for s in named) + " (host PIDs)" if named else
               "its process is not visible from the tenants' PID namespaces")
        also = ([f"{len(comp)} idle neighbour(s)"] if comp else []) + (["the MPS server"] if mps else [])
        out.update(status="stranger", strangers=named, text=(
            f"a stranger context on GPU {gpu or '?'}: {unexplained / MIB:.0f} MiB of the device's allocated memory "
            f"(the driver's reserve apart) is held by none of the block's {len(tenants)} tenant(s) "
            f"({', '.join(tenants)}{''.join(f' and {a}' for a in also)}); {who}: another process shared the GPU "
            "during the measurement"))
    return out
