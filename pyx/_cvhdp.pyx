"""Kernels of collapsed variational inference for the HDP (CV-HDP; Teh, Kurihara &
Welling 2007; ALGORITHMS.md 4.2).

Responsibilities are stored per (document, word) pair: ``r[p, k]`` for the p-th
non-zero of the CSR corpus, shared by its ``counts[p]`` copies (ALGORITHMS.md
3.4 "per-pair"). Count statistics of the Bernoulli sums n_jk, n_kw, n_k are
``E`` (mean), ``V`` (variance) and ``Z`` (sum of log(1 - q)), document-major
``(n_docs, K)`` and word-major ``(n_words, K)``; the topic totals are the column
sums of the word-major ones. ``r`` may be float32 or float64; statistics are
always float64.
"""
import numpy as np
cimport numpy as cnp
from cython cimport floating
from libc.math cimport exp, log, log1p
from libc.stdint cimport int32_t, int64_t

cnp.import_array()

cdef double _Q_MAX = 1.0 - 1e-15      # log1p(-q) stays finite; P+ = 1 to double precision


cdef inline double _clamp0(double x) noexcept nogil:
    return x if x > 0.0 else 0.0


cdef void _sweep(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,
                 floating[:, ::1] r, double[:, ::1] E_jk, double[:, ::1] V_jk,
                 double[:, ::1] E_wk, double[:, ::1] V_wk, double[::1] E_k, double[::1] V_k,
                 const double[::1] prior_doc, const double[::1] prior_word, double prior_topic,
                 double[::1] lw) noexcept nogil:
    cdef int64_t K = r.shape[1], j, p, k
    cdef int32_t w
    cdef double c, q, qn, a, b, d, ej, vj, ew, vw, ek, vk, m, s, dq, dv
    for j in range(indptr.shape[0] - 1):
        for p in range(indptr[j], indptr[j + 1]):
            w = indices[p]
            c = counts[p]
            m = -1e300
            for k in range(K):
                q = r[p, k]
                dv = q * (1.0 - q)
                # statistics with one copy of the pair removed (clamped: rounding can go below 0)
                ej = _clamp0(E_jk[j, k] - q)
                vj = _clamp0(V_jk[j, k] - dv)
                ew = _clamp0(E_wk[w, k] - q)
                vw = _clamp0(V_wk[w, k] - dv)
                ek = _clamp0(E_k[k] - q)
                vk = _clamp0(V_k[k] - dv)
                a = prior_doc[k] + ej
                b = prior_word[w] + ew
                d = prior_topic + ek
                lw[k] = (log(a * b / d) - vj / (2.0 * a * a) - vw / (2.0 * b * b) + vk / (2.0 * d * d))
                if lw[k] > m:
                    m = lw[k]
            s = 0.0
            for k in range(K):
                lw[k] = exp(lw[k] - m)
                s += lw[k]
            for k in range(K):
                q = r[p, k]
                qn = lw[k] / s
                r[p, k] = <floating>qn
                qn = r[p, k]                     # the stored value (float32 rounding)
                dq = c * (qn - q)
                dv = c * (qn * (1.0 - qn) - q * (1.0 - q))
                E_jk[j, k] += dq
                V_jk[j, k] += dv
                E_wk[w, k] += dq
                V_wk[w, k] += dv
                E_k[k] += dq
                V_k[k] += dv


def cv_sweep(const int64_t[::1] indptr,         # IN  (n_docs + 1,) CSR row pointers
             const int32_t[::1] indices,        # IN  (nnz,) word ids
             const int32_t[::1] counts,         # IN  (nnz,) counts c_jw
             floating[:, ::1] r,                # IN/OUT (nnz, K) responsibilities per pair
             double[:, ::1] E_jk, double[:, ::1] V_jk,   # IN/OUT (n_docs, K)
             double[:, ::1] E_wk, double[:, ::1] V_wk,   # IN/OUT (n_words, K)
             double[::1] E_k, double[::1] V_k,           # IN/OUT (K,)
             const double[::1] prior_doc,       # IN  (K,) G[alpha beta_k]
             const double[::1] prior_word,      # IN  (n_words,) G[eta_tot tau_w]
             double prior_topic):               # IN  E[eta_tot]
    """One sequential sweep of update (15) over all pairs, in document order.

    For pair (j, w) with one copy removed (``E^- = E - r``, ``V^- = V - r(1-r)``)::

        r_jwk ∝ (prior_doc_k + E^-_jk)(prior_word_w + E^-_kw) / (prior_topic + E^-_k)
                * exp(-V^-_jk / (2 (prior_doc_k + E^-_jk)^2) - V^-_kw / (2 (...)^2) + V^-_k / (2 (...)^2))

    then ``E += c (r_new - r_old)`` and ``V += c (r_new(1-r_new) - r_old(1-r_old))``
    for n_jk, n_kw and n_k. Z is not needed by (15); it is rebuilt by
    :func:`cv_statistics` after the sweep.
    """
    cdef int64_t K = r.shape[1]
    if (r.shape[0] != indices.shape[0] or E_jk.shape[1] != K or E_wk.shape[1] != K or E_k.shape[0] != K
            or prior_doc.shape[0] != K or prior_word.shape[0] != E_wk.shape[0]
            or E_jk.shape[0] != indptr.shape[0] - 1):
        raise ValueError("cv_sweep: inconsistent shapes")
    lw = np.empty(max(K, 1), dtype=np.float64)
    cdef double[::1] lwv = lw
    with nogil:
        _sweep(indptr, indices, counts, r, E_jk, V_jk, E_wk, V_wk, E_k, V_k, prior_doc, prior_word,
               prior_topic, lwv)


def cv_statistics(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,
                  const floating[:, ::1] r,               # IN  (nnz, K)
                  double[:, ::1] E_jk, double[:, ::1] V_jk, double[:, ::1] Z_jk,   # OUT (n_docs, K)
                  double[:, ::1] E_wk, double[:, ::1] V_wk, double[:, ::1] Z_wk):  # OUT (n_words, K)
    """E, V, Z of n_jk and n_kw from scratch ([CVHDP] (13)); returns the entropy
    ``-sum_p c_p sum_k r_pk log r_pk``.

    Equivalent to ``E_jk = A.T @ (c r)``, ``V_jk = A.T @ (c r (1 - r))``,
    ``Z_jk = A.T @ (c log1p(-min(r, 1 - 1e-15)))`` with A the pair-to-document
    indicator (and the pair-to-word indicator for the ``_wk`` arrays).
    """
    cdef int64_t K = r.shape[1], j, p, k
    cdef int32_t w
    cdef double c, q, qc, lz, ent = 0.0
    if r.shape[0] != indices.shape[0] or E_jk.shape[0] != indptr.shape[0] - 1:
        raise ValueError("cv_statistics: inconsistent shapes")
    with nogil:
        E_jk[:, :] = 0.0
        V_jk[:, :] = 0.0
        Z_jk[:, :] = 0.0
        E_wk[:, :] = 0.0
        V_wk[:, :] = 0.0
        Z_wk[:, :] = 0.0
        for j in range(indptr.shape[0] - 1):
            for p in range(indptr[j], indptr[j + 1]):
                w = indices[p]
                c = counts[p]
                for k in range(K):
                    q = r[p, k]
                    if q <= 0.0:
                        continue
                    qc = q if q < _Q_MAX else _Q_MAX
                    lz = c * log1p(-qc)
                    ent -= c * q * log(q)
                    E_jk[j, k] += c * q
                    V_jk[j, k] += c * q * (1.0 - q)
                    Z_jk[j, k] += lz
                    E_wk[w, k] += c * q
                    V_wk[w, k] += c * q * (1.0 - q)
                    Z_wk[w, k] += lz
    return ent


def cv_fold_in(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,
               const double[:, ::1] phi_wk,    # IN  (n_words, K) topic-word probabilities, word-major
               const double[::1] prior,        # IN  (K,) document prior (alpha beta_k)
               int64_t n_iter,
               double[:, ::1] theta):          # OUT (n_docs, K) posterior mean proportions
    """Per-document collapsed variational updates with the topics held fixed.

    The document side of (15): ``r_jwk ∝ (prior_k + E^-_jk) phi_wk exp(-V^-_jk / (2 (prior_k + E^-_jk)^2))``,
    ``n_iter`` sequential passes over each document's pairs from
    ``r ∝ prior_k phi_wk``; returns ``theta_jk = (prior_k + E_jk) / (sum(prior) + N_j)``.
    """
    cdef int64_t K = prior.shape[0], n_docs = indptr.shape[0] - 1, j, p, k, it
    if phi_wk.shape[1] != K or theta.shape[0] != n_docs or theta.shape[1] != K:
        raise ValueError("cv_fold_in: inconsistent shapes")
    nnz_max = int(np.max(np.diff(np.asarray(indptr)))) if n_docs else 0
    rbuf = np.empty((max(nnz_max, 1), max(K, 1)), dtype=np.float64)
    stats = np.zeros((3, max(K, 1)), dtype=np.float64)
    cdef double[:, ::1] rv = rbuf
    cdef double[:, ::1] sv = stats
    cdef double c, q, qn, a, s, m, dv, ps = 0.0, n_j
    cdef int64_t lo
    for k in range(K):
        ps += prior[k]
    with nogil:
        for j in range(n_docs):
            lo = indptr[j]
            n_j = 0.0
            for k in range(K):
                sv[0, k] = 0.0
                sv[1, k] = 0.0
            for p in range(lo, indptr[j + 1]):
                c = counts[p]
                n_j += c
                s = 0.0
                for k in range(K):
                    rv[p - lo, k] = prior[k] * phi_wk[indices[p], k]
                    s += rv[p - lo, k]
                for k in range(K):
                    q = rv[p - lo, k] / s if s > 0.0 else 1.0 / K
                    rv[p - lo, k] = q
                    sv[0, k] += c * q
                    sv[1, k] += c * q * (1.0 - q)
            for it in range(n_iter):
                for p in range(lo, indptr[j + 1]):
                    c = counts[p]
                    m = -1e300
                    for k in range(K):
                        q = rv[p - lo, k]
                        a = prior[k] + _clamp0(sv[0, k] - q)
                        dv = _clamp0(sv[1, k] - q * (1.0 - q))
                        # no variance, no correction: a * a underflows to 0 for priors alpha beta_k
                        # below 1e-154, and 0 / 0 would make the row NaN
                        sv[2, k] = (log(a * phi_wk[indices[p], k]) if phi_wk[indices[p], k] > 0.0 else -1e300) \
                            - (dv / (2.0 * a * a) if dv > 0.0 else 0.0)
                        if sv[2, k] > m:
                            m = sv[2, k]
                    s = 0.0
                    for k in range(K):
                        sv[2, k] = exp(sv[2, k] - m)
                        s += sv[2, k]
                    for k in range(K):
                        q = rv[p - lo, k]
                        qn = sv[2, k] / s
                        rv[p - lo, k] = qn
                        sv[0, k] += c * (qn - q)
                        sv[1, k] += c * (qn * (1.0 - qn) - q * (1.0 - q))
            for k in range(K):
                theta[j, k] = (prior[k] + _clamp0(sv[0, k])) / (ps + n_j)
