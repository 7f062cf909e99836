"""GPU telemetry: an NVML/GPM sampler process, a DCGM-exporter scraper, the time join, clock checks.

Importing this package is cheap (standard library only): pyarrow, pandas and prometheus_client
are imported inside the functions that need them, so the sampler process starts fast on a
bare GPU host.
"""

from __future__ import annotations

from ._store import (
    CORE_COLUMNS,
    DCGM_LABEL_COLUMNS,
    GPM_COLUMNS,
    SCHEMA_COLUMNS,
    TelemetryError,
    consolidated_path,
    part_paths,
    read_status,
    status_path,
)
from .dcgm import DcgmScraper, parse_dcgm_text, scrape_dcgm
from .join import (
    ClockReport,
    attach_telemetry,
    clock_report,
    expand_processes,
    load_telemetry,
    load_telemetry_status,
)
from .nvml import TelemetrySampler, run_sampler

__all__ = [
    "CORE_COLUMNS",
    "DCGM_LABEL_COLUMNS",
    "GPM_COLUMNS",
    "SCHEMA_COLUMNS",
    "ClockReport",
    "DcgmScraper",
    "TelemetryError",
    "TelemetrySampler",
    "attach_telemetry",
    "clock_report",
    "consolidated_path",
    "expand_processes",
    "load_telemetry",
    "load_telemetry_status",
    "parse_dcgm_text",
    "part_paths",
    "read_status",
    "run_sampler",
    "scrape_dcgm",
    "status_path",
]
