"""Find the headless Chromium the browser tests drive, or provision one; ``make test`` runs this first.

    python tests/kts_browser.py              print the browser's path, or one line saying how to get one (exit 1)
    python tests/kts_browser.py --provision  the same, but install one first where none is found

Looked for, in order: ``$KTS_BROWSER``; ``chromium``, ``chromium-browser``, ``google-chrome``,
``google-chrome-stable`` on PATH (Debian, Ubuntu, Fedora, Arch name it differently); the macOS application
bundles; the Chromium that Playwright downloads (``playwright install chromium``). A candidate counts only if
``--version`` answers (Ubuntu's ``chromium-browser`` can be a stub that asks for snap). Provisioning tries
Playwright's own download first, then, on Debian or Ubuntu as root, ``apt-get install chromium``.
The tests take the browser from ``$KTS_BROWSER`` (what ``make test`` exports) or from ``find_browser``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
MAC_APPS = ("/Applications/Chromium.app/Contents/MacOS/Chromium",
            "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome")
HOW = ("kts: no Chromium for the browser tests (looked for $KTS_BROWSER, " + ", ".join(NAMES) + " and Playwright's "
       "download); install one (Debian/Ubuntu: apt-get install chromium; elsewhere: .venv/bin/python -m playwright "
       "install chromium) or set KTS_BROWSER=/path/to/chrome")


def _answers(path: str) -> bool:
    try:
        res = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return res.returncode == 0 and any(w in res.stdout for w in ("Chromium", "Chrome"))


def _playwright_chromium() -> str | None:
    """The Chromium Playwright has downloaded, if it has (it knows the path, versioned per release)."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    try:
        with sync_playwright() as p:
            path = p.chromium.executable_path
    except Exception:
        return None
    return path if path and Path(path).is_file() else None


def find_browser(environ: dict[str, str] | None = None) -> str | None:
    env = os.environ if environ is None else environ
    given = env.get("KTS_BROWSER")
    if given:
        return given if _answers(given) else None  # a wrong KTS_BROWSER is an error, not a hint to look elsewhere
    candidates = [shutil.which(n, path=env.get("PATH")) for n in NAMES] + list(MAC_APPS)
    for c in candidates:
        if c and Path(c).is_file() and _answers(c):
            return c
    path = _playwright_chromium()
    return path if path and _answers(path) else None


def _debian_like() -> bool:
    try:
        text = Path("/etc/os-release").read_text()
    except OSError:
        return False
    ids = " ".join(line.split("=", 1)[1].strip().strip('"') for line in text.splitlines()
                   if line.startswith(("ID=", "ID_LIKE=")))
    return any(w in ids.split() for w in ("debian", "ubuntu"))


def provision() -> str | None:
    """Install a Chromium: Playwright's download where it can be reached, else apt on Debian/Ubuntu as root."""
    res = subprocess.run([sys.executable, "-m", "playwright", "install", "chromium"], capture_output=True, text=True,
                         timeout=900)
    if res.returncode == 0:
        found = _playwright_chromium()
        if found and _answers(found):
            return found
    if hasattr(os, "geteuid") and os.geteuid() == 0 and _debian_like() and shutil.which("apt-get"):
        print("kts: installing chromium with apt-get for the browser tests", file=sys.stderr)
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        for cmd in (["apt-get", "update", "-qq"],
                    ["apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium"]):
            if subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800).returncode != 0:
                return None
        return find_browser()
    return None


def main(argv: list[str]) -> int:
    found = find_browser()
    if found is None and "--provision" in argv and not os.environ.get("KTS_BROWSER"):
        found = provision()
    if found is None:
        given = os.environ.get("KTS_BROWSER")
        print(f"kts: KTS_BROWSER={given} does not answer --version as Chromium or Chrome" if given else HOW,
              file=sys.stderr)
        return 1
    print(found)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
