"""The README documents the commands and quotes the reference run's numbers as the data gives them."""

from __future__ import annotations

import re
from pathlib import Path

from kts_helpers.present.reference import reference_markdown

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()


def test_readme_reference_tables_match_the_committed_runs() -> None:
    blocks = re.findall(r"<!-- reference-table:(\S+):start -->\n(.*?)\n<!-- reference-table:\1:end -->", README, re.S)
    assert {name for name, _ in blocks} == {f"h200-2026-11-30-{n}" for n in (
        "article", "article-rerun", "saturating", "repeats", "repeats-mps", "mps-limited", "mps-limited-800",
        "four-tenants", "matrix", "openloop", "probe")} | {"h200-2026-12-02-article"}
    for name, block in blocks:
        assert block == reference_markdown(REPO / "data" / "reference" / name), name


def test_readme_documents_both_commands_and_the_line_format() -> None:
    for needle in ("make report", "make test", "KTS_APP,v2,<workload>,<tenant>,<iteration>,<phase>",
                   "KTS_APP,v1,<WORKLOAD>,<i>,<epoch_ns_start>,<epoch_ns_end>,<device_ms>,<phase>",
                   "linear interpolation", "notebooks/", "kts_helpers/", "manifests/"):
        assert needle in README, needle
    assert "make test" in (REPO / ".ci/run").read_text()


def _verdicts(name: str) -> dict[tuple[str, str, str], str]:
    """(tenant, sharing, clock) -> reading of a committed reference, by the report's own computation."""
    from kts_helpers.analyse.intervals import add_all_intervals
    from kts_helpers.analyse.load import load_run
    from kts_helpers.analyse.summary import summarize_run

    data = load_run(REPO / "data" / "reference" / name)
    table = add_all_intervals(summarize_run(data), data.iterations, n_resamples=200)
    shared = table[table["kind"] == "shared"]
    return {(r.tenant, r.sharing, r.metric): r.reading for r in shared.itertuples()}


def test_readme_prose_says_what_the_verdicts_say() -> None:
    """Each result the README's prose names between the generated tables, checked against the data."""
    from kts_helpers.analyse import collisions
    from kts_helpers.analyse.load import load_run

    article = _verdicts("h200-2026-11-30-article")
    assert article[("fft", "timeslice", "wall")] == "degraded"  # "shows by wall clock ..."
    assert article[("fft", "timeslice", "device")] != "degraded"  # "... and hides from silicon time"
    fft = next(f for f in collisions.run_collisions(load_run(REPO / "data/reference/h200-2026-11-30-article"))
               if f.tenant == "fft")
    assert (fft.share.collided, fft.share.n) == (14, 800) and fft.periodicity.lag == 35
    assert "14 of the FFT's 800 launches, 1.75 %, find the GEMM running, and they recur every 35 launches" in \
        " ".join(README.split())
    rerun = _verdicts("h200-2026-11-30-article-rerun")
    assert rerun[("fft", "timeslice", "wall")] == "inconclusive"  # "the rule does not call that decided"
    from kts_helpers.analyse.rules import series_groups
    from kts_helpers.analyse.verdict import exceedance

    runs = {k["kind"]: r for k, r in series_groups(load_run(REPO / "data/reference/h200-2026-11-30-article-rerun")
                                                    .iterations, "wall") if k["tenant"] == "fft"}
    ex = exceedance(runs["shared"], runs["baseline"])
    assert (ex.shared.count, ex.shared.n, ex.alone.count) == (23, 800, 8)
    assert "the rerun's FFT had 23 of 800 shared iterations beyond the alone p99 against 8" in " ".join(README.split())
    third_dir = REPO / "data/reference/h200-2026-12-02-article"
    third = _verdicts("h200-2026-12-02-article")
    assert third[("fft", "timeslice", "wall")] == "inconclusive"  # "the rule does not call it"
    assert third[("gemm", "timeslice", "wall")] == "faster when shared"  # "The GEMM reads faster when shared"
    third_data = load_run(third_dir)
    fft = next(f for f in collisions.run_collisions(third_data) if f.tenant == "fft")
    assert (fft.share.collided, fft.share.n, fft.periodicity.lag) == (23, 1200, 35)
    assert (round(fft.wait.median_with.estimate, 2), round(fft.wait.median_without.estimate, 2)) == (0.68, 0.30)
    runs = {(k["kind"], k["tenant"]): r for k, r in series_groups(third_data.iterations, "wall")}
    ex = exceedance(runs[("shared", "fft")], runs[("baseline", "fft")])
    assert (ex.shared.count, ex.shared.n, ex.alone.count) == (17, 1200, 12)
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
                  "one reads *degraded* and two *inconclusive* by wall time"):
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
                                          "cpu-2026-11-30-issue19-decisions-300", "cpu-2026-12-02-issue19-sequential"}
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
