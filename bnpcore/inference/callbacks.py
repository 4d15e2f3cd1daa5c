"""Callbacks for ``BaseEstimator.reporting``: the progress bar and early stopping.

A callback is any callable ``callback(estimator, record) -> bool`` where
``record`` is the dict just appended to ``history_``; returning True stops the
fit (leaving a valid fitted state). Both loops of :mod:`bnpcore.inference`
report once per iteration (a sweep of a batch algorithm, a minibatch of an
online one), so the same callbacks serve every estimator.
"""
import contextlib
import math
import sys
import warnings

from bnpcore._validation import check_int, check_positive

__all__ = ["Progress", "EarlyStopping"]


class Progress:
    """Progress bar: tqdm when installed, else one line rewritten in place.

    Parameters
    ----------
    total : int, optional
        Iterations (or documents, with ``key="n_documents"``) expected in all.
    desc : str
        Label shown before the bar.
    key : str, default "iteration"
        Record entry the bar follows (cumulative): "iteration", or "n_documents"
        for online fits measured in documents.
    initial : int, default 0
        Value of ``key`` when the bar starts (a resumed fit).
    stream : file, default sys.stderr
    enabled : bool, default True
        False makes the callback do nothing (a quiet command line).
    """

    def __init__(self, total=None, desc="fit", key="iteration", initial=0, stream=None, enabled=True):
        self.total, self.desc, self.key, self.enabled = total, desc, key, enabled
        self.stream = stream if stream is not None else sys.stderr
        self.done = initial
        self.bar = None
        if enabled:
            try:
                import tqdm.auto
            except ImportError:
                pass
            else:
                self.bar = tqdm.auto.tqdm(total=total, initial=initial, desc=desc, file=self.stream,
                                          unit="doc" if key == "n_documents" else "it", dynamic_ncols=True)

    def __call__(self, estimator, record):
        if not self.enabled or self.key not in record:
            return False
        shown = {k: v for k, v in record.items() if k not in ("iteration", "n_documents")
                 and not k.endswith("seconds") and isinstance(v, (int, float)) and not isinstance(v, bool)}
        now = record[self.key]
        if self.bar is not None:
            self.bar.update(now - self.done)
            if shown:
                self.bar.set_postfix({k: f"{v:.4g}" for k, v in list(shown.items())[:3]}, refresh=False)
        else:
            done = f"{now}/{self.total}" if self.total else f"{now}"
            extra = "  ".join(f"{k}={v:.4g}" for k, v in list(shown.items())[:3])
            self.stream.write(f"\r{self.desc}: {self.key} {done}  {extra}".rstrip())
            self.stream.flush()
        self.done = now
        return False

    def close(self):
        if self.bar is not None:
            self.bar.close()
        elif self.enabled and self.done:
            self.stream.write("\n")
            self.stream.flush()


@contextlib.contextmanager
def progress_bar(estimator, enabled, total, key="iteration", initial=0):
    """The ``progress=True`` bar of ``fit``: a :class:`Progress` that the
    estimator's reports feed while the ``with`` block runs (tqdm required: a
    warning and no bar when it is missing)."""
    bar = Progress(total, desc=type(estimator).__name__, key=key, initial=initial) if enabled else None
    if bar is not None and bar.bar is None:
        warnings.warn("progress=True needs tqdm (pip install tqdm); continuing without a progress bar",
                      stacklevel=4)
        bar = None
    estimator._progress = bar
    try:
        yield bar
    finally:
        estimator.__dict__.pop("_progress", None)
        if bar is not None:
            bar.close()


class EarlyStopping:
    """Callback for ``BaseEstimator.reporting``: stop when ``key`` has not
    improved by more than ``min_delta`` over ``patience`` consecutive records
    that hold it (higher is better; records without it are ignored).

    Examples
    --------
    >>> with est.reporting(EarlyStopping(patience=3)):           # doctest: +SKIP
    ...     est.fit(train, heldout=test, eval_every=1000)
    """

    def __init__(self, patience=3, min_delta=0.0, key="heldout_loglik"):
        self.patience = check_int(patience, "patience", minimum=1)
        self.min_delta = check_positive(min_delta, "min_delta", allow_zero=True)
        self.key = key
        self.best = -math.inf
        self.bad = 0

    def __call__(self, estimator, record):
        if self.key not in record:
            return False
        if record[self.key] > self.best + self.min_delta:
            self.best, self.bad = record[self.key], 0
        else:
            self.bad += 1
        return self.bad >= self.patience
