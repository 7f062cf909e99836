"""Checks of a page as a reader sees it in Chromium: charts' labels drawn whole, table words not split.

Used by the report tests (charts are SVG images) and the JupyterLab test (charts are inline SVG drawn by
vega-embed). A label is *clipped* when its box reaches past its SVG's edge (the figure was laid out with a
narrower font than the browser draws) and *truncated* when Vega shortened it to a label limit ("…").
"""

from __future__ import annotations

import base64
from typing import Any

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


def svg_image_problems(browser: Any, src: str) -> list[str]:
    """Clipped or truncated labels of an SVG chart given as a ``data:image/svg+xml;base64,`` URI."""
    head, _, data = src.partition(",")
    svg = base64.b64decode(data).decode() if head.endswith(";base64") else data
    page = browser.new_page()
    try:
        page.set_content(f"<!doctype html><html><body style='margin:0'>{svg}</body></html>")
        return page.evaluate(SVG_TEXT_PROBLEMS, page.query_selector("svg"))
    finally:
        page.close()


def chart_texts(src: str) -> str:
    """The SVG source of a chart image (to look for a label)."""
    head, _, data = src.partition(",")
    return base64.b64decode(data).decode() if head.endswith(";base64") else data
