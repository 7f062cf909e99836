"""``python -m kts_helpers.k8s_smoke``: a tiny experiment against the cluster the kubeconfig points to.

For users with a cluster: it checks in a minute or two that the whole path works (permissions,
node and device plugin, image, start barrier, logs, cleanup) before a thirty-minute run finds out.
It runs the "tiny" profile (fft + gemm: two baselines and one shared scenario) into a new run
directory, prints what Kubernetes sees and the layered waits, and exits non-zero with a one-line
error when anything is wrong. ``--cleanup`` only removes kit Jobs (of any run) older than ``--older-than``
hours, and nothing that is not the kit's.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence

from kts_helpers.analyse.waits import layered_waits
from kts_helpers.errors import KtsError, run_command
from kts_helpers.run.backends.kubernetes import KubernetesBackend
from kts_helpers.run.experiment import run_kind, setup_run
from kts_helpers.run.runs import DEFAULT_ROOT
from kts_helpers.run.spec import ExperimentParams


def _parser() -> argparse.ArgumentParser:
    env = os.environ.get
    p = argparse.ArgumentParser(prog="python -m kts_helpers.k8s_smoke", description=__doc__.splitlines()[0])
    p.add_argument("--namespace", default=env("K8S_NAMESPACE") or "kts")
    p.add_argument("--image", default=env("IMAGE") or "kts-worker:latest")
    p.add_argument("--kubeconfig", default=None, help="default: $KUBECONFIG or ~/.kube/config, else in-cluster")
    p.add_argument("--context", default=env("K8S_CONTEXT") or None)
    p.add_argument("--node-selector", default=env("K8S_NODE_SELECTOR") or None, help="e.g. nvidia.com/gpu.present=true")
    p.add_argument("--queue", default=env("K8S_QUEUE") or None, help="Kueue LocalQueue name (optional)")
    p.add_argument("--runtime-class", default=env("K8S_RUNTIME_CLASS") or None, help="e.g. nvidia on K3s")
    p.add_argument("--workloads", default=env("K8S_WORKLOADS") or "fft,gemm",
                   help="the tenants (one: its baseline only; two or more: baselines and the shared scenario)")
    p.add_argument("--timeout", type=float, default=600.0, help="seconds per scenario")
    p.add_argument("--start-delay", type=float, default=10.0,
                   help="seconds from every tenant ready to their start (covers the kubelet's sync of the pod on "
                        "its go annotation)")
    p.add_argument("--node", default=env("K8S_NODE") or None,
                   help="the GPU node (needed with the namespaced Role alone, with --gpu-replicas)")
    p.add_argument("--gpu-replicas", default=env("K8S_GPU_REPLICAS") or None,
                   help="replicas of the node's one GPU, when the kit may not read nodes")
    p.add_argument("--cluster-pod-list", action="store_true", default=(env("K8S_CLUSTER_POD_LIST") or "") in
                   ("1", "true", "yes"), help="look for other GPU pods in every namespace (opt-in ClusterRole)")
    p.add_argument("--worker-device", default=env("K8S_WORKER_DEVICE") or "cuda", choices=("cuda", "cpu"),
                   help="the workers' device: cpu on a cluster without GPUs (manifests/kind/run-kind.sh)")
    p.add_argument("--device-plugin-config", default=env("K8S_DEVICE_PLUGIN_CONFIG") or None,
                   help="<namespace>/<configmap>[/<default key>]: the device plugin's ConfigMap, read to verify the "
                        "replicas (needs the opt-in Role of manifests/components/device-plugin-config)")
    p.add_argument("--priority-classes", default=env("K8S_PRIORITY_CLASSES") or "kts-tenant,kts-placeholder",
                   help="the tenants' and the placeholders' PriorityClasses (manifests/base), or none")
    p.add_argument("--root", default=str(DEFAULT_ROOT))
    p.add_argument("--cleanup", action="store_true",
                   help="only delete kit Jobs older than --older-than hours in the namespace, then exit")
    p.add_argument("--older-than", type=float, default=24.0, metavar="HOURS",
                   help="with --cleanup: the age in hours above which kit Jobs are deleted (default 24)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    return run_command(lambda: _smoke(args), prog="kts k8s-smoke",
                       interrupted="interrupted (the scenario's Jobs were deleted)")


def _smoke(args: argparse.Namespace) -> int:
    backend = KubernetesBackend(namespace=args.namespace, image=args.image, kubeconfig=args.kubeconfig,
                                context=args.context, node_selector=args.node_selector, queue_name=args.queue,
                                runtime_class=args.runtime_class, start_delay_s=args.start_delay,
                                node_name=args.node, gpu_replicas=args.gpu_replicas,
                                cluster_pod_list=args.cluster_pod_list, worker_device=args.worker_device,
                                device_plugin_config=args.device_plugin_config,
                                priority_classes=args.priority_classes)
    if args.cleanup:
        removed = backend.cleanup_older_than(args.older_than * 3600.0)
        print(f"removed {len(removed)} kts Job(s) older than {args.older_than:g} h from namespace "
              f"{args.namespace}: {', '.join(removed) or '-'}")
        return 0
    info = backend.describe()
    print(f"context {info['context']} ({info['server']}), namespace {info['namespace']}, node {info['node']}")
    print(f"{info['summary']} ({info['gpu_resource']}, sharing: {info['sharing_strategy'] or 'unknown'}, "
          f"replicas: {info['replicas'] or 'unset'}, {info['product'] or 'unknown GPU'})")
    for warning in info["warnings"]:
        print(f"warning: {warning}")
    workloads = tuple(w.strip() for w in args.workloads.split(",") if w.strip())
    params = ExperimentParams(profile="tiny", workloads=workloads, backend="kubernetes",
                              timeout_s=args.timeout, label="k8s-smoke")
    run, _spec, _env = setup_run(params, root=args.root, backend=backend, progress=True)
    error = ""
    try:
        for kind in ("baseline", "shared"):
            run_kind(run, kind, backend=backend)
    except KtsError as exc:
        error = str(exc)
    manifest = run.read()
    print(f"run {run.path}: {manifest.status}")
    waits = layered_waits(manifest)
    if not waits.empty:
        print(waits.drop(columns=["pod", "resolution_s"]).to_string(index=False, na_rep="-"))
    if error or manifest.status != "complete":
        print(f"kts k8s-smoke: error: {error or manifest.error or 'a scenario failed'}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
