"""spec: parameters, profiles, validation before any work, scenario layout."""

from __future__ import annotations

import zlib
from dataclasses import asdict

import pytest

from kts_helpers.errors import SpecError
from kts_helpers.run import experiment
from kts_helpers.run.spec import (
    PROFILES,
    ExperimentParams,
    TenantSpec,
    calibration_scenario,
    resolve,
    scenario_from_dict,
)


def _resolve(device_type="cpu", **params):
    return resolve(ExperimentParams.from_mapping(params), device_type)


def test_unknown_parameter_listed_before_any_work(tmp_path, monkeypatch):
    def boom(*a, **k):  # detecting the host is "work": it must not be reached
        raise AssertionError("setup_run did work before checking parameters")

    monkeypatch.setattr("kts_helpers.run.experiment.detect_environment", boom)
    with pytest.raises(SpecError) as exc:
        experiment.setup_run({"profile": "tiny", "iteratons": 5, "zzz": 1}, root=tmp_path)
    msg = str(exc.value)
    assert "iteratons" in msg and "zzz" in msg and "\n" not in msg
    assert list(tmp_path.iterdir()) == []


def test_unknown_profile(tmp_path):
    with pytest.raises(SpecError, match="unknown profile 'nope'"):
        _resolve(profile="nope")
    with pytest.raises(SpecError, match="unknown profile"):
        experiment.setup_run({"profile": "nope"}, root=tmp_path)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("params, needle", [
    ({"sleep_ms_fft": -1}, "sleep_ms_fft"),
    ({"sleep_ms_gemm": -0.5}, "sleep_ms_gemm"),
    ({"iterations": 0}, "iterations"),
    ({"matrix_size": 0}, "fft_size"),
    ({"warmup": -1}, "warmup"),
    ({"threads": 0}, "threads"),
    ({"workloads": "fft,gemm,llm,fft,gemm"}, "1 to 4 tenants"),
    ({"workloads": []}, "1 to 4 tenants"),
    ({"workloads": "fft,conv"}, "conv"),
    ({"workloads": "noop"}, "noop"),
    ({"sharing": "timeslice,mig"}, "mig"),
    ({"sharing": []}, "sharing"),
    ({"arrival": "poisson"}, "rate_hz"),
    ({"arrival": "fixed", "rate_hz": 0}, "rate_hz"),
    ({"arrival": "bursty", "rate_hz": 5}, "bursty"),
    ({"repeats": 0}, "repeats"),
    ({"mps_thread_percentage": 0}, "mps_thread_percentage"),
    ({"mps_thread_percentage": 101}, "mps_thread_percentage"),
    ({"backend": "slurm"}, "slurm"),
    ({"device": "tpu"}, "tpu"),
])
def test_bad_values(params, needle):
    with pytest.raises(SpecError) as exc:
        _resolve(profile="tiny", **params)
    assert needle in str(exc.value)
    assert "\n" not in str(exc.value)


def test_open_loop_with_rate_is_fine():
    spec = _resolve(profile="tiny", arrival="poisson", rate_hz=50)
    fft = spec.scenario("baseline-fft").tenants[0]
    gemm = spec.scenario("baseline-gemm").tenants[0]
    assert (fft.arrival, fft.rate_hz) == ("poisson", 50.0)
    assert (gemm.arrival, gemm.rate_hz) == ("closed", 0.0)  # the neighbour stays closed-loop


def test_article_profile_defaults():
    spec = _resolve("cuda", profile="article")
    r = spec.resolved
    assert (r["iterations"], r["fft_size"], r["gemm_size"], r["warmup"]) == (800, 4096, 4096, 5)
    assert (r["sleep_ms_fft"], r["sleep_ms_gemm"]) == (100.0, 150.0)
    one = _resolve("cuda", profile="article", blocks=0)  # one block a side: the article's own layout
    fft, gemm = one.scenario("baseline-fft").tenants[0], one.scenario("baseline-gemm").tenants[0]
    assert (fft.iterations, fft.matrix_size, fft.sleep_ms, fft.warmup) == (800, 4096, 100.0, 5)
    assert (gemm.iterations, gemm.matrix_size, gemm.sleep_ms, gemm.warmup) == (800, 4096, 150.0, 5)


def test_the_fresh_design_brackets_shared_blocks_with_alone_blocks():
    """Issue 30: alone, shared, alone, shared, alone; each side keeps its 800 iterations, split evenly (the fresh
    design; the GPU profiles' default is now the warm one, tests/test_warm.py)."""
    spec = _resolve("cuda", profile="article", design="fresh")
    assert [s.name for s in spec.scenarios] == [
        "baseline-fft-r1", "baseline-gemm-r1", "shared-r1", "baseline-fft-r2", "baseline-gemm-r2", "shared-r2",
        "baseline-fft-r3", "baseline-gemm-r3"]
    assert spec.resolved["design"] == "3 alone blocks around 2 shared blocks"
    assert [t.iterations for t in spec.scenario("shared-r2").tenants] == [400, 400]
    assert spec.scenario("baseline-fft-r3").tenants[0].iterations == 267
    assert [s.repeat for s in spec.scenarios if s.name.startswith("baseline-fft")] == [0, 1, 2]
    kept = _resolve("cpu", profile="cpu-quick", repeats=2)  # the profile's design gives way to repeats, and says so
    assert kept.resolved["design"] == "one block a side (repeats=2)" and kept.resolved["blocks"] == 0
    with pytest.raises(SpecError, match="blocks=2"):
        _resolve("cpu", profile="cpu-quick", repeats=2, blocks=2)
    kept = _resolve("cpu", profile="saturating", repeats=2)  # a GPU profile with blocks of its own: the same words
    assert kept.resolved["design"] == "one block a side (repeats=2)"


@pytest.mark.parametrize("profile", ["article", "cpu-quick", "tiny", "saturating"])
def test_profiles_resolve_to_their_table(profile):
    spec = _resolve(profile=profile)
    assert spec.profile == profile
    warm = PROFILES[profile].get("design") == "warm"  # the warm design's layout: tests/test_warm.py
    for key, value in PROFILES[profile].items():
        if not (warm and key in ("design", "blocks")):
            assert spec.resolved[key] == value
    names = [s.name for s in spec.scenarios]
    blocks = spec.resolved["blocks"] if warm else 2
    assert names[: 3 * blocks + 2] == (
        ["baseline-fft", "baseline-gemm", "shared"] if not (warm or PROFILES[profile].get("blocks")) else
        [n for b in range(1, blocks + 2) for n in (f"baseline-fft-r{b}", f"baseline-gemm-r{b}", f"shared-r{b}")][:-1])


def test_default_profile_by_device():
    assert _resolve("cuda").profile == "article"
    assert _resolve("cpu").profile == "cpu-quick"


def test_explicit_values_override_profile():
    spec = _resolve(profile="article", iterations=30, matrix_size=64, gemm_size=128, sleep_ms_fft=0.0, blocks=0)
    fft, gemm = spec.scenario("shared").tenants
    assert (fft.iterations, fft.matrix_size, fft.sleep_ms) == (30, 64, 0.0)
    assert (gemm.iterations, gemm.matrix_size, gemm.sleep_ms) == (30, 128, 150.0)


def test_scenario_layout_baseline_per_tenant_and_one_shared():
    spec = _resolve(profile="tiny", workloads="fft,gemm,llm")
    assert [s.name for s in spec.scenarios_of("baseline")] == ["baseline-fft", "baseline-gemm", "baseline-llm"]
    assert all(len(s.tenants) == 1 for s in spec.scenarios_of("baseline"))
    shared = spec.scenarios_of("shared")
    assert len(shared) == 1 and shared[0].tenant_names == ["fft", "gemm", "llm"]
    assert shared[0].sharing == "timeslice"


def test_single_workload_has_no_shared_scenario():
    spec = _resolve(profile="tiny", workloads="gemm")
    assert [s.name for s in spec.scenarios] == ["baseline-gemm"]


def test_duplicate_workloads_get_numbered_tenants():
    spec = _resolve(profile="tiny", workloads=["gemm", "gemm", "fft"])
    assert spec.scenario("shared").tenant_names == ["gemm-1", "gemm-2", "fft"]
    assert spec.scenario("baseline-gemm-2").tenants[0].workload == "gemm"


def test_matrix_mode_pairs():
    spec = _resolve(profile="tiny", workloads="fft,gemm,llm", matrix=True)
    shared = [s.name for s in spec.scenarios_of("shared")]
    assert shared == ["shared-fft+gemm", "shared-fft+llm", "shared-gemm+llm", "shared-all"]
    assert spec.scenario("shared-fft+llm").tenant_names == ["fft", "llm"]
    two = _resolve(profile="tiny", workloads="fft,gemm", matrix=True)
    assert [s.name for s in two.scenarios_of("shared")] == ["shared-fft+gemm"]


def test_repeats_suffixes():
    spec = _resolve(profile="tiny", repeats=3)
    names = [s.name for s in spec.scenarios]
    assert len(names) == 9 == len(set(names))
    for r in (1, 2, 3):
        assert {f"baseline-fft-r{r}", f"baseline-gemm-r{r}", f"shared-r{r}"} <= set(names)
        assert spec.scenario(f"shared-r{r}").repeat == r - 1


def test_sharing_modes_add_scenarios():
    spec = _resolve(profile="tiny", sharing="timeslice,mps,mps-limited", mps_thread_percentage=50)
    shared = spec.scenarios_of("shared")
    assert [(s.name, s.sharing) for s in shared] == [("shared", "timeslice"), ("shared-mps", "mps"),
                                                    ("shared-mps-limited", "mps-limited")]
    assert all(s.sharing == "timeslice" for s in spec.scenarios_of("baseline"))
    # only mps-limited limits the tenants' SM share; baselines and plain MPS run unlimited
    assert [t.mps_thread_percentage for t in spec.scenario("shared-mps-limited").tenants] == [50, 50]
    for s in spec.scenarios:
        if s.sharing != "mps-limited":
            assert all(t.mps_thread_percentage is None for t in s.tenants), s.name
    assert spec.resolved["sharing"] == ["timeslice", "mps", "mps-limited"]


def test_mps_limited_per_workload_percentage():
    spec = _resolve(profile="tiny", sharing="mps-limited", mps_thread_percentage={"gemm": 30})
    fft, gemm = spec.scenario("shared-mps-limited").tenants
    assert (fft.mps_thread_percentage, gemm.mps_thread_percentage) == (None, 30)
    assert gemm.env()["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "30"
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in fft.env()


@pytest.mark.parametrize("params", [{"sharing": "mps-limited"},
                                    {"sharing": "mps-limited", "mps_thread_percentage": {"gemm": 0}},
                                    {"mps_thread_percentage": 50.5}])
def test_mps_percentage_checked(params):
    with pytest.raises(SpecError, match="mps_thread_percentage"):
        _resolve(profile="tiny", **params)


def test_per_workload_iterations():
    spec = _resolve(profile="tiny", iterations=20, iterations_gemm=7)
    assert [t.iterations for t in spec.scenario("shared").tenants] == [20, 7]
    assert spec.scenario("baseline-gemm").tenants[0].iterations == 7


def test_unknown_scenario_name():
    with pytest.raises(SpecError, match="unknown scenario 'x'"):
        _resolve(profile="tiny").scenario("x")


def test_scenario_from_dict_round_trip():
    spec = _resolve(profile="tiny", workloads="fft,gemm,llm", sharing="mps,mps-limited", matrix=True, repeats=2,
                    mps_thread_percentage={"llm": 30}, arrival="fixed", rate_hz=20, duration_s=2)
    for s in spec.scenarios:
        assert scenario_from_dict(asdict(s)) == s
    for d in spec.to_dict()["scenarios"]:
        assert asdict(scenario_from_dict(d)) == d


def test_from_mapping_accepts_comma_strings_and_lists():
    a = ExperimentParams.from_mapping({"workloads": " fft, gemm ,", "sharing": ["mps"]})
    assert a.workloads == ("fft", "gemm") and a.sharing == ("mps",)


def test_tenant_env():
    t = TenantSpec(name="fft-1", workload="fft", iterations=30, matrix_size=64, sleep_ms=1, warmup=2,
                   threads=2, arrival="poisson", rate_hz=12.5, duration_s=3)
    env = t.env()
    assert env == {"WORKLOAD": "fft", "TENANT": "fft-1", "ITERATIONS": "30", "MATRIX_SIZE": "64",
                   "SLEEP_MS": "1.0", "WARMUP": "2", "THREADS": "2", "ARRIVAL": "poisson", "RATE_HZ": "12.5",
                   "DURATION_S": "3.0", "SEED": str(zlib.crc32(b"fft-1"))}  # its own Poisson arrivals
    assert "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE" not in env
    assert all(isinstance(v, str) for v in env.values())
    with_mps = TenantSpec("g", "gemm", 1, 1, 0.0, mps_thread_percentage=40).env()
    assert with_mps["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "40"


def test_calibration_scenario():
    s = calibration_scenario({"calibrate_iterations": 20})
    assert s.kind == "calibration" and s.tenant_names == ["noop"]
    assert (s.tenants[0].workload, s.tenants[0].iterations, s.tenants[0].sleep_ms) == ("noop", 20, 0.0)
    assert calibration_scenario({}).tenants[0].iterations == 1


@pytest.mark.parametrize(("key", "value", "expected"), [
    ("iterations", "abc", "an integer"), ("repeats", 1.5, "an integer"), ("sleep_ms_fft", "fast", "a number"),
    ("timeout_s", [1], "a number"), ("matrix", 1, "true or false"), ("workloads", 5, "list of names"),
    ("mps_thread_percentage", {"gemm": "half"}, "an integer or a JSON object of integers"),
    ("backend", 3.5, None), ("device", None, "a string")])
def test_wrong_type_is_one_line_naming_key_and_type(key, value, expected):
    if expected is None:  # a number where text is expected is taken as its text (then checked as usual)
        assert ExperimentParams.from_mapping({key: value}).backend == "3.5"
        return
    with pytest.raises(SpecError) as exc:
        ExperimentParams.from_mapping({key: value})
    msg = str(exc.value)
    assert msg.startswith(f"parameter {key}=") and expected in msg and "\n" not in msg


def test_right_types_pass_unchanged():
    p = ExperimentParams.from_mapping({"iterations": 5, "sleep_ms_fft": 2, "timeout_s": 1.5, "matrix": True,
                                       "label": "x", "mps_thread_percentage": {"gemm": 50}, "threads": None})
    assert (p.iterations, p.sleep_ms_fft, p.timeout_s, p.matrix, p.label) == (5, 2, 1.5, True, "x")
    assert p.mps_thread_percentage == {"gemm": 50} and p.threads is None


def test_cpu_quick_gives_each_tenant_one_thread():
    """A lone tenant measures its own work, not the OS scheduling its own threads on a small machine."""
    spec = _resolve("cpu")
    assert spec.profile == "cpu-quick"
    assert {t.threads for s in spec.scenarios for t in s.tenants} == {1}
    assert spec.scenario("shared-r1").tenants[0].env()["THREADS"] == "1"
    assert spec.resolved["iterations"] >= 662  # enough samples for a distribution-free bound on each p99


def test_cpu_stand_in_pins_every_tenant_to_one_core_only_on_a_cpu():
    cpu = _resolve("cpu")
    assert {t.env().get("KTS_CPU_CORE") for s in cpu.scenarios for t in s.tenants} == {"-1"}
    gpu = resolve(ExperimentParams.from_mapping({"profile": "cpu-quick", "cpu_core": 0}), "cuda")
    assert all("KTS_CPU_CORE" not in t.env() for s in gpu.scenarios for t in s.tenants)
    chosen = resolve(ExperimentParams.from_mapping({"cpu_core": 0}), "cpu")
    assert {t.env()["KTS_CPU_CORE"] for s in chosen.scenarios for t in s.tenants} == {"0"}
    with pytest.raises(SpecError, match="cpu_core=-5"):
        resolve(ExperimentParams.from_mapping({"cpu_core": -5}), "cpu")


def test_sleep_dist_reaches_the_worker_only_where_asked():
    """cpu-quick's think times are exponential (fixed sleeps lock two loops on one core into a beat); the GPU
    profiles keep the article's fixed sleeps; a typo fails in one line."""
    cpu = _resolve("cpu")
    assert {t.env().get("SLEEP_DIST") for s in cpu.scenarios for t in s.tenants} == {"exp"}
    seeds: dict[str, set[str]] = {}  # each tenant its own think times, the same alone and shared
    for t in (t for s in cpu.scenarios for t in s.tenants):
        seeds.setdefault(t.name, set()).add(t.env()["SEED"])
    assert sorted(seeds) == ["fft", "gemm"] and all(len(v) == 1 for v in seeds.values())
    assert seeds["fft"] != seeds["gemm"]
    article = resolve(ExperimentParams.from_mapping({"profile": "article"}), "cuda")
    assert {t.sleep_dist for s in article.scenarios for t in s.tenants} == {"fixed"}
    assert all("SLEEP_DIST" not in t.env() for s in article.scenarios for t in s.tenants)
    # the seed is every tenant's, whatever its sleeps: Poisson arrivals and inputs draw from it too
    by_name = {t.name: t.env()["SEED"] for s in article.scenarios for t in s.tenants}
    assert by_name["fft"] != by_name["gemm"] and by_name == {k: seeds[k].pop() for k in ("fft", "gemm")}
    chosen = resolve(ExperimentParams.from_mapping({"profile": "article", "sleep_dist": "exp"}), "cuda")
    assert {t.env()["SLEEP_DIST"] for s in chosen.scenarios for t in s.tenants} == {"exp"}
    with pytest.raises(SpecError, match="unknown sleep_dist 'poisson'; choose from fixed, exp"):
        resolve(ExperimentParams.from_mapping({"sleep_dist": "poisson"}), "cpu")
