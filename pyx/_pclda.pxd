# The small-shape gamma and the Poisson samplers of the partially collapsed LDA
# sampler, shared with the partially collapsed HDP sampler (_pchdp.pyx).
from libc.math cimport exp, floor, log, pow, sqrt
from libc.stdint cimport int32_t, int64_t, uint16_t

from bnpcore.kernels.rng cimport bnp_bitgen_t, bnp_rng_normal, bnp_rng_uniform, bnp_rng_uniform_pos


cdef inline double _log_gamma_small(bnp_bitgen_t *g, double a) noexcept nogil:
    """log of a Gamma(a, 1) draw for 0 < a < 1: Ahrens & Dieter's (1974) GS
    rejection sampler in log space. The Phi step's zero counts with eta < 1
    take this path: it halves the Phi step against bnp_rng_log_gamma (whose
    Gamma(a + 1) U^(1/a) costs a Marsaglia-Tsang draw, a normal and three logs),
    the bottleneck of a sweep at large K (benchmarks/results/design_choices.txt).

    For x below exp(-38) < 2^-54, exp(-x) rounds to 1: the acceptance test of a
    draw this small always passes and is skipped."""
    cdef double b = 1.0 + a * 0.36787944117144233, p, lx, x    # (e + a) / e
    while True:
        p = b * bnp_rng_uniform_pos(g)
        if p <= 1.0:                             # density x^(a-1) on (0, 1], accept w.p. exp(-x)
            lx = log(p) / a
            if lx < -38.0 or bnp_rng_uniform(g) <= exp(-exp(lx)):
                return lx
        else:                                    # density exp(-x) on (1, inf), accept w.p. x^(a-1)
            x = -log((b - p) / a)
            if bnp_rng_uniform(g) <= pow(x, a - 1.0):
                return log(x)


# Above this mean a Poisson draw of the Polya urn is normal, rounded (the
# approximation is already the urn's; it keeps a draw O(1) for large counts).
cdef enum:
    POISSON_NORMAL = 30


cdef inline double _poisson_inversion(bnp_bitgen_t *g, double lam, double n, double p) noexcept nogil:
    """Inversion of a Poisson(lam) law from the value n of probability p: the
    first value at which the cumulative probability from n exceeds a uniform."""
    cdef double u = bnp_rng_uniform(g), c = p
    while u >= c and p > 0.0:
        n += 1.0
        p *= lam / n
        c += p
    return n


cdef inline double _poisson(bnp_bitgen_t *g, double lam) noexcept nogil:
    """A Poisson(lam) draw: inversion below POISSON_NORMAL, else the normal
    approximation rounded (never negative)."""
    cdef double n
    if lam >= POISSON_NORMAL:
        n = floor(lam + sqrt(lam) * bnp_rng_normal(g) + 0.5)
        return n if n > 0.0 else 0.0
    return _poisson_inversion(g, lam, 0.0, exp(-lam))


# The topic labels of the tokens: uint16 when the topic capacity allows (half the
# memory of int32 per token), else int32.
ctypedef fused label_t:
    uint16_t
    int32_t


cdef extern from "bnpcore/internal/threads.h" nogil:
    void bnp_atomic_add_i32(int32_t *p, int32_t v)        # atomic under OpenMP
    int bnp_once_claim(int32_t *flag)                    # 1: the caller does the work, then bnp_once_done
    void bnp_once_done(int32_t *flag)

cdef extern from "bnpcore/internal/simd.h" nogil:
    void BNP_PREFETCH(const void *p)                     # cache hint, no effect on results


# A document's counts and topic list in the z-steps, rebuilt from its labels (the
# state keeps no per-document counts): nd[k] = n_jk in a per-thread row of the
# topic capacity (all 0 between documents), dlist[0..n) the topics with n_jk > 0,
# dpos[k] the position of k in it or -1 (all -1 between documents).

cdef inline int64_t _doc_open(const label_t *z, int64_t n_tok, int32_t *nd, int32_t *dlist,
                              int32_t *dpos) noexcept nogil:
    """Count the labels z[0..n_tok) into nd and list their topics in increasing
    order (the order of a scan of nd); returns the list's length. The insertion
    sort costs at most n^2 / 2 for n listed topics, less than the n per token of
    the document's z-step."""
    cdef int64_t i, m, n = 0
    cdef int32_t t
    for i in range(n_tok):
        t = <int32_t>z[i]
        if nd[t] == 0:
            m = n
            while m > 0 and dlist[m - 1] > t:
                dlist[m] = dlist[m - 1]
                m -= 1
            dlist[m] = t
            n += 1
        nd[t] += 1
    for i in range(n):
        dpos[dlist[i]] = <int32_t>i
    return n


cdef inline void _doc_close(int32_t *nd, const int32_t *dlist, int32_t *dpos, int64_t n) noexcept nogil:
    """Clear the document's counts and positions (topics outside the list are 0 and -1)."""
    cdef int64_t i
    for i in range(n):
        nd[dlist[i]] = 0
        dpos[dlist[i]] = -1


cdef inline int64_t _list_remove(int32_t t, int32_t *dlist, int32_t *dpos, int64_t n) noexcept nogil:
    """Topic t left the document: swap the last entry into its place; returns the new length."""
    cdef int32_t last = dlist[n - 1]
    dlist[dpos[t]] = last
    dpos[last] = dpos[t]
    dpos[t] = -1
    return n - 1


cdef inline int64_t _list_add(int32_t t, int32_t *dlist, int32_t *dpos, int64_t n) noexcept nogil:
    """Append topic t if absent; returns the new length."""
    if dpos[t] >= 0:
        return n
    dpos[t] = <int32_t>n
    dlist[n] = t
    return n + 1


cdef inline double _bucket(const double *prow, const int32_t *nd, const int32_t *dlist, int64_t n,
                           double *cum) noexcept nogil:
    """Cumulative weights phi_kw n_jk over the list into cum; returns their sum."""
    cdef double q = 0.0
    cdef int64_t i
    for i in range(n):
        q += prow[dlist[i]] * nd[dlist[i]]
        cum[i] = q
    return q


cdef inline double _bucket_entries(const double *phi, const int32_t *topics, int64_t m, const int32_t *nd,
                                   const double *alpha, double *cum) noexcept nogil:
    """Cumulative weights phi[i] (n_jk + alpha_k), k = topics[i], over a word's m
    entries of a sparse Phi into cum; returns their sum."""
    cdef double q = 0.0
    cdef int64_t i
    for i in range(m):
        q += phi[i] * (nd[topics[i]] + alpha[topics[i]])
        cum[i] = q
    return q


cdef inline int32_t _bucket_pick(const double *cum, const int32_t *dlist, int64_t n, double u) noexcept nogil:
    """The topic of the list whose cumulative weight first exceeds u (the last
    if none does), by bisection: the same entry as a scan from the front."""
    cdef int64_t lo = 0, hi = n - 1, mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if cum[mid] <= u:
            lo = mid + 1
        else:
            hi = mid
    return dlist[lo]


cdef inline int32_t _alias_pick(const double *prob, const int32_t *alias, int64_t K, double u) noexcept nogil:
    """A draw from the alias table prob/alias of K columns given u ~ U[0, 1)."""
    cdef double x = u * K
    cdef int64_t i = <int64_t>x
    if i >= K:
        i = K - 1
    return <int32_t>i if x - i < prob[i] else alias[i]


cdef inline void _move_token(int32_t *nwk_row, int64_t *nk_part, int32_t s, int32_t t) noexcept nogil:
    """A token of the word whose topic-word row is nwk_row moved from topic s to t:
    atomic integer adds to the shared row, the thread's own topic totals nk_part
    (summed after the step), so the counts are the same for any thread count."""
    if s != t:
        bnp_atomic_add_i32(&nwk_row[s], -1)
        bnp_atomic_add_i32(&nwk_row[t], 1)
        nk_part[s] -= 1
        nk_part[t] += 1
