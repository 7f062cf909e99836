"""What this host is: device, driver, CUDA, torch, sharing state, git commit.

The torch probe runs in a child process so that the notebook kernel (or the CLI) never
holds a CUDA context of its own: an idle extra context would be one more tenant to
time-slice. NVML queries are read-only; nothing here changes a GPU setting.
"""

from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from kts_helpers import __version__
from kts_helpers.errors import DeviceError

REPO_ROOT = Path(__file__).resolve().parents[2]
WORKER = REPO_ROOT / "workers" / "kts_worker.py"  # what every backend runs (the image copies this file)

_PROBE = r"""
import json, sys
import torch
out = {"torch": torch.__version__, "torch_cuda": torch.version.cuda, "cuda_available": torch.cuda.is_available(),
       "device_count": torch.cuda.device_count() if torch.cuda.is_available() else 0}
if out["cuda_available"]:
    p = torch.cuda.get_device_properties(0)
    out.update(device_name=p.name, device_memory_gib=round(p.total_memory / 2**30, 1),
               compute_capability=f"{p.major}.{p.minor}", sm_count=p.multi_processor_count,
               gpu_uuid="GPU-" + str(p.uuid).removeprefix("GPU-") if getattr(p, "uuid", None) is not None else None)
print(json.dumps(out))
"""


def probe_torch(python: str = sys.executable, timeout_s: float = 120.0) -> dict[str, Any]:
    """Ask a child Python what torch sees (version, CUDA, device)."""
    try:
        res = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=timeout_s)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise DeviceError(f"could not probe torch with {python}: {exc}") from None
    if res.returncode != 0:
        tail = (res.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise DeviceError(f"torch is not importable by {python}: {tail}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def probe_nvml(gpu_uuid: str | None = None) -> dict[str, Any]:
    """Driver, compute mode and clocks via NVML (read-only) of the tenants' GPU (by UUID, else index 0)."""
    try:
        import pynvml  # optional: NVML exists only on an NVIDIA host (nvidia-ml-py may be absent)
    except ImportError:
        return {"nvml": "absent (nvidia-ml-py not installed)"}
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return {"nvml": f"absent ({type(exc).__name__})"}
    try:
        h = (pynvml.nvmlDeviceGetHandleByUUID(gpu_uuid.encode()) if gpu_uuid
             else pynvml.nvmlDeviceGetHandleByIndex(0))
        info: dict[str, Any] = {"nvml": "present", "driver": _s(pynvml.nvmlSystemGetDriverVersion()),
                                "gpu_name": _s(pynvml.nvmlDeviceGetName(h))}
        for key, fn in (("cuda_driver_version", lambda: pynvml.nvmlSystemGetCudaDriverVersion_v2()),
                        ("compute_mode", lambda: pynvml.nvmlDeviceGetComputeMode(h)),
                        ("max_sm_clock_mhz", lambda: pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)),
                        ("sm_clock_mhz", lambda: pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)),
                        ("mig_mode", lambda: pynvml.nvmlDeviceGetMigMode(h)[0])):
            try:
                info[key] = fn()
            except Exception:
                info[key] = None
        modes = {0: "Default (time-sliced between processes)", 1: "Exclusive_Thread", 2: "Prohibited",
                 3: "Exclusive_Process"}
        info["compute_mode_name"] = modes.get(info.get("compute_mode"), "unknown")
        return info
    finally:
        pynvml.nvmlShutdown()


def _s(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def git_commit(root: Path = REPO_ROOT) -> dict[str, Any]:
    """The kit's commit; ``KTS_GIT_COMMIT`` stands in where the tree was copied without .git (a GPU host)."""
    head, dirty = None, None
    try:
        res = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel", "--verify", "HEAD"],
                             capture_output=True, text=True, timeout=10)
        top, _, sha = res.stdout.strip().partition("\n")
        # A copy of the kit inside some other repository (an ignored folder of a checkout) is not that repo's HEAD.
        inside = res.returncode == 0 and Path(top).resolve() == Path(root).resolve()
        if inside and re.fullmatch(r"[0-9a-f]{40}", sha.strip()):
            head = sha.strip()
            dirty = bool(subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
                                        capture_output=True, text=True, timeout=10).stdout.strip())
    except (OSError, subprocess.TimeoutExpired):
        pass
    if head is None and os.environ.get("KTS_GIT_COMMIT"):
        return {"commit": os.environ["KTS_GIT_COMMIT"], "dirty": None, "source": "KTS_GIT_COMMIT"}
    return {"commit": head, "dirty": dirty}


def mps_state() -> dict[str, Any]:
    """Whether an MPS control daemon binary exists and whether one seems to be running already."""
    binary = shutil.which("nvidia-cuda-mps-control")
    pipe = os.environ.get("CUDA_MPS_PIPE_DIRECTORY", "/tmp/nvidia-mps")
    return {"mps_control_binary": binary, "mps_pipe_dir": pipe, "mps_daemon_running": Path(pipe, "control").exists()}


def resolve_device(requested: str, torch_info: dict[str, Any]) -> str:
    """Map auto/cpu/cuda to what this host can do; DEVICE=cuda without a GPU is an error."""
    if requested == "auto":
        return "cuda" if torch_info.get("cuda_available") else "cpu"
    if requested.startswith("cuda") and not torch_info.get("cuda_available"):
        raise DeviceError(f"DEVICE={requested} requested but torch {torch_info.get('torch')} sees no CUDA GPU "
                          "on this host; use DEVICE=cpu or DEVICE=auto")
    return "cuda" if requested.startswith("cuda") else "cpu"


def detect_environment(python: str = sys.executable) -> dict[str, Any]:
    """Everything the manifest and the report's environment table need."""
    torch_info = probe_torch(python)
    env: dict[str, Any] = {
        "python": platform.python_version(), "platform": platform.platform(), "hostname": platform.node(),
        "cpu_count": os.cpu_count(), "processor": platform.processor() or platform.machine(),
        "worker_python": python, **torch_info, **probe_nvml(torch_info.get("gpu_uuid")), **mps_state(),
        "git": git_commit(), "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }
    env["kts_version"] = __version__
    return env
