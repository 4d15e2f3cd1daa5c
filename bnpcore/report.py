"""A one-file report of a fitted topic model: an HTML page (topic table,
settings, traces) or a PNG of the traces (needs matplotlib:
``pip install bnpcore[plot]``).

The figure has up to three panels, each drawn when the fit recorded what it
needs: the held-out per-word log-likelihood over the iterations
(``history_["heldout_loglik"]``, recorded when ``fit`` is given ``heldout``),
the number of topics over the iterations (``n_used``, ``n_active`` or
``n_components``, the first one the history has), and the sizes of the
components, largest first on log-log axes (the tail of an HDP or DP fit: how
many small topics it keeps). The command line writes one with
``bnpcore fit ... --report out.html`` (or ``out.png``).
"""
import base64
import html
import io
import os

import numpy as np

from bnpcore.plot import _number, _pyplot

__all__ = ["report_figure", "write_report"]

_COUNT_KEYS = ("n_used", "n_active", "n_components")


def _trace(history, key):
    points = [(rec["iteration"], _number(rec.get(key))) for rec in history]
    return [(it, y) for it, y in points if y is not None]


def _component_sizes(estimator, corpus):
    """Expected size of each component (``topic_sizes_`` of the nonparametric
    estimators; for the others the expected tokens of each topic in ``corpus``)."""
    if hasattr(type(estimator), "topic_sizes_"):
        return np.asarray(estimator.topic_sizes_), getattr(estimator, "_size_unit", "tokens")
    if corpus is not None:
        return np.asarray(corpus.doc_lengths @ estimator.transform(corpus)), "tokens"
    return None, None


def report_figure(estimator, corpus=None):
    """The report's figure (see the module docstring).

    Parameters
    ----------
    estimator : fitted bnpcore topic model or mixture
    corpus : Corpus, optional
        Training documents: the component sizes of estimators without
        ``topic_sizes_`` (the LDA family) are their expected tokens in it.

    Returns
    -------
    matplotlib.figure.Figure
    """
    history = getattr(estimator, "history_", None) or []
    panels = []
    heldout = _trace(history, "heldout_loglik")
    if heldout:
        panels.append(("held-out per-word log-likelihood", "iteration", heldout, False))
    for key in _COUNT_KEYS:
        counts = _trace(history, key)
        if counts:
            panels.append((f"topics ({key})", "iteration", counts, False))
            break
    sizes, unit = _component_sizes(estimator, corpus)
    if sizes is not None and np.any(sizes > 0):
        ranked = np.sort(sizes[sizes > 0])[::-1]
        panels.append((f"component size ({unit})", "rank", list(enumerate(ranked, start=1)), True))
    if not panels:
        raise ValueError(f"{type(estimator).__name__} recorded nothing to plot (fit it first)")
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.2), squeeze=False)
    for ax, (label, xlabel, points, loglog) in zip(axes[0], panels):
        ax.plot([x for x, _ in points], [y for _, y in points], marker="." if len(points) < 60 else None)
        ax.set_title(label, fontsize=10)
        ax.set_xlabel(xlabel)
        if loglog:
            ax.set_xscale("log")
            ax.set_yscale("log")
    fig.tight_layout()
    return fig


def _topic_rows(estimator, corpus, n, n_words):
    """(header, rows) of the topic table: the summary of a nonparametric fit
    (with u_mass coherence on ``corpus``), else the topics by expected tokens."""
    if hasattr(estimator, "summary"):
        rows = estimator.summary(n, corpus, n_words=n_words)
        header = ["rank", "component", "size", "share"] + (["coherence"] if rows and "coherence" in rows[0] else [])
        return header + ["top words"], [
            [r["rank"], r["component"], f"{r['size']:.1f}", f"{r['share']:.1%}"]
            + ([f"{r['coherence']:.3f}"] if "coherence" in r else []) + [" ".join(r["top_words"])] for r in rows]
    sizes, _ = _component_sizes(estimator, corpus)
    order = np.arange(estimator.get_topics().shape[0]) if sizes is None else np.argsort(-sizes, kind="stable")
    total = sizes.sum() if sizes is not None else 0
    rows = [[i, int(k)] + ([f"{sizes[k]:.1f}", f"{sizes[k] / total:.1%}"] if total > 0 else ["", ""])
            + [" ".join(estimator.top_words(int(k), n_words))] for i, k in enumerate(order[:n])]
    return ["rank", "topic", "size", "share", "top words"], rows


def _table(header, rows):
    cells = "".join(f"<th>{html.escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{cells}</tr></thead><tbody>{body}</tbody></table>"


def write_report(estimator, path, corpus=None, *, title=None, facts=None, n=20, n_words=10):
    """Write the report of a fitted estimator to ``path``.

    Parameters
    ----------
    estimator : fitted bnpcore topic model or mixture
    path : str or path
        ``.html`` (or ``.htm``): one self-contained page with the settings,
        ``facts``, the table of the ``n`` largest topics and the figure
        (embedded); ``.png``: the figure alone.
    corpus : Corpus, optional
        Training documents, for the coherence column and the sizes of LDA topics.
    title : str, optional
    facts : dict of str -> object, optional
        Extra lines of the page, e.g. ``{"held-out per-word log-likelihood": -7.3}``.
    n, n_words : int
        Rows of the topic table and words per topic.

    Returns
    -------
    str
        The path written.
    """
    path = os.fspath(path)
    kind = os.path.splitext(path)[1].lower()
    if kind not in (".html", ".htm", ".png"):
        raise ValueError(f"a report is .html or .png, got {path!r}")
    fig = report_figure(estimator, corpus)
    plt = _pyplot()
    try:
        if kind == ".png":
            fig.savefig(path, dpi=100)
            return path
        image = io.BytesIO()
        fig.savefig(image, format="png", dpi=100)
    finally:
        plt.close(fig)
    name = type(estimator).__name__
    title = title or f"{type(estimator).__module__.split('.')[0]}.{name}"
    settings = [[k, repr(v)] for k, v in sorted(estimator.get_params().items())]
    header, rows = _topic_rows(estimator, corpus, n, n_words)
    lines = "".join(f"<li>{html.escape(str(k))}: {html.escape(str(v))}</li>" for k, v in (facts or {}).items())
    png = base64.b64encode(image.getvalue()).decode("ascii")
    page = (f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            "<style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
            "td,th{border:1px solid #ccc;padding:2px 8px;text-align:left}</style></head><body>"
            f"<h1>{html.escape(title)}</h1><ul>{lines}</ul>"
            f"<h2>Topics</h2>{_table(header, rows)}"
            f"<h2>Traces</h2><img alt='traces' src='data:image/png;base64,{png}'>"
            f"<h2>Settings</h2>{_table(['parameter', 'value'], settings)}</body></html>\n")
    with open(path, "w", encoding="utf-8") as f:
        f.write(page)
    return path
