"""Batch driver: repeat full sweeps of a collapsed or batch algorithm over a
fixed corpus, record diagnostics and the held-out score, and stop.

A batch model is any object with

* ``sweep() -> dict``: one iteration over all documents, returning its
  diagnostics (e.g. ``{"delta": ..., "bound": ...}``);
* ``predictive() -> (doc_topic, topic_word)``: the current point predictive of
  the training documents ([HYB] eq 30: rows of ``doc_topic`` are
  ``(alpha + N_j) / (sum(alpha) + N_j)``, rows of ``topic_word`` sum to 1);
* ``collect()``: called after every iteration past the burn-in of a sampler
  (to average samples for the final estimate).
"""
import math

from bnpcore.evaluation import PredictiveAverage, token_log_likelihood

__all__ = ["run_batch"]


def run_batch(model, n_iter, report, *, heldout=None, burn_in=None, tol=None):
    """Run up to ``n_iter`` sweeps of ``model``, reporting each one.

    Parameters
    ----------
    model : batch model (see the module docstring)
    n_iter : int
        Maximum number of sweeps.
    report : callable
        ``report(iteration, **metrics) -> bool`` after every sweep (the
        estimator's progress hook); a true return value stops. ``metrics`` are
        the model's diagnostics plus, with ``heldout``, ``heldout_loglik``
        and ``perplexity``.
    heldout : Corpus, optional
        Held-out tokens of the training documents, scored after every sweep:
        [HYB] eq 30 on the current state or, for samplers (``burn_in`` given)
        past the burn-in, eq 31: the online average of per-token predictive
        probabilities over the samples so far.
    burn_in : int, optional
        Samplers: sweeps before ``model.collect()`` and predictive averaging
        start. None for deterministic algorithms.
    tol : float, optional
        Stop once a sweep's ``delta`` diagnostic falls below ``tol``.

    Returns
    -------
    int
        The number of sweeps run.

    References
    ----------
    Welling, Teh & Kappen (2008), Hybrid variational/Gibbs collapsed inference
    in topic models, UAI, section 7, eqs (30)-(31).
    """
    average = PredictiveAverage(heldout) if heldout is not None and burn_in is not None else None
    for it in range(n_iter):
        metrics = model.sweep()
        sampling = burn_in is not None and it >= burn_in
        if sampling:
            model.collect()
        if heldout is not None:
            doc_topic, topic_word = model.predictive()
            if sampling:
                loglik = average.add(doc_topic, topic_word).log_likelihood()
            else:
                loglik = token_log_likelihood(doc_topic, topic_word, heldout)
            metrics["heldout_loglik"] = loglik
            metrics["perplexity"] = math.exp(-loglik)
        if report(it + 1, **metrics):
            return it + 1
        if tol is not None and metrics.get("delta", math.inf) < tol:
            return it + 1
    return n_iter
