"""Everything a user reads cites papers by authors and year, or by the tags of
``help(bnpcore)`` ([HYB], [CVHDP], [TF], [NRM], [SM]): never by the numbers of
the development notes ("paper 004", "(004)", "[TF] 000", "paper 3") nor by files
that are not shipped (../shared/, ALGORITHMS.md)."""
import re
from pathlib import Path

import pytest

import bnpcore

ROOT = Path(__file__).resolve().parents[2]

# A bare 000-009 (not part of a larger number such as 34,000 or 0.004, nor of a
# name such as repro_004.py), "paper(s) N", and the unshipped design files.
FORBIDDEN = re.compile(r"(?<![\w,.\-/])00[0-9](?![\w%]|[.,]\d)|\bpapers? \d{1,3}\b|\.\./shared\b"
                       r"|\bshared/(?:papers|STYLE|DESIGN|ALGORITHMS)|\b(?:ALGORITHMS|STYLE|DESIGN)\.md\b",
                       re.IGNORECASE)


def user_facing_files():
    files = [ROOT / "README.md"]
    for folder, suffixes in (("bnpcore", (".py",)), ("pyx", (".pyx", ".pxd", ".h")), ("docs", (".md",)),
                             ("examples", (".py", ".md"))):
        files += sorted(p for p in (ROOT / folder).rglob("*") if p.suffix in suffixes)
    files += sorted((ROOT / "benchmarks").glob("*.py"))
    return [p for p in files if p.is_file()]


def offending_lines(text):
    return [(i, line.strip()) for i, line in enumerate(text.splitlines(), 1) if FORBIDDEN.search(line)]


@pytest.mark.parametrize("text, bad", [
    ("as in paper 004 (Welling et al.)", True), ("the baseline of 000", True), ("[TF] 000 §3", True),
    ("Bryant & Sudderth 2012 (003)", True), ("see paper 3", True), ("../shared/papers/004.txt", True),
    ("ALGORITHMS.md 8.5", True),
    ("[TF] Wang & Blei 2012, §3", False), ("34,000 tokens", False), ("0.004 s", False),
    ("benchmarks/repro_004.py", False), ("1e-004", False), ("2008 [HYB] eq 30", False), ("3,000,000", False),
])
def test_the_pattern(text, bad):
    assert bool(offending_lines(text)) == bad


def test_sources_docs_and_readme_cite_by_authors_and_tags():
    files = user_facing_files()
    assert len(files) > 30 and ROOT / "bnpcore" / "cli.py" in files and ROOT / "docs" / "text.md" in files
    found = [f"{path.relative_to(ROOT)}:{i}: {line}" for path in files
             for i, line in offending_lines(path.read_text(encoding="utf-8", errors="replace"))]
    assert not found, "cite papers by authors and year or by the tags of help(bnpcore):\n" + "\n".join(found)


def test_the_tags_are_documented():
    doc = bnpcore.__doc__
    for tag in ("[HYB]", "[CVHDP]", "[TF]", "[NRM]", "[SM]"):
        assert re.search(re.escape(tag) + r" [A-Z]\.", doc), tag       # tag, then the authors


def test_command_line_help_and_output_have_no_paper_numbers(capsys):
    from bnpcore import cli
    for argv in ([], ["fit", "--help"], ["evaluate", "--help"], ["infer", "--help"], ["list"]):
        cli.main(argv)
        out, err = capsys.readouterr()
        assert not offending_lines(out + err), argv
