"""Kubernetes backend: a scenario's tenants as Jobs on one GPU node; logs land where the local backend puts them.

What a tenant pays on a cluster is more than the GPU time-slice: before its first kernel a pod may wait
for *admission* (quota, e.g. Kueue), for *placement* (a node with a free GPU replica) and for *start-up*
(image pull, container creation). The API server timestamps each step (one-second resolution); the
backend records them per pod and ``analyse.waits.layered_waits`` turns them into a table.

Modules, each with one job:

* ``names``   — labels, names and the checks that an object is the kit's own;
* ``api``     — ``KubeApi``, the only code that calls the API server, and the kubeconfig loader;
* ``nodes``   — what a node advertises (GPUs, replicas, sharing strategy);
* ``jobs``    — the Job manifest of one tenant;
* ``state``   — timestamps, layered waits and what a pod's status means;
* ``logs``    — pod logs followed live (nothing is lost when a padder is stopped);
* ``backend`` — ``KubernetesBackend``: one scenario from submission to clean-up;
* ``scale``   — one experiment per GPU node at once.
"""

from kts_helpers.run.backends.kubernetes.backend import KubernetesBackend
from kts_helpers.run.backends.kubernetes.scale import ScaleOutResult, nodes_summary, scale_out

__all__ = ["KubernetesBackend", "ScaleOutResult", "nodes_summary", "scale_out"]
