# Public C-level API: unsigned Stirling numbers of the first kind (log space) and the
# Antoniak (number of tables) distribution. The table is a caller-owned struct; grow it
# before a parallel region (not thread-safe), read it from any thread afterwards.
from libc.stdint cimport int64_t
from bnpcore.kernels.rng cimport bnp_bitgen_t

cdef extern from "bnpcore/bnpcore.h" nogil:
    int64_t BNP_STIRLING_MAX_N
    ctypedef struct bnp_stirling_t:
        double *logs
        int64_t n_max
    void bnp_stirling_init(bnp_stirling_t *t)
    void bnp_stirling_free(bnp_stirling_t *t)
    int bnp_stirling_grow(bnp_stirling_t *t, int64_t n)          # 0, or -1 (cap / memory)
    const double *bnp_stirling_row(const bnp_stirling_t *t, int64_t n)   # m = 1..n, n <= n_max
    double bnp_stirling_log(const bnp_stirling_t *t, int64_t n, int64_t m)  # NaN if n > n_max
    void bnp_log_stirling1_row(int64_t n, double *out, double *work)      # no table, O(n) memory
    double bnp_antoniak_log_norm(int64_t n, double c)
    double bnp_antoniak_mean(int64_t n, double c)
    double bnp_antoniak_var(int64_t n, double c)
    void bnp_antoniak_logpmf(const bnp_stirling_t *t, int64_t n, double c, double *out)
    int64_t bnp_antoniak_sample_table(const bnp_stirling_t *t, int64_t n, double c, bnp_bitgen_t *g)
    int64_t bnp_antoniak_sample_crp(int64_t n, double c, bnp_bitgen_t *g)


cdef class StirlingTable:
    """Owns a bnp_stirling_t; cimporters may read ``table`` directly (after ``grow``)."""
    cdef bnp_stirling_t table
    cdef int reserve(self, int64_t n) except -1

# Exported: an exact Antoniak draw, by the table when it serves row n, else by CRP seating.
cdef int64_t sample_tables(const bnp_stirling_t *t, int64_t n, double c, bnp_bitgen_t *g) noexcept nogil
