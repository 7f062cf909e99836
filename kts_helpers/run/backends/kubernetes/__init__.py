"""Kubernetes backend: each scenario one Indexed Job on one GPU node; logs land where the local backend puts them.

What a tenant pays on a cluster is more than the GPU time-slice: before its first kernel a pod may wait
for *admission* (quota, e.g. Kueue), for *placement* (a node with a free GPU replica) and through
*start-up* (image pull, container start, CUDA init, warm-up), then at the start barrier (``barrier``).
The API server timestamps the first steps (one-second resolution), the worker its own; the backend
records both per pod and ``analyse.waits.layered_waits`` turns them into a table.

Modules, each with one job:

* ``names``     — labels, names and the checks that an object is the kit's own;
* ``clock``     — the time source (the tests' emulator hands in a fake one) and API timestamps;
* ``api``       — ``KubeApi``, the only code that calls the API server, and the kubeconfig loader;
* ``nodes``     — what a node advertises (GPUs, replicas, sharing strategy);
* ``lease``     — the node Lease: one client measures on a GPU node at a time;
* ``jobs``      — the Indexed Job of a scenario;
* ``state``     — what the Job, the Workload, the pods and the node say; the timestamps of a tenant;
* ``barrier``   — the start barrier: the tenants start together once every one is ready, on the node's clock;
  the go is a pod annotation read through a downwardAPI volume (why: its docstring);
* ``logs``      — pod logs followed live (nothing is lost when a padder is stopped) and checked for gaps
  (a log rotation can drop unread bytes: the scenario then fails);
* ``lifecycle`` — one scenario from submission (or re-attachment) to its logs;
* ``replica_probe`` — one replica more than stated, which must stay Pending: the stated replicas proven without
  reading the node;
* (``run.interrupts``: SIGTERM handled as Ctrl-C while a scenario runs: stop, collect, clean up, release the Lease);
* ``backend``   — ``KubernetesBackend``: node choice (taints), exclusivity (the Lease, placeholder indexes that
  hold the GPU's other replicas, strangers looked for during and after the run), least privilege (the
  namespaced Role is enough), clean-up, the scenario's record.

The backend runs one scenario at a time; experiments over several GPU nodes (scale-out) are run at the
experiment level, by ``kts_helpers.run.scale``.
"""

from kts_helpers.run.backends.kubernetes.backend import KubernetesBackend
from kts_helpers.run.backends.kubernetes.clock import parse_time
from kts_helpers.run.backends.kubernetes.names import RESOLUTION_S

# ``parse_time`` and ``RESOLUTION_S`` are public (stable names) for analyse.waits: API timestamps and their
# resolution, read without reaching into the backend's modules.
__all__ = ["RESOLUTION_S", "KubernetesBackend", "parse_time"]
