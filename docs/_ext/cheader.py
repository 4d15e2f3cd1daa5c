"""Sphinx extension: the reference page of the C header, from its comments.

``.. c-header::`` (path from the ``cheader_path`` setting) reads
include/bnpcore/bnpcore.h and writes, under each of its banner sections, every
public function (``static inline``, named ``bnp_`` but not ``bnp__``), type
(``typedef struct``) and macro (``BNP_``/``BNPCORE_``) with the comment written
just above it. The header stays the one place these are documented; nothing
here needs Doxygen or breathe.

``parse_header(text)`` is the parser alone (tests/api/test_docs_api.py uses it).
"""
import re
from pathlib import Path

BANNER = re.compile(r"/\* -{20,} \*/\n/\* (.+?)\s*\*/\n/\* -{20,} \*/")
COMMENT = re.compile(r"/\*(.*?)\*/", re.DOTALL)
FUNCTION = re.compile(r"static inline ([^;{}()]*?\b(bnp_[A-Za-z0-9_]+))\s*\(([^)]*)\)\s*\{")
STRUCT = re.compile(r"typedef struct [A-Za-z0-9_]*\s*\{.*?\}\s*(bnp_[A-Za-z0-9_]+)\s*;", re.DOTALL)
MACRO = re.compile(r"#define ((?:BNP_|BNPCORE_)[A-Z0-9_]+)(\([^)]*\))?[ \t]*([^\n]*)")


def _comment_before(text, start):
    """The /* */ comment that ends on the line just above ``start`` (or '')."""
    head = text[:start].rstrip(" \t")
    if not head.endswith("\n"):
        return ""
    head = head[:-1].rstrip()
    if not head.endswith("*/"):
        return ""
    open_ = head.rfind("/*")
    body = head[open_ + 2:-2]
    if re.fullmatch(r"\s*-+\s*", body):  # a banner line, not a doc comment
        return ""
    first, *rest = body.split("\n")
    lines = [first.strip()] + [re.sub(r"^\s*\* ?", "", line) for line in rest]  # continuation " * "
    return "\n".join(lines).strip("\n")


def parse_header(text):
    """Sections of the header: a list of (title, entries), each entry a dict with
    ``kind`` ('function', 'type' or 'macro'), ``name``, ``declaration`` and ``doc``."""
    cuts = [(m.start(), m.group(1)) for m in BANNER.finditer(text)]
    cuts = [(0, "Version and configuration")] + cuts
    found = []
    for m in FUNCTION.finditer(text):
        name = m.group(2)
        if name.startswith("bnp__"):
            continue
        args = " ".join(m.group(3).split())
        decl = f"{' '.join(m.group(1).split())}({args})"
        found.append((m.start(), "function", name, decl, _comment_before(text, m.start())))
    for m in STRUCT.finditer(text):
        found.append((m.start(), "type", m.group(1), m.group(0), _comment_before(text, m.start())))
    for m in MACRO.finditer(text):
        name = m.group(1)
        if name.endswith("_H_"):
            continue
        value = COMMENT.sub("", m.group(3)).strip()
        trailing = " ".join(c.strip() for c in COMMENT.findall(m.group(3)))
        doc = _comment_before(text, m.start()) or trailing
        found.append((m.start(), "macro", name, f"#define {name}{m.group(2) or ''} {value}".rstrip(), doc))
    seen, sections = set(), []
    for i, (start, title) in enumerate(cuts):
        end = cuts[i + 1][0] if i + 1 < len(cuts) else len(text)
        entries = []
        for pos, kind, name, decl, doc in sorted(found):
            if start <= pos < end and name not in seen:
                seen.add(name)
                entries.append({"kind": kind, "name": name, "declaration": decl, "doc": doc})
        if entries:
            sections.append((title.rstrip("."), entries))
    return sections


_ESCAPE = re.compile(r"([\\`*_|\[\]<>:])")


def _rst_text(doc):
    """The comment as reStructuredText: prose paragraphs with markup characters
    escaped; paragraphs with indented lines (tables, formulas) as literal blocks."""
    out = []
    for para in re.split(r"\n\s*\n", doc.strip()):
        lines = para.split("\n")
        if any(line.startswith("  ") for line in lines):
            out += ["::", ""] + ["    " + line for line in lines] + [""]
        else:
            out += [_ESCAPE.sub(r"\\\1", " ".join(line.strip() for line in lines)), ""]
    return out


def header_rst(text):
    rst = []
    for title, entries in parse_header(text):
        rst += [title, "-" * len(title), ""]
        for e in entries:
            if e["kind"] == "function":
                rst += [f".. c:function:: {e['declaration']}", ""]
            elif e["kind"] == "macro":
                rst += [f".. c:macro:: {e['name']}", "", "   .. code-block:: c", "",
                        f"      {e['declaration']}", ""]
            else:
                rst += [f".. c:type:: {e['name']}", "", "   .. code-block:: c", ""]
                rst += ["      " + line for line in e["declaration"].split("\n")] + [""]
            if e["doc"]:  # functions of a group share the comment of the first
                rst += ["   " + line if line else "" for line in _rst_text(e["doc"])]
            rst += [""]
    return rst


def setup(app):
    from generated import add_generated_directive
    return add_generated_directive(app, "c-header", "cheader_path",
                                   lambda path, env: header_rst(path.read_text(encoding="utf-8")),
                                   lambda path: [path], titles=True)
