"""Special functions of the C core, vectorised over NumPy arrays.

Every function here is the float64 C implementation in ``bnpcore/bnpcore.h``
applied elementwise (with NumPy broadcasting for the two-argument ones; a scalar
gives a NumPy scalar). Arguments must be real numbers (integer or float dtypes;
anything else is a TypeError); values outside the domain (x <= 0, n < 0, NaN)
give NaN, as ``scipy.special`` does.

Public names (stable; downstream code may rely on them), with the equivalent
SciPy expressions that are also the test oracles:

==========================  =========================================
``digamma(x)``              ``scipy.special.psi(x)``
``trigamma(x)``             ``scipy.special.polygamma(1, x)``
``tetragamma(x)``           ``scipy.special.polygamma(2, x)``
``gammaln(x)``              ``scipy.special.gammaln(x)`` (x > 0)
``dlgamma(x, n)``           ``gammaln(x + n) - gammaln(x)``
``dpsi(x, n)``              ``psi(x + n) - psi(x)``
``xdpsi(x, n)``             ``x * (psi(x + n) - psi(x))``
``logsumexp(a, axis)``      ``scipy.special.logsumexp(a, axis)``
``ABI_VERSION``             ``BNPCORE_ABI_VERSION`` of the header these modules were built with
``OPENMP``                  whether they were built with OpenMP
==========================  =========================================

Accuracy (tests/kernels/test_special.py, against SciPy and mpmath): relative
error below 1e-12 for x in [1e-10, 1e10] and n up to 1e7, integer or not,
including near the zeros of gammaln (x = 1, 2) and digamma (x = 1.4616...); the
differences are computed without cancellation, so they stay accurate where the
SciPy expressions lose all digits (x large and n small, x tiny). Near the zero
of dlgamma(x, n) ~ n psi(x) (x at digamma's root, n -> 0) the error is absolute,
below 1e-14 n.

At C level (``cimport bnpcore.kernels.special``): the header's ``bnp_*``
functions (inline, nogil, thread-safe) and the exported pointer-plus-length
functions ``digamma_array``, ``trigamma_array``, ``gammaln_array``,
``dlgamma_array``, ``dpsi_array`` and ``logsumexp_array``.
"""
import numpy as np
cimport numpy as cnp
from libc.math cimport INFINITY

cnp.import_array()

# How these modules were built: the header's C interface version, and whether
# OpenMP was on (setup.py turns it on when the compiler supports it).
ABI_VERSION = BNPCORE_ABI_VERSION
OPENMP = bool(BNP_OPENMP)

ctypedef double (*unary_t)(double) noexcept nogil
ctypedef double (*binary_t)(double, double) noexcept nogil


cdef void digamma_array(const double *x, double *out, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        out[i] = bnp_digamma(x[i])


cdef void trigamma_array(const double *x, double *out, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        out[i] = bnp_trigamma(x[i])


cdef void gammaln_array(const double *x, double *out, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        out[i] = bnp_lgamma(x[i])


cdef void dlgamma_array(const double *x, const double *m, double *out, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        out[i] = bnp_dlgamma(x[i], m[i])


cdef void dpsi_array(const double *x, const double *m, double *out, Py_ssize_t n) noexcept nogil:
    cdef Py_ssize_t i
    for i in range(n):
        out[i] = bnp_dpsi(x[i], m[i])


cdef double logsumexp_array(const double *v, Py_ssize_t n) noexcept nogil:
    return bnp_logsumexp(v, n)


def _as_float64(x, name):
    """x as a C-contiguous float64 array (0-d for a scalar); TypeError unless real numbers."""
    arr = np.asarray(x)
    if arr.dtype.kind not in "iuf":
        raise TypeError(f"{name} must be a real number or an array of real numbers, "
                        f"got dtype {arr.dtype}")
    return np.asarray(arr, dtype=np.float64, order="C")


cdef object _unary(unary_t f, x):
    xa = _as_float64(x, "x")
    out = np.empty_like(xa)
    cdef const double[::1] xv = xa.reshape(-1)
    cdef double[::1] ov = out.reshape(-1)
    cdef Py_ssize_t i, n = xv.shape[0]
    with nogil:
        for i in range(n):
            ov[i] = f(xv[i])
    return out if out.ndim else out[()]


cdef object _binary(binary_t f, x, n):
    xa, na = np.broadcast_arrays(_as_float64(x, "x"), _as_float64(n, "n"))
    xa = np.asarray(xa, order="C")
    na = np.asarray(na, order="C")
    out = np.empty(xa.shape, dtype=np.float64)
    cdef const double[::1] xv = xa.reshape(-1)
    cdef const double[::1] nv = na.reshape(-1)
    cdef double[::1] ov = out.reshape(-1)
    cdef Py_ssize_t i, m = xv.shape[0]
    with nogil:
        for i in range(m):
            ov[i] = f(xv[i], nv[i])
    return out if out.ndim else out[()]


def digamma(x):
    """Digamma function psi(x) = d/dx log Gamma(x), elementwise (NaN for x <= 0)."""
    return _unary(bnp_digamma, x)


def trigamma(x):
    """Trigamma function psi'(x), elementwise (NaN for x <= 0)."""
    return _unary(bnp_trigamma, x)


def tetragamma(x):
    """Tetragamma function psi''(x), elementwise (NaN for x <= 0)."""
    return _unary(bnp_tetragamma, x)


def gammaln(x):
    """log Gamma(x) for x > 0, elementwise (NaN for x < 0, inf at 0)."""
    return _unary(bnp_lgamma, x)


def dlgamma(x, n):
    """lgamma(x + n) - lgamma(x) for x > 0, n >= 0, broadcast, without cancellation."""
    return _binary(bnp_dlgamma, x, n)


def dpsi(x, n):
    """psi(x + n) - psi(x) for x > 0, n >= 0, broadcast, without cancellation."""
    return _binary(bnp_dpsi, x, n)


def xdpsi(x, n):
    """x * (psi(x + n) - psi(x)): the expected number of tables of n customers in a
    Chinese restaurant of concentration x; exact as x -> 0."""
    return _binary(bnp_xdpsi, x, n)


def logsumexp(a, axis=None):
    """log(sum(exp(a))) along ``axis`` (an int; all entries when None).

    -inf for an empty reduction or when every entry is -inf, +inf if any entry
    is +inf, NaN if any is NaN. Equivalent to ``scipy.special.logsumexp(a, axis)``.
    """
    arr = _as_float64(a, "a")
    if axis is None:
        arr = arr.reshape(1, arr.size)
    else:
        arr = np.moveaxis(arr, axis, -1)
    # no negative indexing here: the module is compiled with wraparound=False,
    # which applies to Python tuples too
    lead = arr.shape[:arr.ndim - 1]
    cols = arr.shape[arr.ndim - 1]
    flat = np.ascontiguousarray(arr).reshape(int(np.prod(lead, dtype=np.int64)), cols)
    out = np.empty(flat.shape[0], dtype=np.float64)
    cdef const double[:, ::1] v = flat
    cdef double[::1] ov = out
    cdef Py_ssize_t i, rows = v.shape[0], ncols = v.shape[1]
    with nogil:
        for i in range(rows):
            ov[i] = bnp_logsumexp(&v[i, 0], ncols) if ncols > 0 else -INFINITY
    return out[0] if axis is None else out.reshape(lead)
