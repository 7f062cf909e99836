"""The planner's input loaded once, each tenant's traits measured by its alone profile, and the fallbacks named.

The faults these tests exist to catch: a function below the CLI that opens the run again; a profile ignored (the
name's fallback used although the run measured the tenant); a profile's numbers read wrongly (busy share against
the profiled wall rather than the timed one, SM share ignored); a new constant in ``plan/`` keyed by workload name.
"""

from __future__ import annotations

import ast
import json
import re
import sys
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
    """Count ``runs.open_run`` per resolved directory, wherever a module imported it."""
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
    assert t.fills_gpu  # 60 % of its kernel time in >= 2-wave kernels, busy 71 % of the op
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
