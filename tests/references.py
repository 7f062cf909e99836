"""The committed reference runs (data/reference), their kinds, and what every report of one must show.

A *kind* is a way a run differs that changes what its report shows (the sections and sentences the analysis
notebook adds for it): read from the run's manifest, never from its name. ``make test`` renders one reference of
each kind through papermill, nbconvert and Chromium (``test_e2e_report``) and runs every reference through the
analysis notebook's code without a kernel (``test_reference_runs``); ``make test-all`` renders all of them.
"""

from __future__ import annotations

import itertools
import json
import re
from html import unescape
from pathlib import Path

from kts_helpers.run.runs import open_run

REPO = Path(__file__).resolve().parent.parent
REFERENCE_ROOT = REPO / "data" / "reference"
REFERENCES = sorted(p for p in REFERENCE_ROOT.iterdir() if (p / "manifest.json").exists())


def kinds_of(run_dir: Path) -> frozenset[str]:
    """The kinds of one run; a run of none of them is the article's kind (two closed-loop tenants, time-sliced,
    a fixed number of iterations). A probe is of its own kind only: its random ticks (open loop) and neighbour
    sets (a matrix) are the probe's design, and a report of those kinds is rendered from a run of them."""
    found = features(run_dir)
    return found & {"probe", "multi-context probe"} or found


def features(run_dir: Path) -> frozenset[str]:
    """Every kind the run's manifest shows (a probe's design included)."""
    m = open_run(run_dir).read()
    scenarios = m.scenarios
    shared = [s for s in scenarios if s.kind == "shared"]
    tenants = [t for s in scenarios for t in s.tenants]
    out = set()
    if m.profile == "probe":
        out.add("multi-context probe" if any(s.name.startswith("multi-") for s in scenarios) else "probe")
    if "kubernetes" in m.backends():
        out.add("Kubernetes")
    if any(s.sharing.startswith("mps") for s in shared):
        out.add("MPS")
    if len({s.sharing for s in shared}) > 1:
        out.add("sharing modes")
    if any(len({frozenset(t.name for t in s.tenants) for s in shared if s.sharing == mode and s.repeat == r}) > 1
           for mode in {s.sharing for s in shared} for r in {s.repeat for s in shared}):
        out.add("matrix")
    if any(t.arrival != "closed" for t in tenants):
        out.add("open loop")
    if any(s.repeat > 0 for s in scenarios):
        out.add("repeats")
    if any(len(s.tenants) >= 4 for s in shared):
        out.add("four tenants")
    if any(t.workload == "llm" for t in tenants) or _logs_show_phases(run_dir):
        out.add("LLM")
    if _logs_show_host_probe(run_dir):
        out.add("host probe")
    if _logs_show_profile(run_dir):
        out.add("profiled")
    if any(t.auto for t in tenants):
        out.add("stopping rule")
    if any(t.looks for t in tenants):
        out.add("interim looks")
    if m.spec.resolved.get("design_kind") == "warm":
        out.add("warm design")
    return frozenset(out or {"article"})


def representatives(runs: list[Path] = REFERENCES) -> dict[str, Path]:
    """Kind -> the one reference rendered in full for it, so that every kind that exists is rendered exactly once,
    in few renders: the rarest kind first, each time the reference of that kind that shows the most kinds not yet
    rendered (a complete run before an interrupted one, then the earliest by name among equals)."""
    kinds = {r: kinds_of(r) for r in runs}
    count = {k: sum(k in ks for ks in kinds.values()) for ks in kinds.values() for k in ks}
    out: dict[str, Path] = {}
    for kind in sorted(count, key=lambda k: (count[k], k)):
        if kind not in out:
            left = set(count) - set(out)
            best = max((r for r in sorted(kinds) if kind in kinds[r]), key=lambda r: (len(kinds[r] & left),
                                                                                  _complete(r)))
            out.update({k: best for k in kinds[best] & left})
    return out


def combination_representatives(runs: list[Path], rendered: frozenset[Path]) -> list[Path]:
    """One reference of each combination of kinds (``features``) that no rendered reference shows: the earliest by
    name. Why: ``make test`` checks these without a notebook (test_reference_runs), so every mix of features a
    committed run has goes through the analysis on every change; the references that repeat a combination are
    analysed under ``make test-all`` (the data changes only when a reference is added)."""
    seen = {features(r) for r in rendered}
    out = []
    for r in sorted(runs):
        f = features(r)
        if r not in rendered and f not in seen:
            seen.add(f)
            out.append(r)
    return out


# What every reference's report shows (the page's words; every reference is a GPU run with NVML telemetry, its card
# named as its manifest records it), and the charts it draws at least.
REPORT_NEEDLES = ("Headline table", "device time", "Clocks and telemetry", "Overlap window", "Environment",
                  "Caveats", "The distribution of the wait per tenant")
REPORT_NEVER = ("No GPU telemetry", "a process that is not one of its tenants")
MIN_CHARTS = 7

# The sections under "Beyond the article" (their titles) that belong to a kind: a reference of the kind shows
# it, and a reference shows none of them without its kind. Collisions and Capacity belong to no kind (every GPU
# run of co-running tenants shows them, a probe no Capacity), nor does the device time's split by the GPU's idle
# state (shown where a tenant's shared launches fall on both sides of 100 ms since a neighbour ran: the data's, not
# the design's); a section in neither list is a new kind to add here.
COMMON_SECTIONS = ("Collisions: the physical cause of the tail", "Capacity", "Device time and the GPU's idle state")
KIND_SECTIONS = {
    "sharing modes": "Sharing modes side by side",
    "matrix": "Contention matrix",
    "open loop": "Open-loop arrivals",
    "LLM": "LLM-like workload: time to first token and per-token latency",
    "probe": "The GPU's time slice (probe)",
    "multi-context probe": "Several contexts (multi-context probe)",
    "Kubernetes": "Three kinds of waiting (Kubernetes)",
    "host probe": "Host speed between moments",
    "profiled": "Each tenant measured alone (its profile)",
    "warm design": "Design: warm tenants and many blocks",
}


def _logs_show_phases(run_dir: Path, *, lines: int = 400) -> bool:
    """Whether some tenant's log has a prefill and a decode phase (an LLM served by any workload, a plug-in's
    real model too, not only the built-in ``llm``), read from the raw lines: the phase is field 5 of KTS_APP,v2.
    Each log's first lines are enough (every iteration of such a tenant has both phases)."""
    for log in sorted((run_dir / "logs").glob("*/*.log")):
        phases = set()
        with log.open(errors="replace") as fh:
            for line in itertools.islice(fh, lines):
                if line.startswith("KTS_APP,v2,"):
                    phases.add(line.split(",")[5])
        if {"prefill", "decode"} <= phases:
            return True
    return False


def _logs_show_host_probe(run_dir: Path) -> bool:
    """Whether the workers probed the host's speed (``KTS_META``'s ``host_probe.on``, the log's first line) in an
    alone and a shared scenario: the report then compares the host's speed between those moments."""
    seen = set()
    for log in sorted((run_dir / "logs").glob("*/*.log")):
        with log.open(errors="replace") as fh:
            first = fh.readline()
        meta = json.loads(first.split(",", 2)[2]) if first.startswith("KTS_META,v2,") else {}
        if (meta.get("host_probe") or {}).get("on") is True:
            seen.add("shared" if log.parent.name.startswith("shared") else log.parent.name.split("-")[0])
    return {"baseline", "shared"} <= seen


def _complete(run_dir: Path) -> bool:
    return open_run(run_dir).read().status == "complete"


def _logs_show_profile(run_dir: Path) -> bool:
    """Whether an alone worker recorded a profile (``KTS_META``'s ``profile``, the log's first line)."""
    for log in sorted((run_dir / "logs").glob("baseline*/*.log")):
        with log.open(errors="replace") as fh:
            first = fh.readline()
        if first.startswith("KTS_META,v2,") and isinstance(json.loads(first.split(",", 2)[2]).get("profile"), dict):
            return True
    return False


def sections_of_markdown(texts: list[str]) -> list[str]:
    """The section titles (level-3 headings) of a report's Markdown."""
    return [line[4:].strip() for t in texts for line in t.splitlines() if line.startswith("### ")]


def sections_of_html(html: str) -> list[str]:
    """The section titles (h3) of a rendered report, without nbconvert's anchor link."""
    return [unescape(re.sub(r"<[^>]+>|¶", "", h)).strip() for h in re.findall(r"<h3[^>]*>(.*?)</h3>", html, re.S)]


def report_problems(text: str, sections: list[str], run_dir: Path) -> list[str]:
    """What a reference's report lacks or holds wrongly (empty: nothing): ``text``, all it says; ``sections``, the
    titles of its sections."""
    kinds = features(run_dir)
    card = open_run(run_dir).read().environment.get("gpu_name") or "NVIDIA H200"
    problems = [f"missing: {n!r}" for n in (*REPORT_NEEDLES, card) if n not in text]
    problems += [f"present: {n!r}" for n in REPORT_NEVER if n in text]
    for kind, title in KIND_SECTIONS.items():
        if kind in kinds and title not in sections:
            problems.append(f"a {kind} run without its section {title!r}")
        if title in sections and kind not in kinds:
            problems.append(f"section {title!r} in a run not of kind {kind!r} (kinds: {sorted(kinds)})")
    problems += [f"section {title!r} of no kind: add its kind to tests/references.py, so that one reference of it "
                 "is rendered in full" for title in sections if title not in (*COMMON_SECTIONS, *KIND_SECTIONS.values())]
    return problems


def log_problems(run_dir: Path) -> list[str]:
    """Where a reference's logs no longer hold what the run recorded writing: per shared scenario and tenant, the
    timed and padding KTS_APP lines counted from the raw log (independently of the kit's parser) against the
    manifest's ``corun`` counts. A log cut short or overwritten still renders a report, of other data."""
    import json

    out = []
    for scen, rec in json.loads((run_dir / "manifest.json").read_text())["scenarios"].items():
        for tenant, want in (rec.get("corun") or {}).items():
            log = run_dir / "logs" / scen / f"{tenant}.log"
            rows = [p for line in (log.read_text(errors="replace").splitlines() if log.exists() else [])
                    if len(p := line.split(",")) == 11 and p[:2] == ["KTS_APP", "v2"]]
            got = {"timed_lines": sum(p[5] != "pad" for p in rows), "pad_lines": sum(p[5] == "pad" for p in rows)}
            if got != {k: want[k] for k in got}:
                out.append(f"{scen}/{tenant}: the log holds {got}, the run wrote {want}")
    return out
