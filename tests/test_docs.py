"""The README is the front page and the manual lives in docs/: every relative link and anchor of
README.md and docs/*.md resolves, every section the README had before the split is a heading of some
document, the README stays a front page (short, the two commands as CI runs them), and
docs/cli.md is what the commands' parsers say (regenerated here)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
REGENERATE = "python -m dashboard.cli.reference --write"

# Every heading of the README before the manual moved into docs/ (1,555 lines): each is still a
# heading in README.md or a docs/*.md file, so no section was lost on the way.
HEADINGS_BEFORE_SPLIT = (
    "QNN Backend Lab", "The two commands", "Reaching the dashboard", "Installing the library",
    "Giving it a model", "Pages", "One set of settings per model, and links", "Graph viewers",
    "The viewers through an SSH tunnel", "Command line", "classify", "partition", "accuracy and quantize",
    "report", "profile", "timeline", "device", "hash-password", "sweep", "bench", "Where the time goes",
    "Accuracy and quantization", "Sweeps", "The spec", "Executors", "The results folder",
    "Diff and the CI gate", "The Sweep page", "Throughput", "Options that decide what QNN claims",
    "Using `auto` and hot migration from Python", "From a notebook", "Attaching a Snapdragon device over SSH",
    "Running on a Snapdragon", "Linux boards", "Windows on Snapdragon", "Android",
    "The emulated board in the tests", "How the classifiers work", "EP rules (exact re-implementation)",
    "Refined", "Layout",
)

LINK = re.compile(r"!?\[(?:[^\]\\]|\\.)*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


def prose(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks, with inline code spans blanked."""
    out, fence = [], None
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.lstrip()
        if fence is None and (stripped.startswith("```") or stripped.startswith("~~~")):
            fence = stripped[:3]
            continue
        if fence is not None:
            if stripped.startswith(fence):
                fence = None
            continue
        out.append((number, re.sub(r"(`+)(.+?)\1", lambda m: " " * len(m.group(0)), line)))
    return out


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: links reduced to their text, lower case, everything but
    letters, digits, spaces, hyphens and underscores dropped, spaces made hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return "".join(c for c in text if c.isalnum() or c in " -_").replace(" ", "-")


def headings(path: Path) -> list[str]:
    """The heading texts of ``path`` (code blocks' ``#`` comments are not headings)."""
    text = path.read_text(encoding="utf-8")
    lines = dict(prose(text))
    raw = text.splitlines()
    return [m.group(2) for number in sorted(lines) if (m := HEADING.match(raw[number - 1]))]


def anchors(path: Path) -> set[str]:
    """Every anchor GitHub gives ``path``'s headings (a repeated slug gets -1, -2, ...)."""
    seen: dict[str, int] = {}
    out = set()
    for heading in headings(path):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def relative_links(path: Path) -> list[tuple[int, str]]:
    links = []
    for number, line in prose(path.read_text(encoding="utf-8")):
        for match in LINK.finditer(line):
            target = match.group(1)
            if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):  # https:, mailto:
                continue
            links.append((number, target))
    return links


def test_the_slug_is_githubs():
    assert slug("Using `auto` and hot migration from Python") == "using-auto-and-hot-migration-from-python"
    assert slug("EP rules (exact re-implementation)") == "ep-rules-exact-re-implementation"
    assert slug("One set of settings per model, and links") == "one-set-of-settings-per-model-and-links"
    assert slug("hash-password") == "hash-password"


def test_every_relative_link_and_anchor_resolves():
    broken = []
    for doc in documents():
        for number, target in relative_links(doc):
            where = f"{doc.relative_to(ROOT)}:{number}: {target}"
            path, _, anchor = target.partition("#")
            file = (doc.parent / unquote(path)).resolve() if path else doc
            if not file.exists():
                broken.append(f"{where} (no such file)")
                continue
            if ROOT not in file.parents and file != ROOT:
                broken.append(f"{where} (outside the repository)")
            if anchor:
                if file.suffix != ".md":
                    broken.append(f"{where} (an anchor into a file that is not Markdown)")
                elif anchor not in anchors(file):
                    broken.append(f"{where} (no heading with that anchor in {file.relative_to(ROOT)})")
    assert not broken, "broken links:\n" + "\n".join(broken)


def test_the_checker_finds_a_broken_link_and_anchor(tmp_path):
    doc = tmp_path / "a.md"
    doc.write_text("# Title\n\n[ok](#title) [bad](#nothing) [gone](missing.md)\n"
                   "```\n[in code](nowhere.md)\n```\n`[inline](nowhere.md)`\n", encoding="utf-8")
    assert [t for _, t in relative_links(doc)] == ["#title", "#nothing", "missing.md"]
    assert anchors(doc) == {"title"}


def test_every_document_is_linked_from_the_readme():
    linked = {(ROOT / unquote(t.partition("#")[0])).resolve() for _, t in relative_links(ROOT / "README.md")}
    unlinked = [p.name for p in sorted(DOCS.glob("*.md")) if p.resolve() not in linked]
    assert not unlinked, f"docs/ files the README does not link to: {unlinked}"


def test_every_section_the_readme_had_is_a_heading_somewhere():
    present = {h for doc in documents() for h in headings(doc)}
    lost = [h for h in HEADINGS_BEFORE_SPLIT if h not in present]
    assert not lost, f"sections of the README that no document has any more: {lost}"


def test_the_readme_is_a_front_page_with_the_two_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < 250
    block = readme[readme.index("## The two commands"):]
    block = block[block.index("```"):block.index("```", block.index("```") + 3)]
    assert [line.split("#")[0].strip() for line in block.splitlines()[1:]] == ["make run", "make test"]
    run_ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert run_ci.strip().splitlines()[-1] == "make test"  # CI runs the README's test command
    for png in sorted(DOCS.glob("*.png")):  # one screenshot per page
        assert f"](docs/{png.name})" in readme, f"the README does not show {png.name}"


def test_the_cli_reference_is_what_the_parsers_say():
    from dashboard.cli.reference import OUTPUT, render

    assert OUTPUT == DOCS / "cli.md"
    assert OUTPUT.read_text(encoding="utf-8") == render(), (
        f"docs/cli.md differs from the commands' argparse parsers; regenerate it: {REGENERATE}")


def test_the_cli_reference_depends_on_neither_terminal_nor_program_name(tmp_path):
    """Rendered in another process, from another folder, under another terminal width and program
    name: the same text."""
    env = {"COLUMNS": "37", "PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    script = "import sys; sys.argv[0] = 'elsewhere'; from dashboard.cli.reference import render; " \
             "sys.stdout.write(render())"
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                         check=True, timeout=120).stdout
    assert out == (DOCS / "cli.md").read_text(encoding="utf-8")


def test_the_reference_check_says_how_to_regenerate(tmp_path, monkeypatch, capsys):
    from dashboard.cli import reference

    stale = tmp_path / "cli.md"
    stale.write_text("# old\n", encoding="utf-8")
    monkeypatch.setattr(reference, "OUTPUT", stale)
    assert reference.main(["--check"]) == 1
    assert REGENERATE in capsys.readouterr().err
    assert reference.main(["--write"]) == 0 and reference.main(["--check"]) == 0


@pytest.mark.parametrize("command", ["classify", "partition", "timeline", "sweep", "device doctor"])
def test_the_reference_lists_every_flag_of_a_command(command):
    """Each flag the parser takes appears in its section of docs/cli.md."""
    from dashboard.cli.main import build_parser

    words = command.split()
    parser = build_parser(words[:1])
    for word in words:
        parser = next(a for a in parser._actions if hasattr(a, "choices") and isinstance(a.choices, dict)
                      and word in a.choices).choices[word]
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    level = "#" * (1 + len(words))
    section = text[text.index(f"\n{level} {command}\n"):]
    section = section[:section.index(f"\n{level} ", 1)] if f"\n{level} " in section[1:] else section
    flags = [f for action in parser._actions for f in action.option_strings if f not in ("-h", "--help")]
    assert flags and all(f"`{flag}" in section for flag in flags)


def test_the_readmes_examples_are_commands_the_parser_takes():
    """Each ``python -m dashboard`` line of the README's code blocks parses (nothing runs)."""
    import shlex

    from dashboard.cli.main import build_parser

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    examples = [line.split("  #")[0] for block in re.findall(r"```bash\n(.*?)```", readme, re.S)
                for line in block.splitlines() if line.startswith("python -m dashboard ")]
    assert len(examples) >= 10
    for example in examples:
        argv = shlex.split(example)[3:]
        build_parser(argv).parse_args(argv)
