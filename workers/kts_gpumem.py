"""The device's used memory and this process's own, read at the end of a block's timed part, for the stranger check.

Why NVML: the device's used memory (``nvmlDeviceGetMemoryInfo``) is the whole GPU's, whoever holds it, so it is the
same seen from any PID namespace; NVML's process list (``nvmlDeviceGetComputeRunningProcesses``) is not: inside a
container it lists the processes of the caller's PID namespace only (docs/guide/kubernetes.md: measured on the H200),
so it gives this process's own footprint (context included: ``pid == os.getpid()``) and, on a host or with
``hostPID``, the others' host PIDs (named where NVML can name them: ``nvmlSystemGetProcessName``, on a host). The kit
compares the device's used memory with the tenants' own footprints (``kts_helpers/run/gpumem.py``, per block): memory
no tenant holds is a stranger context.

Why version 2: version 1's ``used`` is "Sum of Reserved and Allocated device memory" (NVML API reference,
``nvmlMemory_t``): the memory the driver and firmware reserve for themselves counts as used, about 635 MiB on the
H200 and 500 MiB on an H100, more than the check's threshold: every block of a real run would blame a stranger who is
not there (issue 50). ``nvmlDeviceGetMemoryInfo(handle, version=nvmlMemory_v2)`` (``nvmlDeviceGetMemoryInfo_v2``,
nvidia-ml-py 11.515 and later, drivers R510 and later) returns ``reserved`` apart. The reference has described v2's
``used`` both as including ``reserved`` (R525) and as the allocated memory alone (R590); ``free`` is the unallocated
memory in both, so the allocated memory is read as ``total - reserved - free``, right under either reading. Where v2
is not served the reading says ``memory_info`` 1 with ``device_reserved_bytes`` None, and the kit records the check as
unknown rather than guess the reserve. nvidia-ml-py is optional: without it (or without a driver's libnvidia-ml) the
reading says ``"status": "unknown"`` and why.

Standard library and an optional ``pynvml`` only; torch is handed in.
"""

from __future__ import annotations

import os


def _memory_info(nvml, handle) -> tuple[int, int, int | None, int]:
    """(total, allocated, reserved or None, version read): v2 where the library and driver serve it, else v1."""
    version = getattr(nvml, "nvmlMemory_v2", None)
    if version is not None:
        try:
            mem = nvml.nvmlDeviceGetMemoryInfo(handle, version=version)
        except Exception:  # noqa: BLE001 - NVML_ERROR_FUNCTION_NOT_FOUND / NOT_SUPPORTED on an old driver: v1 below
            pass
        else:
            total, reserved, free = int(mem.total), int(mem.reserved), int(mem.free)
            return total, max(0, total - reserved - free), reserved, 2
    mem = nvml.nvmlDeviceGetMemoryInfo(handle)
    return int(mem.total), int(mem.used), None, 1


def _name(nvml, pid: int) -> str | None:
    try:
        name = nvml.nvmlSystemGetProcessName(pid)
    except Exception:  # noqa: BLE001 - another PID namespace's process, or a pynvml without it: unnamed
        return None
    name = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
    return os.path.basename(name.strip()) or None


def gpu_memory(torch, device, gpu_uuid: str | None = None, *, nvml=None, own_pid: int | None = None) -> dict:
    """One reading: ``device_used_bytes`` (the device's allocated memory, the driver's reserve not included),
    ``device_reserved_bytes`` (NVML v2's ``reserved``; None from v1), ``memory_info`` (1 or 2), ``own_reserved_bytes``
    (torch's caching allocator), ``own_process_bytes`` (NVML's for this process, context included; None where NVML
    cannot tell, as under MPS), ``processes`` (those NVML shows this process: ``[{"pid", "used_bytes"[, "name"]}]``),
    ``source`` "nvml"; or ``status`` "unknown" and why. ``nvml``/``own_pid``: tests hand in a model of the driver."""
    if getattr(device, "type", "cpu") != "cuda":
        return {"status": "unknown", "reason": "not on CUDA"}
    own = int(torch.cuda.memory_reserved(device))
    if nvml is None:
        try:
            import pynvml as nvml  # nvidia-ml-py
        except ImportError:
            return {"status": "unknown", "reason": "nvidia-ml-py is not installed", "own_reserved_bytes": own}
    try:
        nvml.nvmlInit()
        try:
            if gpu_uuid:
                handle = nvml.nvmlDeviceGetHandleByUUID(gpu_uuid)
            else:
                handle = nvml.nvmlDeviceGetHandleByIndex(0)
            total, used, reserved, version = _memory_info(nvml, handle)
            procs = []
            for p in nvml.nvmlDeviceGetComputeRunningProcesses(handle):
                b = getattr(p, "usedGpuMemory", None)
                entry = {"pid": int(p.pid), "used_bytes": int(b) if isinstance(b, int) else None}
                name = _name(nvml, int(p.pid))
                if name:
                    entry["name"] = name
                procs.append(entry)
        finally:
            nvml.nvmlShutdown()
    except Exception as exc:  # noqa: BLE001 - NVML missing or refusing: the check is unknown, never the run's end
        return {"status": "unknown", "reason": f"NVML: {str(exc)[:200] or type(exc).__name__}",
                "own_reserved_bytes": own}
    me = os.getpid() if own_pid is None else int(own_pid)
    mine = next((p["used_bytes"] for p in procs if p["pid"] == me), None)
    return {"source": "nvml", "gpu_uuid": gpu_uuid, "memory_info": version, "device_used_bytes": used,
            "device_reserved_bytes": reserved, "device_total_bytes": total, "own_reserved_bytes": own,
            "own_pid": me, "own_process_bytes": mine, "processes": procs}
