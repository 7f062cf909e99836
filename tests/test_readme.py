"""The README and the docs document the commands and quote the reference runs' numbers as the data gives them."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np

from kts_helpers.present.reference import reference_markdown

REPO = Path(__file__).resolve().parent.parent
# The README and every docs/ page (`make docs`): the generated tables and the prose about results live in the docs.
README = "\n".join(p.read_text() for p in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))])


def test_readme_reference_tables_match_the_committed_runs() -> None:
    blocks = re.findall(r"<!-- reference-table:(\S+):start -->\n(.*?)\n<!-- reference-table:\1:end -->", README, re.S)
    assert {name for name, _ in blocks} == {f"h200-2026-11-30-{n}" for n in (
        "article", "article-rerun", "saturating", "repeats", "repeats-mps", "mps-limited", "mps-limited-800",
        "four-tenants", "matrix", "openloop", "probe")} | {"h200-2026-12-02-article", "h200-2026-12-02-article-blocks",
                                                     "h200-2026-12-02-saturating-blocks",
                                                     "h200-2026-12-03-saturating-mps-blocks",
                                                     "h200-2026-12-03-four-tenants-blocks",
                                                     "h200-2026-12-06-rm-warm-ts-24", "h200-2026-12-04-article-warm",
                                                     "h100-2026-12-06-article-headline"}
    for name, block in blocks:
        assert block == reference_markdown(REPO / "data" / "reference" / name), name


def test_every_block_generated_from_the_runs_is_current() -> None:
    """Every block ``present.docblocks`` writes (the README's headline, the verdict page's examples, forms and Holm
    example, the results page's one-screen summary) is what it writes now: after the verdict changes, one command
    (``python -m bench.regen_reference_tables``) brings every page back, and this test says which block is stale."""
    from kts_helpers.present import docblocks

    stale, kinds = [], set()
    for page in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        text = page.read_text()
        for kind, arg, body in docblocks.blocks(text):
            kinds.add(kind)
            if kind != "reference-table" and body != docblocks.render(kind, arg, text):  # tables: the test above
                stale.append(f"{page.relative_to(REPO)}: {kind}:{arg}")
    assert stale == [], "run python -m bench.regen_reference_tables"
    assert kinds == set(docblocks.GENERATORS)  # every generator has its block somewhere


def test_the_headline_is_the_article_profile_in_the_design_make_report_runs() -> None:
    """The README's GPU table is the committed run of the article profile in the design that profile resolves to
    today; when the profile moves on (a new default design or block count), this fails with what to do."""
    from kts_helpers.present.reference import HEADLINE_PENDING, HEADLINE_RUN, _design_of, headline_mismatch
    from kts_helpers.run.spec import ExperimentParams, resolve

    readme = (REPO / "README.md").read_text()
    first = re.search(r"<!-- (headline|reference-table:\S+):start -->", readme).group(1)
    assert first == "headline" and f"`data/reference/{HEADLINE_RUN}`" in readme
    if HEADLINE_PENDING is None:
        assert headline_mismatch() is None, headline_mismatch()
    else:
        # a declared gap (no GPU run of the profile's new default yet): the README says so beside the table, and the
        # run differs from the profile in its block count alone -- never in the design, the profile or block_s
        assert headline_mismatch() is not None, "the headline is current: set HEADLINE_PENDING to None"
        assert f"**Not yet current:** {HEADLINE_PENDING}" in " ".join(readme.split())
        now = _design_of(resolve(ExperimentParams(profile="article"), "cuda").resolved)
        then = _design_of(json.loads((REPO / "data/reference" / HEADLINE_RUN / "manifest.json").read_text())
                          ["spec"]["resolved"])
        assert {k for k in now if now[k] != then[k]} == {"blocks"}, (now, then)
    for other in ("h200-2026-12-06-rm-warm-ts-24", "h200-2026-11-30-article"):  # another design: what to do
        assert "bash bench/h200/warm_batch.sh headline" in headline_mismatch(other)


def test_every_make_report_claim_names_the_headline_run() -> None:
    """A page that says a run is what `make report` runs names the headline run; older runs are named by their
    design (the results page's headings, ``reference.design_name``)."""
    from kts_helpers.present.docblocks import BLOCK
    from kts_helpers.present.reference import DESIGN_NAMES, HEADLINE_RUN, design_name

    claims = []
    for page in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        for line in BLOCK.sub("", page.read_text()).splitlines():
            if re.search(r"`make report`('s)? (now )?runs?\b(?! on a GPU now)|as `make report` runs it|that `make report` now",
                         line) and "h200-" in line:
                claims.append(line)
    assert [c for c in claims if HEADLINE_RUN not in c] == []
    page = (REPO / "docs" / "results" / "reference.md").read_text()
    heading = ""
    wrong = []
    for line in page.splitlines():
        if line.startswith(("## ", "### ")):
            heading = line.lower() if line.startswith("### ") else line.lower()
        m = re.match(r"<!-- reference-table:(\S+):start -->", line)
        if m:
            name = design_name(REPO / "data" / "reference" / m.group(1))
            key = {"one alone block": ("one alone block", "one block")}.get(name, (name.split()[0],))
            if not any(k in heading for k in key):
                wrong.append(f"{m.group(1)} ({name}) under {heading!r}")
    assert wrong == [] and set(DESIGN_NAMES.values()) >= {design_name(REPO / "data" / "reference" / HEADLINE_RUN)}


def test_readme_documents_both_commands_and_the_line_format() -> None:
    for needle in ("make report", "make test", "KTS_APP,v2,<workload>,<tenant>,<iteration>,<phase>",
                   "KTS_APP,v1,<WORKLOAD>,<i>,<epoch_ns_start>,<epoch_ns_end>,<device_ms>,<phase>",
                   "linear interpolation", "notebooks/", "kts_helpers/", "manifests/"):
        assert needle in README, needle
    assert "make test" in (REPO / ".ci/run").read_text()


def _shared_rows(name: str) -> dict[tuple[str, str, str], object]:
    """(tenant, sharing, clock) -> the summary row of a committed reference, by the report's own computation (the
    table the generated blocks are made from, computed once per process: ``reference.analysed``)."""
    from kts_helpers.present.reference import analysed

    _, table = analysed(REPO / "data" / "reference" / name)
    shared = table[table["kind"] == "shared"]
    return {(r.tenant, r.sharing, r.metric): r for r in shared.itertuples()}


def _verdicts(name: str) -> dict[tuple[str, str, str], str]:
    """(tenant, sharing, clock) -> reading of a committed reference."""
    return {k: r.reading for k, r in _shared_rows(name).items()}


def test_readme_prose_says_what_the_verdicts_say() -> None:
    """Each result the README's prose names between the generated tables, checked against the data."""
    from kts_helpers.analyse import collisions
    from kts_helpers.analyse.load import load_run

    article_rows = _shared_rows("h200-2026-11-30-article")
    article = {k: r.reading for k, r in article_rows.items()}
    assert article[("fft", "timeslice", "wall")] == "degraded"  # "shows by wall clock ..."
    assert article[("fft", "timeslice", "device")] != "degraded"  # "... and hides from silicon time"
    fft_wall = article_rows[("fft", "timeslice", "wall")]
    assert (fft_wall.collided_slow, fft_wall.collided_n) == (11, 14)  # "11 of those 14 ... the alone p99.75"
    assert "launches that found a neighbour in flight slower than the alone p99.75" in fft_wall.reading_detail
    # the same-moment control, shown next to the verdict: collided launches against the same blocks' clear ones
    assert (fft_wall.contrast_slow, fft_wall.contrast_n, fft_wall.contrast_clear_n) == (12, 14, 786)
    assert fft_wall.contrast_p < 1e-10 and fft_wall.contrast_ms > 0.5
    fft = next(f for f in collisions.run_collisions(load_run(REPO / "data/reference/h200-2026-11-30-article"))
               if f.tenant == "fft")
    assert (fft.share.collided, fft.share.n) == (14, 800) and fft.periodicity.lag == 35
    assert "14 of the FFT's 800 launches, 1.75 %, find the GEMM running, and they recur every 35 launches" in \
        " ".join(README.split())
    rerun_rows = _shared_rows("h200-2026-11-30-article-rerun")
    rerun_fft = rerun_rows[("fft", "timeslice", "wall")]
    assert rerun_fft.reading == "degraded" and (rerun_fft.collided_slow, rerun_fft.collided_n) == (11, 15)
    assert (rerun_fft.contrast_slow, rerun_fft.contrast_clear_n, f"{rerun_fft.contrast_p:.2g}") == (11, 785, "2.8e-09")
    assert rerun_rows[("fft", "timeslice", "device")].reading != "degraded"
    from kts_helpers.analyse.rules import series_groups
    from kts_helpers.analyse.verdict import exceedance

    runs = {k["kind"]: r for k, r in series_groups(load_run(REPO / "data/reference/h200-2026-11-30-article-rerun")
                                                    .iterations, "wall") if k["tenant"] == "fft"}
    ex = exceedance(runs["shared"], runs["baseline"])
    assert (ex.shared.count, ex.shared.n, ex.alone.count) == (23, 800, 8) and round(ex.p_more, 3) == 0.037
    assert "the rerun's FFT had 23 of 800 shared iterations beyond the alone p99 against 8" in " ".join(README.split())
    third_dir = REPO / "data/reference/h200-2026-12-02-article"
    third_rows = _shared_rows("h200-2026-12-02-article")
    third = {k: r.reading for k, r in third_rows.items()}
    assert third[("fft", "timeslice", "wall")] == "degraded" and third[("fft", "timeslice", "device")] != "degraded"
    assert (third_rows[("fft", "timeslice", "wall")].collided_slow, third_rows[("fft", "timeslice", "wall")].collided_n) \
        == (15, 23)  # "15 of those 23 were beyond it"
    assert third[("gemm", "timeslice", "wall")] == "faster when shared"  # "The GEMM reads faster when shared"
    third_data = load_run(third_dir)
    fft = next(f for f in collisions.run_collisions(third_data) if f.tenant == "fft")
    assert (fft.share.collided, fft.share.n, fft.periodicity.lag) == (23, 1200, 35)
    assert (round(fft.wait.median_with.estimate, 2), round(fft.wait.median_without.estimate, 2)) == (0.68, 0.30)
    runs = {(k["kind"], k["tenant"]): r for k, r in series_groups(third_data.iterations, "wall")}
    ex = exceedance(runs[("shared", "fft")], runs[("baseline", "fft")])
    assert (ex.shared.count, ex.shared.n, ex.alone.count) == (17, 1200, 12) and round(ex.p_more, 1) == 0.2
    it = third_data.iterations
    gemm = {k: it[(it["kind"] == k) & (it["tenant"] == "gemm")] for k in ("baseline", "shared")}
    slow = gemm["baseline"][gemm["baseline"]["wall_ms"] > 5.0]
    assert (len(slow), int((slow["device_ms"] < 3.1).sum()), int((gemm["shared"]["wall_ms"] > 5.0).sum())) == (12, 9, 0)
    alone_p99 = []
    for d in (third_data, load_run(REPO / "data/reference/h200-2026-11-30-article"),
              load_run(REPO / "data/reference/h200-2026-11-30-article-rerun")):
        fft_alone = d.iterations[(d.iterations["kind"] == "baseline") & (d.iterations["tenant"] == "fft")]
        alone_p99.append(round(float(fft_alone["wall_ms"].quantile(0.99)), 2))
    assert alone_p99 == [0.84, 0.66, 0.64]
    flat = " ".join(README.split())
    for claim in ("this host's alone FFT reached a p99 of 0.84 ms (0.66 and 0.64 ms on the other two)",
                  "23 of the FFT's 1200 launches found the GEMM running, again every 35 launches, and waited 0.68 ms "
                  "against 0.30 ms", "17 of 1200 shared iterations beyond the alone p99 against 12 alone",
                  "12 of its alone iterations took more than 5 ms, 9 of them with the kernel itself at 3.0 ms",
                  "11 of those 14 were slower than the alone p99.75", "too few for the whole series' test at 800 "
                  "iterations (p = 0.037), but 11 of the 15 launches that found the GEMM running were slower than the "
                  "alone p99.75 — and 11 of them slower than the p99 of the 785 launches that found the GPU free in "
                  "the same scenario (p = 2.8e-09)", "cannot tell from chance (p = 0.2)", "15 of those 23 were beyond it",
                  "they decide one by wall time. The collided launches decide all three *degraded* by wall time and none "
                  "by device time"):
        assert claim in flat, claim
    saturating = _verdicts("h200-2026-11-30-saturating")
    assert saturating[("fft", "timeslice", "wall")] == saturating[("fft", "mps", "wall")] == "degraded"
    assert saturating[("fft", "mps", "device")] == "degraded"  # "lands inside the FFT's events" under MPS
    assert saturating[("fft", "timeslice", "device")] != "degraded"  # "outside its CUDA events"
    for name in ("h200-2026-11-30-mps-limited", "h200-2026-11-30-mps-limited-800"):  # "moves the cost to the
        assert _verdicts(name)[("gemm", "mps-limited", "wall")] == "degraded"       # tenant that was capped"


def test_readme_statistics_tables_are_the_committed_measurements() -> None:
    """The coverage and decision tables quoted in Statistics are the files ``make bench`` wrote, verbatim."""
    blocks = re.findall(r"<!-- bench:(\S+):start -->\n(.*?)\n<!-- bench:\1:end -->", README, re.S)
    assert {name for name, _ in blocks} == {"cpu-2026-11-30-issue19-coverage-wide", "cpu-2026-11-30-issue19-decisions",
                                          "cpu-2026-11-30-issue19-decisions-300", "cpu-2026-12-02-issue19-sequential",
                                          "cpu-2026-12-02-issue19-collided", "cpu-2026-12-03-issue30-drift"}
    for name, block in blocks:
        assert block == (REPO / "bench" / "reference" / f"{name}.md").read_text().rstrip("\n"), name


def test_a_cpu_runs_reference_sentences_name_its_own_clock(tmp_path, tiny_params) -> None:
    """``kts reference-table`` on a CPU run: its device time is the operation's own time, never CUDA events."""
    from kts_helpers.run import experiment

    run = experiment.run_experiment({**tiny_params, "iterations": 20}, root=tmp_path, run_id="cpu", progress=False)
    text = reference_markdown(run.path)
    assert "by device time (the operation's own time)" in text and "CUDA events" not in text
    gpu = reference_markdown(REPO / "data" / "reference" / "h200-2026-11-30-article")
    assert "by device time (CUDA events)" in gpu


def test_readme_collided_sentences_are_the_committed_measurement() -> None:
    """The sentence before the collided launches' table says what its JSON holds."""
    import json

    rows = json.loads((REPO / "bench/reference/cpu-2026-12-02-issue19-collided.json").read_text())["rows"]
    fa = [r for r in rows if r["measures"] == "false alarm"]
    pct = lambda v: f"{100 * v:.3g} %"  # noqa: E731
    assert pct(max(r["collided_degraded"] / r["reps"] for r in fa)) == "0.75 %"
    assert pct(max((r["degraded"] - r["degraded_without"]) / r["reps"] for r in fa)) == "0.75 %"
    worst = max((r for r in fa if r["n"] == 800), key=lambda r: r["degraded"])
    assert (pct(worst["degraded"] / worst["reps"]), worst["alone"], worst["shared"]) == (
        "2.75 %", "lognormal φ 0.9", "lognormal φ 0") and worst["degraded"] == worst["degraded_without"]
    power = {(r["shared"], round(r["true_df"], 2)): (r["degraded"] / r["reps"], r["degraded_without"] / r["reps"])
             for r in rows if r["measures"] == "power" and r["n"] == 800}
    assert {k: (f"{a:.2f}", f"{b:.3f}") for k, (a, b) in power.items()} == {  # the table's digits
        ("random collisions 1.7 %", 2.46): ("1.00", "0.835"), ("bursty collisions 1.7 % (burst 3)", 2.46): ("0.98", "0.242"),
        ("periodic collisions 1.7 %", 2.46): ("1.00", "0.917"), ("random collisions 1.7 %", 1.09): ("1.00", "0.573"),
        ("periodic collisions 1.7 %", 1.09): ("1.00", "0.605")}
    flat = " ".join(README.split())
    for claim in ("at most 0.75 % of the pairs whose collisions cost nothing", "the worst row, 2.75 % at n = 800",
                  "1.00 for random and periodic collisions and 0.98 for bursty ones (0.835, 0.917 and 0.242 without",
                  "(true DF 1.09; 0.573 and 0.605 without)"):
        assert claim in flat, claim


def test_readme_runs_measured_after_the_collided_test_read_as_it_says() -> None:
    """The three H200 runs made after the collided launches' test: their looks, verdicts and the one miss."""
    import json

    from kts_helpers.analyse import collisions
    from kts_helpers.analyse.load import load_run

    said = {}
    for k in ("1", "2"):
        name = f"h200-2026-12-02-looks-article-{k}"
        looks = json.loads((REPO / "data/reference" / name / "manifest.json").read_text())["scenarios"]["shared"]["looks"]
        said[k] = {t: [(a["n"], a["answer"], a["reading"]) for a in v] for t, v in looks.items()}
        rows = _shared_rows(name)
        assert rows[("fft", "timeslice", "wall")].reading == rows[("gemm", "timeslice", "wall")].reading == "degraded"
        assert rows[("fft", "timeslice", "device")].reading != "degraded"
    assert said["1"]["fft"] == said["2"]["fft"] == [(800, "stop", "degraded")]
    assert said["2"]["gemm"] == [(800, "stop", "degraded")]
    assert [a[:2] for a in said["1"]["gemm"]] == [(800, "go"), (1200, "go")]
    assert "p = 0.0027" in json.dumps(json.loads((REPO / "data/reference/h200-2026-12-02-looks-article-1/manifest.json")
                                                 .read_text())["scenarios"]["shared"]["looks"]["gemm"][0])
    collided = [(_shared_rows(f"h200-2026-12-02-looks-article-{k}")[("fft", "timeslice", "wall")]) for k in "12"]
    assert [(r.collided_slow, r.collided_n) for r in collided] == [(12, 14), (9, 11)]
    plain = _shared_rows("h200-2026-12-02-article-800")
    fft = plain[("fft", "timeslice", "wall")]  # "Today's same-moment control decides it: 5 of those 11 ..."
    assert fft.reading == "degraded" and plain[("gemm", "timeslice", "wall")].reading == "degraded"
    assert (fft.contrast_slow, fft.contrast_n, fft.contrast_clear_n, round(fft.contrast_p, 5)) == (5, 11, 789, 0.00089)
    assert "5 of 11 launches that found a neighbour in flight beyond the p99 of the 789 that did not" in fft.reading_detail
    data = load_run(REPO / "data/reference/h200-2026-12-02-article-800")
    it = data.iterations
    alone = it[(it["kind"] == "baseline") & (it["tenant"] == "fft")].sort_values("start_ns")["wall_ms"].to_numpy()
    from kts_helpers.analyse.verdict import _effective

    assert round(_effective(alone, alone > float(np.quantile(alone, 0.99)), 0.99)[0], 1) == 8.4
    beyond = it[(it["kind"] == "shared") & (it["tenant"] == "fft") & it["collided"]]["wall_ms"] > np.quantile(alone, 0.99)
    assert int(beyond.sum()) == 6
    waits = {}
    for name in ("h200-2026-11-30-article", "h200-2026-11-30-article-rerun", "h200-2026-12-02-article",
                 "h200-2026-12-02-looks-article-1", "h200-2026-12-02-looks-article-2", "h200-2026-12-02-article-800"):
        f = next(c for c in collisions.run_collisions(load_run(REPO / "data/reference" / name)) if c.tenant == "fft")
        waits[name] = round(f.wait.median_with.estimate, 2)
    assert waits.pop("h200-2026-12-02-article-800") == 0.47 and (min(waits.values()), max(waits.values())) == (0.54, 0.85)
    flat = " ".join(README.split())
    for claim in ("(12 of 14 and 9 of 11 collided launches beyond the alone tail)", "median wait 0.47 ms, against "
                  "0.54–0.85 ms in the other five runs", "(τ 8.4 at its p99), so 6 of 11 collided launches beyond that "
                  "p99 read p = 0.11", "The GEMM read *degraded* by wall time in all three", "(p = 0.0027 at 800",
                  "5 of those 11 launches were slower than the p99 of the 789 launches of the same block that found "
                  "the GPU free (p = 0.00089), so it reads *degraded* too"):
        assert claim in flat, claim


def test_readme_bracketed_design_run_reads_as_it_says() -> None:
    """The article profile in the bracketed design (issue 30): its FFT's wall verdict, the same-moment control
    behind it, every shared iteration co-running, and what the design cost against the one-block run."""
    import json

    from kts_helpers.analyse.load import load_run
    from kts_helpers.analyse.summary import overlap_counts

    name = "h200-2026-12-02-article-blocks"
    rows = _shared_rows(name)
    fft = rows[("fft", "timeslice", "wall")]
    assert fft.reading == "degraded" and rows[("fft", "timeslice", "device")].reading != "degraded"
    assert (fft.contrast_slow, fft.contrast_n, fft.contrast_clear_n) == (10, 13, 787) and fft.drift_blocks == 3
    counts = overlap_counts(load_run(REPO / "data/reference" / name))
    assert (counts["timed"] == 400).all() and (counts["outside"] == 0).all() and len(counts) == 4

    def span(run: str) -> float:
        s = json.loads((REPO / "data/reference" / run / "manifest.json").read_text())["scenarios"]
        return (max(v["ended_ns"] for v in s.values()) - min(v["started_ns"] for v in s.values())) / 1e9

    assert (round(span(name)), round(span("h200-2026-12-02-article-800"))) == (372, 355)
    flat = " ".join(README.split())
    for claim in ("10 of its 13 launches that found the GEMM running were slower than the p99 of the 787 launches",
                  "The run took 372 s", "against 355 s for the one-block run", "costs about 18 s (5 %)"):
        assert claim in flat, claim


def test_readme_drift_sentences_are_the_committed_measurement() -> None:
    """The paragraph before the drift grid says what its JSON holds (issue 30's done-when numbers)."""
    import json

    rows = json.loads((REPO / "bench/reference/cpu-2026-12-03-issue30-drift.json").read_text())["rows"]
    share = lambda r, k: r[k] / r["reps"]  # noqa: E731
    fa = [r for r in rows if r["measures"] == "false alarm"]
    assert {r["n"] for r in fa} == {800, 2000} and {r["drift_sd"] for r in fa} == {0.0, 0.005, 0.01, 0.02}
    assert all(r["reps"] == 400 and r["degraded"] == r["faster"] == 0 for r in fa)
    assert (round(max(share(r, "small_slower") for r in fa), 3), round(max(share(r, "small_faster") for r in fa), 3)) \
        == (0.018, 0.018)
    reports = [r for r in rows if r["measures"].startswith("report")]
    assert len(reports) == 4 and all(r["degraded"] == r["faster"] == 0 for r in reports)
    assert max(max(share(r, "small_slower"), share(r, "small_faster")) for r in reports) == 0.015
    power = {(r["shared"], r["drift_sd"]): r for r in rows if r["measures"].startswith("power")}
    small, small_d = power[("random collisions 2 %", 0.0)], power[("random collisions 2 %", 0.02)]
    assert small["degraded"] + small["small_slower"] == small["reps"] and round(share(small, "degraded"), 2) == 0.67
    assert (round((small_d["degraded"] + small_d["small_slower"]) / small_d["reps"], 2),
            round(share(small_d, "degraded"), 2)) == (0.99, 0.63)
    article = power[("random collisions 1.7 %", 0.0)]
    assert article["degraded"] + article["small_slower"] == article["reps"] and round(share(article, "degraded"), 2) \
        == 0.94
    assert round(share(power[("random collisions 1.7 %", 0.02)], "degraded"), 2) == 0.92
    assert share(power[("lognormal φ 0 ×1.15", 0.0)], "degraded") == 1.0
    assert round(share(power[("lognormal φ 0 ×1.15", 0.02)], "degraded"), 2) == 0.90
    assert power[("lognormal φ 0 ×1.05", 0.0)]["degraded"] == 0
    assert round(share(power[("lognormal φ 0 ×1.05", 0.02)], "degraded"), 3) == 0.015
    assert all(power[("lognormal φ 0 ×1.3", sd)]["no_change"] == 0 for sd in (0.0, 0.02))
    clean = {r["n"]: round(share(r, "no_change"), 2) for r in rows if r["measures"].startswith("no change")}
    assert clean == {800: 0.98, 2000: 0.98}
    old = next(r for r in rows if r["measures"] == "false alarm (old design)")
    assert old["degraded"] == old["faster"] == old["no_change"] == 0 and (old["inconclusive"], old["small_slower"]) == (398, 2)
    flat = " ".join(README.split())
    for claim in ("No cell read *degraded* or *faster when shared* in any of its 400 runs",
                  "at most 1.8 % (*small slowdown*) and 1.8 % (*small speed-up*)",
                  "at most 1.5 % of them a small effect", "read a slowdown in every run (0.67 *degraded*",
                  "0.99 and 0.63 with sd 2 % drift", "in every run (0.94 *degraded*", "0.92 with drift",
                  "*degraded* in every run without drift and 0.90 with sd 2 % drift",
                  "in 1.5 % of runs with sd 2 % drift", "0.98 of runs at n = 800 and at 2000",
                  "read 398 of its 400 runs inconclusive (2 a small slowdown)"):
        assert claim in flat, claim


def test_readme_design_cost_on_cpu_is_the_committed_measurement() -> None:
    import json

    runs = json.loads((REPO / "bench/reference/cpu-2026-12-02-issue30-design-cost.json").read_text())["runs"]
    assert (runs["blocks=2"]["scenarios"], runs["blocks=0"]["scenarios"]) == (8, 3)
    said = (round(runs["blocks=2"]["seconds_calibration_to_end"]), round(runs["blocks=0"]["seconds_calibration_to_end"]))
    assert said == (135, 105)
    assert "the cpu-quick run took 135 s from calibration to its last block against 105 s one block a side" in \
        " ".join(README.split())


def _reference_runs() -> list[str]:
    return list(dict.fromkeys(re.findall(r"<!-- reference-table:(\S+):start -->", README)))


def test_each_verdict_line_is_its_deciding_test_and_never_contradicts_its_word() -> None:
    """Over every committed run with a table in the docs: a decided verdict's line opens with its deciding test's
    number in that test's unit, the number that sized the word agrees with the word (at least 1 + margin for
    "degraded", below it for "small slowdown", and the mirror images), and the line is at most 25 words."""
    from kts_helpers.analyse import verdict as V
    from kts_helpers.present import verdictline
    from kts_helpers.present.reference import analysed

    unit = {"level": "median ×", "DF": "DF ", "collided": "collided ", "collided median": "collided median ",
            "tail": "tail ", "block tail": "tail shape ×"}
    bad, seen = [], set()
    for name in _reference_runs():
        _, table = analysed(REPO / "data" / "reference" / name)
        if table is None:
            continue
        for v in table["verdict"].dropna():
            line = verdictline.decided_by(v)
            if len(line.split()) > 25:
                bad.append(f"{name}: {len(line.split())} words: {line}")
            slower, faster = v.reading in V.slower_readings(), v.reading in V.faster_readings()
            if not (slower or faster):
                continue
            test = v.slower_by if slower else v.faster_by
            seen.add(test)
            sized = re.search(r"sized by (?:DF |the median ×)([\d.]+)$", line)
            number = float(sized.group(1)) if sized else float(re.match(r"\D*?([\d.]+)", line).group(1))
            big = number >= 1.1 if slower else number <= 0.9
            if not line.startswith(unit[test]) or big != (v.reading in (V.DEGRADED, V.FASTER)):
                bad.append(f"{name}: {v.reading} by {test}: {line}")
    assert bad == []
    assert seen >= {"level", "collided", "tail"}  # the forms the committed runs decide by


def test_a_verdict_in_the_readme_table_reads_in_at_most_25_words_with_its_why_one_click_away() -> None:
    readme = (REPO / "README.md").read_text()
    block = re.search(r"<!-- headline:start -->(.*?)<!-- headline:end -->", readme, re.S).group(1)
    header, *rows = [r for r in block.splitlines() if r.startswith("| ")]
    cols = [c.strip() for c in header.strip("|").split("|")]
    cells = [dict(zip(cols, (c.strip() for c in r.strip("|").split("|")), strict=True)) for r in rows]
    assert cells and all(len(f"{c['verdict']} {c['decided by']}".split()) <= 25 for c in cells)
    assert '<details markdown="1"><summary>Why' in block and block.count("\n- **") == len(cells) // 2
