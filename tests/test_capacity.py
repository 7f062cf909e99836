"""GPU memory estimates per tenant and the capacity check done before a run starts."""

from __future__ import annotations

import json

import pytest

from kts_helpers.errors import SpecError
from kts_helpers.run.capacity import (
    CONTEXT_MIB,
    LLM_DEFAULTS,
    check_capacity,
    estimate_scenario_memory_mib,
    estimate_tenant_memory_mib,
    llm_parameters,
)
from kts_helpers.run.spec import ExperimentParams, TenantSpec, calibration_scenario, resolve

MIB = 2**20


def _tenant(workload: str, n: int = 4096) -> TenantSpec:
    return TenantSpec(name=workload, workload=workload, iterations=10, matrix_size=n, sleep_ms=0.0)


def test_tensor_models():
    assert estimate_tenant_memory_mib(_tenant("fft", 4096)) == pytest.approx(CONTEXT_MIB + 3 * 4096**2 * 8 / MIB)
    assert estimate_tenant_memory_mib(_tenant("fft", 4096)) == pytest.approx(CONTEXT_MIB + 384)
    assert estimate_tenant_memory_mib(_tenant("gemm", 8192)) == pytest.approx(CONTEXT_MIB + 768)
    assert estimate_tenant_memory_mib(_tenant("noop", 1)) == CONTEXT_MIB
    assert estimate_tenant_memory_mib(_tenant("gemm", 8192), context_mib=0) == pytest.approx(768)


def test_llm_model_counts_the_workers_parameters():
    d, layers, vocab = LLM_DEFAULTS["d_model"], LLM_DEFAULTS["layers"], LLM_DEFAULTS["vocab"]
    assert llm_parameters(d, layers, vocab) == 16_807_936  # sum(p.numel()) of the worker's default model
    base = estimate_tenant_memory_mib(_tenant("llm"))
    params_mib = 16_807_936 * 4 / MIB
    assert CONTEXT_MIB + params_mib < base < CONTEXT_MIB + params_mib + 64
    bigger = (llm_parameters(1024, layers, vocab) - 16_807_936) * 4 / MIB  # layers x4, embedding and head x2
    assert estimate_tenant_memory_mib(_tenant("llm"), llm={"d_model": 1024}) > base + bigger


def test_a_workload_without_a_memory_model_counts_its_context():
    # a real model or a user's factory: no a-priori model (its measured footprint is in its alone profile)
    assert estimate_tenant_memory_mib(_tenant("my_pkg.tenants:make_bert")) == CONTEXT_MIB
    assert estimate_tenant_memory_mib(_tenant("gemm")) > CONTEXT_MIB


def test_check_capacity_passes_and_returns_estimates():
    spec = resolve(ExperimentParams.from_mapping({"profile": "saturating", "workloads": "fft,gemm,llm", "blocks": 0,
                                                  "matrix": True}), "cuda")
    scenarios = [*spec.scenarios, calibration_scenario(spec.resolved)]
    est = check_capacity(scenarios, 139.8 * 1024)
    assert set(est) == {s.name for s in spec.scenarios}  # calibration is not checked
    assert est["shared-all"] == pytest.approx(sum(est[f"baseline-{t}"] for t in ("fft", "gemm", "llm")))
    assert est["shared-fft+gemm"] == pytest.approx(2 * CONTEXT_MIB + 384 + 768)
    assert check_capacity(scenarios, None) == est  # memory unknown (CPU): estimates, no check


def test_check_capacity_names_the_scenario_that_does_not_fit():
    spec = resolve(ExperimentParams.from_mapping({"profile": "article", "blocks": 0}), "cuda")
    need = estimate_scenario_memory_mib(spec.scenario("shared"))
    gpu = need / 0.9 - 10  # the shared scenario just over 90 %, each baseline well under
    with pytest.raises(SpecError) as exc:
        check_capacity(spec.scenarios, gpu)
    msg = str(exc.value)
    assert msg.startswith(f"scenario shared needs ~{need:.0f} MiB for 2 tenants; the GPU has {gpu:.0f} MiB")
    assert "\n" not in msg
    check_capacity(spec.scenarios, gpu, headroom=1.0)  # fits without the headroom


def test_check_capacity_counts_more_offenders_and_reads_manifests():
    spec = resolve(ExperimentParams.from_mapping({"profile": "article", "workloads": "fft,fft,gemm,llm", "blocks": 0}), "cuda")
    scenarios = json.loads(json.dumps(spec.to_dict()))["scenarios"]  # as a manifest holds them
    est = check_capacity(scenarios, 139.8 * 1024)
    assert est["shared"] == pytest.approx(sum(v for k, v in est.items() if k.startswith("baseline-")))
    with pytest.raises(SpecError, match=r"^scenario shared needs ~\d+ MiB for 4 tenants; .* more scenario"):
        check_capacity(scenarios, 1000.0)


@pytest.mark.parametrize(("memory", "headroom", "what"), [(0, 0.9, "gpu_memory_mib"), (-5, 0.9, "gpu_memory_mib"),
                                                          (1000, 0, "headroom"), (1000, 1.5, "headroom")])
def test_check_capacity_bad_arguments(memory, headroom, what):
    with pytest.raises(SpecError, match=what):
        check_capacity([], memory, headroom=headroom)
