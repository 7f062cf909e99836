"""Several GPU nodes: experiments spread over the nodes a selector matches, at most one per node at a time.

Scale-out lives at the experiment level: it runs whole experiments (``experiment.run_experiment``), each
on a ``KubernetesBackend`` that runs one scenario at a time on the node it holds.

There is no queue in this process: each experiment takes a node by acquiring its Lease (the first
free one; ``KubernetesBackend.session``), holds it for all its scenarios and gives it back. The
cluster's Leases are the queue, so two scale-outs (or two users) share the nodes without knowing of
each other, and an experiment whose client died is resumed with ``kts run --resume <run_id>``.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from kts_helpers.errors import KtsError, SpecError
from kts_helpers.run.backends.kubernetes.api import load_api_client
from kts_helpers.run.backends.kubernetes.backend import KubernetesBackend
from kts_helpers.run.experiment import run_experiment
from kts_helpers.run.runs import DEFAULT_ROOT, Run
from kts_helpers.run.spec import ExperimentParams, resolve


@dataclass
class ScaleOutResult:
    """One experiment of a scale-out: where it ran and how it ended."""

    index: int
    node: str
    run_path: str | None
    status: str  # "complete" | "failed"
    error: str = ""


def scale_out(experiments: Sequence[ExperimentParams | Mapping[str, Any]], *,
              node_selector: str | Mapping[str, str] | None = None, root: str | os.PathLike = DEFAULT_ROOT,
              runner: Callable[[ExperimentParams, KubernetesBackend], Run] | None = None, progress: bool = True,
              api_client: Any = None, kubeconfig: str | os.PathLike | None = None, context: str | None = None,
              node_wait_s: float = 86400.0, **backend_kwargs: Any) -> list[ScaleOutResult]:
    """Run experiments on the GPU nodes matching ``node_selector``, each into its own run directory.

    Each experiment goes through the kit's one runner (``experiment.run_experiment``: calibration,
    capacity check, time limits) on the node whose Lease it took; with more experiments than nodes,
    the next one waits (up to ``node_wait_s``) for a node to come free. A failed experiment is reported
    in its result (its run directory says why) and the others go on.
    """
    if not experiments:
        raise SpecError("scale_out needs at least one experiment")
    params = [replace(e if isinstance(e, ExperimentParams) else ExperimentParams.from_mapping(dict(e)),
                      backend="kubernetes") for e in experiments]
    for p in params:
        if not resolve(p, "cuda").scenarios:
            raise SpecError(f"experiment {p.label or p.profile!r} has no scenarios to run")
    if api_client is None:
        api_client, ctx = load_api_client(kubeconfig, context)
        backend_kwargs.setdefault("context", ctx)
    probe = KubernetesBackend(api_client=api_client, node_selector=node_selector, **backend_kwargs)
    nodes = probe.gpu_nodes()
    if not nodes:
        probe.pick_node()  # raises the explanatory error
    pending = iter(enumerate(params))
    lock = threading.Lock()
    results: list[ScaleOutResult | None] = [None] * len(params)

    def one(index: int, p: ExperimentParams) -> ScaleOutResult:
        node = "-"
        try:
            backend = KubernetesBackend(api_client=api_client, node_selector=node_selector, **backend_kwargs)
            with backend.session(wait_s=node_wait_s, progress=progress) as node:
                run = runner(p, backend) if runner is not None else run_experiment(p, backend=backend, root=root,
                                                                                    progress=progress)
            m = run.read()
            status = "complete" if m.status == "complete" else "failed"
            return ScaleOutResult(index, node, str(run.path), status, "" if status == "complete" else
                                  (m.error or m.status))
        except KtsError as exc:
            return ScaleOutResult(index, node, None, "failed", str(exc))

    def worker() -> None:
        while True:
            with lock:
                item = next(pending, None)
            if item is None:
                return
            results[item[0]] = one(*item)

    threads = [threading.Thread(target=worker, name=f"kts-scale-{i}", daemon=True)
               for i in range(min(len(params), len(nodes)))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return [r for r in results if r is not None]


def nodes_summary(results: Iterable[ScaleOutResult]) -> str:
    """One line per experiment, for the notebook."""
    return "\n".join(f"#{r.index} on {r.node}: {r.status} {r.run_path or ''} {r.error}".rstrip() for r in results)
