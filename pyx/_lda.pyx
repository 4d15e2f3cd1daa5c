"""Kernels of the LDA family: collapsed Gibbs, standard VB, collapsed VB and the
hybrids of Welling, Teh & Kappen (2008), [HYB] sections 3-5.

Each kernel is one call per sweep over all documents, releases the GIL, and
updates caller-owned arrays in place. Shapes and types:

* corpus: CSR ``indptr`` (int64, D + 1), ``indices`` (int32 word ids),
  ``counts`` (int32 > 0); a pair is one non-zero (j, w) with count c_jw. The
  nogil kernels take it as one ``bnp_csr_t`` (``csr_view`` of the three arrays).
* ``alpha`` (K,) and ``eta`` (W,) are the Dirichlet priors, ``eta_tot = eta.sum()``.
* sampled counts are integers: ``ndk`` (D, K) int32, ``nwk`` (W, K) int32
  (word-major: a token touches one contiguous row), ``nk`` (K,) int64;
  ``z`` (one int32 topic per sampled token, tokens in CSR order).
* variational counts are doubles with the same shapes; ``r`` holds one
  responsibility row per variational pair (M_vb, K), pairs in CSR order.

The threshold of the hybrids ([HYB] eq 14): a pair with c_jw <= threshold is
sampled token by token, the others are updated variationally. Threshold -1
gives pure variational sweeps, a threshold >= max c_jw pure Gibbs sweeps.
"""
from contextlib import nullcontext

import numpy as np
cimport numpy as cnp
from cython.parallel cimport parallel, prange, threadid
from libc.math cimport exp, fabs, log, INFINITY
from libc.stdint cimport int32_t, int64_t, uint64_t
from libc.stdlib cimport calloc, free
from libc.string cimport memcpy, memset

from bnpcore._threads import map_rows
from bnpcore.kernels.parallel cimport PAD
from bnpcore.kernels.rng cimport bitgen_of, bnp_bitgen_t, bnp_rng_uniform, bnp_stream_t, bnp_stream_init
from bnpcore.kernels.sparse cimport bnp_csr_t, csr_view
from bnpcore.kernels.special cimport bnp_digamma

cnp.import_array()

# variational update of a pair ([HYB] eqs 11, 21)
cdef enum:
    M_SVB = 0    # standard VB: psi of expected counts, own contribution included
    M_CVB0 = 1   # collapsed VB, zero order: expected counts without the token
    M_CVB = 2    # collapsed VB, second order (Gaussian correction with variances)
MODE_SVB, MODE_CVB0, MODE_CVB = M_SVB, M_CVB0, M_CVB

# responsibilities whose unnormalised sum falls below this are recomputed in log space
cdef double _TINY = 1e-280
cdef double _SCALED = 1e-100     # svb_parallel_step: c / z below 1e100 c, so its sums stay finite


# ---------------------------------------------------------------------------
# small shared helpers
# ---------------------------------------------------------------------------

cdef inline double gibbs_weight(double nkw, double njk, double nk, double eta_w, double alpha_k,
                                double eta_tot) noexcept nogil:
    """Unnormalised collapsed conditional ([HYB] eq 12 / 25) from counts without the token."""
    return (nkw + eta_w) * (njk + alpha_k) / (nk + eta_tot)


cdef inline int64_t search_cumulative(const double *cum, int64_t n, double u) noexcept nogil:
    """First i with cum[i] > u (cum non-decreasing); n - 1 if rounding leaves none."""
    cdef int64_t i = 0
    while i < n - 1 and cum[i] <= u:
        i += 1
    return i


cdef extern from *:
    """
    #include "bnpcore/bnpcore.h"
    #include "bnpcore/internal/simd.h"

    /* The per-pair loops below are compiled for AVX2 and for the baseline ISA
     * (BNP_SIMD_CLONES); with the reduction order written out, both clones give
     * bit-identical results. */

    /* sum(x[:n]) with four independent partial sums (no serial add chain). */
    static inline double bnp__sum4(const double *x, int64_t n) {
        double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
        int64_t i = 0;
        for (; i + 4 <= n; i += 4) { s0 += x[i]; s1 += x[i + 1]; s2 += x[i + 2]; s3 += x[i + 3]; }
        for (; i < n; ++i) s0 += x[i];
        return (s0 + s1) + (s2 + s3);
    }

    /* r <- scale * w, adding c (scale w - r) to the counts nd, nw, nk; returns
     * sum_k c |scale w - r|, accumulated in the same pass in bnp__sum4's order. */
    static inline double bnp__apply_row_impl(double *restrict r, const double *restrict w, double scale,
                                             double c, double *restrict nd, double *restrict nw,
                                             double *restrict nk, int64_t K) {
        double s[4] = {0.0, 0.0, 0.0, 0.0};
        int64_t k = 0, i;
        for (; k + 4 <= K; k += 4) {
            for (i = 0; i < 4; ++i) {
                double x = scale * w[k + i], d = c * (x - r[k + i]);
                nd[k + i] += d; nw[k + i] += d; nk[k + i] += d;
                r[k + i] = x;
                s[i] += fabs(d);
            }
        }
        for (; k < K; ++k) {
            double x = scale * w[k], d = c * (x - r[k]);
            nd[k] += d; nw[k] += d; nk[k] += d;
            r[k] = x;
            s[0] += fabs(d);
        }
        return (s[0] + s[1]) + (s[2] + s[3]);
    }

    BNP_SIMD_CLONES
    static double bnp__apply_row(double *restrict r, const double *restrict w, double scale, double c,
                                 double *restrict nd, double *restrict nw, double *restrict nk, int64_t K) {
        return bnp__apply_row_impl(r, w, scale, c, nd, nw, nk, K);
    }

    /* One CVB0 pair update (Asuncion et al. 2009, zero order): weights from the
     * counts without one copy of the pair, clamped at 0, normalised into r. */
    BNP_SIMD_CLONES
    static double bnp__cvb0_pair(double *restrict r, double *restrict w, double *restrict nd,
                                 double *restrict nw, double *restrict nk, const double *restrict alpha,
                                 double eta_w, double eta_tot, double c, int64_t K) {
        int64_t k;
        for (k = 0; k < K; ++k) {
            double x = nw[k] - r[k], y = nd[k] - r[k], z = nk[k] - r[k];
            w[k] = ((x > 0.0 ? x : 0.0) + eta_w) * ((y > 0.0 ? y : 0.0) + alpha[k])
                   / ((z > 0.0 ? z : 0.0) + eta_tot);
        }
        return bnp__apply_row_impl(r, w, 1.0 / bnp__sum4(w, K), c, nd, nw, nk, K);
    }
    """
    void BNP_PREFETCH(const void *p) noexcept nogil
    double sum_unrolled "bnp__sum4"(const double *x, int64_t n) noexcept nogil
    double apply_row "bnp__apply_row"(double *r, double *w, double scale, double c, double *nd, double *nw,
                                      double *nk, int64_t K) noexcept nogil
    double cvb0_pair "bnp__cvb0_pair"(double *r, double *w, double *nd, double *nw, double *nk,
                                      const double *alpha, double eta_w, double eta_tot, double c,
                                      int64_t K) noexcept nogil


cdef inline void prefetch_row(const double *row, int64_t n) noexcept nogil:
    """Hint the cache lines of row[:n] into the cache (a no-op without GCC/Clang)."""
    cdef int64_t i
    for i in range(0, n, 8):
        BNP_PREFETCH(row + i)


cdef inline double pos(double x) noexcept nogil:
    """max(x, 0) (compiles to maxsd; libm's fmax is an out-of-line call)."""
    return x if x > 0.0 else 0.0


cdef inline double normalise_log(double *lw, int64_t n) noexcept nogil:
    """lw <- exp(lw - max) / sum; returns log of the normaliser (max + log sum)."""
    cdef double m = -INFINITY, s = 0.0
    cdef int64_t k
    for k in range(n):
        if lw[k] > m:
            m = lw[k]
    for k in range(n):
        lw[k] = exp(lw[k] - m)
        s += lw[k]
    for k in range(n):
        lw[k] /= s
    return m + log(s)


# ---------------------------------------------------------------------------
# counts from state
# ---------------------------------------------------------------------------

def _partition_sizes(counts, int threshold):
    """(sampled tokens, variational pairs) of the pairs' counts at ``threshold``."""
    c = np.asarray(counts)
    sampled = c <= threshold
    return int(c[sampled].sum(dtype=np.int64)), int(np.count_nonzero(~sampled))


def count_samples(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,  # IN
                  int threshold, const int32_t[::1] z,                                              # IN
                  int32_t[:, ::1] ndk, int32_t[:, ::1] nwk, int64_t[::1] nk):                       # OUT
    """Recount the sampled tokens (pairs with count <= threshold) from ``z``.

    Equivalent NumPy (sampled tokens only, CSR order)::

        ndk[:] = 0; np.add.at(ndk, (doc_of_token, z), 1)
        nwk[:] = 0; np.add.at(nwk, (word_of_token, z), 1);  nk[:] = ndk.sum(0)
    """
    cdef int64_t D = indptr.shape[0] - 1, K = ndk.shape[1], j, p, zi = 0, c
    cdef int32_t w, t
    n_tokens, _ = _partition_sizes(counts, threshold)
    if z.shape[0] != n_tokens:
        raise ValueError(f"z has {z.shape[0]} topics for {n_tokens} sampled tokens")
    if n_tokens and not (0 <= np.min(z) and np.max(z) < K):
        raise ValueError(f"topics in z must lie in [0, {K})")
    if ndk.shape[0] != D or nwk.shape[1] != K or nk.shape[0] != K:
        raise ValueError("count arrays do not match the corpus and topics")
    with nogil:
        ndk[:, :] = 0
        nwk[:, :] = 0
        nk[:] = 0
        for j in range(D):
            for p in range(indptr[j], indptr[j + 1]):
                if counts[p] > threshold:
                    continue
                w = indices[p]
                for c in range(counts[p]):
                    t = z[zi]
                    zi += 1
                    ndk[j, t] += 1
                    nwk[w, t] += 1
                    nk[t] += 1


def count_word_topics(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,  # IN
                      const int32_t[::1] z,                                                             # IN
                      int32_t[:, ::1] nwk, int64_t[::1] nk):                                            # IN/OUT
    """Add the tokens' topics ``z`` (one per token, CSR order) to the word-topic and
    topic counts (no document counts: the samplers rebuild those per document).

    Equivalent NumPy: ``np.add.at(nwk, (word_of_token, z), 1); nk += np.bincount(z, minlength=K)``.
    """
    cdef int64_t D = indptr.shape[0] - 1, K = nwk.shape[1], j, p, zi = 0, c
    cdef int32_t w, t
    if z.shape[0] != np.asarray(counts).sum(dtype=np.int64):
        raise ValueError(f"z has {z.shape[0]} topics for {np.asarray(counts).sum(dtype=np.int64)} tokens")
    if z.shape[0] and not (0 <= np.min(z) and np.max(z) < K):
        raise ValueError(f"topics in z must lie in [0, {K})")
    if nk.shape[0] != K or (indices.shape[0] and not (0 <= np.min(indices) and np.max(indices) < nwk.shape[0])):
        raise ValueError("count arrays do not match the corpus and topics")
    with nogil:
        for j in range(D):
            for p in range(indptr[j], indptr[j + 1]):
                w = indices[p]
                for c in range(counts[p]):
                    t = z[zi]
                    zi += 1
                    nwk[w, t] += 1
                    nk[t] += 1


def doc_topic_counts(const int64_t[::1] tok_ptr,    # IN  token offsets of the documents
                     const int32_t[::1] z,          # IN  topic of every token
                     const int64_t[::1] column,     # IN  (n_topics,) output column of each topic
                     double[:, ::1] out):           # IN/OUT (n_docs, K) n_jk added in the columns
    """Add the document-topic counts of the labels ``z`` to ``out``:
    ``out[j, column[z_t]] += 1`` over the tokens t of document j (the samplers
    store no counts per document and build them here when asked). Equivalent
    NumPy: ``np.add.at(out, (doc_of_token, column[z]), 1)``."""
    cdef int64_t j, t, K = out.shape[1]
    if out.shape[0] != tok_ptr.shape[0] - 1 or tok_ptr[tok_ptr.shape[0] - 1] != z.shape[0]:
        raise ValueError("out must have one row per document and tok_ptr end at the number of labels")
    if z.shape[0] and not (0 <= np.min(z) and np.max(z) < column.shape[0]):
        raise ValueError(f"labels must lie in [0, {column.shape[0]})")
    if column.shape[0] and not (0 <= np.min(column) and np.max(column) < K):
        raise ValueError(f"columns must lie in [0, {K})")
    with nogil:
        for j in range(out.shape[0]):
            for t in range(tok_ptr[j], tok_ptr[j + 1]):
                out[j, column[z[t]]] += 1.0


def count_expected(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,  # IN
                   int threshold, const double[:, ::1] r,                                            # IN
                   double[:, ::1] ndk, double[:, ::1] nwk, double[::1] nk,                           # OUT
                   double[:, ::1] var_dk=None, double[:, ::1] var_wk=None, double[::1] var_k=None):  # OUT
    """Expected counts (and, if given, their variances) of the variational pairs
    (count > threshold) from the responsibility rows ``r``.

    Equivalent NumPy: ``ndk[j] = sum_w c_jw r_jw``, ``nwk[w] = sum_j c_jw r_jw``,
    ``nk = ndk.sum(0)``; variances the same with ``r (1 - r)`` in place of ``r``.
    """
    cdef int64_t D = indptr.shape[0] - 1, K = ndk.shape[1], j, p, k, row = 0
    cdef int32_t w
    cdef double c, x
    cdef bint with_var = var_dk is not None
    if with_var and (var_wk is None or var_k is None):
        raise ValueError("give all three variance arrays or none")
    _, n_rows = _partition_sizes(counts, threshold)
    if r.shape[0] != n_rows or r.shape[1] != K or ndk.shape[0] != D or nk.shape[0] != K:
        raise ValueError(f"r must have one row of {K} per variational pair ({n_rows}), ndk one row per document")
    with nogil:
        ndk[:, :] = 0
        nwk[:, :] = 0
        nk[:] = 0
        if with_var:
            var_dk[:, :] = 0
            var_wk[:, :] = 0
            var_k[:] = 0
        for j in range(D):
            for p in range(indptr[j], indptr[j + 1]):
                if counts[p] <= threshold:
                    continue
                w = indices[p]
                c = counts[p]
                for k in range(K):
                    x = c * r[row, k]
                    ndk[j, k] += x
                    nwk[w, k] += x
                if with_var:
                    for k in range(K):
                        x = c * r[row, k] * (1.0 - r[row, k])
                        var_dk[j, k] += x
                        var_wk[w, k] += x
                row += 1
        for j in range(D):
            for k in range(K):
                nk[k] += ndk[j, k]
                if with_var:
                    var_k[k] += var_dk[j, k]


# ---------------------------------------------------------------------------
# collapsed Gibbs sampling with the sparse bucket decomposition (SparseLDA)
# ---------------------------------------------------------------------------
#
# p(z = k | rest) ∝ (n_kw + eta_w)(n_jk + alpha_k) / (n_k + eta_tot) splits into
#   word bucket  q_k = n_kw coef_k                 (k in the topics of word w)
#   doc bucket   r_k = eta_w n_jk cden_k           (k in the topics of document j)
#   prior bucket s_k = eta_w alpha_k cden_k        (all k)
# with cden_k = 1 / (n_k + eta_tot) and coef_k = (n_jk + alpha_k) cden_k, so that
# q_k + r_k + s_k is exactly the conditional (Yao, Mimno & McCallum 2009). The
# sums R = sum_{k in doc} n_jk cden_k and S = sum_k alpha_k cden_k are kept up to
# date as counts change and recomputed at every document. Each word keeps the
# list of its topics with n_kw > 0 (wtopics[w, :wlen[w]]), ordered by
# decreasing n_kw so that the search through the word bucket stops early.

cdef struct SparseGibbs:
    int64_t K
    const double *alpha
    double eta_tot
    int64_t *nk
    int32_t *nd_row      # n_jk of the current document
    int32_t *wrow        # n_kw of the current word
    int32_t *wl          # topics of the current word, decreasing n_kw
    int32_t *wlen        # its length
    double *cden         # 1 / (n_k + eta_tot)
    double *coef         # (n_jk + alpha_k) cden_k of the current document
    double *qcum         # cumulative word bucket
    int32_t *dlist       # topics of the current document
    int32_t *dpos        # position of each topic in dlist
    int64_t nd           # length of dlist
    double R
    double S


cdef inline void _sg_change(SparseGibbs *s, int32_t t, int32_t delta) noexcept nogil:
    """Move one token of the current document and word into (+1) or out of (-1) topic t."""
    cdef double cd = s.cden[t]
    cdef int32_t n = s.nd_row[t], i, last, cnt
    s.S -= s.alpha[t] * cd
    s.R -= n * cd
    s.nk[t] += delta
    cd = 1.0 / (s.nk[t] + s.eta_tot)
    s.cden[t] = cd
    if delta > 0 and n == 0:
        s.dpos[t] = <int32_t>s.nd
        s.dlist[s.nd] = t
        s.nd += 1
    n += delta
    s.nd_row[t] = n
    if n == 0:
        last = s.dlist[s.nd - 1]
        s.dlist[s.dpos[t]] = last
        s.dpos[last] = s.dpos[t]
        s.nd -= 1
    s.S += s.alpha[t] * cd
    s.R += n * cd
    s.coef[t] = (n + s.alpha[t]) * cd
    # word list: keep it sorted by decreasing count with adjacent swaps
    cnt = s.wrow[t]
    if delta > 0:
        if cnt == 0:
            s.wl[s.wlen[0]] = t
            s.wlen[0] += 1
        s.wrow[t] = cnt + 1
        i = 0
        while s.wl[i] != t:
            i += 1
        while i > 0 and s.wrow[s.wl[i - 1]] < cnt + 1:
            s.wl[i] = s.wl[i - 1]
            i -= 1
        s.wl[i] = t
    else:
        s.wrow[t] = cnt - 1
        i = 0
        while s.wl[i] != t:
            i += 1
        while i + 1 < s.wlen[0] and s.wrow[s.wl[i + 1]] > cnt - 1:
            s.wl[i] = s.wl[i + 1]
            i += 1
        s.wl[i] = t
        if cnt == 1:
            s.wlen[0] -= 1


cdef inline void _sg_start_doc(SparseGibbs *s) noexcept nogil:
    cdef int64_t k
    s.nd = 0
    s.R = 0.0
    s.S = 0.0
    for k in range(s.K):
        s.coef[k] = (s.nd_row[k] + s.alpha[k]) * s.cden[k]
        s.S += s.alpha[k] * s.cden[k]
        if s.nd_row[k] > 0:
            s.dpos[k] = <int32_t>s.nd
            s.dlist[s.nd] = <int32_t>k
            s.nd += 1
            s.R += s.nd_row[k] * s.cden[k]


cdef inline double _sg_word_bucket(SparseGibbs *s) noexcept nogil:
    cdef int32_t i, k
    cdef double q = 0.0
    for i in range(s.wlen[0]):
        k = s.wl[i]
        q += s.wrow[k] * s.coef[k]
        s.qcum[i] = q
    return q


cdef inline int32_t _sg_draw(SparseGibbs *s, double eta_w, double u01) noexcept nogil:
    """Topic drawn from the conditional of the removed token with one uniform."""
    cdef double q = _sg_word_bucket(s)
    cdef double u = u01 * (q + eta_w * (s.R + s.S)), acc
    cdef int64_t i
    cdef int32_t k
    if u < q:
        return s.wl[search_cumulative(s.qcum, s.wlen[0], u)]
    u = (u - q) / eta_w
    if u < s.R and s.nd > 0:
        acc = 0.0
        for i in range(s.nd):
            k = s.dlist[i]
            acc += s.nd_row[k] * s.cden[k]
            if u < acc:
                return k
        return s.dlist[s.nd - 1]
    u -= s.R
    acc = 0.0
    for k in range(s.K):
        acc += s.alpha[k] * s.cden[k]
        if u < acc:
            return k
    return <int32_t>(s.K - 1)


cdef inline void _sg_bind(SparseGibbs *s, int64_t K, int64_t *nk, const double *alpha, double eta_tot,
                          double *scratch, int32_t *iscratch) noexcept nogil:
    """Bind the topic totals nk and the scratch (3 K doubles, 2 K int32) to s;
    the caller sets the document row nd_row."""
    cdef int64_t k
    s.K = K
    s.alpha = alpha
    s.eta_tot = eta_tot
    s.nk = nk
    s.cden = scratch
    s.coef = scratch + K
    s.qcum = scratch + 2 * K
    s.dlist = iscratch
    s.dpos = iscratch + K
    for k in range(K):
        s.cden[k] = 1.0 / (nk[k] + eta_tot)


def _check_sparse_state(nwk, nk, wtopics, wlen, alpha, scratch, iscratch, n_int):
    K = nwk.shape[1]
    if nk.shape[0] != K or wtopics.shape[1] != K or alpha.shape[0] != K:
        raise ValueError("count arrays disagree on the number of topics")
    if wtopics.shape[0] != nwk.shape[0] or wlen.shape[0] != nwk.shape[0]:
        raise ValueError("word lists disagree with the word counts")
    if scratch.shape[0] < 3 * K or iscratch.shape[0] < n_int * K:
        raise ValueError(f"scratch too small: need 3 K doubles and {n_int} K int32")


def word_topic_lists(const int32_t[:, ::1] nwk, int32_t[:, ::1] wtopics, int32_t[::1] wlen):  # IN, OUT, OUT
    """Topics of each word with a positive count, by decreasing count (ties by
    topic id): ``wtopics[w, :wlen[w]]``. Equivalent NumPy:
    ``order = np.lexsort((np.arange(K), -nwk[w])); order[nwk[w, order] > 0]``."""
    cdef int64_t W = nwk.shape[0], K = nwk.shape[1], w, k, i, n
    cdef int32_t t
    with nogil:
        for w in range(W):
            n = 0
            for k in range(K):
                if nwk[w, k] > 0:
                    # insertion sort (stable): lists are short and built once
                    i = n
                    while i > 0 and nwk[w, wtopics[w, i - 1]] < nwk[w, k]:
                        wtopics[w, i] = wtopics[w, i - 1]
                        i -= 1
                    wtopics[w, i] = <int32_t>k
                    n += 1
            wlen[w] = <int32_t>n


def cgs_sweep(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,  # IN corpus
              const double[::1] alpha, const double[::1] eta, double eta_tot,                   # IN priors
              int32_t[::1] z, int32_t[:, ::1] nwk, int64_t[::1] nk,                            # IN/OUT state
              int32_t[:, ::1] wtopics, int32_t[::1] wlen,                                      # IN/OUT lists
              double[::1] scratch, int32_t[::1] iscratch, generator):                          # scratch, rng
    """One collapsed Gibbs sweep over every token, documents in order ([HYB] eq 12).

    Each token is removed from the counts, its topic drawn from
    ``p(k) ∝ (nwk[w, k] + eta[w]) (n_jk + alpha[k]) / (nk[k] + eta_tot)``
    with one uniform of ``generator``, and added back. The draw uses the exact
    sparse bucket decomposition (see the comment above), so its cost per token
    is the number of topics of the word and document rather than K. The
    document counts n_jk are not stored: each document's row is rebuilt from
    its tokens' topics ``z`` when the sweep reaches it (in ``iscratch``).
    ``wtopics``/``wlen`` must be the lists of ``word_topic_lists(nwk)``;
    scratch holds 3 K doubles and 3 K int32.

    The topics in ``z``, the word ids and the token counts are checked as the
    sweep reaches each document, before any of its tokens moves (no separate
    pass over the tokens): bad input raises ValueError with the documents
    before the bad one sampled and the state consistent.
    """
    _check_sparse_state(nwk, nk, wtopics, wlen, alpha, scratch, iscratch, 3)
    cdef int64_t D = indptr.shape[0] - 1, K = nwk.shape[1]
    cdef SparseGibbs s
    cdef bnp_bitgen_t *g = bitgen_of(generator)
    cdef bnp_csr_t m = csr_view(indptr, indices, counts, nwk.shape[0])
    cdef int status
    with generator.bit_generator.lock, nogil:
        _sg_bind(&s, K, &nk[0], &alpha[0], eta_tot, &scratch[0], &iscratch[0])
        s.nd_row = &iscratch[2 * K]
        status = _cgs_block(&s, &m, 0, D, &eta[0], &z[0] if z.shape[0] else NULL, z.shape[0], &nwk[0, 0],
                            &wtopics[0, 0], &wlen[0], g)
    if status != _BLOCK_OK:
        raise ValueError(_BLOCK_ERRORS[status].format(K=K, W=nwk.shape[0]))


def cgs_conditional(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,
                    const double[::1] alpha, const double[::1] eta, double eta_tot,
                    const int32_t[::1] z, int32_t[:, ::1] ndk, int32_t[:, ::1] nwk, int64_t[::1] nk,
                    int32_t[:, ::1] wtopics, int32_t[::1] wlen, int64_t token):
    """The normalised conditional of one token as the sparse sampler of
    ``cgs_sweep`` sees it (the three buckets after removing the token from the
    counts), for tests. The state arrays are restored on return.

    Equivalent NumPy: ``p = (nwk[w] - e_t + eta[w]) (ndk[j] - e_t + alpha) /
    (nk - e_t + eta_tot); p / p.sum()`` with ``e_t`` the indicator of the token's topic.
    """
    K = nwk.shape[1]
    scratch = np.zeros(3 * K)
    iscratch = np.zeros(2 * K, dtype=np.int32)
    _check_sparse_state(nwk, nk, wtopics, wlen, alpha, scratch, iscratch, 2)
    if ndk.shape[1] != K:
        raise ValueError("count arrays disagree on the number of topics")
    cdef double[::1] sv = scratch
    cdef int32_t[::1] iv = iscratch
    cdef SparseGibbs s
    cdef int64_t D = indptr.shape[0] - 1, j, p, zi = 0, k, i
    cdef int32_t w = -1, t = -1
    out = np.zeros(K)
    cdef double[::1] ov = out
    for j in range(D):
        for p in range(indptr[j], indptr[j + 1]):
            if token < zi + counts[p]:
                w = indices[p]
                t = z[token]
                break
            zi += counts[p]
        if w >= 0:
            break
    if w < 0:
        raise IndexError(f"token {token} out of range")
    _sg_bind(&s, K, &nk[0], &alpha[0], eta_tot, &sv[0], &iv[0])
    s.nd_row = &ndk[j, 0]
    _sg_start_doc(&s)
    s.wrow = &nwk[w, 0]
    s.wl = &wtopics[w, 0]
    s.wlen = &wlen[w]
    _sg_change(&s, t, -1)
    _sg_word_bucket(&s)
    for i in range(s.wlen[0]):
        ov[s.wl[i]] += s.wrow[s.wl[i]] * s.coef[s.wl[i]]
    for i in range(s.nd):
        k = s.dlist[i]
        ov[k] += eta[w] * s.nd_row[k] * s.cden[k]
    for k in range(K):
        ov[k] += eta[w] * alpha[k] * s.cden[k]
    _sg_change(&s, t, 1)
    return out / out.sum()


# ---------------------------------------------------------------------------
# sequential sweeps: SVB (sequential schedule), CVB, CVB0 and the hybrids
# ---------------------------------------------------------------------------

cdef struct Sequential:
    int64_t K
    int mode
    int32_t threshold
    bint do_cg, do_vb
    const double *alpha
    const double *eta
    double eta_tot
    double *r
    int64_t n_rows       # of r
    int32_t *z
    double *vb_dk
    double *vb_wk
    double *vb_k
    double *var_dk       # NULL unless mode == MODE_CVB
    double *var_wk
    double *var_k
    int32_t *cg_dk       # live sampled counts (NULL without sampled pairs)
    int32_t *cg_wk
    int64_t *cg_k
    # samples the variational update averages over ([HYB] eq 21 with <psi>: digammas averaged over samples, not of averaged counts):
    # n_samples x (D K | W K | K) arrays, or the live arrays themselves (1 sample)
    int64_t n_samples
    const int32_t *st_dk
    const int32_t *st_wk
    const int64_t *st_k
    int64_t st_dk_stride
    int64_t st_wk_stride
    double *work         # 2 K doubles
    bnp_bitgen_t *g
    double delta         # sum over variational pairs of c_jw sum_k |r_new - r_old|
    double entropy       # - sum c_jw r log r of the new rows (MODE_SVB)


cdef struct PaddedSequential:
    # one thread's state in the parallel sweep, clear of the next one's cache lines
    Sequential s
    double pad[PAD]


cdef inline double _sampled(const Sequential *a, const int32_t *st, int64_t stride, int64_t s,
                            int64_t offset) noexcept nogil:
    """Sampled document- or word-topic count of sample s at offset (0 without samples)."""
    return st[s * stride + offset] if a.n_samples > 0 else 0.0


cdef inline double _sampled_k(const Sequential *a, int64_t s, int64_t k) noexcept nogil:
    """Sampled topic total of sample s (0 without samples)."""
    return a.st_k[s * a.K + k] if a.n_samples > 0 else 0.0


cdef inline double _cvb_factor(const Sequential *a, int64_t j, int32_t w, int64_t k, int64_t s, double ro,
                               double *corr) noexcept nogil:
    """(N^-_kw + eta_w)(N^-_jk + alpha_k) / (N^-_k + eta_tot) of sample s, and in *corr
    the second-order exponent -V^-_jk/(2 e_jk^2) - V^-_kw/(2 e_kw^2) + V^-_k/(2 e_k^2)."""
    cdef int64_t K = a.K
    cdef double vo = ro * (1.0 - ro)
    cdef double ekw = pos(a.vb_wk[w * K + k] + _sampled(a, a.st_wk, a.st_wk_stride, s, w * K + k) - ro) + a.eta[w]
    cdef double ejk = pos(a.vb_dk[j * K + k] + _sampled(a, a.st_dk, a.st_dk_stride, s, j * K + k) - ro) + a.alpha[k]
    cdef double ek = pos(a.vb_k[k] + _sampled_k(a, s, k) - ro) + a.eta_tot
    corr[0] = (-pos(a.var_wk[w * K + k] - vo) / (2.0 * ekw * ekw)
               - pos(a.var_dk[j * K + k] - vo) / (2.0 * ejk * ejk)
               + pos(a.var_k[k] - vo) / (2.0 * ek * ek))
    return ekw * ejk / ek


cdef inline void _vb_pair(Sequential *a, int64_t j, int32_t w, double c, double *rrow) noexcept nogil:
    """Variational update of pair (j, w) with count c, responsibility row rrow."""
    cdef int64_t K = a.K, k, s, S = a.n_samples
    cdef double *lw = a.work
    cdef double *factor = a.work + K
    cdef double *ndk = a.vb_dk + j * K
    cdef double *nwk = a.vb_wk + w * K
    cdef double eta_w = a.eta[w], x, ro, rn, corr, m, inv
    if a.mode == M_CVB0:
        # zero order: expected counts without one copy of the pair (no samples here)
        a.delta += cvb0_pair(rrow, lw, ndk, nwk, a.vb_k, a.alpha, eta_w, a.eta_tot, c, K)
        return
    elif a.mode == M_CVB and S <= 1:
        # one sample: product of the factors times one exp of the corrections
        m = -INFINITY
        for k in range(K):
            factor[k] = _cvb_factor(a, j, w, k, 0, rrow[k], &corr)
            lw[k] = corr
            if corr > m:
                m = corr
        for k in range(K):
            lw[k] = factor[k] * exp(lw[k] - m)
        inv = 1.0 / sum_unrolled(lw, K)
        for k in range(K):
            lw[k] *= inv
    else:
        # averages over samples of psi (SVB) or of the CVB log terms
        for k in range(K):
            ro = rrow[k]
            x = 0.0
            for s in range(S if S > 0 else 1):
                if a.mode == M_SVB:
                    # counts clamped at 0 as in _cvb_factor: rounding leaves ~-1e-16 where 0 is
                    # meant, and psi(prior - 1e-16) is on the pole for priors below that
                    x += (bnp_digamma(pos(nwk[k] + _sampled(a, a.st_wk, a.st_wk_stride, s, w * K + k)) + eta_w)
                          - bnp_digamma(pos(a.vb_k[k] + _sampled_k(a, s, k)) + a.eta_tot)
                          + bnp_digamma(pos(ndk[k] + _sampled(a, a.st_dk, a.st_dk_stride, s, j * K + k))
                                        + a.alpha[k]))
                else:
                    x += log(_cvb_factor(a, j, w, k, s, ro, &corr)) + corr
            lw[k] = x / S if S > 1 else x
        normalise_log(lw, K)
    if a.mode == M_CVB:
        for k in range(K):
            ro = rrow[k]
            rn = lw[k]
            x = c * (rn * (1.0 - rn) - ro * (1.0 - ro))
            a.var_dk[j * K + k] += x
            a.var_wk[w * K + k] += x
            a.var_k[k] += x
    a.delta += apply_row(rrow, lw, 1.0, c, ndk, nwk, a.vb_k, K)
    if a.mode == M_SVB:
        for k in range(K):
            rn = rrow[k]
            if rn > 0.0:
                a.entropy -= c * rn * log(rn)


cdef inline int32_t _cg_token(Sequential *a, int64_t j, int32_t w, int32_t t) noexcept nogil:
    """Gibbs draw of one sampled token with topic t ([HYB] eq 25): counts are the
    variational expectations plus the current sample, without the token."""
    cdef int64_t K = a.K, k
    cdef int32_t *cdk = a.cg_dk + j * K
    cdef int32_t *cwk = a.cg_wk + w * K
    cdef double *cum = a.work
    cdef double *ndk = a.vb_dk + j * K
    cdef double *nwk = a.vb_wk + w * K
    cdef double eta_w = a.eta[w], tot = 0.0
    cdk[t] -= 1
    cwk[t] -= 1
    a.cg_k[t] -= 1
    for k in range(K):
        tot += gibbs_weight(nwk[k] + cwk[k], ndk[k] + cdk[k], a.vb_k[k] + a.cg_k[k], eta_w,
                            a.alpha[k], a.eta_tot)
        cum[k] = tot
    t = <int32_t>search_cumulative(cum, K, bnp_rng_uniform(a.g) * tot)
    cdk[t] += 1
    cwk[t] += 1
    a.cg_k[t] += 1
    return t


cdef void _sequential_sweep(Sequential *a, const bnp_csr_t *m, int64_t first, int64_t last) noexcept nogil:
    """The updates of ``sequential_sweep`` for documents ``first`` to ``last``
    (excluded) of ``m``; ``a.r`` and ``a.z`` start at the first one's rows and tokens."""
    cdef const int64_t *indptr = m.indptr
    cdef const int32_t *indices = m.indices
    cdef const int32_t *counts = m.counts
    cdef int64_t j, p, c, row = 0, zi = 0, end = indptr[last]
    cdef int32_t w
    for j in range(first, last):
        for p in range(indptr[j], indptr[j + 1]):
            w = indices[p]
            if p + 1 < end:     # the next pair's word row is a random row of a large array
                prefetch_row(a.vb_wk + indices[p + 1] * a.K, a.K)
            if row + 8 < a.n_rows:  # responsibility rows stream in faster when asked for ahead
                prefetch_row(a.r + (row + 8) * a.K, a.K)
            if counts[p] > a.threshold:
                if a.do_vb:
                    _vb_pair(a, j, w, counts[p], a.r + row * a.K)
                row += 1
            else:
                if a.do_cg:
                    for c in range(counts[p]):
                        a.z[zi + c] = _cg_token(a, j, w, a.z[zi + c])
                zi += counts[p]


cdef struct SweepSettings:
    # what one sequential sweep does; from Python, a dict with these keys
    int mode             # MODE_SVB, MODE_CVB0 or MODE_CVB: the variational update
    int threshold        # pairs with c_jw <= threshold are sampled, the others variational
    bint do_cg           # draw the sampled tokens
    bint do_vb           # update the variational pairs


def sequential_sweep(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,  # IN corpus
                     const double[::1] alpha, const double[::1] eta, double eta_tot,                  # IN priors
                     SweepSettings settings,                                                          # IN
                     double[:, ::1] r, int32_t[::1] z,                                                # IN/OUT
                     tuple expected, tuple variances, tuple sampled,                                  # IN/OUT counts
                     tuple samples,                                                                   # IN
                     double[::1] work, generator):                                                    # scratch, rng
    """One sequential sweep, documents and pairs in CSR order: a variational
    update of every pair with c_jw > threshold (if ``do_vb``) and a Gibbs draw of
    every token of the other pairs (if ``do_cg``). Counts change immediately.

    ``settings`` is a dict ``{"mode", "threshold", "do_cg", "do_vb"}`` (every key
    required). The counts come as triples (document-topic, word-topic, topic):

    * ``expected = (vb_dk, vb_wk, vb_k)``: float64 (D, K), (W, K), (K,), the
      variational pairs' expected counts;
    * ``variances = (var_dk, var_wk, var_k)``: their variances, the same shapes
      (MODE_CVB only; ``(None, None, None)`` otherwise);
    * ``sampled = (cg_dk, cg_wk, cg_k)``: int32 (D, K), (W, K), int64 (K,), the
      sampled tokens' live counts;
    * ``samples = (st_dk, st_wk, st_k)``: int32 (S, D, K), (S, W, K), int64 (S, K),
      the S samples the variational update averages over (see below).

    Variational update of row r_jw by ``mode`` ([HYB] sections 3-5), with
    N = vb + sampled counts and N^- = N minus one copy of the pair:

    * MODE_SVB: ``r ∝ exp(psi(N_kw + eta_w) - psi(N_k + eta_tot) + psi(N_jk + alpha_k))``
      ([HYB] eq 11/21), each psi averaged over the ``st_*`` samples;
    * MODE_CVB0: ``r ∝ (N^-_kw + eta_w)(N^-_jk + alpha_k) / (N^-_k + eta_tot)``
      (requires no sampled pairs);
    * MODE_CVB: the log of the CVB0 factors minus ``V^-/(2 (N^- + prior)^2)`` for
      the document and word counts, plus it for the topic total (second order,
      Teh et al. 2006), averaged over the samples; variances are of the
      variational pairs only.

    A sampled token is drawn from ``gibbs_weight`` of its counts without it
    ([HYB] eq 25). ``st_*`` (n_samples, ...) are the sampled counts the
    variational update averages over: pass the live ``cg_*`` arrays reshaped to
    one sample for the interleaved single-sample schedule, or zero samples when
    nothing is sampled. ``work`` holds 2 K doubles; ``generator`` is used only to
    draw (None when ``do_cg`` is false or nothing is sampled).

    Returns ``(delta, entropy)``: sum over updated pairs of c_jw sum_k |r_new -
    r_old| and (MODE_SVB) ``-sum c_jw r log r`` of the new rows.
    """
    cdef double[:, ::1] vb_dk, vb_wk, var_dk, var_wk
    cdef double[::1] vb_k, var_k
    cdef int32_t[:, ::1] cg_dk, cg_wk
    cdef int64_t[::1] cg_k
    cdef const int32_t[:, :, ::1] st_dk, st_wk
    cdef const int64_t[:, ::1] st_k
    vb_dk, vb_wk, vb_k = expected
    var_dk, var_wk, var_k = variances
    cg_dk, cg_wk, cg_k = sampled
    st_dk, st_wk, st_k = samples
    cdef int mode = settings.mode, threshold = settings.threshold
    cdef Sequential a
    cdef int64_t K = vb_dk.shape[1], D = indptr.shape[0] - 1
    cdef bnp_csr_t m = csr_view(indptr, indices, counts, vb_wk.shape[0])
    if mode not in (MODE_SVB, MODE_CVB0, MODE_CVB):
        raise ValueError(f"unknown mode {mode}")
    if mode == M_CVB0 and st_k.shape[0] > 0:
        raise ValueError("CVB0 updates take no samples")
    if work.shape[0] < 2 * K or r.shape[1] != K or alpha.shape[0] != K:
        raise ValueError("arrays disagree on the number of topics")
    n_tokens, n_rows = _partition_sizes(counts, threshold)
    if z.shape[0] != n_tokens or r.shape[0] != n_rows:
        raise ValueError(f"need {n_tokens} sampled topics and {n_rows} responsibility rows, "
                         f"got {z.shape[0]} and {r.shape[0]}")
    if vb_dk.shape[0] != D or (n_tokens and (cg_dk.shape[0] != D or cg_dk.shape[1] != K or cg_k.shape[0] != K)):
        raise ValueError("count arrays do not match the corpus and topics")
    if st_k.shape[0] and (st_dk.shape[0] != st_k.shape[0] or st_wk.shape[0] != st_k.shape[0]
                          or st_dk.shape[1] != D or st_k.shape[1] != K or st_wk.shape[1] != vb_wk.shape[0]):
        raise ValueError("sample stacks do not match the count arrays")
    a.K = K
    a.mode = mode
    a.threshold = threshold
    a.do_cg = settings.do_cg and z.shape[0] > 0
    a.do_vb = settings.do_vb and r.shape[0] > 0
    a.alpha = &alpha[0]
    a.eta = &eta[0]
    a.eta_tot = eta_tot
    a.r = &r[0, 0] if r.shape[0] else NULL
    a.n_rows = r.shape[0]
    a.z = &z[0] if z.shape[0] else NULL
    a.vb_dk = &vb_dk[0, 0]
    a.vb_wk = &vb_wk[0, 0]
    a.vb_k = &vb_k[0]
    if mode == M_CVB:
        if var_k is None or var_k.shape[0] != K:
            raise ValueError("MODE_CVB needs the variance arrays")
        a.var_dk = &var_dk[0, 0]
        a.var_wk = &var_wk[0, 0]
        a.var_k = &var_k[0]
    else:
        a.var_dk = a.var_wk = a.var_k = NULL
    a.cg_dk = &cg_dk[0, 0] if z.shape[0] else NULL
    a.cg_wk = &cg_wk[0, 0] if z.shape[0] else NULL
    a.cg_k = &cg_k[0] if z.shape[0] else NULL
    a.n_samples = st_k.shape[0]
    if a.n_samples:
        a.st_dk = &st_dk[0, 0, 0]
        a.st_wk = &st_wk[0, 0, 0]
        a.st_k = &st_k[0, 0]
        a.st_dk_stride = st_dk.shape[1] * K
        a.st_wk_stride = st_wk.shape[1] * K
    a.work = &work[0]
    a.g = bitgen_of(generator) if a.do_cg else NULL
    a.delta = 0.0
    a.entropy = 0.0
    lock = generator.bit_generator.lock if a.do_cg else nullcontext()
    with lock, nogil:
        _sequential_sweep(&a, &m, 0, D)
    return a.delta, a.entropy


def cvb_parallel_sweep(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,  # IN
                       const double[::1] alpha, const double[::1] eta, double eta_tot, int mode,         # IN
                       double[:, ::1] r, double[:, ::1] vb_dk, double[:, ::1] var_dk,                    # IN/OUT
                       double[:, :, ::1] wk_threads, double[:, ::1] k_threads,                           # IN/OUT
                       double[:, :, ::1] var_wk_threads, double[:, ::1] var_k_threads,                   # IN/OUT
                       int n_threads):
    """One CVB or CVB0 sweep with delayed updates of the shared counts
    (Asuncion, Welling, Smyth & Teh 2009, section 5; the AD-LDA scheme of
    Newman et al. 2009 applied to CVB): documents are split into
    ``n_threads`` contiguous blocks (OpenMP static schedule), each thread runs
    the sequential updates of ``sequential_sweep`` (every pair variational)
    over its block against its own copy of the word-topic and topic counts
    (and variances), so it sees its own updates at once and the other
    threads' only after the sweep. Document counts are per document, hence
    exact.

    ``wk_threads[t]``, ``k_threads[t]`` (and the ``var_*_threads`` of
    MODE_CVB; pass empty arrays for MODE_CVB0) must hold copies of the shared
    counts on entry; the caller merges them after the sweep
    (``shared + sum_t (copy_t - shared)``). Block t is documents
    ``t q + min(t, D % T)`` on, ``q + (t < D % T)`` of them (q = D // T: the
    blocks of OpenMP's static schedule), swept by ``_sequential_sweep``
    itself, with its prefetches (a per-document loop without them ran a
    thread slower than the sequential sweep).
    The result does not depend on how many threads OpenMP actually gives.
    Equivalent serial code for block t: ``sequential_sweep`` over its
    documents with ``vb_wk = wk_threads[t]``. Returns ``(delta, entropy=0)``
    as ``sequential_sweep``.
    """
    cdef int64_t K = vb_dk.shape[1], D = indptr.shape[0] - 1, W = wk_threads.shape[1], first
    cdef int t, T = wk_threads.shape[0]
    if mode not in (MODE_CVB0, MODE_CVB):
        raise ValueError(f"the parallel schedule runs CVB or CVB0, not mode {mode}")
    if n_threads < 1 or T != n_threads or k_threads.shape[0] != T:
        raise ValueError(f"need {n_threads} count copies, got {T}")
    if r.shape[0] != indices.shape[0] or r.shape[1] != K or vb_dk.shape[0] != D or alpha.shape[0] != K:
        raise ValueError("r or vb_dk do not match the corpus and topics")
    if wk_threads.shape[2] != K or k_threads.shape[1] != K or eta.shape[0] != W:
        raise ValueError("count copies disagree on the number of topics or words")
    if mode == M_CVB and (var_dk.shape[0] != D or var_wk_threads.shape[0] != T or var_k_threads.shape[0] != T):
        raise ValueError("MODE_CVB needs the variance arrays")
    work = np.empty((T, 2 * K + PAD))
    # each thread's topic counts (and variances), written for every pair: copied
    # into padded rows, as (T, K) rows of small K would share cache lines
    k_local = np.zeros((T, 2, K + PAD))
    k_local[:, 0, :K] = k_threads
    if mode == M_CVB:
        k_local[:, 1, :K] = var_k_threads
    cdef double[:, ::1] wv = work
    cdef double[:, :, ::1] kl = k_local
    cdef PaddedSequential *a = <PaddedSequential *>calloc(T, sizeof(PaddedSequential))
    if a == NULL:
        raise MemoryError()
    cdef int64_t[::1] starts = np.empty(T + 1, dtype=np.int64)     # first document of each block, then D
    for t in range(T):
        first = t * (D // T) + min(t, D % T)
        starts[t] = first
        a[t].s.K = K
        a[t].s.mode = mode
        a[t].s.threshold = -1
        a[t].s.do_vb = True
        a[t].s.alpha = &alpha[0]
        a[t].s.eta = &eta[0]
        a[t].s.eta_tot = eta_tot
        a[t].s.r = &r[0, 0] + indptr[first] * K if r.shape[0] else NULL     # the block's rows, from its first pair
        a[t].s.vb_dk = &vb_dk[0, 0]
        a[t].s.vb_wk = &wk_threads[t, 0, 0]
        a[t].s.vb_k = &kl[t, 0, 0]
        if mode == M_CVB:
            a[t].s.var_dk = &var_dk[0, 0]
            a[t].s.var_wk = &var_wk_threads[t, 0, 0]
            a[t].s.var_k = &kl[t, 1, 0]
        a[t].s.work = &wv[t, 0]
    starts[T] = D
    for t in range(T):
        a[t].s.n_rows = indptr[starts[t + 1]] - indptr[starts[t]]
    cdef bnp_csr_t m = csr_view(indptr, indices, counts, W)
    try:
        for t in prange(T, nogil=True, num_threads=n_threads, schedule="static", chunksize=1):
            _sequential_sweep(&a[t].s, &m, starts[t], starts[t + 1])
        np.asarray(k_threads)[:] = k_local[:, 0, :K]
        if mode == M_CVB:
            np.asarray(var_k_threads)[:] = k_local[:, 1, :K]
        delta = 0.0
        for t in range(T):
            delta += a[t].s.delta
        return delta, 0.0
    finally:
        free(a)


# ---------------------------------------------------------------------------
# standard VB, parallel schedule
# ---------------------------------------------------------------------------

cdef struct SVBParallel:
    int64_t K
    bnp_csr_t corpus
    const double *ew     # exp(lw), W x K
    const double *ed     # exp(ld), D x K
    const double *lw     # psi(N_kw + eta_w) - psi(N_k + eta_tot) - row max, W x K
    const double *ld     # psi(N_jk + alpha_k) - row max, D x K
    double *ndk
    double *scale        # per pair: c_p / z_p, or -1 where z_p <= _SCALED (the word pass adds c_p r[p])
    double *work         # n_threads x (2 K + PAD)
    double *delta        # D: per document, summed in document order after the pass
    double *entropy      # D


cdef inline double _svb_row(const SVBParallel *a, int32_t w, int64_t j, double *x, double *z) noexcept nogil:
    """x <- the row r of pair (j, w), softmax(lw[w] + ld[j]), as the normalised
    products ew[w] ed[j] (log space where they all underflow); *z <- the sum of
    the products; returns log of the normaliser of lw[w] + ld[j]. Both passes
    call it, so a row recomputed in the word pass has the document pass's bits."""
    cdef int64_t K = a.K, k
    cdef const double *ew = a.ew + w * K
    cdef const double *ed = a.ed + j * K
    cdef double s = 0.0, lz
    for k in range(K):
        x[k] = ew[k] * ed[k]
        s += x[k]
    z[0] = s
    if s > _TINY:
        lz = log(s)
        s = 1.0 / s
        for k in range(K):
            x[k] *= s
        return lz
    for k in range(K):
        x[k] = a.lw[w * K + k] + a.ld[j * K + k]
    return normalise_log(x, K)


cdef void _svb_doc(SVBParallel *a, int64_t j, int tid) noexcept nogil:
    cdef int64_t K = a.K, p, k
    cdef int32_t w
    cdef double c, z, lz, rn, delta = 0.0, ent = 0.0
    cdef double *x = a.work + tid * (2 * K + PAD)
    cdef double *y = x + K          # the document's new counts
    cdef double *nd = a.ndk + j * K
    cdef const int64_t *indptr = a.corpus.indptr
    cdef const int32_t *indices = a.corpus.indices
    cdef const int32_t *counts = a.corpus.counts
    for k in range(K):
        y[k] = 0.0
    for p in range(indptr[j], indptr[j + 1]):
        w = indices[p]
        c = counts[p]
        if p + 1 < indptr[j + 1]:     # the next pair's word rows: random rows of large arrays
            prefetch_row(a.ew + indices[p + 1] * K, K)
            prefetch_row(a.lw + indices[p + 1] * K, K)
        lz = _svb_row(a, w, j, x, &z)
        # the word pass adds c r[p] itself where c / z could overflow its sums
        a.scale[p] = c / z if z > _SCALED else -1.0
        for k in range(K):
            rn = x[k]
            if rn > 0.0:
                ent -= c * rn * (a.lw[w * K + k] + a.ld[j * K + k] - lz)
            y[k] += c * rn
    for k in range(K):
        delta += fabs(y[k] - nd[k])
        nd[k] = y[k]
    a.delta[j] = delta
    a.entropy[j] = ent


cdef void _svb_word(const SVBParallel *a, const int64_t *word_ptr, const int64_t *word_pairs,
                    const int64_t *word_docs, int64_t w, double *nw, double *rest) noexcept nogil:
    """nwk[w] = ew[w] * sum_p scale_p ed[j_p] + sum over the log-space pairs of
    c_p r[p] (their rows recomputed; ``rest`` has room for two rows)."""
    cdef int64_t K = a.K, i, k, p
    cdef const double *src
    cdef double s, z
    cdef double *row = rest + K
    cdef bint any_rest = False
    for k in range(K):
        nw[k] = 0.0
    for i in range(word_ptr[w], word_ptr[w + 1]):
        p = word_pairs[i]
        s = a.scale[p]
        if s >= 0.0:
            src = a.ed + word_docs[i] * K
            for k in range(K):
                nw[k] += s * src[k]
        else:
            if not any_rest:
                any_rest = True
                for k in range(K):
                    rest[k] = 0.0
            _svb_row(a, <int32_t>w, word_docs[i], row, &z)
            s = a.corpus.counts[p]
            for k in range(K):
                rest[k] += s * row[k]
    src = a.ew + w * K
    for k in range(K):
        nw[k] *= src[k]
    if any_rest:
        for k in range(K):
            nw[k] += rest[k]


def svb_parallel_step(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,  # IN
                      word_index,                                       # IN  (word_ptr, word_pairs, word_docs)
                      const double[:, ::1] log_word, const double[:, ::1] log_doc,                     # IN
                      double[:, ::1] ndk,                                                              # IN/OUT
                      double[:, ::1] nwk,                                                              # OUT
                      int n_threads=1):
    """One standard VB iteration, parallel schedule ([HYB] eq 11; Blei et al. 2003
    E-step + M-step): every pair gets its new row from the counts at the start
    of the iteration, then the counts are recomputed. The rows are not kept:
    the next iteration computes them again from the counts, so the state is
    O((D + W) K), not O(nnz K).

    ``log_word[w, k] = psi(N_kw + eta_w) - psi(N_k + eta_tot)`` and
    ``log_doc[j, k] = psi(N_jk + alpha_k)``, each shifted so that its row
    maximum is 0; ``ndk`` holds the counts the rows replace. Equivalent NumPy
    for pair p = (j, w)::

        r[p] = softmax(log_word[w] + log_doc[j])
        ndk[j] = sum_p c_p r[p];   nwk[w] = sum_p c_p r[p]

    Two passes, each on ``n_threads`` threads: documents (ndk), then words
    (nwk), each word's pairs in corpus order (``word_index``:
    ``bnpcore.models.lda.word_index``). The word pass needs no rows: with
    ``r[p] = ew[w] ed[j] / z_p`` (``ew = exp(log_word)``, ``ed = exp(log_doc)``),
    ``nwk[w] = ew[w] * sum_p (c_p / z_p) ed[j_p]`` (the sparse product of
    Hoffman, Blei & Bach 2010, "Online learning for latent Dirichlet
    allocation"), from cached rows of ``ed``; a pair whose products fall below
    1e-100 adds ``c_p r[p]``, its row recomputed. Every output is one
    document's or one word's, and the two sums returned add the documents'
    terms in document order, so the step is the same bit for bit on any
    number of threads. Returns ``(delta, entropy)``: sum_j sum_k |N_jk new -
    N_jk old| and ``-sum_p c_p sum_k r log r`` of the new rows.
    """
    cdef int64_t D = indptr.shape[0] - 1, K = ndk.shape[1], W = log_word.shape[0], j, w
    cdef int64_t n_pairs = indices.shape[0]
    cdef const int64_t[::1] word_ptr, word_pairs, word_docs
    word_ptr, word_pairs, word_docs = word_index
    if n_threads < 1:
        raise ValueError(f"n_threads must be >= 1, got {n_threads}")
    if log_doc.shape[0] != D or ndk.shape[0] != D:
        raise ValueError("log_doc or ndk do not match the corpus")
    if word_ptr.shape[0] != W + 1 or word_pairs.shape[0] != n_pairs or word_docs.shape[0] != n_pairs \
            or word_ptr[W] != n_pairs or nwk.shape[0] != W:
        raise ValueError("word_index or nwk do not match the corpus")
    if log_word.shape[1] != K or log_doc.shape[1] != K or nwk.shape[1] != K:
        raise ValueError("arrays disagree on the number of topics")
    ew = map_rows(np.exp, (np.asarray(log_word),), n_threads)
    ed = map_rows(np.exp, (np.asarray(log_doc),), n_threads)
    work = np.empty((n_threads, 2 * K + PAD))
    scale = np.empty(n_pairs)
    delta, entropy = np.empty(D), np.empty(D)
    cdef const double[:, ::1] ewv = ew, edv = ed
    cdef double[:, ::1] wv = work
    cdef double[::1] sv = scale, dv = delta, ev = entropy
    cdef SVBParallel a
    cdef SVBParallel *ap = &a
    a.K = K
    a.corpus = csr_view(indptr, indices, counts, W)
    a.ew = &ewv[0, 0]
    a.ed = &edv[0, 0]
    a.lw = &log_word[0, 0]
    a.ld = &log_doc[0, 0]
    a.ndk = &ndk[0, 0]
    a.scale = &sv[0] if n_pairs else NULL
    a.work = &wv[0, 0]
    a.delta = &dv[0] if D else NULL
    a.entropy = &ev[0] if D else NULL
    cdef const int64_t *wp = &word_ptr[0]
    cdef const int64_t *pairs = &word_pairs[0] if n_pairs else NULL
    cdef const int64_t *docs = &word_docs[0] if n_pairs else NULL
    with nogil:
        for j in prange(D, num_threads=n_threads, schedule="static"):
            _svb_doc(ap, j, threadid())
        for w in prange(W, num_threads=n_threads, schedule="dynamic", chunksize=64):
            _svb_word(ap, wp, pairs, docs, w, &nwk[w, 0], a.work + threadid() * (2 * K + PAD))
    return float(delta.sum()), float(entropy.sum())


# ---------------------------------------------------------------------------
# per-document inference with the topics fixed (transform / fold-in)
# ---------------------------------------------------------------------------

cdef struct FoldIn:
    int64_t K
    int mode
    int32_t threshold
    bnp_csr_t docs
    const double *alpha
    double A             # sum(alpha)
    const double *vb_log_word
    const double *cg_word
    int max_iter, burn_in
    double tol
    uint64_t key         # keyed streams (key, doc_keys[j], 0)
    const uint64_t *doc_keys
    double *theta


cdef inline bint _fold_product(int64_t K, const double *er, const double *dk, double *lw) noexcept nogil:
    """lw <- the new row of a variational pair as the products ``er[k] * dk[k]``
    normalised (er: the pair's ``softmax(vb_log_word[w])``, dk the document
    factor); False, lw undefined, where every product underflows."""
    cdef int64_t k
    cdef double z = 0.0
    for k in range(K):
        lw[k] = er[k] * dk[k]
        z += lw[k]
    if z <= _TINY:
        return False
    z = 1.0 / z
    for k in range(K):
        lw[k] *= z
    return True


cdef inline void _fold_log(const FoldIn *f, int32_t w, const double *log_dk, double *lw) noexcept nogil:
    """lw <- the row from ``vb_log_word[w] + log_dk`` normalised in log space:
    the fallback of ``_fold_product``."""
    cdef int64_t K = f.K, k
    for k in range(K):
        lw[k] = f.vb_log_word[w * K + k] + log_dk[k]
    normalise_log(lw, K)


cdef void _fold_in_doc(const FoldIn *f, int64_t j, double *wk, double *rb, int32_t *zb) noexcept nogil:
    """fold_in of document j; wk: 7 K doubles, rb: two K-rows per variational pair
    (rows of r, then of softmax(vb_log_word[w])), zb: an int per sampled token."""
    cdef int64_t K = f.K, p, k, c, it, n_cg, s = 0, row = 0, zi = 0, n_vb = 0
    cdef int32_t w, t
    cdef double n_j = 0.0, ro, rn, x, change, tot, ejk, m
    cdef double *E = wk
    cdef double *V = wk + K
    cdef double *lw = wk + 2 * K
    cdef double *avg = wk + 3 * K
    cdef double *old = wk + 4 * K
    cdef double *dk = wk + 5 * K          # the document factor of the rows (products with er)
    cdef double *log_dk = wk + 6 * K
    cdef double *rr
    cdef double *er
    cdef const int64_t *indptr = f.docs.indptr
    cdef const int32_t *indices = f.docs.indices
    cdef const int32_t *counts = f.docs.counts
    cdef bnp_stream_t stream
    cdef bnp_bitgen_t *g = &stream.bitgen
    bnp_stream_init(&stream, f.key, f.doc_keys[j], 0)
    for p in range(indptr[j], indptr[j + 1]):
        if counts[p] > f.threshold:
            n_vb += 1
    for k in range(K):
        E[k] = 0.0
        V[k] = 0.0
        avg[k] = 0.0
    # initialise
    for p in range(indptr[j], indptr[j + 1]):
        w = indices[p]
        n_j += counts[p]
        if counts[p] > f.threshold:
            rr = rb + row * K
            er = rb + (n_vb + row) * K
            for k in range(K):
                rr[k] = f.vb_log_word[w * K + k]
            normalise_log(rr, K)
            for k in range(K):
                er[k] = rr[k]
                E[k] += counts[p] * rr[k]
                V[k] += counts[p] * rr[k] * (1.0 - rr[k])
            row += 1
        else:
            for c in range(counts[p]):
                tot = 0.0
                for k in range(K):
                    tot += f.cg_word[w * K + k]
                    lw[k] = tot
                t = <int32_t>search_cumulative(lw, K, bnp_rng_uniform(g) * tot)
                zb[zi] = t
                zi += 1
                E[t] += 1.0
    n_cg = zi
    for it in range(f.max_iter):
        for k in range(K):
            old[k] = E[k]
        row = 0
        zi = 0
        if f.mode == M_SVB and n_cg == 0:
            # standard VB without sampled tokens: the parallel schedule (every row
            # from the counts of the previous sweep, as Blei et al.'s E-step), K
            # digammas a sweep instead of a pair; the same fixed point
            m = -INFINITY
            for k in range(K):
                log_dk[k] = bnp_digamma(pos(E[k]) + f.alpha[k])
                m = max(m, log_dk[k])
            for k in range(K):
                log_dk[k] -= m
                dk[k] = exp(log_dk[k])
                E[k] = 0.0
            for p in range(indptr[j], indptr[j + 1]):
                rr = rb + row * K
                if not _fold_product(K, rb + (n_vb + row) * K, dk, rr):
                    _fold_log(f, indices[p], log_dk, rr)
                for k in range(K):
                    E[k] += counts[p] * rr[k]
                row += 1
        else:
            for p in range(indptr[j], indptr[j + 1]):
                w = indices[p]
                if counts[p] > f.threshold:
                    rr = rb + row * K
                    if f.mode == M_SVB:
                        for k in range(K):
                            lw[k] = f.vb_log_word[w * K + k] + bnp_digamma(pos(E[k]) + f.alpha[k])
                        normalise_log(lw, K)
                    else:
                        # r_k proportional to er_k (N^-_jk + alpha_k), for CVB times
                        # exp(-V^-_jk / (2 (N^-_jk + alpha_k)^2)) (as the fit's pairs, the
                        # exponents less their largest): no log per topic
                        m = 0.0
                        for k in range(K):
                            ro = rr[k]
                            ejk = pos(E[k] - ro) + f.alpha[k]
                            dk[k] = ejk
                            if f.mode == M_CVB:
                                # no variance, no correction: ejk^2 underflows to 0 below 1e-154
                                x = pos(V[k] - ro * (1.0 - ro))
                                log_dk[k] = -x / (2.0 * ejk * ejk) if x > 0.0 else 0.0
                                m = log_dk[k] if k == 0 else max(m, log_dk[k])
                        if f.mode == M_CVB:
                            for k in range(K):
                                dk[k] *= exp(log_dk[k] - m)
                        if not _fold_product(K, rb + (n_vb + row) * K, dk, lw):
                            for k in range(K):
                                ro = rr[k]
                                x = log(pos(E[k] - ro) + f.alpha[k])
                                log_dk[k] = x + log_dk[k] if f.mode == M_CVB else x
                            _fold_log(f, w, log_dk, lw)
                    for k in range(K):
                        ro = rr[k]
                        rn = lw[k]
                        E[k] += counts[p] * (rn - ro)
                        V[k] += counts[p] * (rn * (1.0 - rn) - ro * (1.0 - ro))
                        rr[k] = rn
                    row += 1
                else:
                    for c in range(counts[p]):
                        t = zb[zi]
                        E[t] -= 1.0
                        tot = 0.0
                        for k in range(K):
                            tot += f.cg_word[w * K + k] * (pos(E[k]) + f.alpha[k])
                            lw[k] = tot
                        t = <int32_t>search_cumulative(lw, K, bnp_rng_uniform(g) * tot)
                        E[t] += 1.0
                        zb[zi] = t
                        zi += 1
        if n_cg == 0:
            change = 0.0
            for k in range(K):
                change += fabs(E[k] - old[k])
            if n_j == 0.0 or change < f.tol * n_j:
                break
        elif it >= f.burn_in:
            for k in range(K):
                avg[k] += E[k]
            s += 1
    for k in range(K):
        x = avg[k] / s if s > 0 else E[k]
        f.theta[j * K + k] = (pos(x) + f.alpha[k]) / (n_j + f.A)   # E: rounding leaves ~-1e-16 for 0


def fold_in(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,  # IN docs
            const double[::1] alpha, int mode, int threshold,                                 # IN
            const double[:, ::1] vb_log_word, const double[:, ::1] cg_word,                   # IN topics
            int max_iter, int burn_in, double tol,                                            # IN
            uint64_t key, const uint64_t[::1] doc_keys,                                       # IN streams
            double[:, ::1] theta, int n_threads=1):                                           # OUT
    """Document-topic proportions of new documents with the topics fixed, by the
    algorithm's own per-document updates.

    Pairs with c_jw > threshold are variational, with the document factor of
    ``mode`` (MODE_SVB: ``psi(N_jk + alpha_k)``; MODE_CVB0: ``log(N^-_jk +
    alpha_k)``; MODE_CVB: that minus ``V^-_jk / (2 (N^-_jk + alpha_k)^2)``) added
    to ``vb_log_word[w]``; the tokens of the other pairs are sampled from
    ``cg_word[w, k] (N^-_jk + alpha_k)``, N_jk being the document's expected plus
    sampled counts. A document without sampled tokens iterates until the mean
    absolute change of N_j / N_j drops below ``tol`` (at most ``max_iter``
    sweeps) and returns ``(N_j + alpha) / (N_j + sum(alpha))``; one with sampled
    tokens runs ``max_iter`` sweeps and averages that vector over the sweeps
    after ``burn_in``. Initialisation: rows ``softmax(vb_log_word[w])``, topics
    drawn from ``cg_word[w]``.

    Sweeps go pair by pair, N_jk updated after each, except MODE_SVB without
    sampled tokens: there every row comes from the previous sweep's N_j (the
    E-step of Blei, Ng & Jordan 2003, section 5.3), K digammas a sweep instead
    of K a pair, towards the same fixed point (far fewer digammas on long
    documents). Rows are formed as products of
    ``softmax(vb_log_word[w])`` with the document factor (CVB0:
    ``N^-_jk + alpha_k``, no log or exp per topic; CVB: that times the exp of
    the correction less its largest value, one exp per topic, faster than
    the log form), in log space where every product underflows.

    Documents run in parallel (``n_threads``); document j draws from the keyed
    stream ``(key, doc_keys[j], 0)``, so the result does not depend on the
    number of threads (nor, with content keys, on the other documents).
    """
    cdef int64_t D = indptr.shape[0] - 1, K = alpha.shape[0], j, p, n_cg
    cdef int64_t max_pairs = 1, max_tokens = 1
    cdef int tid
    if vb_log_word.shape[1] != K or cg_word.shape[1] != K or theta.shape[1] != K or theta.shape[0] != D:
        raise ValueError("arrays disagree on the number of topics or documents")
    if vb_log_word.shape[0] != cg_word.shape[0]:
        raise ValueError("vb_log_word and cg_word disagree on the vocabulary")
    if doc_keys.shape[0] != D:
        raise ValueError(f"need {D} document keys, got {doc_keys.shape[0]}")
    if n_threads < 1:
        raise ValueError(f"n_threads must be >= 1, got {n_threads}")
    if D == 0:
        return
    for j in range(D):
        max_pairs = max(max_pairs, indptr[j + 1] - indptr[j])
        n_cg = 0
        for p in range(indptr[j], indptr[j + 1]):
            if counts[p] <= threshold:
                n_cg += counts[p]
        max_tokens = max(max_tokens, n_cg)
    r_np = np.empty((n_threads, 2 * max_pairs * K + PAD))
    z_np = np.empty((n_threads, max_tokens + 2 * PAD), dtype=np.int32)
    work_np = np.empty((n_threads, 7 * K + PAD))
    cdef double[:, ::1] rb = r_np, wk = work_np
    cdef int32_t[:, ::1] zb = z_np
    cdef FoldIn f
    cdef FoldIn *fp = &f
    f.K = K
    f.mode = mode
    f.threshold = threshold
    f.docs = csr_view(indptr, indices, counts, vb_log_word.shape[0])
    f.alpha = &alpha[0]
    f.A = 0.0
    for j in range(K):
        f.A += alpha[j]
    f.vb_log_word = &vb_log_word[0, 0]
    f.cg_word = &cg_word[0, 0]
    f.max_iter = max_iter
    f.burn_in = burn_in
    f.tol = tol
    f.key = key
    f.doc_keys = &doc_keys[0]
    f.theta = &theta[0, 0]
    for j in prange(D, nogil=True, num_threads=n_threads, schedule="dynamic"):
        tid = threadid()
        _fold_in_doc(fp, j, &wk[tid, 0], &rb[tid, 0], &zb[tid, 0])


# ---------------------------------------------------------------------------
# collapsed Gibbs with delayed updates (AD-LDA)
# ---------------------------------------------------------------------------

cdef enum:
    _SPREAD = 4      # structs between two blocks' (SparseGibbs and bnp_stream_t are over 64 bytes)
    _TOTALS_GAP = 8  # int64 between two blocks' topic totals: 64 bytes, so no cache line holds both
    _MERGE_CHUNK = 64    # words a thread claims at a time in the merge (dynamic: a late thread takes fewer)
    # _cgs_block's outcomes
    _BLOCK_OK = 0
    _BAD_TOPIC = 1   # a topic of z outside [0, K)
    _BAD_LENGTH = 2  # the documents hold another number of tokens than z's block
    _BAD_WORD = 3    # a word id outside [0, W)


cdef int _cgs_block(SparseGibbs *s, const bnp_csr_t *m, int64_t first, int64_t last, const double *eta,
                    int32_t *z, int64_t n_tokens, int32_t *nwk, int32_t *wtopics, int32_t *wlen,
                    bnp_bitgen_t *g) noexcept nogil:
    """The draws of ``cgs_sweep`` for documents ``first`` to ``last`` (excluded) of ``m``
    (their ``n_tokens`` topics at ``z``) against the counts ``nwk``, word lists and
    scratch bound in ``s`` (``_sg_bind``, with the document row ``s.nd_row``).

    Each document's word ids and topics are checked as its row n_jk is built, before
    any of its tokens moves, so bad input stops the block between two documents and
    nothing is read or written out of bounds. Returns ``_BLOCK_OK`` or the first
    problem found (``_BAD_TOPIC``, ``_BAD_LENGTH``, ``_BAD_WORD``)."""
    cdef const int64_t *indptr = m.indptr
    cdef const int32_t *indices = m.indices
    cdef const int32_t *counts = m.counts
    cdef int64_t K = s.K, W = m.n_cols, j, p, c, zi = 0, lo, i, k
    cdef int32_t w, t
    for k in range(K):
        s.nd_row[k] = 0
    for j in range(first, last):
        lo = zi
        for p in range(indptr[j], indptr[j + 1]):
            if <uint64_t>indices[p] >= <uint64_t>W:
                return _BAD_WORD
            if zi + counts[p] > n_tokens:
                return _BAD_LENGTH
            for c in range(counts[p]):
                t = z[zi]
                if <uint64_t>t >= <uint64_t>K:       # also t < 0
                    return _BAD_TOPIC
                s.nd_row[t] += 1
                zi += 1
        zi = lo
        _sg_start_doc(s)
        for p in range(indptr[j], indptr[j + 1]):
            w = indices[p]
            s.wrow = nwk + w * K
            s.wl = wtopics + w * K
            s.wlen = wlen + w
            for c in range(counts[p]):
                t = z[zi]
                _sg_change(s, t, -1)
                t = _sg_draw(s, eta[w], bnp_rng_uniform(g))
                _sg_change(s, t, 1)
                z[zi] = t
                zi += 1
        for i in range(s.nd):                     # clear the row: the document's topics are in its list
            s.nd_row[s.dlist[i]] = 0
    return _BLOCK_OK if zi == n_tokens else _BAD_LENGTH


cdef void _cgs_merge_word(int64_t T, int32_t *row, int32_t *wl, int32_t *wlen,
                          const int32_t *rows_t, const int32_t *wl_t, int64_t stride, const int32_t *wlen_t,
                          int64_t len_stride, int32_t *mark, int32_t *fresh) noexcept nogil:
    """Merge one word's copies into its shared row and list: ``row += sum_t
    (rows_t[t] - row)`` (block t's row and list at ``rows_t + t stride``,
    ``wl_t + t stride``, its length at ``wlen_t[t len_stride]``), the word's topic
    list rebuilt. The copies are only read.

    Only the topics in the old list or in some block's list can have moved (a
    topic in none has count 0 everywhere), so the cost is their number times T,
    not K T. The list: the old list's topics still present in their order, then
    the new ones in increasing order, insertion-sorted by decreasing count
    (stable; the old order is nearly sorted). ``mark`` (K int32, zero on entry,
    left zero) and ``fresh`` (K int32) are scratch."""
    cdef int64_t t, i, n = 0, m = 0, j
    cdef int32_t k, old, new, x, n_old = wlen[0]
    for i in range(n_old):
        mark[wl[i]] = 1
    for t in range(T):                  # topics new to the word: in a block's list, not in the old list
        for i in range(wlen_t[t * len_stride]):
            k = wl_t[t * stride + i]
            if not mark[k]:
                mark[k] = 1
                fresh[m] = k
                m += 1
    for i in range(n_old):
        k = wl[i]
        mark[k] = 0
        old = row[k]
        new = old
        for t in range(T):
            new += rows_t[t * stride + k] - old
        row[k] = new
    for i in range(m):
        k = fresh[i]
        mark[k] = 0
        new = 0                         # the old count is 0
        for t in range(T):
            new += rows_t[t * stride + k]
        row[k] = new
    for i in range(1, m):               # the new topics in increasing order
        x = fresh[i]
        j = i
        while j > 0 and fresh[j - 1] > x:
            fresh[j] = fresh[j - 1]
            j -= 1
        fresh[j] = x
    for i in range(n_old):
        if row[wl[i]] > 0:
            wl[n] = wl[i]
            n += 1
    for i in range(m):
        wl[n] = fresh[i]
        n += 1
    for i in range(1, n):
        x = wl[i]
        j = i
        while j > 0 and row[wl[j - 1]] < row[x]:
            wl[j] = wl[j - 1]
            j -= 1
        wl[j] = x
    wlen[0] = <int32_t>n


cdef extern from *:
    """
    /* An explicit barrier of the enclosing OpenMP team (an orphaned directive);
     * nothing without OpenMP, where the team is one thread. */
    static inline void bnp__team_barrier(void) {
    #ifdef _OPENMP
    #pragma omp barrier
    #endif
    }
    """
    void team_barrier "bnp__team_barrier"() noexcept nogil


_BLOCK_ERRORS = {
    _BAD_TOPIC: "topics in z must lie in [0, {K})",
    _BAD_LENGTH: "z must hold one topic per token (the documents' counts disagree with z or the blocks)",
    _BAD_WORD: "word ids (indices) must lie in [0, {W})",
}


def cgs_delayed_sweep(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,  # IN corpus
                      tuple blocks,                    # IN      (starts, tok_starts)
                      const double[::1] alpha, const double[::1] eta, double eta_tot,             # IN priors
                      int32_t[::1] z,                  # IN/OUT  topic of every token
                      tuple shared,                    # IN/OUT  (nwk, nk, wtopics, wlen), merged
                      tuple copies,                    # OUT     (nwk_t, wtopics_t, wlen_t, scratch, iscratch)
                      uint64_t key, generator, int n_threads):
    """One collapsed Gibbs sweep with delayed updates of the shared counts (AD-LDA,
    Newman, Asuncion, Smyth & Welling 2009, section 3.1): an approximation of
    ``cgs_sweep``.

    The arrays come in three groups:

    * ``blocks = (starts, tok_starts)``, int64 (T + 1,) each: the first document
      and the first token of each block, then D and N;
    * ``shared = (nwk, nk, wtopics, wlen)``: the counts and word lists of
      ``cgs_sweep``, (W, K) int32, (K,) int64, (W, K) int32, (W,) int32;
    * ``copies = (nwk_t, wtopics_t, wlen_t, scratch, iscratch)``: room for each
      block's copy of ``nwk``, ``wtopics`` and ``wlen``, (T, W, K), (T, W, K),
      (T, W) (unused for T = 1: (1, 0, 0) and (1, 0) will do), and its sampler
      scratch, (T, 3 K + PAD) float64 and int32; their contents on entry do not
      matter. The blocks' copies of ``nk`` are the kernel's own, with 64 bytes
      between two blocks' rows: every draw writes two totals, and rows of K
      int64 side by side would put the end of one block's and the start of the
      next's in one cache line, which two cores would pass back and forth.

    The documents are cut into T = ``nwk_t.shape[0]`` blocks at ``starts``. Each
    block copies the shared arrays into its slot, then runs the draws of
    ``cgs_sweep`` over its documents against its copy of the word-topic counts,
    topic counts and word lists only (it sees its own moves at once, the other
    blocks' after the sweep); the copies are then merged into the shared arrays,
    ``nwk += sum_t (nwk_t[t] - nwk)`` (likewise ``nk``), and the word lists
    rebuilt. Each block's thread writes its own copy, in one sequential pass at
    the start of the sweep: a merge that wrote the merged rows back into every
    copy would leave a block's rows in the cache of the core that merged them,
    to be fetched back one by one as the block's tokens reach them
    (``benchmarks/results/bench_adgibbs_kos_lda_repeats.txt``). One team of
    ``min(n_threads, T)`` threads runs the blocks, waits for the last, and
    merges the words, split over its threads (each word's merge reads and
    writes only that word's rows and lists, and its integer sums do not
    depend on the order, so the merge is the same on any number of threads);
    one parallel region per sweep. Block t draws from the
    keyed stream ``(key, t, 0)``: the result depends on T and ``key``, not on
    how many threads run the blocks (``n_threads``). With
    T = 1 the block works on the shared arrays directly and draws from
    ``generator``: the draws of ``cgs_sweep`` exactly.
    Equivalent serial code: for each block t, ``cgs_sweep`` over its documents
    with copies of ``nwk, nk, wtopics, wlen``; then the merge.

    The topics in ``z``, the word ids and the token counts are checked as the
    blocks reach each document (no separate pass over the tokens): bad input
    raises ValueError after the merge, the documents before the bad one sampled.
    """
    cdef const int64_t[::1] starts, tok_starts
    cdef int32_t[:, ::1] nwk, wtopics
    cdef int64_t[::1] nk
    cdef int32_t[::1] wlen
    cdef int32_t[:, :, ::1] nwk_t, wtopics_t
    cdef int32_t[:, ::1] wlen_t, iscratch
    cdef double[:, ::1] scratch
    starts, tok_starts = blocks
    nwk, nk, wtopics, wlen = shared
    nwk_t, wtopics_t, wlen_t, scratch, iscratch = copies
    cdef int64_t T = nwk_t.shape[0], K = nwk.shape[1], W = nwk.shape[0], D = indptr.shape[0] - 1, w, b
    cdef bnp_csr_t m = csr_view(indptr, indices, counts, W)
    _check_sparse_state(nwk, nk, wtopics, wlen, alpha, scratch[0], iscratch[0], 3)
    if T < 1 or starts.shape[0] != T + 1 or tok_starts.shape[0] != T + 1 \
            or wtopics_t.shape[0] != T or wlen_t.shape[0] != T or scratch.shape[0] != T or iscratch.shape[0] != T:
        raise ValueError("the block arrays disagree on the number of blocks")
    if T > 1 and (nwk_t.shape[1] != W or nwk_t.shape[2] != K or wtopics_t.shape[1] != W
                  or wtopics_t.shape[2] != K or wlen_t.shape[1] != W):
        raise ValueError("the block copies disagree with the shared counts")
    if starts[0] != 0 or starts[T] != D or tok_starts[0] != 0 or tok_starts[T] != z.shape[0]:
        raise ValueError("blocks must cover the documents and tokens")
    for b in range(T):
        if starts[b + 1] < starts[b] or tok_starts[b + 1] < tok_starts[b]:
            raise ValueError("block starts must be non-decreasing")
    if n_threads < 1:
        raise ValueError(f"n_threads must be >= 1, got {n_threads}")
    # block b's sampler state and stream at s[_SPREAD b], streams[_SPREAD b]: written for every token,
    # so kept _SPREAD structs apart, never in a cache line another block writes (false sharing)
    cdef SparseGibbs *s = <SparseGibbs *>calloc(T * _SPREAD, sizeof(SparseGibbs))
    cdef bnp_stream_t *streams = <bnp_stream_t *>calloc(T * _SPREAD, sizeof(bnp_stream_t))
    cdef int *status = <int *>calloc(T, sizeof(int))
    cdef int64_t kstride = K + _TOTALS_GAP
    cdef int64_t *nk_t = <int64_t *>calloc(T * kstride, sizeof(int64_t)) if T > 1 else NULL
    if s == NULL or streams == NULL or status == NULL or (T > 1 and nk_t == NULL):
        free(s)
        free(streams)
        free(status)
        free(nk_t)
        raise MemoryError()
    cdef bnp_bitgen_t *g = bitgen_of(generator)
    cdef int32_t *zp = &z[0] if z.shape[0] else NULL
    cdef int n_team = min(n_threads, T)      # the merge's marks: one row of iscratch per thread
    cdef int32_t *mark
    try:
        if T == 1:
            with generator.bit_generator.lock, nogil:
                _sg_bind(&s[0], K, &nk[0], &alpha[0], eta_tot, &scratch[0, 0], &iscratch[0, 0])
                s[0].nd_row = &iscratch[0, 2 * K]
                status[0] = _cgs_block(&s[0], &m, 0, D, &eta[0], zp, z.shape[0], &nwk[0, 0], &wtopics[0, 0],
                                       &wlen[0], g)
        else:
            for b in range(T):
                bnp_stream_init(&streams[_SPREAD * b], key, <uint64_t>b, 0)
            # one region: the blocks, a barrier (the merge reads every block's copy), the merge
            with nogil, parallel(num_threads=n_team):
                for b in prange(T, schedule="static", chunksize=1):
                    memcpy(&nwk_t[b, 0, 0], &nwk[0, 0], W * K * sizeof(int32_t))
                    memcpy(&wtopics_t[b, 0, 0], &wtopics[0, 0], W * K * sizeof(int32_t))
                    memcpy(&wlen_t[b, 0], &wlen[0], W * sizeof(int32_t))
                    memcpy(nk_t + b * kstride, &nk[0], K * sizeof(int64_t))
                    _sg_bind(&s[_SPREAD * b], K, nk_t + b * kstride, &alpha[0], eta_tot, &scratch[b, 0],
                             &iscratch[b, 0])
                    s[_SPREAD * b].nd_row = &iscratch[b, 2 * K]
                    status[b] = _cgs_block(&s[_SPREAD * b], &m, starts[b], starts[b + 1], &eta[0],
                                           zp + tok_starts[b], tok_starts[b + 1] - tok_starts[b], &nwk_t[b, 0, 0],
                                           &wtopics_t[b, 0, 0], &wlen_t[b, 0], &streams[_SPREAD * b].bitgen)
                team_barrier()
                mark = &iscratch[threadid(), 0]         # the blocks' scratch is free now
                memset(mark, 0, K * sizeof(int32_t))
                for w in prange(W, schedule="dynamic", chunksize=_MERGE_CHUNK):
                    _cgs_merge_word(T, &nwk[w, 0], &wtopics[w, 0], &wlen[w], &nwk_t[0, w, 0], &wtopics_t[0, w, 0],
                                    W * K, &wlen_t[0, w], W, mark, mark + K)
            _merge_totals(nk, nk_t, T, kstride)
        for b in range(T):
            if status[b] != _BLOCK_OK:
                raise ValueError(_BLOCK_ERRORS[status[b]].format(K=K, W=W))
    finally:
        free(s)
        free(streams)
        free(status)
        free(nk_t)


cdef void _merge_totals(int64_t[::1] nk, const int64_t *nk_t, int64_t T, int64_t stride) noexcept nogil:
    """nk += sum_t (nk_t[t] - nk), block t's totals at ``nk_t + t stride``."""
    cdef int64_t k, b, old, new
    for k in range(nk.shape[0]):
        old = nk[k]
        new = old
        for b in range(T):
            new += nk_t[b * stride + k] - old
        nk[k] = new
