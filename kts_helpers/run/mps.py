"""A private NVIDIA MPS control daemon for the duration of one scenario.

MPS lets tenants' kernels run on the GPU at the same time (sharing SMs) instead of taking
turns. The daemon gets its own pipe and log directories, so it never touches a daemon
someone else runs, and it is always told to quit, also after an error. No GPU setting
(compute mode, clocks, time-slice) is changed: MPS on a Default-mode GPU needs none.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from kts_helpers.errors import BackendError


class MpsDaemon:
    """Context manager: start ``nvidia-cuda-mps-control -d`` with private directories, quit on exit."""

    def __init__(self, control: str = "nvidia-cuda-mps-control", *, log_parent: Path | None = None,
                 start_timeout_s: float = 10.0, gpu_uuid: str | None = None) -> None:
        self.control = control
        self.log_parent = log_parent
        self.start_timeout_s = start_timeout_s
        self.gpu_uuid = gpu_uuid
        self.pipe_dir: Path | None = None
        self.log_dir: Path | None = None

    def client_env(self) -> dict[str, str | None]:
        """What a tenant needs in its environment to connect to this daemon (None: must be unset).

        The server sees only the daemon's GPU, renumbered from 0, so a client that keeps the host's
        CUDA_VISIBLE_DEVICES (e.g. "1") would ask for a device the server does not have. Unset is not
        right either: torch counts devices with NVML, which ignores MPS, and on a two-GPU host a client
        with nothing set counted 2 while CUDA offered 1 (``device=1, num_gpus=1`` at start-up, on the H200
        host). "0" is the server's one device for CUDA and one device for NVML's count alike.
        """
        assert self.pipe_dir is not None and self.log_dir is not None
        return {"CUDA_MPS_PIPE_DIRECTORY": str(self.pipe_dir), "CUDA_MPS_LOG_DIRECTORY": str(self.log_dir),
                "CUDA_VISIBLE_DEVICES": "0"}

    def _env(self) -> dict[str, str]:
        """The daemon's environment: its pipe and log directories, and the tenants' GPU by UUID."""
        env = dict(os.environ)
        env.update({k: v for k, v in self.client_env().items() if k != "CUDA_VISIBLE_DEVICES"})
        if self.gpu_uuid:
            env["CUDA_VISIBLE_DEVICES"] = self.gpu_uuid
        return env

    def __enter__(self) -> MpsDaemon:
        binary = shutil.which(self.control)
        if binary is None:
            raise BackendError(f"MPS requested but {self.control!r} is not on PATH (is the NVIDIA driver installed?)")
        self.control = binary
        self.pipe_dir = Path(tempfile.mkdtemp(prefix="kts-mps-pipe-"))
        self.log_dir = Path(tempfile.mkdtemp(prefix="kts-mps-log-", dir=self.log_parent))
        try:
            res = subprocess.run([self.control, "-d"], env=self._env(), capture_output=True, text=True,
                                 timeout=self.start_timeout_s)
        except (OSError, subprocess.TimeoutExpired) as exc:
            self._cleanup_dirs()
            raise BackendError(f"MPS control daemon did not start: {exc}") from None
        if res.returncode != 0:
            self._cleanup_dirs()
            tail = (res.stderr or res.stdout).strip().splitlines()[-1:] or ["(no output)"]
            raise BackendError(f"MPS control daemon failed to start (exit {res.returncode}): {tail[0]}")
        deadline = time.monotonic() + self.start_timeout_s
        while not (self.pipe_dir / "control").exists():
            if time.monotonic() > deadline:
                self._quit()
                raise BackendError(f"MPS control daemon started but no control pipe in {self.pipe_dir}")
            time.sleep(0.05)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._quit()

    def _quit(self) -> None:
        """Ask the daemon to quit and wait until its control pipe is gone."""
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            subprocess.run([self.control], input="quit\n", env=self._env(), capture_output=True, text=True,
                           timeout=30)
        deadline = time.monotonic() + 15
        while self.pipe_dir is not None and (self.pipe_dir / "control").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        self._cleanup_dirs()

    def _cleanup_dirs(self) -> None:
        if self.pipe_dir is not None:
            shutil.rmtree(self.pipe_dir, ignore_errors=True)
        if self.log_dir is not None:  # keep the daemon's logs, but leave no empty directory behind
            with contextlib.suppress(OSError):
                self.log_dir.rmdir()
