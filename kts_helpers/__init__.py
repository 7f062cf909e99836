"""kts_helpers: the helper package behind the kts notebooks.

Data flows one way, through four wings (a test enforces the import rule):

**run** — what runs, and how (works on a bare GPU host: torch and the standard library)

* ``run.spec`` — parameters, tenants and scenarios; the resolved ``ExperimentSpec``
* ``run.profiles`` — the named profiles, each with the measurement that chose it
* ``run.paramdocs`` — what each run parameter does, one line each: the parameter reference's words
* ``run.looks`` — where the looks fall: a shared tenant's interim looks (``shared_max_factor``) and ``blocks=auto``'s
* ``run.params`` — where parameters come in: ``--set``, notebook parameters, K8S_* settings
* ``run.runs`` — immutable run directories, created atomically, never overwritten
* ``run.manifest`` — a run's manifest read once into typed objects
* ``run.experiment`` — the one runner: set up, calibrate, run scenarios (notebooks, CLI, smoke, scale-out)
* ``run.logformat`` — the log line's contract: tags, versions, fields, ``parse_line`` / ``format_line``
* ``run.corun`` — co-running by construction: when padders may stop; one GPU UUID per shared scenario
* ``run.capacity`` — will a scenario's tenants fit in GPU memory
* ``run.workloads`` — a user's workload factories (``module:factory``, the ``kts.workloads`` entry points) and their pre-flight
* ``run.environment`` — what the host is: device, driver, CUDA, torch, git commit
* ``run.mps`` — a private MPS control daemon for one scenario
* ``run.gpumem`` — a stranger context on the GPU, from the device's used memory against the tenants' own, per block
* ``run.interrupts`` — SIGTERM handled as Ctrl-C while a scenario runs, on every backend (its tenants stopped)
* ``run.scale`` — scale-out: experiments over several GPU nodes, each on a node taken by its Lease
* ``run.probe`` — the time-slice probe's scenarios and the GEMM size calibrated to the GPU at hand
* ``run.backends`` — ``Backend`` protocol and ``get_backend``; ``run.backends.base`` — the protocol and results
* ``run.backends.local`` — tenants as processes on this host
* ``run.backends.warm`` — the warm design: one process per tenant and sharing mode serves every block of it
* ``run.backends.autoblocks`` — ``blocks=auto`` inside a warm session: when to look, the budget, the blocks left out
* ``run.backends.procs`` — what the local runners share about worker processes (progress, stopping, exit reasons)
* ``run.backends.kubernetes`` — each scenario one Indexed Job on one GPU node:

  * ``run.backends.kubernetes.names`` — labels and names; which objects are the kit's own
  * ``run.backends.kubernetes.clock`` — the time source (the emulator's fake one in tests), API timestamps
  * ``run.backends.kubernetes.api`` — the only code that calls the API server
  * ``run.backends.kubernetes.nodes`` — what a node advertises (GPUs, replicas, sharing)
  * ``run.backends.kubernetes.lease`` — the node Lease: one client measures on a GPU node at a time
  * ``run.backends.kubernetes.jobs`` — the Indexed Job of a scenario (one completion index per tenant)
  * ``run.backends.kubernetes.state`` — Job, Workload, pod and node states; a tenant's timestamps
  * ``run.backends.kubernetes.barrier`` — the start barrier: every tenant ready, one clock, each pod's offset
  * ``run.backends.kubernetes.logs`` — pod logs followed live (across the kubelet's log rotation)
  * ``run.backends.kubernetes.lifecycle`` — one scenario from submission (or re-attachment) to its logs
  * ``run.backends.kubernetes.replica_probe`` — one replica more than stated, which must stay Pending
  * ``run.backends.kubernetes.plugin_config`` — the device plugin's own ConfigMap: replicas, strategy, renames, verified
  * ``run.backends.kubernetes.backend`` — ``KubernetesBackend``: node, exclusivity, clean-up, record
* ``run.telemetry`` — GPU telemetry capture: ``run.telemetry.nvml`` (NVML/GPM sampler),
  ``run.telemetry.dcgm`` (dcgm-exporter scraper), ``run.telemetry._store`` (on-disk format),
  ``run.telemetry.__main__`` (the sampler process)

**analyse** — from logs to numbers

* ``analyse.logparse`` — KTS_APP v1/v2 lines into a typed table, fast and robust to junk
* ``analyse.load`` — a run (or loose logs) into ``RunData``: iterations with clocks, padding, telemetry
* ``analyse.rules`` — every rule once: clocks, co-running window, warm-up, repeat groups, baseline
  matching, DF with interval and reading, the bootstrap choice, the CCDF
* ``analyse.summary`` — the summary table, co-running counts, efficiency, what the main figures show
* ``analyse.stats`` — intervals for quantiles, DF, jitter, throughput; steady state; sample size
* ``analyse.estimate`` — ``Estimate``: a number with its interval, the one form it travels in to ``present``
* ``analyse.orderstat`` — the interval method: order statistics at the effective sample size, ratios by MOVER
* ``analyse.verdict`` — one reading per tenant and clock from tests that carry the drift between moments, or what is missing
* ``analyse.sequential`` — interim looks: the verdict read while a shared scenario runs, to stop a decided tenant
* ``analyse.coverage`` — how often the intervals cover, measured where the kit uses them (tests, ``make bench``)
* ``analyse.driftgrid`` — the verdict on series whose speed moves between blocks: the drift grid (tests, ``make bench``)
* ``analyse.blocks`` — the warm design's block-paired tests: the median and the tail's shape against neighbouring alone blocks, the host's speed as a covariate and its balance
* ``analyse.blockplan`` — how many shared blocks would decide: the assurance an inconclusive block verdict prints
* ``analyse.blockseq`` — ``blocks=auto``: the looks, their alpha spending, the budget, and each look's reading
* ``analyse.blockgrid`` — the verdict on generated warm runs: false alarms, power and "no change" by drift shape (tests, ``make bench``)
* ``analyse.prior`` — the drift prior by tenant kind (GPU-bound or host-bound), measured on committed runs
* ``analyse.resample`` — the bootstrap engine (exact, fast order-statistic resamplers), kept for comparison
* ``analyse.intervals`` — intervals and verdicts for every summary row
* ``analyse.verdicts`` — a run's summary table with its verdicts, read the one way every caller reads it
* ``analyse.warmgpu`` — a neighbour keeps the GPU warm: device time split by how long the GPU had been idle
* ``analyse.autogrid`` — the verdict on generated ``blocks=auto`` runs: a two-state host, unequal blocks, looks (tests, ``make bench``)
* ``analyse.compare`` — beyond the article: sharing modes, contention matrix, LLM phases
* ``analyse.collisions`` — launches while a neighbour was in flight: share with interval, waits with and without, the beat
* ``analyse.hostspeed`` — the host's speed per iteration (the worker's probe) alone and shared, the contrast at equal speed
* ``analyse.design`` — the warm design's own checks: what its blocks cost, the idle-neighbour control, MPS client alone
* ``analyse.profiles`` — each tenant's alone profile beside its timed p50, and whether the profile left CUPTI attached
* ``analyse.openloop`` — open-loop arrivals: offered vs achieved rate, response vs service time, overload
* ``analyse.telemetry`` — telemetry read back, joined to iterations; the clock checks
* ``analyse.waits`` — waiting on a cluster: admission, placement, start-up, barrier, timed loop; clock skew
* ``analyse.probe`` — the probe's reading: effective quantum and switch cost, each with an interval

**plan** — the one prediction engine, for the planner, the report and the lesson alike

* ``plan.timeslice`` — the time-slicing simulator (round robin, quantum, switch, the event rule)
* ``plan.mps`` — a fluid model of MPS (spatial sharing) and its thread percentage
* ``plan.compiled`` — the planner's time-slice and MPS event loops compiled (numba), the general loops to the bit
* ``plan.draws`` — a tenant's operations drawn from its alone run, one at a time or ahead as arrays
* ``plan.traits`` — each tenant's sharing traits from its measured profile, the documented fallbacks where none
* ``plan.inputs`` — the planner's one input, loaded once from a run (alone profiles, GPU model)
* ``plan.engine`` — predictions from alone distributions, the probe and the sharing mode, with intervals
* ``plan.multi`` — the multi-context probe against the round robin (the engine's rule, the README's finding)
* ``plan.capacity`` — how many replicas of a mix meet every goal; the device plugin's ConfigMap for that N
* ``plan.validation`` — predicted against measured on committed runs; the README's validation table
* ``plan.live`` — ``kts plan --validate``: the recommended N and N+1 run on this GPU, predicted vs measured

**present** — what a person reads

* ``present.tables`` — how a number with its interval, and a verdict with its evidence, read everywhere
* ``present.charts`` — Altair figures of the report
* ``present.narrative`` — the report's words, computed from the data
* ``present.sections`` — the report's optional sections
* ``present.notebook`` — what the notebooks call (their door to run and analyse) and display helpers
* ``present.pipeline`` — papermill runs the notebooks, nbconvert renders the report
* ``present.html`` — HTML rendering and ``report/index.html``
* ``present.reference`` — the README's reference tables; ``HEADLINE_RUN``, the run of the design ``make report`` runs
* ``present.verdictline`` — a verdict in one line: its word and the number that decided it; the Holm steps
* ``present.docblocks`` — every docs block generated from committed runs, by name (``bench.regen_reference_tables``)
* ``present.progress`` — the progress line ``make report`` prints while its notebooks run the experiment

**teaching** — the lesson (``make teach``), reading runs through the analyse wing:

* ``teaching.model`` — the lesson's name for ``plan.timeslice`` (the same module)
* ``teaching.fit`` — its quantum fitted to measured waits, with a bootstrap interval
* ``teaching.measured`` — a real run next to it: fit only where the data allow, both clocks compared
* ``teaching.mps`` — the lesson's name for ``plan.mps`` (the same module)
* ``teaching.reference`` — the H200 reference numbers shown next to the models
* ``teaching.memo`` — the lesson's measured tables kept on disk, keyed by the files and the kit's source
* ``teaching.waiting`` — the three kinds of waiting (admission, placement, in service) and their budget
* ``teaching.exercises`` — predict-then-check exercises answered by the models
* ``teaching.synthetic`` — run directories written by the simulator (a known quantum behind them)
* ``teaching.charts`` — the lesson's figures

Shared by all: ``errors`` (one exception class per kind of failure), ``fsutil`` (atomic writes), ``diskcache``
(derived results on disk, keyed by the source and input bytes); on top,
``cli`` (``python -m kts_helpers`` / ``kts``), ``docref`` (the docs' generated references) and ``k8s_smoke`` (``make k8s-smoke``: a tiny experiment against
a real cluster). Importing the package is cheap: heavy dependencies load in the
modules that need them.
"""

__version__ = "0.1.0"
