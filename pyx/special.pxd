# Public C-level API: special functions of include/bnpcore/bnpcore.h.
# Two channels: the header declarations (inline C, need include_dirs=[bnpcore.get_include()])
# and the exported cdef functions below (bound at import through __pyx_capi__).
# All are nogil and thread-safe; domain errors give NaN, never an exception.
from libc.stdint cimport int32_t, int64_t

cdef extern from "bnpcore/bnpcore.h" nogil:
    int BNPCORE_ABI_VERSION                     # version of the header's C interface
    int BNP_OPENMP                              # 1 if this extension is compiled with OpenMP
    double bnp_lgamma(double x)                 # log Gamma(x), x > 0
    double bnp_digamma(double x)                # psi(x), x > 0
    double bnp_trigamma(double x)               # psi'(x), x > 0
    double bnp_tetragamma(double x)             # psi''(x), x > 0
    double bnp_dlgamma(double x, double n)      # lgamma(x + n) - lgamma(x), no cancellation
    double bnp_dpsi(double x, double n)         # psi(x + n) - psi(x), no cancellation
    double bnp_xdpsi(double x, double n)        # x (psi(x + n) - psi(x)), exact as x -> 0
    double bnp_logsumexp(const double *v, int64_t n)    # -inf for n == 0 or all -inf; NaN if any NaN
    double bnp_logaddexp(double a, double b)            # log(exp(a) + exp(b)), same conventions
    # sum_i lgamma(x_i + c_i) - lgamma(x_i), x_i = offset + scale * row[ids[i]] (row NULL: offset)
    double bnp_log_rising(const int32_t *ids, const int32_t *c, int64_t nnz,
                          const double *row, double offset, double scale)
    # log Dirichlet-multinomial of a token sequence (counts c of word ids ids) under Dir(lam)
    double bnp_log_dirmult(const int32_t *ids, const int32_t *c, int64_t nnz,
                           const double *lam, double lam_total)
    # index drawn from weights w >= 0 with one uniform u in [0, 1); -1 if all are zero (or n == 0)
    int64_t bnp_sample_weights(const double *w, int64_t n, double u)
    # the same from log-weights; overwrites lw with exp(lw - max); -1 if all are -inf
    int64_t bnp_sample_logweights(double *lw, int64_t n, double u)

# Exported, pointer + length: out[i] = f(x[i]) (out may alias x), and out[i] = f(x[i], m[i])
# for the differences; the caller owns the arrays. No GIL needed, no errors raised (NaN
# outside the domain). Scalars: use the bnp_* declarations above.
cdef void digamma_array(const double *x, double *out, Py_ssize_t n) noexcept nogil
cdef void trigamma_array(const double *x, double *out, Py_ssize_t n) noexcept nogil
cdef void gammaln_array(const double *x, double *out, Py_ssize_t n) noexcept nogil
cdef void dlgamma_array(const double *x, const double *m, double *out, Py_ssize_t n) noexcept nogil
cdef void dpsi_array(const double *x, const double *m, double *out, Py_ssize_t n) noexcept nogil
cdef double logsumexp_array(const double *v, Py_ssize_t n) noexcept nogil
