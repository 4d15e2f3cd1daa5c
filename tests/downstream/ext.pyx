# A downstream extension built against the *installed* bnpcore: it cimports every
# public .pxd and uses both channels of each (the header's inline C functions and
# bnpcore's exported cdef functions), as a third-party package would.
import numpy as np
from libc.stdint cimport int32_t, int64_t

from bnpcore.kernels.special cimport (BNPCORE_ABI_VERSION, bnp_digamma, bnp_dlgamma,
                                      digamma_array, logsumexp_array)
from bnpcore.kernels.rng cimport bnp_bitgen_t, bitgen_of, bnp_rng_gamma
from bnpcore.kernels.stirling cimport (StirlingTable, bnp_stirling_t, bnp_stirling_init,
                                       bnp_stirling_grow, bnp_stirling_log, bnp_stirling_free,
                                       bnp_antoniak_mean, sample_tables)
from bnpcore.kernels.sparse cimport bnp_csr_t, csr_view, bnp_csr_row_nnz, bnp_csr_row_total


def abi_version():
    """BNPCORE_ABI_VERSION of the header this extension was compiled against."""
    return BNPCORE_ABI_VERSION


def digamma_both(const double[::1] x):
    """psi(x) through the header (bnp_digamma) and through the exported digamma_array."""
    header = np.empty(x.shape[0])
    exported = np.empty(x.shape[0])
    cdef double[::1] h = header, e = exported
    cdef Py_ssize_t i
    with nogil:
        for i in range(x.shape[0]):
            h[i] = bnp_digamma(x[i])
        digamma_array(&x[0], &e[0], x.shape[0])
    return header, exported


def dlgamma(double x, double n):
    return bnp_dlgamma(x, n)


def logsumexp(const double[::1] v):
    return logsumexp_array(&v[0], v.shape[0])


def log_stirling_both(int64_t n, int64_t m):
    """log s(n, m) from a header-only table (caller-owned struct) and from a
    cimported StirlingTable grown through its C method."""
    cdef bnp_stirling_t own
    bnp_stirling_init(&own)
    if bnp_stirling_grow(&own, n) != 0:
        raise MemoryError
    header = bnp_stirling_log(&own, n, m)
    bnp_stirling_free(&own)
    cdef StirlingTable table = StirlingTable()
    table.reserve(n)
    return header, bnp_stirling_log(&table.table, n, m)


def antoniak_draws(int64_t n, double c, Py_ssize_t size, generator):
    """Exact Antoniak draws through the exported sample_tables (table up to n)."""
    cdef StirlingTable table = StirlingTable(n)
    out = np.empty(size, dtype=np.int64)
    cdef int64_t[::1] o = out
    cdef bnp_bitgen_t *g = bitgen_of(generator)
    cdef Py_ssize_t i
    with generator.bit_generator.lock, nogil:
        for i in range(size):
            o[i] = sample_tables(&table.table, n, c, g)
    return out, bnp_antoniak_mean(n, c)


def gamma_draws(double shape, Py_ssize_t size, generator):
    out = np.empty(size)
    cdef double[::1] o = out
    cdef bnp_bitgen_t *g = bitgen_of(generator)
    cdef Py_ssize_t i
    with generator.bit_generator.lock, nogil:
        for i in range(size):
            o[i] = bnp_rng_gamma(g, shape)
    return out


def row_totals(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts):
    """Tokens and distinct words per document through csr_view (inline in sparse.pxd)
    and the header."""
    cdef bnp_csr_t m = csr_view(indptr, indices, counts, 0)
    cdef int64_t j
    totals, nnz = [], []
    for j in range(m.n_rows):
        totals.append(bnp_csr_row_total(&m, j))
        nnz.append(bnp_csr_row_nnz(&m, j))
    return totals, nnz
