"""Sphinx extension: ``.. benchmark-results::`` lists every file of
benchmarks/results/ (path from the ``benchmark_results_dir`` setting) with a
download link and the file's first comment line (the command that produced it,
by the benchmarks' convention), so that the Benchmarks page follows the folder."""
from pathlib import Path


def describe(path):
    """The first line of the file that starts with '#', without it ('' if none)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("#"):
                return line.lstrip("#").strip()
    return ""


def results_rst(folder, docdir):
    import os
    rst = [".. list-table::", "   :header-rows: 1", "   :widths: 30 70", "",
           "   * - file", "     - first line (the command and when it ran)"]
    for path in sorted(Path(folder).glob("*.txt")):
        rel = os.path.relpath(path, docdir).replace(os.sep, "/")
        text = describe(path).replace("`", "'").replace("*", r"\*").replace("|", r"\|") or "(no header)"
        rst += [f"   * - :download:`{path.name} <{rel}>`", f"     - {text}"]
    return rst


def setup(app):
    from generated import add_generated_directive
    return add_generated_directive(app, "benchmark-results", "benchmark_results_dir",
                                   lambda folder, env: results_rst(folder, Path(env.doc2path(env.docname)).parent),
                                   lambda folder: folder.glob("*.txt"))
