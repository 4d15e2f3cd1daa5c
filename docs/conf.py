"""Sphinx configuration of bnpcore's documentation site.

Build it with the ``docs`` extra and an installed bnpcore (the API pages import it):

    pip install ".[docs]"
    sphinx-build -W -b html docs docs/_build/html

The Markdown guides (docs/*.md) are read by MyST; the API pages are autosummary
stubs (docs/api/generated/, written at build time) over numpydoc docstrings; the C
header's page is generated from the comments of include/bnpcore/bnpcore.h by the
local extension docs/_ext/cheader.py.
"""
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

import bnpcore  # noqa: E402  (the installed package: the API pages document what users get)

project = "bnpcore"
author = "bnpcore developers"
copyright = "bnpcore developers"
release = bnpcore.__version__
version = ".".join(release.split(".")[:2])

extensions = [
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.mathjax",
    "numpydoc",
    "myst_parser",
    "cheader",
    "results",
]

source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
templates_path = ["_templates"]

# the header lives beside the docs in the source tree; an sdist carries both
cheader_path = str(HERE.parent / "include" / "bnpcore" / "bnpcore.h")
benchmark_results_dir = str(HERE.parent / "benchmarks" / "results")

autosummary_generate = True
autosummary_imported_members = False
autodoc_default_options = {"members": False}
autodoc_typehints = "none"

numpydoc_show_class_members = False      # the class pages list their methods through autosummary
numpydoc_class_members_toctree = False
numpydoc_xref_param_type = False

myst_enable_extensions = ["colon_fence", "dollarmath"]
myst_heading_anchors = 3


# Docstrings are written for help() as much as for this site; two habits of theirs are not
# reStructuredText, and are adapted here rather than in every docstring:
# - fitted attributes end in "_" (``n_components_``), which reST reads as a hyperlink
#   reference ("Unknown target name") outside code spans: the underscore is escaped;
# - a definition term continued on a second line before its indented description is joined.
_CODE_SPAN = re.compile(r"(``.+?``|:[\w:.-]+:`[^`]*`|`[^`]*`_{0,2})")
_TRAILING_UNDERSCORE = re.compile(r"(?<![\\\w`])([A-Za-z](?:[A-Za-z0-9_]*[A-Za-z0-9])?)_(?=[\s,.;:)\]}]|$)")


def _escape_trailing_underscores(line):
    parts = _CODE_SPAN.split(line)
    return "".join(part if i % 2 else _TRAILING_UNDERSCORE.sub(r"\1\\_", part) for i, part in enumerate(parts))


def _join_two_line_terms(lines):
    out, i = [], 0
    while i < len(lines):
        a = lines[i]
        if (i + 2 < len(lines) and a.strip() and lines[i + 1].strip() and lines[i + 2].strip()
                and not a[:1].isspace() and not lines[i + 1][:1].isspace() and lines[i + 2][:1].isspace()
                and (i == 0 or not lines[i - 1].strip())):
            out.append(a.rstrip() + " " + lines[i + 1].strip())
            i += 2
            continue
        out.append(a)
        i += 1
    return out


def _adapt_docstring(app, what, name, obj, options, lines):
    lines[:] = [_escape_trailing_underscores(line) for line in _join_two_line_terms(lines)]


def setup(app):
    app.connect("autodoc-process-docstring", _adapt_docstring)

smartquotes = False                     # command lines in prose stay as typed (--seconds)
html_theme = "alabaster"
html_title = f"bnpcore {release}"
html_static_path = []
