"""The warm design: one worker process runs many blocks on command, idle between them with its context resident.

Why: a block that starts fresh processes pays for CUDA's start, the model's build, its warm-up and its profile
every time (266-280 s of an H200 run of three real models for 3 alone and 2 shared blocks, most of it outside the
timed loops), so a run could afford only a few blocks, and the verdict's drift term had 3 degrees of freedom. A
resident, idle neighbour does not change "alone": on the H200 under time-slicing an FFT's wall p50/p99 was
0.450/0.589 ms with the neighbour absent and 0.450/0.548 ms with it resident and idle (2 GiB held), against
0.461/2.404 ms with it busy. So the processes stay, and alone and shared blocks alternate cheaply; the run checks
that control on its own data (an alone block with the neighbours gone, ``control-<tenant>-absent``).

The protocol, in the serve folder (``--serve-dir``), every file written whole (a rename):

* the worker writes ``ready-<tenant>`` once built, warmed up and profiled;
* the orchestrator writes ``cmd-<tenant>-<k>.json`` for the k-th block this tenant takes part in: the block's
  name and kind, its log and stderr paths (created here with "x": never overwritten), its barrier folder, its
  seconds, minimum iterations and lead-in, whether to pad;
* the worker runs it as a one-block worker would (barrier, ``KTS_META`` with the block, lead-in, timed part,
  ``KTS_END``, padding until the block's ``stop`` file), then writes ``done-<tenant>-<k>`` (its exit code);
* ``quit-<tenant>`` (or SIGTERM) ends the process.

A crash mid-block leaves every line already written in that block's log (each iteration is flushed).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from copy import copy
from pathlib import Path

from kts_api import META_TAG, Workload, record_line
from kts_harness import Clock, StopRequest, run_loop, wait_for_start

IDLE_POLL_S = 0.02  # how often an idle worker looks for its next command (a stat, ~10 us: nothing for a neighbour)


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text)
    tmp.rename(path)


def next_command(serve_dir: Path, tenant: str, k: int, stop: StopRequest) -> dict | None:
    """Block until the k-th command (a dict) or a quit (None)."""
    cmd, quit_file = serve_dir / f"cmd-{tenant}-{k}.json", serve_dir / f"quit-{tenant}"
    while not stop.requested:
        if cmd.exists():
            return json.loads(cmd.read_text())
        if quit_file.exists():
            return None
        time.sleep(IDLE_POLL_S)
    return None


def block_args(args: argparse.Namespace, cmd: dict) -> argparse.Namespace:
    """The process's arguments with one block's settings on top."""
    b = copy(args)
    b.barrier_dir, b.go_file, b.start_at = cmd["barrier"], None, 0
    b.lead_in_s = float(cmd.get("lead_in_s", args.lead_in_s))
    b.pad = bool(cmd.get("pad", False))
    b.block_s = float(cmd.get("block_s", args.block_s))
    b.block_min_iterations = int(cmd.get("min_iterations", args.block_min_iterations))
    b.iterations = int(cmd.get("iterations", args.iterations))
    b.looks = []
    return b


def run_block(args: argparse.Namespace, workload: Workload, clock: Clock, stop: StopRequest, meta: dict,
              cmd: dict, k: int) -> int:
    """One block, its lines in its own log: what a one-block worker does after its set-up."""
    bargs = block_args(args, cmd)
    stop.file = Path(cmd["barrier"]) / "stop"
    saved = sys.stderr
    with open(cmd["log"], "x", encoding="utf-8") as out, open(cmd["stderr"], "x", encoding="utf-8") as err:
        sys.stderr = err
        try:
            block_meta = {**meta, "iterations": bargs.iterations, "lead_in_s": bargs.lead_in_s, "pad": bargs.pad,
                          "looks": [], "design": "warm", "block": cmd["block"], "block_kind": cmd["kind"],
                          "block_seq": k, "block_s": bargs.block_s, "block_min_iterations": bargs.block_min_iterations,
                          "barrier_reached_ns": time.time_ns()}
            if cmd["kind"] != "baseline":  # the profile belongs to the alone blocks, as in a one-block run
                block_meta.pop("profile", None)
            start_at = wait_for_start(bargs, stop)
            if stop.requested:
                return 143
            block_meta.update(start_at_ns=start_at, loop_start_ns=time.time_ns())
            out.write(record_line(META_TAG, block_meta) + "\n")
            out.flush()
            return run_loop(bargs, workload, clock, stop, out=out)
        finally:
            sys.stderr = saved
            stop.file = None


def serve(args: argparse.Namespace, workload: Workload, clock: Clock, stop: StopRequest, meta: dict) -> int:
    """Say ready, then run blocks on command until quit; 0 on a quit, a block's non-zero code ends the process."""
    serve_dir = Path(args.serve_dir)
    meta = {**meta, "process_ready_ns": time.time_ns()}
    print(record_line(META_TAG, {**meta, "design": "warm", "block": None}), flush=True)  # the process's own log
    _write(serve_dir / f"ready-{args.tenant}", str(meta.get("pid", "")))
    k = 1
    while True:
        cmd = next_command(serve_dir, args.tenant, k, stop)
        if cmd is None:
            return 0 if not stop.signalled else 143
        code = run_block(args, workload, clock, stop, meta, cmd, k)
        _write(serve_dir / f"done-{args.tenant}-{k}", str(code))
        if code != 0 or stop.signalled:
            return code or 143
        k += 1
