"""The README documents the commands and quotes the reference run's numbers as the data gives them."""

from __future__ import annotations

import re
from pathlib import Path

from kts_helpers.report import reference_markdown

REPO = Path(__file__).resolve().parent.parent
README = (REPO / "README.md").read_text()


def test_readme_reference_table_matches_the_committed_run() -> None:
    block = re.search(r"<!-- reference-table:start -->\n(.*)\n<!-- reference-table:end -->", README, re.S)
    assert block, "README lost its reference-table markers"
    assert block.group(1) == reference_markdown(REPO / "data/reference/h200-2026-11-29")


def test_readme_documents_both_commands_and_the_line_format() -> None:
    for needle in ("make report", "make test", "KTS_APP,v2,<workload>,<tenant>,<iteration>,<phase>",
                   "KTS_APP,v1,<WORKLOAD>,<i>,<epoch_ns_start>,<epoch_ns_end>,<device_ms>,<phase>",
                   "linear interpolation", "notebooks/", "kts_helpers/", "manifests/"):
        assert needle in README, needle
    assert "make test" in (REPO / ".ci/run").read_text()
