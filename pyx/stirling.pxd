# Public C-level API: unsigned Stirling numbers of the first kind (log space) and the
# Antoniak (number of tables) distribution. The table is a caller-owned struct; grow it
# before a parallel region (not thread-safe), read it from any thread afterwards.
# Nothing here needs the GIL; allocation failures return -1, domain errors NaN.
from libc.stdint cimport int64_t
from bnpcore.kernels.rng cimport bnp_bitgen_t

cdef extern from "bnpcore/bnpcore.h" nogil:
    int64_t BNP_STIRLING_MAX_N                                  # largest row the table serves (10000)
    ctypedef struct bnp_stirling_t:
        double *log_scaled       # log(s(n, m) / n!), row n (m = 1..n) at offset n (n - 1) / 2
        int64_t n_max            # rows 1..n_max are filled
    void bnp_stirling_init(bnp_stirling_t *t)                   # empty table, no allocation
    void bnp_stirling_free(bnp_stirling_t *t)                   # releases the rows; back to empty
    int bnp_stirling_grow(bnp_stirling_t *t, int64_t n)         # 0, or -1 (n > cap, no memory; unchanged)
    const double *bnp_stirling_scaled_row(const bnp_stirling_t *t, int64_t n)  # borrowed; 1 <= n <= n_max
    double bnp_stirling_log(const bnp_stirling_t *t, int64_t n, int64_t m)    # log s(n, m); NaN if n > n_max
    void bnp_stirling_scaled_row_compute(int64_t n, double *out, double *work)  # no table: O(n) memory
    double bnp_antoniak_log_norm(int64_t n, double c)           # log Gamma(c+n)/Gamma(c)
    double bnp_antoniak_mean(int64_t n, double c)               # c (psi(c+n) - psi(c)); NaN if c <= 0
    double bnp_antoniak_var(int64_t n, double c)                # NaN if c <= 0
    void bnp_antoniak_logpmf(const double *scaled_row, int64_t n, double c, double *out)  # out[m-1]
    int64_t bnp_antoniak_sample_table(const bnp_stirling_t *t, int64_t n, double c, bnp_bitgen_t *g)  # n <= n_max
    int64_t bnp_antoniak_sample_crp(int64_t n, double c, bnp_bitgen_t *g)  # any n, O(n) uniforms


cdef class StirlingTable:
    """Owns a bnp_stirling_t; cimporters may read ``table`` directly (after ``reserve``)."""
    cdef bnp_stirling_t table
    # grow to serve rows up to n; needs the GIL; raises ValueError (n > cap) or MemoryError
    cdef int reserve(self, int64_t n) except -1

# Exported: an exact Antoniak draw, by the table when it serves row n, else by CRP seating.
# nogil; the caller holds the generator's lock. n = 0 gives 0.
cdef int64_t sample_tables(const bnp_stirling_t *t, int64_t n, double c, bnp_bitgen_t *g) noexcept nogil
