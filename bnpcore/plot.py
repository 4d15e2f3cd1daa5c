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


def plot_history(estimator, metrics=None, ax=None):
    """Plot numeric ``history_`` entries against the iteration.

    Parameters
    ----------
    estimator : fitted bnpcore estimator
    metrics : sequence of str, optional
        Keys of the history records to draw (default: every numeric key).
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
    numeric = [k for k in history[-1] if k != "iteration" and isinstance(history[-1][k], (int, float))]
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
    iterations = [rec["iteration"] for rec in history]
    for a, key in zip(axes, metrics):
        a.plot(iterations, [rec.get(key, np.nan) for rec in history], marker=".")
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
