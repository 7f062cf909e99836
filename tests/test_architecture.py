"""The package's shape: wings with a one-way import rule, no import cycle, modules of a readable size, one home
per rule.

The import rule, as the docs' Layout page (docs/layout.md) states it (a test below checks the two say the same):

run → analyse → plan → present: ``present`` may import ``plan``, ``analyse`` and ``run``; ``plan`` (the
simulators and the planner) may import ``analyse`` and ``run``; ``analyse`` may import ``run``; never the other
way; ``teaching`` sits beside ``present``, words its numbers with ``present``'s formats, asks ``plan`` for its
models and reads runs through ``analyse``: it
does not import ``run``, except ``teaching.synthetic``, which writes simulated runs and takes the line's layout
from ``run.logformat``. Outside ``run``, run modules are used through their public names: no module whose name
starts with ``_``, no backend's inner modules. Notebooks import only ``present`` and ``teaching``. No
import cycle, imports inside functions included; an import stays inside a function only for a heavy or
optional package, with its reason on its line.
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
           "present": {"present", "plan", "analyse", "run"}, "teaching": {"teaching", "present", "plan", "analyse"},
           "top": {"run", "analyse", "plan", "present", "teaching", "top"}}
# (importer, imported) pairs outside ALLOWED, each with its reason
EXCEPTIONS = {("kts_helpers.teaching.synthetic", "kts_helpers.run.logformat"):
              "it writes simulated runs: the worker's line layout, from its one home"}
COMMON = {"kts_helpers.errors", "kts_helpers.fsutil", "kts_helpers.diskcache"}
BACKENDS = "kts_helpers.run.backends."

# The only imports allowed inside a function: packages too heavy to load on every import, or absent on a bare
# GPU host (the run wing must import with torch and the standard library alone). Each such import also says
# why on its own line.
LAZY_PACKAGES = {
    "torch": "the GPU stack: seconds to import, and only the worker's child processes need it",
    "kubernetes": "~1.3 s to import; only the Kubernetes backend talks to a cluster",
    "urllib3": "the kubernetes client's transport, imported with it",
    "yaml": "PyYAML, absent on a bare GPU host; it comes with the kubernetes client, for the device plugin's config",
    "playwright": "the browser tests' driver only",
    "scipy": "~0.6 s to import; loaded at the first interval, not to parse or load a run",
    "numba": "~0.4 s to import; only the planner's compiled loops need it, not the lesson's simulations",
    "arch": "~1 s to import; only Politis-White block lengths need it",
    "papermill": "~1.4 s to import; only executing notebooks needs it",
    "nbconvert": "~1.4 s to import; only rendering HTML needs it",
    "nbformat": "~1 s to import; only rendering HTML needs it",
    "pyarrow": "the run wing's telemetry sampler starts without it on a bare GPU host",
    "pynvml": "optional: NVML exists only on an NVIDIA host",
    "tqdm": "optional: a bare GPU host runs without progress bars",
    "prometheus_client": "optional: only a DCGM scrape needs it",
}
# kts_helpers modules a command may import inside its function: the analysis stack (pandas) is absent on a bare
# GPU host, where ``kts run`` and ``kts probe`` must still work.
LAZY_KIT = {"kts_helpers.cli": ("kts_helpers.analyse", "kts_helpers.plan", "kts_helpers.present")}


def _wing(module: str) -> str:
    parts = module.split(".")
    if module in COMMON:
        return "common"
    if len(parts) > 1 and parts[1] in ("run", "analyse", "plan", "present", "teaching"):
        return parts[1]
    return "top"


def _modules(pkg: Path = PKG) -> dict[str, Path]:
    out = {}
    for path in sorted(pkg.rglob("*.py")):
        rel = path.relative_to(pkg.parent).with_suffix("")
        name = ".".join(rel.parts)
        out[name.removesuffix(".__init__")] = path
    return out


def _import_nodes(path: Path) -> list[tuple[ast.Import | ast.ImportFrom, bool]]:
    """Every import statement of a file and whether it sits inside a function."""
    found: list[tuple[ast.Import | ast.ImportFrom, bool]] = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                found.append((child, in_function))
            walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    walk(ast.parse(path.read_text()), False)
    return found


def _targets(node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> list[str]:
    """The kts_helpers modules one import statement names (``from pkg import module`` names the module)."""
    if isinstance(node, ast.Import):
        return [a.name for a in node.names if a.name.startswith("kts_helpers")]
    if node.level:
        pytest.fail(f"relative import of {node.module}; the kit imports absolutely, so the wing is visible")
    if not (node.module or "").startswith("kts_helpers"):
        return []
    return [node.module] + [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules]


def _imports(path: Path, modules: dict[str, Path] | None = None) -> list[str]:
    """Every kts_helpers module a file imports, at the top, under TYPE_CHECKING or inside a function."""
    modules = _modules() if modules is None else modules
    return [t for node, _ in _import_nodes(path) for t in _targets(node, modules)]


def _cycles(modules: dict[str, Path]) -> list[frozenset[str]]:
    """The strongly connected components (more than one module) of the import graph, every import counted."""
    graph = {name: {t for t in _imports(path, modules) if t in modules and t != name}
             for name, path in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[frozenset[str]] = []

    def visit(v: str) -> None:  # Tarjan
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.add(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(frozenset(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def _lazy_problems(modules: dict[str, Path]) -> list[str]:
    """Imports inside functions that are not of a listed heavy/optional package, or that do not say why."""
    wrong = []
    for name, path in modules.items():
        lines = path.read_text().splitlines()
        for node, in_function in _import_nodes(path):
            if not in_function:
                continue
            mod = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
            if mod.startswith("kts_helpers"):
                allowed = mod.startswith(LAZY_KIT.get(name, ("-",)))
            else:
                allowed = mod.split(".")[0] in LAZY_PACKAGES
            if not allowed:
                wrong.append(f"{name}:{node.lineno} imports {mod} inside a function")
            elif "#" not in lines[node.lineno - 1]:
                wrong.append(f"{name}:{node.lineno} imports {mod} inside a function without saying why")
    return wrong


def test_imports_only_go_one_way() -> None:
    wrong = []
    for name, path in _modules().items():
        wing = _wing(name)
        for imported in _imports(path):
            target = _wing(imported)
            if (target != "common" and target not in ALLOWED[wing] and imported != "kts_helpers"
                    and (name, imported) not in EXCEPTIONS):
                wrong.append(f"{name} ({wing}) imports {imported} ({target})")
    assert wrong == []


def test_outside_run_only_public_run_modules_are_imported() -> None:
    """No ``_private`` run module and no backend's inner module (a backend package exports what others need)."""
    wrong = []
    for name, path in _modules().items():
        if _wing(name) == "run":
            continue
        for imported in _imports(path):
            private = any(part.startswith("_") for part in imported.split("."))
            inner = imported.startswith(BACKENDS) and imported.count(".") > BACKENDS.count(".")
            if _wing(imported) == "run" and (private or inner):
                wrong.append(f"{name} imports {imported}")
    assert wrong == []


def test_no_import_cycles_counting_imports_inside_functions() -> None:
    assert [sorted(c) for c in _cycles(_modules())] == []


def test_imports_inside_functions_are_heavy_or_optional_and_say_why() -> None:
    assert _lazy_problems(_modules()) == []


def test_the_rules_would_catch_a_cycle_a_backwards_and_a_lazy_import(tmp_path: Path) -> None:
    """The walker sees imports inside functions too (where a cycle or a backwards import would hide)."""
    pkg = tmp_path / "kts_helpers"
    (pkg / "run").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "run" / "__init__.py").write_text("")
    (pkg / "run" / "a.py").write_text("from kts_helpers.run.b import B\n")
    (pkg / "run" / "b.py").write_text("import json\n\ndef f():\n    from kts_helpers.run import a\n"
                                      "    import pandas  # heavy\n    import scipy\n    import json\n")
    mods = _modules(pkg)
    assert _cycles(mods) == [frozenset({"kts_helpers.run.a", "kts_helpers.run.b"})]
    assert [p.split(" imports ")[1] for p in _lazy_problems(mods)] == [
        "kts_helpers.run inside a function", "pandas inside a function",
        "scipy inside a function without saying why", "json inside a function"]
    bad = tmp_path / "bad.py"
    bad.write_text("def f():\n    from kts_helpers.present.charts import ccdf\n    return ccdf\n")
    assert "kts_helpers.present.charts" in _imports(bad)
    assert "present" not in ALLOWED[_wing("kts_helpers.analyse.rules")]
    assert "teaching" not in ALLOWED[_wing("kts_helpers.plan.engine")]  # the planner never imports the lesson
    assert "plan" not in ALLOWED[_wing("kts_helpers.analyse.rules")]
    assert "run" not in ALLOWED[_wing("kts_helpers.teaching.model")]


def test_readme_states_the_same_import_rule() -> None:
    """The rule lives in two places a reader looks; they must say the same, word for word."""
    rule = __doc__.split("say the same):\n\n", 1)[1]
    layout = (REPO / "docs" / "layout.md").read_text()
    assert " ".join(rule.split()) in " ".join(layout.split())


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
