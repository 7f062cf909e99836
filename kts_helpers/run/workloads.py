"""Workload names: the built-in ones, a user's ``module:factory``, entry points, and the pre-flight that builds them.

Why its own module: ``run/spec.py`` decides which names are workloads and what their tenants are called, and the
runner must prove that every tenant's factory builds *before* any scenario runs (a bad factory found at the second
tenant's baseline wastes the first one's). The factory API itself lives with the worker (``workers/kts_worker.py``,
"the workload API"), which imports only torch and the standard library.

The pre-flight runs the worker with ``--check`` in a subprocess per tenant (never in this process: a CUDA context
held by the orchestrator would be one more context on the GPU it measures). Each check builds the workload on the
run's device, checks that ``step()`` gives (phase, callable) pairs and runs one iteration; a failure becomes one
line naming the tenant. The kit's own fft/gemm/llm/noop are not checked (tested, and they import nothing).
Imports only the standard library: the runner must work on a bare GPU host.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Sequence
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from kts_helpers.errors import SpecError
from kts_helpers.run.environment import WORKER

KIT_WORKLOADS = ("fft", "gemm", "llm", "noop")  # kts_worker.WORKLOADS
REAL_MODELS = ("llama-decode", "bert", "vit", "resnet", "train-step")  # kts_workload.REAL_MODELS (workers/)
ENTRY_POINT_GROUP = "kts.workloads"  # kts_worker.ENTRY_POINT_GROUP
_FACTORY = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
PREFLIGHT_TIMEOUT_S = 600.0  # a 1 B-parameter model builds in seconds on a GPU; a first CUDA start can take a minute


def is_factory(name: str) -> bool:
    """``package.module:factory``."""
    return bool(_FACTORY.match(name))


def entry_point_names() -> set[str]:
    return {ep.name for ep in entry_points(group=ENTRY_POINT_GROUP)}


def unknown_workloads(names: Sequence[str], *, local: bool = True) -> list[str]:
    """The names that are no workload: not built in, not ``module:factory``, no ``kts.workloads`` entry point on
    this host (on a cluster the image's entry points are not visible here: name them as ``module:factory``)."""
    known = set(KIT_WORKLOADS) - {"noop"} | set(REAL_MODELS)
    eps = entry_point_names() if local and any(n not in known and not is_factory(n) for n in names) else set()
    return [n for n in names if n not in known and not is_factory(n) and n not in eps]


def base_name(workload: str) -> str:
    """A tenant's name for a workload: itself, or a factory's own name (``my_pkg.tenants:make_bert`` -> ``bert``)."""
    if not is_factory(workload):
        return workload
    attr = workload.rpartition(":")[2].rpartition(".")[2]
    attr = attr[5:] if attr.startswith("make_") and len(attr) > 5 else attr
    return re.sub(r"[^a-z0-9-]+", "-", attr.lower()).strip("-") or "tenant"


def needs_preflight(workload: str) -> bool:
    return workload not in KIT_WORKLOADS


def preflight(tenants: Sequence[Any], device: str, *, python: str = sys.executable, worker: Path | None = None,
              env: dict[str, str] | None = None, timeout_s: float = PREFLIGHT_TIMEOUT_S) -> list[str]:
    """Build every tenant's workload once (``kts_worker --check``, all at once); raise one ``SpecError`` whose
    lines name each tenant that fails. Returns the workers' ok lines."""
    todo = [t for t in tenants if needs_preflight(t.workload)]
    procs = {}
    for t in todo:
        e = dict(os.environ if env is None else env)
        e.update(t.env())
        e.update({"DEVICE": device, "PYTHONUNBUFFERED": "1"})
        procs[t.name] = subprocess.Popen([python, str(worker or WORKER), "--check", "--warmup", "0"], env=e,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                         text=True)
    ok, bad = [], []
    for name, proc in procs.items():
        try:
            out, err = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            bad.append(f"tenant {name}: its workload did not build within {timeout_s:g} s")
            continue
        if proc.returncode == 0:
            ok.append(out.strip().splitlines()[-1] if out.strip() else f"tenant {name}: ok")
            continue
        lines = [ln for ln in err.strip().splitlines() if ln.startswith("kts_worker:")]
        tail = err.strip().splitlines()[-1] if err.strip() else f"exit {proc.returncode}"
        bad.append((lines[-1] if lines else f"tenant {name}: {tail}").removeprefix("kts_worker: "))
    if bad:
        raise SpecError("workload pre-flight failed (no scenario was run): " + "; ".join(bad))
    return ok
