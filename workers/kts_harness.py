"""The harness: one timing loop for every workload, and what starts and ends it.

Co-running by construction: a shared block's statistics may only use iterations that ran while every neighbour
was active. So after the start barrier a worker first runs ``--lead-in-s`` of *padding* (the same operation at
the same cadence, printed with phase ``pad``) and, with a barrier directory, goes on padding until every
neighbour has printed its first line (``LeadIn``: however late a neighbour wakes, no timed iteration falls before
the co-running window), then its timed iterations, then, with ``--pad``, padding again until the orchestrator
stops it (SIGTERM, or under the warm design a ``stop`` file in the block's barrier directory) once every tenant
has finished its timed part. Padding lines are never timed statistics; they prove in the log that the tenant's
load was on the GPU. A stop ends the current iteration cleanly (its line is printed), so no line is lost.

The timed part ends at a fixed count, by the stopping rule (``kts_autostop``), at an interim look's answer, or,
under the warm design, by time (``BlockEnd``): a block of ``--block-s`` seconds that every tenant times through
until all of them have timed their minimum, so no co-running iteration is wasted as padding.
Exit codes: 0 done (or stopped while padding, when the orchestrator asked: ``stop_exit_code``), 3 padding hit
``--pad-limit-s`` (nobody stopped it), 143 stopped before its timed part was complete or by a SIGTERM alone.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from kts_api import END_TAG, LOOK_TAG, PAD_PHASE, Workload, app_line, record_line
from kts_autostop import StopRule

EXIT_PAD_LIMIT = 3
EXIT_STOPPED_EARLY = 128 + signal.SIGTERM


class Clock:
    """Times one operation: device time (CUDA events) and host wall time (launch -> completion).

    On a GPU it also keeps how long the host took to issue the operation (``issue_ms``: from its start until the
    operation's code returned, before the wait for the device), the launch path's own speed on this tenant's own
    work. Why: the interpreter probe (``host_probe``) reads two host speeds, but a launch-bound step moved between
    three on an H100 host (llama-decode 10.6-12, 17-19 and 27 ms alone at probes of 0.07, 0.12 and 0.12 ms) while
    the GPU stayed put (ResNet-50 14.4-14.6 ms in the same blocks). Kernel launches are asynchronous, so an
    operation with no host wait mid-op (the profile's ``host_syncs`` 0) issues at its host's pace whether or not a
    neighbour holds the GPU; one that waits mid-op does not. Listed only: no verdict or score reads it (its first
    runs, and why their block scoring does not use it: docs/methods/statistics.md). None on a CPU (the operation
    is the host).
    """

    def __init__(self, torch, device) -> None:
        self.torch = torch
        self.cuda = device.type == "cuda"
        self.issue_ms: float | None = None
        # a reading of the device's used memory and its processes (kts_gpumem.gpu_memory), set by the worker on
        # CUDA: run_loop puts it in each block's KTS_END, for the kit's stranger check; None: not read
        self.memory: Callable[[], dict] | None = None
        if self.cuda:
            self.ev_start = torch.cuda.Event(enable_timing=True)
            self.ev_end = torch.cuda.Event(enable_timing=True)

    def time(self, fn: Callable[[], object], due: tuple[int, int] | None = None) -> tuple[int, int, float, float]:
        """``due`` (CPU, closed loop): when the sleep before this operation ended, as (epoch ns, perf ns). A CPU
        tenant waits for its core *before* it can launch (the OS runs it when the core is free), a GPU tenant
        after (its kernels queue on the GPU): on CPU the wall clock starts when the operation was due, so that
        wait is inside it as it is on a GPU, and device time is the operation alone."""
        start_ns = time.time_ns()
        t0 = time.perf_counter_ns()
        t_op = t0
        if due is not None and not self.cuda and due[1] <= t0:
            start_ns, t0 = due
        if self.cuda:
            self.ev_start.record()
            fn()
            self.issue_ms = (time.perf_counter_ns() - t_op) / 1e6
            self.ev_end.record()
            self.torch.cuda.synchronize()
        else:
            fn()
        t1 = time.perf_counter_ns()
        end_ns = time.time_ns()
        wall_ms = (t1 - t0) / 1e6
        device_ms = float(self.ev_start.elapsed_time(self.ev_end)) if self.cuda else (t1 - t_op) / 1e6
        return start_ns, end_ns, device_ms, wall_ms



STOP_KEY = "stop"  # in the cluster's go file: the orchestrator's stop, beside each tenant's start (``--go-file``)


def stop_exit_code(padding: bool, asked: bool) -> int:
    """The exit code of a tenant that was stopped: 0 only when it was padding and the orchestrator asked it to stop
    (a ``stop`` file in its barrier folder, or ``"stop"`` in its go file); every other stop, a SIGTERM nobody of
    the kit sent (a preemption, a drain, a deleted pod) included, is ``EXIT_STOPPED_EARLY`` (143), so that the pod
    ends Failed and is named, never Succeeded (issue 50: a preempted padding tenant used to end Succeeded)."""
    return 0 if padding and asked else EXIT_STOPPED_EARLY


class StopRequest:
    """Set by SIGTERM, or by the orchestrator's own word (a ``stop`` file in the block's barrier folder, locally and
    in the warm design; ``"stop"`` in the go file on a cluster): the loop finishes the iteration in progress,
    prints it and ends. Only the orchestrator's word is ``asked``: a SIGTERM alone is not (``stop_exit_code``).

    The handler only sets a flag: anything that takes a lock (threading.Event.set) can deadlock when
    the signal lands while the same thread holds that lock. Sleeps are cut into short slices that
    look at the flag, so a stop is seen within ``SLICE_S``; the go file is read at most every ``GO_READ_S``.
    """

    SLICE_S = 0.02
    GO_READ_S = 0.05

    def __init__(self) -> None:
        self.signalled = False
        self.file: Path | None = None  # the block's ``stop`` file (local and warm designs)
        self.go_file: Path | None = None  # the cluster's go file (a downwardAPI volume of the pod's annotation)
        self._go_read = 0.0
        self._go_stop = False

    @property
    def asked(self) -> bool:
        if self.file is not None and self.file.exists():
            return True
        if self.go_file is not None and not self._go_stop and time.monotonic() - self._go_read >= self.GO_READ_S:
            self._go_read = time.monotonic()
            try:
                go = json.loads(self.go_file.read_text() or "{}")
            except (OSError, ValueError):
                go = {}
            self._go_stop = isinstance(go, dict) and bool(go.get(STOP_KEY))
        return self._go_stop

    @property
    def requested(self) -> bool:
        return self.signalled or self.asked

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self._handle)

    def _handle(self, _signum: int, _frame: object) -> None:
        self.signalled = True

    def sleep(self, seconds: float) -> None:
        """Sleep, but wake within a slice when a stop is requested."""
        end = time.monotonic() + seconds
        while not self.requested:
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(left, self.SLICE_S))


def wait_for_start(args: argparse.Namespace, stop: StopRequest | None = None) -> int:
    """Block until the shared start instant, so tenants enter their timed loops together."""
    stop = stop or StopRequest()
    start_at = args.start_at
    if args.barrier_dir:
        bdir = Path(args.barrier_dir)
        tmp = bdir / f".ready-{args.tenant}.tmp"
        tmp.write_text(str(os.getpid()))
        tmp.rename(bdir / f"ready-{args.tenant}")
        go = bdir / "go"
        deadline = time.monotonic() + args.barrier_timeout_s
        text = ""
        while not stop.requested:
            # the instant, once written: a writer that is not atomic shows the file before its content
            text = go.read_text().strip() if go.exists() else ""
            if text:
                break
            if time.monotonic() > deadline:
                raise SystemExit(f"kts_worker: no 'go' in {bdir} after {args.barrier_timeout_s:.0f}s")
            time.sleep(0.002)
        if stop.requested:
            return 0
        start_at = int(text)
    elif args.go_file:
        start_at = wait_for_go_file(args, stop)
        if stop.requested:
            return 0
    delay = (start_at - time.time_ns()) / 1e9
    if start_at and delay < -0.5:
        print(f"kts_worker: tenant {args.tenant} reached the barrier {-delay:.2f}s late", file=sys.stderr)
    stop.sleep(delay)
    return start_at


READY_PREFIX = "kts_worker: ready"  # the line the Kubernetes backend waits for (tests/test_worker.py checks it)


def wait_for_go_file(args: argparse.Namespace, stop: StopRequest) -> int:
    """The cluster barrier: say "ready" with this host's clock (again every second, so the backend reads the
    clock from a line that reached it live), then read this tenant's start instant (already on this host's
    clock) from the go file the backend publishes once every tenant is ready."""
    path = Path(args.go_file)
    deadline = time.monotonic() + args.barrier_timeout_s
    said = 0.0
    while not stop.requested:
        if time.monotonic() - said >= 1.0:
            print(f"{READY_PREFIX} tenant={args.tenant} clock_ns={time.time_ns()}", file=sys.stderr, flush=True)
            said = time.monotonic()
        try:
            go = json.loads(path.read_text() or "{}")
        except (OSError, ValueError):
            go = {}
        if isinstance(go, dict) and str(go.get(args.tenant, "")).isdigit():
            return int(go[args.tenant])
        if time.monotonic() > deadline:
            raise SystemExit(f"kts_worker: no start time for tenant {args.tenant} in {path} after "
                             f"{args.barrier_timeout_s:.0f}s")
        stop.sleep(0.05)
    return 0


class Arrivals:
    """When the next operation is due: closed loop (after the previous one and its sleep) or open loop."""

    def __init__(self, args: argparse.Namespace, stop: StopRequest) -> None:
        self.args, self.stop = args, stop
        self.rng = random.Random(args.seed)
        self.next_due = time.time_ns()
        self.closed_due: tuple[int, int] | None = None  # when the closed loop's last sleep ended (epoch, perf ns)

    def wait(self) -> int | None:
        """Block until the next operation is due; its intended start (None in closed loop)."""
        if self.args.arrival == "closed":
            return None
        now = time.time_ns()
        if self.next_due > now:
            self.stop.sleep((self.next_due - now) / 1e9)
        due = self.next_due
        gap_s = self.rng.expovariate(self.args.rate_hz) if self.args.arrival == "poisson" else 1.0 / self.args.rate_hz
        self.next_due += int(gap_s * 1e9)
        return due

    def after(self, spent_s: float = 0.0) -> None:
        """The closed loop's sleep, less ``spent_s`` already spent since the operation (the stopping check)."""
        if self.args.arrival == "closed" and self.args.sleep_ms > 0:
            mean_s = self.args.sleep_ms / 1000.0
            left_s = max(0.0, (self.rng.expovariate(1 / mean_s) if self.args.sleep_dist == "exp" else mean_s) - spent_s)
            self.closed_due = (time.time_ns() + int(left_s * 1e9), time.perf_counter_ns() + int(left_s * 1e9))
            self.stop.sleep(left_s)


class LeadIn:
    """When the lead-in padding ends: after ``--lead-in-s`` and, with a barrier directory, once every tenant
    that reached the barrier has printed its first line.

    Each tenant marks its first printed line with ``started-<tenant>`` in the barrier directory (the
    ``ready-*`` files name every tenant: the orchestrator wrote ``go`` only when all were there). A tenant
    starts timing only when all are marked, so its first timed iteration starts after every neighbour's first
    line: the co-running window's lower edge (the latest first start) never cuts a timed iteration, however
    late a neighbour woke, and a design of n iterations yields n co-running samples. Without a barrier
    directory (Kubernetes: pods share no files) the lead-in is the time alone.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        self.until = time.time_ns() + int(args.lead_in_s * 1e9)
        self.dir = Path(args.barrier_dir) if args.barrier_dir else None
        self.tenant = args.tenant
        self.limit_s = args.barrier_timeout_s
        self.deadline = time.monotonic() + args.barrier_timeout_s
        self.marked = False

    def mark_started(self) -> None:
        """Say this tenant's first line is out (call after flushing it)."""
        if self.dir is None or self.marked:
            return
        tmp = self.dir / f".started-{self.tenant}.tmp"
        tmp.write_text(str(os.getpid()))
        tmp.rename(self.dir / f"started-{self.tenant}")
        self.marked = True

    def over(self, now_ns: int) -> bool:
        if now_ns < self.until:
            return False
        if self.dir is None:
            return True
        neighbours = [p.name.removeprefix("ready-") for p in self.dir.glob("ready-*")]
        waiting = [t for t in neighbours if t != self.tenant and not (self.dir / f"started-{t}").exists()]
        if not waiting:
            return True
        if time.monotonic() > self.deadline:
            raise SystemExit(f"kts_worker: tenant(s) {', '.join(sorted(waiting))} printed no line within "
                             f"{self.limit_s:.0f}s of the barrier; no timed iteration was run")
        return False


class BlockEnd:
    """Warm design: a block's timed part ends by time, once every tenant of the block has timed its minimum.

    Why: a block bounded by a count makes the fast tenants pad (untimed) until the slowest is done: in a
    three-tenant real-model run BERT timed 125 iterations of a shared block and padded 623. Bounded by time, every
    tenant times from the end of the lead-in until ``--block-s`` has passed *and* it has ``--block-min-iterations``
    whole iterations (so each phase of a several-phase step has that many); it then marks ``reached-<tenant>`` in
    the barrier directory and goes on timing until every neighbour has marked it too. The padding that follows is
    at most one iteration of the slowest tenant. Without a barrier directory (a lone tenant) its own rule decides.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        self.seconds = float(getattr(args, "block_s", 0.0) or 0.0)
        self.minimum = int(getattr(args, "block_min_iterations", 0) or 0)
        self.dir = Path(args.barrier_dir) if args.barrier_dir else None
        self.tenant = args.tenant
        self.marked = False

    @property
    def on(self) -> bool:
        return self.seconds > 0

    def done(self, timed: int, timed_from: int, now_ns: int) -> bool:
        if timed < self.minimum or now_ns - timed_from < self.seconds * 1e9:
            return False
        if self.dir is None:
            return True
        if not self.marked:
            tmp = self.dir / f".reached-{self.tenant}.tmp"
            tmp.write_text(str(timed))
            tmp.rename(self.dir / f"reached-{self.tenant}")
            self.marked = True
        neighbours = [p.name.removeprefix("ready-") for p in self.dir.glob("ready-*")]
        return all((self.dir / f"reached-{t}").exists() for t in neighbours)


class Looks:
    """Interim looks: at each look count the tenant pads (its load stays on) until the orchestrator answers.

    The orchestrator reads the ``KTS_LOOK`` line, reads the verdict from the first n timed iterations and writes
    ``answer-<tenant>-<n>`` in the barrier directory: ``stop`` (the verdict decided: the timed part ends at n)
    or ``go`` (time on, to the next look or ``--iterations``). No answer within ``--barrier-timeout-s`` is a go,
    and without a barrier directory (Kubernetes) there are no looks: the design then runs to ``--iterations``,
    which is the fixed design the final reading's level is set for.
    """

    def __init__(self, args: argparse.Namespace) -> None:
        self.dir = Path(args.barrier_dir) if args.barrier_dir else None
        self.counts = [n for n in args.looks if n < args.iterations] if self.dir is not None else []
        self.tenant, self.limit_s = args.tenant, args.barrier_timeout_s
        self.waiting: int | None = None  # the look n the tenant pads at
        self.deadline = 0.0
        self.stopped_at: int | None = None

    def reached(self, timed: int) -> str | None:
        """The KTS_LOOK line to print when ``timed`` is a look count (the tenant then pads until answered)."""
        if timed not in self.counts:
            return None
        self.waiting, self.deadline = timed, time.monotonic() + self.limit_s
        return record_line(LOOK_TAG, {"tenant": self.tenant, "n": timed})

    def answer(self) -> str | None:
        """``stop``, ``go`` or None (not yet); a look unanswered past the time limit goes on."""
        assert self.dir is not None and self.waiting is not None
        path = self.dir / f"answer-{self.tenant}-{self.waiting}"
        word = path.read_text().strip() if path.exists() else None
        if word is None and time.monotonic() > self.deadline:
            print(f"kts_worker: no answer at look {self.waiting} within {self.limit_s:.0f}s; timing on",
                  file=sys.stderr, flush=True)
            word = "go"
        if word == "stop":
            self.stopped_at = self.waiting
        if word is not None:
            self.waiting = None
        return word


def run_loop(args: argparse.Namespace, workload: Workload, clock: Clock, stop: StopRequest | None = None,
             out: TextIO | None = None) -> int:
    """The one timing loop: lead-in padding, the timed iterations, then padding until stopped.

    Every iteration, padded or timed, runs the same operation at the same cadence; only its phase
    (``pad``) and its own counter differ, so a neighbour's load is identical while it pads.
    """
    stop = stop or StopRequest()
    arrivals = Arrivals(args, stop)
    rule = StopRule.from_args(args)
    out = out or sys.stdout
    lead_in = LeadIn(args)
    block_end = BlockEnd(args)
    looks = Looks(args)
    timed_from: int | None = None
    timed_since: tuple[int, int] | None = None  # when the lead-in ended (epoch, perf ns): no timed op is due sooner
    timed = pads = tail = 0
    pad_deadline: float | None = None
    probing, probes = host_probe_on(args), []
    issues: list[float] = []  # the host's issue time of each timed operation line, in order (``Clock.issue_ms``)
    while True:
        if stop.requested:
            return stop_exit_code(pad_deadline is not None, stop.asked)
        now = time.time_ns()
        if timed_from is None and lead_in.over(now):
            timed_from = now
            timed_since = (now, time.perf_counter_ns())
        if looks.waiting is not None and looks.answer() == "go":
            timed_since = (now, time.perf_counter_ns())  # timed again from here: no operation is due sooner
        if timed_from is not None and pad_deadline is None and looks.waiting is None and (
                looks.stopped_at is not None or rule.done(timed, timed_from, now)
                or _timed_done(args, timed, timed_from, arrivals, block_end, now)):
            reason = f"verdict decided at look {looks.stopped_at}" if looks.stopped_at is not None else None
            end = rule.end_record(args, timed, timed_from, now, reason)
            if probing:  # one value per timed iteration, in order: the host's speed right after it
                end["host_probe_ms"] = [round(ms, 4) for ms in probes]
            if issues:  # one value per timed operation line (every phase), in order
                end["host_issue_ms"] = issues
            memory = getattr(clock, "memory", None)
            if memory is not None:  # the device's used memory while every tenant still runs (they pad after)
                try:
                    end["gpu_memory"] = memory()
                except Exception as exc:  # noqa: BLE001 - the reading never ends the block
                    end["gpu_memory"] = {"status": "unknown", "reason": str(exc)[:200] or type(exc).__name__}
            out.write(record_line(END_TAG, end) + "\n")
            out.flush()
            if not args.pad:
                return 0
            pad_deadline = time.monotonic() + args.pad_limit_s
        if pad_deadline is not None and time.monotonic() > pad_deadline:
            print(f"kts_worker: tenant {args.tenant} padded for {args.pad_limit_s:g} s (--pad-limit-s) and was "
                  "never stopped; ending", file=sys.stderr, flush=True)
            return args.pad_limit_exit
        intended = arrivals.wait()
        if stop.requested:
            continue
        padding = timed_from is None or pad_deadline is not None or looks.waiting is not None
        index = pads if padding else timed
        sleep_end = arrivals.closed_due
        if not padding and sleep_end is not None and timed_since is not None and sleep_end[0] < timed_since[0]:
            # the sleep ended while the lead-in still waited for a neighbour: the operation became due as a
            # timed one only when the lead-in ended, so its clock (and the co-running window) starts there
            sleep_end = timed_since
        for phase, fn in workload.step():
            start_ns, end_ns, device_ms, wall_ms = clock.time(fn, sleep_end)
            sleep_end = None  # a later phase (an llm's decode step) follows the last one at once
            due = start_ns if intended is None else intended
            out.write(app_line(workload.name, args.tenant, index, PAD_PHASE if padding else phase, due, start_ns,
                               end_ns, device_ms, wall_ms) + "\n")
            if not padding:
                rule.record(phase, wall_ms)
                issued = getattr(clock, "issue_ms", None)
                if issued is not None:
                    issues.append(round(issued, 4))
            intended = None if args.arrival == "closed" else end_ns  # later phases are due when the last ended
        out.flush()
        lead_in.mark_started()
        if padding:
            pads += 1
            if pad_deadline is not None:
                if tail == args.crash_after_pad:
                    raise RuntimeError(f"injected crash after padding iteration {tail} (KTS_CRASH_AFTER_PAD)")
                tail += 1
        else:
            timed += 1
            if index == args.crash_after:
                raise RuntimeError(f"injected crash after iteration {index} (KTS_CRASH_AFTER)")
            look = looks.reached(timed)
            if look is not None:
                out.write(look + "\n")
                out.flush()
        # the probe and the stopping check take their time out of the sleep, not the GPU's work; padded
        # iterations probe too, so a neighbour's load is the same while this tenant pads
        t0 = time.monotonic()
        if probing:
            ms = host_probe(args.host_probe_loop)
            if not padding:
                probes.append(ms)
        if not padding and rule.due(timed):
            rule.check(timed)
        arrivals.after(time.monotonic() - t0)


# Interpreter additions: about 0.06-0.16 ms on the GPU hosts (its two speeds: the 10,000 additions of before took
# 0.29-0.30 or 0.48-0.53 ms there), 0.2-0.4 ms on a CI core. A block's verdict reads the median of a block's probes
# (100-300 of them), not one probe, so a fifth of the old loop resolves the host's two speeds (1.7x apart) and costs
# a back-to-back tenant 1-2 % of a real model's 5-15 ms step.
HOST_PROBE_LOOP = 2_000


def host_probe(loop: int = HOST_PROBE_LOOP) -> float:
    """Milliseconds for a fixed piece of interpreter work: the host's speed at this moment, on this thread.

    Why: a launch-bound step (an LLM decode, BERT or ViT at serving sizes) is as fast as the host that launches
    its hundreds of kernels, and on the H200 machine the same loop took 6 to 15 ms from one second to the next
    (a device-side chain of kernels stayed at 0.80 ms), so a step's time moved about 2x with the host alone.
    Alone and shared blocks are different moments; this series says how fast the host was in each, per
    iteration, on the tenant's own thread, so a verdict can tell what the host changed from what sharing did.
    """
    t0 = time.perf_counter_ns()
    s = 0
    for i in range(loop):
        s += i
    return (time.perf_counter_ns() - t0) / 1e6


def host_probe_on(args: argparse.Namespace) -> bool:
    """Whether this tenant probes: every closed loop with a fixed sleep, back to back (sleep 0) included. A sleep
    absorbs the probe (it comes out of the sleep, so the cadence is the one asked for); a back-to-back tenant pays
    it between its iterations (``probe_adds_gap``: about 0.1 ms on a GPU host, 1-2 % of a real model's step), so
    that the verdict can read the host's speed for the tenants it moves most. Never an open loop (arrivals are
    due at fixed instants) or an exponential think time, whose short draws the probe would lengthen."""
    return args.host_probe and args.arrival == "closed" and args.sleep_dist == "fixed"


def probe_adds_gap(args: argparse.Namespace) -> bool:
    """Whether the probe adds its time between iterations: a probing tenant with no sleep to take it from."""
    return host_probe_on(args) and args.sleep_ms <= 0


def _timed_done(args: argparse.Namespace, timed: int, timed_from: int, arrivals: Arrivals, block_end: BlockEnd,
                now_ns: int) -> bool:
    """Whether the timed part is over: the iteration count (the cap, under the warm design), the block's time
    once every tenant has its minimum (``BlockEnd``), or (open loop) no arrival left in the duration."""
    if timed >= args.iterations:
        return True
    if block_end.on:
        return block_end.done(timed, timed_from, now_ns)
    return (args.arrival != "closed" and args.duration_s > 0
            and arrivals.next_due > timed_from + int(args.duration_s * 1e9))

