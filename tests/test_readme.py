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
        "four-tenants", "matrix", "openloop", "probe")}
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
                                          "cpu-2026-11-30-issue19-decisions-300"}
    for name, block in blocks:
        assert block == (REPO / "bench" / "reference" / f"{name}.md").read_text().rstrip("\n"), name
