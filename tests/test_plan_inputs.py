"""The planner's input loaded once, each tenant's traits measured by its alone profile, and the fallbacks named.

The faults these tests exist to catch: a function below the CLI that opens the run again; a profile ignored (the
name's fallback used although the run measured the tenant); a profile's numbers read wrongly (busy share against
the profiled wall rather than the timed one, SM share ignored); a new constant in ``plan/`` keyed by workload name.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from kts_helpers.cli import main
from kts_helpers.plan import engine, inputs, traits
from kts_helpers.run import runs

REPO = Path(__file__).resolve().parents[1]
REF = REPO / "data" / "reference"
ARTICLE = REF / "h200-2026-11-30-article"
REAL = REF / "h200-2026-12-02-rm-llama-train"  # llama-decode next to train-step, with the alone profiles
WORKLOAD_NAMES = {"fft", "gemm", "llm", "noop", "llama-decode", "bert", "vit", "train-step"}


@pytest.fixture
def opens(monkeypatch):
    """Count ``runs.open_run`` per resolved directory, wherever a module imported it. The committed-probe search
    (``engine.committed_probes``) opens every reference once per process and caches its answer; it is searched
    before counting, so the count is the planner's own opens whatever test ran first in this process."""
    engine.committed_probes("NVIDIA H200", engine.PROBE_ROOTS, "")
    counts: dict[str, int] = {}
    real = runs.open_run

    def counting(path, *a, **kw):
        key = str(Path(path).resolve())
        counts[key] = counts.get(key, 0) + 1
        return real(path, *a, **kw)

    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("kts_helpers") and getattr(mod, "open_run", None) is real:
            monkeypatch.setattr(mod, "open_run", counting)
    return counts


def test_kts_plan_capacity_opens_the_run_once(opens, capsys):
    assert main(["plan", "--capacity", "--from-run", str(ARTICLE), "--slo", "fft=1.0", "--max-n", "2",
                 "--format", "json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["largest_n"]  # a real answer came out
    assert opens[str(ARTICLE.resolve())] == 1


def test_kts_plan_from_run_opens_the_run_once(opens, capsys):
    assert main(["plan", "--from-run", str(ARTICLE), "--replicates", "2", "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)
    assert opens[str(ARTICLE.resolve())] == 1


def test_a_run_without_profiles_falls_back_and_says_so(capsys):
    inp = inputs.load_plan_input(ARTICLE, gpu=False)
    assert all(p.traits is None for p in inp.alone.values())
    lines = inp.fallbacks()
    assert any("fft (baseline-fft): no profile" in ln and "'fft'" in ln for ln in lines)
    for page in (REPO / "README.md", REPO / "docs" / "index.md"):  # the quickstart's sample shows these notes
        sample = next(b for b in re.findall(r"```text\n(.*?)```", page.read_text(), re.S)
                      if b.startswith("$ .venv/bin/kts plan"))
        assert [ln for ln in sample.splitlines() if ln.startswith("kts plan: ")] == [
            f"kts plan: {ln}" for ln in inp.notes() + inp.fallbacks() + inp.profile_warnings()], page.name
    main(["plan", "--from-run", str(ARTICLE), "--replicates", "2"])
    assert "kts plan: fft (baseline-fft): no profile in its alone run" in capsys.readouterr().err


def test_fallbacks_are_the_numbers_the_planner_used_before_profiles():
    llm = traits.fallback_traits("llm", {})
    assert (llm.kernels, llm.busy_share, llm.sm_need, llm.fills_gpu) == (60, 0.2, 0.25, False)
    assert llm.mps_weight == pytest.approx(0.048 * 0.2)
    h200 = traits.fallback_traits("fft", traits.GPU_BUSY_SHARE["NVIDIA H200"])
    assert (h200.busy_share, h200.mps_weight, h200.sm_need, h200.source) == (0.6, 0.028, 0.6, "fallback")
    assert traits.fallback_traits("gemm", {}).fills_gpu
    generic = traits.fallback_traits("my_pkg:make_bert", {})
    assert (generic.kernels, generic.busy_share, generic.mps_weight, generic.sm_need, generic.fills_gpu,
            generic.source) == (1, 1.0, 1.0, 1.0, False, "generic")


def test_a_profiled_run_gives_measured_traits():
    inp = inputs.load_plan_input(REAL, gpu=False)
    decode = inp.alone[("baseline-llama-decode", "llama-decode")]
    train = inp.alone[("baseline-train-step", "train-step")]
    assert decode.traits is not None and decode.traits.source == "profile"
    assert train.traits is not None and train.traits.source == "profile"
    assert inp.fallbacks() == []
    # the decode step: hundreds of kernels of a few blocks each, the GPU busy a few % of the step
    assert decode.traits.kernels > 300 and decode.traits.busy_share < 0.2 and decode.traits.sm_need < 0.6
    assert not decode.traits.fills_gpu and not train.traits.fills_gpu
    # the busy share is the kernels' time over the *timed* alone wall, not over the profiler-slowed one
    meta = json.loads((REAL / "logs" / "baseline-train-step" / "train-step.log").read_text()
                      .split("\n", 1)[0].split(",", 2)[2])
    step = meta["profile"]["phases"]["step"]
    timed_p50 = float(engine.np.median(train.column("wall_ms", "step")))
    assert train.traits.busy_share == pytest.approx(step["busy_ms"] / timed_p50)
    assert train.traits.busy_share != pytest.approx(step["busy_share"], rel=0.05)


def test_profiles_that_left_cupti_attached_are_named(tmp_path):
    """The real-model runs before the teardown profiled on the GPU and left CUPTI attached: the planner names those
    alone blocks, in one line; a profile that detached it is not named, nor a CPU profile (no CUPTI)."""
    inp = inputs.load_plan_input(REAL, gpu=False)
    lines = inp.profile_warnings()
    assert len(lines) == 1 and "left CUPTI attached in 2 alone block(s)" in lines[0], lines
    assert "llama-decode (baseline-llama-decode)" in lines[0] and "train-step (baseline-train-step)" in lines[0]
    key = ("baseline-llama-decode", "llama-decode")
    p = inp.alone[key]
    assert p.profile_teardown is False

    def warned(**kw):
        return replace(inp, alone={key: replace(p, **kw)}).profile_warnings()

    assert warned(profile_teardown=True) == []
    assert warned(profile_teardown=None) == []  # a CPU profile: no CUPTI to leave behind
    assert "(baseline-llama-decode)" in warned(profile_teardown=False)[0]
    # read from the worker's record
    log = REAL / "logs" / "baseline-llama-decode" / "llama-decode.log"
    head, rest = log.read_text().split("\n", 1)
    tag, version, payload = head.split(",", 2)
    meta = json.loads(payload)
    meta["profile"].update(cupti_teardown=True, residue={"prefill": 1.03, "decode": 1.25})
    fresh = tmp_path / "llama-decode.log"
    fresh.write_text(f"{tag},{version},{json.dumps(meta)}\n{rest}")
    assert engine.profile_from_log(fresh, "llama-decode", "llama-decode").profile_teardown is True
    meta["profile"]["device"] = "cpu"
    fresh.write_text(f"{tag},{version},{json.dumps(meta)}\n{rest}")
    assert engine.profile_from_log(fresh, "llama-decode", "llama-decode").profile_teardown is None


def test_an_interrupted_alone_block_is_left_out_and_named(tmp_path, capsys):
    """A run cut off during its last alone block (the client's time limit): the block has no record and empty
    logs. The planner predicts from the blocks that completed and says which it left out; the raw run is read, not
    changed. A tenant whose only alone block never completed still stops the planner."""
    src = REF / "h200-2026-12-02-article-blocks"
    run_dir = tmp_path / src.name
    shutil.copytree(src, run_dir)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    del manifest["scenarios"]["baseline-gemm-r3"]
    manifest["status"] = "running"
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    (run_dir / "logs" / "baseline-gemm-r3" / "gemm.log").write_text("")
    whole = inputs.load_plan_input(src, gpu=False)
    inp = inputs.load_plan_input(run_dir, gpu=False)
    assert inp.unfinished == ("baseline-gemm-r3",) and whole.unfinished == ()
    assert ("baseline-gemm-r3", "gemm") not in inp.alone and ("baseline-fft-r3", "fft") in inp.alone
    assert inp.notes() == ["baseline-gemm-r3: never recorded (the run was interrupted); its tenants are predicted "
                           "from their alone blocks that did"]
    # shared-r2 was bracketed by gemm r2 and r3: now predicted from r2 alone; shared-r1 as before
    r2 = next(s for s in inp.manifest.scenarios if s.name == "shared-r2")
    gemm = next(t for t in r2.tenants if t.workload == "gemm")
    one, n = inputs.alone_for(inp, gemm, r2.repeat)
    both, _ = inputs.alone_for(whole, gemm, r2.repeat)
    assert len(one.iterations) == n and len(both.iterations) == 2 * n
    assert len(inputs.scenarios_of(inp)) == 2
    assert main(["plan", "--from-run", str(run_dir), "--replicates", "2", "--format", "json"]) == 0
    assert "kts plan: baseline-gemm-r3: never recorded (the run was interrupted)" in capsys.readouterr().err
    for sc in manifest["spec"]["scenarios"]:  # every gemm block unrecorded: nothing to predict gemm from
        if sc["name"].startswith("baseline-gemm"):
            manifest["scenarios"].pop(sc["name"], None)
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(Exception, match="no timed iteration alone|no valid|gemm"):
        inputs.load_plan_input(run_dir, gpu=False)


def test_profile_traits_follow_the_profile():
    profile = {"phases": {"op": {"calls": 4, "kernels_per_op": 3, "busy_ms": 2.0, "sm_share": 0.5,
                                 "fill_share": 0.0},
                          "tail": {"calls": 12, "kernels_per_op": 7, "busy_ms": 1.0, "sm_share": 1.0,
                                   "fill_share": 1.0}}}
    t = traits.traits_from_profile(profile, {"op": 4.0, "tail": 1.0})
    assert t.kernels == round((4 * 3 + 12 * 7) / 16)
    assert t.busy_share == pytest.approx((4 * 2.0 + 12 * 1.0) / (4 * 4.0 + 12 * 1.0))
    assert t.sm_need == pytest.approx((0.5 * 8 + 1.0 * 12) / 20)  # weighted by kernel time
    assert t.mps_weight == pytest.approx(t.sm_need * t.busy_share)
    # 60 % of its kernel time in >= 2-wave kernels, busy 71 % of the op, but 6 kernels an op: it holds the SMs one
    # kernel at a time, not for its op (issue 51); without its kernel record how long is not known
    assert not t.fills_gpu and t.kernel_record is False and t.blocking == ()
    assert t.unknown_block_share == pytest.approx(t.mps_weight)
    one = {"phases": {"op": {**profile["phases"]["tail"], "kernels_per_op": 1}}}
    assert traits.traits_from_profile(one, {"op": 1.0}).fills_gpu  # an op of one such kernel: the op-level queue
    assert traits.traits_from_profile({"phases": {"op": {"calls": 2, "kernels_per_op": 0}}}, {"op": 1.0}) is None


def test_the_simulator_uses_the_measured_traits_not_the_name(monkeypatch):
    """Two tenants named "llm" with opposite profiles: the simulator sees their traits, not the name's fallback."""
    inp = inputs.load_plan_input(REAL, gpu=False)
    sc = inputs.scenarios_of(inp)[0]
    seen = []
    real = engine.simulate

    def spy(tenants, *a, **kw):
        seen.extend((t.name, t.kernels, t.busy_share) for t in tenants)
        return real(tenants, *a, **kw)

    monkeypatch.setattr(engine, "simulate", spy)
    gpu = engine.gpu_model_for(ARTICLE)
    engine.simulate_once(sc, gpu, 0, vary=False, duration_ms=500.0)
    want = {t.name: (t.traits.kernels, t.traits.busy_share) for t in sc.tenants}
    assert {n: (k, b) for n, k, b in seen} == want
    renamed = engine.Scenario(sc.name, tuple(engine.replace(t, workload="llm") for t in sc.tenants), sc.n)
    seen.clear()
    engine.simulate_once(renamed, gpu, 0, vary=False, duration_ms=500.0)
    assert {n: (k, b) for n, k, b in seen} == want  # the name "llm" (fallback 60 kernels, 0.2) changes nothing


def test_no_constant_in_plan_is_keyed_by_workload_name_except_the_documented_fallbacks():
    allowed = set(traits.FALLBACK_CONSTANTS)
    found = []
    for path in sorted((REPO / "kts_helpers" / "plan").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in tree.body:
            targets = [t.id for t in getattr(node, "targets", [getattr(node, "target", None)]) if isinstance(t, ast.Name)]
            value = getattr(node, "value", None)
            if not targets or value is None:
                continue
            # a name as a dict's key (at any depth) or as a set's element: keyed by workload name (a tuple key,
            # e.g. validation's (run, scenario, tenant, phase), is a row's address, not a workload's constant)
            names = set()
            for sub in ast.walk(value):
                if isinstance(sub, ast.Dict):
                    names |= {k.value for k in sub.keys if isinstance(k, ast.Constant) and k.value in WORKLOAD_NAMES}
                elif isinstance(sub, ast.Set):
                    names |= {e.value for e in sub.elts if isinstance(e, ast.Constant) and e.value in WORKLOAD_NAMES}
                elif isinstance(sub, ast.Call) and getattr(sub.func, "id", "") in ("frozenset", "set"):
                    names |= {e.value for arg in sub.args for e in getattr(arg, "elts", [])
                              if isinstance(e, ast.Constant) and e.value in WORKLOAD_NAMES}
            keyed = True
            if names and keyed:
                found.append((path.name, targets[0]))
    assert {name for _, name in found} == allowed
    assert {file for file, _ in found} == {"traits.py"}  # the fallbacks have one home


def test_the_configmaps_comment_follows_its_replicas(tmp_path):
    from kts_helpers.plan.capacity import device_plugin_configmap

    two = device_plugin_configmap("mps", 2)
    assert "replicas: 2" in two and "4 clients" not in two and "1/4" not in two
    # the committed overlay's comment is written per `replicas`; any count it states is the one generated
    assert set(re.findall(r"(\d+) clients per physical GPU", two)) <= {"2"}
    assert set(re.findall(r"1/(\d+) of the SMs", two)) <= {"2"}
    # an overlay whose comment names its own count: the generated one names the new count
    from kts_helpers.plan.capacity import CONFIG_FILES, MANIFESTS, OVERLAYS

    own = tmp_path / OVERLAYS["mps"] / CONFIG_FILES["mps"]
    own.parent.mkdir(parents=True)
    own.write_text("# 4 clients per physical GPU, each limited to 1/4 of the SMs\n"
                   + (MANIFESTS / OVERLAYS["mps"] / CONFIG_FILES["mps"]).read_text())
    mine = device_plugin_configmap("mps", 2, tmp_path)
    assert "2 clients per physical GPU" in mine and "1/2 of the SMs" in mine and "1/4" not in mine
    assert "replicas: 3" in device_plugin_configmap("timeslice", 3)


# -- the host-time term (issue 31): an op is host time + GPU time; the host drifts between moments ----------------
def _profiled(name: str, kernel_ms: float, busy_share: float, sm_need: float = 1.0, kernels: int = 1,
              n: int = 200) -> engine.AloneProfile:
    """A closed-loop tenant alone whose profile measured its busy share (ops of ``kernel_ms``, back to back)."""
    its = tuple((engine.Op(kernel_ms, 0.05, 0.0, "op"),) for _ in range(n))
    tr = traits.TenantTraits(kernels=kernels, busy_share=busy_share, mps_weight=sm_need * busy_share,
                             sm_need=sm_need, source="profile")
    return engine.AloneProfile(name, name, its, traits=tr)


def _p50(sc: engine.Scenario, tenant: str) -> float:
    gpu = engine.gpu_model_for(ARTICLE)
    rows = engine.simulate_once(sc, gpu, 0, vary=False, duration_ms=2_000.0)
    return float(engine.np.median(rows[rows["tenant"] == tenant]["wall_ms"]))


def test_mps_stretches_only_the_gpu_part_of_a_host_bound_op():
    """A tenant whose kernels keep the GPU busy 5 % of its 10 ms op, next to a neighbour that saturates the GPU,
    stays near its alone time under MPS: only its 0.5 ms of GPU work shares the SMs (at its in-flight claim). The
    whole op stretched by its time-averaged share (weight 0.05 against 1) would take about 20x as long; the GPU
    part at that averaged share about twice."""
    host_bound = _profiled("host", 10.0, 0.05, kernels=500)
    hog = _profiled("hog", 20.0, 1.0)
    sc = engine.Scenario("x", (host_bound, hog), (100, 100), "mps")
    assert _p50(sc, "host") < 1.1 * 10.05
    # the GPU-bound neighbour is barely touched by a tenant whose kernels are rarely in flight
    assert _p50(sc, "hog") < 1.1 * 20.05
    # a GPU-bound tenant (busy share 1, no host part) still shares: two saturating tenants halve each other
    both = engine.Scenario("y", (_profiled("a", 10.0, 1.0), _profiled("b", 10.0, 1.0)), (100, 100), "mps")
    assert _p50(both, "a") > 1.8 * 10.0


def test_a_busy_share_measured_above_one_is_held_to_one_and_said():
    """ResNet-50 at batch 128 on an H100 (time-slicing's third seal): its profiled kernels took 110 % of its timed
    alone op. The planner holds the share to 1 (GPU-bound: it keeps its quantum) and ``kts plan`` says what it read;
    its twin run, whose ResNet measured 95-97 %, says nothing."""
    phases = {"op": {"calls": 10, "kernels_per_op": 350, "busy_ms": 16.0, "wall_ms": 30.0}}
    tr = traits.traits_from_profile({"phases": phases}, {"op": 14.5})
    assert tr.busy_share == 1.0 and tr.busy_measured == pytest.approx(16.0 / 14.5)
    assert traits.traits_from_profile({"phases": phases}, {"op": 20.0}).busy_measured == pytest.approx(0.8)
    vals = REPO / "data" / "validation"
    gpt2 = inputs.load_plan_input(vals / "h100-2026-12-07-sealed-timeslice-gpt2-resnet")
    (line,) = gpt2.busy_notes()
    assert line.startswith("resnet (baseline-resnet-r1): its profiled kernels take 110 % of its timed alone op")
    assert line in gpt2.notes()
    assert inputs.load_plan_input(vals / "h100-2026-12-07-sealed-timeslice-llama-resnet").busy_notes() == []

def test_an_unprofiled_tenant_has_no_host_part():
    """Without a profile there is no measured split: the fallbacks keep their validated MPS behaviour."""
    assert traits.fallback_traits("llm", {}).host_share == 0.0
    assert traits.fallback_traits("fft", traits.GPU_BUSY_SHARE["NVIDIA H200"]).host_share == 0.0
    assert _profiled("x", 1.0, 0.2).traits.host_share == pytest.approx(0.8)


def test_the_host_drift_is_the_alone_blocks_spread_pooled_with_the_prior():
    agree = [{"op": (10.0, 14.0)}, {"op": (10.0, 14.0)}, {"op": (10.0, 14.0)}]
    apart = [{"op": (8.0, 12.0)}, {"op": (10.0, 14.0)}, {"op": (13.0, 18.0)}]
    prior50, prior99 = traits.HOST_DRIFT_PRIOR
    # one block: the prior, scaled by the host share
    assert traits.host_drift(agree[:1], 0.5)["op"] == pytest.approx((0.5 * prior50, 0.5 * prior99))
    # three blocks that agree: the prior with one degree of freedom of three
    assert traits.host_drift(agree, 1.0)["op"][0] == pytest.approx(prior50 / 3 ** 0.5)
    # blocks apart: wider than blocks that agree
    assert traits.host_drift(apart, 1.0)["op"][0] > traits.host_drift(agree, 1.0)["op"][0]
    # no host part (no profile): the measured spread alone, and nothing from one block
    logs = [engine.math.log(v) for v in (8.0, 10.0, 13.0)]
    assert traits.host_drift(apart, 0.0)["op"][0] == pytest.approx(float(engine.np.std(logs, ddof=1)))
    assert traits.host_drift(agree[:1], 0.0) == {}


def test_the_prediction_interval_widens_with_the_host_drift():
    assert engine.widened(10.0, 9.0, 12.0, 0.0) == (9.0, 12.0)
    lo, hi = engine.widened(10.0, 9.0, 12.0, 0.1)
    assert lo == pytest.approx(10.0 * engine.math.exp(-engine.math.hypot(engine.math.log(10 / 9), 1.959964 * 0.1)))
    assert hi == pytest.approx(10.0 * engine.math.exp(engine.math.hypot(engine.math.log(1.2), 1.959964 * 0.1)))
    wider = engine.widened(10.0, 9.0, 12.0, 0.3)
    assert wider[0] < lo < 9.0 and wider[1] > hi > 12.0
    # through predict: the same scenario, its tenant with and without a drift; the point stays, the interval widens
    gpu = engine.gpu_model_for(ARTICLE)
    plain = _profiled("a", 2.0, 0.5, n=60)
    drifting = engine.replace(plain, drift=(("op", 0.2, 0.3),))
    rows = [next(p for p in engine.predict(engine.Scenario("x", (t,), (60,)), gpu, replicates=5) if p.metric == "wall")
            for t in (plain, drifting)]
    assert rows[1].p99_ms == rows[0].p99_ms and rows[1].p50_ms == rows[0].p50_ms
    assert rows[1].p99_lo < rows[0].p99_lo and rows[1].p99_hi > rows[0].p99_hi
    assert rows[1].p99_hi / rows[1].p99_ms >= engine.math.exp(1.959964 * 0.3) - 1e-9


def test_bracketed_blocks_predict_each_shared_block_from_the_alone_blocks_on_both_sides(tmp_path):
    from kts_helpers.plan.timeslice import SimTenant
    from kts_helpers.teaching.synthetic import write_sim_run

    run = write_sim_run(tmp_path / "b", [SimTenant("fft", 0.4, 3.0, jitter_ms=1.0), SimTenant("gemm", 2.0, 1.0, jitter_ms=0.5)],
                        2.0, duration_ms=300.0, blocks=2)
    inp = inputs.load_plan_input(run, gpu=False)
    assert inputs.is_bracketed(inp.manifest)
    by_name = {sc.name: sc for sc in inputs.scenarios_of(inp)}
    assert set(by_name) == {"shared-r1", "shared-r2"}
    for k, name in ((1, "shared-r1"), (2, "shared-r2")):
        for t in by_name[name].tenants:
            before = inp.alone[(f"baseline-{t.name}-r{k}", t.name)]
            after = inp.alone[(f"baseline-{t.name}-r{k + 1}", t.name)]
            assert t.iterations == before.iterations + after.iterations
            assert before.iterations != after.iterations  # each block its own draw: the pairing is visible
    # unprofiled tenants carry what their own three blocks measured: the simulated GPU does not drift, so nothing
    assert all(p.drift == () for p in inp.alone.values())
    # the older repeats design (alone rK, shared rK for every K) is not bracketed: shared rK from alone rK alone
    repeats = inputs.load_plan_input(REF / "h200-2026-11-30-repeats", gpu=False)
    assert not inputs.is_bracketed(repeats.manifest)
    for sc in inputs.scenarios_of(repeats):
        k = sc.name.rsplit("-r", 1)[1]
        for t in sc.tenants:
            assert t.iterations == repeats.alone[(f"baseline-{t.name}-r{k}", t.name)].iterations


def test_unprofiled_runs_outside_the_bracketed_design_carry_no_drift():
    """The fft/gemm/llm references (one block, or the older repeats design): their intervals are the ones the
    validation table scored."""
    assert all(p.drift == () for p in inputs.load_plan_input(ARTICLE, gpu=False).alone.values())
    repeats = inputs.load_plan_input(REF / "h200-2026-11-30-repeats", gpu=False)  # three alone blocks per tenant
    assert all(p.drift == () for p in repeats.alone.values())
    real = inputs.load_plan_input(REAL, gpu=False)  # profiled, one block each: the prior scaled by the host share
    decode = real.alone[("baseline-llama-decode", "llama-decode")]
    assert decode.drift_of("decode")[0] == pytest.approx(traits.HOST_DRIFT_PRIOR[0] * decode.traits.host_share)


def test_the_bracketed_blocks_predictions_are_pooled_as_the_measurement_is():
    """The report pools a bracketed run's shared blocks; the validation pools their predictions the same way."""
    from kts_helpers.plan.validation import pooled_blocks

    def pred(scenario: str, p50: float, lo: float, hi: float) -> engine.Prediction:
        return engine.Prediction(scenario, "a", "a", "wall", "op", "timeslice", 100, p50, lo, hi, 2 * p50, 2 * lo,
                                 2 * hi, 1.0, 0.0, 0.0, 0.0)

    out = pooled_blocks([pred("shared-r1", 10.0, 9.0, 11.0), pred("shared-r2", 14.0, 12.0, 16.0),
                         pred("shared-mps-r1", 5.0, 4.0, 6.0)])
    by = {p.scenario: p for p in out}
    assert set(by) == {"shared", "shared-mps"}
    assert (by["shared"].p50_ms, by["shared"].p50_lo, by["shared"].p50_hi, by["shared"].n) == (12.0, 9.0, 16.0, 200)
    assert (by["shared"].p99_ms, by["shared"].p99_lo, by["shared"].p99_hi) == (24.0, 18.0, 32.0)
    assert by["shared-mps"].p50_ms == 5.0


def test_a_goal_no_n_meets_recommends_nothing_and_writes_no_configmap(tmp_path, capsys):
    """A goal tighter than the tenant alone (the FFT's p99 is ~0.6 ms on the H200): N = 1 already misses, so the
    answer recommends no sharing, in words, rather than "replicas 0", and --configmap-out refuses in one line,
    writing nothing."""
    out = tmp_path / "cm.yaml"
    args = ["plan", "--capacity", "--from-run", str(ARTICLE), "--slo", "fft=0.01", "--max-n", "2"]
    assert main(args + ["--format", "json"]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert set(answer["largest_n"].values()) == {0} and answer["recommended_mode"] is None
    assert answer["recommendation"].startswith("none: not even one pod meets every goal") and answer["configmap"] == ""
    assert main(args) == 0
    assert "recommended: none: not even one pod" in capsys.readouterr().out
    assert main(args + ["--configmap-out", str(out)]) == 2
    err = capsys.readouterr().err
    errors = [ln for ln in err.splitlines() if "error" in ln]  # the planner's notes on fallbacks come before it
    assert len(errors) == 1 and "no N meets every goal, so no ConfigMap was written" in errors[0] and not out.exists()
