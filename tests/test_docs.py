"""The short README and the documentation site: every generated block lives in the docs, the site builds offline
(`make docs`, mkdocs-material) and works from file:// with the network blocked, search included."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import CHROMIUM_ARGS

REPO = Path(__file__).resolve().parent.parent
DOCS = REPO / "docs"
README = (REPO / "README.md").read_text()
BLOCK = re.compile(r"<!-- (reference-table|bench):(\S+):start -->|<!-- (plan-validation(?:-real)?):start -->")

# Every generated block the README held before it moved into the docs (2026-12-02): none may be lost.
GENERATED = {("reference-table", f"h200-2026-11-30-{n}") for n in (
    "article", "article-rerun", "saturating", "repeats", "repeats-mps", "mps-limited", "mps-limited-800",
    "four-tenants", "matrix", "openloop", "probe")} | {("reference-table", "h200-2026-12-02-article")} | {
    ("bench", f"cpu-2026-11-30-issue19-{n}") for n in ("coverage-wide", "decisions", "decisions-300")} | {
    ("bench", f"cpu-2026-12-02-issue19-{n}") for n in ("collided", "sequential")} | {("plan-validation", "")} | {
    ("reference-table", "h200-2026-12-02-article-blocks"), ("bench", "cpu-2026-12-03-issue30-drift"),
    ("reference-table", "h200-2026-12-02-saturating-blocks"),
    ("reference-table", "h200-2026-12-03-saturating-mps-blocks"), ("reference-table", "h200-2026-12-03-four-tenants-blocks"),
    ("plan-validation-real", "")}


def _blocks(text: str) -> set[tuple[str, str]]:
    return {(m.group(1) or m.group(3), m.group(2) or "") for m in BLOCK.finditer(text)}


def _nav_pages() -> list[str]:
    return re.findall(r":\s+(\S+\.md)\s*$", (REPO / "mkdocs.yml").read_text(), re.M)


def test_readme_is_short_and_opens_with_the_two_commands() -> None:
    assert len(README.splitlines()) <= 250
    first_code = re.search(r"```\w*\n(.*?)```", README, re.S).group(1)
    assert "make report" in first_code and "make test" in first_code


def test_every_generated_block_is_in_the_docs() -> None:
    in_docs = set().union(*(_blocks(p.read_text()) for p in DOCS.rglob("*.md")))
    assert GENERATED - in_docs == set()
    assert _blocks(README) <= in_docs  # the README's headline table is one of the docs' tables, not a new one


def test_readme_links_and_the_nav_point_at_pages_that_exist() -> None:
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", README)
    assert links and [x for x in links if not x.startswith("http") and not (REPO / x).exists()] == []
    nav = _nav_pages()
    assert [p for p in nav if not (DOCS / p).exists()] == []
    assert sorted(nav) == sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))  # no page left out


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    res = subprocess.run([sys.executable, "-m", "mkdocs", "build", "-q", "-f", str(REPO / "mkdocs.yml"), "-d", str(out)],
                         cwd=REPO, capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr  # strict: a broken link or a page outside the nav fails the build
    return out


def test_the_site_loads_nothing_from_the_network(site: Path) -> None:
    """No script, image, frame or stylesheet from elsewhere (mkdocs-material's offline plugin would load its worker
    shim from a CDN: docs/assets holds a copy); plain links out, such as the theme's credit, load nothing."""
    loads = []
    for page in site.rglob("*.html"):
        html = page.read_text()
        loads += [f"{page.name}: {u}" for u in re.findall(r'<(?:script|img|iframe)[^>]+src="(https?://[^"]+)"', html)]
        loads += [f"{page.name}: {u}" for u in re.findall(r'<link[^>]+href="(https?://[^"]+)"', html)]
    assert loads == []
    assert len(list(site.rglob("*.html"))) >= len(_nav_pages())


@pytest.mark.browser
def test_the_site_works_offline_with_search(site: Path, browser_path: str) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=CHROMIUM_ARGS)
        try:
            ctx = browser.new_context(offline=True, viewport={"width": 1300, "height": 900})
            remote: list[str] = []

            def only_local(route) -> None:
                url = route.request.url
                if url.startswith(("file:", "data:", "blob:", "about:")):
                    route.continue_()
                else:
                    remote.append(url)
                    route.abort()

            ctx.route("**/*", only_local)
            page = ctx.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            for name in ("index.html", "methods/statistics.html", "results/validation.html"):
                page.goto((site / name).as_uri(), wait_until="load")
                assert page.locator("article h1").count() == 1, name
            page.goto((site / "index.html").as_uri(), wait_until="load")
            nav = page.locator("nav.md-nav--primary a.md-nav__link").all_inner_texts()
            assert "Statistics" in " ".join(nav) and "Changelog" in " ".join(nav)
            page.locator("input.md-search__input").focus()
            page.keyboard.type("exceedance", delay=20)
            page.wait_for_selector(".md-search-result__item", timeout=15000)
            hits = page.locator(".md-search-result__item a").evaluate_all("els => els.map(e => e.href)")
            assert any("methods/statistics.html" in h for h in hits), hits
            page.goto(hits[0], wait_until="load")
            assert page.locator("article h1").count() == 1
            assert remote == [] and errors == [], (remote[:3], errors[:3])
        finally:
            browser.close()


def test_the_report_links_to_the_methods_page_that_the_site_has(site: Path) -> None:
    from kts_helpers.present.narrative import METHODS_PAGE

    assert METHODS_PAGE.startswith("docs/") and (site / METHODS_PAGE.removeprefix("docs/")).is_file()
    assert "docs" in (REPO / "Makefile").read_text().split("\nreport:", 1)[1].split("\n\n", 1)[0]
