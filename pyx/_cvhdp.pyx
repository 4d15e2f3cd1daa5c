"""Kernels of collapsed variational inference for the HDP (CV-HDP; Teh, Kurihara &
Welling 2007, section 3).

Responsibilities are stored per (document, word) pair: ``r[p, k]`` for the p-th
non-zero of the CSR corpus, shared by its ``counts[p]`` copies (as for CVB
LDA). Count statistics of the Bernoulli sums n_jk, n_kw, n_k are
``E`` (mean), ``V`` (variance) and ``Z`` (sum of log(1 - q)), document-major
``(n_docs, K)`` and word-major ``(n_words, K)``; the topic totals are the column
sums of the word-major ones. ``r`` may be float32 or float64; statistics are
always float64.

The per-pair loops are C (below) written without branches so that GCC
vectorises them, with their own exp and log (the libm calls are scalar, and
took most of the sweep's time: benchmarks/results/design_choices.txt).
"""
import numpy as np
cimport numpy as cnp
from cython cimport floating
from cython.parallel cimport prange, threadid
from libc.math cimport INFINITY, exp, log, log1p
from libc.stdint cimport int32_t, int64_t
from libc.string cimport memcpy, memset

from bnpcore.kernels.parallel cimport PAD
from bnpcore.kernels.sparse cimport bnp_csr_t, csr_view

cnp.import_array()

cdef double _Q_MAX = 1.0 - 1e-15      # log1p(-q) stays finite; P+ = 1 to double precision


cdef inline double _clamp0(double x) noexcept nogil:
    return x if x > 0.0 else 0.0


cdef extern from *:
    """
    #include <stdint.h>
    #include <string.h>
    #include "bnpcore/internal/simd.h"
    /* The array loops below are compiled for AVX2 and for the baseline ISA
     * (BNP_SIMD_CLONES); no FMA in either, so both clones give the same bits. */

    /* the selects below vectorise only if comparisons may not trap (GCC -ftrapping-math
     * keeps them as branches); the results are the same */
    #if defined(__GNUC__) && !defined(__clang__)
    #pragma GCC push_options
    #pragma GCC optimize("no-trapping-math")
    #endif

    #define CV_Q_MAX (1.0 - 1e-15)
    #include "bnpcore/internal/fastmath.h"

    /* log1p(-q) for q in [0, 1 - 1e-15]: log(u) corrected by the rounding of u = 1 - q
     * (0 for q >= 1/2, where u is exact); the correction / u is taken as correction
     * (2 - u), a relative error (1 - u)^2 < 1/4 on a term below 2^-53 (< 0.1 ulp of
     * the result), which saves a division. */
    static inline double cv__log1m(double q) {
        double u = 1.0 - q;
        return bnp_log(u) - ((u - 1.0) + q) * (2.0 - u);
    }

    BNP_SIMD_CLONES
    static void cv__exp_neg_array(const double *restrict x, double *restrict y, int64_t n) {
        for (int64_t i = 0; i < n; ++i) y[i] = bnp_exp_neg(x[i]);
    }

    BNP_SIMD_CLONES
    static void cv__log_array(const double *restrict x, double *restrict y, int64_t n) {
        for (int64_t i = 0; i < n; ++i) y[i] = bnp_log(x[i]);
    }

    /* Update (15) for one pair: new responsibilities into qn[:K] from the old ones
     * q[:K] and the statistics with one copy removed (document row Ej, Vj, word row
     * Ew, Vw, topic totals Ek, Vk); returns their entropy -sum qn log qn, with log qn
     * from the log domain (t: K scratch). Two divisions per topic: 1 / a, and
     * 1 / (b d) for 1 / b and 1 / d. */
    BNP_SIMD_CLONES
    static double cv__weights(const double *restrict q, double *restrict qn, double *restrict t,
                              const double *restrict Ej, const double *restrict Vj, const double *restrict Ew,
                              const double *restrict Vw, const double *restrict Ek, const double *restrict Vk,
                              const double *restrict prior_doc, double prior_w, double prior_topic, int64_t K) {
        int64_t k;
        double m = -1e300, s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0, inv, log_s;
        for (k = 0; k < K; ++k) {
            double qk = q[k], dv = qk * (1.0 - qk);
            double ej = Ej[k] - qk, vj = Vj[k] - dv;
            double ew = Ew[k] - qk, vw = Vw[k] - dv;
            double ek = Ek[k] - qk, vk = Vk[k] - dv;
            /* clamped at 0: rounding can go below */
            double a = prior_doc[k] + (ej > 0.0 ? ej : 0.0);
            double b = prior_w + (ew > 0.0 ? ew : 0.0);
            double d = prior_topic + (ek > 0.0 ? ek : 0.0);
            double ia = 1.0 / a, ibd = 1.0 / (b * d), ib = d * ibd, id = b * ibd;
            qn[k] = bnp_log(a * b * id) - 0.5 * (vj > 0.0 ? vj : 0.0) * ia * ia
                    - 0.5 * (vw > 0.0 ? vw : 0.0) * ib * ib + 0.5 * (vk > 0.0 ? vk : 0.0) * id * id;
        }
        for (k = 0; k < K; ++k) m = qn[k] > m ? qn[k] : m;
        for (k = 0; k < K; ++k) { t[k] = qn[k] - m; qn[k] = bnp_exp_neg(t[k]); }
        for (k = 0; k + 4 <= K; k += 4) { s0 += qn[k]; s1 += qn[k + 1]; s2 += qn[k + 2]; s3 += qn[k + 3]; }
        for (; k < K; ++k) s0 += qn[k];
        inv = 1.0 / ((s0 + s1) + (s2 + s3));
        log_s = bnp_log((s0 + s1) + (s2 + s3));
        for (k = 0; k < K; ++k) { qn[k] *= inv; t[k] = qn[k] * (t[k] - log_s); }
        s0 = s1 = s2 = s3 = 0.0;
        for (k = 0; k + 4 <= K; k += 4) { s0 += t[k]; s1 += t[k + 1]; s2 += t[k + 2]; s3 += t[k + 3]; }
        for (; k < K; ++k) s0 += t[k];
        return -((s0 + s1) + (s2 + s3));
    }

    /* Counts after a pair moves from q to qn (c copies): E += c (qn - q), V += c
     * (qn (1 - qn) - q (1 - q)) for the document row, the word row and the topic
     * totals; Z rows += c log(1 - min(qn, 1 - 1e-15)). */
    BNP_SIMD_CLONES
    static void cv__apply(const double *restrict q, const double *restrict qn, double c, double *restrict Ej,
                          double *restrict Vj, double *restrict Zj, double *restrict Ew, double *restrict Vw,
                          double *restrict Zw, double *restrict Ek, double *restrict Vk, int64_t K) {
        for (int64_t k = 0; k < K; ++k) {
            double o = q[k], x = qn[k];
            double de = c * (x - o), dv = c * (x * (1.0 - x) - o * (1.0 - o));
            double z = c * cv__log1m(x < CV_Q_MAX ? x : CV_Q_MAX);
            Ej[k] += de; Ew[k] += de; Ek[k] += de;
            Vj[k] += dv; Vw[k] += dv; Vk[k] += dv;
            Zj[k] += z; Zw[k] += z;
        }
    }

    /* E += c q and V += c q (1 - q) for the document row or the word row of a pair. */
    BNP_SIMD_CLONES
    static void cv__moments(const double *restrict q, double c, double *restrict E, double *restrict V,
                            int64_t K) {
        for (int64_t k = 0; k < K; ++k) {
            double e = c * q[k];
            E[k] += e; V[k] += e * (1.0 - q[k]);
        }
    }

    #if defined(__GNUC__) && !defined(__clang__)
    #pragma GCC pop_options
    #endif
    """
    void add_moments "cv__moments"(const double *q, double c, double *E, double *V, int64_t K) noexcept nogil
    void exp_neg_array "cv__exp_neg_array"(const double *x, double *y, int64_t n) noexcept nogil
    void log_array "cv__log_array"(const double *x, double *y, int64_t n) noexcept nogil
    double pair_weights "cv__weights"(const double *q, double *qn, double *t, const double *Ej, const double *Vj,
                                      const double *Ew, const double *Vw, const double *Ek, const double *Vk,
                                      const double *prior_doc, double prior_w, double prior_topic,
                                      int64_t K) noexcept nogil
    void pair_apply "cv__apply"(const double *q, const double *qn, double c, double *Ej, double *Vj,
                                double *Zj, double *Ew, double *Vw, double *Zw, double *Ek, double *Vk,
                                int64_t K) noexcept nogil


def fast_math(const double[::1] x, str function):
    """The sweep's own elementwise functions, for tests: ``"exp_neg"`` (exp for
    x <= 0, 0 below -708, NaN kept) or ``"log"`` (for finite normal x > 0)."""
    if function not in ("exp_neg", "log"):
        raise ValueError(f"function must be 'exp_neg' or 'log', got {function!r}")
    y = np.empty(x.shape[0])
    cdef double[::1] yv = y
    if x.shape[0] and function == "log":
        log_array(&x[0], &yv[0], x.shape[0])
    elif x.shape[0]:
        exp_neg_array(&x[0], &yv[0], x.shape[0])
    return y


cdef double _sweep_block(int64_t j0, int64_t j1, const bnp_csr_t *m, floating *r, double *E_jk, double *V_jk,
                         double *Z_jk, double *E_wk, double *V_wk, double *Z_wk, double *E_k, double *V_k,
                         const double *prior_doc, const double *prior_word, double prior_topic,
                         double *work, int64_t K) noexcept nogil:
    """Update (15) for the pairs of documents j0..j1-1 in order, against the word
    and topic statistics given (the shared ones, or a block's copies); returns
    their entropy."""
    cdef const int64_t *indptr = m.indptr
    cdef const int32_t *indices = m.indices
    cdef const int32_t *counts = m.counts
    cdef int64_t j, p, k
    cdef int32_t w
    cdef double ent = 0.0
    cdef double *qn = work
    cdef double *h = work + K
    cdef double *q
    cdef floating *rp
    for j in range(j0, j1):
        for k in range(K):
            Z_jk[j * K + k] = 0.0
        for p in range(indptr[j], indptr[j + 1]):
            w = indices[p]
            rp = r + p * K
            if floating is double:
                q = rp
            else:
                q = work + 2 * K
                for k in range(K):
                    q[k] = rp[k]
            ent += counts[p] * pair_weights(q, qn, h, E_jk + j * K, V_jk + j * K, E_wk + w * K, V_wk + w * K,
                                            E_k, V_k, prior_doc, prior_word[w], prior_topic, K)
            if floating is float:
                for k in range(K):
                    rp[k] = <float>qn[k]
                    qn[k] = rp[k]                # the stored value (float32 rounding)
            pair_apply(q, qn, counts[p], E_jk + j * K, V_jk + j * K, Z_jk + j * K, E_wk + w * K, V_wk + w * K,
                       Z_wk + w * K, E_k, V_k, K)
            if floating is double:
                for k in range(K):
                    rp[k] = qn[k]
    return ent


def cv_sweep(const int64_t[::1] indptr,         # IN  (n_docs + 1,) CSR row pointers
             const int32_t[::1] indices,        # IN  (nnz,) word ids
             const int32_t[::1] counts,         # IN  (nnz,) counts c_jw
             floating[:, ::1] r,                # IN/OUT (nnz, K) responsibilities per pair
             double[:, ::1] E_jk, double[:, ::1] V_jk,   # IN/OUT (n_docs, K)
             double[:, ::1] Z_jk,                        # OUT (n_docs, K)
             double[:, ::1] E_wk, double[:, ::1] V_wk,   # IN/OUT (n_words, K)
             double[:, ::1] Z_wk,                        # OUT (n_words, K)
             double[::1] E_k, double[::1] V_k,           # IN/OUT (K,)
             const double[::1] prior_doc,       # IN  (K,) G[alpha beta_k]
             const double[::1] prior_word,      # IN  (n_words,) G[eta_tot tau_w]
             double prior_topic,                # IN  E[eta_tot]
             int n_threads=1):                  # IN  1: sequential; > 1: delayed updates
    """One sweep of update (15) over all pairs; returns the entropy
    ``-sum_p c_p sum_k r_pk log r_pk`` of the new responsibilities (before any
    float32 rounding of ``r``).

    For pair (j, w) with one copy removed (``E^- = E - r``, ``V^- = V - r(1-r)``)::

        r_jwk ∝ (prior_doc_k + E^-_jk)(prior_word_w + E^-_kw) / (prior_topic + E^-_k)
                * exp(-V^-_jk / (2 (prior_doc_k + E^-_jk)^2) - V^-_kw / (2 (...)^2) + V^-_k / (2 (...)^2))

    then ``E += c (r_new - r_old)`` and ``V += c (r_new(1-r_new) - r_old(1-r_old))``
    for n_jk, n_kw and n_k, and Z (not needed by (15)) is accumulated from the new
    responsibilities, as :func:`cv_statistics` computes it.

    ``n_threads == 1``: the exact sequential schedule, pairs in document order.
    ``n_threads > 1``: the delayed-update schedule: the documents are cut into
    ``n_threads`` blocks of about equal numbers of pairs, swept in parallel; a
    block sees the word and topic counts of the start of the sweep plus its own
    changes (its own copies of them, so that a pair reads and writes three word
    rows, as in the sequential sweep; keeping the shared start and the block's
    changes apart, five rows, was slower), and the changes of all blocks are added after the sweep (in
    block order: the result depends on ``n_threads`` only).
    """
    cdef int64_t K = r.shape[1], D = indptr.shape[0] - 1, W = E_wk.shape[0], nnz = r.shape[0]
    cdef int T = n_threads, t
    if (nnz != indices.shape[0] or E_jk.shape[1] != K or E_wk.shape[1] != K or E_k.shape[0] != K
            or prior_doc.shape[0] != K or prior_word.shape[0] != W or E_jk.shape[0] != D
            or V_jk.shape[0] != D or V_jk.shape[1] != K or Z_jk.shape[0] != D or Z_jk.shape[1] != K
            or V_wk.shape[0] != W or V_wk.shape[1] != K or Z_wk.shape[0] != W or Z_wk.shape[1] != K
            or V_k.shape[0] != K):
        raise ValueError("cv_sweep: inconsistent shapes")
    if T < 1:
        raise ValueError(f"cv_sweep: n_threads must be >= 1, got {T}")
    if K == 0 or D == 0:
        Z_jk[:, :] = 0.0
        Z_wk[:, :] = 0.0
        return 0.0
    T = <int>min(T, D)
    work = np.empty((T, 3 * K + PAD))
    cdef double[:, ::1] wv = work
    cdef double ent = 0.0
    cdef bnp_csr_t m = csr_view(indptr, indices, counts, W)
    if T == 1:
        Z_wk[:, :] = 0.0
        with nogil:
            ent = _sweep_block(0, D, &m, &r[0, 0], &E_jk[0, 0], &V_jk[0, 0], &Z_jk[0, 0], &E_wk[0, 0], &V_wk[0, 0],
                               &Z_wk[0, 0], &E_k[0], &V_k[0], &prior_doc[0], &prior_word[0], prior_topic,
                               &wv[0, 0], K)
        return ent
    bounds = _pair_blocks(indptr, T)
    copies = np.empty((3, T, W, K))            # E, V (copied) and Z (zeroed) per block, by the block's thread
    topics = np.empty((T, 2, K + PAD))         # E_k, V_k per block (padded: written for every pair)
    topics[:, 0, :K] = E_k
    topics[:, 1, :K] = V_k
    ents = np.zeros(T)
    cdef int64_t[::1] bv = bounds
    cdef double[:, :, :, ::1] cv = copies
    cdef double[:, :, ::1] tv = topics
    cdef double[::1] ev = ents
    cdef int64_t WK = W * K, w, k
    cdef floating *rp = &r[0, 0]
    cdef double *cp = &cv[0, 0, 0, 0]
    cdef double *tp = &tv[0, 0, 0]
    cdef double *wp = &wv[0, 0]
    cdef double e, v, de, dv, z
    for t in prange(T, nogil=True, num_threads=T, schedule="static", chunksize=1):
        memcpy(cp + t * WK, &E_wk[0, 0], WK * sizeof(double))
        memcpy(cp + (T + t) * WK, &V_wk[0, 0], WK * sizeof(double))
        memset(cp + (2 * T + t) * WK, 0, WK * sizeof(double))
        ev[t] = _sweep_block(bv[t], bv[t + 1], &m, rp, &E_jk[0, 0], &V_jk[0, 0], &Z_jk[0, 0], cp + t * WK,
                             cp + (T + t) * WK, cp + (2 * T + t) * WK, tp + 2 * t * (K + PAD),
                             tp + (2 * t + 1) * (K + PAD), &prior_doc[0], &prior_word[0], prior_topic,
                             wp + t * (3 * K + PAD), K)
    # the blocks' changes added in block order, words in parallel
    for w in prange(W, nogil=True, num_threads=T, schedule="static"):
        for k in range(K):
            e = E_wk[w, k]
            v = V_wk[w, k]
            de = 0.0
            dv = 0.0
            z = 0.0
            for t in range(T):
                de = de + (cv[0, t, w, k] - e)
                dv = dv + (cv[1, t, w, k] - v)
                z = z + cv[2, t, w, k]
            E_wk[w, k] = e + de
            V_wk[w, k] = v + dv
            Z_wk[w, k] = z
    for k in range(K):
        de = 0.0
        dv = 0.0
        for t in range(T):
            de = de + (tv[t, 0, k] - E_k[k])
            dv = dv + (tv[t, 1, k] - V_k[k])
        E_k[k] += de
        V_k[k] += dv
    for t in range(T):
        ent += ents[t]
    return ent


def cv_moments(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,
               const double[:, ::1] r,                          # IN  (nnz, K)
               double[:, ::1] E_jk, double[:, ::1] V_jk,        # OUT (n_docs, K)
               double[:, ::1] E_wk, double[:, ::1] V_wk,        # OUT (n_words, K)
               int n_threads=1):
    """E and V of n_jk and n_kw from scratch: the first two statistics of
    :func:`cv_statistics` (no logarithms), which :func:`cv_sweep` only updates
    incrementally (rounding leaves ~1e-17 where a count is 0, and P+ divides by
    ~0 there).

    One pass over the corpus per thread: thread t owns a block of documents
    and a range of words (each about nnz / n_threads pairs) and adds the pairs
    of its documents or its words to the rows it owns. A pair is read by at
    most two threads, and every sum is added in corpus order, so the result
    does not depend on ``n_threads``. (A pass over the documents, then one over
    the words, reading the responsibilities twice, was slower; word rows
    summed per block of documents and added up, as in :func:`cv_statistics`,
    ran at about this speed.)
    Equivalent NumPy: ``E_jk = A.T @ (c r)``, ``V_jk = A.T @ (c r (1 - r))``
    with A the pair-to-document indicator (the pair-to-word indicator for the
    ``_wk`` arrays).
    """
    cdef int64_t K = r.shape[1], D = indptr.shape[0] - 1, W = E_wk.shape[0], j, w, p
    if (r.shape[0] != indices.shape[0] or E_jk.shape[0] != D or V_jk.shape[0] != D or E_jk.shape[1] != K
            or V_jk.shape[1] != K or E_wk.shape[1] != K or V_wk.shape[1] != K or V_wk.shape[0] != W):
        raise ValueError("cv_moments: inconsistent shapes")
    if n_threads < 1:
        raise ValueError(f"cv_moments: n_threads must be >= 1, got {n_threads}")
    if K == 0:
        return
    cdef int T = <int>max(1, min(n_threads, D)), t
    cdef int64_t[::1] docs = _pair_blocks(indptr, T)
    word_ptr = np.zeros(W + 1, dtype=np.int64)         # the pairs by word, as indptr by document
    np.cumsum(np.bincount(np.asarray(indices), minlength=W), out=word_ptr[1:])
    cdef int64_t[::1] words = _pair_blocks(word_ptr, T)
    cdef bint own_doc
    for t in prange(T, nogil=True, num_threads=T, schedule="static", chunksize=1):
        if words[t + 1] > words[t]:
            memset(&E_wk[words[t], 0], 0, (words[t + 1] - words[t]) * K * sizeof(double))
            memset(&V_wk[words[t], 0], 0, (words[t + 1] - words[t]) * K * sizeof(double))
        for j in range(D):
            own_doc = docs[t] <= j < docs[t + 1]
            if own_doc:
                memset(&E_jk[j, 0], 0, K * sizeof(double))
                memset(&V_jk[j, 0], 0, K * sizeof(double))
            for p in range(indptr[j], indptr[j + 1]):
                w = indices[p]
                if own_doc:
                    add_moments(&r[p, 0], counts[p], &E_jk[j, 0], &V_jk[j, 0], K)
                if words[t] <= w < words[t + 1]:
                    add_moments(&r[p, 0], counts[p], &E_wk[w, 0], &V_wk[w, 0], K)


cdef double _statistics_block(int64_t j0, int64_t j1, const bnp_csr_t *m, const floating *r, double *E_jk,
                              double *V_jk, double *Z_jk, double *E_wk, double *V_wk, double *Z_wk,
                              int64_t K) noexcept nogil:
    """cv_statistics of documents j0..j1-1 in order: writes their document rows, adds
    to the word rows; returns their entropy."""
    cdef const int64_t *indptr = m.indptr
    cdef const int32_t *indices = m.indices
    cdef const int32_t *counts = m.counts
    cdef int64_t j, p, k, dj, dw
    cdef double c, q, qc, lz, ent = 0.0
    for j in range(j0, j1):
        dj = j * K
        for k in range(K):
            E_jk[dj + k] = 0.0
            V_jk[dj + k] = 0.0
            Z_jk[dj + k] = 0.0
        for p in range(indptr[j], indptr[j + 1]):
            dw = indices[p] * K
            c = counts[p]
            for k in range(K):
                q = r[p * K + k]
                if q <= 0.0:
                    continue
                qc = q if q < _Q_MAX else _Q_MAX
                lz = c * log1p(-qc)
                ent -= c * q * log(q)
                E_jk[dj + k] += c * q
                V_jk[dj + k] += c * q * (1.0 - q)
                Z_jk[dj + k] += lz
                E_wk[dw + k] += c * q
                V_wk[dw + k] += c * q * (1.0 - q)
                Z_wk[dw + k] += lz
    return ent


def _pair_blocks(const int64_t[::1] indptr, int T):
    """First row of each of ``T`` blocks of about nnz / T pairs, and the end: the
    blocks of documents of the delayed schedule (``indptr`` by document), or of
    words (a pointer to the pairs by word)."""
    cdef int64_t D = indptr.shape[0] - 1, nnz = indptr[D]
    bounds = np.searchsorted(np.asarray(indptr), np.arange(T + 1) * (nnz / <double>T), side="left").astype(np.int64)
    bounds[0], bounds[T] = 0, D
    return np.maximum.accumulate(np.minimum(bounds, D))


def cv_statistics(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,
                  const floating[:, ::1] r,               # IN  (nnz, K)
                  double[:, ::1] E_jk, double[:, ::1] V_jk, double[:, ::1] Z_jk,   # OUT (n_docs, K)
                  double[:, ::1] E_wk, double[:, ::1] V_wk, double[:, ::1] Z_wk,   # OUT (n_words, K)
                  int n_threads=1):
    """E, V, Z of n_jk and n_kw from scratch ([CVHDP] (13)); returns the entropy
    ``-sum_p c_p sum_k r_pk log r_pk``.

    Equivalent to ``E_jk = A.T @ (c r)``, ``V_jk = A.T @ (c r (1 - r))``,
    ``Z_jk = A.T @ (c log1p(-min(r, 1 - 1e-15)))`` with A the pair-to-document
    indicator (and the pair-to-word indicator for the ``_wk`` arrays).

    Documents in ``n_threads`` blocks of the delayed schedule (``cv_sweep``),
    each block summing its word rows and entropy in corpus order, the blocks'
    sums added in block order: document rows are the same on any number of
    threads, word rows and entropy depend on it to rounding (one thread: one
    pass in corpus order).
    """
    cdef int64_t K = r.shape[1], D = indptr.shape[0] - 1, W = E_wk.shape[0], w, k
    cdef int T = n_threads, t
    if (r.shape[0] != indices.shape[0] or E_jk.shape[0] != D or V_jk.shape[0] != D or Z_jk.shape[0] != D
            or V_wk.shape[0] != W or Z_wk.shape[0] != W or E_jk.shape[1] != K or V_jk.shape[1] != K
            or Z_jk.shape[1] != K or E_wk.shape[1] != K or V_wk.shape[1] != K or Z_wk.shape[1] != K):
        raise ValueError("cv_statistics: inconsistent shapes")
    if T < 1:
        raise ValueError(f"cv_statistics: n_threads must be >= 1, got {T}")
    if K == 0 or D == 0 or W == 0:
        E_wk[:, :] = 0.0
        V_wk[:, :] = 0.0
        Z_wk[:, :] = 0.0
        return 0.0
    T = <int>min(T, D)
    cdef int64_t[::1] bv = _pair_blocks(indptr, T)
    extra = np.empty((T - 1, 3, W, K))          # the word rows of blocks 1.., zeroed by their threads
    ents = np.zeros(T)
    cdef double[:, :, :, ::1] xv = extra
    cdef double[::1] ev = ents
    cdef double ent = 0.0
    cdef bnp_csr_t m = csr_view(indptr, indices, counts, W)
    for t in prange(T, nogil=True, num_threads=T, schedule="static", chunksize=1):
        if t == 0:
            memset(&E_wk[0, 0], 0, W * K * sizeof(double))
            memset(&V_wk[0, 0], 0, W * K * sizeof(double))
            memset(&Z_wk[0, 0], 0, W * K * sizeof(double))
            ev[t] = _statistics_block(bv[0], bv[1], &m, &r[0, 0], &E_jk[0, 0], &V_jk[0, 0], &Z_jk[0, 0],
                                      &E_wk[0, 0], &V_wk[0, 0], &Z_wk[0, 0], K)
        else:
            memset(&xv[t - 1, 0, 0, 0], 0, 3 * W * K * sizeof(double))
            ev[t] = _statistics_block(bv[t], bv[t + 1], &m, &r[0, 0], &E_jk[0, 0], &V_jk[0, 0], &Z_jk[0, 0],
                                      &xv[t - 1, 0, 0, 0], &xv[t - 1, 1, 0, 0], &xv[t - 1, 2, 0, 0], K)
    if T > 1:
        for w in prange(W, nogil=True, num_threads=T, schedule="static"):
            for t in range(1, T):
                for k in range(K):
                    E_wk[w, k] += xv[t - 1, 0, w, k]
                    V_wk[w, k] += xv[t - 1, 1, w, k]
                    Z_wk[w, k] += xv[t - 1, 2, w, k]
    for t in range(T):
        ent += ents[t]
    return ent


cdef void _fold_in_log_row(int64_t K, const double *row, double *sv, const double[::1] prior,
                           const double *phi) noexcept nogil:
    """sv[2K:3K] <- the fold-in row of ``_fold_in_doc`` normalised in log space."""
    cdef int64_t k
    cdef double q, a, dv, m = -INFINITY, s = 0.0
    for k in range(K):
        q = row[k]
        a = prior[k] + _clamp0(sv[k] - q)
        dv = _clamp0(sv[K + k] - q * (1.0 - q))
        sv[2 * K + k] = ((log(a) + log(phi[k]) if a > 0.0 and phi[k] > 0.0 else -INFINITY)
                         - (dv / (2.0 * a * a) if dv > 0.0 else 0.0))
        m = max(m, sv[2 * K + k])
    for k in range(K):
        sv[2 * K + k] = exp(sv[2 * K + k] - m) if m > -INFINITY else 1.0
        s += sv[2 * K + k]
    for k in range(K):
        sv[2 * K + k] /= s


cdef void _fold_in_doc(int64_t j, const int64_t[::1] indptr, const int32_t[::1] indices,
                       const int32_t[::1] counts, const double[:, ::1] phi_wk, const double[::1] prior,
                       double ps, int64_t n_iter, double *rv, double *sv, double[:, ::1] theta) noexcept nogil:
    """cv_fold_in for document j; rv: (pairs of j) x K scratch, sv: 3 x K scratch."""
    cdef int64_t K = prior.shape[0], lo = indptr[j], p, k, it
    cdef double c, q, qn, a, s, m, dv, n_j = 0.0
    cdef double *row
    for k in range(K):
        sv[k] = 0.0
        sv[K + k] = 0.0
    for p in range(lo, indptr[j + 1]):
        c = counts[p]
        n_j += c
        row = rv + (p - lo) * K
        s = 0.0
        for k in range(K):
            row[k] = prior[k] * phi_wk[indices[p], k]
            s += row[k]
        for k in range(K):
            q = row[k] / s if s > 0.0 else 1.0 / K
            row[k] = q
            sv[k] += c * q
            sv[K + k] += c * q * (1.0 - q)
    for it in range(n_iter):
        for p in range(lo, indptr[j + 1]):
            c = counts[p]
            row = rv + (p - lo) * K
            # the row as products a phi exp(correction - its largest): one exp per topic, no log;
            # in log space where every product underflows
            m = -INFINITY
            for k in range(K):
                q = row[k]
                a = prior[k] + _clamp0(sv[k] - q)
                dv = _clamp0(sv[K + k] - q * (1.0 - q))
                # no variance, no correction: a * a underflows to 0 for priors alpha beta_k
                # below 1e-154, and 0 / 0 would make the row NaN
                sv[2 * K + k] = -(dv / (2.0 * a * a) if dv > 0.0 else 0.0)
                m = max(m, sv[2 * K + k])
            s = 0.0
            for k in range(K):
                q = row[k]
                sv[2 * K + k] = (prior[k] + _clamp0(sv[k] - q)) * phi_wk[indices[p], k] * exp(sv[2 * K + k] - m)
                s += sv[2 * K + k]
            if s <= 1e-280:
                _fold_in_log_row(K, row, sv, prior, &phi_wk[indices[p], 0])
                s = 1.0
            for k in range(K):
                q = row[k]
                qn = sv[2 * K + k] / s
                row[k] = qn
                sv[k] += c * (qn - q)
                sv[K + k] += c * (qn * (1.0 - qn) - q * (1.0 - q))
    for k in range(K):
        theta[j, k] = (prior[k] + _clamp0(sv[k])) / (ps + n_j)


def cv_fold_in(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,
               const double[:, ::1] phi_wk,    # IN  (n_words, K) topic-word probabilities, word-major
               const double[::1] prior,        # IN  (K,) document prior (alpha beta_k)
               int64_t n_iter,
               double[:, ::1] theta,           # OUT (n_docs, K) posterior mean proportions
               int n_threads=1):
    """Per-document collapsed variational updates with the topics held fixed.

    The document side of (15): ``r_jwk ∝ (prior_k + E^-_jk) phi_wk exp(-V^-_jk / (2 (prior_k + E^-_jk)^2))``,
    ``n_iter`` sequential passes over each document's pairs from
    ``r ∝ prior_k phi_wk``; returns ``theta_jk = (prior_k + E_jk) / (sum(prior) + N_j)``.
    Rows are formed as those products with one exp per topic (the exponents
    less their largest; faster than logs), in log space where
    every product underflows.
    Documents are independent: ``n_threads`` threads give the same bits as one.
    """
    cdef int64_t K = prior.shape[0], n_docs = indptr.shape[0] - 1, j, k
    if phi_wk.shape[1] != K or theta.shape[0] != n_docs or theta.shape[1] != K:
        raise ValueError("cv_fold_in: inconsistent shapes")
    if n_threads < 1:
        raise ValueError(f"cv_fold_in: n_threads must be >= 1, got {n_threads}")
    nnz_max = int(np.max(np.diff(np.asarray(indptr)))) if n_docs else 0
    rbuf = np.empty((n_threads, max(nnz_max, 1) * max(K, 1) + PAD), dtype=np.float64)
    stats = np.zeros((n_threads, 3 * max(K, 1) + PAD), dtype=np.float64)
    cdef double[:, ::1] rv = rbuf
    cdef double[:, ::1] sv = stats
    cdef double ps = 0.0
    for k in range(K):
        ps += prior[k]
    for j in prange(n_docs, nogil=True, num_threads=n_threads, schedule="dynamic"):
        _fold_in_doc(j, indptr, indices, counts, phi_wk, prior, ps, n_iter, &rv[threadid(), 0],
                     &sv[threadid(), 0], theta)
