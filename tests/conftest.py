"""Shared fixtures: tiny experiment parameters, a log-file writer and a worker runner."""

from __future__ import annotations

import http.server
import importlib.util
import os
import socket
import stat
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
WORKER = REPO / "workers" / "kts_worker.py"
FIXTURES = Path(__file__).resolve().parent / "fixtures"

# Import kts_helpers from this checkout also under a bare ``pytest`` (``python -m pytest`` adds it anyway):
# the venv's editable-install finder lists kts_helpers as a namespace package, which hides __init__.py.
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
# the worker's parts (kts_api, kts_harness, ...) import one another by name, as the worker itself does
if str(REPO / "workers") not in sys.path:
    sys.path.insert(1, str(REPO / "workers"))


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--all-references", action="store_true",
                     help="also render every committed reference in full (make test-all), not one per kind")


def pytest_configure(config: pytest.Config) -> None:
    """One fresh cache folder for the lesson's measured tables (``teaching.memo``) per test session, shared by the
    xdist workers (they inherit the controller's environment) and the kernels they start: the first render
    computes each table, the others read it, and nothing from a developer's ~/.cache is ever read."""
    # xdist >= 3.5 re-sorts the files by their number of tests before handing them out (``--loadscope-reorder``,
    # on by default, 3.8 made it an option): that put the many-quick-test files first and the few long end-to-end
    # files (two Chromium/JupyterLab tests of ~60 s each) last, leaving one worker idle at the end. Off, so that
    # ``LONGEST_FIRST`` is the order they are handed out in.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    if "KTS_CACHE_DIR" not in os.environ:
        import tempfile

        config._kts_cache_dir = tempfile.mkdtemp(prefix="kts-test-cache-")
        os.environ["KTS_CACHE_DIR"] = config._kts_cache_dir


def pytest_unconfigure(config: pytest.Config) -> None:
    made = getattr(config, "_kts_cache_dir", None)
    if made:
        import shutil

        shutil.rmtree(made, ignore_errors=True)
        os.environ.pop("KTS_CACHE_DIR", None)


# The files that take longest (seconds summed over their tests, measured on 2 busy cores with ``--durations=0``,
# last on 2026-12-07) run first: with ``--dist loadfile`` xdist hands out whole files in collection order
# (``loadscopereorder`` off, above), and a long file drawn last leaves the other worker idle at the end (longest
# first is the classic greedy schedule). Files not named keep their order after. Re-measure when a file's share
# changes much.
LONGEST_FIRST = ("test_e2e_references.py", "test_teaching_notebook.py", "test_e2e_report.py", "test_e2e_options.py",
                 "test_warm.py", "test_reference_runs.py", "test_looks.py", "test_lab_browser.py", "test_workloads.py",
                 "test_k8s_notebooks.py", "test_verdict.py", "test_k8s_resume.py", "test_plan.py", "test_probe.py",
                 "test_readme.py", "test_corun.py", "test_collisions.py", "test_k8s_backend.py",
                 "test_local_backend.py", "test_stats_coverage.py", "test_docs.py", "test_beyond.py",
                 "test_k8s_conditions.py", "test_stopping.py", "test_runs.py", "test_k8s_guard.py", "test_blocks.py",
                 "test_worker.py", "test_simulate.py", "test_host_covariate.py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Longest files first (``LONGEST_FIRST``). Without ``--all-references`` the tests marked ``all_references`` are
    deselected (reported as such): the exhaustive renders are ``make test-all``'s, for when a reference is added."""
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda i: rank.get(i.path.name, len(rank)))  # stable: a file's own order is kept
    if not config.getoption("--all-references"):
        keep = [i for i in items if i.get_closest_marker("all_references") is None]
        if len(keep) < len(items):
            config.hook.pytest_deselected(items=[i for i in items if i.get_closest_marker("all_references")])
            items[:] = keep


@pytest.fixture(scope="session")
def worker_module():
    """workers/kts_worker.py imported as a module (it imports torch only when it runs)."""
    spec = importlib.util.spec_from_file_location("kts_worker_under_test", WORKER)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up while the file executes
    try:
        spec.loader.exec_module(mod)
        yield mod
    finally:
        sys.modules.pop(spec.name, None)


@pytest.fixture(scope="session")
def browser_path() -> str:
    """The Chromium the browser tests drive: ``$KTS_BROWSER`` (``make test`` finds or provisions one and exports
    it) or one found by name; none is a failure with one line saying how to get one, never a skip."""
    from kts_browser import HOW, find_browser

    path = find_browser()
    if path is None:
        pytest.fail(HOW, pytrace=False)
    return path


# Headless Chromium with no way out: no proxy that works, no background fetches.
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--proxy-server=127.0.0.1:9", "--disable-background-networking"]


@pytest.fixture(scope="session")
def tiny_params() -> Mapping[str, Any]:
    """The ``tiny`` profile made smaller still (read-only; ``{**tiny_params, ...}`` to change it)."""
    return MappingProxyType({"profile": "tiny", "device": "cpu", "iterations": 15, "matrix_size": 32,
                             "sleep_ms_fft": 1.0, "sleep_ms_gemm": 1.0, "warmup": 1, "calibrate_iterations": 20,
                             "timeout_s": 60.0})


def v1_line(workload: str, i: int, start_ns: int, end_ns: int, device_ms: float, phase: str = "op") -> str:
    return f"KTS_APP,v1,{workload},{i},{start_ns},{end_ns},{device_ms!r},{phase}"


def v2_line(workload: str, tenant: str, i: int, start_ns: int, end_ns: int, device_ms: float, wall_ms: float,
            phase: str = "op", intended_ns: int | None = None) -> str:
    due = start_ns if intended_ns is None else intended_ns
    return (f"KTS_APP,v2,{workload},{tenant},{i},{phase},{due},{start_ns},{end_ns},{device_ms!r},"
            f"{wall_ms!r}")


@pytest.fixture
def make_log(tmp_path: Path) -> Callable[..., Path]:
    """``make_log(name, lines, eol=b"\\n")``: write lines (str or bytes) to ``tmp_path/name``; returns the path.

    ``make_log.v1(...)`` and ``make_log.v2(...)`` format one KTS_APP line of each version.
    """

    def _make(name: str, lines: Iterable[str | bytes], *, eol: bytes = b"\n") -> Path:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        data = b"".join((ln if isinstance(ln, bytes) else ln.encode()) + eol for ln in lines)
        path.write_bytes(data)
        return path

    _make.v1 = v1_line  # type: ignore[attr-defined]
    _make.v2 = v2_line  # type: ignore[attr-defined]
    return _make


def worker_env(overrides: dict[str, str] | None = None) -> dict[str, str]:
    """This environment without kts/MPS knobs, tiny worker defaults, then ``overrides`` (None removes a key)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KTS_", "CUDA_MPS"))}
    env.update({"WORKLOAD": "gemm", "ITERATIONS": "10", "MATRIX_SIZE": "32", "SLEEP_MS": "0", "WARMUP": "1",
                "DEVICE": "cpu", "THREADS": "1"})
    env.update(overrides or {})
    return {k: v for k, v in env.items() if v is not None}


@pytest.fixture(scope="session")
def start_worker() -> Callable[..., subprocess.Popen]:
    """Start the real worker (text pipes) with :func:`worker_env`; several can run at once."""

    def _start(env: dict[str, str] | None = None, args: list[str] | None = None) -> subprocess.Popen:
        return subprocess.Popen([sys.executable, str(WORKER), *(args or [])], env=worker_env(env),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)

    return _start


@pytest.fixture
def closed_port() -> str:
    """A loopback URL where nothing listens (an unreachable exporter)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()  # nothing listens there now
    return f"http://127.0.0.1:{port}/metrics"


@pytest.fixture
def http_server() -> Iterator[Callable[[type[http.server.BaseHTTPRequestHandler]], str]]:
    """Serve a request handler on a random loopback port; returns its base URL; shut down after the test."""
    servers: list[http.server.ThreadingHTTPServer] = []

    def start(handler: type[http.server.BaseHTTPRequestHandler]) -> str:
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        return f"http://127.0.0.1:{srv.server_address[1]}"

    yield start
    for srv in servers:
        srv.shutdown()
        srv.server_close()


def corunning_fractions(run_dir: Path) -> dict[str, tuple[int, int, int]]:
    """{scenario/tenant: (timed, co-running timed, padding)} for every shared scenario, from raw logs alone."""
    out = {}
    for scen in sorted((Path(run_dir) / "logs").glob("shared*")):
        logs = {}
        for log in scen.glob("*.log"):
            rows = []
            for line in log.read_text(errors="replace").splitlines():
                p = line.split(",")
                if len(p) == 11 and p[:2] == ["KTS_APP", "v2"]:
                    rows.append((p[5], int(p[7]), int(p[8])))
            if rows:  # telemetry.sampler.log and the like hold no KTS_APP line
                logs[log.stem] = rows
        lo = max(min(s for _, s, _ in r) for r in logs.values())
        hi = min(max(e for _, _, e in r) for r in logs.values())
        for t, rows in logs.items():
            timed = [(s, e) for ph, s, e in rows if ph != "pad"]
            out[f"{scen.name}/{t}"] = (len(timed), sum(lo <= s and e <= hi for s, e in timed),
                                       sum(ph == "pad" for ph, _, _ in rows))
    return out


def fake_mps_control(tmp_path: Path, mode: str = "ok") -> tuple[Path, Path]:
    """A fake control binary. ok: ``-d`` creates the control pipe; fail: ``-d`` exits 1 with a message;
    nopipe: ``-d`` exits 0 but never creates the pipe. Every invocation is appended to a record file."""
    record = tmp_path / f"mps-record-{mode}.txt"
    script = tmp_path / f"fake-mps-control-{mode}"
    script.write_text(textwrap.dedent(f"""\
        #!/bin/bash
        echo "args=$* pipe=$CUDA_MPS_PIPE_DIRECTORY log=$CUDA_MPS_LOG_DIRECTORY${{CUDA_VISIBLE_DEVICES:+ visible=$CUDA_VISIBLE_DEVICES}}" >> {record}
        if [ "$1" = "-d" ]; then
            case {mode} in
                fail) echo "starting..."; echo "An MPS control daemon is already running" >&2; exit 1 ;;
                nopipe) exit 0 ;;
                *) : > "$CUDA_MPS_PIPE_DIRECTORY/control"; exit 0 ;;
            esac
        fi
        while read -r cmd; do
            echo "cmd=$cmd" >> {record}
            if [ "$cmd" = "quit" ]; then rm -f "$CUDA_MPS_PIPE_DIRECTORY/control"; fi
        done
    """))
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, record
