"""The three kinds of waiting a tenant meets on a cluster, per tenant and scenario, from the run's records.

Before its first kernel a pod may wait for *admission* (quota: Kueue), for *placement* (scheduling onto a
node with a free GPU replica) and for *start-up* (image pull, container start); then, in service, each
kernel may wait for another context's time-slice. The Kubernetes backend records the API's timestamps
(one-second resolution) per pod; this turns them into a table next to the GPU wait the workers measured.
"""

from __future__ import annotations

import pandas as pd

from kts_helpers.run.backends.kubernetes.names import RESOLUTION_S
from kts_helpers.run.backends.kubernetes.state import waits_from_events
from kts_helpers.run.manifest import RunManifest

WAIT_COLUMNS = ["scenario", "tenant", "admission_wait_s", "placement_wait_s", "startup_s", "run_s", "node", "pod",
                "resolution_s"]


def layered_waits(manifest: RunManifest) -> pd.DataFrame:
    """Admission, placement, start-up and run time per (scenario, tenant), from the run manifest.

    Scenarios run by another backend (no pod timestamps) are left out; values are seconds with
    the API's one-second resolution (``resolution_s``), NaN where a layer did not apply.
    """
    rows = []
    for scenario, record in manifest.records.items():
        if record.backend != "kubernetes":
            continue
        for tenant, ev in record.tenants.items():
            rows.append({"scenario": scenario, "tenant": tenant, **waits_from_events(ev), "node": ev.get("node"),
                         "pod": ev.get("pod"),
                         "resolution_s": ev.get("resolution_s", record.extra.get("resolution_s", RESOLUTION_S))})
    frame = pd.DataFrame(rows, columns=WAIT_COLUMNS)
    for col in ("admission_wait_s", "placement_wait_s", "startup_s", "run_s"):
        frame[col] = pd.to_numeric(frame[col], errors="coerce").astype("float64")
    return frame
