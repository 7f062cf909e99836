"""No import cycle runs through the Kubernetes backend, counting imports made inside functions.

An import inside a function is allowed there only for the heavy optional packages (the kubernetes
client, torch), and then carries a one-line reason; the kit's own modules are imported at the top.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PKG = "kts_helpers.run.backends.kubernetes"
# yaml: PyYAML comes with the kubernetes client (its dependency); the device plugin's config is YAML (plugin_config)
HEAVY = ("kubernetes", "urllib3", "torch", "yaml")


def _module(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> dict[str, set[str]]:
    """Module -> the kts_helpers modules it imports anywhere in the file (TYPE_CHECKING blocks included)."""
    files = {_module(p): p for p in (ROOT / "kts_helpers").rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for mod, path in files.items():
        out: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    out.add(sub if sub in files else node.module)
            elif isinstance(node, ast.Import):
                out.update(a.name for a in node.names)
        graph[mod] = {m for m in out if m in files and m != mod}
    return graph


def _cycles_through(graph: dict[str, set[str]], prefix: str) -> list[list[str]]:
    """Every module of ``prefix`` that can reach itself again, with one path that does."""
    found = []
    for start in sorted(m for m in graph if m.startswith(prefix)):
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for nxt in sorted(graph[node]):
                if nxt == start:
                    found.append([*path, start])
                    stack = []
                    break
                if nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, [*path, nxt]))
    return found


def test_no_import_cycle_involves_the_kubernetes_backend() -> None:
    graph = _graph()
    involved = {m for m, deps in graph.items() if m.startswith(PKG) or any(d.startswith(PKG) for d in deps)}
    cycles = [c for m in sorted(involved) for c in _cycles_through(graph, m) if any(x.startswith(PKG) for x in c)]
    assert not cycles, cycles[0]


def test_the_cycle_check_sees_an_import_inside_a_function() -> None:
    graph = _graph()
    graph[f"{PKG}.backend"] = graph[f"{PKG}.backend"] | {"kts_helpers.run.experiment"}
    assert any(f"{PKG}.backend" in c for c in _cycles_through(graph, f"{PKG}.backend"))


def test_imports_inside_functions_are_heavy_packages_with_a_reason() -> None:
    for path in sorted((ROOT / "kts_helpers/run/backends/kubernetes").glob("*.py")) + [ROOT / "kts_helpers/run/scale.py"]:
        lines = path.read_text().splitlines()
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    name = node.module if isinstance(node, ast.ImportFrom) else node.names[0].name
                    where = f"{path.relative_to(ROOT)}:{node.lineno}"
                    assert name and name.split(".")[0] in HEAVY, f"{where}: {name} imported inside a function"
                    said = " ".join(lines[max(0, node.lineno - 3):node.lineno])  # on the line or just above
                    assert "#" in said, f"{where}: an import inside a function needs a one-line reason"
