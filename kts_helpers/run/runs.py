"""Run directories: one immutable directory per run, with a manifest and raw logs.

Layout::

    data/runs/<run_id>/
        manifest.json              parameters, environment, status, per-scenario outcome
        logs/<scenario>/<tenant>.log     the tenant's stdout (KTS_META / KTS_APP lines)
        logs/<scenario>/<tenant>.stderr  its stderr
        logs/<scenario>/<tenant>.pid     its process id (local backend)
        interrupted/<scenario>.<k>/      the logs of an attempt cut off before it was recorded (``kts run --resume``)

A run is created atomically (built under a temporary name, then renamed), raw logs are
never overwritten, and the manifest is only ever replaced whole while the run runs. Once it
has completed nothing writes into it again: what a rendering derives (executed notebooks,
summary tables) goes to ``report/build/<run>/<time>/``.
"""

from __future__ import annotations

import fcntl
import json
import os
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from kts_helpers.errors import RunError
from kts_helpers.fsutil import atomic_write_json
from kts_helpers.run.manifest import RunManifest

MANIFEST = "manifest.json"
FORMAT_VERSION = 2
DEFAULT_ROOT = Path("data/runs")


def new_run_id(profile: str, label: str = "") -> str:
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    slug = "".join(c if c.isalnum() or c in "-_" else "-" for c in label)[:32].strip("-")
    parts = [stamp, profile] + ([slug] if slug else []) + [secrets.token_hex(2)]
    return "-".join(parts)


@dataclass(frozen=True)
class Run:
    """A handle on one run directory."""

    path: Path

    @property
    def run_id(self) -> str:
        return self.path.name

    @property
    def manifest_path(self) -> Path:
        return self.path / MANIFEST

    def read(self) -> RunManifest:
        """The manifest, typed (what every reader uses)."""
        return RunManifest.from_dict(self.manifest(), run_id=self.run_id)

    def manifest(self) -> dict[str, Any]:
        """The manifest as stored (for writers that replace it whole)."""
        try:
            return json.loads(self.manifest_path.read_text())
        except FileNotFoundError:
            raise RunError(f"{self.path} is not a run directory (no {MANIFEST})") from None
        except json.JSONDecodeError as exc:
            raise RunError(f"{self.manifest_path} is not valid JSON: {exc}") from None

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with open(self.path / ".lock", "a+") as fh:
            fcntl.flock(fh, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(fh, fcntl.LOCK_UN)

    def update(self, **changes: Any) -> dict[str, Any]:
        """Merge top-level keys into the manifest and replace it atomically."""
        with self._locked():
            m = self.manifest()
            m.update(changes)
            m["updated_at"] = _now()
            atomic_write_json(self.manifest_path, m)
            return m

    def record_scenario(self, name: str, info: dict[str, Any]) -> dict[str, Any]:
        """Record a scenario's outcome, then settle the run's overall status."""
        with self._locked():
            m = self.manifest()
            m.setdefault("scenarios", {})[name] = info
            names = [s["name"] for s in m["spec"]["scenarios"]]
            states = [m["scenarios"].get(n, {}).get("status") for n in names]
            if any(s == "failed" for s in states):
                m["status"] = "failed"
            elif states and all(s in SETTLED for s in states) and "complete" in states:
                m["status"] = "complete"
            m["updated_at"] = _now()
            atomic_write_json(self.manifest_path, m)
            return m

    def record_look(self, look: dict[str, Any]) -> dict[str, Any]:
        """Append one ``blocks=auto`` look (its mode, blocks, level, verdicts decided, and what it did) to the
        manifest's ``looks`` list."""
        with self._locked():
            m = self.manifest()
            m.setdefault("looks", []).append(look)
            m["updated_at"] = _now()
            atomic_write_json(self.manifest_path, m)
            return m

    def log_dir(self, scenario: str) -> Path:
        return self.path / "logs" / scenario

    def log_path(self, scenario: str, tenant: str) -> Path:
        return self.log_dir(scenario) / f"{tenant}.log"

    def stderr_path(self, scenario: str, tenant: str) -> Path:
        return self.log_dir(scenario) / f"{tenant}.stderr"

    def pid_path(self, scenario: str, tenant: str) -> Path:
        """The local worker's process id, written when it starts (a resume checks it is gone)."""
        return self.log_dir(scenario) / f"{tenant}.pid"

    def claim_scenario(self, scenario: str) -> Path:
        """Create the scenario's log directory; refuse if it already holds data (never overwrite)."""
        d = self.log_dir(scenario)
        if d.exists() and any(d.iterdir()):
            raise RunError(f"scenario {scenario!r} of run {self.run_id} already has logs; runs are immutable: "
                           "start a new run instead")
        d.mkdir(parents=True, exist_ok=True)
        return d

    def set_aside_interrupted(self, scenario: str) -> Path | None:
        """Move the logs of an attempt that was cut off before its outcome was recorded out of the way.

        ``kts run --resume`` runs such a scenario again; its logs directory must be empty for that (never overwrite),
        and the cut-off attempt's logs are evidence (of what ran when the client died), so they are kept, not
        deleted: under ``interrupted/<scenario>.<k>/``, the k-th such attempt, named in the manifest's
        ``interrupted`` list. A scenario with a record is refused: its logs are the run's data. Returns where the logs
        went, or None when the attempt left none.
        """
        with self._locked():
            m = self.manifest()
            if scenario in m.get("scenarios", {}):
                raise RunError(f"scenario {scenario!r} of run {self.run_id} is recorded; its logs stay where they are")
            src = self.log_dir(scenario)
            if not src.exists() or not any(src.iterdir()):
                return None
            k = 1
            while (self.path / "interrupted" / f"{scenario}.{k}").exists():
                k += 1
            dest = self.path / "interrupted" / f"{scenario}.{k}"
            dest.parent.mkdir(exist_ok=True)
            src.rename(dest)  # one directory rename: the logs are in one place or the other, never half
            m.setdefault("interrupted", []).append({"scenario": scenario, "logs": str(dest.relative_to(self.path)),
                                                    "at": _now()})
            m["updated_at"] = _now()
            atomic_write_json(self.manifest_path, m)
            return dest

    def scenario_status(self, scenario: str) -> str | None:
        return self.manifest().get("scenarios", {}).get(scenario, {}).get("status")


# a scenario's settled states: it ran, or ``blocks=auto`` decided before it and it never needed to (``skipped``)
SETTLED = ("complete", "skipped")


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def create_run(spec_dict: dict[str, Any], environment: dict[str, Any], *, root: str | os.PathLike = DEFAULT_ROOT,
               run_id: str | None = None, label: str = "") -> Run:
    """Create a new run directory atomically. An existing run id is an error, never a reuse."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    run_id = run_id or new_run_id(spec_dict["profile"], label)
    if "/" in run_id or run_id.startswith(".") or not run_id.strip():
        raise RunError(f"invalid run id {run_id!r}")
    final = root / run_id
    if final.exists():
        raise RunError(f"run {run_id!r} already exists in {root}; runs are never overwritten")
    tmp = root / f".{run_id}.{os.getpid()}.tmp"
    (tmp / "logs").mkdir(parents=True)
    manifest = {
        "format_version": FORMAT_VERSION, "run_id": run_id, "label": label, "status": "running",
        "created_at": _now(), "created_epoch_ns": time.time_ns(), "spec": spec_dict,
        "environment": environment, "scenarios": {},
    }
    atomic_write_json(tmp / MANIFEST, manifest)
    try:
        os.rename(tmp, final)
    except OSError as exc:
        raise RunError(f"could not create run {run_id!r}: {exc}") from None
    return Run(final)


def open_run(path: str | os.PathLike) -> Run:
    """Open an existing run directory (or a committed reference run)."""
    p = Path(path)
    if not p.is_dir():
        raise RunError(f"run directory {p} does not exist")
    run = Run(p)
    m = run.manifest()
    if m.get("format_version", 1) > FORMAT_VERSION:
        raise RunError(f"{p} was written by a newer kts (format {m.get('format_version')}); upgrade kts")
    return run


def find_run(run_id_or_path: str, root: str | os.PathLike = DEFAULT_ROOT) -> Run:
    p = Path(run_id_or_path)
    if p.is_dir():
        return open_run(p)
    return open_run(Path(root) / run_id_or_path)


def latest_run(root: str | os.PathLike = DEFAULT_ROOT) -> Run:
    root = Path(root)
    runs = sorted((p for p in root.glob("*") if (p / MANIFEST).exists()), key=lambda p: p.name)
    if not runs:
        raise RunError(f"no runs in {root}")
    return Run(runs[-1])
