"""The tenant's contract with the kit: the workload API and the log line format.

Why a module of its own: the built-in workloads, the real models (``kts_models.py``) and a user's factory all
return a :class:`Workload`, and the harness prints the lines; each imports this small file and nothing of the
harness, so no module of the worker imports another in a circle. Standard library only: a container copies
``workers/`` and installs torch, nothing else.

Line format (documented in docs/guide/runs.md; ``kts_helpers/run/logformat.py`` parses it, a test round-trips
the two):

    KTS_APP,v2,<workload>,<tenant>,<iteration>,<phase>,<intended_ns>,<start_ns>,<end_ns>,<device_ms>,<wall_ms>

* ``intended_ns``: when the operation was due (open-loop arrivals); equals ``start_ns`` in closed loop.
* ``start_ns``/``end_ns``: host epoch clock (``time.time_ns``) just before launch and just after completion.
* ``device_ms``: CUDA-event time on the GPU (on CPU: the operation's own time, launch to completion).
* ``wall_ms``: host monotonic clock from launch to completion (``perf_counter_ns``).

``KTS_META,v2,<json>`` precedes a block's iterations (parameters, device and GPU UUID, work per op, and under
the warm design the block it belongs to); ``KTS_END,v2,<json>`` ends its timed part; ``KTS_LOOK`` marks an
interim look.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field

LINE_VERSION = "v2"  # the line's layout: a copy of kts_helpers/run/logformat.py (a test round-trips the two)
APP_TAG, META_TAG, END_TAG, LOOK_TAG = "KTS_APP", "KTS_META", "KTS_END", "KTS_LOOK"
PAD_PHASE = "pad"

# ----------------------------------------------------------------------------- the workload API
# A tenant's workload is built once per worker by a *factory*: ``factory(torch, device, params) -> Workload``.
# This API is stable (documented in docs/guide/workloads.md, whose factory imports ``from kts_worker import Workload``,
# the same class; examples/ holds a factory):
#
# * ``torch``: the imported torch module; ``device``: the ``torch.device`` the worker runs on (cuda or cpu);
# * ``params``: a dict: ``size`` (the run's matrix size), ``seed``, ``device_type`` ("cuda"/"cpu"), and the run's
#   ``workload_params`` for this workload (``KTS_WORKLOAD_PARAMS``, a JSON object) on top;
# * it returns a :class:`Workload` (or any object with its attributes: ``name`` and ``step``, optionally
#   ``flops_per_op``, ``bytes_per_op``, ``notes``). ``step()`` returns one iteration's operations in order, as a
#   list of ``(phase, callable)`` pairs; the kit times each callable (on CUDA between two events and a
#   synchronize) and prints one line per pair. Allocate in the factory, not in the callables.
#
# A workload is named in ``workloads=`` as a built-in name (``fft``, ``gemm``, ``llm``, ``noop``; the real
# architectures ``llama-decode``, ``bert``, ``vit``, ``resnet``, ``train-step`` from ``kts_models.py``), as
# ``package.module:factory`` (imported from the worker's ``PYTHONPATH``), or as the name of an entry point in
# the group ``kts.workloads``. The kit keeps the harness: barrier, lead-in, padding, three clocks, looks, GPU
# identity, MPS. ``--check`` builds the workload and checks it without timing anything (the runner's pre-flight).



@dataclass
class Workload:
    """What one iteration runs, and how much work it does (for TFLOP/s and GB/s)."""

    name: str
    step: Callable[[], list[tuple[str, Callable[[], object]]]]
    flops_per_op: float = 0.0
    bytes_per_op: float = 0.0
    notes: dict = field(default_factory=dict)


class WorkloadError(Exception):
    """A workload that cannot be built or does not keep the API: one line, naming what went wrong."""


def app_line(workload: str, tenant: str, iteration: int, phase: str, intended_ns: int, start_ns: int, end_ns: int,
             device_ms: float, wall_ms: float) -> str:
    """One ``KTS_APP`` line (no newline): the fields in the contract's order, times to the nanosecond."""
    return (f"{APP_TAG},{LINE_VERSION},{workload},{tenant},{iteration},{phase},{intended_ns},{start_ns},{end_ns},"
            f"{device_ms:.6f},{wall_ms:.6f}")


def record_line(tag: str, record: dict) -> str:
    """A ``KTS_META``/``KTS_END`` line (no newline): compact JSON."""
    return f"{tag},{LINE_VERSION},{json.dumps(record, separators=(',', ':'))}"
