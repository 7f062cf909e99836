"""Rewrite every block of the README and the docs generated from the committed runs: the one command to run after a
change to the verdict, to the tables' words, or to ``HEADLINE_RUN``.

Run: ``python -m bench.regen_reference_tables [KIND-or-NAME ...]`` (default: every block ``present.docblocks``
writes -- each ``reference-table:RUN``, the README's ``headline``, the verdict page's ``verdict-example:WORD`` and
``holm-example``). Each block is ``present.docblocks.render(kind, arg)``, the same call ``tests/test_readme.py``
checks it against. The pages generated from the code rather than the runs (parameters, command line, modules) are
``make docs``' (``python -m kts_helpers.docref --write``).
"""

from __future__ import annotations

import sys
from pathlib import Path

from kts_helpers.present import docblocks

REPO = Path(__file__).resolve().parents[1]


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted((REPO / "docs").rglob("*.md"))]


def main(argv: list[str] | None = None) -> int:
    only = set(argv if argv is not None else sys.argv[1:])
    cache: dict = {}
    for page in pages():
        text = page.read_text()
        new = docblocks.rewrite(text, only or None, cache)
        if new != text:
            page.write_text(new)
            print(f"{page.relative_to(REPO)}: rewritten", flush=True)
    print(f"{len(cache)} blocks regenerated", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
