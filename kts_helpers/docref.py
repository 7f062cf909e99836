"""The documentation's generated references: run parameters, the command line, and the module list.

Why generated: a hand-written reference goes stale the day a parameter or a flag is added (ten of the 38 run
parameters were in no page). Each block here is built from the code a reader's command would run:

* the run parameters from ``run.spec.ExperimentParams`` (name, type, default), each profile's resolved value
  from ``run.spec.resolve``, and the one-line descriptions of ``run.paramdocs``;
* the command line from ``cli.build_parser()`` (argparse: every subcommand, flag, default and help text);
* the Layout page's module list from the package docstring, which a test already keeps complete.

The blocks sit between ``<!-- name:start -->`` and ``<!-- name:end -->`` markers in the docs; ``make docs`` writes
them (``python -m kts_helpers.docref --write``) and ``tests/test_docs.py`` fails when a committed page differs. A
top-level module because it reads ``cli`` (the present wing may not import it).
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import MISSING, fields
from pathlib import Path

import kts_helpers
from kts_helpers.cli import build_parser
from kts_helpers.run.paramdocs import ANALYSIS, PARAMS
from kts_helpers.run.profiles import PROFILES
from kts_helpers.run.spec import ExperimentParams, resolve

DOCS = Path(__file__).resolve().parent.parent / "docs"
# page -> the blocks it holds, each with its generator
PAGES = {"reference/parameters.md": ("parameters",), "reference/cli.md": ("cli",), "layout.md": ("modules",)}
PROFILE_DEVICE = {"article": "cuda", "saturating": "cuda", "probe": "cuda", "cpu-quick": "cpu", "tiny": "cpu"}


def _code(value: object) -> str:
    """A value as a table cell shows it: in code, "—" for none, "empty" for an empty string (an empty code span
    would open one that runs on to the next backtick and break the row)."""
    if value is None:
        return "—"
    if value == "":
        return "empty"
    if isinstance(value, bool):
        value = str(value).lower()  # as --set takes it
    if isinstance(value, (list, tuple)):
        value = ",".join(map(str, value))
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`"


def _profile_values() -> dict[str, dict[str, object]]:
    """profile -> parameter -> its value once resolved (what a run of that profile uses)."""
    out = {}
    for name in PROFILES:
        params = ExperimentParams(profile=name)
        spec = resolve(params, PROFILE_DEVICE.get(name, "cuda"))
        values = {f.name: getattr(params, f.name) for f in fields(ExperimentParams)}
        values.update({k: v for k, v in spec.resolved.items() if k in values})
        # the resolved ``design`` is the design's description; the parameter's value is its kind (what --set takes)
        values["design"] = spec.resolved.get("design_kind") or "fresh"
        values["profile"] = name
        out[name] = values
    return out


def _type(annotation: object) -> str:
    """``int | Literal['auto'] | None`` -> ``int``, ``'auto'`` or none (a table cell cannot hold a bare ``|``)."""
    parts = [p.strip().replace("Literal['auto']", "'auto'") for p in str(annotation).split(" | ")]
    parts = ["none" if p == "None" else f"`{p}`" for p in parts]
    return parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " or " + parts[-1]


def undocumented_parameters() -> list[str]:
    """Run parameters without a description in ``run.paramdocs`` (a test wants none)."""
    return [f.name for f in fields(ExperimentParams) if not PARAMS.get(f.name, "").strip()]


def parameters_markdown() -> str:
    """One table of every parameter's value per profile, then one headed section per parameter (search lands on
    it: ``### fft_size``)."""
    profiles = _profile_values()
    names = list(PROFILES)
    lines = ["| parameter | type | " + " | ".join(names) + " |", "|---|---|" + "---|" * len(names)]
    for f in fields(ExperimentParams):
        lines.append(f"| [`{f.name}`](#{f.name}) | {_type(f.type)} | "
                     + " | ".join(_code(profiles[p][f.name]) for p in names) + " |")
    lines += ["", "## Every parameter", ""]
    for f in fields(ExperimentParams):
        default = f.default if f.default is not MISSING else None
        said = "the profile's value" if default is None else _code(default)
        by_profile = sorted({_code(profiles[p][f.name]) for p in names})
        values = ("the same in every profile" if len(by_profile) == 1 else
                  ", ".join(f"{p} {_code(profiles[p][f.name])}" for p in names))
        lines += [f"### {f.name}", "", PARAMS.get(f.name, "(undocumented)"), "",
                  f"- type: {_type(f.type)}", f"- default: {said}", f"- in the profiles: {values}",
                  f"- set it: `make report SET=\"{f.name}=…\"`, `kts run --set {f.name}=…`", ""]
    lines += ["## Analysis options", "",
              "Given the same way (`SET=`, `--set`), these change how a run is read, never the run itself.", ""]
    for name, text in ANALYSIS.items():
        lines += [f"### {name}", "", text, ""]
    return "\n".join(lines).rstrip("\n")


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, tuple[str, argparse.ArgumentParser]]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {c.dest: c.help or "" for c in sub._choices_actions}
    return {name: (helps.get(name, ""), p) for name, p in sub.choices.items()}


def cli_flags() -> dict[str, list[str]]:
    """subcommand -> its flags and positionals (what the CLI reference must name)."""
    out = {}
    for name, (_, p) in _subcommands(build_parser()).items():
        out[name] = [a.option_strings[-1] if a.option_strings else a.dest for a in p._actions
                     if not isinstance(a, argparse._HelpAction)]
    return out


def cli_markdown() -> str:
    """One headed section per subcommand, a table of its flags (argparse's own help text)."""
    lines = []
    for name, (text, p) in _subcommands(build_parser()).items():
        lines += [f"## kts {name}", "", f"{text[0].upper()}{text[1:]}." if text else "", "",
                  "| flag | value | default | what it does |", "|---|---|---|---|"]
        for a in p._actions:
            if isinstance(a, argparse._HelpAction):
                continue
            flag = ", ".join(f"`{s}`" for s in a.option_strings) or f"`{a.dest}` (positional)"
            if a.nargs == 0:
                value = "—"
            elif a.choices:
                value = " \\| ".join(f"`{c}`" for c in a.choices)
            else:
                value = f"`{a.metavar or a.dest.upper()}`" + (" …" if a.nargs in ("+", "*") else "")
            if isinstance(a, argparse._AppendAction):
                value += " (repeatable)"
            default = "—" if a.default in (None, False, argparse.SUPPRESS) else _code(a.default)
            helptext = (a.help or "").replace("%%", "%").replace("|", "\\|").replace("\n", " ")
            lines.append(f"| {flag} | {value} | {default} | {helptext} |")
        lines.append("")
    return "\n".join(lines).rstrip("\n")


def modules_markdown() -> str:
    """The package docstring's list of modules, from its first wing to its last line."""
    doc = kts_helpers.__doc__ or ""
    return doc[doc.index("**run**"):].strip()


GENERATORS = {"parameters": parameters_markdown, "cli": cli_markdown, "modules": modules_markdown}


def block(text: str, name: str) -> str:
    m = re.search(rf"<!-- {name}:start -->\n(.*?)<!-- {name}:end -->", text, re.S)
    if not m:
        raise ValueError(f"no <!-- {name}:start --> ... <!-- {name}:end --> block")
    return m.group(1).removesuffix("\n")


def rewrite(text: str, name: str, content: str) -> str:
    block(text, name)  # fails without markers
    return re.sub(rf"(<!-- {name}:start -->\n).*?(<!-- {name}:end -->)",
                  lambda m: m.group(1) + content + "\n" + m.group(2), text, count=1, flags=re.S)


def stale(docs: Path = DOCS) -> list[str]:
    """The pages whose generated blocks differ from what the code generates now."""
    return [f"{page}: {name}" for page, names in PAGES.items() for name in names
            if block((docs / page).read_text(), name) != GENERATORS[name]()]


def write(docs: Path = DOCS) -> list[str]:
    changed = []
    for page, names in PAGES.items():
        path = docs / page
        text = old = path.read_text()
        for name in names:
            text = rewrite(text, name, GENERATORS[name]())
        if text != old:
            path.write_text(text)
            changed.append(page)
    return changed


if __name__ == "__main__":
    if "--write" in sys.argv[1:]:
        for page in write():
            print(f"kts: regenerated docs/{page}")
    else:
        bad = stale()
        print("\n".join(bad) or "kts: every generated reference is current")
        sys.exit(1 if bad else 0)
