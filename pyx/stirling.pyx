"""Unsigned Stirling numbers of the first kind and the Antoniak distribution.

``s(n, m)`` counts permutations of n elements with m cycles; the number of
tables m occupied by n customers of a Chinese restaurant with concentration c
has the Antoniak distribution ``p(m | n, c) = s(n, m) c^m Gamma(c) / Gamma(c + n)``.
Values are kept as ``log s(n, m)`` because s(n, m) overflows a double near
n = 170.

The :class:`StirlingTable` serves rows up to ``BNP_STIRLING_MAX_N`` (10,000:
400 MB); it is grown on demand, one row from the previous one. Beyond the cap,
``log_stirling1`` computes the single row it needs in O(n) memory, and
``antoniak_sample`` seats the customers one by one (a sum of independent
Bernoulli(c / (c + i)) draws), which is exact for any n.
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int64_t
from bnpcore.kernels.rng cimport bitgen_of

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
    """Table of log unsigned Stirling numbers of the first kind, grown on demand.

    Parameters
    ----------
    n_max : int, default 0
        Rows to compute now; more are added by :meth:`grow` or by lookups.

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
        """Make rows 1..n available (no-op when they already are)."""
        self.reserve(_check_n(n))

    @property
    def n_max(self):
        """Largest n served without growing."""
        return self.table.n_max

    @property
    def nbytes(self):
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
        out = np.empty(n, dtype=np.float64)
        if n:
            out[:] = <double[:n]>bnp_stirling_row(&self.table, n)
        return out


def log_stirling1_row(n):
    """log s(n, m) for m = 1..n, as an array of length n (empty for n = 0).

    Rows up to ``MAX_N`` come from a table kept by this module (grown to n on
    first use and kept: n (n + 1) / 2 doubles); longer rows are computed alone
    in O(n^2) time and O(n) memory, and not kept.
    """
    cdef int64_t nn = _check_n(n)
    if nn <= BNP_STIRLING_MAX_N:
        return _shared_table(nn).row(nn)
    row = np.empty(nn, dtype=np.float64)
    work = np.empty(nn, dtype=np.float64)
    cdef double[::1] rv = row, wv = work
    with nogil:
        bnp_log_stirling1_row(nn, &rv[0], &wv[0])
    return row


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
    """log p(m | n, c) for m = 1..n (array of length n; empty for n = 0)."""
    n, c = _check_n(n), _check_concentration(c)
    m = np.arange(1, n + 1)
    return log_stirling1_row(n) + m * np.log(c) - bnp_antoniak_log_norm(n, c)


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
    cdef StirlingTable table = _shared_table(n) if method != "crp" else StirlingTable(0)
    cdef int64_t[::1] ov = out
    cdef bnp_bitgen_t *g = bitgen_of(gen)
    cdef Py_ssize_t i
    cdef int64_t nn = n
    cdef double cc = c
    with gen.bit_generator.lock, nogil:
        for i in range(ov.shape[0]):
            ov[i] = sample_tables(&table.table, nn, cc, g)
    return int(out[0]) if size is None else out


_TABLE = None


def _shared_table(n):
    """The module's table, grown to min(n, cap) (for the Python-level helpers)."""
    global _TABLE
    if _TABLE is None:
        _TABLE = StirlingTable(0)
    _TABLE.grow(min(n, BNP_STIRLING_MAX_N))
    return _TABLE
