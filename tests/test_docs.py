"""The short README and the documentation site: every generated block lives in the docs, the site builds offline
(`make docs`, mkdocs-material) and works from file:// with the network blocked, search included."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import docstats
import pytest
import yaml
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


# The code blocks of a page that scroll sideways, each by its longest line: a block cut off at this width.
CUT_CODE = """() => [...document.querySelectorAll('article pre > code')].filter(c => c.scrollWidth > c.clientWidth + 1)
  .map(c => c.textContent.split('\\n').sort((a, b) => b.length - a.length)[0].slice(0, 80))"""


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
            # every page at 1280 px: no code block is cut off (scrolls sideways) -- issue 53
            page.set_viewport_size({"width": 1280, "height": 900})
            cut = []
            for md in [m for m in _nav_pages() if "```" in (DOCS / m).read_text()]:  # pages with code blocks
                page.goto((site / md.replace(".md", ".html")).as_uri(), wait_until="load")
                cut += [f"{md}: {line}" for line in page.evaluate(CUT_CODE)]
            assert cut == [], cut[:5]
            page.set_viewport_size({"width": 1300, "height": 900})
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


# -- issue 44: a newcomer's documentation ---------------------------------------------------------------------------
GUIDE = DOCS / "guide"


def test_every_run_parameter_has_a_description_and_a_section() -> None:
    """A parameter added to ExperimentParams without its line in run/paramdocs.py fails here, and so does one whose
    section is missing from the committed reference page."""
    from dataclasses import fields

    from kts_helpers.docref import undocumented_parameters
    from kts_helpers.run.paramdocs import ANALYSIS, PARAMS
    from kts_helpers.run.params import ANALYSIS_KEYS
    from kts_helpers.run.spec import ExperimentParams

    names = [f.name for f in fields(ExperimentParams)]
    assert undocumented_parameters() == []
    assert sorted(set(PARAMS) - set(names)) == []  # no description of a parameter that is gone
    assert set(ANALYSIS) == set(ANALYSIS_KEYS)
    page = (DOCS / "reference" / "parameters.md").read_text()
    assert [n for n in [*names, *ANALYSIS] if f"\n### {n}\n" not in page] == []


def test_every_cli_flag_is_in_the_cli_reference() -> None:
    from kts_helpers.docref import block, cli_flags

    page = block((DOCS / "reference" / "cli.md").read_text(), "cli")
    sections = dict(re.findall(r"^## kts (\S+)\n(.*?)(?=^## |\Z)", page, re.M | re.S))
    flags = cli_flags()
    assert sorted(flags) == sorted(sections)
    missing = [f"{cmd} {flag}" for cmd, fl in flags.items() for flag in fl if f"`{flag}`" not in sections[cmd]]
    assert missing == []


def test_the_generated_references_are_current() -> None:
    """docs/reference/parameters.md, cli.md and layout.md's module list are what the code generates now
    (``make docs`` rewrites them)."""
    from kts_helpers.docref import stale

    assert stale() == []


def test_a_long_page_has_a_heading_every_600_words() -> None:
    """A page over 4,000 words has at least one heading per 600 words, so the table of contents and search land on
    a section. A generated block (a data table and its lines) counts as 600 words at most: it is one table under
    the heading before it, and no heading can go inside it."""
    bad = []
    for page in sorted(DOCS.rglob("*.md")):
        n = docstats.headed_words(page.read_text())
        if n > 4000 and docstats.headings(page.read_text()) < n / 600:
            bad.append(f"{page.relative_to(DOCS)}: {n} words, {docstats.headings(page.read_text())} headings")
    assert bad == []


def test_guide_sentences_are_at_most_60_words() -> None:
    pages = sorted(GUIDE.glob("*.md")) + [DOCS / "index.md"]
    long = [f"{p.name}: {docstats.sentence_words(s)} words: {s[:80]}" for p in pages
            for s in docstats.sentences(p.read_text()) if docstats.sentence_words(s) > 60]
    assert long == []


def test_sentences_are_split_where_a_reader_stops() -> None:
    text = "One two. Three (four.) Five `six.` Seven? Eight\n\n- a list item. Its second.\n\n| a. | B. |\n"
    assert docstats.sentences(text) == ["One two.", "Three (four.)", "Five `six.`", "Seven?", "Eight",
                                        "a list item.", "Its second."]
    assert docstats.headings("# T\n\n## A\n\n```\n## not\n```\n### B\n") == 2


def test_the_verdict_page_defines_every_word_the_code_has() -> None:
    from kts_helpers.analyse.verdict import readings, small_faster, small_slower

    page = (GUIDE / "reading-a-verdict.md").read_text()
    words = {*readings(), small_slower(), small_faster()}
    assert len(words) == 6
    assert [w for w in words if f"\n### {w}\n" not in page] == []
    for term in ("p50, p95 and p99", "DF, the degradation factor", "Open bounds", "Blocks", "Drift", "The prior",
                 "The same-moment contrast", "Holm"):
        assert re.search(rf"^### {re.escape(term)}", page, re.M), term


def test_the_verdict_page_quotes_numbers_the_generated_tables_hold() -> None:
    """Every quoted passage with a number in it, and every number of the form "a [b, c]", is in a generated table or
    verdict line of the docs (themselves tested against the data) — the page invents nothing. Its examples of the
    six words, the forms of a line and the Holm example are generated blocks themselves (``present.docblocks``)."""
    page = docstats.GENERATED.sub("", (GUIDE / "reading-a-verdict.md").read_text())  # its own blocks: generated
    generated = " ".join(" ".join(m.group(0) for m in re.finditer(docstats.GENERATED.pattern, p.read_text(), re.S))
                         for p in [*DOCS.rglob("*.md")]).split()
    generated = " ".join(generated)
    flat = re.sub(r"`[^`]*`", "", " ".join(page.split()))  # code spans hold quotes of their own
    quotes = [q for q in re.findall(r'"([^"]*)"', flat) if len(q) >= 12 and re.search(r"\d", q)]
    numbers = re.findall(r"\d+\.\d+ \[[^\]]+\]", flat)
    assert len(quotes) >= 5 and len(numbers) >= 3
    assert [q for q in quotes + numbers if q not in generated] == []


def test_the_statistics_page_quotes_the_generated_p99_interval() -> None:
    stats = " ".join((DOCS / "methods" / "statistics.md").read_text().split())
    table = re.search(r"<!-- reference-table:h200-2026-11-30-article:start -->.*?:end -->",
                      (DOCS / "results" / "reference.md").read_text(), re.S).group(0)  # the article's first run
    quoted = re.search(r"reads a wall p99 of (\d\.\d+ \[[\d., ]+\]) ms", stats).group(1)
    assert f"| fft | wall | timeslice | 0.560 → 0.536 | {quoted} |" in table


def test_every_report_links_to_the_verdict_page(site: Path) -> None:
    from kts_helpers.present import narrative

    assert (site / narrative.VERDICT_PAGE.removeprefix("docs/")).is_file()
    assert f"]({narrative.VERDICT_PAGE})" in narrative.verdict_rule_text()
    assert narrative.VERDICT_PAGE in (REPO / "notebooks" / "03-analysis.ipynb").read_text()


def test_license_and_citation() -> None:
    text = (REPO / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text
    pyproject = (REPO / "pyproject.toml").read_text()
    project = {k: re.search(rf'^{k} = "([^"]+)"', pyproject, re.M).group(1) for k in ("license", "version")}
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text())
    assert (cff["cff-version"], cff["license"], cff["version"]) == ("1.2.0", project["license"], project["version"])
    assert cff["title"] and cff["authors"]


def test_the_gitignore_matches_a_symlinked_venv() -> None:
    """``.venv/`` matches a directory only; a ``.venv`` symlink (to a shared environment) stayed untracked."""
    lines = (REPO / ".gitignore").read_text().splitlines()
    assert ".venv" in lines and ".venv/" not in lines


@pytest.mark.browser
def test_search_lands_on_the_right_section(site: Path, browser_path: str) -> None:
    """A newcomer types a parameter's name or a verdict word into the site's search (offline, from file://): the
    first hit opens the page at that parameter's or word's own section."""
    from playwright.sync_api import sync_playwright

    queries = {"fft_size": "reference/parameters.html#fft_size", "sleep_ms_gemm": "reference/parameters.html#sleep_ms_gemm",
               "cpu_core": "reference/parameters.html#cpu_core", "shared_max_factor":
               "reference/parameters.html#shared_max_factor", "mps_thread_percentage":
               "reference/parameters.html#mps_thread_percentage",
               "inconclusive": "guide/reading-a-verdict.html#inconclusive",
               "small speed-up": "guide/reading-a-verdict.html#small-speed-up-10",
               "faster when shared": "guide/reading-a-verdict.html#faster-when-shared"}
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=CHROMIUM_ARGS)
        try:
            ctx = browser.new_context(offline=True, viewport={"width": 1300, "height": 900})
            remote: list[str] = []

            def only_local(route) -> None:
                if route.request.url.startswith(("file:", "data:", "blob:", "about:")):
                    route.continue_()
                else:
                    remote.append(route.request.url)
                    route.abort()

            ctx.route("**/*", only_local)
            page = ctx.new_page()
            errors: list[str] = []
            page.on("pageerror", lambda e: errors.append(str(e)))
            for query, want in queries.items():
                page.goto((site / "index.html").as_uri(), wait_until="load")
                page.locator("input.md-search__input").focus()
                page.keyboard.type(query, delay=10)
                page.wait_for_selector(".md-search-result__item a[href*='#']", timeout=15000)
                # the results open with the page, then its sections best first: the reader clicks the first section
                section = page.locator(".md-search-result__item a[href*='#']").first.evaluate("a => a.href")
                page.goto(section, wait_until="load")
                path, anchor = page.url.split("?", 1)[0], page.url.rsplit("#", 1)[1]
                assert f"{path}#{anchor}".endswith(want), (query, page.url)
                heading = page.locator(f"article [id='{anchor}']")
                assert heading.evaluate("e => e.tagName") in ("H2", "H3", "H4"), query
                assert query.replace("-", " ") in heading.inner_text().replace("-", " "), query
            assert errors == [], errors[:3]
            assert remote == [], remote[:3]
        finally:
            browser.close()


# -- issue 53: docs that match the data ----------------------------------------------------------------------------
def _python_blocks() -> dict[str, list[str]]:
    """Every ```python block of the README and the docs, by page."""
    out: dict[str, list[str]] = {}
    for page in [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]:
        blocks = re.findall(r"```python\n(.*?)```", page.read_text(), re.S)
        if blocks:
            out[str(page.relative_to(REPO))] = blocks
    return out


def test_what_the_docs_examples_import_imports_in_a_fresh_process_outside_the_repository(tmp_path: Path) -> None:
    """Exactly the import statements of every Python example in the docs, run in a new interpreter whose working
    folder is outside the repository; the worker's folder on ``PYTHONPATH`` as the docs say (a factory imports
    ``kts_worker``, whose folder the worker puts on its path)."""
    import ast

    imports = []
    for blocks in _python_blocks().values():
        for block in blocks:
            imports += [ast.unparse(node) for node in ast.walk(ast.parse(block))
                        if isinstance(node, (ast.Import, ast.ImportFrom))]
    assert "from kts_worker import Workload" in imports  # the workloads guide's factory
    assert any(i.startswith("from kts_helpers.") for i in imports)  # the Python API page's
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "workers"), str(REPO),
                                                        os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, "-c", "\n".join(dict.fromkeys(imports))], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr[-2000:]


def test_every_workload_is_named_where_a_reader_looks() -> None:
    """Every workload the worker builds by name is in the parameter's description, the workloads guide, the error a
    wrong name gets and the troubleshooting page's quote of it (``resnet`` was in none of them)."""
    sys.path.insert(0, str(REPO / "workers"))
    import kts_builtin
    import kts_models

    from kts_helpers.errors import SpecError
    from kts_helpers.run.paramdocs import PARAMS
    from kts_helpers.run.spec import ExperimentParams, resolve
    from kts_helpers.run.workloads import KIT_WORKLOADS, REAL_MODELS

    names = [w for w in KIT_WORKLOADS if w != "noop"] + list(REAL_MODELS)
    assert set(kts_models.FACTORIES) == set(REAL_MODELS) and set(KIT_WORKLOADS) <= set(kts_builtin.DEFAULT_SLEEP_MS)
    with pytest.raises(SpecError) as err:
        resolve(ExperimentParams.from_mapping({"workloads": "fft,nosuch"}), "cpu")
    guide = (GUIDE / "workloads.md").read_text()
    quoted = " ".join(re.search(r"^> unknown workload.*?(?=\n\n)", (GUIDE / "troubleshooting.md").read_text(),
                                re.M | re.S).group(0).replace(">", " ").split())
    missing = {where: [n for n in names if not re.search(rf"(?<![\w-]){re.escape(n)}(?![\w-])", text)]
               for where, text in (("error", str(err.value)), ("parameter", PARAMS["workloads"]),
                                   ("troubleshooting", quoted),
                                   ("guide", " ".join(re.findall(r"`([\w-]+)`", guide))))}
    assert missing == {"error": [], "parameter": [], "troubleshooting": [], "guide": []}


VERDICT_PAGE = GUIDE / "reading-a-verdict.md"


def test_every_term_a_verdict_prints_is_defined_on_the_verdict_page() -> None:
    """The terms come from the code's phrase list (``verdictline.GLOSSARY``, the tests of
    ``verdict.WEIGHTS_BY_DESIGN``, the six readings); each is printed by some committed verdict (the list is not
    stale) and defined on the verdict page: a glossary row, or a heading for each word."""
    from kts_helpers.analyse.verdict import WEIGHTS_BY_DESIGN, readings
    from kts_helpers.present.verdictline import GLOSSARY

    page = VERDICT_PAGE.read_text()
    tests = {f"{name} test" for design in WEIGHTS_BY_DESIGN.values() for name in design}
    assert tests <= set(GLOSSARY)
    printed = " ".join(m.group(0) for p in [REPO / "README.md", *DOCS.rglob("*.md")]
                       for m in docstats.GENERATED.finditer(p.read_text()))
    glossary = re.findall(r"^\| \*\*(.+?)\*\* \|", page.split("## Glossary", 1)[1], re.M)
    unprinted = [t for t in GLOSSARY if t not in printed and t not in tests]  # a test's name: "the level test"
    assert unprinted == []
    assert [t for t in GLOSSARY if t not in glossary] == []
    assert [w for w in readings() if f"\n### {w}\n" not in page] == []


def test_no_change_has_one_definition_per_design_on_one_page() -> None:
    """The verdict page's table names every design the verdict knows (``verdict.WEIGHTS_BY_DESIGN``); any other page
    that says what "no change" requires links to that table instead of saying it again."""
    from kts_helpers.analyse.verdict import WEIGHTS_BY_DESIGN

    section = VERDICT_PAGE.read_text().split("## No change, by design", 1)[1].split("\n## ", 1)[0]
    rows = [r for r in section.splitlines() if r.startswith("| ") and not r.startswith("| design")]
    assert sorted(re.search(r"\(`([^`]+)`", r).group(1) for r in rows) == sorted(WEIGHTS_BY_DESIGN)
    defining = re.compile(r"no change[^.]*\b(interval|share tests?|inside|requires|when|where)\b", re.I)
    elsewhere = [f"{p.relative_to(DOCS)}: {s[:90]}" for p in sorted(DOCS.rglob("*.md"))
                 if p not in (VERDICT_PAGE, DOCS / "changelog.md")  # the changelog tells what was, not what is
                 for s in docstats.sentences(p.read_text())
                 if defining.search(s) and "reading-a-verdict.md#no-change-by-design" not in s]
    assert elsewhere == []


def test_the_holm_example_can_be_redone_from_its_numbers() -> None:
    """Each row of the family's steps: p ÷ weight is the p over the weight, and the family p is the running maximum
    of (p ÷ weight) ÷ share, at most 1 (to the digits shown); a decided verdict's family p is the one its derivation
    prints, and the steps replay ``verdict.family`` exactly (every adjusted p the verdict's own)."""
    from kts_helpers.present import docblocks, verdictline

    block = re.search(r"<!-- holm-example:start -->(.*?)<!-- holm-example:end -->", VERDICT_PAGE.read_text(), re.S)
    tables = re.findall(r"\| step \|.*?\n\|---.*?\n((?:\|.*\n)+)", block.group(1))
    assert len(tables) == 2
    for rows in tables:
        run = 0.0
        cells = [[c.strip() for c in r.strip().strip("|").split("|")] for r in rows.strip().splitlines()]
        assert [int(c[0]) for c in cells] == list(range(1, len(cells) + 1))
        for step, _, _, _, p, w, pw, share, fam in cells:
            assert float(pw) == pytest.approx(min(1.0, float(p) / float(w)), rel=0.01, abs=0), step
            run = max(run, min(1.0, float(pw) / float(share)))
            assert float(fam) == pytest.approx(run, rel=0.05, abs=0), (step, fam, run)
    printed = re.findall(r'"(the report\'s family of \d+ verdicts, wall clock first: p = [^"]+)"', block.group(1))
    assert printed and all(p in " ".join(README.split()) for p in printed)
    rows = [(f"{label}, {metric}", q, v) for label, metric, q, v in docblocks._shared_rows(docblocks.HEADLINE_RUN)]
    for slower in (True, False):
        for s in verdictline.family_steps(rows, slower=slower):
            v = next(v for label, _, v in rows if label == s.label)
            assert s.adjusted == pytest.approx(v.p_slower_adjusted if slower else v.p_faster_adjusted, rel=1e-9)


def test_one_sample_size_rule_is_quoted_everywhere() -> None:
    """A p99's sample-size rule has one home (``rules.SAMPLE_SIZE_RULE``, from ``rules.MIN_CORUNNING``): the verdict
    page, Statistics and the report's Methods quote it word for word, every count of samples a page gives for it is
    that one (662, the one-sided 99 % rule the report's note used, is gone), and the report's note names the
    effective samples that decide."""
    from kts_helpers.analyse.rules import MIN_CORUNNING, SAMPLE_SIZE_RULE, sample_note
    from kts_helpers.present import narrative

    for page in (VERDICT_PAGE, DOCS / "methods" / "statistics.md"):
        assert SAMPLE_SIZE_RULE in " ".join(page.read_text().split()), page.name
    assert SAMPLE_SIZE_RULE in narrative._intervals_text(2000, "order")
    texts = {str(p.relative_to(REPO)): docstats.GENERATED.sub("", p.read_text())
             for p in [REPO / "README.md", *DOCS.rglob("*.md")] if p.name != "changelog.md"}
    counts = {(page, int(n)) for page, text in texts.items()
              for n in re.findall(r"(\d+)\*{0,2} (?:effective|co-running|independent) samples", text)}
    assert {n for _, n in counts} == {MIN_CORUNNING} and all("662" not in t for t in texts.values())
    note = sample_note(801, 170.4)
    assert note.startswith("801 samples, 170 effective") and f"needs {MIN_CORUNNING} effective" in note
    assert sample_note(801, 400.0) is None and sample_note(300).startswith("300 samples: ")


def test_issue_mentions_are_changelog_links(site: Path) -> None:
    """The tracker is not the reader's: on the built site (docstrings of the API page included), every "issue N"
    is a link to that issue's entry in the changelog, whose anchor exists; none is left bare."""
    changelog = (site / "changelog.html").read_text()
    bare, dead = [], []
    for page in sorted(site.rglob("*.html")):
        html = re.sub(r"<script.*?</script>", "", page.read_text(), flags=re.S)
        for n in re.findall(r'<a [^>]*href="[^"]*changelog(?:\.html|/)?#issue-(\d+)"', html):
            if f'id="issue-{n}"' not in changelog:
                dead.append(f"{page.name}: issue-{n}")
        text = re.sub(r"<[^>]+>", " ", re.sub(r'<a [^>]*href="[^"]*changelog[^"]*#issue-\d+"[^>]*>.*?</a>', "", html))
        bare += [f"{page.relative_to(site)}: {m}" for m in re.findall(r".{0,30}\b[Ii]ssues? #?\d+", text)]
    assert bare == [] and dead == []


def test_every_script_a_page_cites_is_in_the_repository() -> None:
    """A `path/x.py` or `x.sh` a page names is a file of this repository: at that path, under kts_helpers/ (``plan/
    draws.py``), or, for a bare name, the one tracked file of that name (``corunning.py``: tests/independent)."""
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout.split()
    names = {}
    for f in tracked:
        names.setdefault(Path(f).name, []).append(f)
    missing = []
    for page in [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]:
        for cited in set(re.findall(r"`([\w./-]+\.(?:py|sh))`", page.read_text())):
            ok = (cited in tracked or f"kts_helpers/{cited}" in tracked if "/" in cited
                  else len(names.get(cited, [])) >= 1)
            if not ok:
                missing.append(f"{page.relative_to(REPO)}: {cited}")
    assert missing == []


def test_every_row_of_the_parameters_table_renders_and_shows_a_value_the_parameter_takes() -> None:
    """Each row has the header's cells, no empty code span (it swallowed the rest of `label`'s row), and each
    profile's cell is a value the parameter takes back through ``--set`` (``design`` showed its description)."""
    from kts_helpers.docref import PROFILE_DEVICE
    from kts_helpers.run.params import parse_sets
    from kts_helpers.run.profiles import PROFILES
    from kts_helpers.run.spec import ExperimentParams, resolve

    page = (DOCS / "reference" / "parameters.md").read_text()
    assert "``" not in page.replace("```", "")
    header, _, *rows = [ln for ln in page.splitlines() if ln.startswith("| ")][:2] + \
        [ln for ln in page.splitlines() if ln.startswith("| [`")]
    cols = [c.strip() for c in header.strip("|").split("|")]
    bad = []
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split("|")]
        if len(cells) != len(cols):
            bad.append(row[:60])
            continue
        name = re.match(r"\[`(\w+)`\]", cells[0]).group(1)
        for profile, cell in zip(cols[2:], cells[2:], strict=True):
            value = cell.strip("`")
            if cell in ("—", "empty") or name in ("profile", "device", "backend"):
                continue
            try:
                resolve(ExperimentParams.from_mapping({**parse_sets([f"{name}={value}"]), "profile": profile}),
                        PROFILE_DEVICE.get(profile, "cuda"))
            except Exception as exc:  # noqa: BLE001 - any refusal is the finding
                bad.append(f"{name} in {profile}: {value!r}: {exc}")
    assert cols[2:] == list(PROFILES) and bad == []


def _body(page: Path) -> str:
    return docstats.FRONT_MATTER.sub("", page.read_text())


def test_every_page_is_titled_as_the_navigation_names_it_and_says_who_it_is_for() -> None:
    """Search shows a page by its H1: it must be the navigation's name ("Running the kit" showed as "Two commands").
    Each page says first whom it is for (the home page is titled by the kit's name)."""
    nav = dict(re.findall(r"^\s+- (.+?): (\S+\.md)\s*$", (REPO / "mkdocs.yml").read_text(), re.M))
    titles = {page: re.search(r"^# (.+)$", _body(DOCS / page), re.M).group(1) for page in nav.values()}
    assert {p: t for p, t in titles.items() if p != "index.md" and t != {v: k for k, v in nav.items()}[p]} == {}
    no_audience = [p for p in nav.values()
                   if not re.match(r"# .+\n\n\*\*For:\*\* \S", _body(DOCS / p).lstrip())]
    assert no_audience == [] and (REPO / "README.md").read_text().split("\n\n")[1].startswith("**For:** ")


def test_the_kubernetes_guide_opens_with_its_setup_steps() -> None:
    text = _body(GUIDE / "kubernetes.md")
    first = re.search(r"^## (.+)$", text, re.M)
    assert first.group(1) == "Set up and run" and docstats.words(text[:first.start()]) < 150
    steps = re.findall(r"^(\d)\. \*\*", text[first.end():].split("\n## ", 1)[0], re.M)
    assert steps == ["1", "2", "3", "4", "5"]


def test_mps_is_explained_in_the_lesson() -> None:
    section = " ".join(_body(GUIDE / "lesson.md").split("## MPS: sharing in space", 1)[1].split("\n## ", 1)[0].split())
    for needle in ("**in space**", "time slice", "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "sharing=mps", "device plugin"):
        assert needle in section, needle
    assert docstats.words(section) >= 150


def test_the_results_pages_open_with_a_one_screen_summary_and_are_headed() -> None:
    """validation.md and reference.md: the first section is a summary a screen holds (at most 500 words, its links
    landing on the page's own headings), and the page is headed every 600 words outside its generated blocks."""
    for name in ("validation.md", "reference.md"):
        text = _body(DOCS / "results" / name)
        first = re.search(r"^## (.+)$", text, re.M)
        assert first.group(1) == "In one screen", name
        summary = text[first.end():].split("\n## ", 1)[0]
        assert docstats.words(summary) <= 500, (name, docstats.words(summary))
        anchors = {re.sub(r"[^\w\s-]", "", h.lower()).strip().replace(" ", "-")
                   for h in re.findall(r"^#{2,4} (.+)$", text, re.M)}
        assert {a for a in re.findall(r"\]\(#([\w-]+)\)", summary)} <= anchors, name
        headings = re.findall(r"^#{2,4} ", text, re.M)
        assert docstats.headed_words(text) / len(headings) <= 600, name


ARTICLE = ("GPU Time-Slicing for Concurrent LLM Agents on Kubernetes", "Production-Grade Agentic Inference",
           "part 2", "Anubhab Banerjee", "p99 rose 66 %", "every pod reported healthy")
SEED = REPO.parent / "shared" / "seeds" / "kts-profiler-article.ru.txt"  # beside the checkout where it exists


def test_the_article_is_named_and_its_claims_link_to_the_sections_that_test_them(site: Path) -> None:
    """The README and the home page name the article (title, series, part, author, headline); the home page's table
    links each claim to a section of the built site that exists; every number a claim quotes is the article's own
    (checked against the article's text where it sits beside the checkout)."""
    index = " ".join((DOCS / "index.md").read_text().split())
    readme = " ".join(README.split())
    for needle in ARTICLE:
        assert needle in index and needle in readme, needle
    assert "**Reproduced:**" in readme and "**Added:**" in readme
    table = (DOCS / "index.md").read_text().split("### The article's claims", 1)[1].split("\n## ", 1)[0]
    rows = [tuple(c.strip() for c in ln.strip().strip("|").split(" | ")) for ln in table.splitlines()
            if ln.startswith("| ") and not ln.startswith("| the article says")]
    assert len(rows) >= 10 and all(len(r) == 2 for r in rows)
    for claim, where in rows:
        links = re.findall(r"\]\(([^)]+)\)", where)
        assert links, claim
        for link in links:
            path, _, anchor = link.partition("#")
            html = (site / path.replace(".md", ".html")).read_text()
            assert not anchor or f'id="{anchor}"' in html, link
    if SEED.is_file():
        seed = SEED.read_text()
        quoted = {n for claim, _ in rows for n in re.findall(r"\d+\.\d+", claim)}
        assert quoted and [n for n in quoted if n.replace(".", ",") not in seed] == []
