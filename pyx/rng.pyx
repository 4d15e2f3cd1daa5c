"""Random variates of the C core, driven by any ``numpy.random.Generator``.

The kernels draw through the generator's own bit generator (``bitgen_t``), so a
seeded ``Generator`` reproduces a run exactly. The samplers are small exact
implementations (Marsaglia-Tsang gamma, computed in log space below shape 1 so
that shapes like 1e-6 stay finite); the tests check them against their
distributions. These wrappers exist for testing and for Python users; kernels
call the ``bnp_rng_*`` functions directly.
"""
import numpy as np
cimport numpy as cnp
from cpython.pycapsule cimport PyCapsule_GetPointer, PyCapsule_IsValid
from libc.stdint cimport int64_t

cnp.import_array()


cdef bnp_bitgen_t *bitgen_of(object generator) except NULL:
    bitgen = getattr(generator, "bit_generator", generator)
    capsule = getattr(bitgen, "capsule", None)
    if capsule is None or not PyCapsule_IsValid(capsule, "BitGenerator"):
        raise TypeError(f"expected a numpy.random.Generator, got {type(generator).__name__}")
    return <bnp_bitgen_t *>PyCapsule_GetPointer(capsule, "BitGenerator")


def _generator(random_state):
    if isinstance(random_state, np.random.Generator):
        return random_state
    return np.random.default_rng(random_state)


def _check_positive(value, name):
    arr = np.asarray(value, dtype=np.float64)
    if not np.all(arr > 0):  # also rejects NaN
        raise ValueError(f"{name} must be positive, got {value!r}")
    return float(arr) if arr.ndim == 0 else arr


def gamma(shape, size, random_state=None, log=False):
    """``size`` draws of Gamma(shape, 1) (their logs when ``log``; finite for tiny shapes)."""
    cdef double a = _check_positive(shape, "shape")
    gen = _generator(random_state)
    out = np.empty(size, dtype=np.float64)
    cdef double[::1] ov = out.reshape(-1)
    cdef bnp_bitgen_t *g = bitgen_of(gen)
    cdef Py_ssize_t i
    cdef bint take_log = log
    with gen.bit_generator.lock, nogil:
        for i in range(ov.shape[0]):
            ov[i] = bnp_rng_log_gamma(g, a) if take_log else bnp_rng_gamma(g, a)
    return out


def beta(a, b, size, random_state=None, log=False):
    """``size`` draws of Beta(a, b) (their logs when ``log``)."""
    cdef double av = _check_positive(a, "a"), bv = _check_positive(b, "b")
    gen = _generator(random_state)
    out = np.empty(size, dtype=np.float64)
    cdef double[::1] ov = out.reshape(-1)
    cdef bnp_bitgen_t *g = bitgen_of(gen)
    cdef Py_ssize_t i
    cdef bint take_log = log
    with gen.bit_generator.lock, nogil:
        for i in range(ov.shape[0]):
            ov[i] = bnp_rng_log_beta(g, av, bv, NULL) if take_log else bnp_rng_beta(g, av, bv)
    return out


def dirichlet(alpha, size, random_state=None, log=False):
    """``size`` draws of Dirichlet(alpha), shape (size, len(alpha)) (logs when ``log``)."""
    al = np.ascontiguousarray(_check_positive(np.atleast_1d(alpha), "alpha"), dtype=np.float64)
    if al.ndim != 1:
        raise ValueError("alpha must be one-dimensional")
    gen = _generator(random_state)
    out = np.empty((int(size), al.shape[0]), dtype=np.float64)
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
    """``size`` standard normal draws (Marsaglia's polar method)."""
    gen = _generator(random_state)
    out = np.empty(size, dtype=np.float64)
    cdef double[::1] ov = out.reshape(-1)
    cdef bnp_bitgen_t *g = bitgen_of(gen)
    cdef Py_ssize_t i
    with gen.bit_generator.lock, nogil:
        for i in range(ov.shape[0]):
            ov[i] = bnp_rng_normal(g)
    return out
