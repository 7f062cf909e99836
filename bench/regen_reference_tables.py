"""Rewrite every generated reference table in the README and the docs from the committed runs.

Run: ``python -m bench.regen_reference_tables [NAME ...]`` (default: every ``<!-- reference-table:NAME:start -->``
block). Each block is ``present.reference.reference_markdown(data/reference/NAME)``, the same call
``tests/test_readme.py`` checks it against; run this after a change to the verdict or the tables' words.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from kts_helpers.present.reference import reference_markdown

REPO = Path(__file__).resolve().parents[1]
BLOCK = re.compile(r"(<!-- reference-table:(\S+):start -->\n)(.*?)(\n<!-- reference-table:\2:end -->)", re.S)


def main(argv: list[str] | None = None) -> int:
    only = set(argv if argv is not None else sys.argv[1:])
    cache: dict[str, str] = {}
    for page in [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]:
        text = page.read_text()

        def table(m: re.Match) -> str:
            name = m.group(2)
            if only and name not in only:
                return m.group(0)
            if name not in cache:
                cache[name] = reference_markdown(REPO / "data" / "reference" / name)
                print(f"{name}: regenerated", flush=True)
            return m.group(1) + cache[name] + m.group(4)

        new = BLOCK.sub(table, text)
        if new != text:
            page.write_text(new)
            print(f"{page.relative_to(REPO)}: rewritten")
    return 0


if __name__ == "__main__":
    sys.exit(main())
