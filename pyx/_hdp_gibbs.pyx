"""Kernels of the direct-assignment HDP Gibbs sampler (G-HDP; Teh, Jordan, Beal &
Blei 2006, section 5.3; ALGORITHMS.md 4.4).

State layout (owned by :class:`bnpcore.hdp.DirectAssignmentGibbs`): topic slots
0..k_used-1 of capacity kcap; ``n_jk`` (n_docs x kcap) and ``n_wk`` (n_words x
kcap, word-major so a token touches one contiguous row) are int32 counts, ``n_k``
int64 topic sizes, ``beta`` the global weights of the slots (0 for an empty slot,
a "hole"). Empty slots get weight 0 in the conditional automatically (all their
counts and their beta are 0), so holes need no special case in the inner loop;
the driver compacts them between sweeps.
"""
import numpy as np
cimport numpy as cnp
from libc.math cimport exp, log
from libc.stdint cimport int32_t, int64_t
from bnpcore.kernels.rng cimport bnp_bitgen_t, bitgen_of, bnp_rng_uniform, bnp_rng_log_beta
from bnpcore.kernels.stirling cimport StirlingTable, sample_tables

cnp.import_array()


cdef struct SweepConfig:
    double alpha
    double gamma
    double eta          # per-word topic prior eta_w (symmetric)
    double eta_tot      # W * eta
    double beta_new     # mass of the uninstantiated topics
    int64_t k_used      # slots in use (active topics and holes)
    int64_t kcap        # slot capacity
    int64_t n_free      # holes among the k_used slots


cdef inline double _cum_weights(const int32_t *njk, const int32_t *nwk, const double *ab,
                                const double *inv, double eta, int64_t k_used,
                                double *cum) noexcept nogil:
    """cum[k] = sum_{l<=k} (n_jl + alpha beta_l) (n_lw + eta) / (n_l + eta_tot); returns the total."""
    cdef double s = 0.0
    cdef int64_t k
    for k in range(k_used):
        s += (njk[k] + ab[k]) * (nwk[k] + eta) * inv[k]
        cum[k] = s
    return s


cdef inline void _remove(int32_t *njk, int32_t *nwk, int64_t *n_k, double *beta, double *ab,
                         double *inv, SweepConfig *cfg, int64_t k) noexcept nogil:
    """Take one token out of topic k; an emptied topic returns its weight to beta_new."""
    njk[k] -= 1
    nwk[k] -= 1
    n_k[k] -= 1
    inv[k] = 1.0 / (n_k[k] + cfg.eta_tot)
    if n_k[k] == 0:
        cfg.beta_new += beta[k]
        beta[k] = 0.0
        ab[k] = 0.0
        cfg.n_free += 1


cdef inline void _add(int32_t *njk, int32_t *nwk, int64_t *n_k, double *inv, SweepConfig *cfg,
                      int64_t k) noexcept nogil:
    njk[k] += 1
    nwk[k] += 1
    n_k[k] += 1
    inv[k] = 1.0 / (n_k[k] + cfg.eta_tot)


cdef inline int64_t _new_topic(int64_t *n_k, double *beta, double *ab, SweepConfig *cfg,
                               bnp_bitgen_t *g) noexcept nogil:
    """Instantiate a topic in a hole (or the next slot): beta_k = b beta_new, b ~ Beta(1, gamma)."""
    cdef int64_t k
    cdef double log1m, logb
    if cfg.n_free > 0:
        k = 0
        while n_k[k] != 0:
            k += 1
        cfg.n_free -= 1
    else:
        k = cfg.k_used
        cfg.k_used += 1
    logb = bnp_rng_log_beta(g, 1.0, cfg.gamma, &log1m)
    beta[k] = cfg.beta_new * exp(logb)
    cfg.beta_new *= exp(log1m)
    ab[k] = cfg.alpha * beta[k]
    return k


cdef int64_t _sweep(const int32_t *words, const int64_t *tok_ptr, int64_t n_docs, int32_t *z,
                    int32_t *n_jk, int32_t *n_wk, int64_t *n_k, double *beta, double *ab,
                    double *inv, double *cum, SweepConfig *cfg, int64_t start_tok,
                    bnp_bitgen_t *g) noexcept nogil:
    """Gibbs update of every token from token start_tok on; returns the token at which
    it stopped for lack of a free slot (the number of tokens when done)."""
    cdef int64_t j = 0, t, k, kcap = cfg.kcap
    cdef int32_t *njk
    cdef int32_t *nwk
    cdef double total, p_new, u
    while j < n_docs and tok_ptr[j + 1] <= start_tok:
        j += 1
    for j in range(j, n_docs):
        njk = n_jk + j * kcap
        for t in range(max(tok_ptr[j], start_tok), tok_ptr[j + 1]):
            if cfg.n_free == 0 and cfg.k_used == kcap:
                return t                 # no slot for a new topic: the caller grows the arrays
            nwk = n_wk + <int64_t>words[t] * kcap
            _remove(njk, nwk, n_k, beta, ab, inv, cfg, z[t])
            total = _cum_weights(njk, nwk, ab, inv, cfg.eta, cfg.k_used, cum)
            p_new = cfg.alpha * cfg.beta_new * cfg.eta / cfg.eta_tot
            u = bnp_rng_uniform(g) * (total + p_new)
            if u >= total:
                k = _new_topic(n_k, beta, ab, cfg, g)
            else:
                k = 0
                while not cum[k] > u:    # strict: skips zero-weight slots
                    k += 1
            z[t] = <int32_t>k
            _add(njk, nwk, n_k, inv, cfg, k)
    return tok_ptr[n_docs]


def _check_state(words, tok_ptr, z, n_jk, n_wk, n_k, beta, k_used):
    kcap = n_jk.shape[1]
    if n_wk.shape[1] != kcap or n_k.shape[0] != kcap or beta.shape[0] != kcap:
        raise ValueError("count arrays disagree on the topic capacity")
    if z.shape[0] != words.shape[0] or tok_ptr.shape[0] != n_jk.shape[0] + 1:
        raise ValueError("token arrays disagree with the count arrays")
    if not 0 <= k_used <= kcap:
        raise ValueError(f"k_used={k_used} outside [0, {kcap}]")


def gibbs_sweep(const int32_t[::1] words,        # IN  word id of every token
                const int64_t[::1] tok_ptr,      # IN  token offsets of the documents
                int32_t[::1] z,                  # IN/OUT topic slot of every token
                int32_t[:, ::1] n_jk,            # IN/OUT (n_docs, kcap)
                int32_t[:, ::1] n_wk,            # IN/OUT (n_words, kcap)
                int64_t[::1] n_k,                # IN/OUT (kcap,)
                double[::1] beta,                # IN/OUT (kcap,) global weights of the slots
                double beta_new, int64_t k_used, double alpha, double gamma, double eta,
                int64_t start_tok, generator):
    """One sweep of topic indicators with the new-topic option (ALGORITHMS.md 4.4 step 1).

    For each token: remove it (an emptied topic is deleted, its weight returned to
    beta_new), draw ``k`` with probability proportional to
    ``(n_jk + alpha beta_k)(n_kw + eta)/(n_k + W eta)`` or a new topic with
    probability proportional to ``alpha beta_new / W``; a new topic takes
    ``beta_k = b beta_new``, ``b ~ Beta(1, gamma)``; add the token back.

    Returns ``(next_tok, k_used, beta_new)``: ``next_tok < n_tokens`` means the slot
    capacity ran out before token ``next_tok``; grow the arrays and call again
    from there.
    """
    _check_state(words, tok_ptr, z, n_jk, n_wk, n_k, beta, k_used)
    cdef SweepConfig cfg
    cdef int64_t kcap = n_jk.shape[1], n_docs = n_jk.shape[0], k, next_tok
    cfg.alpha = alpha
    cfg.gamma = gamma
    cfg.eta = eta
    cfg.eta_tot = eta * n_wk.shape[0]
    cfg.beta_new = beta_new
    cfg.k_used = k_used
    cfg.kcap = kcap
    cfg.n_free = 0
    scratch = np.empty((3, max(kcap, 1)), dtype=np.float64)
    cdef double[:, ::1] sv = scratch
    for k in range(k_used):
        sv[0, k] = alpha * beta[k]
        sv[1, k] = 1.0 / (n_k[k] + cfg.eta_tot)
        cfg.n_free += n_k[k] == 0
    cdef bnp_bitgen_t *g = bitgen_of(generator)
    with generator.bit_generator.lock, nogil:
        next_tok = _sweep(&words[0] if words.shape[0] else NULL, &tok_ptr[0], n_docs,
                          &z[0] if z.shape[0] else NULL, &n_jk[0, 0], &n_wk[0, 0], &n_k[0],
                          &beta[0], &sv[0, 0], &sv[1, 0], &sv[2, 0], &cfg, start_tok, g)
    return next_tok, cfg.k_used, cfg.beta_new


def token_conditional(const int32_t[::1] words, const int64_t[::1] tok_ptr, const int32_t[::1] z,
                      const int32_t[:, ::1] n_jk, const int32_t[:, ::1] n_wk, const int64_t[::1] n_k,
                      const double[::1] beta, double beta_new, int64_t k_used, double alpha,
                      double eta, int64_t j, int64_t t):
    """The sampler's conditional of token ``t`` (of document ``j``) given all others,
    computed by the sweep's own code: probabilities over slots 0..k_used-1 and,
    last, the new topic (array of length k_used + 1). The state is not changed.
    """
    _check_state(words, tok_ptr, z, n_jk, n_wk, n_k, beta, k_used)
    if not (0 <= j < n_jk.shape[0] and tok_ptr[j] <= t < tok_ptr[j + 1]):
        raise ValueError(f"token {t} is not in document {j}")
    cdef int64_t kcap = n_jk.shape[1], k, w = words[t]
    cdef SweepConfig cfg
    cfg.alpha = alpha
    cfg.eta = eta
    cfg.eta_tot = eta * n_wk.shape[0]
    cfg.beta_new = beta_new
    cfg.n_free = 0
    njk = np.array(n_jk[j], dtype=np.int32)
    nwk = np.array(n_wk[w], dtype=np.int32)
    nk = np.array(n_k, dtype=np.int64)
    bt = np.array(beta, dtype=np.float64)
    ab = alpha * bt
    inv = 1.0 / (nk + cfg.eta_tot)
    out = np.empty(k_used + 1, dtype=np.float64)
    cdef int32_t[::1] njv = njk, nwv = nwk
    cdef int64_t[::1] nkv = nk
    cdef double[::1] bv = bt, abv = ab, iv = inv, ov = out
    _remove(&njv[0], &nwv[0], &nkv[0], &bv[0], &abv[0], &iv[0], &cfg, z[t])
    cdef double total = _cum_weights(&njv[0], &nwv[0], &abv[0], &iv[0], eta, k_used, &ov[0])
    ov[k_used] = total + alpha * cfg.beta_new * eta / cfg.eta_tot
    return np.diff(out, prepend=0.0) / ov[k_used]


def draw_tables(const int32_t[:, ::1] n_jk,      # IN  (n_docs, kcap)
                const double[::1] ab,            # IN  (kcap,) alpha * beta_k
                int64_t k_used, StirlingTable table, generator,
                int64_t[::1] m_k):               # OUT (kcap,) tables per topic
    """Table counts m_jk ~ Antoniak(n_jk, alpha beta_k) for every n_jk > 0, summed over
    documents into ``m_k`` (ALGORITHMS.md 4.4 step 2). Draws use the Stirling table
    where it serves n_jk (grow it to the longest document first), CRP seating beyond.
    Equivalent to ``m_k[k] = sum_j antoniak_sample(n_jk[j, k], ab[k])``.
    """
    if ab.shape[0] < k_used or m_k.shape[0] < k_used or n_jk.shape[1] < k_used:
        raise ValueError("arrays shorter than k_used")
    cdef int64_t j, k, n
    cdef bnp_bitgen_t *g = bitgen_of(generator)
    with generator.bit_generator.lock, nogil:
        for k in range(k_used):
            m_k[k] = 0
        for j in range(n_jk.shape[0]):
            for k in range(k_used):
                n = n_jk[j, k]
                if n > 0:
                    m_k[k] += sample_tables(&table.table, n, ab[k], g)


def fold_in(const int32_t[::1] words,        # IN  word ids of the new documents' tokens
            const int64_t[::1] tok_ptr,      # IN  token offsets
            const double[:, ::1] phi_wk,     # IN  (n_words, K) topic-word probabilities, word-major
            const double[::1] prior,         # IN  (K,) alpha * beta_k
            int64_t n_sweeps, int64_t burn_in, generator,
            double[:, ::1] theta):           # OUT (n_docs, K) averaged posterior mean proportions
    """Per-document Gibbs sampling with the topics held fixed (transform of new documents).

    Token topics are drawn from ``p(z_i = k) ∝ (n^{-i}_jk + prior_k) phi_wk[w_i, k]``
    (first assignment from the prior times phi); after ``burn_in`` sweeps the
    posterior means ``(n_jk + prior_k) / (N_j + sum(prior))`` are averaged over the
    remaining sweeps. Equivalent per document to the loop of LDA fold-in.
    """
    cdef int64_t n_docs = tok_ptr.shape[0] - 1, K = prior.shape[0], j, t, k, s, n_avg
    if phi_wk.shape[1] != K or theta.shape[0] != n_docs or theta.shape[1] != K:
        raise ValueError("phi_wk, prior and theta disagree on the number of topics")
    if n_sweeps <= burn_in:
        raise ValueError("n_sweeps must exceed burn_in")
    z_arr = np.zeros(words.shape[0], dtype=np.int64)
    scratch = np.zeros((2, max(K, 1)), dtype=np.float64)
    cdef int64_t[::1] z = z_arr
    cdef double[:, ::1] sv = scratch
    cdef double *cnt = &sv[0, 0]
    cdef double *cum = &sv[1, 0]
    cdef double total, u, prior_sum = 0.0, norm
    cdef const double *ph
    cdef bnp_bitgen_t *g = bitgen_of(generator)
    for k in range(K):
        prior_sum += prior[k]
    n_avg = n_sweeps - burn_in
    with generator.bit_generator.lock, nogil:
        for j in range(n_docs):
            for k in range(K):
                cnt[k] = 0.0
                theta[j, k] = 0.0
            for s in range(n_sweeps):
                for t in range(tok_ptr[j], tok_ptr[j + 1]):
                    ph = &phi_wk[words[t], 0]
                    if s > 0:
                        cnt[z[t]] -= 1.0
                    total = 0.0
                    for k in range(K):
                        total += (cnt[k] + prior[k]) * ph[k]
                        cum[k] = total
                    u = bnp_rng_uniform(g) * total
                    k = 0
                    while k < K - 1 and not cum[k] > u:
                        k += 1
                    z[t] = k
                    cnt[k] += 1.0
                if s >= burn_in:
                    norm = 1.0 / ((tok_ptr[j + 1] - tok_ptr[j] + prior_sum) * n_avg)
                    for k in range(K):
                        theta[j, k] += (cnt[k] + prior[k]) * norm
