"""Experiment specification: profiles, parameters, tenants and scenarios.

Everything a run does is decided here, before any work starts, so that a typo in a
parameter or profile fails in a second instead of after a ten-minute baseline.
Imports only the standard library: the runner must work on a bare GPU host. Longer than 500 lines: the scenario
layouts (one block a side, the bracketed design, probes) are decided from the same validated parameters, and a
layout split from its validation would let a parameter reach the runner unchecked.
"""

from __future__ import annotations

import itertools
import json
import math
import zlib
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any, Literal

from kts_helpers.errors import SpecError
from kts_helpers.run.looks import BUDGET_FACTOR, block_looks, budget_words, look_counts
from kts_helpers.run.probe import (
    CPU_REFUSAL,
    HOG,
    HOG_LONG,
    HOG_POISSON,
    HOG_SHORT,
    LENGTHS,
    PROBE_MODES,
    PROBE_PROFILE,
    TICK,
    TICK_BB,
    cube_law_size,
    multi_name,
)
from kts_helpers.run.probe import DEFAULTS as PROBE_DEFAULTS
from kts_helpers.run.probe import MULTI as MULTI_DEFAULTS
from kts_helpers.run.profiles import PROFILES, WARM_BLOCK_S, WARM_BLOCKS, default_profile
from kts_helpers.run.workloads import KIT_WORKLOADS, REAL_MODELS, base_name, unknown_workloads

WORKLOAD_KINDS = ("fft", "gemm", "llm", "noop")
SHARING_MODES = ("timeslice", "mps", "mps-limited")  # mps-limited: MPS + CUDA_MPS_ACTIVE_THREAD_PERCENTAGE
ARRIVALS = ("closed", "poisson", "fixed")
DESIGNS = ("warm", "fresh")  # warm: one process per tenant and mode runs every block; fresh: processes per block
SLEEP_DISTS = ("fixed", "exp")  # fixed sleeps lock two cadences into a beat; exponential think times do not
AUTO = "auto"  # iterations=auto: each tenant runs until its p99 is known to +-auto_rel_width (workers/kts_worker.py)
DEFAULT_AUTO_REL_WIDTH = 0.10
DEFAULT_AUTO_TIME_CAP_S = 600.0  # at most half the scenario timeout
DEFAULT_AUTO_MAX_ITERATIONS = 100_000
# The alone scenario profiles each tenant (workers/kts_profile.py): this many whole iterations (at most 2 s) under
# torch.profiler after the warm-up, before the barrier, so none of the timed iterations is profiled.
PROFILE_ITERATIONS = 10


@dataclass(frozen=True)
class TenantSpec:
    """One worker process: which workload, how big, how often."""

    name: str
    workload: str
    iterations: int
    matrix_size: int
    sleep_ms: float
    sleep_dist: str = "fixed"  # closed loop: "fixed" sleeps (the article) or "exp" think times of that mean
    warmup: int = 5
    threads: int = 1
    arrival: str = "closed"
    rate_hz: float = 0.0
    duration_s: float = 0.0
    mps_thread_percentage: int | None = None
    auto: bool = False  # iterations=auto: ``iterations`` is then the cap on the count
    auto_rel_width: float = DEFAULT_AUTO_REL_WIDTH
    auto_time_cap_s: float = DEFAULT_AUTO_TIME_CAP_S
    cpu_core: int | None = None  # the CPU stand-in: the one core every tenant is pinned to (-1: the last allowed)
    looks: tuple[int, ...] = ()  # interim looks (shared, shared_max_factor > 1): ``iterations`` is then the maximum
    workload_params: str = ""  # the factory's own parameters (a JSON object; the worker's KTS_WORKLOAD_PARAMS)
    profile_iterations: int = 0  # alone: profile this many iterations before the barrier (KTS_PROFILE_ITERATIONS)

    @property
    def iterations_text(self) -> str:
        if self.looks:
            return f"{self.looks[0]} (on to {self.iterations} while undecided; looks {self.looks})"
        return (f"auto (p99 to ±{self.auto_rel_width:.0%}, cap {self.auto_time_cap_s:g} s / {self.iterations})"
                if self.auto else str(self.iterations))

    def env(self) -> dict[str, str]:
        """The worker's knobs as environment variables (what a pod spec would set)."""
        env = {
            "WORKLOAD": self.workload, "TENANT": self.name, "ITERATIONS": AUTO if self.auto else str(self.iterations),
            "MATRIX_SIZE": str(self.matrix_size), "SLEEP_MS": repr(float(self.sleep_ms)),
            "WARMUP": str(self.warmup), "THREADS": str(self.threads), "ARRIVAL": self.arrival,
            "RATE_HZ": repr(float(self.rate_hz)), "DURATION_S": repr(float(self.duration_s)),
        }
        if self.auto:
            env.update({"KTS_AUTO_REL_WIDTH": repr(float(self.auto_rel_width)),
                        "KTS_AUTO_TIME_CAP_S": repr(float(self.auto_time_cap_s)),
                        "KTS_AUTO_MAX_ITERATIONS": str(self.iterations)})
        if self.cpu_core is not None:
            env["KTS_CPU_CORE"] = str(self.cpu_core)
        if self.looks:
            env["KTS_LOOKS"] = ",".join(map(str, self.looks))
        if self.workload_params:
            env["KTS_WORKLOAD_PARAMS"] = self.workload_params
        if self.profile_iterations:
            env["KTS_PROFILE_ITERATIONS"] = str(self.profile_iterations)
        # each tenant its own draws (think times, Poisson arrivals, inputs), the same alone and shared: one seed
        # for all handed every tenant the same think times, scaled, starting their loops in step
        env["SEED"] = str(zlib.crc32(self.name.encode()))
        if self.sleep_dist != "fixed":
            env["SLEEP_DIST"] = self.sleep_dist
        if self.mps_thread_percentage is not None:
            env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] = str(self.mps_thread_percentage)
        return env


@dataclass(frozen=True)
class ScenarioSpec:
    """A set of tenants that run at the same time on one GPU."""

    name: str
    kind: str  # "baseline" (one tenant alone) or "shared"
    tenants: tuple[TenantSpec, ...]
    sharing: str = "timeslice"
    repeat: int = 0

    @property
    def tenant_names(self) -> list[str]:
        return [t.name for t in self.tenants]


@dataclass(frozen=True)
class ExperimentParams:
    """The notebook / CLI parameters. ``None`` means "take the profile's value"."""

    profile: str | None = None
    device: str = "auto"
    backend: str = "local"
    workloads: tuple[str, ...] | None = None
    iterations: int | Literal['auto'] | None = None  # a count, or "auto" (the stopping rule; see the auto_* parameters)
    matrix_size: int | None = None
    fft_size: int | None = None
    gemm_size: int | None = None
    sleep_ms_fft: float | None = None
    sleep_ms_gemm: float | None = None
    sleep_ms_llm: float | None = None
    sleep_dist: str | None = None  # closed loop: "fixed" (the article's sleeps) or "exp" (think times of that mean)
    warmup: int | None = None
    threads: int | None = None
    timeout_s: float | None = None
    pad_limit_s: float | None = None  # how long a finished tenant may pad for slower ones (None: timeout_s)
    repeats: int = 1
    blocks: int | str | None = None  # shared in this many blocks between alone blocks; "auto" (warm: until decided)
    sharing: tuple[str, ...] = ("timeslice",)
    mps_thread_percentage: int | dict[str, int] | None = None  # one for all, or per workload
    matrix: bool = False
    arrival: str = "closed"
    rate_hz: float = 0.0
    duration_s: float = 0.0
    iterations_fft: int | Literal['auto'] | None = None
    iterations_gemm: int | Literal['auto'] | None = None
    iterations_llm: int | Literal['auto'] | None = None
    auto_rel_width: float | None = None  # iterations=auto: stop when the p99's 95 % bounds lie within +-this
    auto_time_cap_s: float | None = None  # ... or after this many seconds of timed iterations
    auto_max_iterations: int | None = None  # ... or after this many timed iterations
    shared_max_factor: float | None = None  # an undecided shared tenant times on up to this x n (run/looks.py)
    calibrate_iterations: int | None = None
    cpu_core: int | None = None  # CPU only: pin every tenant to this core (-1: the last allowed); None: the profile's
    probe_mode: str = "pair"  # the time-slice probe: "pair" (quantum and switch) or "multi" (k = 1..3 neighbours)
    sleep_ms: dict[str, float] | None = None  # per workload, any workload (a real model, a plug-in): its sleep
    workload_params: dict[str, dict] | None = None  # per workload: the factory's params (model sizes, batch, ...)
    profile_iterations: int | None = None  # alone scenarios: iterations profiled (0: none; default PROFILE_ITERATIONS)
    design: str | None = None  # "warm" (tenants stay, many short blocks) or "fresh" (processes per block); None: profile's
    block_s: float | None = None  # warm design: each block's timed part lasts at least this many seconds
    label: str = ""

    @classmethod
    def from_mapping(cls, values: dict[str, Any]) -> ExperimentParams:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise SpecError(f"unknown parameter(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        clean = {k: v for k, v in values.items()}
        for key in ("workloads", "sharing"):
            if isinstance(clean.get(key), str):
                clean[key] = tuple(s.strip() for s in clean[key].split(",") if s.strip())
            elif isinstance(clean.get(key), (list, tuple)):
                clean[key] = tuple(clean[key])
        for f in fields(cls):
            if f.name in clean:
                clean[f.name] = _typed(f.name, clean[f.name], str(f.type))
        return cls(**clean)


# What each annotation accepts, and how an error names it ("iterations=abc: expected an integer").
_ACCEPTS: dict[str, tuple[Any, str]] = {
    "None": (lambda v: v is None, ""),
    "int": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "float": (lambda v: isinstance(v, (int, float)) and not isinstance(v, bool), "a number"),
    "bool": (lambda v: isinstance(v, bool), "true or false"),
    "str": (lambda v: isinstance(v, str), "a string"),
    "Literal['auto']": (lambda v: v == AUTO, "'auto'"),
    "tuple[str, ...]": (lambda v: isinstance(v, tuple) and all(isinstance(x, str) for x in v),
                        "a comma-separated list of names"),
    "dict[str, int]": (lambda v: isinstance(v, dict) and all(isinstance(x, int) and not isinstance(x, bool)
                                                             for x in v.values()),
                       'a JSON object of integers, e.g. {"gemm": 50}'),
    "dict[str, float]": (lambda v: isinstance(v, dict) and all(isinstance(x, (int, float)) and not isinstance(x, bool)
                                                               for x in v.values()),
                         'a JSON object of numbers, e.g. {"bert": 20}'),
    "dict[str, dict]": (lambda v: isinstance(v, dict) and all(isinstance(x, dict) for x in v.values()),
                        'a JSON object of objects, e.g. {"llama-decode": {"layers": 8}}'),
}


def _typed(name: str, value: Any, annotation: str) -> Any:
    """Check a parameter against its field's annotation, so a typo fails here in one line, not as a traceback
    later. A number given where only text is expected (``label=2024``) is taken as its text."""
    kinds = [k.strip() for k in annotation.split("|")]
    if any(k not in _ACCEPTS for k in kinds):
        return value  # an annotation this check does not know: the field's own validation decides
    if any(_ACCEPTS[k][0](value) for k in kinds):
        return value
    if "str" in kinds and isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    expected = " or ".join(_ACCEPTS[k][1] for k in kinds if k != "None")
    raise SpecError(f"parameter {name}={value!r}: expected {expected}")


@dataclass(frozen=True)
class ExperimentSpec:
    """The resolved experiment: profile values overlaid with explicit parameters.

    It is written into the run's manifest once (``to_json``) and read back typed (``from_json``), so
    no later step resolves parameters again or digs through manifest dicts. ``backend_options`` are
    what the backend was built with (e.g. the Kubernetes namespace), so every step rebuilds the same one.
    """

    params: ExperimentParams
    profile: str
    device: str
    resolved: dict[str, Any] = field(default_factory=dict)
    scenarios: tuple[ScenarioSpec, ...] = ()
    backend_options: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {"profile": self.profile, "device": self.device, "params": asdict(self.params),
                "resolved": self.resolved, "scenarios": [asdict(s) for s in self.scenarios],
                "backend_options": dict(self.backend_options)}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ExperimentSpec:
        """The spec as a manifest holds it (also manifests written before ``backend_options`` moved in)."""
        try:
            params = ExperimentParams.from_mapping(dict(d.get("params") or {}))
            return cls(params=params, profile=str(d["profile"]), device=str(d["device"]),
                       resolved=dict(d.get("resolved") or {}),
                       scenarios=tuple(scenario_from_dict(s) for s in d.get("scenarios") or ()),
                       backend_options=dict(d.get("backend_options") or {}))
        except (KeyError, TypeError) as exc:
            raise SpecError(f"not an experiment spec: {type(exc).__name__}: {exc}") from None

    @classmethod
    def from_json(cls, text: str) -> ExperimentSpec:
        return cls.from_dict(json.loads(text))

    @property
    def timeout_s(self) -> float:
        return float(self.resolved.get("timeout_s") or 600)

    @property
    def pad_limit_s(self) -> float | None:
        return float(self.resolved["pad_limit_s"]) if self.resolved.get("pad_limit_s") else None

    @property
    def repeats(self) -> int:
        return int(self.resolved.get("repeats") or self.params.repeats)

    def tenant(self, scenario: str, tenant: str) -> TenantSpec | None:
        for t in self.scenario(scenario).tenants:
            if t.name == tenant:
                return t
        return None

    def scenario(self, name: str) -> ScenarioSpec:
        for s in self.scenarios:
            if s.name == name:
                return s
        raise SpecError(f"unknown scenario {name!r}; this run has: {', '.join(s.name for s in self.scenarios)}")

    def scenarios_of(self, kind: str) -> list[ScenarioSpec]:
        return [s for s in self.scenarios if s.kind == kind]


def keyed(mapping: dict[str, Any] | None, workload: str, default: Any = None) -> Any:
    """A per-workload setting (``sleep_ms``, ``workload_params``) by either of the tenant's names: as the run names
    the workload (``my_models:gpt2_serve``) or as every table names the tenant (``gpt2-serve``)."""
    mapping = mapping or {}
    for key in (workload, base_name(workload)):
        if key in mapping:
            return mapping[key]
    return default


def _tenant(kind: str, r: dict[str, Any], p: ExperimentParams, name: str | None = None) -> TenantSpec:
    size = r["fft_size"] if kind == "fft" else r["gemm_size"] if kind in ("gemm", "noop") else r["fft_size"]
    count = r.get(f"iterations_{kind}") or r["iterations"]
    auto = _is_auto(count)
    return TenantSpec(
        name=name or kind, workload=kind, iterations=int(r["auto_max_iterations"] if auto else count),
        auto=auto, auto_rel_width=float(r["auto_rel_width"]), auto_time_cap_s=float(r["auto_time_cap_s"]),
        matrix_size=size,
        sleep_ms=keyed(p.sleep_ms, kind, r.get(f"sleep_ms_{kind}", 0.0)), sleep_dist=r.get("sleep_dist") or "fixed", warmup=r["warmup"],
        threads=r["threads"], arrival=p.arrival if kind == "fft" else "closed",
        rate_hz=p.rate_hz if kind == "fft" else 0.0, duration_s=p.duration_s if kind == "fft" else 0.0,
        mps_thread_percentage=(p.mps_thread_percentage.get(kind) if isinstance(p.mps_thread_percentage, dict)
                               else p.mps_thread_percentage),
        cpu_core=r.get("cpu_core"),
        workload_params=json.dumps(keyed(p.workload_params, kind), sort_keys=True)
        if keyed(p.workload_params, kind) is not None else "",
    )


def resolve(params: ExperimentParams, device_type: str) -> ExperimentSpec:
    """Overlay explicit parameters on a profile and lay out the scenarios. Fails fast on bad values."""
    profile = params.profile or default_profile(device_type)
    if profile not in PROFILES:
        raise SpecError(f"unknown profile {profile!r}; choose one of: {', '.join(PROFILES)}")
    r = dict(PROFILES[profile])
    for key in ("workloads", "iterations", "sleep_ms_fft", "sleep_ms_gemm", "sleep_ms_llm", "sleep_dist", "warmup",
                "threads", "timeout_s", "pad_limit_s", "calibrate_iterations", "fft_size", "gemm_size", "iterations_fft",
                "iterations_gemm", "iterations_llm", "auto_rel_width", "auto_time_cap_s", "auto_max_iterations",
                "cpu_core", "shared_max_factor"):
        value = getattr(params, key)
        if value is not None:
            r[key] = value
    r.setdefault("auto_rel_width", DEFAULT_AUTO_REL_WIDTH)
    r.setdefault("auto_time_cap_s", min(DEFAULT_AUTO_TIME_CAP_S, float(r["timeout_s"]) / 2))
    r.setdefault("auto_max_iterations", DEFAULT_AUTO_MAX_ITERATIONS)
    r.setdefault("shared_max_factor", 1.0)
    if device_type != "cpu":  # a GPU tenant's host thread stays where the OS puts it
        r["cpu_core"] = None
    elif r.get("cpu_core") is not None and r["cpu_core"] < -1:
        raise SpecError(f"cpu_core={r['cpu_core']}: a core number, or -1 for the last core this process may use")
    if params.matrix_size is not None:
        r["fft_size"] = r["gemm_size"] = params.matrix_size
        for key in ("fft_size", "gemm_size"):
            if getattr(params, key) is not None:
                r[key] = getattr(params, key)
    if profile == PROBE_PROFILE:
        if device_type != "cuda":
            raise SpecError(CPU_REFUSAL)
        if params.probe_mode not in PROBE_MODES:
            raise SpecError(f"probe_mode={params.probe_mode!r}: choose one of {', '.join(PROBE_MODES)}")
        multi = params.probe_mode == "multi"
        r.update(repeats=1, sharing=["timeslice"], rate_hz=params.rate_hz or PROBE_DEFAULTS["rate_hz"],
                 duration_s=params.duration_s or (MULTI_DEFAULTS["duration_s"] if multi else PROBE_DEFAULTS["duration_s"]),
                 probe_mode=params.probe_mode)
        return ExperimentSpec(params=params, profile=profile, device=device_type, resolved=r,
                              scenarios=(_multi_scenarios if multi else _probe_scenarios)(r, params))
    _validate(r, params)
    tenants = []
    counts: dict[str, int] = {}
    for kind in r["workloads"]:
        counts[base_name(kind)] = counts.get(base_name(kind), 0) + 1
    seen: dict[str, int] = {}
    for kind in r["workloads"]:
        base = base_name(kind)
        seen[base] = seen.get(base, 0) + 1
        name = base if counts[base] == 1 else f"{base}-{seen[base]}"
        tenants.append(_tenant(kind, r, params, name))
    profiled = PROFILE_ITERATIONS if params.profile_iterations is None else params.profile_iterations
    if _warm(r, params):
        r["repeats"] = params.repeats
        r["sharing"] = list(params.sharing)
        return ExperimentSpec(params=params, profile=profile, device=device_type, resolved=r,
                              scenarios=_warm_blocks(tenants, params, r, profiled))
    blocks = _blocks(r, params)
    if blocks:
        r["repeats"] = params.repeats
        r["sharing"] = list(params.sharing)
        return ExperimentSpec(params=params, profile=profile, device=device_type, resolved=r,
                              scenarios=_bracketed(tenants, params, blocks, profiled))
    scenarios: list[ScenarioSpec] = []
    for rep in range(params.repeats):
        suffix = "" if params.repeats == 1 else f"-r{rep + 1}"
        for t in tenants:
            scenarios.append(ScenarioSpec(f"baseline-{t.name}{suffix}", "baseline",
                                          (replace(t, mps_thread_percentage=None, profile_iterations=profiled),),
                                          "timeslice", rep))
        for mode in params.sharing:
            msuffix = "" if mode == "timeslice" else f"-{mode}"
            tenants_m = tenants if mode == "mps-limited" else [replace(t, mps_thread_percentage=None) for t in tenants]
            tenants_m = [extended(t, float(r["shared_max_factor"])) if len(tenants_m) > 1 else t for t in tenants_m]
            if params.matrix:
                for a, b in itertools.combinations(tenants_m, 2):
                    scenarios.append(ScenarioSpec(f"shared{msuffix}-{a.name}+{b.name}{suffix}", "shared",
                                                  (a, b), mode, rep))
                if len(tenants_m) > 2:
                    scenarios.append(ScenarioSpec(f"shared{msuffix}-all{suffix}", "shared", tuple(tenants_m),
                                                  mode, rep))
            elif len(tenants_m) > 1:
                scenarios.append(ScenarioSpec(f"shared{msuffix}{suffix}", "shared", tuple(tenants_m), mode, rep))
    r["repeats"] = params.repeats
    r["sharing"] = list(params.sharing)
    return ExperimentSpec(params=params, profile=profile, device=device_type, resolved=r,
                          scenarios=tuple(scenarios))


def _blocks(r: dict[str, Any], params: ExperimentParams) -> int:
    """How many shared blocks the design brackets with alone blocks (0: every alone scenario, then every shared).

    The default of the GPU profiles and cpu-quick (``blocks`` 2): alone, shared, alone, shared, alone -- each
    tenant's drift between moments is measured by the run itself (``analyse.verdict.drift``). A design that the
    blocks cannot split (repeats, iterations=auto, interim looks, open-loop arrivals) keeps one block a side when
    the blocks came from the profile, and is refused when asked for explicitly; ``resolved["design"]`` says which.
    """
    asked = params.blocks is not None
    if _is_auto(params.blocks):
        raise SpecError("blocks=auto adds blocks while the run goes on, which only the warm design can: set "
                        "design=warm (the GPU profiles' default), or a number of blocks")
    b = int(params.blocks if asked else r.get("blocks", 0))
    autos = [k for k in ("iterations", "iterations_fft", "iterations_gemm", "iterations_llm") if _is_auto(r.get(k))]
    clash = (f"repeats={params.repeats}" if params.repeats > 1 else f"{autos[0]}=auto" if autos else
             f"shared_max_factor={float(r['shared_max_factor']):g}" if float(r["shared_max_factor"]) > 1 else
             f"arrival={params.arrival}" if params.arrival != "closed" else
             "one tenant" if len(r["workloads"]) < 2 else None)
    if b < 0:
        raise SpecError(f"blocks must be >= 0, got {b}")
    if b and clash:
        if asked:
            raise SpecError(f"blocks={b} splits a fixed design of one repeat; {clash} does not split")
        r["design"] = f"one block a side ({clash})"
        b = 0
    else:
        fallback = f" ({r['warm_fallback']})" if r.get("warm_fallback") and not b else ""
        r["design"] = (f"{b + 1} alone blocks around {b} shared blocks" if b else f"one block a side{fallback}")
    r["blocks"] = b
    return b


def _warm(r: dict[str, Any], params: ExperimentParams) -> bool:
    """Whether the run takes the warm design (``workers/kts_serve.py``): asked, or the profile's, and possible.

    Possible on the local backend, for closed loops of fixed counts, without repeats, interim looks, the
    contention matrix or MPS thread caps (a cap holds for a client's whole life, so its alone blocks would be
    capped too); a design asked for where it is not possible is refused, one from the profile falls back to the
    fresh one and ``resolved["design"]`` says why.
    """
    asked = params.design
    if asked is not None and asked not in DESIGNS:
        raise SpecError(f"design={asked!r}: choose one of {', '.join(DESIGNS)}")
    if params.block_s is not None and not params.block_s > 0:
        raise SpecError(f"block_s must be > 0 seconds, got {params.block_s}")
    want = asked or r.get("design") or "fresh"
    if want != "warm":
        return False
    autos = [k for k in ("iterations", "iterations_fft", "iterations_gemm", "iterations_llm") if _is_auto(r.get(k))]
    clash = (f"backend={params.backend}" if params.backend != "local" else
             f"repeats={params.repeats}" if params.repeats > 1 else f"{autos[0]}=auto" if autos else
             f"shared_max_factor={float(r['shared_max_factor']):g}" if float(r["shared_max_factor"]) > 1 else
             f"arrival={params.arrival}" if params.arrival != "closed" else "matrix=true" if params.matrix else
             "sharing=mps-limited" if "mps-limited" in params.sharing else
             "one tenant" if len(r["workloads"]) < 2 else "blocks=0" if params.blocks == 0 else None)
    if clash:
        if asked == "warm":
            raise SpecError(f"design=warm needs the local backend, a fixed count, one repeat and two or more "
                            f"tenants in closed loop; {clash} does not allow it")
        r["design_kind"] = "fresh"
        r["warm_fallback"] = clash  # the profile's warm design gave way: ``_blocks`` says why
        return False
    asked_b = params.blocks if params.blocks is not None else WARM_BLOCKS
    block_s = float(params.block_s or r.get("block_s") or WARM_BLOCK_S)
    plain = "; then one plain alone block per tenant, without the MPS server" if "timeslice" not in params.sharing \
        else ""
    if _is_auto(asked_b):
        schedule = block_looks()
        r.update(design_kind="warm", blocks=schedule[-1], block_s=block_s,
                 blocks_auto={"looks": list(schedule), "budget_factor": BUDGET_FACTOR, "first": schedule[0]},
                 design=f"warm tenants, {budget_words(schedule)}; each block at least {block_s:g} s and its share "
                        f"of the iterations over {schedule[0]} blocks" + plain)
        return True
    try:
        b = int(asked_b)
    except (TypeError, ValueError):
        raise SpecError(f"blocks must be a whole number or auto, got {asked_b!r}") from None
    if b < 1:
        raise SpecError(f"design=warm needs blocks >= 1, got {b}")
    r.update(design_kind="warm", blocks=b, block_s=block_s,
             design=f"warm tenants: {b + 1} alone rounds around {b} shared blocks per sharing mode, each block "
                    f"at least {block_s:g} s and its share of the iterations" + plain)
    return True


def _warm_blocks(tenants: list[TenantSpec], params: ExperimentParams, r: dict[str, Any],
                 profiled: int) -> tuple[ScenarioSpec, ...]:
    """Per sharing mode: alone round 1, shared 1, alone round 2, ..., shared B, alone round B + 1; then, once per
    run, the idle-neighbour control: the first tenant alone with its neighbours gone (``control-<t>-absent``),
    right after its last alone block (neighbours resident and idle). A run of MPS alone adds one plain alone block
    per tenant at its end (``baseline-<t>-plain``, a session of its own without the server): the MPS client's alone
    blocks against plain alone (``analyse.design.mps_alone_table``), measured once per run as in a run of both modes.

    Names as the bracketed design's (``baseline-<t>-rK``, ``shared-rK``; MPS: ``baseline-mps-<t>-rK``,
    ``shared-mps-rK``): the analysis pools and pairs the blocks by K. Under MPS the alone blocks run as MPS
    clients with the server up (the processes are the mode's), so they carry the mode's sharing. A tenant's
    ``iterations`` is then the minimum over each side: every block holds at least its share (alone: of B + 1,
    shared: of B) and lasts at least ``block_s``; ``experiment.run_kind`` runs them by mode in warm sessions
    (``backends.local.LocalBackend.run_warm``).
    """
    b = int(r["blocks"])
    per = int((r.get("blocks_auto") or {}).get("first") or b)  # blocks=auto: each block the size of the first look's

    def share(t: TenantSpec, k: int) -> TenantSpec:
        k = min(k, per + (k - b))  # alone: per + 1, shared: per
        return replace(t, iterations=max(1, math.ceil(t.iterations / k)), mps_thread_percentage=None)

    out: list[ScenarioSpec] = []
    for m, mode in enumerate(params.sharing):
        msuffix = "" if mode == "timeslice" else f"-{mode}"
        for blk in range(b + 1):
            out += [ScenarioSpec(f"baseline{msuffix}-{t.name}-r{blk + 1}", "baseline",
                                 (replace(share(t, b + 1), profile_iterations=profiled),), mode, blk)
                    for t in tenants]
            if blk < b:
                out.append(ScenarioSpec(f"shared{msuffix}-r{blk + 1}", "shared", tuple(share(t, b) for t in tenants),
                                        mode, blk))
        if m == 0:
            first = tenants[0]
            out.append(ScenarioSpec(f"control{msuffix}-{first.name}-absent", "control",
                                    (replace(share(first, b + 1), profile_iterations=0),), mode, b))
    if "timeslice" not in params.sharing:  # MPS only: its alone blocks are MPS clients; once, plain alone beside them
        out += [ScenarioSpec(f"baseline-{t.name}-plain", "baseline", (replace(share(t, b + 1), profile_iterations=0),),
                             "timeslice", 0) for t in tenants]
    return tuple(out)


def _bracketed(tenants: list[TenantSpec], params: ExperimentParams, blocks: int,
               profiled: int) -> tuple[ScenarioSpec, ...]:
    """Alone blocks on both sides of every shared block: baseline-<t>-r1, shared-r1, ..., baseline-<t>-r<B+1>.

    Each side keeps its iteration count, split evenly (alone in B + 1 blocks, shared in B); the blocks are the
    repeats the analysis pools (``-rK``), and the runner takes them in this order (``experiment.run_kind``).
    """
    def split(t: TenantSpec, k: int) -> TenantSpec:
        return replace(t, iterations=max(1, math.ceil(t.iterations / k)))

    out: list[ScenarioSpec] = []
    for blk in range(blocks + 1):
        out += [ScenarioSpec(f"baseline-{t.name}-r{blk + 1}", "baseline",
                             (replace(split(t, blocks + 1), mps_thread_percentage=None, profile_iterations=profiled),),
                             "timeslice", blk)
                for t in tenants]
        if blk == blocks:
            break
        for mode in params.sharing:
            msuffix = "" if mode == "timeslice" else f"-{mode}"
            tenants_m = [split(t, blocks) if mode == "mps-limited" else replace(split(t, blocks),
                                                                                 mps_thread_percentage=None)
                         for t in tenants]
            if params.matrix:
                for a, b in itertools.combinations(tenants_m, 2):
                    out.append(ScenarioSpec(f"shared{msuffix}-{a.name}+{b.name}-r{blk + 1}", "shared", (a, b), mode,
                                            blk))
                if len(tenants_m) > 2:
                    out.append(ScenarioSpec(f"shared{msuffix}-all-r{blk + 1}", "shared", tuple(tenants_m), mode, blk))
            else:
                out.append(ScenarioSpec(f"shared{msuffix}-r{blk + 1}", "shared", tuple(tenants_m), mode, blk))
    return tuple(out)


def _probe_scenarios(r: dict[str, Any], params: ExperimentParams) -> tuple[ScenarioSpec, ...]:
    """The probe's scenarios: tick and hog alone, tick (Poisson) next to hog, hog (Poisson) next to tick."""
    rate = float(params.rate_hz or PROBE_DEFAULTS["rate_hz"])
    duration = float(params.duration_s or PROBE_DEFAULTS["duration_s"])
    hog_n = int(r["gemm_size"])
    # enough timed iterations to cover the tick's window; the tenant that finishes first pads (co-running)
    hog_iterations = int(r.get("iterations_gemm") or r["iterations"])
    common = {"warmup": r["warmup"], "threads": r["threads"]}
    tick = TenantSpec(TICK, "noop", iterations=1_000_000, matrix_size=1, sleep_ms=0.0, arrival="poisson",
                      rate_hz=rate, duration_s=duration, **common)
    hog = TenantSpec(HOG, "gemm", iterations=hog_iterations, matrix_size=hog_n, sleep_ms=0.0, **common)
    # the back-to-back tick of the reverse roles: a GEMM of ~0.5 ms (the hog's size scaled by the cube law),
    # short against any plausible quantum but long enough that its log stays small (a noop back to back would
    # write a million lines in 20 s)
    bb_n = cube_law_size(hog_n, float(PROBE_DEFAULTS["tick_bb_kernel_ms"]))
    tick_bb = TenantSpec(TICK_BB, "gemm", iterations=int(PROBE_DEFAULTS["tick_bb_iterations"]), matrix_size=bb_n,
                         sleep_ms=0.0, **common)
    hog_poisson = TenantSpec(HOG_POISSON, "gemm", iterations=1_000_000, matrix_size=hog_n, sleep_ms=0.0,
                             arrival="poisson", rate_hz=float(PROBE_DEFAULTS["reverse_rate_hz"]),
                             duration_s=float(PROBE_DEFAULTS["reverse_duration_s"]), **common)
    return (ScenarioSpec(f"baseline-{TICK}", "baseline", (tick,)),
            ScenarioSpec(f"baseline-{HOG}", "baseline", (hog,)),
            ScenarioSpec("shared", "shared", (tick, hog)),
            ScenarioSpec(f"baseline-{TICK_BB}", "baseline", (tick_bb,)),
            ScenarioSpec(f"baseline-{HOG_POISSON}", "baseline", (hog_poisson,)),
            ScenarioSpec("shared-reverse", "shared", (hog_poisson, tick_bb)))


def _multi_scenarios(r: dict[str, Any], params: ExperimentParams) -> tuple[ScenarioSpec, ...]:
    """The multi-context probe: tick and short neighbour alone, then the tick next to k short / long hogs."""
    rate = float(params.rate_hz or PROBE_DEFAULTS["rate_hz"])
    duration = float(params.duration_s or MULTI_DEFAULTS["duration_s"])
    hog_n = int(r["gemm_size"])
    common = {"warmup": r["warmup"], "threads": r["threads"]}
    tick = TenantSpec(TICK, "noop", iterations=1_000_000, matrix_size=1, sleep_ms=0.0, arrival="poisson",
                      rate_hz=rate, duration_s=duration, **common)
    # few timed kernels each: the hogs pad (the same GEMM, back to back) until the tick's window has passed
    sizes = {"long": hog_n, "short": cube_law_size(hog_n, float(MULTI_DEFAULTS["short_kernel_ms"]))}
    short_alone = TenantSpec(HOG_SHORT, "gemm", iterations=500, matrix_size=sizes["short"], sleep_ms=0.0, **common)
    long_alone = TenantSpec(HOG_LONG, "gemm", iterations=int(MULTI_DEFAULTS["hog_iterations"]), matrix_size=sizes["long"],
                            sleep_ms=0.0, **common)
    out = [ScenarioSpec(f"baseline-{TICK}", "baseline", (tick,)),
           ScenarioSpec(f"baseline-{HOG_SHORT}", "baseline", (short_alone,)),
           ScenarioSpec(f"baseline-{HOG_LONG}", "baseline", (long_alone,))]
    for length in LENGTHS:
        for k in MULTI_DEFAULTS["contexts"]:
            hogs = tuple(TenantSpec(f"hog-{length}-{i + 1}", "gemm", iterations=int(MULTI_DEFAULTS["hog_iterations"]),
                                    matrix_size=sizes[length], sleep_ms=0.0, **common) for i in range(k))
            out.append(ScenarioSpec(multi_name(length, k), "shared", (tick, *hogs)))
    return tuple(out)


def extended(t: TenantSpec, factor: float) -> TenantSpec:
    """A shared tenant with interim looks: it may time up to ``factor`` times its design's iterations."""
    looks, top = look_counts(t.iterations, factor)
    return t if factor <= 1 or t.auto else replace(t, iterations=top, looks=looks)


def _validate(r: dict[str, Any], p: ExperimentParams) -> None:
    bad = unknown_workloads(r["workloads"], local=p.backend == "local")
    if bad:
        named = ", ".join([w for w in KIT_WORKLOADS if w != "noop"] + list(REAL_MODELS))
        raise SpecError(f"unknown workload(s) {bad}; choose from {named}, a factory as package.module:function, "
                        "or a kts.workloads entry point")
    names = set(r["workloads"]) | {base_name(w) for w in r["workloads"]}
    for key in ("sleep_ms", "workload_params"):
        extra = sorted(set(getattr(p, key) or {}) - names)
        if extra:
            raise SpecError(f"{key} names {', '.join(extra)}, not among the workloads ({', '.join(r['workloads'])}) "
                            f"nor their tenants' names ({', '.join(sorted({base_name(w) for w in r['workloads']}))})")
        both = [w for w in r["workloads"] if w != base_name(w) and {w, base_name(w)} <= set(getattr(p, key) or {})]
        if both:
            raise SpecError(f"{key} names {both[0]} twice: as {both[0]!r} and as {base_name(both[0])!r}; keep one")
    if any(v < 0 for v in (p.sleep_ms or {}).values()):
        raise SpecError(f"sleep_ms must be >= 0 for every workload, got {p.sleep_ms}")
    if p.profile_iterations is not None and p.profile_iterations < 0:
        raise SpecError(f"profile_iterations must be >= 0 (0: no profile), got {p.profile_iterations}")
    if not 1 <= len(r["workloads"]) <= 4:
        raise SpecError(f"a scenario takes 1 to 4 tenants, got {len(r['workloads'])}")
    for key in ("iterations", "iterations_fft", "iterations_gemm", "iterations_llm"):
        v = r.get(key)
        if v is not None and not _count_ok(v):
            raise SpecError(f"{key} must be an integer >= 1 or 'auto', got {v!r}")
    for key in ("fft_size", "gemm_size", "threads", "auto_max_iterations"):
        if int(r[key]) < 1:
            raise SpecError(f"{key} must be >= 1, got {r[key]}")
    if not 0 < float(r["auto_rel_width"]) < 1:
        raise SpecError(f"auto_rel_width must lie in (0, 1) (0.10 = ±10 %), got {r['auto_rel_width']}")
    if not 0 < float(r["auto_time_cap_s"]) < float(r["timeout_s"]):
        raise SpecError(f"auto_time_cap_s must be > 0 and below timeout_s ({r['timeout_s']:g} s), "
                        f"got {r['auto_time_cap_s']}")
    if r["warmup"] < 0:
        raise SpecError(f"warmup must be >= 0, got {r['warmup']}")
    factor = float(r["shared_max_factor"])
    autos = [k for k in ("iterations", "iterations_fft", "iterations_gemm", "iterations_llm") if _is_auto(r.get(k))]
    if not 1 <= factor <= 10 or factor > 1 and (autos or p.repeats > 1):
        why = ("it must lie in [1, 10] (1: the fixed design)" if not 1 <= factor <= 10 else
               f"{autos[0]}=auto stops on its own rule" if autos else f"repeats={p.repeats} pool their verdict")
        raise SpecError(f"shared_max_factor={factor:g} extends a fixed design of one repeat; {why}")
    if r.get("pad_limit_s") is not None and not float(r["pad_limit_s"]) > 0:
        raise SpecError(f"pad_limit_s must be > 0, got {r['pad_limit_s']}")
    for key in ("sleep_ms_fft", "sleep_ms_gemm", "sleep_ms_llm"):
        if r[key] < 0:
            raise SpecError(f"{key} must be >= 0, got {r[key]}")
    if p.repeats < 1:
        raise SpecError(f"repeats must be >= 1, got {p.repeats}")
    bad_modes = [m for m in p.sharing if m not in SHARING_MODES]
    if bad_modes or not p.sharing:
        raise SpecError(f"unknown sharing mode(s) {bad_modes}; choose from {', '.join(SHARING_MODES)}")
    if r.get("sleep_dist", "fixed") not in SLEEP_DISTS:
        raise SpecError(f"unknown sleep_dist {r['sleep_dist']!r}; choose from {', '.join(SLEEP_DISTS)}")
    if p.arrival not in ARRIVALS:
        raise SpecError(f"unknown arrival {p.arrival!r}; choose from {', '.join(ARRIVALS)}")
    if p.arrival != "closed" and p.rate_hz <= 0:
        raise SpecError("open-loop arrivals need rate_hz > 0")
    pct = p.mps_thread_percentage
    pcts = list(pct.values()) if isinstance(pct, dict) else [] if pct is None else [pct]
    if "mps-limited" in p.sharing and not pcts:
        raise SpecError("sharing mode mps-limited needs mps_thread_percentage (e.g. 50 or {\"gemm\": 50})")
    if any(not isinstance(v, int) or not 1 <= v <= 100 for v in pcts):
        raise SpecError(f"mps_thread_percentage must be in 1..100 (or a dict workload -> 1..100), got {pct}")
    if p.backend not in ("local", "kubernetes"):
        raise SpecError(f"unknown backend {p.backend!r}; choose local or kubernetes")
    if p.device not in ("auto", "cpu", "cuda") and not str(p.device).startswith("cuda:"):
        raise SpecError(f"unknown device {p.device!r}; choose auto, cpu, cuda or cuda:N")


def _is_auto(value: Any) -> bool:
    return isinstance(value, str) and value.strip().lower() == AUTO


def _count_ok(value: Any) -> bool:
    """An iteration count: 'auto' or a whole number >= 1 (also as text: "300")."""
    if _is_auto(value):
        return True
    try:
        return not isinstance(value, bool) and int(value) >= 1 and float(value) == int(value)
    except (TypeError, ValueError):
        return False


def scenario_from_dict(d: dict[str, Any]) -> ScenarioSpec:
    """Rebuild a scenario from its manifest form (the notebooks after 00-setup work from the manifest)."""
    known = {f.name for f in fields(TenantSpec)}
    tenants = tuple(TenantSpec(**{k: tuple(v) if k == "looks" else v for k, v in t.items() if k in known})
                    for t in d["tenants"])
    return ScenarioSpec(name=d["name"], kind=d["kind"], tenants=tenants, sharing=d.get("sharing", "timeslice"),
                        repeat=d.get("repeat", 0))


def calibration_scenario(resolved: dict[str, Any]) -> ScenarioSpec:
    """A one-element kernel timed by the same loop: the tool's own overhead floor."""
    n = int(resolved.get("calibrate_iterations") or 0)
    tenant = TenantSpec(name="noop", workload="noop", iterations=max(n, 1), matrix_size=1, sleep_ms=0.0,
                        warmup=10, threads=1)
    return ScenarioSpec(name="calibration", kind="calibration", tenants=(tenant,))
