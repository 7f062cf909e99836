"""End to end: the four notebooks through papermill on the CPU, then the HTML report in a browser offline."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path

import pytest

from kts_helpers.errors import SpecError
from kts_helpers.present.pipeline import NotebookFailed, build_report, build_teaching

REPO = Path(__file__).resolve().parent.parent
TINY = {"profile": "tiny", "device": "cpu", "iterations": 30, "matrix_size": 32, "sleep_ms_fft": 1.0,
        "sleep_ms_gemm": 1.0, "label": "<b>e2e</b> & co"}

pytestmark = pytest.mark.e2e


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("e2e")
    runs, reports = base / "runs", base / "report"
    html = build_report(dict(TINY), runs_root=runs, report_dir=reports, notebooks_dir=REPO / "notebooks", cwd=REPO)
    run_dir = next(p for p in runs.iterdir() if p.is_dir() and not p.name.startswith("."))
    return {"html": html, "runs": runs, "reports": reports, "run_dir": run_dir}


def test_pipeline_writes_run_summary_and_report(rendered: dict[str, Path]) -> None:
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
    html = rendered["html"].read_text()
    assert "data:image/svg+xml" in html
    assert 'src="http' not in html and 'href="http' not in html.replace('href="https://github', "")
    assert "<b>e2e</b>" not in html and "&lt;b&gt;e2e&lt;/b&gt;" in html  # the label is escaped
    assert manifest["run_id"] in html
    index = (rendered["reports"] / "index.html").read_text()
    assert rendered["html"].name in index and "&lt;b&gt;e2e" in index


def test_existing_run_rerenders_without_touching_it(rendered: dict[str, Path]) -> None:
    run_dir = rendered["run_dir"]

    def digest() -> dict[str, str]:
        return {str(p.relative_to(run_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
                for p in sorted(run_dir.rglob("*")) if p.is_file() and p.name != ".lock"}

    before = digest()
    html = build_report({}, run_dir=run_dir, report_dir=rendered["reports"], notebooks_dir=REPO / "notebooks",
                        cwd=REPO)
    assert html.exists() and digest() == before


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


def _check_offline_page(html: Path, min_charts: int) -> None:
    """Open the page in headless Chromium with the network off: charts drawn, nothing wider than the page."""
    from PIL import Image
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=[
            "--no-sandbox", "--disable-gpu", "--proxy-server=127.0.0.1:9", "--disable-background-networking"])
        try:
            ctx = browser.new_context(offline=True, viewport={"width": 1000, "height": 900})
            page = ctx.new_page()
            remote: list[str] = []
            page.on("request", lambda r: remote.append(r.url) if not r.url.startswith(("file:", "data:")) else None)
            page.goto(html.as_uri(), wait_until="load")
            charts = page.query_selector_all("img[src^='data:image/svg+xml']")
            assert len(charts) >= min_charts, f"expected at least {min_charts} charts, found {len(charts)}"
            for chart in charts:
                chart.scroll_into_view_if_needed()
                assert chart.evaluate("e => e.complete && e.naturalWidth > 0"), "chart image did not decode"
                img = Image.open(io.BytesIO(chart.screenshot())).convert("L")
                dark = sum(img.histogram()[:200])
                assert dark > 0.005 * img.width * img.height, "chart drawn blank"
            overflow = page.evaluate("""() => [...document.querySelectorAll('p, li, td, th, h1, h2, h3, img, table, pre')]
                .filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
                .map(e => e.tagName + ': ' + (e.textContent || e.src || '').slice(0, 60))""")
            assert overflow == [], f"content wider than the page: {overflow[:3]}"
            assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
            assert remote == [], f"the page tried the network: {remote[:3]}"
        finally:
            browser.close()


@pytest.mark.browser
def test_report_renders_offline_in_chromium(rendered: dict[str, Path]) -> None:
    _check_offline_page(rendered["html"], min_charts=6)


TEACHING_SECTIONS = ("Which clock sees the neighbour", "MPS: sharing in space", "The three kinds of waiting",
                     "EMULATED", "Exercise 1", "Exercise 2", "Exercise 3", "Your prediction:")


@pytest.mark.browser
def test_teaching_notebook_renders_offline_in_chromium(rendered: dict[str, Path]) -> None:
    html = build_teaching({"duration_ms": 20000}, report_dir=rendered["reports"], notebooks_dir=REPO / "notebooks",
                          cwd=REPO)
    text = html.read_text()
    for needle in TEACHING_SECTIONS + ("outside its events", "preempted mid-way"):
        assert needle in text, needle
    _check_offline_page(html, min_charts=7)


@pytest.mark.browser
def test_teaching_notebook_with_the_article_reference_renders_offline(tmp_path: Path) -> None:
    """``make teach RUN=data/reference/h200-2026-11-30-article``: both tenants, both clocks, measured vs model."""
    html = build_teaching({"run_dir": str(REPO / "data" / "reference" / "h200-2026-11-30-article"),
                           "duration_ms": 60000}, report_dir=tmp_path, notebooks_dir=REPO / "notebooks", cwd=REPO)
    text = html.read_text()
    for needle in TEACHING_SECTIONS + ("Quantum fit skipped: too few contended waits", "The long tenant",
                                       "measured DF", "simulated DF", "the committed probe of the same GPU",
                                       "with the slice timer"):
        assert needle in text, needle
    _check_offline_page(html, min_charts=8)


REFERENCE = sorted(p for p in (REPO / "data" / "reference").iterdir() if (p / "manifest.json").exists())


@pytest.mark.browser
@pytest.mark.parametrize("run_dir", REFERENCE, ids=[p.name for p in REFERENCE])
def test_reference_run_renders_offline(run_dir: Path, tmp_path: Path) -> None:
    """Each committed H200 run re-renders from its data alone and reads as a finished page offline."""
    html = build_report({}, run_dir=run_dir, report_dir=tmp_path, notebooks_dir=REPO / "notebooks", cwd=REPO)
    text = html.read_text()
    for needle in ("Headline table", "device time", "Clocks and telemetry", "Overlap window", "Environment",
                   "NVIDIA H200", "Caveats"):
        assert needle in text, needle
    assert "No GPU telemetry" not in text and "The distribution of the wait per tenant" in text
    expected = {"saturating": "Sharing modes side by side"}
    for suffix, heading in expected.items():
        if run_dir.name.endswith(suffix):
            assert heading in text, heading
    _check_offline_page(html, min_charts=7)
