"""Defaults that depend on the data or the run: ``burn_in="auto"`` and the
warning of a truncated estimator whose capacity the data fill."""
import warnings

from bnpcore._validation import check_int


def check_burn_in(burn_in, max_iter):
    """The sweeps before samples are averaged: ``"auto"`` is half of ``max_iter``
    (the first half of the chain discarded), so that any ``max_iter`` works; an
    integer must be smaller than ``max_iter`` (ValueError naming both)."""
    if isinstance(burn_in, str):
        if burn_in != "auto":
            raise ValueError(f"burn_in must be 'auto' or an integer, got {burn_in!r}")
        return max_iter // 2
    burn_in = check_int(burn_in, "burn_in", 0)
    if burn_in >= max_iter:
        raise ValueError(f"burn_in={burn_in} must be smaller than max_iter={max_iter} "
                         "(or 'auto': half of max_iter)")
    return burn_in


class CapacityWarning(UserWarning):
    """A truncated estimator used every component it can hold: the data may
    support more, and the message names the parameter to raise."""


def warn_capacity(estimator, n_used, capacity, param):
    """Warn with a :class:`CapacityWarning` when ``n_used`` components fill the
    ``capacity`` of ``estimator``, naming its constructor parameter ``param``
    that raises the capacity; returns whether it warned."""
    if n_used < capacity:
        return False
    warnings.warn(f"{type(estimator).__name__} used all {capacity} components it can hold "
                  f"({param}={capacity}): the data may support more; raise {param}", CapacityWarning, stacklevel=2)
    return True
