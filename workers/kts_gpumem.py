"""The device's used memory and this process's own, read at the end of a block's timed part, for the stranger check.

Why NVML: the device's used memory (``nvmlDeviceGetMemoryInfo``) is the whole GPU's, whoever holds it, so it is the
same seen from any PID namespace; NVML's process list (``nvmlDeviceGetComputeRunningProcesses``) is not: inside a
container it lists the processes of the caller's PID namespace only (docs/guide/kubernetes.md: measured on the H200),
so it gives this process's own footprint (context included: ``pid == os.getpid()``) and, on a host or with
``hostPID``, the others' host PIDs. The kit compares the device's used memory with the tenants' own footprints
(``kts_helpers/run/gpumem.py``, per block): memory no tenant holds is a stranger context. nvidia-ml-py is optional:
without it (or without a driver's libnvidia-ml) the reading says ``"status": "unknown"`` and why.

Standard library and an optional ``pynvml`` only; torch is handed in.
"""

from __future__ import annotations

import os


def gpu_memory(torch, device, gpu_uuid: str | None = None) -> dict:
    """One reading: ``device_used_bytes``, ``own_reserved_bytes`` (torch's caching allocator), ``own_process_bytes``
    (NVML's for this process, context included; None where NVML cannot tell, as under MPS), ``processes`` (those
    NVML shows this process: ``[{"pid", "used_bytes"}]``), ``source`` "nvml"; or ``status`` "unknown" and why."""
    if getattr(device, "type", "cpu") != "cuda":
        return {"status": "unknown", "reason": "not on CUDA"}
    own = int(torch.cuda.memory_reserved(device))
    try:
        import pynvml  # nvidia-ml-py
    except ImportError:
        return {"status": "unknown", "reason": "nvidia-ml-py is not installed", "own_reserved_bytes": own}
    try:
        pynvml.nvmlInit()
        try:
            if gpu_uuid:
                handle = pynvml.nvmlDeviceGetHandleByUUID(gpu_uuid)
            else:
                handle = pynvml.nvmlDeviceGetHandleByIndex(0)
            mem = pynvml.nvmlDeviceGetMemoryInfo(handle)
            procs = []
            for p in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                used = getattr(p, "usedGpuMemory", None)
                procs.append({"pid": int(p.pid), "used_bytes": int(used) if isinstance(used, int) else None})
        finally:
            pynvml.nvmlShutdown()
    except Exception as exc:  # noqa: BLE001 - NVML missing or refusing: the check is unknown, never the run's end
        return {"status": "unknown", "reason": f"NVML: {str(exc)[:200] or type(exc).__name__}",
                "own_reserved_bytes": own}
    me = os.getpid()
    mine = next((p["used_bytes"] for p in procs if p["pid"] == me), None)
    return {"source": "nvml", "gpu_uuid": gpu_uuid, "device_used_bytes": int(mem.used),
            "device_total_bytes": int(mem.total), "own_reserved_bytes": own, "own_pid": me,
            "own_process_bytes": mine, "processes": procs}
