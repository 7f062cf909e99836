"""NVML/GPM sampler: what the GPU was doing (clocks, utilisation, power, memory) every 100 ms.

Runs as its own process (``python -m kts_helpers.run.telemetry sample ...``) so that sampling
never competes with a tenant's Python thread, and so that a tenant crash cannot take it
down. ``TelemetrySampler`` spawns and stops it. The sampler path imports only the standard
library, ``pynvml`` and ``pyarrow``: it also runs on bare GPU hosts, and must start fast.

Read-only by design: only ``nvmlDeviceGet*``, ``nvmlSystemGet*`` and GPM sample/query calls;
no clock, power-limit, persistence or GPM-streaming setting is ever changed.

Faults: no NVML library or driver -> status "absent" (exit 0); GPM unsupported -> the GPM
columns are left out; one call failing (e.g. NVMLError_NotSupported) -> that column is null
and the first error per column is recorded in the status; the process dying -> the parts
already flushed survive and ``TelemetrySampler.stop()`` reports "partial".
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from kts_helpers.run.telemetry._store import (
    CORE_COLUMNS,
    GPM_COLUMNS,
    PartWriter,
    TelemetryError,
    base_of,
    consolidated_path,
    count_rows,
    part_paths,
    read_status,
    status_path,
    write_status,
)

MIB = 1024 * 1024
# column -> pynvml constant name of the GPM metric id
GPM_METRICS = {
    "sm_util_pct": "NVML_GPM_METRIC_SM_UTIL",
    "sm_occupancy_pct": "NVML_GPM_METRIC_SM_OCCUPANCY",
    "dram_bw_util_pct": "NVML_GPM_METRIC_DRAM_BW_UTIL",
}


def _text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


class _Gpm:
    """Two GPM sample buffers used alternately: metrics are computed between consecutive samples."""

    def __init__(self, nv: Any, handle: Any):
        self.nv, self.handle = nv, handle
        self.prev = nv.nvmlGpmSampleAlloc()
        self.cur = nv.nvmlGpmSampleAlloc()
        self.have_prev = False
        self.ids = {col: getattr(nv, const) for col, const in GPM_METRICS.items()}

    def sample(self) -> tuple[dict[str, float | None], str | None]:
        """Take a sample; metrics against the previous one (all None on the first call)."""
        nv = self.nv
        out: dict[str, float | None] = dict.fromkeys(GPM_METRICS)
        nv.nvmlGpmSampleGet(self.handle, self.cur)
        err = None
        if self.have_prev:
            mg = nv.c_nvmlGpmMetricsGet_t()
            mg.version = nv.NVML_GPM_METRICS_GET_VERSION
            mg.numMetrics = len(self.ids)
            mg.sample1, mg.sample2 = self.prev, self.cur
            for i, mid in enumerate(self.ids.values()):
                mg.metrics[i].metricId = mid
            nv.nvmlGpmMetricsGet(mg)
            for i, col in enumerate(self.ids):
                m = mg.metrics[i]
                if int(m.nvmlReturn) == 0:
                    out[col] = float(m.value)
                else:
                    err = err or f"{col}: NVML return {int(m.nvmlReturn)}"
        self.prev, self.cur = self.cur, self.prev
        self.have_prev = True
        return out, err

    def close(self) -> None:
        for s in (self.prev, self.cur):
            with contextlib.suppress(Exception):  # freeing at exit must not mask the real outcome
                self.nv.nvmlGpmSampleFree(s)


def run_sampler(out_path: str | os.PathLike, *, interval_ms: float = 100.0, stop_file: str | os.PathLike | None = None,
                gpu_index: int = 0, flush_s: float = 2.0, max_samples: int | None = None,
                duration_s: float | None = None, gpu_uuid: str | None = None) -> dict[str, Any]:
    """Sample NVML until the stop file appears (or SIGTERM, ``max_samples``, ``duration_s``).

    ``gpu_uuid`` (the UUID CUDA reports for the tenants' device) picks the GPU; NVML's indices
    ignore CUDA_VISIBLE_DEVICES, so on a multi-GPU host index 0 may be another GPU than the one
    the tenants use. Without it, ``gpu_index``.

    Returns the final status dict (also written to ``PATH.status.json``). Never raises for
    NVML faults: those become status "absent" or null columns. Raises TelemetryError only
    for caller errors (bad interval, output already there).
    """
    if not interval_ms or interval_ms <= 0:
        raise TelemetryError(f"interval_ms must be > 0, got {interval_ms}")
    if consolidated_path(out_path).exists() or part_paths(out_path):
        raise TelemetryError(f"telemetry output {out_path} already exists; raw data is never overwritten")
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    status: dict[str, Any] = {"status": "partial", "reason": "running", "gpm": False, "samples": 0,
                              "interval_ms": float(interval_ms), "gpu_index": int(gpu_index), "gpu_name": None,
                              "driver": None, "max_sm_clock_mhz": None, "source": "nvml", "pid": os.getpid(),
                              "column_errors": {}}
    try:
        import pynvml as nv  # optional: NVML exists only on an NVIDIA host
    except Exception as exc:  # ImportError, or a broken install raising anything at import
        return write_status(out_path, {**status, "status": "absent",
                                       "reason": f"pynvml not importable: {type(exc).__name__}: {exc}"})
    try:
        nv.nvmlInit()
    except Exception as exc:  # NVMLError (no library/driver) or OSError: both mean absent
        return write_status(out_path, {**status, "status": "absent",
                                       "reason": f"NVML unavailable: {type(exc).__name__}: {exc}"})
    try:
        return _sample_loop(nv, out_path, status, interval_ms=interval_ms, stop_file=stop_file, gpu_index=gpu_index,
                            flush_s=flush_s, max_samples=max_samples, duration_s=duration_s, gpu_uuid=gpu_uuid)
    finally:
        with contextlib.suppress(Exception):
            nv.nvmlShutdown()


def _sample_loop(nv: Any, out_path: str | os.PathLike, status: dict[str, Any], *, interval_ms: float,
                 stop_file: str | os.PathLike | None, gpu_index: int, flush_s: float, max_samples: int | None,
                 duration_s: float | None, gpu_uuid: str | None = None) -> dict[str, Any]:
    errors: dict[str, str] = status["column_errors"]

    def call(col: str, fn, *args):
        """One NVML call; its failure nulls only its own column."""
        try:
            return fn(*args)
        except nv.NVMLError as exc:
            errors.setdefault(col, f"{type(exc).__name__}: {exc}")
            return None

    try:
        if gpu_uuid:
            handle = nv.nvmlDeviceGetHandleByUUID(gpu_uuid.encode() if isinstance(gpu_uuid, str) else gpu_uuid)
            gpu_index = int(nv.nvmlDeviceGetIndex(handle))
            status.update(gpu_index=gpu_index, gpu_uuid=gpu_uuid)
        else:
            handle = nv.nvmlDeviceGetHandleByIndex(int(gpu_index))
    except nv.NVMLError as exc:
        which = gpu_uuid or gpu_index
        return write_status(out_path, {**status, "status": "absent",
                                       "reason": f"GPU {which} not found: {type(exc).__name__}: {exc}"})
    name = call("gpu_name", nv.nvmlDeviceGetName, handle)
    driver = call("driver", nv.nvmlSystemGetDriverVersion)
    max_sm = call("max_sm_clock_mhz", nv.nvmlDeviceGetMaxClockInfo, handle, nv.NVML_CLOCK_SM)
    status.update(gpu_name=None if name is None else _text(name), driver=None if driver is None else _text(driver),
                  max_sm_clock_mhz=None if max_sm is None else float(max_sm))
    gpm = None
    try:
        support = nv.nvmlGpmQueryDeviceSupport(handle)
        if int(support.isSupportedDevice):
            gpm = _Gpm(nv, handle)
        else:
            status["gpm_reason"] = "device does not support GPM (needs Hopper or newer)"
    except (nv.NVMLError, AttributeError) as exc:  # AttributeError: a pynvml too old to know GPM
        status["gpm_reason"] = f"GPM unavailable: {type(exc).__name__}: {exc}"
    status["gpm"] = gpm is not None
    columns = {**CORE_COLUMNS, **(GPM_COLUMNS if gpm else {})}
    writer = PartWriter(out_path, columns)
    write_status(out_path, status)  # readiness signal for TelemetrySampler.start()

    stopping = False

    def on_term(signum, frame):  # SIGTERM: finish the current sample, flush, exit cleanly
        nonlocal stopping
        stopping = True

    old = None
    with contextlib.suppress(ValueError):  # not the main thread (in-process use): stop file / limits only
        old = signal.signal(signal.SIGTERM, on_term)
    interval_ns = int(interval_ms * 1e6)
    t0 = time.monotonic_ns()
    last_flush = time.monotonic()
    k = 0
    stop = Path(stop_file) if stop_file else None
    try:
        while not stopping:
            row = _one_sample(nv, handle, call)
            if gpm is not None:
                try:
                    vals, gerr = gpm.sample()
                except nv.NVMLError as exc:
                    vals, gerr = dict.fromkeys(GPM_METRICS), f"{type(exc).__name__}: {exc}"
                row.update(vals)
                if gerr:
                    errors.setdefault("gpm", gerr)
            row["gpu_index"] = int(gpu_index)
            writer.add(row)
            k += 1
            if time.monotonic() - last_flush >= flush_s:
                writer.flush()
                last_flush = time.monotonic()
                write_status(out_path, {**status, "samples": writer.rows_written})
            if max_samples is not None and k >= max_samples:
                break
            if duration_s is not None and (time.monotonic_ns() - t0) >= duration_s * 1e9:
                break
            if stop is not None and stop.exists():
                break
            # a fixed grid, not sleep(interval): no drift; ticks missed while busy are skipped
            now = time.monotonic_ns()
            next_tick = t0 + ((now - t0) // interval_ns + 1) * interval_ns
            time.sleep(max(0.0, (next_tick - now) / 1e9))
    except Exception as exc:  # keep what was sampled, say why it stopped
        writer.flush()
        return write_status(out_path, {**status, "status": "partial", "samples": writer.rows_written,
                                       "reason": f"sampler failed: {type(exc).__name__}: {exc}"})
    finally:
        if gpm is not None:
            gpm.close()
        if old is not None:
            signal.signal(signal.SIGTERM, old)
    writer.flush()
    writer.consolidate()
    return write_status(out_path, {**status, "status": "complete", "reason": "", "samples": writer.rows_written})


def _one_sample(nv: Any, handle: Any, call) -> dict[str, Any]:
    ts = time.time_ns()
    util = call("gpu_util_pct", nv.nvmlDeviceGetUtilizationRates, handle)
    sm = call("sm_clock_mhz", nv.nvmlDeviceGetClockInfo, handle, nv.NVML_CLOCK_SM)
    memclk = call("mem_clock_mhz", nv.nvmlDeviceGetClockInfo, handle, nv.NVML_CLOCK_MEM)
    power = call("power_w", nv.nvmlDeviceGetPowerUsage, handle)
    mem = call("mem_used_mib", nv.nvmlDeviceGetMemoryInfo, handle)
    procs = call("procs_json", nv.nvmlDeviceGetComputeRunningProcesses, handle)
    return {
        "ts_ns": ts,
        "gpu_util_pct": None if util is None else float(util.gpu),
        "mem_util_pct": None if util is None else float(util.memory),
        "sm_clock_mhz": None if sm is None else float(sm),
        "mem_clock_mhz": None if memclk is None else float(memclk),
        "power_w": None if power is None else power / 1000.0,  # NVML reports mW
        "mem_used_mib": None if mem is None else mem.used / MIB,
        "procs_json": None if procs is None else json.dumps(
            [{"pid": int(p.pid), "used_mib": None if p.usedGpuMemory is None else p.usedGpuMemory / MIB,
              "name": _process_name(int(p.pid))} for p in procs]),
    }


def _process_name(pid: int) -> str | None:
    """The process's name (``/proc/<pid>/comm``) where this PID namespace sees it: what tells the kit's own MPS
    server (``nvidia-cuda-mps``) from a stranger. NVML lists only the processes of the caller's PID namespace."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip() or None
    except OSError:
        return None


def _package_root() -> str:
    return str(Path(__file__).resolve().parents[3])


class TelemetrySampler:
    """Spawns the sampler process for one scenario and stops it cleanly.

    >>> with TelemetrySampler("run/telemetry/shared.parquet") as s:
    ...     run_scenario()
    >>> s.result["status"]   # "complete" | "partial" | "absent"
    """

    def __init__(self, out_path: str | os.PathLike, interval_ms: float = 100.0, gpu_index: int = 0, *,
                 flush_s: float = 2.0, env: dict[str, str] | None = None, python: str | None = None,
                 gpu_uuid: str | None = None):
        if interval_ms <= 0:
            raise TelemetryError(f"interval_ms must be > 0, got {interval_ms}")
        self.out_path = Path(out_path).absolute()  # the process runs from the package root
        self.interval_ms, self.gpu_index, self.flush_s = float(interval_ms), int(gpu_index), float(flush_s)
        self.gpu_uuid = gpu_uuid
        self.env, self.python = dict(env or {}), python or sys.executable
        base = base_of(out_path)
        self.stop_file = base.with_name(base.name + ".stop")
        self.log_path = base.with_name(base.name + ".sampler.log")
        self.proc: subprocess.Popen | None = None
        self.result: dict[str, Any] | None = None

    def start(self, wait_ready_s: float = 10.0) -> TelemetrySampler:
        """Spawn the sampler and wait (bounded) until it has initialised NVML or given up."""
        if self.proc is not None:
            raise TelemetryError("sampler already started")
        self.out_path.parent.mkdir(parents=True, exist_ok=True)
        self.stop_file.unlink(missing_ok=True)
        env = {**os.environ, **self.env}
        paths = [self.env.get("PYTHONPATH", ""), _package_root(), os.environ.get("PYTHONPATH", "")]
        env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(p for p in paths if p))
        cmd = [self.python, "-m", "kts_helpers.run.telemetry", "sample", "--out", str(self.out_path),
               "--interval-ms", str(self.interval_ms), "--stop-file", str(self.stop_file),
               "--gpu", str(self.gpu_index), "--flush-s", str(self.flush_s)]
        if self.gpu_uuid:
            cmd += ["--gpu-uuid", self.gpu_uuid]
        with open(self.log_path, "ab") as log:
            # cwd = package root: ``-m`` then finds this very package, whatever the caller's cwd
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env,
                                         cwd=_package_root())
        deadline = time.monotonic() + wait_ready_s
        while time.monotonic() < deadline and self.proc.poll() is None and not status_path(self.out_path).exists():
            time.sleep(0.01)
        return self

    def stop(self, timeout_s: float | None = None) -> dict[str, Any]:
        """Ask the sampler to stop (stop file, then SIGTERM, then SIGKILL); return its status dict."""
        if self.result is not None:
            return self.result
        if self.proc is None:
            raise TelemetryError("sampler was never started")
        wait = timeout_s if timeout_s is not None else max(5.0, 3 * self.interval_ms / 1000 + 2 * self.flush_s)
        self.stop_file.touch()
        rc = self._wait(wait)
        if rc is None:
            self.proc.send_signal(signal.SIGTERM)
            rc = self._wait(wait)
        if rc is None:
            self.proc.kill()
            rc = self._wait(5.0)
        self.stop_file.unlink(missing_ok=True)
        self.result = self._final_status(rc)
        return self.result

    def _wait(self, t: float) -> int | None:
        try:
            return self.proc.wait(timeout=t)
        except subprocess.TimeoutExpired:
            return None

    def _final_status(self, rc: int | None) -> dict[str, Any]:
        st = read_status(self.out_path)
        if rc == 0 and st is not None and st.get("reason") != "running":
            return st  # the sampler wrote its own final word
        # the sampler died or hung: report what reached the disk
        why = f"sampler exited with code {rc}" if rc is not None else "sampler did not exit"
        if rc is not None and rc < 0:
            why = f"sampler killed by signal {-rc}"
        tail = _last_line(self.log_path)
        base = st or {"gpm": False, "interval_ms": self.interval_ms, "gpu_index": self.gpu_index, "gpu_name": None,
                      "driver": None, "max_sm_clock_mhz": None, "source": "nvml"}
        n = count_rows(self.out_path)
        final = {**base, "status": "partial" if n else "absent", "samples": n,
                 "reason": why + (f"; last output: {tail}" if tail else "")}
        return write_status(self.out_path, final)

    def __enter__(self) -> TelemetrySampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _last_line(path: Path) -> str:
    try:
        lines = [ln for ln in path.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    return lines[-1][:300] if lines else ""
