"""NVML's memory API as a real driver answers it, for the worker's reading (``workers/kts_gpumem.py``) in tests.

What it models, from NVIDIA's NVML API reference and nvidia-ml-py (``pynvml.py``):

* ``nvmlDeviceGetMemoryInfo(handle)`` (v1, ``nvmlMemory_t``): ``total``, ``free``, ``used``; v1's ``used`` is "Sum of
  Reserved and Allocated device memory" (NVML reference, ``nvmlMemory_t``): the memory the driver and firmware set
  aside for themselves counts as used, whoever else is on the GPU. The H200 of the kit's committed runs reserves
  about 635 MiB, an H100 about 500 MiB (issue 50).
* ``nvmlDeviceGetMemoryInfo(handle, version=nvmlMemory_v2)`` (``nvmlDeviceGetMemoryInfo_v2``, ``nvmlMemory_v2_t``):
  ``version``, ``total``, ``reserved``, ``free``, ``used``. The reference has said both that v2's ``used`` includes
  ``reserved`` (R525: "The nvmlMemory_v2_t::used amount also includes the nvmlMemory_v2_t::reserved amount") and that
  it is the allocated memory alone (R590: "Allocated device memory"); ``free`` is the unallocated memory in both, so
  ``v2_used_includes_reserved`` picks the reading and the kit must be right under either.
* ``nvmlDeviceGetComputeRunningProcesses``: inside a container only the caller's PID namespace (``own_only``), with
  the PIDs as that namespace numbers them; on a host every process with its host PID.
* ``nvmlSystemGetProcessName``: a host process's name (a container cannot name another namespace's process).
* A pynvml too old for v2 has no ``nvmlMemory_v2`` (``v2=False``).

Numbers from the kit's committed H200 runs (their telemetry, NVML v1 ``used`` and the process list): with no
process on the GPU ``used`` reads 615.1-618.4 MiB (the reserve: ``H200_RESERVED``); under MPS the server
(``nvidia-cuda-mps-server``, the PID its control log names: "NEW SERVER 3424") holds 66 MiB beside its clients
(h200-2026-11-30-hold-gemm6k-fft, ``shared-mps``: ``MPS_SERVER_FOOTPRINT``).

Contexts are the device's memory holders: a tenant's process (its context and its caching allocator), an idle warm
neighbour, the MPS server (``nvidia-cuda-mps-server``), a stranger.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

MIB = 1 << 20
GIB = 1 << 30
H200_RESERVED = 615 * MIB  # NVML v1's used memory of the committed H200 runs with no process on the GPU
MPS_SERVER = "nvidia-cuda-mps-server"
MPS_SERVER_FOOTPRINT = 66 * MIB  # the MPS server's process on the H200 (hold-gemm6k-fft, shared-mps telemetry)


class NVMLError(Exception):
    """pynvml's error class (its subclasses carry the NVML return code)."""


@dataclass
class FakeGpu:
    """One device: what the driver reserved and who holds the rest (host PID -> bytes, name)."""

    uuid: str = "GPU-fake-0"
    total: int = 80 * GIB
    reserved: int = H200_RESERVED
    contexts: dict[int, tuple[int, str]] = field(default_factory=dict)
    v2_used_includes_reserved: bool = False

    def hold(self, pid: int, used: int, name: str = "python3") -> None:
        self.contexts[int(pid)] = (int(used), name)

    def release(self, pid: int) -> None:
        self.contexts.pop(int(pid), None)

    @property
    def allocated(self) -> int:
        return sum(b for b, _ in self.contexts.values())


class FakeNvml:
    """A ``pynvml`` module as one process sees the GPU: ``own_pid`` is its host PID; inside a container
    (``own_only``) NVML lists that process alone, numbered ``ns_pid`` (``os.getpid()`` there); ``v2=False`` is a
    nvidia-ml-py that predates ``nvmlMemory_v2``. ``torch`` is a stand-in with the process's own reservation."""

    NVMLError = NVMLError

    def __init__(self, gpu: FakeGpu, own_pid: int, *, own_only: bool = False, ns_pid: int | None = None,
                 v2: bool = True, torch_reserved: int = 0) -> None:
        self.gpu, self.own_pid, self.own_only, self.v2 = gpu, int(own_pid), own_only, v2
        self.ns_pid = os.getpid() if ns_pid is None else int(ns_pid)
        if v2:
            self.nvmlMemory_v2 = 0x02000028  # pynvml: sizeof(c_nvmlMemory_v2_t) | 2 << 24
        self.torch = SimpleNamespace(cuda=SimpleNamespace(memory_reserved=lambda device: int(torch_reserved)))
        self.device = SimpleNamespace(type="cuda")

    # -- pynvml's functions the worker calls
    def nvmlInit(self) -> None:
        pass

    def nvmlShutdown(self) -> None:
        pass

    def nvmlDeviceGetHandleByUUID(self, uuid: Any) -> FakeGpu:
        text = uuid.decode() if isinstance(uuid, bytes) else str(uuid)
        if text != self.gpu.uuid:
            raise NVMLError("Not Found")
        return self.gpu

    def nvmlDeviceGetHandleByIndex(self, index: int) -> FakeGpu:
        return self.gpu

    def nvmlDeviceGetMemoryInfo(self, handle: FakeGpu, version: int | None = None) -> SimpleNamespace:
        g = handle
        free = g.total - g.reserved - g.allocated
        if not version:
            return SimpleNamespace(total=g.total, free=free, used=g.reserved + g.allocated)
        if not self.v2 or version != 0x02000028:
            raise NVMLError("Function Not Found")
        used = g.allocated + (g.reserved if g.v2_used_includes_reserved else 0)
        return SimpleNamespace(version=version, total=g.total, reserved=g.reserved, free=free, used=used)

    def nvmlDeviceGetComputeRunningProcesses(self, handle: FakeGpu) -> list[SimpleNamespace]:
        if self.own_only:
            mine = handle.contexts.get(self.own_pid)
            return [SimpleNamespace(pid=self.ns_pid, usedGpuMemory=mine[0])] if mine else []
        return [SimpleNamespace(pid=pid, usedGpuMemory=b) for pid, (b, _) in sorted(handle.contexts.items())]

    def nvmlSystemGetProcessName(self, pid: int) -> str:
        if self.own_only:
            raise NVMLError("Not Found")  # another PID namespace's process cannot be named from a container
        return self.gpu.contexts[int(pid)][1]


def reading(gpu: FakeGpu, own_pid: int, *, own_only: bool = False, v2: bool = True, torch_reserved: int = 0,
            ns_pid: int | None = None) -> dict:
    """What ``workers/kts_gpumem.py`` records for the process ``own_pid`` (its real code, this NVML)."""
    import kts_gpumem

    nvml = FakeNvml(gpu, own_pid, own_only=own_only, v2=v2, torch_reserved=torch_reserved, ns_pid=ns_pid)
    return kts_gpumem.gpu_memory(nvml.torch, nvml.device, gpu.uuid, nvml=nvml,
                                 own_pid=nvml.ns_pid if own_only else own_pid)
