"""The Makefile a newcomer meets: every target listed by ``make help``, only the settings a backend uses printed,
JupyterLab startable as root, and the browser for ``make test`` found or provisioned by name."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
import kts_browser  # noqa: E402


def _make(*args: str, env: dict[str, str] | None = None) -> str:
    res = subprocess.run(["make", "--no-print-directory", *args], cwd=REPO, capture_output=True, text=True, timeout=60,
                         env=env)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_help_lists_every_target() -> None:
    targets = set(re.findall(r"^([a-zA-Z0-9_-]+):", (REPO / "Makefile").read_text(), re.M))
    listed = set(re.findall(r"^\s+(?:\x1b\[1m)?([a-zA-Z0-9_-]+)", _make("help"), re.M))
    assert {"k8s-smoke", "teach", "test", "report", "lab"} <= targets
    assert targets <= listed, targets - listed


def test_a_local_run_prints_no_kubernetes_setting() -> None:
    local = _make("-n", "report")
    assert "IMAGE=" not in local and "K8S_" not in local
    cluster = _make("-n", "report", "BACKEND=kubernetes", "K8S_NAMESPACE=kts")
    assert "IMAGE='localhost/kts-worker:0.1'" in cluster and "K8S_NAMESPACE='kts'" in cluster


def test_lab_starts_as_root_too() -> None:
    cmd = _make("-n", "lab")
    assert ("--allow-root" in cmd) == (os.geteuid() == 0)
    assert "--notebook-dir=notebooks" in cmd and "transport_encryption=auto" in cmd


def _fake(bindir: Path, name: str, version_line: str, code: int = 0) -> Path:
    path = bindir / name
    path.write_text(f"#!/bin/sh\necho '{version_line}'\nexit {code}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def nothing_else(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only what is on the test's PATH counts: no macOS bundle, no Playwright download."""
    monkeypatch.setattr(kts_browser, "MAC_APPS", ())
    monkeypatch.setattr(kts_browser, "_playwright_chromium", lambda: None)


@pytest.mark.parametrize("name", kts_browser.NAMES)
def test_the_browser_is_found_by_any_of_its_names(tmp_path: Path, name: str, nothing_else: None) -> None:
    path = _fake(tmp_path, name, "Chromium 150.0 built on a test")
    assert kts_browser.find_browser({"PATH": str(tmp_path)}) == str(path)


def test_a_browser_that_does_not_answer_is_not_taken(tmp_path: Path, nothing_else: None) -> None:
    _fake(tmp_path, "chromium-browser", "Please install the chromium snap", code=1)  # Ubuntu's stub
    assert kts_browser.find_browser({"PATH": str(tmp_path)}) is None
    good = _fake(tmp_path, "google-chrome", "Google Chrome 150.0")
    assert kts_browser.find_browser({"PATH": str(tmp_path)}) == str(good)
    assert kts_browser.find_browser({"PATH": str(tmp_path), "KTS_BROWSER": str(tmp_path / "nope")}) is None


def test_no_browser_is_one_line_saying_how_to_get_one(tmp_path: Path) -> None:
    """What ``make test`` shows where nothing can be found or installed: one line, exit 1 (the test runs the
    finder without --provision, so it installs nothing)."""
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path), "PLAYWRIGHT_BROWSERS_PATH": str(tmp_path / "none")}
    res = subprocess.run([sys.executable, str(REPO / "tests" / "kts_browser.py")], capture_output=True, text=True,
                         env=env, timeout=120)
    assert res.returncode == 1 and res.stdout == ""
    assert len(res.stderr.splitlines()) == 1 and "apt-get install chromium" in res.stderr
    assert "playwright install chromium" in res.stderr


def test_make_test_exports_the_browser_it_found() -> None:
    cmd = _make("-n", "test")
    assert "tests/kts_browser.py --provision" in cmd and "export KTS_BROWSER" in cmd
    # no test names a browser by a fixed path: they all take the one make test found (KTS_BROWSER)
    fixed = re.compile(r"/usr/(?:local/)?bin/(?:chromium|chromium-browser|google-chrome)\b")
    assert [p.name for p in (REPO / "tests").glob("*.py") if p.name != "kts_browser.py"
            and fixed.search(p.read_text())] == []


def test_help_lists_every_profile() -> None:
    from kts_helpers.run.profiles import PROFILES

    listed = re.search(r"PROFILE=(\S+)", _make("help")).group(1).split("|")
    assert sorted(listed) == sorted(PROFILES)
