"""The HTML that leaves the kit: a notebook rendered with nbconvert (code hidden, no external script, page
CSS), and ``report/index.html`` listing every rendered report. Both work with no network.
"""

from __future__ import annotations

import html
import json
import os
import re
from pathlib import Path
from typing import Any

from kts_helpers.analyse.rules import series_label
from kts_helpers.fsutil import atomic_write_text
from kts_helpers.present import verdictline

_EXTERNAL = re.compile(r"<script[^>]+src=\"https?://[^\"]*\"[^>]*>\s*</script>|<link[^>]+href=\"https?://[^\"]*\"[^>]*>",
                       re.I)

# Readable at the width of a page: charts scale down, wide tables wrap inside their cells.
PAGE_CSS = """<style>
body { max-width: 70rem; margin: 0 auto; }
.jp-OutputArea-output img, .jp-RenderedImage img { max-width: 100%; height: auto; }
.jp-RenderedHTMLCommon table { max-width: 100%; font-size: 0.85em; }
.jp-RenderedHTMLCommon th, .jp-RenderedHTMLCommon td { overflow-wrap: break-word; padding: 0.3em 0.4em; }
</style>
"""


def render_html(notebook: Path, out: Path, title: str | None = None) -> Path:
    """nbconvert with code hidden; external scripts/styles dropped so the page is self-contained.

    ``title`` is the page's ``<title>`` (a browser tab, a bookmark, a search result): nbconvert would write the
    notebook file's name, "Notebook" for an unnamed one, the same for every report. Default: the output's stem."""
    import nbformat  # nbconvert/nbformat: ~1 s to import, only rendering needs them
    from nbconvert import HTMLExporter  # nbconvert/nbformat: ~1 s to import, only rendering needs them

    nb = nbformat.read(str(notebook), as_version=4)
    exporter = HTMLExporter(template_name="lab")
    exporter.exclude_input = True
    exporter.exclude_input_prompt = True
    exporter.exclude_output_prompt = True
    body, _ = exporter.from_notebook_node(nb)
    body = _EXTERNAL.sub("", body).replace("</head>", PAGE_CSS + "</head>", 1)
    page_title = html.escape(title or f"kts: {out.stem}")
    body, n = re.subn(r"<title>.*?</title>", lambda _: f"<title>{page_title}</title>", body, count=1, flags=re.S)
    if not n:
        body = body.replace("</head>", f"<title>{page_title}</title></head>", 1)
    return atomic_write_text(out, body)


def _when(created_at: object) -> str:
    """"2026-11-30T13:13:55.617+00:00" -> "2026-11-30 13:13 UTC" (what a reader scans for), its hyphens
    non-breaking so a narrow column breaks it between date and time, never inside the date."""
    m = re.fullmatch(r"(\d{4}-\d\d-\d\d)T(\d\d:\d\d)[\d:.]*(?:\+00:00|Z)", str(created_at or ""))
    return f"{m.group(1).replace('-', chr(0x2011))} {m.group(2)} UTC" if m else str(created_at or "")


ENTRY_FILE = "index-entry.json"  # a report build's index line, left by the analysis notebook (``write_entry``)


def headline_entry(data: Any, table: Any) -> dict[str, Any]:
    """What the index shows for a run: id, date, device, profile, and per shared tenant its wall-time verdict in one
    line -- the word and the number that decided it (``verdictline.one_line``), never a DF beside a word another
    test decided."""
    m = data.manifest
    shared = table[(table["kind"] == "shared") & (table["metric"] == "wall")]
    parts = []
    for _, r in shared.iterrows():
        where = "" if r["group"] == "shared" else f" · {r['group']}"
        v = r.get("verdict")
        parts.append(f"{series_label(r['tenant'], r['phase'])}{where}: "
                     f"{verdictline.one_line(v) if v is not None else r['reading']}")
    return {"run_id": data.run.run_id, "created_at": m.created_at, "device": m.device,
            "device_name": m.device_name, "profile": m.profile, "label": m.label, "status": m.status,
            "headline": "; ".join(parts) or "no shared scenario"}


def write_index(report_dir: str | os.PathLike = "report") -> Path:
    """report/index.html: one row per rendered report (run id, date, device, profile, label, each tenant's
    wall-time verdict in one line), newest first."""
    report_dir = Path(report_dir)
    entries = []
    for p in report_dir.glob("*.json"):
        try:
            e = json.loads(p.read_text())
        except json.JSONDecodeError:
            continue
        if isinstance(e, dict) and "run_id" in e and (report_dir / e.get("html", "")).exists():
            entries.append(e)
    entries.sort(key=lambda e: (e.get("created_at") or e.get("rendered_at") or "", e["run_id"]), reverse=True)
    esc = html.escape
    rows = "\n".join(
        f"<tr><td><a href=\"{esc(e['html'])}\">{esc(e['run_id'])}</a></td><td>{esc(_when(e.get('created_at')))}"
        f"</td><td>{esc(str(e.get('device_name', e.get('device', ''))))}</td><td>{esc(str(e.get('profile', '')))}"
        f"</td><td>{esc(str(e.get('label', '')))}</td><td>{esc(str(e.get('headline', '')))}</td></tr>"
        for e in entries)
    newest = (f"<p>Newest: <a href=\"{esc(entries[0]['html'])}\">{esc(entries[0]['run_id'])}</a></p>"
              if entries else "<p>No reports yet: run <code>make report</code>.</p>")
    page = f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>kts reports</title>
<style>body{{font-family:system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem;color:#222}}
table{{border-collapse:collapse;width:100%}}td,th{{border-bottom:1px solid #ddd;padding:.4rem;text-align:left;
vertical-align:top;overflow-wrap:break-word}}th{{background:#f4f4f4;overflow-wrap:normal}}</style></head>
<body><h1>kts: GPU time-slicing contention reports</h1>{newest}
<table><thead><tr><th>run</th><th>created</th><th>device</th><th>profile</th><th>label</th>
<th>headline: each tenant's wall-time verdict, decided by</th></tr></thead><tbody>
{rows}
</tbody></table></body></html>
"""
    return atomic_write_text(report_dir / "index.html", page)
