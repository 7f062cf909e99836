"""One committed reference of each kind re-rendered through papermill, nbconvert and Chromium, offline.

Which references: ``references.representatives`` (every kind that exists, exactly once); the other references go
through the same analysis without a notebook in ``test_reference_runs``; ``make test-all`` (``--all-references``)
renders every one. A file of its own, so pytest-xdist (``--dist loadfile``) runs these renders beside
``test_e2e_report``'s.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pagecheck import check_offline_page
from references import (
    MIN_CHARTS,
    REFERENCES,
    log_problems,
    report_problems,
    representatives,
    sections_of_html,
)

from kts_helpers.present.pipeline import build_report

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.e2e

KIND_OF = {ref: sorted(k for k, r in representatives().items() if r == ref) for ref in REFERENCES}


@pytest.mark.browser
@pytest.mark.parametrize("run_dir", [pytest.param(r, marks=() if KIND_OF[r] else pytest.mark.all_references)
                                     for r in REFERENCES], ids=[p.name for p in REFERENCES])
def test_reference_run_renders_offline(run_dir: Path, tmp_path: Path, browser_path: str) -> None:
    """A committed H200 run re-renders from its data alone and reads as a finished page offline: under ``make
    test`` one reference of each kind (``references.representatives``; test_reference_runs checks every reference
    without a notebook), under ``make test-all`` every one."""
    assert log_problems(run_dir) == []
    html = build_report({}, run_dir=run_dir, report_dir=tmp_path, notebooks_dir=REPO / "notebooks", cwd=REPO)
    text = html.read_text()
    assert report_problems(text, sections_of_html(text), run_dir) == []
    check_offline_page(browser_path, html, min_charts=MIN_CHARTS)
