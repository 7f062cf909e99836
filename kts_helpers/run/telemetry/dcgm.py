"""DCGM-exporter scraper: the Kubernetes counterpart of the NVML sampler, in the same schema.

On a cluster the GPU is read by NVIDIA's dcgm-exporter, not by us; its ``/metrics`` page is
Prometheus text exposition. It is parsed with ``prometheus_client``'s own parser (imported
lazily: the sampler host need not have it) and mapped onto the NVML sampler's columns, so
the join and the clock report never care which backend produced the telemetry.

One row per (scrape, distinct label set): with time-slicing and ``KUBERNETES_VIRTUAL_GPUS=true``,
dcgm-exporter repeats a GPU's series once per pod holding a replica (with a ``vgpu`` label), and the
pod/namespace/container labels are kept as columns.

What the page can get wrong, and what is recorded so the backend can refuse or flag it (``page_check``):

* **Whose GPU.** A Service in front of the exporter DaemonSet answers from any node: the page's ``UUID`` and
  ``Hostname`` (``hostname`` from dcgm-exporter's HEAD, commit d5e5f51 "Rename Hostname label to hostname") must
  name the tenants' GPU or node, or the page describes another GPU.
* **Whose pods.** Without ``KUBERNETES_VIRTUAL_GPUS=true`` (its default is false: pkg/cmd/app.go,
  ``CLIKubernetesVirtualGPUs``) the exporter maps each device to ONE pod (internal/pkg/transformation/
  kubernetes.go, ``toDeviceToPod`` returns ``map[string]PodInfo``: the last pod listed wins), so a time-sliced
  GPU's other pods, strangers included, never appear: per-pod attribution is unavailable.
* **When.** The exporter collects every ``DCGM_EXPORTER_INTERVAL`` ms (default 30000: pkg/cmd/app.go,
  ``CLICollectInterval``) and serves the last collection in between: a 1 s scrape repeats one sample ~30
  times. A row is stamped with the first scrape that showed its values (not each repeat's), and the interval
  between changes is recorded (``exporter_interval_ms``) so the join uses that resolution.
"""

from __future__ import annotations

import math
import os
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from kts_helpers.run.telemetry._store import (
    CORE_COLUMNS,
    DCGM_LABEL_COLUMNS,
    GPM_COLUMNS,
    PartWriter,
    TelemetryError,
    consolidated_path,
    part_paths,
    write_status,
)

DEFAULT_URL = "http://localhost:9400/metrics"
# DCGM field -> (our column, scale). PROF fields are ratios 0..1; we store percent.
FIELD_MAP: dict[str, tuple[str, float]] = {
    "DCGM_FI_DEV_GPU_UTIL": ("gpu_util_pct", 1.0),
    "DCGM_FI_DEV_MEM_COPY_UTIL": ("mem_util_pct", 1.0),
    "DCGM_FI_DEV_SM_CLOCK": ("sm_clock_mhz", 1.0),
    "DCGM_FI_DEV_MEM_CLOCK": ("mem_clock_mhz", 1.0),
    "DCGM_FI_DEV_POWER_USAGE": ("power_w", 1.0),
    "DCGM_FI_DEV_FB_USED": ("mem_used_mib", 1.0),
    "DCGM_FI_PROF_SM_ACTIVE": ("sm_util_pct", 100.0),
    "DCGM_FI_PROF_SM_OCCUPANCY": ("sm_occupancy_pct", 100.0),
    "DCGM_FI_PROF_DRAM_ACTIVE": ("dram_bw_util_pct", 100.0),
}
# exporter label -> our column
# (``Hostname`` in the releases up to 4.5.3-4.8.2, ``hostname`` at HEAD; with ``--use-old-namespace`` the GPU is
# ``uuid`` (internal/pkg/collector/gpu_collector.go ``toMetric``: ``uuid := "UUID"; if useOld { uuid = "uuid" }``,
# rendered as the label's name by internal/pkg/rendermetrics/render_metrics.go) and the pod ``pod_name`` ...
# (transformation/const.go ``oldPodAttribute``); ``vgpu`` with KUBERNETES_VIRTUAL_GPUS=true)
LABEL_MAP = {"UUID": "uuid", "uuid": "uuid", "modelName": "model_name", "Hostname": "hostname", "hostname": "hostname",
             "pod": "pod", "pod_name": "pod", "namespace": "namespace", "pod_namespace": "namespace",
             "container": "container", "container_name": "container", "vgpu": "vgpu"}
DEFAULT_EXPORTER_INTERVAL_MS = 30000.0  # dcgm-exporter's DCGM_EXPORTER_INTERVAL default
COLUMNS: dict[str, str] = {**CORE_COLUMNS, **GPM_COLUMNS, **DCGM_LABEL_COLUMNS}
FIELD_COLUMNS = tuple(dict.fromkeys(c for c, _ in FIELD_MAP.values()))
_MAX_BYTES = 16 * 1024 * 1024


def parse_dcgm_text(text: str, *, ts_ns: int | None = None) -> list[dict[str, Any]]:
    """Parse one dcgm-exporter page into rows of the telemetry schema (one per GPU and label set).

    Raises TelemetryError when the text is not Prometheus exposition or holds no DCGM metric.
    """
    try:
        from prometheus_client.parser import text_string_to_metric_families  # optional: DCGM scrapes only
    except ImportError as exc:
        raise TelemetryError(f"prometheus_client is needed to parse DCGM metrics: {exc}") from None
    ts = time.time_ns() if ts_ns is None else int(ts_ns)
    rows: dict[tuple, dict[str, Any]] = {}
    seen_dcgm = False
    try:
        families = list(text_string_to_metric_families(text))
    except ValueError as exc:
        first = str(exc).splitlines()[0][:120] if str(exc) else type(exc).__name__
        raise TelemetryError(f"not Prometheus text exposition: {first}") from None
    for fam in families:
        if not fam.name.startswith("DCGM_FI_"):
            continue
        seen_dcgm = True
        mapped = FIELD_MAP.get(fam.name)
        if mapped is None:
            continue  # e.g. the energy counter, XID errors: not part of the shared schema
        col, scale = mapped
        for s in fam.samples:
            labels = s.labels
            gpu = labels.get("gpu")
            key = (gpu, *(labels.get(k) or None for k in LABEL_MAP))
            row = rows.get(key)
            if row is None:
                row = dict.fromkeys(COLUMNS)
                row["ts_ns"] = ts
                row["gpu_index"] = _gpu_index(gpu)
                for k, c in LABEL_MAP.items():
                    row[c] = labels.get(k) or row[c]
                rows[key] = row
            v = float(s.value)
            row[col] = None if math.isnan(v) else v * scale  # NaN = "not available" from DCGM
    if not seen_dcgm:
        raise TelemetryError("no DCGM_FI_* metric in the response (is this a dcgm-exporter endpoint?)")
    return sorted(rows.values(), key=lambda r: (r["gpu_index"] is None, r["gpu_index"] or 0, r["pod"] or ""))


def page_check(status: dict[str, Any], *, node: str, gpu_uuid: str | None, pods_on_gpu: int) -> tuple[str, str]:
    """(why the scraped pages must be refused, or ""; what they cannot tell, or "") for a scenario whose tenants ran
    on ``node`` with GPU ``gpu_uuid`` and ``pods_on_gpu`` pods of its Job holding that GPU's replicas.

    Refused: the pages never show the tenants' GPU (by UUID; by node name when the tenants' UUID is unknown).
    Flagged: the tenants' GPU was attributed to at most one pod per page although several held it: the exporter
    runs without KUBERNETES_VIRTUAL_GPUS (one pod per device, the last listed), so strangers cannot be seen there.
    """
    page = status.get("page") or {}
    uuids, hosts = list(page.get("uuids") or []), list(page.get("hostnames") or [])
    if not status.get("samples"):
        return "", ""
    if gpu_uuid and gpu_uuid not in uuids:
        return (f"the dcgm-exporter pages show GPU(s) {', '.join(uuids) or '(no UUID label)'} on "
                f"{', '.join(hosts) or '(no Hostname label)'}, not the tenants' GPU {gpu_uuid} on node {node}: they "
                "describe another GPU (a Service answers from any node); scrape the exporter pod on the tenants' node"
                ), ""
    if not gpu_uuid and node not in hosts:
        return (f"the dcgm-exporter pages come from {', '.join(hosts) or '(no Hostname label)'}, not node {node}, and "
                "the tenants' GPU UUID is unknown: they may describe another GPU; scrape the exporter pod on the "
                "tenants' node"), ""
    if not gpu_uuid:
        return "", ("attribution unchecked: the tenants' GPU UUID is unknown, so which of the page's GPUs is theirs, "
                    "and how many pods the exporter attributes to it, cannot be told") if pods_on_gpu >= 2 else ""
    most = int((page.get("max_pods_per_gpu") or {}).get(gpu_uuid, 0) or 0)
    if pods_on_gpu >= 2 and most <= 1:
        return "", (f"attribution unavailable; set KUBERNETES_VIRTUAL_GPUS=true (dcgm-exporter attributed the tenants' "
                    f"GPU to at most {most} pod per page while {pods_on_gpu} of the scenario's pods held it: without "
                    "it the exporter names one pod per device, so a stranger there would not be seen)")
    return "", ""


def _gpu_index(v: str | None) -> int | None:
    try:
        return int(v) if v is not None else None
    except ValueError:
        raise TelemetryError(f"DCGM label gpu={v!r} is not an integer") from None


def scrape_dcgm(url: str = DEFAULT_URL, timeout_s: float = 2.0) -> list[dict[str, Any]]:
    """GET the exporter page once and parse it; every failure is a one-line TelemetryError."""
    t0 = time.time_ns()
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as resp:  # a URL the user configured
            body = resp.read(_MAX_BYTES + 1)
    except urllib.error.HTTPError as exc:
        raise TelemetryError(f"DCGM exporter {url} answered HTTP {exc.code} {exc.reason}") from None
    except urllib.error.URLError as exc:
        raise TelemetryError(f"DCGM exporter {url} unreachable: {exc.reason}") from None
    except (TimeoutError, OSError, ValueError) as exc:
        raise TelemetryError(f"DCGM exporter {url} failed: {type(exc).__name__}: {exc}") from None
    if len(body) > _MAX_BYTES:
        raise TelemetryError(f"DCGM exporter {url} returned more than {_MAX_BYTES} bytes")
    t1 = time.time_ns()
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise TelemetryError(f"DCGM exporter {url} returned non-UTF-8 bytes") from None
    try:
        return parse_dcgm_text(text, ts_ns=t0 + (t1 - t0) // 2)
    except TelemetryError as exc:
        raise TelemetryError(f"DCGM exporter {url}: {exc}") from None


class DcgmScraper:
    """Polls dcgm-exporter into part files + status JSON; never raises into the experiment.

    Use as a context manager / ``start()``+``stop()`` (background thread), or ``run()`` in the
    foreground (the CLI). Status: "complete" when every scrape worked, "partial" when some
    failed, "absent" when none did.
    """

    def __init__(self, url: str = DEFAULT_URL, out_path: str | os.PathLike = "dcgm.parquet", interval_ms: float = 1000.0,
                 *, timeout_s: float = 2.0, flush_s: float = 5.0):
        if interval_ms <= 0:
            raise TelemetryError(f"interval_ms must be > 0, got {interval_ms}")
        self.url, self.out_path = url, Path(out_path)
        self.interval_ms, self.timeout_s, self.flush_s = float(interval_ms), float(timeout_s), float(flush_s)
        self.scrapes = self.failures = 0
        self.last_error = ""
        self.gpm = False
        self.meta: dict[str, Any] = {"gpu_name": None, "driver": None, "max_sm_clock_mhz": None}
        # what the pages said (``page_check`` reads it): whose GPU, whose pods, how often the exporter collects
        self.hostnames: set[str] = set()
        self.uuids: set[str] = set()
        self.max_pods: dict[str, int] = {}  # GPU -> the most pods one page attributed it to
        self.virtual_gpus = False  # a ``vgpu`` label seen: KUBERNETES_VIRTUAL_GPUS=true
        self._last: dict[tuple, tuple[tuple, int]] = {}  # series -> (its values, when first seen)
        self._changes: dict[str, list[int]] = {}  # GPU -> the scrapes at which its values changed
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._writer: PartWriter | None = None
        self.result: dict[str, Any] | None = None

    def poll_once(self) -> int:
        """One scrape into the buffer; returns rows added (0 on failure, which is recorded)."""
        self.scrapes += 1
        try:
            rows = scrape_dcgm(self.url, self.timeout_s)
        except TelemetryError as exc:
            self.failures += 1
            self.last_error = str(exc)
            return 0
        self._note(rows)
        for r in rows:
            self._writer.add(r)
            self.gpm = self.gpm or any(r[c] is not None for c in GPM_COLUMNS)
            self.meta["gpu_name"] = self.meta["gpu_name"] or r["model_name"]
        return len(rows)

    def _note(self, rows: list[dict[str, Any]]) -> None:
        """Record whose GPU and pods the page names, and stamp a repeat of the exporter's last collection with the
        scrape that first showed it (the exporter serves one collection until its next, 30 s by default)."""
        pods: dict[str, set[str]] = {}
        changed: set[str] = set()
        scraped = rows[0]["ts_ns"] if rows else 0  # every row of a page carries its scrape's time
        for r in rows:
            gpu = r["uuid"] or f"gpu{r['gpu_index']}"
            self.hostnames.update([r["hostname"]] if r["hostname"] else [])
            self.uuids.update([r["uuid"]] if r["uuid"] else [])
            self.virtual_gpus = self.virtual_gpus or bool(r["vgpu"])
            pods.setdefault(gpu, set()).update([f"{r['namespace'] or '?'}/{r['pod']}"] if r["pod"] else [])
            key = (gpu, r["pod"], r["namespace"], r["container"], r["vgpu"])
            values = tuple(r[c] for c in FIELD_COLUMNS)
            last = self._last.get(key)
            if last is not None and last[0] == values:
                r["ts_ns"] = last[1]
            else:
                self._last[key] = (values, r["ts_ns"])
                changed.add(gpu)
        for gpu, names in pods.items():
            self.max_pods[gpu] = max(self.max_pods.get(gpu, 0), len(names))
        for gpu in changed:
            self._changes.setdefault(gpu, []).append(scraped)

    def exporter_interval_ms(self) -> float | None:
        """The median time between changes of a GPU's values (the exporter's collect interval, as seen at this
        scrape's resolution); None before two changes after the first sighting."""
        gaps = sorted((b - a) / 1e6 for times in self._changes.values() for a, b in zip(times[1:-1], times[2:], strict=True))
        return gaps[len(gaps) // 2] if gaps else None

    def _status(self, final: bool) -> dict[str, Any]:
        ok = self.scrapes - self.failures
        if not final:
            state, reason = "partial", "running"
        elif ok == 0:
            state = "absent"
            reason = f"no successful scrape of {self.scrapes}: {self.last_error}" if self.scrapes else "never scraped"
        elif self.failures:
            state, reason = "partial", f"{self.failures} of {self.scrapes} scrapes failed; last: {self.last_error}"
        else:
            state, reason = "complete", ""
        return {"status": state, "reason": reason, "gpm": self.gpm, "samples": self._writer.rows_written,
                "interval_ms": self.interval_ms, **self.meta, "source": "dcgm", "url": self.url,
                "scrapes": self.scrapes, "failures": self.failures,
                "page": {"hostnames": sorted(self.hostnames), "uuids": sorted(self.uuids),
                         "max_pods_per_gpu": dict(sorted(self.max_pods.items())), "virtual_gpus": self.virtual_gpus},
                "exporter_interval_ms": self.exporter_interval_ms(),
                "stamped": "each exporter sample at the first scrape that showed it"}

    def _open(self) -> None:
        if consolidated_path(self.out_path).exists() or part_paths(self.out_path):
            raise TelemetryError(f"telemetry output {self.out_path} already exists; raw data is never overwritten")
        self.out_path.parent.mkdir(parents=True, exist_ok=True)
        self._writer = PartWriter(self.out_path, COLUMNS)
        write_status(self.out_path, self._status(final=False))

    def run(self, *, stop_file: str | os.PathLike | None = None, max_scrapes: int | None = None,
            duration_s: float | None = None) -> dict[str, Any]:
        """Scrape on a fixed grid until stopped; returns (and writes) the final status."""
        if self._writer is None:
            self._open()
        stop = Path(stop_file) if stop_file else None
        interval_s = self.interval_ms / 1000.0
        t0 = last_flush = time.monotonic()
        try:
            while not self._stop.is_set():
                self.poll_once()
                if time.monotonic() - last_flush >= self.flush_s:
                    self._writer.flush()
                    last_flush = time.monotonic()
                    write_status(self.out_path, self._status(final=False))
                if max_scrapes is not None and self.scrapes >= max_scrapes:
                    break
                if duration_s is not None and time.monotonic() - t0 >= duration_s:
                    break
                if stop is not None and stop.exists():
                    break
                now = time.monotonic()
                wait = interval_s - ((now - t0) % interval_s)
                if self._stop.wait(wait):
                    break
        except Exception as exc:  # never raise into the experiment
            self.failures += 1
            self.last_error = f"scraper failed: {type(exc).__name__}: {exc}"
        return self._finish()

    def _finish(self) -> dict[str, Any]:
        try:
            self._writer.flush()
            self._writer.consolidate()
        except Exception as exc:
            self.failures += 1
            self.last_error = f"could not write telemetry: {type(exc).__name__}: {exc}"
        self.result = write_status(self.out_path, self._status(final=True))
        return self.result

    def start(self) -> DcgmScraper:
        """Scrape in a background daemon thread until ``stop()``."""
        if self._thread is not None:
            raise TelemetryError("scraper already started")
        self._open()
        self._thread = threading.Thread(target=self.run, name="kts-dcgm-scraper", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 10.0) -> dict[str, Any]:
        """Stop the thread; returns the status dict (the thread's, or "partial" if it hung)."""
        if self._thread is None:
            raise TelemetryError("scraper was never started")
        self._stop.set()
        self._thread.join(timeout_s)
        if self.result is None:  # the thread is stuck in a scrape: report without it
            st = self._status(final=True)
            st.update(status="partial" if st["samples"] else "absent", reason="scraper thread did not stop in time")
            self.result = write_status(self.out_path, st)
        return self.result

    def __enter__(self) -> DcgmScraper:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
