"""Unsigned Stirling numbers of the first kind and the Antoniak distribution.

``s(n, m)`` counts the permutations of n elements with m cycles; the number of
tables m occupied by n customers of a Chinese restaurant with concentration c
has the Antoniak distribution ``p(m | n, c) = s(n, m) c^m Gamma(c) / Gamma(c + n)``.
s(n, m) overflows a double near n = 170, so the table keeps
``P(n, m) = log(s(n, m) / n!)``, which is also ``log p(m | n, c=1)``: the entries
that carry the probability mass are of order one and keep ~1e-15 absolute
accuracy along the recurrence (an entry's error is a few ulps of ``|P(n, m)|``).

Public names (stable; downstream code may rely on them):

``MAX_N``
    10000, the largest n a :class:`StirlingTable` serves (n (n + 1) / 2 doubles,
    400 MB at the cap).
``StirlingTable(n_max=0)``
    A table grown on demand (``grow``, ``log``, ``row``, ``n_max``, ``nbytes``);
    cimporters use its ``table`` struct and ``reserve`` method.
``log_stirling1(n, m)``, ``log_stirling1_row(n)``
    log s(n, m) for any n: up to ``MAX_N`` from a table this module keeps,
    beyond it computed alone in O(n^2) time and O(n) memory.
``antoniak_logpmf(n, c)``, ``antoniak_mean(n, c)``, ``antoniak_var(n, c)``
    The distribution, its mean ``c (psi(c + n) - psi(c))`` and variance.
``antoniak_sample(n, c, size, random_state, method)``
    Exact draws: inverse CDF over the table row up to ``MAX_N``; beyond it (or
    with ``method="crp"``) the customers are seated one by one, a sum of
    independent Bernoulli(c / (c + i)) draws, exact for any n.

At C level (``cimport bnpcore.kernels.stirling``): the header's ``bnp_stirling_*``
and ``bnp_antoniak_*`` functions, :class:`StirlingTable`, and the exported
``sample_tables(table, n, c, bitgen)``.
"""
import threading

import numpy as np
cimport numpy as cnp
from libc.stdint cimport int64_t
from libc.string cimport memcpy
from bnpcore.kernels.rng cimport bitgen_of
from bnpcore.kernels.special cimport bnp_lgamma

from bnpcore._validation import check_int, check_positive, check_random_state

cnp.import_array()

MAX_N = BNP_STIRLING_MAX_N


cdef int64_t sample_tables(const bnp_stirling_t *t, int64_t n, double c, bnp_bitgen_t *g) noexcept nogil:
    if n <= t.n_max:
        return bnp_antoniak_sample_table(t, n, c, g)
    return bnp_antoniak_sample_crp(n, c, g)


def _check_n(n, name="n"):
    return check_int(n, name, minimum=0)


def _check_concentration(c):
    return check_positive(c, "concentration")


cdef class StirlingTable:
    """Table of unsigned Stirling numbers of the first kind, grown on demand.

    Row n is computed from row n - 1 (O(n) each); rows 1..``MAX_N`` can be
    served. Growing reallocates the rows: do not grow a table that another
    thread is reading (grow before a parallel region, read from any thread
    afterwards).

    Parameters
    ----------
    n_max : int, default 0
        Rows to compute now; more are added by :meth:`grow` or by lookups.

    Attributes
    ----------
    n_max : int
        Largest n served without growing.
    nbytes : int
        Memory held by the rows, n_max (n_max + 1) / 2 doubles.

    Examples
    --------
    >>> t = StirlingTable(6)
    >>> np.exp(t.row(5)).round()
    array([24., 50., 35., 10.,  1.])
    """

    def __cinit__(self, n_max=0):
        bnp_stirling_init(&self.table)

    def __init__(self, n_max=0):
        self.grow(n_max)

    def __dealloc__(self):
        bnp_stirling_free(&self.table)

    cdef int reserve(self, int64_t n) except -1:
        if bnp_stirling_grow(&self.table, n) != 0:
            if n > BNP_STIRLING_MAX_N:
                raise ValueError(f"the Stirling table serves n <= {BNP_STIRLING_MAX_N}, got {n}")
            raise MemoryError(f"cannot grow the Stirling table to n = {n}")
        return 0

    def grow(self, n):
        """Make rows 1..n available (no-op when they already are).

        Raises ValueError for n > ``MAX_N`` (the table is then unchanged).
        """
        self.reserve(_check_n(n))

    @property
    def n_max(self):
        """Largest n served without growing."""
        return self.table.n_max

    @property
    def nbytes(self):
        """Memory held by the rows in bytes."""
        return self.table.n_max * (self.table.n_max + 1) // 2 * 8

    def log(self, n, m):
        """log s(n, m); grows the table to n if needed."""
        n, m = _check_n(n), _check_n(m, "m")
        if m > n:
            raise ValueError(f"m must not exceed n, got n={n}, m={m}")
        self.reserve(n)
        return bnp_stirling_log(&self.table, n, m)

    def row(self, n):
        """Array of log s(n, m) for m = 1..n (a copy); grows the table to n if needed."""
        n = _check_n(n)
        self.reserve(n)
        return _unscale(bnp_stirling_scaled_row(&self.table, n) if n else NULL, n)


cdef object _unscale(const double *scaled, int64_t n):
    """log s(n, m) = log(s(n, m) / n!) + lgamma(n + 1), m = 1..n, as a new array."""
    out = np.empty(n, dtype=np.float64)
    cdef double[::1] ov = out
    cdef double lfact = bnp_lgamma(<double>n + 1.0)
    cdef int64_t m
    for m in range(n):
        ov[m] = scaled[m] + lfact
    if n:  # exact ends, as bnp_stirling_log: s(n, 1) = (n-1)!, s(n, n) = 1
        ov[0] = bnp_lgamma(<double>n)
        ov[n - 1] = 0.0
    return out


cdef object _scaled_row(int64_t n):
    """log(s(n, m) / n!), m = 1..n, as a new array: from the shared table up to
    the cap, else computed alone."""
    row = np.empty(n, dtype=np.float64)
    if n == 0:
        return row
    cdef double[::1] rv = row
    cdef StirlingTable table
    if n <= BNP_STIRLING_MAX_N:
        with _TABLE_LOCK:
            table = _shared_table(n)
            memcpy(&rv[0], bnp_stirling_scaled_row(&table.table, n), n * sizeof(double))
        return row
    work = np.empty(n, dtype=np.float64)
    cdef double[::1] wv = work
    with nogil:
        bnp_stirling_scaled_row_compute(n, &rv[0], &wv[0])
    return row


def log_stirling1_row(n):
    """log s(n, m) for m = 1..n, as an array of length n (empty for n = 0).

    Rows up to ``MAX_N`` come from a table kept by this module (grown to n on
    first use and kept: n (n + 1) / 2 doubles); longer rows are computed alone
    in O(n^2) time and O(n) memory, and not kept.
    """
    cdef int64_t nn = _check_n(n)
    cdef const double[::1] scaled = _scaled_row(nn)
    return _unscale(&scaled[0] if nn else NULL, nn)


def log_stirling1(n, m):
    """log of the unsigned Stirling number of the first kind s(n, m).

    -inf where s(n, m) = 0 (m = 0 < n); 0 for n = m = 0. Any n is served: rows
    beyond the table cap are computed on the fly in O(n^2) time and O(n) memory.
    """
    n, m = _check_n(n), _check_n(m, "m")
    if m > n:
        raise ValueError(f"m must not exceed n, got n={n}, m={m}")
    if m == 0:
        return 0.0 if n == 0 else -np.inf
    return float(log_stirling1_row(n)[m - 1])


def antoniak_logpmf(n, c):
    """log p(m | n, c) for m = 1..n (array of length n; empty for n = 0).

    Equivalent to ``log_stirling1_row(n) + m * log(c) - (gammaln(c + n) - gammaln(c))``
    with ``m = arange(1, n + 1)``, computed from log(s(n, m) / n!) so that no
    log n!-sized terms cancel.
    """
    cdef int64_t nn = _check_n(n)
    cdef double cc = _check_concentration(c)
    cdef const double[::1] scaled = _scaled_row(nn)
    out = np.empty(nn, dtype=np.float64)
    cdef double[::1] ov = out
    if nn:
        bnp_antoniak_logpmf(&scaled[0], nn, cc, &ov[0])
    return out


def antoniak_mean(n, c):
    """E[m | n, c] = c (psi(c + n) - psi(c)), accurate for tiny c."""
    return bnp_antoniak_mean(_check_n(n), _check_concentration(c))


def antoniak_var(n, c):
    """Var[m | n, c] = c (psi(c+n) - psi(c)) + c^2 (psi'(c+n) - psi'(c))."""
    return bnp_antoniak_var(_check_n(n), _check_concentration(c))


def antoniak_sample(n, c, size=None, random_state=None, method="auto"):
    """Exact draws of the number of tables m | n customers, concentration c.

    Parameters
    ----------
    n : int
        Number of customers (n = 0 gives m = 0).
    c : float
        Concentration, > 0.
    size : int, optional
        Number of draws; a scalar when None.
    random_state : int, numpy.random.Generator or None
    method : {"auto", "table", "crp"}
        "table": inverse CDF over the Stirling row (O(n) per draw after the
        row exists); "crp": seat the customers one by one, sum of Bernoulli(c /
        (c + i)) (O(n), no table, any n); "auto": the table up to its cap.
    """
    n, c = _check_n(n), _check_concentration(c)
    if method not in ("auto", "table", "crp"):
        raise ValueError(f"method must be 'auto', 'table' or 'crp', got {method!r}")
    if method == "table" and n > BNP_STIRLING_MAX_N:
        raise ValueError(f"method='table' serves n <= {BNP_STIRLING_MAX_N}; use 'crp'")
    out = np.empty(1 if size is None else check_int(size, "size", minimum=0), dtype=np.int64)
    gen = check_random_state(random_state)
    cdef int64_t[::1] ov = out
    cdef bnp_bitgen_t *g = bitgen_of(gen)
    cdef Py_ssize_t i
    cdef int64_t nn = n
    cdef double cc = c
    cdef StirlingTable table
    if method == "crp" or n > BNP_STIRLING_MAX_N:  # seat customers; no table is built
        table = StirlingTable(0)
        with gen.bit_generator.lock, nogil:
            for i in range(ov.shape[0]):
                ov[i] = sample_tables(&table.table, nn, cc, g)
    else:
        with _TABLE_LOCK:  # no other thread may grow (reallocate) the table meanwhile
            table = _shared_table(n)
            with gen.bit_generator.lock, nogil:
                for i in range(ov.shape[0]):
                    ov[i] = sample_tables(&table.table, nn, cc, g)
    return int(out[0]) if size is None else out


_TABLE = None
_TABLE_LOCK = threading.Lock()


def _shared_table(n):
    """The module's table, grown to n <= MAX_N; call with _TABLE_LOCK held."""
    global _TABLE
    if _TABLE is None:
        _TABLE = StirlingTable(0)
    _TABLE.grow(n)
    return _TABLE
