"""End to end: the four notebooks through papermill on the CPU, then the HTML report in a browser offline.

The report is made the way ``make report`` makes it (``python -m kts_helpers report`` in a subprocess, under
umask 0022), so the test sees what the terminal shows and the files as a web server would.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CHROMIUM_ARGS
from pagecheck import SPLIT_WORDS, chart_texts, check_offline_page

from kts_helpers.errors import SpecError
from kts_helpers.present.pipeline import NotebookFailed, build_report, build_teaching

REPO = Path(__file__).resolve().parent.parent
TINY = {"profile": "tiny", "device": "cpu", "iterations": 30, "matrix_size": 32, "sleep_ms_fft": 1.0,
        "sleep_ms_gemm": 1.0, "label": "<b>e2e</b> & co"}
LABEL = TINY["label"]

pytestmark = pytest.mark.e2e


def _kts(*args: str, umask: int = 0o022) -> subprocess.CompletedProcess:
    old = os.umask(umask)
    try:
        return subprocess.run([sys.executable, "-m", "kts_helpers", *args], cwd=REPO, capture_output=True, text=True,
                              timeout=900)
    finally:
        os.umask(old)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict:
    base = tmp_path_factory.mktemp("e2e")
    runs, reports = base / "runs", base / "report"
    sets = [f"--set={k}={v}" for k, v in TINY.items() if k not in ("profile", "device", "label")]
    res = _kts("report", "--profile", "tiny", "--device", "cpu", "--label", LABEL, *sets, "--root", str(runs),
               "--report-dir", str(reports))
    assert res.returncode == 0, res.stderr
    run_dir = next(p for p in runs.iterdir() if p.is_dir() and not p.name.startswith("."))
    return {"html": Path(res.stdout.strip()), "runs": runs, "reports": reports, "run_dir": run_dir, "base": base,
            "stdout": res.stdout, "stderr": res.stderr}


def test_pipeline_writes_run_summary_and_report(rendered: dict) -> None:
    run_dir = rendered["run_dir"]
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    (build,) = (rendered["reports"] / "build" / run_dir.name).iterdir()  # executed copies and tables live here
    assert sorted(p.name for p in build.iterdir() if p.suffix == ".ipynb") == [
        "00-setup.ipynb", "01-baseline.ipynb", "02-shared.ipynb", "03-analysis.ipynb"]
    assert sorted(p.name for p in run_dir.iterdir() if not p.name.startswith(".")) == ["logs", "manifest.json"]
    rows = json.loads((build / "summary.json").read_text())
    shared_wall = [r for r in rows if r["kind"] == "shared" and r["metric"] == "wall"]
    assert {r["workload"] for r in shared_wall} == {"fft", "gemm"}
    assert all(r["df"] > 0 for r in shared_wall)
    assert all("df" not in r for r in rows if r["kind"] == "baseline")
    assert (build / "summary.csv").read_text().startswith("kind,group,")
    # the index's line: left by the analysis notebook (the report's own verdicts), the same as computed afresh
    from kts_helpers.analyse.load import load_run
    from kts_helpers.analyse.verdicts import verdict_table
    from kts_helpers.present.html import ENTRY_FILE, headline_entry

    entry = json.loads((rendered["reports"] / f"{run_dir.name}.json").read_text())
    data = load_run(run_dir)
    assert json.loads((build / ENTRY_FILE).read_text()) == headline_entry(data, verdict_table(data))
    assert {k: v for k, v in entry.items() if k not in ("html", "rendered_at")} == headline_entry(
        data, verdict_table(data))
    assert entry["headline"].startswith(("fft", "gemm")) and entry["html"] == rendered["html"].name
    html = rendered["html"].read_text()
    assert "data:image/svg+xml" in html
    assert 'src="http' not in html and 'href="http' not in html.replace('href="https://github', "")
    assert "<b>e2e</b>" not in html and "&lt;b&gt;e2e&lt;/b&gt;" in html  # the label is escaped
    assert manifest["run_id"] in html
    index = (rendered["reports"] / "index.html").read_text()
    assert rendered["html"].name in index and "&lt;b&gt;e2e" in index


def test_the_terminal_shows_the_report_path_and_nothing_else(rendered: dict) -> None:
    # no kernel warnings, no spurious kernel errors: only the progress lines (present.progress; at most one each 30 s
    # where stderr is no terminal)
    progress = re.compile(r"kts: (\S+ \(scenario \d+ of \d+\)|every scenario done after .+; analysing and rendering the report$)")
    other = [ln for ln in rendered["stderr"].splitlines() if not progress.match(ln)]
    assert other == []
    assert rendered["stdout"].splitlines() == [str(rendered["html"])]


def test_written_files_are_world_readable(rendered: dict) -> None:
    """Under umask 0022 a web server may publish everything the report and the run wrote, as written."""
    private = [f"{p.relative_to(rendered['base'])}: {oct(stat.S_IMODE(p.stat().st_mode))}"
               for root in (rendered["reports"], rendered["run_dir"]) for p in [root, *root.rglob("*")]
               if p.name != ".lock" and (stat.S_IMODE(p.stat().st_mode) & (0o055 if p.is_dir() else 0o044))
               != (0o055 if p.is_dir() else 0o044)]
    assert private == []


def test_values_are_escaped_once_and_no_local_path_leaks(rendered: dict) -> None:
    html = rendered["html"].read_text()
    assert "&amp;lt;" not in html and "&amp;#x27;" not in html and "&amp;amp;" not in html
    assert re.search(r"<td[^>]*>timeslice</td>", html)  # a list parameter reads as a list, not as Python's repr
    assert "[&#x27;" not in html
    for local in {str(rendered["base"]), str(REPO), str(Path.home())} - {"/"}:
        assert local not in html, local
        assert local not in (rendered["reports"] / "index.html").read_text(), local


def _summary(html: str) -> str:
    """The text of the report's Summary section (headings to the next heading), tags removed."""
    part = html.split('id="Summary"', 1)[1].split("<h2", 1)[0]
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", part))


def test_cpu_report_says_what_it_shows_and_hides_what_repeats(rendered: dict) -> None:
    html = rendered["html"].read_text()
    summary = _summary(html)
    assert summary.index("demonstrates CPU contention of the same harness") < summary.index("fft")
    assert "not GPU time-slicing" in summary
    # No sentence the data did not produce: the article's reading and a GPU wait that a CPU run cannot have.
    assert "medians move little" not in html and "waiting for the GPU" not in html
    assert "From alone to shared (wall time)" in html
    # The worker's CPU wall clock starts when an operation was due, device time when it started: two clocks that
    # differ, both shown, and the wait between them called the core's, never a GPU's
    charts = [chart_texts(src) for src in re.findall(r'<img[^>]+src="(data:image/svg\+xml[^"]+)"', html)]
    assert any("(wall)" in c for c in charts) and any("(device)" in c for c in charts)
    assert "the neighbour holding the core" in html and "nothing to split" not in html
    assert "device time equals wall time" not in html and "its wait is for the core" in html


# the "created" cells whose date (its first 10 characters) the layout put on more than one line
BROKEN_DATES = """() => [...document.querySelectorAll('tbody td:nth-child(2)')].filter(td => {
  const n = td.firstChild;
  if (!n || !n.data || n.data.length < 10) return false;
  const r = document.createRange();
  r.setStart(n, 0);
  r.setEnd(n, 10);
  return new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.top))).size > 1;
}).map(td => td.textContent)"""


@pytest.mark.browser
def test_index_reads_whole_words_in_chromium(rendered: dict, browser_path: str) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=CHROMIUM_ARGS)
        try:
            for width in (1000, 700):
                page = browser.new_page(viewport={"width": width, "height": 800})
                page.goto((rendered["reports"] / "index.html").as_uri())
                assert page.evaluate(SPLIT_WORDS, "th, td") == [], f"a word broke across lines at {width}px"
                assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
            for width in (1000, 700, 500):  # a date never breaks at its hyphens, even where the page is too narrow
                page = browser.new_page(viewport={"width": width, "height": 800})
                page.goto((rendered["reports"] / "index.html").as_uri())
                assert page.evaluate(BROKEN_DATES) == [], f"a date broke across lines at {width}px"
        finally:
            browser.close()


def test_unknown_parameter_fails_before_any_work(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="iteratons"):
        build_report({"profile": "tiny", "iteratons": 5}, runs_root=tmp_path / "runs", report_dir=tmp_path / "r",
                     notebooks_dir=REPO / "notebooks", cwd=REPO)
    with pytest.raises(SpecError, match="unknown profile"):
        build_report({"profile": "nope"}, runs_root=tmp_path / "runs", report_dir=tmp_path / "r",
                     notebooks_dir=REPO / "notebooks", cwd=REPO)
    assert not (tmp_path / "runs").exists() or not any((tmp_path / "runs").iterdir())


def test_crashing_tenant_fails_the_run_and_names_the_tenant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KTS_CRASH_AFTER", "3")  # inherited by the kernel, then by every worker
    with pytest.raises(NotebookFailed, match=r"01-baseline.*tenant 'fft'.*exited with code 1") as info:
        build_report({**TINY, "calibrate_iterations": 0}, runs_root=tmp_path / "runs", report_dir=tmp_path / "r",
                     notebooks_dir=REPO / "notebooks", cwd=REPO)
    assert "\n" not in str(info.value)
    run_dir = next(p for p in (tmp_path / "runs").iterdir() if not p.name.startswith("."))
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["status"] == "failed"
    log = (run_dir / "logs" / "baseline-fft" / "fft.log").read_text()
    timed = [ln for ln in log.splitlines() if ln.startswith("KTS_APP,v2,fft") and ",pad," not in ln]
    assert len(timed) == 4  # iterations 0..3 were written before the crash and all kept
    assert "injected crash" in (run_dir / "logs" / "baseline-fft" / "fft.stderr").read_text()
    assert next((tmp_path / "r" / "build" / run_dir.name).iterdir()).joinpath("01-baseline.ipynb").exists()


def _digest(run_dir: Path) -> dict[str, str]:
    """Every file of a run (names, modes and contents) but the lock file, which only readers' locks touch."""
    return {f"{p.relative_to(run_dir)} {oct(p.stat().st_mode)}": hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(run_dir.rglob("*")) if p.is_file() and p.name != ".lock"}


@pytest.mark.browser
def test_report_renders_offline_in_chromium(rendered: dict[str, Path], browser_path: str) -> None:
    check_offline_page(browser_path, rendered["html"], min_charts=5)


TEACHING_SECTIONS = ("Which clock sees the neighbour", "MPS: sharing in space", "The three kinds of waiting",
                     "EMULATED", "Exercise 1", "Exercise 2", "Exercise 3", "Your prediction:")


@pytest.mark.browser
def test_teaching_notebook_with_the_article_reference_renders_offline(tmp_path: Path, browser_path: str) -> None:
    """``make teach RUN=data/reference/h200-2026-11-30-article``: both tenants, both clocks, measured vs model."""
    html = build_teaching({"run_dir": str(REPO / "data" / "reference" / "h200-2026-11-30-article"),
                           "duration_ms": 60000, "reference_resamples": 100}, report_dir=tmp_path, notebooks_dir=REPO / "notebooks", cwd=REPO)
    text = html.read_text()
    for needle in TEACHING_SECTIONS + ("Quantum fit skipped: too few contended waits", "The long tenant",
                                       "measured DF", "simulated DF", "the committed probe of the same GPU",
                                       "with the slice timer"):
        assert needle in text, needle
    check_offline_page(browser_path, html, min_charts=8)


def test_make_report_run_leaves_the_run_untouched(rendered: dict, tmp_path: Path) -> None:
    """``make report RUN=<run>`` re-renders a completed run: not a byte of it changes, and the terminal shows the
    command and the report's path only (no variable the local backend does not use)."""
    run_dir = rendered["run_dir"]
    # what the run wrote, and nothing a rendering derived (the fixture has rendered it once already)
    assert "manifest.json" in (names := {p.name for p in run_dir.iterdir()}) and names <= {".lock", "manifest.json", "logs"}
    assert {p.parent.parent for p in (run_dir / "logs").rglob("*") if p.is_file()} == {run_dir / "logs"}
    before = _digest(run_dir)
    venv = Path(sys.prefix)
    res = subprocess.run(["make", "--no-print-directory", "-o", str(venv / ".kts-installed"), f"VENV={venv}",
                          f"PYTHON={sys.executable}", "report", f"RUN={run_dir}", f"REPORT_DIR={tmp_path}"],
                         cwd=REPO, capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert len(lines) == 2 and "kts_helpers report" in lines[0] and f"--run {run_dir}" in lines[0]
    assert "IMAGE=" not in lines[0] and "K8S_" not in lines[0]
    assert lines[1] == str(tmp_path / f"{run_dir.name}.html") and Path(lines[1]).exists()
    assert res.stderr == ""
    assert _digest(run_dir) == before
    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".json"] == [f"{run_dir.name}.json"]


OLD_SAMPLE_RULE = re.compile(r"(?<!\w)662(?!\w)[^<.]{0,40}sample|sample[^<.]{0,40}(?<!\w)662(?!\w)")


def test_the_report_reads_each_verdict_in_one_line_with_its_why_one_click_away(rendered: dict) -> None:
    """The summary, the headline table and the index give each verdict's word with the number that decided it
    (``verdictline.decided_by``), the derivation sits in a <details> under the table, and the sample-size note
    names the effective samples and the one rule (issue 53)."""
    from html import escape

    from kts_helpers.analyse.intervals import add_all_intervals
    from kts_helpers.analyse.load import load_run
    from kts_helpers.analyse.rules import MIN_CORUNNING
    from kts_helpers.analyse.summary import summarize_run
    from kts_helpers.present import verdictline

    data = load_run(rendered["run_dir"])
    table = add_all_intervals(summarize_run(data), data.iterations)
    html = rendered["html"].read_text()
    index = (rendered["reports"] / "index.html").read_text()
    summary = _summary(html)
    for r in table[(table["kind"] == "shared") & table["metric"].isin(["wall", "device"])].itertuples():
        line = verdictline.decided_by(r.verdict)
        assert f"verdict {r.verdict.reading} ({line})" in summary.replace("&lt;", "<"), (r.tenant, r.metric)
        assert escape(line) in html
        if r.metric == "wall":
            assert escape(f"{r.tenant}: {verdictline.one_line(r.verdict)}") in index
    assert html.count("<details><summary>Why: how each verdict above was decided") == 2  # wall and device tables
    # the old rule's number as a sample count: pandas' random table ids ("T_66623") may hold the digits, and a tiny
    # run's measured change may read "p99 +662 %" (a CI run's did)
    assert not OLD_SAMPLE_RULE.search(html) and f"needs {MIN_CORUNNING} effective samples" in html


def _sample(text: str, command: str) -> list[str]:
    """The lines of a page's ```text block that shows ``$ <command>``, the command line first."""
    return next(b for b in re.findall(r"```text\n(.*?)```", text, re.S) if b.startswith(f"$ {command}")).splitlines()


def _shape(line: str) -> str:
    """A printed line less what differs between runs: the report's path, scenario names, times, numbers, and each
    verdict with the number that decided it."""
    line = re.sub(r"\S*/report/\S+\.html", "<report>", line)
    line = re.sub(r"kts: (?!every )\S+ \(scenario", "kts: <scenario> (scenario", line)
    line = re.sub(r"(\d+ min )?\d+ s\b", "<time>", line)
    line = re.sub(r"verdict [a-z][^(]*\((?:[^()]|\([^()]*\))*\)", "verdict <verdict>", line)
    return re.sub(r"-?\d[\d,]*(\.\d+)?", "N", line)


def test_the_quickstart_shows_what_a_run_prints(rendered: dict) -> None:
    """The sample output of `make report` in the README and on the home page is what this test's run printed: the
    command make echoes, the progress lines (their forms from the run and from the kit's own formatter), the last
    line and the report's path; and the summary line quoted has the form of the run's own."""
    from html import unescape

    from kts_helpers.present import progress

    err, out = rendered["stderr"].splitlines(), rendered["stdout"].splitlines()
    formats = [progress.progress_line(progress.Progress("calibration", 1, 8, None, None, 0.0), 3.0),
               progress.progress_line(progress.Progress("shared-r1", 3, 8, 982, 1000, 0.5), 60.0)]
    can = {_shape(ln) for ln in err + out + formats}
    must = {_shape(err[-1]), _shape(out[-1])}
    assert "every scenario done after" in err[-1]
    echo = subprocess.run(["make", "-n", "--no-print-directory", "-o", ".venv/.kts-installed", "report"], cwd=REPO,
                          capture_output=True, text=True, timeout=60).stdout.splitlines()[0]
    summary = " ".join(unescape(_summary(rendered["html"].read_text())).split())
    theirs = re.search(r"fft : median wall latency .*? throughput changed by -?[\d.]+ %\.", summary).group(0)
    theirs = re.sub(r"\s+([:,;.)])", r"\1", theirs.replace("( ", "("))
    for page in (REPO / "README.md", REPO / "docs" / "index.md"):
        text = page.read_text()
        lines = _sample(text, "make report")
        assert lines[1] == echo, page.name
        shapes = [_shape(ln) for ln in lines[2:]]
        assert [s for s in shapes if s not in can] == [] and must <= set(shapes), page.name
        quote = text.split("**What to look at first.**", 1)[1].split("\n\n", 2)[1]
        ours = " ".join(quote.replace("> ", "").replace("*", "").split())
        assert _shape(ours) == _shape(theirs), (page.name, ours, theirs)


def test_a_build_without_the_notebooks_index_line_is_one_clear_error(tmp_path: Path) -> None:
    """03-analysis of another kit (no ``summary_dir``) leaves no index line: one line naming the file, nothing
    written to the index."""
    from kts_helpers.errors import KtsError
    from kts_helpers.present.pipeline import write_entry

    with pytest.raises(KtsError, match=r"left no index line \(index-entry.json\).*kit's own notebooks"):
        write_entry(tmp_path / "report", tmp_path / "r.html", tmp_path / "build")
    assert not (tmp_path / "report").exists()
