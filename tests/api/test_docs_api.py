"""The documentation site against the code: every public class and function has
its API page, the C header's page lists every public function of the header, and
the guides' self-contained Python blocks run as printed (README's quick start:
tests/api/test_readme.py). ``sphinx-build -W`` itself runs in .ci/release."""
import importlib
import inspect
import re
import sys
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
pytestmark = pytest.mark.skipif(not (DOCS / "conf.py").is_file(), reason="needs the source tree")

# module -> its API page; every public name must appear in the page's autosummary lists
PAGES = {
    "bnpcore": "bnpcore.rst", "bnpcore.lda": "lda.rst", "bnpcore.hdp": "hdp.rst",
    "bnpcore.mixture": "mixture.rst", "bnpcore.bayesnet": "bayesnet.rst",
    "bnpcore.corpus": "data.rst", "bnpcore.corpus_io": "data.rst", "bnpcore.text": "data.rst", "bnpcore.datasets": "data.rst",
    "bnpcore.evaluation": "evaluation.rst", "bnpcore.base": "extras.rst", "bnpcore.results": "extras.rst",
    "bnpcore.inference.callbacks": "extras.rst", "bnpcore.distributed": "extras.rst",
    "bnpcore.plot": "extras.rst", "bnpcore.report": "extras.rst", "bnpcore.cli": "extras.rst",
    "bnpcore.registry": "extras.rst",
    "bnpcore.kernels.special": "kernels.rst", "bnpcore.kernels.stirling": "kernels.rst",
    "bnpcore.kernels.rng": "kernels.rst", "bnpcore.kernels.sparse": "kernels.rst",
}
# documented in prose on their page (constants), or elsewhere (re-exports, internals of the CLI)
NOT_LISTED = {"__version__", "lda", "hdp", "mixture", "bayesnet", "datasets", "evaluation",  # bnpcore
              "Corpus", "as_corpus",                           # bnpcore.corpus: with the top-level names
              "NotFittedError", "load", "FORMAT_VERSION",  # bnpcore.base: top level / prose
              "TOKEN_PATTERN", "ENGLISH_STOP_WORDS", "SUPPORTED", "import_dask",
              "FLAGSHIP", "ENTRY_POINT_GROUP", "MAX_N", "ABI_VERSION", "OPENMP"}


def public_names(module):
    mod = importlib.import_module(module)
    if hasattr(mod, "__all__"):
        return set(mod.__all__)
    # no __all__: the public classes and functions it defines or re-exports from bnpcore (not
    # helpers of private modules such as bnpcore._validation, nor other packages' names)
    def public_origin(obj):
        origin = getattr(obj, "__module__", None) or ""
        return origin == module or (origin.startswith("bnpcore.")
                                    and not any(part.startswith("_") for part in origin.split(".")))
    return {name for name, obj in vars(mod).items() if not name.startswith("_") and not inspect.ismodule(obj)
            and (inspect.isclass(obj) or callable(obj)) and public_origin(obj)}


def listed(page, module):
    """Names in the autosummary blocks that follow ``.. currentmodule:: module``."""
    names, current = set(), None
    for block in re.split(r"\n(?=\.\. )", (DOCS / "api" / page).read_text()):
        head = block.split("\n", 1)[0]
        if head.startswith(".. currentmodule::"):
            current = head.split("::")[1].strip()
        elif head.startswith(".. autosummary::") and current == module:
            names |= {line.strip() for line in block.split("\n")[1:]
                      if line.startswith("   ") and line.strip() and not line.strip().startswith(":")}
    return names


@pytest.mark.parametrize("module", sorted(PAGES))
def test_every_public_name_has_an_api_page(module):
    if module in ("bnpcore.distributed",):
        pytest.importorskip("dask.distributed", reason="imports dask")
    documented = listed(PAGES[module], module)
    missing = public_names(module) - documented - NOT_LISTED
    assert not missing, f"{module}: add {sorted(missing)} to docs/api/{PAGES[module]}"
    stale = documented - public_names(module)
    assert not stale, f"docs/api/{PAGES[module]} lists {sorted(stale)}, not public names of {module}"


def test_api_index_lists_every_page():
    index = (DOCS / "api" / "index.rst").read_text()
    for page in set(PAGES.values()) | {"c_header.rst"}:
        assert f"\n   {page[:-4]}\n" in index, page


def cheader():
    sys.path.insert(0, str(DOCS / "_ext"))
    try:
        return importlib.import_module("cheader")
    finally:
        sys.path.pop(0)


def test_c_header_page_lists_every_public_function():
    text = (ROOT / "include" / "bnpcore" / "bnpcore.h").read_text()
    expected = set(re.findall(r"^static inline [^(;]*?\b(bnp_(?!_)\w+)\s*\(", text, flags=re.M))
    entries = [e for _, es in cheader().parse_header(text) for e in es]
    functions = {e["name"] for e in entries if e["kind"] == "function"}
    assert functions == expected and len(expected) > 40
    assert {"bnp_csr_t", "bnp_stirling_t", "bnp_bitgen_t", "BNPCORE_ABI_VERSION"} <= {e["name"] for e in entries}
    digamma = next(e for e in entries if e["name"] == "bnp_digamma")
    assert digamma["declaration"] == "double bnp_digamma(double x)" and digamma["doc"].startswith("Digamma")


def python_blocks(guide):
    return re.findall(r"```python\n(.*?)```", (DOCS / guide).read_text(), flags=re.DOTALL)


def run_blocks(guide, containing, monkeypatch, tmp_path):
    """Run, in one namespace, the python blocks of the guide holding each string."""
    monkeypatch.chdir(tmp_path)
    namespace = {}
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)           # the guides use no deprecated API
        for text in containing:
            (block,) = [b for b in python_blocks(guide) if text in b]
            exec(compile(block, f"docs/{guide}", "exec"), namespace)
    return namespace


# (guide, strings that pick its self-contained blocks, in order); a few seconds each
GUIDE_BLOCKS = [
    ("index.md", ["DirectAssignmentGibbs(max_iter=20"]),
    ("bayesnet.md", ["net = Network([\n", "states, true_cpts = net.sample"]),
    ("results.md", ["kos[:3000]"]),
    pytest.param("split_merge.md", ['make_bars("sm"'], marks=pytest.mark.slow),   # minutes
]


@pytest.mark.parametrize("guide, containing", GUIDE_BLOCKS)
def test_guide_blocks_run(guide, containing, monkeypatch, tmp_path, capsys):
    namespace = run_blocks(guide, containing, monkeypatch, tmp_path)
    assert "model" in namespace and getattr(namespace["model"], "n_components_", 1) >= 1
    if guide == "index.md":
        assert "topic" in capsys.readouterr().out.lower()


@pytest.mark.parametrize("guide", sorted(p.name for p in DOCS.glob("*.md")))
def test_guide_blocks_are_python(guide):
    """Every python block at least parses (the ones above also run); the
    architecture guide's outlines (method signatures, an indented fragment) are
    marked as outlines by their '...' bodies and skipped."""
    for block in python_blocks(guide):
        try:
            compile(block, f"docs/{guide}", "exec")
        except SyntaxError as exc:
            if guide == "architecture.md":
                continue
            raise AssertionError(f"docs/{guide}: {exc}\n{block}") from None
