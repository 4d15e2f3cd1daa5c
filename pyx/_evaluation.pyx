"""Kernels of ``bnpcore.evaluation`` (held-out metrics).

Every kernel runs over documents in parallel (OpenMP ``prange``; serially when
bnpcore was built without OpenMP) and writes one value per document or per
(document, word) pair. Nothing is reduced across threads here: the Python
layer sums the per-document values in a fixed order, so a result does not
depend on the number of threads.

Counts come as a CSR matrix (``indptr`` int64, ``indices`` int32 word ids,
``counts`` int32 > 0; one ``bnp_csr_t`` in the nogil code) that
:class:`bnpcore.Corpus` has validated; the callers in ``bnpcore.evaluation``
check every other argument. Word-major ``word_topic``
arrays are ``topic_word.T`` made contiguous, so the K values of one word are
adjacent.
"""
import numpy as np

from cython.parallel cimport parallel, prange, threadid
from libc.math cimport INFINITY, exp, fabs, log, log1p
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc

from bnpcore.kernels.parallel cimport PAD
from bnpcore.kernels.rng cimport bnp_bitgen_t, bitgen_of, bnp_rng_log_gamma, bnp_rng_uniform
from bnpcore.kernels.sparse cimport bnp_csr_t, csr_view
from bnpcore.kernels.special cimport (bnp_digamma, bnp_dlgamma, bnp_lgamma, bnp_log_dirmult, bnp_logaddexp,
                                      bnp_logsumexp)


cdef inline double dot(const double *a, const double *b, Py_ssize_t n) noexcept nogil:
    cdef double s = 0.0
    cdef Py_ssize_t k
    for k in range(n):
        s += a[k] * b[k]
    return s


cdef inline void logaddexp_into(double *m, double *s, double v) noexcept nogil:
    """Streaming log-sum-exp: (m, s) represent m + log(s); add exp(v)."""
    if v == -INFINITY:
        return
    if v > m[0]:
        s[0] = s[0] * exp(m[0] - v) + 1.0
        m[0] = v
    else:
        s[0] += exp(v - m[0])


cdef inline double log_multinomial_coef(const int32_t *c, int64_t nnz) noexcept nogil:
    """log (N! / prod_w c_w!) of one document."""
    cdef double n = 0.0, s = 0.0
    cdef int64_t i
    for i in range(nnz):
        n += c[i]
        s += bnp_lgamma(c[i] + 1.0)
    return bnp_lgamma(n + 1.0) - s


def pair_probabilities(const double[:, ::1] doc_topic,      # IN  (n_docs, K)
                       const double[:, ::1] word_topic,     # IN  (n_words, K) = topic_word.T
                       const int64_t[::1] indptr,           # IN
                       const int32_t[::1] indices,          # IN
                       double[::1] out,                     # OUT (nnz,)
                       bint accumulate, int n_threads):
    """Predictive probability of every non-zero pair (j, w) of a CSR matrix.

    ``out[i] = doc_topic[j] @ word_topic[w]`` for the i-th pair, added to
    ``out`` instead when ``accumulate`` is true. Equivalent to
    ``np.einsum("ik,ik->i", doc_topic[doc_of_pair], word_topic[indices])``.
    """
    cdef Py_ssize_t n_docs = indptr.shape[0] - 1, n_topics = doc_topic.shape[1], j
    cdef int64_t i
    cdef double p
    for j in prange(n_docs, nogil=True, schedule="guided", num_threads=n_threads):
        for i in range(indptr[j], indptr[j + 1]):
            p = dot(&doc_topic[j, 0], &word_topic[indices[i], 0], n_topics)
            if accumulate:
                out[i] = out[i] + p
            else:
                out[i] = p


def doc_token_log_likelihood(const double[:, ::1] doc_topic,    # IN  (n_docs, K)
                             const double[:, ::1] word_topic,   # IN  (n_words, K)
                             const int64_t[::1] indptr,         # IN
                             const int32_t[::1] indices,        # IN
                             const int32_t[::1] counts,         # IN
                             double[::1] out,                   # OUT (n_docs,)
                             int n_threads):
    """Log-likelihood of each document's tokens under its own topic mixture.

    ``out[j] = sum_{(j, w)} c_jw * log(doc_topic[j] @ word_topic[w])`` (0 for an
    empty document; -inf if a token has probability 0). Equivalent to
    ``np.bincount(doc_of_pair, counts * np.log(pair_probabilities))``.
    """
    cdef Py_ssize_t n_docs = indptr.shape[0] - 1, n_topics = doc_topic.shape[1], j
    cdef int64_t i
    cdef double acc
    cdef bnp_csr_t docs = csr_view(indptr, indices, counts, word_topic.shape[0])
    for j in prange(n_docs, nogil=True, schedule="guided", num_threads=n_threads):
        acc = 0.0
        for i in range(docs.indptr[j], docs.indptr[j + 1]):
            acc = acc + docs.counts[i] * log(dot(&doc_topic[j, 0], &word_topic[docs.indices[i], 0], n_topics))
        out[j] = acc


def mixture_doc_log_likelihood(const double[::1] log_weights,   # IN  (K,)
                               const double[:, ::1] params,     # IN  (K, n_words)
                               const double[::1] totals,        # IN  (K,) row sums of params (Dirichlet)
                               const int64_t[::1] indptr,       # IN
                               const int32_t[::1] indices,      # IN
                               const int32_t[::1] counts,       # IN
                               bint dirichlet, bint multinomial_coef,
                               double[::1] out,                 # OUT (n_docs,)
                               int n_threads):
    """Log-probability of each whole document under a mixture.

    ``out[d] = [log MultCoef(c_d)] + logsumexp_k (log_weights[k] + L_dk)`` with
    ``L_dk = sum_w c_dw params[k, w]`` (``params`` = log topic-word
    probabilities; a multinomial component) when ``dirichlet`` is false, and
    ``L_dk = log DM(c_d | params[k])`` (``params`` = Dirichlet parameters,
    ``totals`` their row sums; the token-sequence probability)
    when it is true. NumPy: ``logsumexp(log_weights + X @ params.T, axis=1)``
    for the multinomial case. Components of weight 0 (-inf) are skipped.
    """
    cdef Py_ssize_t n_docs = indptr.shape[0] - 1, n_comp = params.shape[0], j, k
    cdef int64_t i, lo, hi
    cdef double m, s, v
    cdef bnp_csr_t docs = csr_view(indptr, indices, counts, params.shape[1])
    for j in prange(n_docs, nogil=True, schedule="guided", num_threads=n_threads):
        lo = docs.indptr[j]
        hi = docs.indptr[j + 1]
        m = -INFINITY
        s = 0.0
        for k in range(n_comp):
            if log_weights[k] == -INFINITY:
                continue
            if dirichlet:
                v = bnp_log_dirmult(docs.indices + lo if hi > lo else NULL, docs.counts + lo if hi > lo else NULL,
                                    hi - lo, &params[k, 0], totals[k])
            else:
                v = 0.0
                for i in range(lo, hi):
                    v = v + docs.counts[i] * params[k, docs.indices[i]]
            logaddexp_into(&m, &s, log_weights[k] + v)
        v = m + log(s) if s > 0.0 else -INFINITY
        if multinomial_coef and hi > lo:
            v = v + log_multinomial_coef(docs.counts + lo, hi - lo)
        out[j] = v


cdef inline int64_t infer_one_document(const double *word_topic, const double *alpha, const bnp_csr_t *docs,
                                       int64_t j, Py_ssize_t n_topics, int64_t max_iter, double tol,
                                       double *gamma, double *expw, double *new) noexcept nogil:
    """Mean-field iterations of document j of docs with fixed topics; returns the iterations done."""
    cdef const int32_t *ids = docs.indices + docs.indptr[j]
    cdef const int32_t *c = docs.counts + docs.indptr[j]
    cdef int64_t nnz = docs.indptr[j + 1] - docs.indptr[j]
    cdef Py_ssize_t k
    cdef int64_t i, it
    cdef double n = 0.0, top, p, f, change
    cdef const double *phi
    for i in range(nnz):
        n += c[i]
    for k in range(n_topics):
        gamma[k] = alpha[k] + n / n_topics
    if nnz == 0:
        for k in range(n_topics):
            gamma[k] = alpha[k]
        return 0
    for it in range(max_iter):
        # exp(E[log pi_k]) up to a common factor (the normaliser cancels in r_wk)
        top = -INFINITY
        for k in range(n_topics):
            expw[k] = bnp_digamma(gamma[k])
            if expw[k] > top:
                top = expw[k]
        for k in range(n_topics):
            expw[k] = exp(expw[k] - top)
            new[k] = alpha[k]
        for i in range(nnz):
            phi = word_topic + <int64_t>ids[i] * n_topics
            p = 0.0
            for k in range(n_topics):
                p += phi[k] * expw[k]
            if p > 0.0:       # a word no topic can emit carries no information about pi
                f = c[i] / p
                for k in range(n_topics):
                    new[k] += f * phi[k] * expw[k]
        change = 0.0
        for k in range(n_topics):
            change += fabs(new[k] - gamma[k])
            gamma[k] = new[k]
        if change / n_topics < tol:
            return it + 1
    return max_iter


def infer_doc_topic(const double[:, ::1] word_topic,    # IN  (n_words, K) = topic_word.T
                    const double[::1] alpha,            # IN  (K,) Dirichlet prior, > 0
                    const int64_t[::1] indptr,          # IN
                    const int32_t[::1] indices,         # IN
                    const int32_t[::1] counts,          # IN
                    int64_t max_iter, double tol,
                    double[:, ::1] gamma,               # OUT (n_docs, K) variational Dirichlet parameters
                    int64_t[::1] n_iter,                # OUT (n_docs,) iterations used
                    int n_threads):
    """Variational posterior q(pi_j) = Dirichlet(gamma_j) of each document with fixed topics.

    Mean-field coordinate ascent for LDA with point topics ``phi``:
    ``r_jwk ∝ phi_kw exp(psi(gamma_jk))`` and
    ``gamma_jk = alpha_k + sum_w c_jw r_jwk``, from ``gamma_jk = alpha_k + N_j / K``,
    until the mean absolute change of ``gamma_j`` is below ``tol`` or after
    ``max_iter`` iterations (the [SM] E-step, eqs. 3-4, with
    E[log phi] replaced by log phi). Empty documents get ``gamma_j = alpha``.
    One iteration in NumPy: ``e = np.exp(psi(g)); r = phi[:, w].T * e;
    g = alpha + (c[:, None] * r / r.sum(1, keepdims=True)).sum(0)``.
    """
    cdef Py_ssize_t n_docs = indptr.shape[0] - 1, n_topics = word_topic.shape[1], j
    cdef double *buf
    cdef double[:, ::1] scratch = np.empty((n_threads, 2 * n_topics + PAD))
    cdef bnp_csr_t docs = csr_view(indptr, indices, counts, word_topic.shape[0])
    for j in prange(n_docs, nogil=True, schedule="guided", num_threads=n_threads):
        buf = &scratch[threadid(), 0]
        n_iter[j] = infer_one_document(&word_topic[0, 0], &alpha[0], &docs, j, n_topics, max_iter, tol,
                                       &gamma[j, 0], buf, buf + n_topics)


# --------------------------------------------------------------------------- #
# HDP held-out likelihood by importance sampling ([TF] S.3, §8.4)              #
# --------------------------------------------------------------------------- #

cdef struct Heldout:
    # what hdp_heldout estimates, the same for every document
    const double *topics     # (K, W) topic-word probabilities
    int64_t K
    int64_t W
    const double *prior      # (K,) Dirichlet prior of the proportions
    double prior_total       # its sum
    int burnin               # Gibbs sweeps before the samples
    int n_samples            # importance samples
    double defensive         # weight of the prior in the proposal mixture, in [0, 1)


cdef double heldout_document(const bnp_csr_t *docs, int64_t j, const Heldout *h, bnp_bitgen_t *g, double *phid,
                             int32_t *tokp, int32_t *z, double *nk, double *cw, double *lg,
                             double *lw) noexcept nogil:
    """log p(x | topics, Dir(prior)) of document j of docs by importance sampling.

    Gibbs on the topic of every token with the topics fixed (``burnin`` sweeps
    from z_i ∝ prior_k phi_k,x_i), then ``n_samples`` draws pi ~ Dir(prior + n)
    weighted by Dir(pi | prior) prod_i sum_k pi_k phi_k,x_i / Dir(pi | prior + n).
    The (a_k - 1) log pi_k terms of both densities cancel exactly, so
    log w = sum_i log sum_k pi_k phi_k,x_i - log ratio, with
    log ratio = log Dir(pi | prior + n) / Dir(pi | prior)
              = dlgamma(A, N) - sum_k dlgamma(prior_k, n_k) + sum_k n_k log pi_k.
    With ``defensive`` = eps > 0 the proposal is the mixture
    eps Dir(prior) + (1 - eps) Dir(prior + n) and
    log w = sum_i log sum_k pi_k phi_k,x_i - log(eps + (1 - eps) ratio) <= -log eps.
    """
    cdef const int32_t *wd = docs.indices + docs.indptr[j]
    cdef const int32_t *cd = docs.counts + docs.indptr[j]
    cdef int64_t nnz = docs.indptr[j + 1] - docs.indptr[j]
    cdef const double *topics = h.topics
    cdef const double *prior = h.prior
    cdef int64_t K = h.K, W = h.W
    cdef int burnin = h.burnin, n_samples = h.n_samples
    cdef double defensive = h.defensive
    cdef int64_t p, k, i, n = 0, c
    cdef int s, r
    cdef bint from_prior
    cdef double total, target, base, lz, acc, ratio
    for p in range(nnz):
        for k in range(K):
            phid[p * K + k] = topics[k * W + wd[p]]
        for c in range(cd[p]):
            tokp[n] = <int32_t>p
            n += 1
    for k in range(K):
        nk[k] = 0.0
    for s in range(burnin + 1):
        for i in range(n):
            p = tokp[i]
            if s > 0:
                nk[z[i]] -= 1.0
            total = 0.0
            for k in range(K):
                total += ((nk[k] + prior[k]) if s > 0 else prior[k]) * phid[p * K + k]
                cw[k] = total
            target = bnp_rng_uniform(g) * total
            k = 0
            while k < K - 1 and cw[k] <= target:
                k += 1
            z[i] = <int32_t>k
            if s > 0:
                nk[k] += 1.0
        if s == 0:
            for i in range(n):
                nk[z[i]] += 1.0
    if n == 0 or n_samples == 0:
        return 0.0
    base = bnp_dlgamma(h.prior_total, <double>n)
    for k in range(K):
        base -= bnp_dlgamma(prior[k], nk[k])
    for r in range(n_samples):
        from_prior = defensive > 0.0 and bnp_rng_uniform(g) < defensive
        for k in range(K):
            lg[k] = bnp_rng_log_gamma(g, prior[k] if from_prior else prior[k] + nk[k])
        lz = bnp_logsumexp(lg, K)
        ratio = base
        for k in range(K):
            lg[k] -= lz
            if nk[k] > 0.0:
                ratio += nk[k] * lg[k]
            lg[k] = exp(lg[k])
        acc = -ratio if defensive == 0.0 else -bnp_logaddexp(log(defensive), log1p(-defensive) + ratio)
        for p in range(nnz):
            total = 0.0
            for k in range(K):
                total += lg[k] * phid[p * K + k]
            acc += cd[p] * log(total)
        lw[r] = acc
    return bnp_logsumexp(lw, n_samples) - log(<double>n_samples)


def hdp_heldout(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,
                const double[:, ::1] topics, const double[::1] prior, int burnin, int n_samples, double defensive,
                list generators, int chunk, double[::1] loglik, int n_threads=1):
    """Per-document log p(x_j | topics, pi_j ~ Dir(prior)) by importance sampling ([TF] S.3).

    Documents are processed in chunks of ``chunk``; chunk c draws from
    ``generators[c]``, so the result does not depend on ``n_threads``.
    ``defensive`` in [0, 1): weight of the
    prior in the proposal mixture (see ``heldout_document``).
    """
    cdef Py_ssize_t D = indptr.shape[0] - 1, K = topics.shape[0], W = topics.shape[1]
    cdef Py_ssize_t n_chunks = (D + chunk - 1) // chunk if chunk > 0 else 0, c, j
    cdef int64_t maxnnz = 0, maxlen = 0, n, p
    cdef double prior_total = 0.0
    cdef int failed[1]
    cdef Heldout h
    if chunk < 1 or len(generators) != n_chunks:
        raise ValueError(f"need one generator per chunk of {chunk} documents ({n_chunks}), got {len(generators)}")
    if prior.shape[0] != K or loglik.shape[0] != D:
        raise ValueError("shapes of prior or loglik do not match")
    if K == 0:
        raise ValueError("no topics")
    if not 0.0 <= defensive < 1.0:
        raise ValueError(f"defensive must be in [0, 1), got {defensive}")
    for j in range(D):
        n = 0
        for p in range(indptr[j], indptr[j + 1]):
            n += counts[p]
        maxlen = max(maxlen, n)
        maxnnz = max(maxnnz, indptr[j + 1] - indptr[j])
    for j in range(K):
        prior_total += prior[j]
    h = Heldout(&topics[0, 0], K, W, &prior[0], prior_total, burnin, n_samples, defensive)
    cdef bnp_csr_t docs = csr_view(indptr, indices, counts, W)
    cdef bnp_bitgen_t **gens = <bnp_bitgen_t **>malloc(max(n_chunks, 1) * sizeof(bnp_bitgen_t *))
    cdef double *buf = NULL
    cdef int32_t *ibuf = NULL
    if gens == NULL:
        raise MemoryError()
    failed[0] = 0
    try:
        for c in range(n_chunks):
            gens[c] = bitgen_of(generators[c])
        with nogil, parallel(num_threads=n_threads):
            buf = <double *>malloc((maxnnz * K + 3 * K + max(n_samples, 1) + 1) * sizeof(double))
            ibuf = <int32_t *>malloc((2 * maxlen + 1) * sizeof(int32_t))
            if buf == NULL or ibuf == NULL:
                failed[0] = 1
            else:
                for c in prange(n_chunks, schedule="dynamic"):
                    for j in range(c * chunk, min((c + 1) * chunk, D)):
                        loglik[j] = heldout_document(&docs, j, &h, gens[c], buf, ibuf, ibuf + maxlen,
                                                     buf + maxnnz * K, buf + maxnnz * K + K,
                                                     buf + maxnnz * K + 2 * K, buf + maxnnz * K + 3 * K)
            free(buf)
            free(ibuf)
    finally:
        free(gens)
    if failed[0]:
        raise MemoryError("cannot allocate the per-thread scratch space")
