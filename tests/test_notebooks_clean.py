"""Committed notebooks are clean: no outputs, no execution counts, one ``parameters`` cell, the project's kernel."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))
# The kernel the Makefile installs into the venv (ipykernel install --name ...): the notebooks must name it.
KERNEL = re.search(r"ipykernel install .*--name (\S+)", (REPO / "Makefile").read_text()).group(1)


def test_the_makefile_installs_the_kts_kernel():
    assert KERNEL == "kts"


def test_there_are_notebooks():
    names = {p.name for p in NOTEBOOKS}
    assert {"00-setup.ipynb", "01-baseline.ipynb", "02-shared.ipynb", "03-analysis.ipynb"} <= names


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_is_clean(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    assert code, "a notebook without code cells"
    dirty = [i for i, c in enumerate(code) if c.get("outputs") or c.get("execution_count") is not None]
    assert dirty == [], f"code cells {dirty} carry outputs or execution counts"
    tagged = [c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", [])]
    assert len(tagged) == 1 and tagged[0]["cell_type"] == "code"
    assert nb["metadata"]["kernelspec"]["name"] == KERNEL  # what JupyterLab (make lab) starts for them
    assert nb.get("nbformat") == 4
