"""Plots of fitted estimators (needs matplotlib: ``pip install bnpcore[plot]``).

``plot_history`` draws the per-iteration records of ``history_`` (bounds,
held-out scores, topic counts); ``plot_topic_images`` draws topics over a
pixel grid, as in the bars experiments.
"""
import numpy as np

__all__ = ["plot_history", "plot_topic_images"]


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError("bnpcore.plot needs matplotlib: pip install bnpcore[plot]") from None
    return plt


def _number(value):
    """A record's value as a number: numbers as they are, a bound of named terms
    as its total, anything else None."""
    if isinstance(value, dict):
        terms = [_number(v) for v in value.values()]
        return float(sum(terms)) if terms and None not in terms else None
    if isinstance(value, (int, float, np.number)) and not isinstance(value, (bool, np.bool_)):
        return float(value)
    return None


def plot_history(estimator, metrics=None, ax=None):
    """Plot numeric ``history_`` entries against the iteration.

    Records may differ in their keys (held-out scores only at evaluated
    iterations, a bound only where computed): each metric is drawn at the
    iterations whose records have it. A bound recorded as named terms is drawn
    as its total.

    Parameters
    ----------
    estimator : fitted bnpcore estimator
    metrics : sequence of str, optional
        Keys of the history records to draw (default: every key that is numeric
        in some record, in order of first appearance).
    ax : matplotlib Axes, optional
        Where to draw; a new figure otherwise. With several metrics each gets its
        own subplot (``ax`` is then ignored).

    Returns
    -------
    list of Axes
    """
    history = getattr(estimator, "history_", None)
    if not history:
        raise ValueError("the estimator has no history_ (fit it first)")
    numeric = []
    for rec in history:
        numeric += [k for k, v in rec.items() if k != "iteration" and k not in numeric and _number(v) is not None]
    metrics = numeric if metrics is None else list(metrics)
    missing = [m for m in metrics if m not in numeric]
    if missing or not metrics:
        raise ValueError(f"no numeric history entries {missing or ''}; available: {numeric}")
    plt = _pyplot()
    if ax is not None and len(metrics) == 1:
        axes = [ax]
    else:
        fig, axes = plt.subplots(len(metrics), 1, sharex=True, squeeze=False,
                                 figsize=(6, 2.2 * len(metrics)))
        axes = list(axes[:, 0])
    for a, key in zip(axes, metrics):
        points = [(rec["iteration"], _number(rec.get(key))) for rec in history]
        points = [(it, y) for it, y in points if y is not None]
        a.plot([it for it, _ in points], [y for _, y in points], marker=".")
        a.set_ylabel(key)
    axes[-1].set_xlabel("iteration")
    return axes


def plot_topic_images(topics, shape, n_cols=10, axes=None):
    """Draw each topic (a row of ``topics``, e.g. ``estimator.topics_``) as an
    image of ``shape`` pixels (the vocabulary of bars data is a pixel grid).

    Returns
    -------
    ndarray of Axes
    """
    topics = np.asarray(topics, dtype=float)
    if topics.ndim != 2 or topics.shape[1] != int(np.prod(shape)):
        raise ValueError(f"topics of shape {topics.shape} cannot be drawn as {tuple(shape)} images")
    plt = _pyplot()
    n = topics.shape[0]
    cols = max(1, min(n_cols, n))
    rows = -(-n // cols)
    if axes is None:
        _, axes = plt.subplots(rows, cols, squeeze=False, figsize=(1.2 * cols, 1.2 * rows))
    axes = np.asarray(axes).reshape(-1)
    for k, a in enumerate(axes):
        a.set_axis_off()
        if k < n:
            a.imshow(topics[k].reshape(shape), cmap="gray_r", interpolation="nearest")
            a.set_title(str(k), fontsize=8)
    return axes
