"""The device's used memory and compute processes, read at the end of a block's timed part, for the stranger check.

Why NVML: a container sees only its own processes, but NVML reports the whole device: its used memory
(``nvmlDeviceGetMemoryInfo``) and every process holding a context on it (``nvmlDeviceGetComputeRunningProcesses``,
host PIDs, visible across PID namespaces). Against the tenants' own allocations (``torch.cuda.memory_reserved``)
the kit then sees a context on the GPU that is none of the scenario's tenants: another pod, a process on the host
(``kts_helpers/run/gpumem.py`` decides, per block). nvidia-ml-py is optional: without it (or without a driver's
libnvidia-ml) the reading says ``"status": "unknown"`` and why, and the kit records the check as unknown.

Standard library and an optional ``pynvml`` only; torch is handed in.
"""

from __future__ import annotations


def gpu_memory(torch, device, gpu_uuid: str | None = None) -> dict:
    """One reading: ``device_used_bytes``, ``own_reserved_bytes``, ``processes`` (``[{"pid", "used_bytes"}]``, a
    process's bytes None where NVML cannot tell them, as under MPS), ``source`` "nvml"; or ``status`` "unknown"."""
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
    return {"source": "nvml", "gpu_uuid": gpu_uuid, "device_used_bytes": int(mem.used),
            "device_total_bytes": int(mem.total), "own_reserved_bytes": own, "processes": procs}
