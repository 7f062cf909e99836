"""Regenerate the teaching notebook's example of the three kinds of waiting: a run on an EMULATED cluster.

    .venv/bin/python tests/make_k8s_example.py [data/examples/k8s-emulated-waits]

No cluster and no GPU are involved: the kit's real Kubernetes backend and runner (``run_experiment``) drive
kmock's emulator, whose fake controllers (``tests/k8s_fixtures.FakeCluster``) play Kueue, the scheduler and
the kubelet with made-up but recorded API timestamps. This script only chooses them: a Kueue queue
(admission), the GEMM's pod waiting 3 s longer for a node (placement) and an image pull of
``IMAGE_PULL_S`` seconds before every container starts (start-up). The backend records what the API says,
exactly as on a cluster; the workers' log lines are the emulator's fakes (their GPU numbers mean nothing).
The target directory is never written over.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import k8s_fixtures as kf

from kts_helpers.run.experiment import run_experiment

IMAGE_PULL_S = 30  # every pod pulls the image: seconds from "scheduled" to "container started"
ADMIT_S = 3  # Kueue admits a Job this long after it is created
INIT_S = 1  # container started -> barrier reached (torch import, CUDA init, warm-up)
LABEL = (f"EMULATED on kmock (no cluster, no GPU): Kueue admission, scheduling and a {IMAGE_PULL_S} s image pull "
         "made up by tests/k8s_fixtures.FakeCluster; the GPU numbers in its logs mean nothing")
README = f"""# k8s-emulated-waits — an EMULATED example run (no cluster, no GPU)

Made by `tests/make_k8s_example.py` (regenerate: `.venv/bin/python tests/make_k8s_example.py <new dir>`):
the kit's real Kubernetes backend and runner drove kmock's emulator, whose fake controllers
(`tests/k8s_fixtures.FakeCluster`) played Kueue, the scheduler and the kubelet. The API timestamps are made
up, chosen by the script: Kueue admits each Job {ADMIT_S} s after it is created, a pod is scheduled as soon as
the scheduler sees it (the GEMM's 3 s later: it waits longer for a node), every container starts {IMAGE_PULL_S} s
after scheduling (an image pull) and its worker reaches the start barrier {INIT_S} s later (torch import, CUDA
init, warm-up), then waits there until every tenant is ready and the start the backend then publishes
(`start_delay_s` 10 s later). The backend recorded them in `manifest.json` exactly as it does on a cluster, and
`kts_helpers.analyse.waits.layered_waits` reads them back: the teaching notebook's "three kinds of waiting"
section uses this run when no real cluster run is at hand, and says it is emulated.

The tenants' log lines are the emulator's fakes (wall = device, 5-6 ms): they measure no GPU.
"""


def make(target: Path) -> Path:
    if target.exists():
        raise SystemExit(f"make_k8s_example: {target} already exists; example runs are never written over")
    return _make(target)


def _make(target: Path) -> Path:
    def script(fc: kf.FakeCluster) -> None:
        fc.add_node(kf.gpu_node("gpu-1"))
        fc.log_iterations = 20
        fc.placement_delay_s = {"gemm": 3}
        fc.admit_after = ADMIT_S
        fc.pull_s = IMAGE_PULL_S
        fc.init_s = INIT_S

    with kf.EmulatorThread() as emu, tempfile.TemporaryDirectory() as tmp:
        emu.call(script)
        backend = emu.call(lambda fc: fc.backend(queue_name="kts-queue", schedule_timeout_s=5.0,
                                                          start_delay_s=10.0))
        run = run_experiment({"backend": "kubernetes", "profile": "tiny", "iterations": 5, "calibrate_iterations": 0,
                              "timeout_s": 60, "label": LABEL}, root=tmp, run_id=target.name, backend=backend,
                             calibrate=False, progress=False)
        if run.read().status != "complete":
            raise SystemExit(f"make_k8s_example: the emulated run ended {run.read().status!r}")
        target.mkdir(parents=True)
        shutil.copy2(run.path / "manifest.json", target / "manifest.json")
        shutil.copytree(run.path / "logs", target / "logs")
    (target / "README.md").write_text(README)
    return target


if __name__ == "__main__":
    print(make(Path(sys.argv[1] if len(sys.argv) > 1 else "data/examples/k8s-emulated-waits")))
