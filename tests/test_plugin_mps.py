"""MPS under the Kubernetes device plugin is a capped condition: labelled in the report, kept out of the lesson's
local-MPS comparison (issue 32: never compared with local MPS unlabelled)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from kts_helpers.analyse.load import load_run
from kts_helpers.present import sections
from kts_helpers.run.backends.kubernetes.nodes import mps_caps
from kts_helpers.teaching import reference

REPO = Path(__file__).resolve().parent.parent
LOCAL = REPO / "data" / "reference" / "h200-2026-11-30-repeats-mps"


def _as_plugin_run(tmp: Path, replicas: int) -> Path:
    """A copy of a local time-slicing + MPS run whose MPS records say what the Kubernetes backend writes."""
    run = tmp / "refs" / "plugin-mps"
    shutil.copytree(LOCAL, run)
    m = json.loads((run / "manifest.json").read_text())
    for name, rec in m["scenarios"].items():
        if name.startswith("shared-mps"):
            rec["mps_caps"] = mps_caps(replicas)
    (run / "manifest.json").write_text(json.dumps(m))
    return run


def _modes_markdown(run: Path) -> str:
    found = [s.markdown for s in sections.build(load_run(run), n_resamples=100, seed=0)
             if s.markdown.startswith("### Sharing modes side by side")]
    assert len(found) == 1
    return found[0]


def test_a_plugin_mps_run_names_its_caps_and_a_local_one_does_not(tmp_path: Path) -> None:
    text = _modes_markdown(_as_plugin_run(tmp_path, 4))
    assert "device plugin's (4 replicas)" in text and "25 % of the SMs and 25 % of the memory" in text
    assert "device plugin" not in _modes_markdown(LOCAL)


def test_the_lesson_leaves_plugin_mps_out_of_its_local_mps_comparison(tmp_path: Path) -> None:
    _as_plugin_run(tmp_path, 2)
    shutil.copytree(LOCAL, tmp_path / "refs" / LOCAL.name)
    assert [d.name for d in reference.mode_references(tmp_path / "refs")] == [LOCAL.name]
