"""Random variates of the C core, driven by any ``numpy.random.Generator``.

The C samplers draw through the generator's own bit generator (numpy's
``bitgen_t``), so a seeded ``Generator`` reproduces a run exactly, whatever its
bit generator (PCG64, Philox, MT19937, SFC64). They are small exact
implementations: Marsaglia-Tsang gamma, computed in log space below shape 1 so
that shapes like 1e-6 stay finite; beta and Dirichlet from gammas normalised in
log space; Marsaglia's polar normal. Their draws follow the same distributions as
numpy's samplers but are not numpy's draws. The tests check them against their
distributions (KS and log-moment tests).

Public names (stable; downstream code may rely on them):

``gamma(shape, size, random_state=None, log=False)``, ``beta(a, b, size, ...)``,
``dirichlet(alpha, size, ...)``, ``normal(size, random_state=None)``
    Vectorised draws, mostly for testing and for Python users.
``stream_uniform(key, a, b, size)``
    Uniforms of the keyed stream (key, a, b) (below).

At C level (``cimport bnpcore.kernels.rng``): ``bnp_bitgen_t`` and the header's
``bnp_rng_*`` functions (nogil), and the exported ``bitgen_of(generator)``, which
gives the ``bnp_bitgen_t *`` of a Generator; draw inside
``with generator.bit_generator.lock, nogil:``. One Generator per thread or chunk
(``SeedSequence.spawn``), never a shared one without its lock.

Keyed streams (``bnp_stream_t``, ``bnp_stream_init(&s, key, a, b)``): a
``bnp_bitgen_t`` over xoshiro256** whose state is a hash of three integers. The
data-parallel samplers draw document ``j`` of sweep ``t`` from stream
``(seed, t, j)``, so their result is the same on any number of threads or workers.
"""
import numpy as np
cimport numpy as cnp
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid
from libc.stdint cimport int64_t, uint64_t

from bnpcore._validation import check_int, check_prior, check_random_state

cnp.import_array()


# why shapes are limited to PRIOR_RANGE (docs/numerics.md)
_LOG_DRAW = ("a draw below shape 1 is Gamma(shape + 1) U^(1/shape), whose log log(U) / shape is beyond "
             "double precision for shapes below it")


cdef bnp_bitgen_t *bitgen_of(object generator) except NULL:
    bitgen = getattr(generator, "bit_generator", generator)
    capsule = getattr(bitgen, "capsule", None)
    if capsule is None or not PyCapsule_IsValid(capsule, "BitGenerator"):
        raise TypeError(f"expected a numpy.random.Generator, got {type(generator).__name__}")
    return <bnp_bitgen_t *>PyCapsule_GetPointer(capsule, "BitGenerator")


def _check_size(size):
    """An int or a tuple of ints, all >= 0 (the shape of the output)."""
    if isinstance(size, tuple):
        return tuple(check_int(k, "size", minimum=0) for k in size)
    return check_int(size, "size", minimum=0)


cdef enum Law:
    GAMMA, BETA, NORMAL


cdef _draws(size, random_state, Law law, bint take_log=False, double a=0.0, double b=0.0):
    """``size`` draws of Gamma(a), Beta(a, b) (or their logs) or the standard normal
    from the generator of ``random_state``."""
    out = np.empty(_check_size(size), dtype=np.float64)
    gen = check_random_state(random_state)
    cdef double[::1] ov = out.reshape(-1)
    cdef bnp_bitgen_t *g = bitgen_of(gen)
    cdef Py_ssize_t i
    with gen.bit_generator.lock, nogil:
        for i in range(ov.shape[0]):
            if law == GAMMA:
                ov[i] = bnp_rng_log_gamma(g, a) if take_log else bnp_rng_gamma(g, a)
            elif law == BETA:
                ov[i] = bnp_rng_log_beta(g, a, b, NULL) if take_log else bnp_rng_beta(g, a, b)
            else:
                ov[i] = bnp_rng_normal(g)
    return out


def gamma(shape, size, random_state=None, log=False):
    """Draws of Gamma(shape, 1).

    Parameters
    ----------
    shape : float
        In [1e-300, 1e300]: below, the log of a draw (about log(U) / shape)
        is beyond double precision (docs/numerics.md).
    size : int or tuple of int
        Shape of the output.
    random_state : None, int, SeedSequence or numpy.random.Generator
        A Generator is used (and advanced) as it is.
    log : bool, default False
        Return the logs of the draws: finite even for shapes like 1e-6, whose
        draws underflow to 0.

    Returns
    -------
    ndarray of float64, shape ``size``
        Distributed as ``Generator.standard_gamma(shape, size)`` (or its log).
    """
    return _draws(size, random_state, GAMMA, log, check_prior(shape, "shape", reason=_LOG_DRAW))


def beta(a, b, size, random_state=None, log=False):
    """Draws of Beta(a, b), ``G_a / (G_a + G_b)`` from two log-gamma draws.

    Parameters as :func:`gamma` (``a``, ``b`` in [1e-300, 1e300]); distributed as
    ``Generator.beta(a, b, size)``, or its log when ``log``.
    """
    return _draws(size, random_state, BETA, log, check_prior(a, "a", reason=_LOG_DRAW),
                  check_prior(b, "b", reason=_LOG_DRAW))


def dirichlet(alpha, size, random_state=None, log=False):
    """Draws of Dirichlet(alpha), normalised log-gamma draws.

    Parameters
    ----------
    alpha : array_like of float, shape (k,)
        Concentrations in [1e-300, 1e300] (k >= 1), as :func:`gamma`'s shape.
    size : int
        Number of draws.
    random_state, log
        As for :func:`gamma`; with ``log`` the rows are log-probabilities
        (``logsumexp(row) == 0``), finite for tiny alpha.

    Returns
    -------
    ndarray of float64, shape (size, k)
        Distributed as ``Generator.dirichlet(alpha, size)`` (or its log).
    """
    al = np.asarray(alpha)
    if al.dtype.kind not in "iuf":
        raise TypeError(f"alpha must be an array of real numbers, got dtype {al.dtype}")
    al = np.ascontiguousarray(al, dtype=np.float64)
    if al.ndim != 1 or al.shape[0] == 0:
        raise ValueError(f"alpha must be a non-empty one-dimensional array, got shape {al.shape}")
    if not np.all(np.isfinite(al) & (al > 0)):
        raise ValueError("alpha must be positive and finite")
    for v in (al.min(), al.max()):
        check_prior(v, "alpha (an entry)", reason=_LOG_DRAW)
    out = np.empty((check_int(size, "size", minimum=0), al.shape[0]), dtype=np.float64)
    gen = check_random_state(random_state)
    cdef const double[::1] av = al
    cdef double[:, ::1] ov = out
    cdef bnp_bitgen_t *g = bitgen_of(gen)
    cdef Py_ssize_t i
    cdef bint take_log = log
    with gen.bit_generator.lock, nogil:
        for i in range(ov.shape[0]):
            if take_log:
                bnp_rng_log_dirichlet(g, &av[0], av.shape[0], &ov[i, 0])
            else:
                bnp_rng_dirichlet(g, &av[0], av.shape[0], &ov[i, 0])
    return out


def normal(size, random_state=None):
    """Standard normal draws (Marsaglia's polar method), shape ``size``.

    Distributed as ``Generator.standard_normal(size)``.
    """
    return _draws(size, random_state, NORMAL)


def stream_uniform(key, a, b, size):
    """Uniforms on [0, 1) of the keyed stream ``(key, a, b)`` (unsigned 64-bit
    integers): the C samplers' per-document streams, for tests and inspection."""
    cdef uint64_t k = _uint64(key, "key"), av = _uint64(a, "a"), bv = _uint64(b, "b")
    out = np.empty(check_int(size, "size", minimum=0), dtype=np.float64)
    cdef double[::1] ov = out
    cdef bnp_stream_t stream
    cdef Py_ssize_t i
    with nogil:
        bnp_stream_init(&stream, k, av, bv)
        for i in range(ov.shape[0]):
            ov[i] = bnp_rng_uniform(&stream.bitgen)
    return out


def _uint64(value, name):
    return check_int(value, name, minimum=0, maximum=2 ** 64 - 1, reason="a 64-bit stream key")
