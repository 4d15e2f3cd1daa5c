"""Comments and docstrings of the library say what is done and why; they are not
a lab notebook. Timings, held-out scores, machine loads, dates and development
history ("session 18", "round 2", "issue 17") belong in ``benchmarks/results/``
and the docs. A measured number may stay in the code only where it decides a
constant, and then a citation of its ``benchmarks/results/`` file stands on the
same or a neighbouring line.

The scan reads whole source files of ``bnpcore/``, ``pyx/`` and ``include/``
line by line; the patterns need a number next to a unit or a comparison, so
code such as ``fit_seconds`` or ``max_seconds`` does not match.
"""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("bnpcore", "pyx", "include")
SUFFIXES = {".py", ".pyx", ".pxd", ".h"}


# A number not inside a word or another number: 3, 0.19, 34,000, 2.5-2.6 (the
# digit comes first and the look-behind after it, which keeps the scan fast).
NUM = r"\d(?<![\w.:]\d)\d*(?:[.,]\d+)?(?:-\d+(?:\.\d+)?)?"

# Development history: wrong whatever is cited next to it.
HISTORY = re.compile(
    r"\bsessions? \d"                                  # session 18
    r"|\bround \d"                                     # round 2
    r"|\b20\d\d-\d\d-\d\d\b"                           # 2026-11-28
    r"|\bissues? #?\d"                                 # issue 17
    r"|\bload (?:average )?(?:of )?~?\d"               # at load ~3.5, load average 16
    r"|\bshared\b.{0,20}\bmachine\b|\b\d-core machine\b"
    r"|\btarget is (?:not )?met\b|\bone-off runs?\b|\ba minute earlier\b",
    re.IGNORECASE)

# Measurements: allowed only beside a citation of benchmarks/results/. The
# first group starts at a digit or a minus sign, the second at a word.
MEASUREMENT = re.compile(
    r"(?=[-\d])(?:" + NUM + r" ?(?:ms|µs|us|ns|s|sec|seconds|min|minutes|h)\b(?![-.]\w)"  # 0.19 s, 48 ms
    r"|(?<!/\()" + NUM + r"x\b(?!\w)"                                   # 2.3x, 3-6x (not 1/(2x))
    r"|\d ?(?:KiB|MiB|GiB|kB|MB|GB)\b.{0,20}\b(?:resident|RSS)\b"     # 171 MB resident
    r"|\d\.\d+ bytes per (?:token|document|pair)\b"                     # 11.3 bytes per token
    r"|" + NUM + r" ?(?:tokens|documents|docs|words|pairs)/s\b"         # 10,000 tokens/s
    r"|\d ?%? ?(?:faster|slower)\b"                                      # 20% slower
    r"|-?\d(?:\.\d+)?(?: ?\w+)? (?:against|versus|vs\.?) -?\d"           # -7.40 against -7.50
    r"|-\d+\.\d{2,}\b.{0,40}\b(?:per|held-out|per-word)\b)"              # -7.35 per held-out word
    r"|\b(?:peak|RSS|resident)\b.{0,40}\d ?(?:KiB|MiB|GiB|kB|MB|GB)\b"  # peak RSS went from 349 MB
    r"|\bheld-out\b.{0,30}-\d+\.\d{2,}"                                  # held-out (-7.40
    r"|(?<!et al\. )\b[Mm]easured\b(?! in\b)")                          # Measured on KOS (not "et al. measured")

CITATION = re.compile(r"benchmarks/results/[\w.-]+\.txt")


def source_files():
    files = []
    for folder in FOLDERS:
        files += sorted(p for p in (ROOT / folder).rglob("*") if p.suffix in SUFFIXES and p.is_file())
    return files


# Every pattern above needs one of these, so other lines are skipped at once.
CANDIDATE = re.compile(r"\d|easured|machine|one-off|minute earlier|target is")


def diary_lines(text):
    """``(line number, line)`` of every diary line of a source text."""
    lines = text.splitlines()
    found = []
    for i, line in enumerate(lines):
        if not CANDIDATE.search(line):
            continue
        if HISTORY.search(line) or (MEASUREMENT.search(line) and not any(
                CITATION.search(near) for near in lines[max(i - 1, 0):i + 2])):
            found.append((i + 1, line.strip()))
    return found


def scan():
    out = []
    for path in source_files():
        name = path.relative_to(ROOT).as_posix()
        out += [f"{name}:{i}: {line}" for i, line in diary_lines(path.read_text(encoding="utf-8", errors="replace"))]
    return out


@pytest.mark.parametrize("text, bad", [
    ("# shared 2-core machine at load ~3.5", True), ("# (session 18)", True), ("# round 2 added this", True),
    ("# one-off runs of 2026-11-28", True), ("# the 3x target is not met", True), ("# issue 17", True),
    ("# 6.06 s against 10.10 s", True), ("# a sweep takes 25-36 ms at 2 threads", True),
("# 2.3x from 20", True), ("#   ran 20% slower than 256 rows", True),
    ("    -7.35 per held-out word with", True), ("    (-7.40 against -7.50;", True),
    ("    measured on bars: 136 topics", True), ("    Measured as the slope of the peak RSS", True),
    ("# 0.19 s at local_sweeps=5 (benchmarks/results/bench_online_kos.txt)", False),
    ("MIN_BLOCK = 2 ** 16   # 0.17-0.20 s per draw:\n# benchmarks/results/bench_memory.txt", False),
    ("    fit_seconds = time.perf_counter() - start", False), ("        max_seconds : float, optional", False),
    ('    print(f"fitted in {seconds:.1f} s{rate}")', False), ("    for online fits measured in documents", False),
    ("    double x = 0x1p-53;", False), ("    the held-out tokens of the training documents", False),
    ("    tol : float, default 1e-4", False), ("# a 2x2 block", False), ("(1/(2y) - 1/(2x))", False),
    ("    picked at load time", False), ("    pick one at load", False), ('f"{crc:08x}"', False), ("# 1 << 20 entries (4 MiB of int32)", False),
    ("    a fit's peak RSS went from 349 MB to 118 MB", True), ("    11.3 bytes per token", True),
    ("    is 4 bytes per token, 8 per document", False), ("    Newman et al. measured held-out perplexity", False),
])
def test_the_patterns(text, bad):
    assert bool(diary_lines(text)) == bad


def test_sources_hold_no_measurement_diaries_or_development_history():
    files = source_files()
    assert len(files) > 40 and ROOT / "bnpcore" / "models" / "hdp_collapsed.py" in files \
        and ROOT / "include" / "bnpcore" / "bnpcore.h" in files
    found = scan()
    assert not found, ("comments and docstrings say what is done and why; measurements go to "
                       "benchmarks/results/ and docs/, a number stays only where it decides a constant and "
                       "cites its results file:\n" + "\n".join(found))


def test_cited_results_files_exist():
    """A citation of benchmarks/results/ names a file that is there (renamed files included)."""
    missing = [f"{path.relative_to(ROOT).as_posix()}:{i}: {m.group()}" for path in source_files()
               for i, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1)
               for m in CITATION.finditer(line) if not (ROOT / m.group()).is_file()]
    assert not missing, "cited results files that do not exist:\n" + "\n".join(missing)


if __name__ == "__main__":      # python tests/test_source_hygiene.py: list the diary lines
    import sys
    lines = scan()
    print("\n".join(lines))
    print(len(lines), "diary lines", file=sys.stderr)
