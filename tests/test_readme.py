"""The README documents the commands and quotes the reference run's numbers as the data gives them."""

from __future__ import annotations

import re
from pathlib import Path

from kts_helpers.present.reference import reference_markdown

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()


def test_readme_reference_tables_match_the_committed_runs() -> None:
    blocks = re.findall(r"<!-- reference-table:(\S+):start -->\n(.*?)\n<!-- reference-table:\1:end -->", README, re.S)
    assert {name for name, _ in blocks} == {"h200-2026-11-30-article", "h200-2026-11-30-saturating",
                                          "h200-2026-11-30-mps-limited", "h200-2026-11-30-probe"}
    for name, block in blocks:
        assert block == reference_markdown(REPO / "data" / "reference" / name), name


def test_readme_documents_both_commands_and_the_line_format() -> None:
    for needle in ("make report", "make test", "KTS_APP,v2,<workload>,<tenant>,<iteration>,<phase>",
                   "KTS_APP,v1,<WORKLOAD>,<i>,<epoch_ns_start>,<epoch_ns_end>,<device_ms>,<phase>",
                   "linear interpolation", "notebooks/", "kts_helpers/", "manifests/"):
        assert needle in README, needle
    assert "make test" in (REPO / ".ci/run").read_text()
