"""The one progress line ``make report`` prints while its notebooks run the experiment.

Why here and why by watching files: papermill runs the experiment inside a kernel whose output the terminal never
sees, so for minutes ``make report`` printed nothing. The run directory already says everything a reader wants to
know: the manifest lists the scenarios with their planned iterations and marks each one complete, and every tenant's
log gains one ``KTS_APP`` line per timed iteration, read through ``run.logformat.parse_line`` (the line's one
home). A thread in the calling process reads them every few seconds and prints which scenario runs, how many
iterations it has done and about how long is left; the runner itself is not touched. Time left is the elapsed time
scaled by the share done, each scenario weighted by its planned length (iterations x (sleep + 1 ms) of its longest
tenant): rough for the first scenario, close by the shared one.

On a terminal the line is rewritten in place; elsewhere (a CI log) a new line is printed every ``every_s``.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from kts_helpers.run.logformat import AppLine, parse_line


@dataclass
class _Log:
    offset: int = 0
    done: int = 0  # timed iterations seen (the highest index + 1 of a non-pad line)
    rest: bytes = b""


@dataclass
class Progress:
    """What the run directory says now: the scenario running, its iterations, the share of the run done."""

    scenario: str
    index: int  # 1-based position among the planned scenarios
    total: int
    done: int | None
    planned: int | None
    fraction: float


@dataclass
class RunWatcher:
    """Reads a run directory's manifest and logs, incrementally (each log from where it was left)."""

    run_path: Path
    logs: dict[Path, _Log] = field(default_factory=dict)

    def _done(self, log: Path) -> int:
        state = self.logs.setdefault(log, _Log())
        try:
            with log.open("rb") as f:
                f.seek(state.offset)
                chunk = f.read()
        except OSError:
            return state.done
        state.offset += len(chunk)
        lines = (state.rest + chunk).split(b"\n")
        state.rest = lines.pop()
        for line in lines:  # the line's layout has one home (run.logformat): a malformed line counts for nothing
            rec = parse_line(line)
            if isinstance(rec, AppLine) and not rec.padding:
                state.done = max(state.done, rec.iteration + 1)
        return state.done

    def read(self) -> Progress | None:
        try:
            manifest = json.loads((self.run_path / "manifest.json").read_text())
        except (OSError, ValueError):
            return None
        planned = _within_looks(manifest)
        status = manifest.get("scenarios", {})
        if not planned:
            return None
        weights, fractions, current = [], [], None
        for i, scen in enumerate(planned):
            name, tenants = scen["name"], scen.get("tenants", [])
            counts = [t["iterations"] if isinstance(t.get("iterations"), int) else None for t in tenants]
            weight = max([(c or 800) * (float(t.get("sleep_ms") or 0) + 1.0) for c, t in zip(counts, tenants, strict=True)] or [1])
            complete = status.get(name, {}).get("status") in ("complete", "failed", "timeout", "skipped")
            done = [self._done(self.run_path / "logs" / name / f"{t['name']}.log") for t in tenants]
            slowest = min(range(len(tenants)), key=lambda k: done[k] / (counts[k] or max(done[k], 1)), default=None)
            if complete or slowest is None:
                frac = 1.0 if complete else 0.0
            else:
                frac = min(1.0, done[slowest] / counts[slowest]) if counts[slowest] else 0.0
            weights.append(weight)
            fractions.append(frac)
            if current is None and not complete and (any(done) or (self.run_path / "logs" / name).exists()):
                current = Progress(name, i + 1, len(planned), done[slowest] if slowest is not None else None,
                                   counts[slowest] if slowest is not None else None, 0.0)
        share = sum(w * f for w, f in zip(weights, fractions, strict=True)) / sum(weights)
        if current is None:
            first_pending = next((i for i, f in enumerate(fractions) if f < 1.0), None)
            if first_pending is None:
                return Progress("analysis", len(planned), len(planned), None, None, 1.0)
            calibrating = first_pending == 0 and not manifest.get("calibration")
            current = Progress("calibration" if calibrating else planned[first_pending]["name"],
                               first_pending + 1, len(planned), None, None, share)
        current.fraction = share
        return current


def _within_looks(manifest: dict) -> list[dict]:
    """The planned scenarios, less the blocks ``blocks=auto`` will not run: before its first look, those past the
    first look's blocks (most runs stop there); after it, those past the last look its budget reaches (the
    manifest's ``looks``), or past the look that stopped the mode. Without it the line counted all 24 blocks a mode
    may take and read "scenario 6 of 75 ... about 7 min 35 s left" for a quickstart that ended 80 s later."""
    planned = manifest.get("spec", {}).get("scenarios", [])
    auto = manifest.get("spec", {}).get("resolved", {}).get("blocks_auto")
    if not auto:
        return planned
    cap = {}
    for mode in {sc.get("sharing") for sc in planned}:
        mine = [lk for lk in manifest.get("looks") or [] if lk.get("sharing") == mode]
        cap[mode] = (int(auto.get("first") or auto["looks"][0]) if not mine else
                     int(mine[-1]["blocks"]) if mine[-1].get("stop") else int((mine[0].get("schedule") or
                                                                              auto["looks"])[-1]))

    def kept(sc: dict) -> bool:
        b = cap.get(sc.get("sharing"))
        return b is None or not ((sc.get("kind") == "shared" and sc.get("repeat", 0) >= b)
                                 or (sc.get("kind") == "baseline" and sc.get("repeat", 0) > b))
    return [sc for sc in planned if kept(sc)]


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, sec = divmod(seconds, 60)
    return f"{minutes} min {sec:02d} s" if minutes < 10 else f"{minutes} min"


def progress_line(p: Progress, elapsed_s: float) -> str:
    """``kts: shared (scenario 3 of 3): 412 of 800 iterations · about 1 min 10 s left``."""
    if p.scenario == "analysis":
        return f"kts: every scenario done after {_duration(elapsed_s)}; analysing and rendering the report"
    what = f"kts: {p.scenario} (scenario {p.index} of {p.total})"
    if p.done is not None:
        what += f": {p.done} of {p.planned} iterations" if p.planned else f": {p.done} iterations"
    if 0.02 <= p.fraction < 1.0 and elapsed_s >= 5:
        what += f" · about {_duration(elapsed_s * (1 - p.fraction) / p.fraction)} left"
    return what


FINAL_TRIES = 5


@contextlib.contextmanager
def watch(run_path: str | Path, *, stream: TextIO | None = None, interval_s: float = 2.0,
          every_s: float = 30.0) -> Iterator[RunWatcher]:
    """Print the progress line for ``run_path`` until the block ends (quietly: a read error prints nothing)."""
    out = stream or sys.stderr
    tty = bool(getattr(out, "isatty", lambda: False)())
    watcher = RunWatcher(Path(run_path))
    stop = threading.Event()
    start = time.monotonic()
    state = {"width": 0, "last": "", "printed": -every_s, "closed": False}
    lock = threading.Lock()  # the watcher's incremental reads and the stream: one show at a time, the final one last

    def show(final: bool = False) -> bool:
        """One reading and, if due, its line; False when nothing could be read."""
        with lock:
            if state["closed"]:  # the final line is out: a late reading of the loop's never follows it
                return True
            p = watcher.read()
            if p is None:
                return False
            line = progress_line(p, time.monotonic() - start)
            now = time.monotonic()
            if tty:
                out.write("\r" + line.ljust(state["width"]) + ("\n" if final else ""))
                state["width"] = len(line)
            elif line != state["last"] and (final or now - state["printed"] >= every_s):
                out.write(line + "\n")
                state["printed"], state["last"] = now, line  # the last line *printed*: a reading held back
                # by every_s is no reason to hold back the final line (a loaded host's loop read "every scenario
                # done" before the notebooks' kernel was gone, and the final line was never printed)
            state["closed"] = final
            out.flush()
            return True

    def loop() -> None:
        while not stop.wait(interval_s):
            with contextlib.suppress(Exception):  # a progress line never fails a run
                show()

    thread = threading.Thread(target=loop, name="kts-progress", daemon=True)
    thread.start()
    try:
        yield watcher
    finally:
        stop.set()
        thread.join(timeout=5)
        for _ in range(FINAL_TRIES):  # the last line is the one a user reads: a reading that failed is tried again
            with contextlib.suppress(Exception):
                if show(final=True):
                    break
            time.sleep(0.2)
