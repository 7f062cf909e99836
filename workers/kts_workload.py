"""Which factory a workload name stands for, and a check that what it built keeps the API.

A workload is named in ``workloads=`` as a built-in name (``fft``, ``gemm``, ``llm``, ``noop``; the real
architectures ``llama-decode``, ``bert``, ``vit``, ``resnet``, ``train-step`` from ``kts_models.py``), as
``package.module:factory`` (imported from the worker's ``PYTHONPATH``), or as the name of an entry point in the
group ``kts.workloads``. The factory gets ``(torch, device, params)``: ``params`` holds ``size`` (the run's
matrix size), ``seed``, ``device_type`` ("cuda"/"cpu") and the run's ``workload_params`` for this tenant
(``KTS_WORKLOAD_PARAMS``, a JSON object) on top. ``step()`` returns one iteration's operations in order as
``(phase, callable)`` pairs; the kit times each callable (on CUDA between two events and a synchronize) and
prints one line per pair. Allocate in the factory, not in the callables.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

from kts_api import PAD_PHASE, Workload, WorkloadError
from kts_builtin import WORKLOADS

ENTRY_POINT_GROUP = "kts.workloads"
EXIT_BAD_WORKLOAD = 4
REAL_MODELS = ("llama-decode", "bert", "vit", "resnet", "train-step")  # kts_models.py (transformers, lazily)


def find_factory(name: str) -> Callable:
    """The factory a workload name stands for: built in, ``module:factory``, or a ``kts.workloads`` entry point."""
    if name in WORKLOADS:
        return WORKLOADS[name]
    if name in REAL_MODELS:
        sys.path.insert(0, str(Path(__file__).resolve().parent))  # kts_models.py sits beside this file
        try:
            import kts_models
        except ImportError as exc:
            raise WorkloadError(f"the real-model workloads need kts_models.py beside the worker ({exc})") from None
        return kts_models.FACTORIES[name]
    if ":" in name:
        module, _, attr = name.partition(":")
        try:
            obj = importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - any import failure is the user's, reported in one line
            raise WorkloadError(f"cannot import {module!r} ({type(exc).__name__}: {exc}); is it on PYTHONPATH "
                                "(or in the image)?") from None
        for part in attr.split("."):
            if not hasattr(obj, part):
                raise WorkloadError(f"module {module!r} has no {attr!r}")
            obj = getattr(obj, part)
        if not callable(obj):
            raise WorkloadError(f"{name} is not callable (a factory takes torch, device, params)")
        return obj
    from importlib.metadata import entry_points

    found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    if found:
        try:
            return found[0].load()
        except Exception as exc:  # noqa: BLE001
            raise WorkloadError(f"entry point {name!r} ({found[0].value}) fails to load ({type(exc).__name__}: "
                                f"{exc})") from None
    raise WorkloadError(f"unknown workload {name!r}: not built in ({', '.join([*WORKLOADS, *REAL_MODELS])}), not "
                        f"module:factory, and no entry point of that name in the group {ENTRY_POINT_GROUP!r}")


def checked_workload(obj: object) -> Workload:
    """The factory's result as a :class:`Workload`, once its ``step()`` is seen to give (phase, callable) pairs."""
    name, step = getattr(obj, "name", None), getattr(obj, "step", None)
    if not isinstance(name, str) or not callable(step):
        raise WorkloadError(f"the factory returned {type(obj).__name__}, not a Workload (name: str, step: callable)")
    w = obj if isinstance(obj, Workload) else Workload(
        name, step, float(getattr(obj, "flops_per_op", 0.0) or 0.0), float(getattr(obj, "bytes_per_op", 0.0) or 0.0),
        dict(getattr(obj, "notes", None) or {}))
    try:
        ops = list(w.step())
    except Exception as exc:  # noqa: BLE001
        raise WorkloadError(f"its step() raised {type(exc).__name__}: {exc}") from None
    bad = [op for op in ops if not (isinstance(op, tuple) and len(op) == 2 and isinstance(op[0], str) and op[0]
                                    and op[0] != PAD_PHASE and "," not in op[0] and callable(op[1]))]
    if not ops or bad:
        what = "nothing" if not ops else repr(bad[0])[:80]
        raise WorkloadError(f"its step() must return (phase, callable) pairs (phase: a name without commas, not "
                            f"{PAD_PHASE!r}); it gave {what}")
    return w


def build_workload(name: str, torch, device, params: dict) -> Workload:
    """Find the factory, call it, check what it returns (each failure a :class:`WorkloadError`, one line)."""
    factory = find_factory(name)
    try:
        made = factory(torch, device, dict(params))
    except WorkloadError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise WorkloadError(f"its factory raised {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
                            ) from None
    return checked_workload(made)


def workload_params(args: argparse.Namespace, device) -> dict:
    """What a factory gets: the run's size and seed, the device type, and ``KTS_WORKLOAD_PARAMS`` on top."""
    raw = os.environ.get("KTS_WORKLOAD_PARAMS") or "{}"
    try:
        extra = json.loads(raw)
    except ValueError:
        extra = None
    if not isinstance(extra, dict):
        raise WorkloadError(f"KTS_WORKLOAD_PARAMS must be a JSON object, got {raw[:60]!r}")
    return {"size": args.matrix_size, "seed": args.seed, "device_type": device.type, **extra}
