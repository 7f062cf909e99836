"""Checks of a page as a reader sees it in Chromium: charts' labels drawn whole, table words not split.

Used by the report tests (charts are SVG images) and the JupyterLab test (charts are inline SVG drawn by
vega-embed). A label is *clipped* when its box reaches past its SVG's edge (the figure was laid out with a
narrower font than the browser draws) and *truncated* when Vega shortened it to a label limit ("…").
"""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

from conftest import CHROMIUM_ARGS

# (svg) -> ["clipped: label", "truncated: label…", ...]
SVG_TEXT_PROBLEMS = """svg => {
  const box = svg.getBoundingClientRect(), out = [];
  for (const t of svg.querySelectorAll('text')) {
    const s = (t.textContent || '').trim(), r = t.getBoundingClientRect();
    if (!s || r.width === 0) continue;
    if (s.endsWith('\\u2026')) out.push('truncated: ' + s);
    else if (r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.top < box.top - 0.5 || r.bottom > box.bottom + 0.5)
      out.push('clipped: ' + s);
  }
  return out;
}"""

# (selector) -> words (split at spaces and hyphens, where a line may break) that the layout broke across lines
SPLIT_WORDS = """sel => {
  const out = [];
  for (const cell of document.querySelectorAll(sel)) {
    const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let node = walk.nextNode(); node; node = walk.nextNode()) {
      for (const m of node.data.matchAll(/[^\\s\\-]+/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const lines = new Set([...range.getClientRects()].filter(r => r.width > 0).map(r => Math.round(r.top)));
        if (lines.size > 1) out.push(m[0]);
      }
    }
  }
  return out;
}"""


def svg_image_problems(page: Any, src: str) -> list[str]:
    """Clipped or truncated labels of an SVG chart given as a ``data:image/svg+xml;base64,`` URI, drawn alone
    as the whole document of ``page`` (a blank page of its own, reused chart after chart: ``set_content``
    replaces the document, and a new page cost ~0.75 s a chart on 2 busy cores)."""
    head, _, data = src.partition(",")
    svg = base64.b64decode(data).decode() if head.endswith(";base64") else data
    page.set_content(f"<!doctype html><html><body style='margin:0'>{svg}</body></html>")
    return page.evaluate(SVG_TEXT_PROBLEMS, page.query_selector("svg"))


def chart_texts(src: str) -> str:
    """The SVG source of a chart image (to look for a label)."""
    head, _, data = src.partition(",")
    return base64.b64decode(data).decode() if head.endswith(";base64") else data


def check_offline_page(browser_path: str, html: Path, min_charts: int) -> None:
    """Open the page in headless Chromium with the network off: charts drawn with every label whole, headers
    not broken inside a word, nothing wider than the page."""
    from PIL import Image
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=browser_path, args=CHROMIUM_ARGS)
        try:
            ctx = browser.new_context(offline=True, viewport={"width": 1000, "height": 900})
            page = ctx.new_page()
            remote: list[str] = []
            page.on("request", lambda r: remote.append(r.url) if not r.url.startswith(("file:", "data:")) else None)
            page.goto(html.as_uri(), wait_until="load")
            charts = page.query_selector_all("img[src^='data:image/svg+xml']")
            assert len(charts) >= min_charts, f"expected at least {min_charts} charts, found {len(charts)}"
            problems = []
            alone = browser.new_page()  # where each chart's SVG is drawn by itself (svg_image_problems)
            for chart in charts:
                chart.scroll_into_view_if_needed()
                assert chart.evaluate("e => e.complete && e.naturalWidth > 0"), "chart image did not decode"
                img = Image.open(io.BytesIO(chart.screenshot())).convert("L")
                dark = sum(img.histogram()[:200])
                assert dark > 0.005 * img.width * img.height, "chart drawn blank"
                problems += svg_image_problems(alone, chart.get_attribute("src"))
            assert problems == [], f"labels not drawn whole: {problems[:5]}"
            assert page.evaluate(SPLIT_WORDS, "th") == [], "a table header broke inside a word"
            overflow = page.evaluate("""() => [...document.querySelectorAll('p, li, td, th, h1, h2, h3, img, table, pre')]
                .filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
                .map(e => e.tagName + ': ' + (e.textContent || e.src || '').slice(0, 60))""")
            assert overflow == [], f"content wider than the page: {overflow[:3]}"
            assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
            assert remote == [], f"the page tried the network: {remote[:3]}"
        finally:
            browser.close()
