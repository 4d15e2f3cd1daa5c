"""Kernels of the direct-assignment mean-field HDP of M. Bryant and E. B.
Sudderth, "Truly nonparametric online variational inference for hierarchical
Dirichlet processes" (NIPS 2012, cited as [SM]): the per-document E-step
(eqs. 3-4) and the restricted iteration of a split proposal (Alg. 1).

Shapes and types: a minibatch in the CSR form of
``bnpcore.inference.online.Minibatch`` (``ptr`` int64 (S + 1), ``words`` int32
local word ids, ``counts`` int32; one ``bnp_csr_t`` in the nogil code); ``K``
used topics; the rest cell (all unused topics together) is the last of the
``K + 1`` cells of ``alpha_beta`` and ``theta``. Per-word arrays are word-major over the minibatch vocabulary
(``Vb`` words) so that a token touches one contiguous row.
"""
import numpy as np
from libc.math cimport exp, fabs, log, INFINITY
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc
from cython.parallel cimport prange, threadid

from bnpcore.kernels.parallel cimport PAD
from bnpcore.kernels.sparse cimport bnp_csr_t, csr_view
from bnpcore.kernels.special cimport bnp_digamma

# unnormalised responsibility sums below this are recomputed in log space
cdef double _TINY = 1e-280


# responsibilities (pairs x K doubles, 32 MB) held between two document-ordered
# reductions, each of which waits for the chunk's slowest document, so a chunk
# holds many documents; the size matters less for speed than doc_rounds'
# scratch row (benchmarks/results/design_choices.txt)
cdef int64_t _CHUNK_DOUBLES = 1 << 22


cdef void doc_rounds(int64_t j, const bnp_csr_t *m, const double[:, ::1] elogphi, const double[:, ::1] expphi,
                     const double[::1] alpha_beta, double tol, int max_iter, bint warm, double[:, ::1] theta,
                     double[:, ::1] ndk, double *rows, double *L, char *logspace, double *ps, double *eb, double *nd,
                     int64_t *rounds) noexcept nogil:
    """Eqs. 3-4 for document j to convergence; leaves its responsibilities in
    ``rows`` (nnz_j x K), the unnormalised sum (or, flagged in ``logspace``, the
    log normaliser) of each pair in ``L``, psi of the proportions r was computed
    from in ``ps``, and its counts in ``ndk[j]``. ``eb`` and ``nd`` are the
    thread's scratch rows of K: the counts are summed in ``nd`` and copied to
    ``ndk[j]`` once per round, as the row of the next document (often another
    thread's) may share a cache line with ``ndk[j]``."""
    cdef const int64_t *ptr = m.indptr
    cdef const int32_t *words = m.indices
    cdef const int32_t *counts = m.counts
    cdef int64_t K = elogphi.shape[1], p, i, k, v
    cdef double mx, x, z, c, N = 0.0, sb = 0.0, delta, t
    cdef double *row
    cdef int it
    for p in range(ptr[j], ptr[j + 1]):
        N += counts[p]
    if not warm:
        for k in range(K):
            sb += alpha_beta[k]
        for k in range(K):
            theta[j, k] = alpha_beta[k] + N * alpha_beta[k] / sb
    theta[j, K] = alpha_beta[K]
    for it in range(max(max_iter, 1)):
        mx = -INFINITY
        for k in range(K):
            ps[k] = bnp_digamma(theta[j, k])
            mx = max(mx, ps[k])
        for k in range(K):
            eb[k] = exp(ps[k] - mx)
            nd[k] = 0.0
        for p in range(ptr[j], ptr[j + 1]):
            i = p - ptr[j]
            v = words[p]
            c = counts[p]
            row = rows + i * K
            z = 0.0
            for k in range(K):
                x = expphi[v, k] * eb[k]
                row[k] = x
                z += x
            if z < _TINY:            # every product underflowed: redo in log space
                z = -INFINITY
                for k in range(K):
                    row[k] = elogphi[v, k] + ps[k]
                    z = max(z, row[k])
                x = 0.0
                for k in range(K):
                    row[k] = exp(row[k] - z)
                    x += row[k]
                L[i] = z + log(x)
                logspace[i] = 1
                z = x
            else:
                L[i] = z
                logspace[i] = 0
            z = 1.0 / z
            for k in range(K):
                row[k] *= z
                nd[k] += c * row[k]
        delta = 0.0
        for k in range(K):
            ndk[j, k] = nd[k]
            t = alpha_beta[k] + nd[k]
            delta += fabs(t - theta[j, k])
            theta[j, k] = t
        rounds[0] += 1
        if K == 0 or delta / K < tol:
            break


cdef void add_document(int64_t j, const bnp_csr_t *m, const double[:, ::1] r, const double[::1] L, int64_t first,
                       const double[:, ::1] ndk, const double[:, ::1] ps, int64_t k0, int64_t k1, double *stats,
                       double *entropy) noexcept nogil:
    """Document j's terms of the E-step's sums for topics k0..k1-1, in their
    order: -n_jk psi(theta'_jk) into the entropy, then pair by pair c r into the
    statistics and c r L into the entropy; its pairs' responsibilities and log
    normalisers are the rows ``first``.. of ``r`` and ``L``. ``stats`` is a
    (words, k1 - k0) array and ``entropy`` has k1 - k0 entries, both for these
    topics only."""
    cdef const int64_t *ptr = m.indptr
    cdef const int32_t *words = m.indices
    cdef const int32_t *counts = m.counts
    cdef int64_t p, k, i, n = k1 - k0
    cdef double c, x
    cdef double *row
    for k in range(k0, k1):
        entropy[k - k0] -= ndk[j, k] * ps[j, k]
    for p in range(ptr[j], ptr[j + 1]):
        i = first + p - ptr[j]
        c = counts[p]
        row = stats + words[p] * n - k0
        for k in range(k0, k1):
            x = c * r[i, k]
            row[k] += x
            entropy[k - k0] += x * L[i]


cdef void copy_columns(double[:, ::1] stats, double[::1] entropy, int64_t k0, int64_t k1, double *own,
                       double *own_entropy, bint into_own) noexcept nogil:
    """Topics k0..k1-1 of ``stats`` (words x K) and ``entropy`` (K,) into a
    thread's own copy (words x (k1 - k0), then k1 - k0) if ``into_own``, else back."""
    cdef int64_t v, k, n = k1 - k0
    for v in range(stats.shape[0]):
        for k in range(k0, k1):
            if into_own:
                own[v * n + k - k0] = stats[v, k]
            else:
                stats[v, k] = own[v * n + k - k0]
    for k in range(k0, k1):
        if into_own:
            own_entropy[k - k0] = entropy[k]
        else:
            entropy[k] = own_entropy[k - k0]


def estep(const int64_t[::1] ptr, const int32_t[::1] words, const int32_t[::1] counts,
          const double[:, ::1] elogphi, const double[::1] alpha_beta, double tol, int max_iter, bint warm,
          double[:, ::1] theta, double[:, ::1] ndk, double[:, ::1] stats, double[::1] entropy,
          double[:, ::1] resp, int n_threads=1, double[::1] log_norm=None, double[:, ::1] psi_theta=None):
    """Per-document coordinate ascent on (r_j, theta_j) to convergence ([SM] eqs. 3-4).

    ::

        r_jwk    ∝ exp(E[log phi_kw] + psi(theta_jk))       (the normaliser psi(alpha + N_j) cancels)
        theta_jk = alpha beta*_k + sum_w c_jw r_jwk,   theta_{j,K} = alpha beta*_K (the rest cell)

    alternated until the mean absolute change of theta_j over the K topics is
    below ``tol`` or after ``max_iter`` rounds. Each round is an exact block
    maximisation of the bound, so the bound never decreases.

    Documents run in ``n_threads`` OpenMP threads; the statistics are then
    added in document order, chunk by chunk (each thread adding the columns of
    its share of the topics), so every output is bit-identical for any number
    of threads.

    Parameters
    ----------
    ptr, words, counts : the minibatch (S documents, local word ids < Vb)
    elogphi : (Vb, K) IN, E[log phi_kw] of the minibatch words
    alpha_beta : (K + 1,) IN, alpha * beta*
    tol, max_iter : the per-document stopping rule
    warm : start from the given ``theta`` (else theta_jk = alpha beta*_k + N_j
        beta*_k / sum_{l<K} beta*_l)
    theta : (S, K + 1) IN if ``warm`` / OUT, at eq. 4 for the final r
    ndk : (S, K) OUT, sum_w c_jw r_jwk
    stats : (Vb, K) OUT (added to), sum_j c_jw r_jwk
    entropy : (K,) OUT (added to), the part sum c r (L_jw - psi(theta'_jk)) of
        -sum c r log r, where L_jw is the log normaliser of (3) and theta' the
        proportions r was computed from; the caller subtracts
        sum_w stats_wk elogphi_wk to obtain the entropy per topic
    resp : (nnz, K) OUT when it has nnz rows (the responsibilities, pairs in
        CSR order); any other number of rows: not written
    n_threads : int
    log_norm : (nnz,) OUT if given, L_jw of every pair
    psi_theta : (S, K) OUT if given, psi(theta'_jk) of every document; with
        ``resp`` and ``ndk``, ``reduce_sums`` redoes ``stats`` and ``entropy``
        from them bit for bit (``bnpcore.distributed``)

    Returns
    -------
    int, the rounds summed over documents.

    Equivalent NumPy (one document, ``c`` its counts, ``e`` = elogphi[its words])::

        for _ in range(max_iter):
            r = softmax(e + digamma(theta[:K]), axis=1)
            new = alpha_beta[:K] + c @ r
            done = abs(new - theta[:K]).mean() < tol; theta[:K] = new
            if done: break
    """
    cdef int64_t S = ptr.shape[0] - 1, V = elogphi.shape[0], K = elogphi.shape[1]
    cdef int64_t nnz = words.shape[0]
    if alpha_beta.shape[0] != K + 1 or theta.shape[0] != S or theta.shape[1] != K + 1:
        raise ValueError("alpha_beta must have K + 1 entries and theta shape (S, K + 1)")
    if ndk.shape[0] != S or ndk.shape[1] != K or stats.shape[0] != V or stats.shape[1] != K or entropy.shape[0] != K:
        raise ValueError("ndk must have shape (S, K), stats (Vb, K), entropy (K,)")
    if counts.shape[0] != nnz or ptr[S] != nnz:
        raise ValueError("words, counts and ptr disagree")
    n_threads = max(1, n_threads)
    cdef bint keep = resp.shape[0] == nnz and resp.shape[1] == K
    if (log_norm is not None and log_norm.shape[0] != nnz) or \
            (psi_theta is not None and (psi_theta.shape[0] != S or psi_theta.shape[1] != K)):
        raise ValueError("log_norm must have nnz entries and psi_theta shape (S, K)")
    cdef bint norms = log_norm is not None
    cdef int64_t j, p, k, v, w_max = 0, start, stop, base, tid, b, k0, k1
    for j in range(S):
        w_max = max(w_max, ptr[j + 1] - ptr[j])
    cdef int64_t chunk = max(_CHUNK_DOUBLES // max(K, 1), w_max)
    expphi_arr = np.empty((V, K))
    shift_arr = np.empty(V)
    rows_arr = np.empty((min(chunk, max(nnz, 1)), max(K, 1)))
    L_arr = np.empty(rows_arr.shape[0])
    flags_arr = np.empty(rows_arr.shape[0], dtype=np.int8)
    ps_arr = np.empty((S, max(K, 1)))
    eb_arr = np.empty((n_threads, 2 * max(K, 1) + PAD))
    rounds_arr = np.zeros((n_threads, PAD), dtype=np.int64)
    # thread b adds topics kb[b]..kb[b+1]-1 of every document, in document order,
    # into its own copy of those columns (words x its topics, then PAD) and of
    # their entropy terms: no two threads write one cache line
    kb_arr = (np.arange(n_threads + 1) * K) // n_threads
    cols_arr = np.zeros(V * K + n_threads * PAD)
    ent_arr = np.zeros((n_threads, K + PAD))
    cdef int64_t[::1] kb = kb_arr
    cdef double[::1] cols = cols_arr
    cdef double[:, ::1] ent = ent_arr
    cdef double[:, ::1] expphi = expphi_arr, rows = rows_arr, ps = ps_arr, eb = eb_arr
    cdef double[::1] shift = shift_arr, L = L_arr
    cdef signed char[::1] flags = flags_arr
    cdef int64_t[:, ::1] rounds = rounds_arr
    cdef double m
    cdef bnp_csr_t docs = csr_view(ptr, words, counts, V)
    # a document's rows of the chunk's buffers (an empty last document's start is their end)
    cdef double *rows_p = &rows[0, 0]
    cdef double *L_p = &L[0]
    cdef char *flags_p = <char *> &flags[0]
    with nogil:
        for b in prange(n_threads, num_threads=n_threads, schedule="static"):
            copy_columns(stats, entropy, kb[b], kb[b + 1], &cols[V * kb[b] + b * PAD], &ent[b, 0], True)
        for v in prange(V, num_threads=n_threads, schedule="static"):
            shift[v] = -INFINITY
            for k in range(K):
                shift[v] = max(shift[v], elogphi[v, k])
            for k in range(K):
                expphi[v, k] = exp(elogphi[v, k] - shift[v])
        start = 0
        while start < S:
            stop = start + 1        # documents [start, stop) whose pairs fit in the buffers
            while stop < S and ptr[stop + 1] - ptr[start] <= chunk:
                stop += 1
            base = ptr[start]
            for j in prange(start, stop, num_threads=n_threads, schedule="dynamic"):
                tid = threadid()
                doc_rounds(j, &docs, elogphi, expphi, alpha_beta, tol, max_iter, warm, theta, ndk,
                           rows_p + (ptr[j] - base) * rows.shape[1], L_p + (ptr[j] - base),
                           flags_p + (ptr[j] - base), &ps[j, 0], &eb[tid, 0], &eb[tid, K], &rounds[tid, 0])
            for j in prange(start, stop, num_threads=n_threads, schedule="static"):
                m = -INFINITY
                for k in range(K):
                    m = max(m, ps[j, k])
                for p in range(ptr[j], ptr[j + 1]):
                    if not flags[p - base]:
                        L[p - base] = shift[words[p]] + m + log(L[p - base])
                    if norms:
                        log_norm[p] = L[p - base]
                    if keep:
                        for k in range(K):
                            resp[p, k] = rows[p - base, k]
            for b in prange(n_threads, num_threads=n_threads, schedule="static"):
                k0 = kb[b]
                k1 = kb[b + 1]
                for j in range(start, stop):      # the reduction, in document order
                    add_document(j, &docs, rows, L, ptr[j] - base, ndk, ps, k0, k1,
                                 &cols[V * k0 + b * PAD], &ent[b, 0])
            start = stop
        for b in prange(n_threads, num_threads=n_threads, schedule="static"):
            copy_columns(stats, entropy, kb[b], kb[b + 1], &cols[V * kb[b] + b * PAD], &ent[b, 0], False)
    if psi_theta is not None and K > 0:
        psi_theta[:, :] = ps
    return int(rounds_arr.sum())


def reduce_sums(const int64_t[::1] ptr, const int32_t[::1] words, const int32_t[::1] counts,
                const double[:, ::1] resp, const double[::1] log_norm, const double[:, ::1] ndk,
                const double[:, ::1] psi_theta, double[:, ::1] stats, double[::1] entropy):
    """``stats`` and ``entropy`` of ``estep`` (added to) from its outputs ``resp``,
    ``log_norm``, ``ndk`` and ``psi_theta``, summed in its order (documents in
    order), so bit for bit: the documents' E-steps may run apart
    (``bnpcore.distributed``) and be summed here.

    Equivalent NumPy: ``np.add.at(stats, words, counts[:, None] * resp)``, and
    for each document j in order ``entropy -= ndk[j] * psi_theta[j]``, then for
    each of its pairs ``entropy += counts[p] * resp[p] * log_norm[p]``.
    """
    cdef int64_t S = ptr.shape[0] - 1, nnz = words.shape[0], K = stats.shape[1], j
    if counts.shape[0] != nnz or ptr[S] != nnz or resp.shape[0] != nnz or log_norm.shape[0] != nnz:
        raise ValueError("words, counts, resp, log_norm and ptr disagree")
    if resp.shape[1] != K or ndk.shape[0] != S or ndk.shape[1] != K or psi_theta.shape[0] != S \
            or psi_theta.shape[1] != K or entropy.shape[0] != K:
        raise ValueError("resp must have shape (nnz, K), ndk and psi_theta (S, K), entropy (K,)")
    if K == 0:
        return
    cdef bnp_csr_t docs = csr_view(ptr, words, counts, stats.shape[0])
    with nogil:
        for j in range(S):
            add_document(j, &docs, resp, log_norm, ptr[j], ndk, psi_theta, 0, K,
                         &stats[0, 0] if stats.shape[0] else NULL, &entropy[0])


cdef struct RestrictedSettings:
    # one restricted iteration of a split; from Python, a dict with these keys (every key required)
    double base1         # Lambda_k' without the minibatch statistics: sum_w memory1_w + rho eta W
    double base2         # the same for k''
    double rho_eta       # rho eta
    double rho_scale     # rho D / |B|
    double ab1           # alpha beta*_k'
    double ab2           # alpha beta*_k''
    double tol           # per-document stopping rule: mean absolute change of (theta', theta'') ...
    int max_iter         # ... or this many rounds
    int n_sweeps         # passes over the documents


def restricted(const int64_t[::1] ptr, const int32_t[::1] words, const int32_t[::1] counts,  # IN minibatch
               const double[::1] mass, const double[::1] memory1, const double[::1] memory2,  # IN
               RestrictedSettings settings,                                                   # IN
               double[::1] theta1, double[::1] theta2, double[::1] r1,                        # IN/OUT
               double[::1] stats1, double[::1] stats2):                                       # IN/OUT
    """The restricted iteration of a split ([SM] Alg. 1): only the two halves
    k', k'' of a split topic change; each pair keeps the responsibility
    ``R_jw`` the topic had: the exact coordinate step with the other topics
    fixed (the paper's displayed update normalises over all topics, so the
    responsibilities would no longer sum to 1)::

        lambda_lw = memory_lw + rho (eta + (D/|B|) stats_lw)                      (eq. 6 for each half)
        r'_jw     = R_jw sigmoid(E[log phi'_w] - E[log phi''_w] + psi(theta'_j) - psi(theta''_j)),  r'' = R - r'
        theta'_j  = ab1 + sum_w c r'_jw,   theta''_j = ab2 + sum_w c r''_jw

    Documents are visited in order and the halves' statistics are updated after
    each one (Alg. 1's per-document update, as incremental EM: every document
    step is an exact coordinate step of the restricted bound); the sequential
    updates are what separates two halves that start alike. Per document,
    rounds of (r, theta) run until the mean absolute change of (theta',
    theta'') is below ``tol`` (at most ``max_iter``).

    Parameters
    ----------
    ptr, words, counts : the minibatch (S documents, local word ids < Vb)
    mass : (nnz,) IN, R_jw
    memory1, memory2 : (Vb,) IN, the halves' remembered parameters at the minibatch words
    settings : dict with the keys ``base1, base2`` (Lambda_l without the
        minibatch statistics: sum_w memory_lw + rho eta W), ``rho_eta,
        rho_scale`` (rho eta and rho D / |B|), ``ab1, ab2`` (alpha beta*_k',
        alpha beta*_k''), ``tol, max_iter`` (the per-document stopping rule)
        and ``n_sweeps`` (passes over the documents)
    theta1, theta2 : (S,) IN (initial) / OUT, at eq. 4 for the final r'
    r1 : (nnz,) IN (initial) / OUT
    stats1, stats2 : (Vb,) IN / OUT, sum_j c r' and sum_j c r'', consistent with ``r1``

    Returns
    -------
    int, the rounds summed over documents and passes.
    """
    cdef double base1 = settings.base1, base2 = settings.base2, ab1 = settings.ab1, ab2 = settings.ab2
    cdef double rho_eta = settings.rho_eta, rho_scale = settings.rho_scale, tol = settings.tol
    cdef int max_iter = settings.max_iter, n_sweeps = settings.n_sweeps
    cdef int64_t S = ptr.shape[0] - 1, V = memory1.shape[0], nnz = words.shape[0]
    if mass.shape[0] != nnz or r1.shape[0] != nnz or counts.shape[0] != nnz or ptr[S] != nnz:
        raise ValueError("mass, r1, words, counts and ptr disagree")
    if memory2.shape[0] != V or stats1.shape[0] != V or stats2.shape[0] != V:
        raise ValueError("memory1, memory2, stats1 and stats2 must have one entry per minibatch word")
    if theta1.shape[0] != S or theta2.shape[0] != S:
        raise ValueError("theta1 and theta2 must have one entry per document")
    if max_iter < 1 or n_sweeps < 1:
        raise ValueError("max_iter and n_sweeps must be at least 1")
    cdef int64_t j, p, v, w_max = 0, total = 0
    for j in range(S):
        w_max = max(w_max, ptr[j + 1] - ptr[j])
    cdef double *diff = <double *> malloc(max(w_max, 1) * sizeof(double))
    cdef double *rnew = <double *> malloc(max(w_max, 1) * sizeof(double))
    if diff == NULL or rnew == NULL:
        free(diff); free(rnew)
        raise MemoryError()
    cdef int it, sweep
    cdef double d, x, R, n1, n2, t1, t2, sum1 = 0.0, sum2 = 0.0, psi1, psi2
    try:
        with nogil:
            for v in range(V):
                sum1 += stats1[v]
                sum2 += stats2[v]
            for sweep in range(n_sweeps):
                for j in range(S):
                    psi1 = bnp_digamma(base1 + rho_scale * sum1)
                    psi2 = bnp_digamma(base2 + rho_scale * sum2)
                    for p in range(ptr[j], ptr[j + 1]):
                        v = words[p]
                        diff[p - ptr[j]] = (bnp_digamma(memory1[v] + rho_eta + rho_scale * stats1[v]) - psi1
                                            - bnp_digamma(memory2[v] + rho_eta + rho_scale * stats2[v]) + psi2)
                    for it in range(max_iter):
                        d = bnp_digamma(theta1[j]) - bnp_digamma(theta2[j])
                        n1 = n2 = 0.0
                        for p in range(ptr[j], ptr[j + 1]):
                            R = mass[p]
                            x = R / (1.0 + exp(-diff[p - ptr[j]] - d))
                            rnew[p - ptr[j]] = x
                            n1 += counts[p] * x
                            n2 += counts[p] * (R - x)
                        t1, t2 = ab1 + n1, ab2 + n2
                        x = 0.5 * (fabs(t1 - theta1[j]) + fabs(t2 - theta2[j]))
                        theta1[j], theta2[j] = t1, t2
                        total += 1
                        if x < tol:
                            break
                    for p in range(ptr[j], ptr[j + 1]):
                        v = words[p]
                        x = counts[p] * (rnew[p - ptr[j]] - r1[p])
                        r1[p] = rnew[p - ptr[j]]
                        stats1[v] += x
                        stats2[v] = max(stats2[v] - x, 0.0)
                        sum1 += x
                        sum2 -= x
    finally:
        free(diff); free(rnew)
    return total
