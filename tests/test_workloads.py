"""Any workload as a tenant: a user's factory from outside the repository, entry points, the pre-flight that fails
a bad factory before any scenario runs, the real architectures on CPU, and the profile each alone run records.

Workers start all at once (one module fixture) so their torch and transformers imports overlap.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from kts_helpers.analyse.logparse import parse_bytes
from kts_helpers.errors import SpecError
from kts_helpers.run.spec import PROFILE_ITERATIONS, ExperimentParams, resolve
from kts_helpers.run.workloads import base_name, preflight, unknown_workloads

REPO = Path(__file__).resolve().parents[1]
WORKER = REPO / "workers" / "kts_worker.py"
sys.path.insert(0, str(REPO / "workers"))
import kts_profile  # noqa: E402 - the worker's sibling, imported from its folder as the worker does

BAD = '''
def raises(torch, device, params):
    raise RuntimeError("no GPU budget for me")

def wrong_type(torch, device, params):
    return 42

def bad_step(torch, device, params):
    class W:
        name = "bad"
        def step(self):
            return [("op", 3)]
    return W()
'''


def docs_factory() -> tuple[str, str]:
    """(file name, source) of the factory the workloads guide shows: its ```python block that opens with the file's
    name as a comment, exactly as a reader would copy it."""
    import re

    page = (REPO / "docs" / "guide" / "workloads.md").read_text()
    (block,) = [b for b in re.findall(r"```python\n(.*?)```", page, re.S) if re.match(r"# \w+\.py\n", b)]
    return block.split("\n", 1)[0][2:], block


@pytest.fixture(scope="module")
def outside(tmp_path_factory):
    """A folder outside the repository holding the example factory, the docs' factory, bad factories and an entry
    point."""
    root = tmp_path_factory.mktemp("outside")
    shutil.copy(REPO / "examples" / "my_tenants.py", root / "my_tenants.py")
    name, source = docs_factory()
    (root / name).write_text(source)
    (root / "bad_tenants.py").write_text(textwrap.dedent(BAD))
    (root / "broken_import.py").write_text("import no_such_dependency_kts\n")
    dist = root / "kts_example_tenants-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: kts-example-tenants\nVersion: 0.1\n")
    # the entry point names the docs' factory: one worker runs both (an entry point, and the page's code as a tenant)
    (dist / "entry_points.txt").write_text(f"[kts.workloads]\nmlp = {name[:-3]}:make_matmul\n")
    return root


def _env(outside: Path, **kw: str) -> dict[str, str]:
    import os

    env = {k: v for k, v in os.environ.items() if not k.startswith(("KTS_", "CUDA_MPS"))}
    env.update({"PYTHONPATH": str(outside), "DEVICE": "cpu", "ITERATIONS": "3", "WARMUP": "1", "SLEEP_MS": "0",
                "THREADS": "1", "MATRIX_SIZE": "32"})
    env.update(kw)
    return env


@pytest.fixture(scope="module")
def runs(outside):
    """Every worker of this module, started at once from the outside folder (cwd), collected."""
    configs = {
        "example": ({"WORKLOAD": "my_tenants:make_mlp_server", "TENANT": "mlp-server",
                     "KTS_PROFILE_ITERATIONS": "2"}, []),
        "entry-point": ({"WORKLOAD": "mlp", "TENANT": "ep"}, []),
        "raises": ({"WORKLOAD": "bad_tenants:raises", "TENANT": "t3"}, ["--check"]),
        "llama-decode": ({"WORKLOAD": "llama-decode", "ITERATIONS": "2", "KTS_PROFILE_ITERATIONS": "1"}, []),
        "bert": ({"WORKLOAD": "bert", "ITERATIONS": "2", "KTS_PROFILE_ITERATIONS": "1"}, []),
        "vit": ({"WORKLOAD": "vit", "ITERATIONS": "2"}, []),
        "train-step": ({"WORKLOAD": "train-step", "ITERATIONS": "2"}, []),
        "model-param": ({"WORKLOAD": "llama-decode", "ITERATIONS": "1",
                         "KTS_WORKLOAD_PARAMS": '{"decode_tokens": 1, "layers": 1}'}, []),
    }
    procs = {k: subprocess.Popen([sys.executable, str(WORKER), *args], env=_env(outside, **env), cwd=outside,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for k, (env, args) in configs.items()}
    out = {}
    for k, p in procs.items():
        stdout, stderr = p.communicate(timeout=600)
        out[k] = (p.returncode, stdout, stderr)
    return out


def test_example_factory_runs_from_a_folder_outside_the_repository(runs):
    rc, stdout, stderr = runs["example"]
    assert rc == 0, stderr
    p = parse_bytes(stdout.encode())
    assert p.n == 3 * 2 and p.malformed == 0
    assert p.frame["workload"].unique().tolist() == ["my_tenants:make_mlp_server"]  # the run's name for it
    for _, grp in p.frame.groupby("iteration"):
        assert grp["phase"].tolist() == ["embed", "mlp"]
    meta = p.meta[0]
    assert meta["workload_name"] == "mlp-server" and meta["notes"]["batch"] == 32 and meta["flops_per_op"] > 0
    prof = meta["profile"]
    assert set(prof["phases"]) == {"embed", "mlp"} and 1 <= prof["iterations"] <= 2 and prof["device"] == "cpu"
    assert prof["phases"]["mlp"]["kernels_per_op"] >= 3  # three linear layers at least, as top-level operators
    kernels = prof["phases"]["mlp"]["kernels"]  # on CPU: the operators' lengths, no launch fields
    assert kernels["n"] >= 3 * prof["iterations"] and kernels["ms"]["max"] >= kernels["ms"]["p50"] > 0
    assert kernels["fields"] == [] and kernels["occupancy_pct"] is None
    assert prof["memory"]["rss_peak_mib"] > 0


def test_the_factory_the_docs_show_runs_as_a_tenant_from_outside_the_repository(runs):
    """The workloads guide's factory, copied as a reader would (``from kts_worker import Workload``), timed by the
    worker started from a folder outside the repository."""
    assert docs_factory()[0] == "my_factory.py"
    rc, stdout, stderr = runs["entry-point"]  # its entry point names the page's factory (``outside``)
    assert rc == 0, stderr
    p = parse_bytes(stdout.encode())
    assert p.n == 3 and p.malformed == 0 and p.frame["phase"].unique().tolist() == ["matmul"]
    assert p.meta[0]["workload_name"] == "matmul" and p.meta[0]["flops_per_op"] == 2.0 * 32**3


def test_entry_point_names_a_factory(runs):
    rc, stdout, stderr = runs["entry-point"]
    assert rc == 0, stderr
    assert parse_bytes(stdout.encode()).meta[0]["workload_name"] == "matmul"  # my_factory:make_matmul


def test_a_bad_factory_stops_the_worker_in_one_line_naming_the_tenant(runs):
    rc, stdout, stderr = runs["raises"]
    assert rc == 4
    lines = [ln for ln in stderr.splitlines() if ln.startswith("kts_worker:")]
    assert lines == ["kts_worker: tenant t3 (workload bad_tenants:raises): its factory raised RuntimeError: "
                     "no GPU budget for me"]
    assert "Traceback" not in stderr and "KTS_APP" not in stdout


@pytest.mark.parametrize("name, needle", [
    ("nosuch_pkg.tenants:make", "cannot import 'nosuch_pkg.tenants' (ModuleNotFoundError"),
    ("broken_import:make", "cannot import 'broken_import' (ModuleNotFoundError: No module named "
                           "'no_such_dependency_kts'"),
    ("bad_tenants:nothing", "module 'bad_tenants' has no 'nothing'"),
    ("bad_tenants:raises", "its factory raised RuntimeError: no GPU budget for me"),
    ("bad_tenants:wrong_type", "the factory returned int, not a Workload"),
    ("bad_tenants:bad_step", "must return (phase, callable) pairs"),
    ("conv", "unknown workload 'conv'"),
    ("mlp", "matmul"),  # the entry point (the docs' factory)
    ("my_tenants:make_mlp_server", "mlp-server"),
])
def test_every_kind_of_bad_factory_is_one_line(outside, monkeypatch, name, needle):
    import kts_workload
    import torch

    monkeypatch.syspath_prepend(str(outside))
    params = {"size": 8, "seed": 0, "device_type": "cpu"}
    if needle in ("matmul", "mlp-server"):  # a good factory: the name of what it built
        assert kts_workload.build_workload(name, torch, torch.device("cpu"), params).name == needle
        return
    with pytest.raises(kts_workload.WorkloadError) as exc:
        kts_workload.build_workload(name, torch, torch.device("cpu"), params)
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_a_real_models_unknown_size_is_refused():
    import kts_models

    with pytest.raises(ValueError, match=r"unknown bert parameter\(s\) layerz; known: batch, dtype"):
        kts_models.settings("bert", {"layerz": 2, "device_type": "cpu", "size": 1})
    assert kts_models.settings("bert", {"layers": 3, "device_type": "cuda"})["hidden"] == 768


@pytest.mark.parametrize("name, phases, params", [
    ("llama-decode", ["prefill", "decode", "decode", "decode"], "parameters"),
    ("bert", ["op"], "parameters"),
    ("vit", ["op"], "parameters"),
    ("train-step", ["step"], "parameters"),
])
def test_real_architectures_run_on_cpu_with_tiny_configs(runs, name, phases, params):
    rc, stdout, stderr = runs[name]
    assert rc == 0, stderr
    p = parse_bytes(stdout.encode())
    assert p.n == 2 * len(phases) and p.malformed == 0
    for _, grp in p.frame.groupby("iteration"):
        assert grp["phase"].tolist() == phases
    notes = p.meta[0]["notes"]
    assert 0 < notes[params] < 2_000_000  # the tiny CPU config, not the GPU's
    assert "transformers" in notes["architecture"]


def test_real_model_profiles_every_phase(runs):
    meta = parse_bytes(runs["llama-decode"][1].encode()).meta[0]
    prof = meta["profile"]
    assert set(prof["phases"]) == {"prefill", "decode"}
    assert prof["phases"]["decode"]["calls"] == 3 and prof["phases"]["prefill"]["calls"] == 1
    # a decode step runs every layer: many operators, each short against the step
    assert prof["phases"]["decode"]["kernels_per_op"] > 20
    assert 0 < prof["phases"]["decode"]["busy_share"] <= 1
    assert "profile" not in parse_bytes(runs["vit"][1].encode()).meta[0]  # none asked: none recorded


def test_the_serving_and_training_examples_build_and_step_on_cpu(monkeypatch):
    """examples/serve_and_train.py (issue 51's sealed MPS pairs): each factory builds its tiny CPU model and runs an
    iteration in its phases; a decode step feeds one token against the cache the prefill filled (the cache grows by
    one a step, so the step is the serving decode, not a full forward); an unknown size is refused in one line."""
    import torch

    monkeypatch.syspath_prepend(str(REPO / "examples"))
    import serve_and_train as st

    cpu, params = torch.device("cpu"), {"device_type": "cpu", "seed": 0, "size": 32}
    got = {}
    for make in (st.make_gpt2_decode, st.make_whisper_decode, st.make_vit_train, st.make_convnext_train):
        w = make(torch, cpu, params)
        ops = w.step()
        for _, fn in ops:
            fn()
        got[w.name] = ([ph for ph, _ in ops], w.notes["parameters"])
    assert {k: v[0] for k, v in got.items()} == {
        "gpt2-decode": ["prefill"] + ["decode"] * 3, "whisper-decode": ["encode"] + ["decode"] * 3,
        "vit-train": ["step"], "convnext-train": ["step"]}
    assert all(0 < n < 200_000 for _, n in got.values())  # the tiny CPU configs
    w = st.make_gpt2_decode(torch, cpu, {**params, "decode_tokens": 2})
    closures = {ph: fn for ph, fn in w.step()}
    closures["prefill"]()
    cache = closures["decode"].__closure__  # the step's own state: the cache the decode steps extend
    state = next(c.cell_contents for c in cache if isinstance(c.cell_contents, dict) and "cache" in c.cell_contents)
    closures["decode"]()
    closures["decode"]()
    assert state["cache"].get_seq_length() == 8 + 2 and state["next"].shape == (1, 1)
    with pytest.raises(ValueError, match=r"unknown vit-train parameter\(s\) layerz; known: batch, classes"):
        st.make_vit_train(torch, cpu, {**params, "layerz": 2})


def test_model_sizes_are_settable(runs):
    rc, stdout, stderr = runs["model-param"]
    assert rc == 0, stderr
    p = parse_bytes(stdout.encode())
    assert p.frame["phase"].tolist() == ["prefill", "decode"]
    assert p.meta[0]["notes"]["layers"] == 1


# -- the profile's arithmetic on a synthetic GPU trace ------------------------------------------------------------
def _trace():
    """Two calls of phase "op": call 0 launches two kernels (one of 264 blocks on 132 SMs, one of 66, which starts on
    the device's clock after the call's annotation ends), call 1 one; a kernel launched outside any call is not
    counted."""
    ev = [
        {"cat": "user_annotation", "name": "kts_phase:op:0", "ts": 0.0, "dur": 100.0},
        {"cat": "user_annotation", "name": "kts_phase:op:1", "ts": 200.0, "dur": 50.0},
        {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 5.0, "dur": 3.0, "args": {"correlation": 1}},
        {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 10.0, "dur": 3.0, "args": {"correlation": 2}},
        {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 210.0, "dur": 3.0, "args": {"correlation": 3}},
        {"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 400.0, "dur": 3.0, "args": {"correlation": 4}},
        {"cat": "kernel", "name": "gemm", "ts": 20.0, "dur": 40.0, "args": {"correlation": 1, "grid": [132, 2, 1]}},
        # the device's clock runs a little apart from the host's: this kernel of call 0 starts after its annotation
        {"cat": "kernel", "name": "small", "ts": 101.0, "dur": 10.0, "args": {"correlation": 2, "grid": [66, 1, 1]}},
        {"cat": "kernel", "name": "gemm", "ts": 215.0, "dur": 25.0, "args": {"correlation": 3, "grid": [264, 1, 1]}},
        {"cat": "kernel", "name": "stray", "ts": 405.0, "dur": 99.0, "args": {"correlation": 4, "grid": [1, 1, 1]}},
    ]
    return ev, [("op", 0), ("op", 1)]


def test_profile_attributes_kernels_to_their_call_by_correlation():
    events, calls = _trace()
    op = kts_profile.summarize_trace(events, calls, sm_count=132)["op"]
    assert op["calls"] == 2
    assert op["kernels_per_op"] == 1.5  # 2 and 1; the stray kernel belongs to no call
    assert op["busy_ms"] == pytest.approx((0.050 + 0.025) / 2)  # p50 of 0.050 and 0.025
    assert op["busy_share"] == pytest.approx((0.5 + 0.5) / 2)  # 50/100 and 25/50
    assert op["launch_gap_ms"] == pytest.approx(0.041)  # 60 -> 101 us
    assert op["grid_blocks"] == {"p50": 264, "max": 264}
    # SM share weighted by kernel time: 40 us and 25 us at 1.0, 10 us at 0.5
    assert op["sm_share"] == pytest.approx((40 + 25 + 5) / 75)
    assert op["fill_share"] == pytest.approx(65 / 75)  # kernels of >= 2 waves
    assert op["top_kernels"][0] == {"name": "gemm", "calls": 2, "total_ms": pytest.approx(0.065)}


def test_profile_counts_the_hosts_waits_for_the_device_inside_an_op():
    """A sync mid-op (``.item()``: a scalar read and the runtime's stream sync) drains the op's queue before its next
    launch; under time-slicing a neighbour then takes the GPU for its slice. The profile counts each such wait once
    (the scalar read and its sync are one), and not the harness's own sync after the op's last launch."""
    events, calls = _trace()
    assert kts_profile.summarize_trace(events, calls, sm_count=132)["op"]["host_syncs"] == 0
    events += [  # call 0: a read between its two launches (5 us, 10 us), and the harness's sync at its end
        {"cat": "cpu_op", "name": "aten::_local_scalar_dense", "ts": 7.0, "dur": 2.5},
        {"cat": "cuda_runtime", "name": "cudaStreamSynchronize", "ts": 8.0, "dur": 1.5},
        {"cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "ts": 90.0, "dur": 5.0},
        {"cat": "cuda_runtime", "name": "cudaDeviceSynchronize", "ts": 230.0, "dur": 5.0},  # call 1: at its end
    ]
    op = kts_profile.summarize_trace(events, calls, sm_count=132)["op"]
    assert (op["host_syncs"], op["host_syncs_max"]) == (0.5, 1)  # p50 of 1 and 0
    events.append({"cat": "cuda_driver", "name": "cuStreamSynchronize", "ts": 205.0, "dur": 2.0})  # before 210
    op = kts_profile.summarize_trace(events, calls, sm_count=132)["op"]
    assert (op["host_syncs"], op["host_syncs_max"]) == (1.0, 1)


def test_profile_counts_host_reads_on_cpu():
    """The same count on CPU, where CI runs it: the operator that reads a device scalar, followed by more work."""
    import torch

    x = torch.randn(32, 32)

    def read_mid_op():
        y = x @ x
        return y @ x if y.sum().item() > -1e30 else y

    read = kts_profile.profile_workload(torch, torch.device("cpu"), lambda: [("op", read_mid_op)], 2)["phases"]["op"]
    plain = kts_profile.profile_workload(torch, torch.device("cpu"), lambda: [("op", lambda: (x @ x) @ x)],
                                         2)["phases"]["op"]
    assert (read["host_syncs"], plain["host_syncs"]) == (1.0, 0.0)
    tail = kts_profile.profile_workload(torch, torch.device("cpu"), lambda: [("op", lambda: (x @ x).sum().item())],
                                        2)["phases"]["op"]
    assert tail["host_syncs"] == 0.0  # a read at the op's end drains nothing the op still launches


H100_SM = {"threads": 2048, "registers": 65536, "shared_memory": 233472, "blocks": None}


def test_profile_records_each_kernels_length_and_how_it_holds_the_sms():
    """Issue 51: under MPS a small kernel behind a neighbour's waits the rest of the kernel in flight, so the profile
    keeps the kernels one by one: their count and time-weighted lengths, the mean rest of the one in flight, and
    whether each fills every SM (Kineto's blocks per SM against the blocks one SM can hold). Four kernels of one op:
    a GEMM of 1 ms whose 264 blocks of 256 threads at 128 registers (2 a SM by registers) are 1 wave on 132 SMs,
    Kineto's occupancy 25 %; a 4 ms one held to 1 block a SM by its shared memory (occupancy 6 %, its 2 blocks a SM
    2 waves); two 10 us kernels of 8 blocks (a partial wave, occupancy 1 %)."""
    def k(corr, dur_us, grid, block, regs, smem, occ):
        return {"cat": "kernel", "name": f"k{corr}", "ts": 10.0 * corr, "dur": dur_us,
                "args": {"correlation": corr, "grid": grid, "block": block, "blocks per SM": grid[0] / 132,
                         "registers per thread": regs, "shared memory": smem, "est. achieved occupancy %": occ}}

    ev = [{"cat": "user_annotation", "name": "kts_phase:op:0", "ts": 0.0, "dur": 9000.0}]
    ev += [{"cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 1.0 + c, "dur": 1.0, "args": {"correlation": c}}
           for c in (1, 2, 3, 4)]
    ev += [k(1, 1000.0, [264, 1, 1], [256, 1, 1], 128, 0, 25), k(2, 4000.0, [264, 1, 1], [128, 1, 1], 32, 200_000, 6),
           k(3, 10.0, [8, 1, 1], [128, 1, 1], 32, 0, 1), k(4, 10.0, [8, 1, 1], [128, 1, 1], 32, 0, 1)]
    rec = kts_profile.summarize_trace(ev, [("op", 0)], sm_count=132, limits=H100_SM)["op"]["kernels"]
    assert rec["n"] == 4
    assert rec["ms"]["p50"] == pytest.approx(0.01) and rec["ms"]["max"] == pytest.approx(4.0)
    assert rec["tw_ms"]["p50"] == pytest.approx(4.0)  # most of the busy time is inside the 4 ms kernel
    assert rec["residual_ms"] == pytest.approx((1 + 16 + 2e-4) / (2 * 5.02))
    assert rec["full_share"] == pytest.approx(5.0 / 5.02)  # the small kernels leave SMs free
    assert rec["full_residual_ms"] == pytest.approx(17 / 10)
    assert rec["waves"]["max"] == pytest.approx(2.0)  # 264 / 132 blocks a SM, one resident at a time
    assert rec["occupancy_pct"] == pytest.approx((25 * 1 + 6 * 4 + 1 * 0.02) / 5.02, rel=1e-3)
    assert [b[:3] for b in rec["hist"]] == [[0.016, 2, pytest.approx(0.02)], [1.024, 1, pytest.approx(1.0)],
                                           [4.096, 1, pytest.approx(4.0)]]
    assert rec["hist"][0][4] == 0.0 and rec["hist"][2][4] == 1.0
    assert rec["fields"] == list(kts_profile.KINETO_FIELDS)
    # a torch that gives no register or shared-memory limit: Kineto's occupancy still shows the 4 ms kernel held to
    # one block a SM (2 waves), though its threads alone would let 16 in
    threads_only = kts_profile.summarize_trace(ev, [("op", 0)], sm_count=132, limits={"threads": 2048})
    assert threads_only["op"]["kernels"]["waves"]["max"] == pytest.approx(2.0)
    # a trace without Kineto's launch fields says so: lengths yes, occupancy and waves unknown (None), not zero
    for e in ev:
        if e["cat"] == "kernel":
            e["args"] = {"correlation": e["args"]["correlation"]}
    bare = kts_profile.summarize_trace(ev, [("op", 0)], sm_count=132, limits=H100_SM)["op"]["kernels"]
    assert bare["fields"] == [] and bare["residual_ms"] == rec["residual_ms"]
    assert bare["occupancy_pct"] is None and bare["full_share"] is None and bare["waves"] is None
    # a field written otherwise by another torch: the record says so, the rest of the profile stands
    ev[-1]["args"]["block"] = "128x1x1"
    odd = kts_profile.summarize_trace(ev, [("op", 0)], sm_count=132, limits=H100_SM)["op"]
    assert odd["kernels"]["error"].startswith("ValueError") and odd["kernels_per_op"] == 4


def test_profile_counts_kernels_launched_through_the_driver_api():
    """cuBLAS on CUDA 13 launches its GEMMs with cuLaunchKernelEx, a ``cuda_driver`` event in Kineto's trace (seen on
    the H200: 255 of BERT's 462 launches); a summary reading only the runtime's launches lost every GEMM."""
    events, calls = _trace()
    for e in events:
        if e.get("args", {}).get("correlation") == 1 and e["cat"] == "cuda_runtime":
            e["cat"], e["name"] = "cuda_driver", "cuLaunchKernelEx"
    op = kts_profile.summarize_trace(events, calls, sm_count=132)["op"]
    assert op["kernels_per_op"] == 1.5
    assert op["busy_ms"] == pytest.approx((0.050 + 0.025) / 2)
    assert op["top_kernels"][0]["calls"] == 2
    # a driver call that launches nothing (a memset) still owns no kernel
    events.append({"cat": "cuda_driver", "name": "cuMemsetD32Async", "ts": 220.0, "dur": 1.0,
                   "args": {"correlation": 4}})
    assert kts_profile.summarize_trace(events, calls, sm_count=132)["op"]["kernels_per_op"] == 1.5


def test_the_profile_detaches_cupti_and_measures_what_it_left(monkeypatch):
    """Kineto leaves CUPTI attached after the profiler stops unless TEARDOWN_CUPTI=1, and the timed alone iterations
    follow in the same process: the profile sets it before the profiler stops (a user's own setting stands), and
    its residue is each phase's p50 wall after the profile over before it."""
    import torch
    import torch.profiler

    seen: list[str | None] = []
    real = torch.profiler.profile

    class Watched(real):
        def __exit__(self, *exc):
            seen.append(os.environ.get("TEARDOWN_CUPTI"))
            return super().__exit__(*exc)

    monkeypatch.setattr(torch.profiler, "profile", Watched)
    monkeypatch.delenv("TEARDOWN_CUPTI", raising=False)
    calls = {"n": 0}

    def op():  # the profile leaves this tenant slower: 5 ms an op before it, 15 ms after (a sleep overshoots by up
        calls["n"] += 1  # to ~0.7 ms on a loaded 2-core machine: a 1 ms sleep's ratio read 1.6 for 1.0 there)
        time.sleep(0.005 if calls["n"] <= 3 else 0.015)  # 3 timed before; the profiled and after ones slower

    prof = kts_profile.profile_workload(torch, torch.device("cpu"), lambda: [("op", op)], 3)
    assert seen == ["1"]
    assert prof["cupti_teardown"] is None  # no CUPTI on a CPU
    assert 2.0 < prof["residue"]["op"] < 4.0
    monkeypatch.setenv("TEARDOWN_CUPTI", "0")  # the user's choice (CUDA graphs on an old CUDA) stands
    seen.clear()
    calls["n"] = -100
    prof = kts_profile.profile_workload(torch, torch.device("cpu"), lambda: [("op", op)], 3)
    assert seen == ["0"] and prof["residue"]["op"] == pytest.approx(1.0, abs=0.5)


# -- names, the spec and the pre-flight ----------------------------------------------------------------------------
def test_tenant_names_from_factories():
    assert base_name("my_pkg.tenants:make_bert") == "bert"
    assert base_name("pkg:Server.build") == "build"
    assert base_name("llama-decode") == "llama-decode"
    spec = resolve(ExperimentParams.from_mapping({"profile": "tiny", "workloads": "fft,a.b:make_bert,c:make_bert"}),
                   "cpu")
    shared = spec.scenarios_of("shared")[0]
    assert [(t.name, t.workload) for t in shared.tenants] == [("fft", "fft"), ("bert-1", "a.b:make_bert"),
                                                              ("bert-2", "c:make_bert")]


def test_unknown_names_and_entry_points(outside, monkeypatch):
    assert unknown_workloads(["fft", "llama-decode", "pkg.mod:make", "mlp", "conv"]) == ["mlp", "conv"]
    monkeypatch.syspath_prepend(str(outside))
    assert unknown_workloads(["fft", "mlp", "conv"]) == ["conv"]  # the entry point is found now
    assert unknown_workloads(["mlp"], local=False) == ["mlp"]  # a cluster's image: name it module:factory
    with pytest.raises(SpecError, match=r"unknown workload\(s\) \['conv'\]"):
        resolve(ExperimentParams.from_mapping({"profile": "tiny", "workloads": "fft,conv"}), "cpu")


def test_workload_params_sleeps_and_profiles_reach_the_right_tenants():
    spec = resolve(ExperimentParams.from_mapping({
        "profile": "tiny", "workloads": "bert,train-step", "sleep_ms": {"bert": 7.5},
        "workload_params": {"bert": {"batch": 4}}}), "cuda")
    base = {s.tenants[0].name: s.tenants[0] for s in spec.scenarios_of("baseline")}
    shared = {t.name: t for t in spec.scenarios_of("shared")[0].tenants}
    assert base["bert"].env()["KTS_WORKLOAD_PARAMS"] == '{"batch": 4}'
    assert "KTS_WORKLOAD_PARAMS" not in base["train-step"].env()
    assert shared["bert"].sleep_ms == 7.5 and shared["train-step"].sleep_ms == 0.0
    # the alone run profiles, the shared one does not
    assert all(t.env()["KTS_PROFILE_ITERATIONS"] == str(PROFILE_ITERATIONS) for t in base.values())
    assert all("KTS_PROFILE_ITERATIONS" not in t.env() for t in shared.values())
    off = resolve(ExperimentParams.from_mapping({"profile": "tiny", "profile_iterations": 0}), "cpu")
    assert all("KTS_PROFILE_ITERATIONS" not in s.tenants[0].env() for s in off.scenarios_of("baseline"))
    for bad, needle in (({"sleep_ms": {"vit": 1.0}}, "sleep_ms names vit"),
                        ({"workload_params": {"gemm": {"x": 1}}}, "workload_params names gemm"),
                        ({"profile_iterations": -1}, "profile_iterations must be >= 0")):
        with pytest.raises(SpecError, match=needle):
            resolve(ExperimentParams.from_mapping({"profile": "tiny", "workloads": "bert", **bad}), "cpu")


def test_preflight_names_every_bad_tenant_in_one_line(outside, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(outside))
    spec = resolve(ExperimentParams.from_mapping(
        {"profile": "tiny", "workloads": "fft,my_tenants:make_mlp_server,bad_tenants:raises,bad_tenants:wrong_type"}),
        "cpu")
    tenants = [s.tenants[0] for s in spec.scenarios_of("baseline")]
    with pytest.raises(SpecError) as exc:
        preflight(tenants, "cpu")
    msg = str(exc.value)
    assert "\n" not in msg and msg.startswith("workload pre-flight failed (no scenario was run)")
    assert "tenant raises (workload bad_tenants:raises): its factory raised RuntimeError" in msg
    assert "tenant wrong-type (workload bad_tenants:wrong_type): the factory returned int" in msg
    assert msg.count("tenant ") == 2  # the good ones are not named
    ok = preflight(tenants[:2], "cpu")  # the kit's fft is not checked; the example builds
    assert len(ok) == 1 and "ok, mlp-server" in ok[0]


def test_a_run_with_a_bad_factory_fails_before_any_scenario(outside, tmp_path, monkeypatch):
    from kts_helpers.run.experiment import run_experiment

    monkeypatch.setenv("PYTHONPATH", str(outside))
    root = tmp_path / "runs"
    with pytest.raises(SpecError, match="tenant bad-step .*must return"):
        run_experiment({"profile": "tiny", "device": "cpu", "workloads": "fft,bad_tenants:bad_step"}, root=root,
                       progress=False)
    assert not root.exists() or not any(root.iterdir())  # no run directory was made


def test_a_users_factory_runs_as_a_tenant_of_a_run(outside, tmp_path, monkeypatch):
    from kts_helpers.run.experiment import run_experiment
    from kts_helpers.run.runs import open_run

    monkeypatch.setenv("PYTHONPATH", str(outside))
    run = run_experiment({"profile": "tiny", "device": "cpu", "iterations": 30,
                          "workloads": "fft,my_tenants:make_mlp_server",
                          "workload_params": {"my_tenants:make_mlp_server": {"batch": 8}}},
                         root=tmp_path / "runs", progress=False, calibrate=False)  # no overhead floor read here
    m = open_run(run.path).read()
    assert [s.name for s in m.scenarios if s.kind != "calibration"] == [
        "baseline-fft", "baseline-mlp-server", "shared"]
    alone = parse_bytes(open_run(run.path).log_path("baseline-mlp-server", "mlp-server").read_bytes())
    assert alone.meta[0]["notes"]["batch"] == 8
    assert set(alone.meta[0]["profile"]["phases"]) == {"embed", "mlp"}
    shared = parse_bytes(open_run(run.path).log_path("shared", "mlp-server").read_bytes())
    assert "profile" not in shared.meta[0]
    assert json.loads(json.dumps(shared.meta[0]["workload"])) == "my_tenants:make_mlp_server"
