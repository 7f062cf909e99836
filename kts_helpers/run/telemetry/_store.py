"""Where telemetry lands on disk: Parquet part files, a status JSON, and a reader for both.

Layout for ``--out DIR/tel.parquet``::

    DIR/tel.part000.parquet, DIR/tel.part001.parquet, ...   flushed every few seconds (atomic)
    DIR/tel.status.json                                      status, reason, gpm, samples, ...
    DIR/tel.parquet                                          all parts, written on a clean stop

Parts are written whole (temp file + rename), so a sampler killed mid-run leaves only
complete parts behind. On a clean stop the parts are consolidated into ``tel.parquet``
(atomically) and then removed; a reader prefers the consolidated file and otherwise
concatenates the parts. Standard library only at import time: pyarrow is imported when a
part is written or read, so ``import kts_helpers.run.telemetry`` stays cheap.
"""

from __future__ import annotations

import io
import json
import os
import re
from pathlib import Path
from typing import Any

from kts_helpers.errors import KtsError
from kts_helpers.fsutil import atomic_write_bytes, atomic_write_json

# The telemetry schema shared by the NVML sampler and the DCGM scraper: column -> Arrow type name.
CORE_COLUMNS: dict[str, str] = {
    "ts_ns": "int64",  # epoch ns when the sample was taken (same clock as the worker's start_ns)
    "gpu_index": "int64",
    "gpu_util_pct": "float64",
    "mem_util_pct": "float64",
    "sm_clock_mhz": "float64",
    "mem_clock_mhz": "float64",
    "power_w": "float64",
    "mem_used_mib": "float64",
    # the GPU's compute processes, JSON list of {"pid": int, "used_mib": float|null, "name": str|null} (one column keeps
    # parts self-contained; ``expand_processes`` turns it into a long table)
    "procs_json": "string",
}
GPM_COLUMNS: dict[str, str] = {
    "sm_util_pct": "float64",
    "sm_occupancy_pct": "float64",
    "dram_bw_util_pct": "float64",
}
DCGM_LABEL_COLUMNS: dict[str, str] = {
    "uuid": "string",
    "model_name": "string",
    "hostname": "string",
    "pod": "string",
    "namespace": "string",
    "container": "string",
    "vgpu": "string",  # the replica's index with KUBERNETES_VIRTUAL_GPUS=true (one series per pod)
}
SCHEMA_COLUMNS: dict[str, str] = {**CORE_COLUMNS, **GPM_COLUMNS}
STATUSES = ("complete", "partial", "absent")


class TelemetryError(KtsError):
    """Telemetry could not be read, scraped or joined; the message says which and why."""


def base_of(out_path: str | os.PathLike) -> Path:
    """``DIR/tel.parquet`` -> ``DIR/tel`` (the stem every sibling file is named from)."""
    p = Path(out_path)
    return p.with_suffix("") if p.suffix == ".parquet" else p


def status_path(out_path: str | os.PathLike) -> Path:
    b = base_of(out_path)
    return b.with_name(b.name + ".status.json")


def consolidated_path(out_path: str | os.PathLike) -> Path:
    b = base_of(out_path)
    return b.with_name(b.name + ".parquet")


def _numbered_parts(out_path: str | os.PathLike) -> list[tuple[int, Path]]:
    b = base_of(out_path)
    rx = re.compile(re.escape(b.name) + r"\.part(\d+)\.parquet$")
    found = []
    if b.parent.is_dir():
        for p in b.parent.iterdir():
            m = rx.match(p.name)
            if m:
                found.append((int(m.group(1)), p))
    return sorted(found)


def part_paths(out_path: str | os.PathLike) -> list[Path]:
    """Part files in write order (sorted by number, not by name, so part1000 follows part999)."""
    return [p for _, p in _numbered_parts(out_path)]


def _arrow_schema(columns: dict[str, str]):
    import pyarrow as pa  # pyarrow: the sampler process starts without it (bare GPU host)

    types = {"int64": pa.int64(), "float64": pa.float64(), "string": pa.string()}
    return pa.schema([(name, types[t]) for name, t in columns.items()])


class PartWriter:
    """Buffers row dicts and writes them as numbered, atomically renamed Parquet parts."""

    def __init__(self, out_path: str | os.PathLike, columns: dict[str, str]):
        self.out_path = Path(out_path)
        self.columns = dict(columns)
        self.buffer: list[dict[str, Any]] = []
        self.rows_written = 0
        existing = _numbered_parts(out_path)
        self._next = existing[-1][0] + 1 if existing else 0  # never overwrite a part already there

    def add(self, row: dict[str, Any]) -> None:
        self.buffer.append(row)

    def flush(self) -> Path | None:
        """Write the buffered rows as the next part; a no-op when the buffer is empty."""
        if not self.buffer:
            return None
        import pyarrow as pa  # pyarrow: the sampler process starts without it (bare GPU host)
        import pyarrow.parquet as pq  # pyarrow: the sampler process starts without it (bare GPU host)

        schema = _arrow_schema(self.columns)
        table = pa.Table.from_pylist([{c: r.get(c) for c in self.columns} for r in self.buffer], schema=schema)
        sink = io.BytesIO()
        pq.write_table(table, sink)
        b = base_of(self.out_path)
        path = b.with_name(f"{b.name}.part{self._next:03d}.parquet")
        atomic_write_bytes(path, sink.getvalue())
        self._next += 1
        self.rows_written += len(self.buffer)
        self.buffer.clear()
        return path

    def consolidate(self) -> Path | None:
        """Write all parts as one ``PATH.parquet`` (atomically), then remove the parts."""
        parts = part_paths(self.out_path)
        if not parts:
            return None
        import pyarrow as pa  # pyarrow: the sampler process starts without it (bare GPU host)
        import pyarrow.parquet as pq  # pyarrow: the sampler process starts without it (bare GPU host)

        table = pa.concat_tables([pq.read_table(p) for p in parts], promote_options="default")
        sink = io.BytesIO()
        pq.write_table(table, sink)
        dest = atomic_write_bytes(consolidated_path(self.out_path), sink.getvalue())
        for p in parts:
            p.unlink(missing_ok=True)
        return dest


def write_status(out_path: str | os.PathLike, status: dict[str, Any]) -> dict[str, Any]:
    if status.get("status") not in STATUSES:
        raise ValueError(f"status must be one of {STATUSES}, got {status.get('status')!r}")
    atomic_write_json(status_path(out_path), status)
    return status


def read_status(out_path: str | os.PathLike) -> dict[str, Any] | None:
    """The status JSON, or None when the sampler never wrote one."""
    p = status_path(out_path)
    try:
        return json.loads(p.read_text())
    except FileNotFoundError:
        return None
    except (ValueError, OSError) as exc:
        raise TelemetryError(f"telemetry status {p} is unreadable: {exc}") from None


def read_table(out_path: str | os.PathLike):
    """All rows as one Arrow table (consolidated file if present, else the parts), or None."""
    import pyarrow as pa  # pyarrow: the sampler process starts without it (bare GPU host)
    import pyarrow.parquet as pq  # pyarrow: the sampler process starts without it (bare GPU host)

    cons = consolidated_path(out_path)
    paths = [cons] if cons.is_file() else part_paths(out_path)
    if not paths:
        return None
    try:
        tables = [pq.read_table(p) for p in paths]
    except (OSError, pa.ArrowInvalid) as exc:
        raise TelemetryError(f"telemetry file under {base_of(out_path)} is unreadable: {exc}") from None
    return pa.concat_tables(tables, promote_options="default")


def count_rows(out_path: str | os.PathLike) -> int:
    """Rows on disk, from Parquet footers only (cheap; used to report what a dead sampler left)."""
    import pyarrow.parquet as pq  # pyarrow: the sampler process starts without it (bare GPU host)

    cons = consolidated_path(out_path)
    paths = [cons] if cons.is_file() else part_paths(out_path)
    n = 0
    for p in paths:
        try:
            n += pq.ParquetFile(p).metadata.num_rows
        except Exception:  # a torn file counts as zero rows, never an error here
            continue
    return n
