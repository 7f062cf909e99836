"""Several GPU nodes: one experiment per node at once, each into its own run directory."""

from __future__ import annotations

import os
import queue
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import Any

from kts_helpers.errors import KtsError, SpecError
from kts_helpers.run.backends.kubernetes.api import load_api_client
from kts_helpers.run.backends.kubernetes.backend import KubernetesBackend
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
              **backend_kwargs: Any) -> list[ScaleOutResult]:
    """Run experiments in parallel, one per GPU node (matching ``node_selector``), each into its own run.

    Each experiment goes through the kit's one runner (``experiment.run_experiment``: calibration,
    capacity check, time limits), with a backend pinned to its node. With more experiments than nodes,
    each node takes the next experiment when it is free. A failed experiment is reported in its
    result (its run directory says why) and the others go on.
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
    nodes = [n.name for n in probe.gpu_nodes()]
    if not nodes:
        probe.pick_node()  # raises the explanatory error
    free: queue.Queue[str] = queue.Queue()
    for n in nodes:
        free.put(n)

    def one(index: int, p: ExperimentParams) -> ScaleOutResult:
        from kts_helpers.run.experiment import run_experiment

        node = free.get()
        try:
            backend = KubernetesBackend(api_client=api_client, node_selector=node_selector, node_name=node,
                                        **backend_kwargs)
            run = runner(p, backend) if runner is not None else run_experiment(p, backend=backend, root=root,
                                                                                progress=progress)
            m = run.read()
            status = "complete" if m.status == "complete" else "failed"
            return ScaleOutResult(index, node, str(run.path), status, "" if status == "complete" else
                                  (m.error or m.status))
        except KtsError as exc:
            return ScaleOutResult(index, node, None, "failed", str(exc))
        finally:
            free.put(node)

    with ThreadPoolExecutor(max_workers=len(nodes), thread_name_prefix="kts-node") as pool:
        futures = [pool.submit(one, i, p) for i, p in enumerate(params)]
        return [f.result() for f in futures]


def nodes_summary(results: Iterable[ScaleOutResult]) -> str:
    """One line per experiment, for the notebook."""
    return "\n".join(f"#{r.index} on {r.node}: {r.status} {r.run_path or ''} {r.error}".rstrip() for r in results)
