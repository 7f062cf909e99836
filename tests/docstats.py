"""Words, headings and sentences of a docs page, as the page-shape tests count them (tests/test_docs.py).

Run directly for the table issue 44's closing note asks for: ``python tests/docstats.py [<git rev>]`` prints every
page's words and headings now (and at <rev>, when given).

What counts: a page's *prose* words are its words outside fenced code and outside table rows (a table is looked up,
not read through; the generated tables are most of the results pages' words). Headings are Markdown ATX headings
below the page title (``##`` and deeper). Sentences are split at ., ! or ? (or one closed by a bracket, backtick, asterisk or
quote) followed by a space and a capital, a backtick or an opening bracket; list items, table rows, headings, code and generated blocks are not sentences of the page's own prose.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"^```.*?^```[^\n]*$", re.M | re.S)
GENERATED = re.compile(r"<!-- ([\w-]+)(?::\S+)?:start -->.*?<!-- \1(?::\S+)?:end -->", re.S)
HEADING = re.compile(r"^#{2,6} \S", re.M)


FRONT_MATTER = re.compile(r"\A---\n.*?\n---\n", re.S)


def without_code(text: str) -> str:
    """The page less its fenced code and its front matter (mkdocs' page settings)."""
    return FENCE.sub("", FRONT_MATTER.sub("", text))


def words(text: str) -> int:
    """Every word of the page, tables and code included."""
    return len(text.split())


def prose_words(text: str) -> int:
    body = without_code(text)
    return sum(len(ln.split()) for ln in body.splitlines() if not ln.lstrip().startswith("|"))


def headed_words(text: str) -> int:
    """The words a page's headings must cover: every word, a generated block counted as 600 at most (one table under
    the heading before it)."""
    return words(GENERATED.sub("", text)) + sum(min(600, words(m.group(0))) for m in GENERATED.finditer(text))


def headings(text: str) -> int:
    return len(HEADING.findall(without_code(text)))


def sentences(text: str) -> list[str]:
    """The page's own prose sentences (see the module docstring for what is left out)."""
    body = GENERATED.sub("", without_code(text))
    paras = []
    for para in re.split(r"\n\s*\n", body):
        lines = [ln for ln in para.splitlines() if ln.strip()]
        if not lines or lines[0].lstrip().startswith(("#", "|", "<!--", ">")):
            continue
        paras.append(" ".join(ln.strip() for ln in lines))
    out = []
    for para in paras:
        # a list's items are separate sentences' homes: split the paragraph at each item
        for item in re.split(r"(?:^|\s)(?:[-*]|\d+\.) (?=\S)", para):
            out += [s.strip() for s in re.split(r"(?:(?<=[.!?])|(?<=[.!?][)`*\"]))\s+(?=[A-Z`*(\[])", item) if s.strip()]
    return out


def sentence_words(sentence: str) -> int:
    return len(sentence.split())


def pages(rev: str | None = None) -> dict[str, str]:
    if rev is None:
        return {str(p.relative_to(REPO)): p.read_text() for p in sorted((REPO / "docs").rglob("*.md"))} | {
            "README.md": (REPO / "README.md").read_text()}
    names = subprocess.run(["git", "ls-tree", "-r", "--name-only", rev, "docs/", "README.md"], cwd=REPO,
                           capture_output=True, text=True, check=True).stdout.split()
    return {n: subprocess.run(["git", "show", f"{rev}:{n}"], cwd=REPO, capture_output=True, text=True,
                              check=True).stdout for n in names if n.endswith(".md")}


def table(rev: str | None = None) -> str:
    now = pages()
    then = pages(rev) if rev else {}
    rows = ["| page | words then → now | prose words then → now | headings then → now | longest sentence now |",
            "|---|---|---|---|---|"]
    for name in sorted(set(now) | set(then)):
        a, b = then.get(name), now.get(name)

        def cell(f, a=a, b=b):
            return f"{f(a) if a is not None else '—'} → {f(b) if b is not None else '—'}"

        longest = max((sentence_words(s) for s in sentences(b)), default=0) if b is not None else "—"
        rows.append(f"| {name} | {cell(words)} | {cell(prose_words)} | {cell(headings)} | {longest} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(table(sys.argv[1] if len(sys.argv) > 1 else None))
