"""GPU telemetry capture: an NVML/GPM sampler process, a DCGM-exporter scraper, and their on-disk store.

Reading the store back, the time join to iterations and the clock checks are analysis:
``kts_helpers.analyse.telemetry``.

Importing this package is cheap (standard library only): pyarrow, pandas and prometheus_client
are imported inside the functions that need them, so the sampler process starts fast on a
bare GPU host.
"""

from __future__ import annotations

from kts_helpers.run.telemetry._store import (
    CORE_COLUMNS,
    DCGM_LABEL_COLUMNS,
    GPM_COLUMNS,
    SCHEMA_COLUMNS,
    TelemetryError,
    consolidated_path,
    part_paths,
    read_status,
    read_table,
    status_path,
    write_status,
)
from kts_helpers.run.telemetry.dcgm import DcgmScraper, page_check, parse_dcgm_text, scrape_dcgm
from kts_helpers.run.telemetry.nvml import TelemetrySampler, run_sampler

__all__ = [
    "CORE_COLUMNS",
    "DCGM_LABEL_COLUMNS",
    "GPM_COLUMNS",
    "SCHEMA_COLUMNS",
    "DcgmScraper",
    "TelemetryError",
    "TelemetrySampler",
    "consolidated_path",
    "page_check",
    "parse_dcgm_text",
    "part_paths",
    "read_status",
    "read_table",
    "run_sampler",
    "scrape_dcgm",
    "status_path",
    "write_status",
]
