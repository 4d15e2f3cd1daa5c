"""Argument checks shared by the estimators (raise early, name the problem)."""
import contextlib
import numbers
import os

import numpy as np


def check_random_state(random_state):
    """A ``numpy.random.Generator`` from None, an int, a SeedSequence or a Generator."""
    if isinstance(random_state, np.random.Generator):
        return random_state
    if random_state is None or isinstance(random_state, (numbers.Integral, np.random.SeedSequence)):
        if isinstance(random_state, numbers.Integral) and random_state < 0:
            raise ValueError(f"random_state must be non-negative, got {random_state}")
        return np.random.default_rng(random_state)
    raise TypeError(f"random_state must be None, an int or a numpy Generator, got {type(random_state).__name__}")


def spawn_generators(rng, n):
    """``n`` independent child generators of ``rng``, e.g. one per chunk: the
    children ``SeedSequence.spawn`` makes first, derived without spawning, so
    neither ``rng`` nor its seed sequence changes and the same ``rng`` gives the
    same children every time."""
    ss = rng.bit_generator.seed_seq
    return [np.random.Generator(type(rng.bit_generator)(
        np.random.SeedSequence(ss.entropy, spawn_key=tuple(ss.spawn_key) + (i,), pool_size=ss.pool_size)))
        for i in range(n)]


def effective_n_threads(n_threads):
    """The OpenMP pool size of one kernel call from an estimator's ``n_threads``:
    None: OMP_NUM_THREADS if set, else the cpu count; -1: every cpu; k >= 1: k.
    0, below -1 or not an integer: ValueError naming ``n_threads``.

    BLAS and OpenMP do not oversubscribe the cpus: ``fit`` and ``partial_fit``
    run inside :func:`blas_limited` (one BLAS thread while the OpenMP kernels
    own the cores), and the per-document kernels of ``transform`` and
    ``score`` call no BLAS routine."""
    if n_threads is None:
        env = os.environ.get("OMP_NUM_THREADS")
        return max(1, int(env)) if env and env.isdigit() else (os.cpu_count() or 1)
    if not isinstance(n_threads, numbers.Integral) or n_threads == 0 or n_threads < -1:
        raise ValueError(f"n_threads must be None, -1 or a positive integer, got {n_threads!r}")
    return (os.cpu_count() or 1) if n_threads == -1 else int(n_threads)


def blas_limited():
    """Context manager limiting BLAS to one thread (``threadpoolctl``, an optional
    dependency; without it, a no-op): the training loops run it around the
    OpenMP kernels, some of which call BLAS inside their parallel loops, so a
    multi-threaded BLAS would start threads from every OpenMP thread."""
    global _controller
    if _controller is None:
        try:
            from threadpoolctl import ThreadpoolController
        except ImportError:
            _controller = False
        else:   # scanning the loaded libraries takes ~30 ms, a limit from the scan ~0.3 ms
            _controller = ThreadpoolController()
    return _controller.limit(limits=1, user_api="blas") if _controller else contextlib.nullcontext()


_controller = None   # threadpoolctl's view of the loaded BLAS libraries, False without threadpoolctl


def check_positive(value, name, allow_zero=False):
    """A positive (or non-negative) finite float, else ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    value = float(value)
    if not np.isfinite(value) or value < 0 or (value == 0 and not allow_zero):
        kind = "non-negative" if allow_zero else "positive"
        raise ValueError(f"{name} must be a {kind} finite number, got {value}")
    return value


# Range of every prior and concentration hyperparameter (docs/numerics.md): below
# 1e-300 reciprocals (psi(x) ~ -1/x) and logs of gamma draws (log U / a) overflow,
# and subnormal priors vanish beside any count; above 1e300 sums over the vocabulary
# and products of two priors overflow. Algorithms that square or multiply priors
# accept a narrower range (PRODUCT_RANGE), each giving its reason.
PRIOR_RANGE = (1e-300, 1e300)
PRODUCT_RANGE = (1e-100, 1e100)


def check_prior(value, name, allow_zero=False, bounds=PRIOR_RANGE, reason=None):
    """A positive finite prior inside ``bounds`` (0 too if ``allow_zero``), else
    ValueError naming ``name``, the range and why (``reason``)."""
    value = check_positive(value, name, allow_zero)
    low, high = bounds
    if value != 0 and not low <= value <= high:
        why = reason or "beyond it the kernels' reciprocals, logs and sums leave double precision"
        raise ValueError(f"{name}={value:g} is outside [{low:g}, {high:g}]: {why} (see docs/numerics.md)")
    return value


def check_int(value, name, minimum=1):
    """An integer >= minimum, else ValueError/TypeError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value}")
    return int(value)
