"""What ``make report`` prints while its notebooks run (``present.progress``), and the report's page title."""

from __future__ import annotations

import io
import json
import threading
import time
from pathlib import Path

import pytest

from kts_helpers.present import progress


def _run(tmp_path: Path, done: dict[str, int], complete: tuple[str, ...] = (), calibrated: bool = True) -> Path:
    """A run directory as the runner leaves it mid-way: the manifest's plan, records, and tenants' logs so far."""
    plan = [{"name": "baseline-fft", "tenants": [{"name": "fft", "iterations": 100, "sleep_ms": 10.0}]},
            {"name": "baseline-gemm", "tenants": [{"name": "gemm", "iterations": 100, "sleep_ms": 10.0}]},
            {"name": "shared", "tenants": [{"name": "fft", "iterations": 100, "sleep_ms": 10.0},
                                           {"name": "gemm", "iterations": 100, "sleep_ms": 10.0}]}]
    manifest = {"spec": {"scenarios": plan}, "scenarios": {n: {"status": "complete"} for n in complete},
                "calibration": {"floor_ms": 0.01} if calibrated else {}}
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    for key, n in done.items():
        scenario, tenant = key.split("/")
        log = tmp_path / "logs" / scenario / f"{tenant}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        lines = [f"KTS_APP,v2,{tenant},{tenant},{i},pad,1,1,2,0.1,0.1" for i in range(3)]  # padding: not counted
        lines += [f"KTS_APP,v2,{tenant},{tenant},{i},op,1,1,2,0.1,0.1" for i in range(n)]
        lines += [f"KTS_APP,v2,{tenant},{tenant},{i},pad,1,1,2,0.1,0.1" for i in range(3, 150)]  # its own counter
        log.write_text("KTS_META,v2,{}\n" + "\n".join(lines) + "\n")
    return tmp_path


def test_the_line_names_the_scenario_its_iterations_and_the_time_left(tmp_path: Path) -> None:
    run = _run(tmp_path, {"baseline-fft/fft": 100, "baseline-gemm/gemm": 100, "shared/fft": 80, "shared/gemm": 40},
               complete=("baseline-fft", "baseline-gemm"))
    p = progress.RunWatcher(run).read()
    assert (p.scenario, p.index, p.total, p.done, p.planned) == ("shared", 3, 3, 40, 100)  # the slower tenant
    assert p.fraction == pytest.approx((1 + 1 + 0.4) / 3)  # equal weights: each scenario 100 x (10 + 1) ms
    line = progress.progress_line(p, elapsed_s=288.0)  # 80 % done in 288 s: 72 s to go
    assert line == "kts: shared (scenario 3 of 3): 40 of 100 iterations · about 1 min 12 s left"


def test_the_logs_are_read_on_from_where_they_were_left(tmp_path: Path) -> None:
    run = _run(tmp_path, {"baseline-fft/fft": 10})
    watcher = progress.RunWatcher(run)
    assert watcher.read().done == 10
    log = run / "logs" / "baseline-fft" / "fft.log"
    with log.open("a") as f:
        f.write("KTS_APP,v2,fft,fft,10,op,1,1,2,0.1,0.1\nKTS_APP,v2,fft,fft,11,op,1,1,")  # a line half written
    assert watcher.read().done == 11
    with log.open("a") as f:
        f.write("2,0.1,0.1\n")
    assert watcher.read().done == 12 and watcher.logs[log].offset == log.stat().st_size


def test_before_the_first_scenario_and_after_the_last(tmp_path: Path) -> None:
    assert progress.RunWatcher(tmp_path).read() is None  # no manifest yet: nothing is printed
    run = _run(tmp_path, {}, calibrated=False)
    assert progress.progress_line(progress.RunWatcher(run).read(), 3.0) == "kts: calibration (scenario 1 of 3)"
    run = _run(tmp_path, {}, complete=("baseline-fft", "baseline-gemm", "shared"))
    assert progress.progress_line(progress.RunWatcher(run).read(), 150.0) == (
        "kts: every scenario done after 2 min 30 s; analysing and rendering the report")


def test_watch_prints_a_line_every_so_often_off_a_terminal(tmp_path: Path) -> None:
    run = _run(tmp_path, {"baseline-fft/fft": 50})
    out = io.StringIO()
    with progress.watch(run, stream=out, interval_s=0.01, every_s=3600):
        time.sleep(0.1)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("kts: baseline-fft (scenario 1 of 3): 50 of 100 iterations")
    assert len(lines) == 1 and "\r" not in out.getvalue()  # one line, not one per read (nor a repeat at the end)


def test_a_report_page_has_a_title_of_its_own(tmp_path: Path) -> None:
    import nbformat

    from kts_helpers.present.html import render_html

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# A report")])
    src = tmp_path / "03-analysis.ipynb"
    nbformat.write(nb, str(src))
    html = render_html(src, tmp_path / "run-1.html", title="kts report: run-1").read_text()
    assert html.count("<title>") == 1 and "<title>kts report: run-1</title>" in html and "<title>Notebook" not in html
    assert "<title>kts: run-2</title>" in render_html(src, tmp_path / "run-2.html").read_text()


def test_the_logs_are_read_through_the_line_contract(tmp_path: Path) -> None:
    """The line's layout has one home (``run.logformat``): a line it rejects (a field short, a non-number where the
    iteration sits) counts for nothing here either, and a v1 line (the article's tool) counts as its parser reads it."""
    run = _run(tmp_path, {"baseline-fft/fft": 10})
    log = run / "logs" / "baseline-fft" / "fft.log"
    with log.open("a") as f:
        f.write("KTS_APP,v2,fft,fft,99,op,1,1,2\n")  # two fields short: not a line of the contract
        f.write("KTS_APP,v2,fft,fft,98,op,1,1,2,0.1,0.1,extra\n")  # one too many
    watcher = progress.RunWatcher(run)
    assert watcher.read().done == 10
    with log.open("a") as f:
        f.write("KTS_APP,v1,FFT,11,1,2,0.1,op\n")  # v1: iteration 11
    assert watcher.read().done == 12


def test_blocks_auto_counts_only_the_blocks_its_looks_reach() -> None:
    """Issue 52: a blocks=auto run plans 24 shared blocks a mode and usually runs 8; the progress line counts the
    first look's blocks until a look is recorded, then those up to the last look its budget reaches, or the look
    that stopped the mode (it read "scenario 6 of 75 ... about 7 min 35 s left" for an 80 s quickstart)."""
    from kts_helpers.present.progress import _within_looks

    planned = [{"name": f"baseline-a-r{k + 1}", "kind": "baseline", "sharing": "timeslice", "repeat": k}
               for k in range(25)]
    planned += [{"name": f"shared-r{k + 1}", "kind": "shared", "sharing": "timeslice", "repeat": k} for k in range(24)]
    planned.append({"name": "control-a-absent", "kind": "control", "sharing": "timeslice", "repeat": 24})
    auto = {"looks": [8, 12, 16, 20, 24], "first": 8}
    m = {"spec": {"scenarios": planned, "resolved": {"blocks_auto": auto}}}
    assert len(_within_looks(m)) == 9 + 8 + 1
    m["looks"] = [{"sharing": "timeslice", "blocks": 8, "stop": False, "schedule": [8, 12]}]
    assert len(_within_looks(m)) == 13 + 12 + 1
    m["looks"] = [{"sharing": "timeslice", "blocks": 8, "stop": True, "schedule": [8, 12]}]
    assert len(_within_looks(m)) == 9 + 8 + 1
    m["spec"]["resolved"] = {}  # a fixed design: every planned scenario
    assert len(_within_looks(m)) == len(planned)


def test_the_last_line_is_the_final_reading_even_when_a_reading_fails_or_the_loop_is_late(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The quickstart's last stderr line must be "every scenario done ...": on a loaded 2-core host it once ended on
    the loop's stale "30 of 30 iterations" line instead. The final reading is tried again when it reads nothing,
    and the loop's reading, late or not, never follows it (one show at a time)."""
    run = _run(tmp_path, {"baseline-fft/fft": 50})
    done = progress.Progress("analysis", 3, 3, None, None, 1.0)
    stale = progress.Progress("shared", 3, 3, 30, 30, 0.9)
    calls = {"main": 0}

    loop = {"n": 0}

    def read(self: progress.RunWatcher) -> progress.Progress | None:
        if threading.current_thread().name == "kts-progress":
            loop["n"] += 1
            time.sleep(0.02)
            return stale if loop["n"] == 1 else done  # the loop sees the end first, inside every_s: not printed
        calls["main"] += 1
        return None if calls["main"] == 1 else done  # the first final reading fails (a manifest not there)

    monkeypatch.setattr(progress.RunWatcher, "read", read)
    out = io.StringIO()
    with progress.watch(run, stream=out, interval_s=0.01, every_s=3600.0):
        time.sleep(0.2)
    lines = out.getvalue().splitlines()
    assert loop["n"] > 1 and calls["main"] == 2
    assert lines[0].startswith("kts: shared (scenario 3 of 3): 30 of 30") and len(lines) == 2, lines
    assert lines[-1].startswith("kts: every scenario done after"), lines
