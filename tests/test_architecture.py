"""The package's shape: wings with a one-way import rule, modules of a readable size, one home per rule.

run (spec, runs, backends) -> analyse (parse, load, rules, statistics) -> plan (the simulators and the planner)
-> present (charts, narrative, report); teaching sits beside present. present and teaching may import plan,
analyse and run; plan may import analyse and run; analyse may import run; never the other way; notebooks
import only present and teaching.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parent.parent
PKG = REPO / "kts_helpers"
# which wings a module of each wing may import (besides the shared errors/fsutil and itself)
ALLOWED = {"common": set(), "run": {"run"}, "analyse": {"analyse", "run"}, "plan": {"plan", "analyse", "run"},
           "present": {"present", "plan", "analyse", "run"}, "teaching": {"teaching", "plan", "analyse", "run"},
           "top": {"run", "analyse", "plan", "present", "teaching", "top"}}
COMMON = {"kts_helpers.errors", "kts_helpers.fsutil"}


def _wing(module: str) -> str:
    parts = module.split(".")
    if module in COMMON:
        return "common"
    if len(parts) > 1 and parts[1] in ("run", "analyse", "plan", "present", "teaching"):
        return parts[1]
    return "top"


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(REPO).with_suffix("")
        name = ".".join(rel.parts)
        out[name.removesuffix(".__init__")] = path
    return out


def _imports(path: Path) -> list[str]:
    """Every kts_helpers module a file imports, at the top or inside a function."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("kts_helpers"):
            found.append(node.module)
            found += [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in _modules()]
        elif isinstance(node, ast.Import):
            found += [a.name for a in node.names if a.name.startswith("kts_helpers")]
        elif isinstance(node, ast.ImportFrom) and node.level:
            pytest.fail(f"{path}: relative import; the kit imports absolutely, so the wing is visible")
    return found


def test_imports_only_go_one_way() -> None:
    wrong = []
    for name, path in _modules().items():
        wing = _wing(name)
        for imported in _imports(path):
            target = _wing(imported)
            if target != "common" and target not in ALLOWED[wing] and imported != "kts_helpers":
                wrong.append(f"{name} ({wing}) imports {imported} ({target})")
    assert wrong == []


def test_the_rule_would_catch_a_backwards_import(tmp_path: Path) -> None:
    """The walker sees imports inside functions too (where a backwards one would hide)."""
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from kts_helpers.present.charts import ccdf\n    return ccdf\n")
    assert "kts_helpers.present.charts" in _imports(bad)
    assert "present" not in ALLOWED[_wing("kts_helpers.analyse.rules")]
    assert "teaching" not in ALLOWED[_wing("kts_helpers.plan.engine")]  # the planner never imports the lesson
    assert "plan" not in ALLOWED[_wing("kts_helpers.analyse.rules")]


def test_notebooks_import_only_present_and_teaching() -> None:
    for nb in sorted((REPO / "notebooks").glob("*.ipynb")):
        code = "\n".join("".join(c["source"]) for c in json.loads(nb.read_text())["cells"] if c["cell_type"] == "code")
        modules = re.findall(r"^\s*(?:from|import) (kts_helpers[\w.]*)", code, re.M)
        assert modules, nb.name
        assert all(_wing(m) in ("present", "teaching") for m in modules), (nb.name, modules)


def test_modules_stay_readable_or_say_why() -> None:
    long = []
    for name, path in _modules().items():
        n = len(path.read_text().splitlines())
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        if n > 500 and "Longer than 500 lines" not in doc:
            long.append(f"{name}: {n} lines")
    assert long == []


def test_package_docstring_lists_every_module() -> None:
    import kts_helpers

    doc = kts_helpers.__doc__ or ""
    missing = [name for name in _modules() if name not in ("kts_helpers", "kts_helpers.__main__")
               and name.removeprefix("kts_helpers.") not in doc]
    assert missing == []


def test_a_quantile_ratio_is_computed_in_one_place() -> None:
    """DF = shared quantile / alone quantile: rules.degradation (and the interval engine it calls in stats)."""
    ratio = re.compile(r"(quantile|percentile|_pct)\([^\n]*\)\s*/\s*(np\.)?(quantile|percentile|_pct)\(|"
                       r"\[\"p99_ms\"\]\s*/|p99_ms\s*/\s*\w+\[\"p99_ms\"\]")
    offenders = [name for name, path in _modules().items() if name not in ("kts_helpers.analyse.rules",
                                                                          "kts_helpers.analyse.stats")
                 and ratio.search(path.read_text())]
    assert offenders == []


@pytest.fixture(scope="module")
def article():
    from kts_helpers.analyse.load import load_run

    return load_run(REPO / "data" / "reference" / "h200-2026-11-30-article")


def test_every_consumer_reports_the_same_df(article) -> None:
    """The report's table, the comparisons and the teaching notebook's "measured" numbers agree exactly."""
    from kts_helpers.analyse import compare
    from kts_helpers.analyse.summary import summarize_frame
    from kts_helpers.teaching.measured import from_run

    table = summarize_frame(article.iterations, "wall")
    report = {r.tenant: r.df for r in table[table["kind"] == "shared"].itertuples()}
    teaching = from_run(article, candidates=[1.0, 2.0], duration_ms=5_000).comparison.set_index(["tenant", "clock"])
    matrix = compare.contention_matrix(article, n_resamples=50).set_index("victim")
    modes = compare.modes_table(article, n_resamples=50)
    modes = modes[modes["mode"] == "timeslice"].set_index("tenant")
    for tenant, df in report.items():
        assert np.isfinite(df)
        assert teaching.loc[(tenant, "wall"), "measured_df"] == df
        assert matrix.loc[tenant, "df"] == df and modes.loc[tenant, "df"] == df
    device = summarize_frame(article.iterations, "device")
    for r in device[device["kind"] == "shared"].itertuples():  # the teaching notebook's device clock too
        assert teaching.loc[(r.tenant, "device"), "measured_df"] == r.df
