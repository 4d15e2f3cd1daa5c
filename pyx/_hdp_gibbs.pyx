"""Kernels of the direct-assignment HDP Gibbs sampler (G-HDP; Teh, Jordan, Beal &
Blei 2006, section 5.3).

The documents are a CSR count matrix (``indptr`` int64, ``indices`` int32 word
ids, ``counts`` int32), one ``bnp_csr_t`` in the nogil code.

State layout (owned by :class:`bnpcore.hdp.DirectAssignmentGibbs`): topic slots
0..k_used-1 of capacity kcap; ``z`` the slot of every token (int32, CSR order);
``n_wk`` (n_words x kcap, word-major so a token touches one contiguous row) int32
counts, ``n_k`` int64 topic sizes, ``beta`` the global weights of the slots (0 for
an empty slot, a "hole"). The document-topic counts n_jk are not stored: the
sweep and the table draws rebuild each document's row from its labels. Holes carry no weight in the conditional (all their counts and their
beta are 0); the driver compacts them between sweeps.

The token conditional is split into three buckets (the SparseLDA decomposition,
Yao, Mimno & McCallum 2009, applied to the HDP prior alpha beta_k):

    (n_jk + ab_k)(n_kw + eta) inv_k = n_kw (n_jk + ab_k) inv_k    word bucket: topics with n_kw > 0
                                    + eta n_jk inv_k               document bucket: topics with n_jk > 0
                                    + eta ab_k inv_k               smoothing bucket: all topics (total kept)

with ab_k = alpha beta_k and inv_k = 1 / (n_k + eta_tot). Per token the cost is
the number of topics of the word plus those of the document (about 10 + 23 on
KOS) instead of all K, and the draw is from the identical distribution.
"""
import numpy as np
cimport numpy as cnp
from libc.math cimport exp, log
from libc.stdlib cimport free, malloc
from libc.string cimport memcpy, memset
from cython.parallel cimport prange, threadid
from libc.stdint cimport int32_t, int64_t, uint64_t
from bnpcore.kernels.parallel cimport PAD
from bnpcore.kernels.sparse cimport bnp_csr_t, csr_view
from bnpcore.kernels.rng cimport (bnp_bitgen_t, bitgen_of, bnp_rng_uniform, bnp_rng_log_beta, bnp_stream_t,
                                  bnp_stream_init)
from bnpcore.kernels.stirling cimport StirlingTable, sample_tables

cnp.import_array()


cdef struct Priors:
    # the sampler's hyperparameters; from Python, a dict with these keys (every key required)
    double alpha         # document-level concentration
    double gamma         # top-level concentration
    double eta           # topic Dirichlet parameter (per word)


cdef struct SweepSettings:
    # gibbs_sweep's; from Python, a dict with these keys (every key required)
    double alpha         # document-level concentration
    double gamma         # top-level concentration
    double eta           # topic Dirichlet parameter (per word)
    bint reuse_holes     # a new topic takes the first hole (False: the next slot after k_used)


cdef struct SweepConfig:
    double alpha
    double gamma
    double eta          # per-word topic prior eta_w (symmetric)
    double eta_tot      # W * eta
    double beta_new     # mass of the uninstantiated topics
    double s_ab         # sum_k ab_k inv_k (smoothing bucket / eta)
    int64_t k_used      # slots in use (active topics and holes)
    int64_t kcap        # slot capacity
    int64_t n_free      # holes among the k_used slots
    bint reuse_holes    # a new topic may take a hole (the delayed schedule's blocks append only)


cdef struct TopicLists:
    # topics with a non-zero count, with each topic's position for O(1) removal
    int32_t *wl         # (n_words, kcap) topics of each word
    int32_t *wpos       # (n_words, kcap)
    int32_t *wlen       # (n_words,)
    int32_t *dl         # (kcap,) topics of the current document
    int32_t *dpos       # (kcap,)
    int32_t dlen


# The three parts of a topic's weight (shared by the sweep and token_conditional).
cdef inline double _w_word(int32_t nkw, int32_t njk, double ab, double inv) noexcept nogil:
    return nkw * (njk + ab) * inv


cdef inline double _w_doc(int32_t njk, double inv, double eta) noexcept nogil:
    return eta * njk * inv


cdef inline double _w_smooth(double ab, double inv, double eta) noexcept nogil:
    return eta * ab * inv


cdef inline void _list_add(int32_t *lst, int32_t *pos, int32_t *n, int64_t k) noexcept nogil:
    lst[n[0]] = <int32_t>k
    pos[k] = n[0]
    n[0] += 1


cdef inline void _list_remove(int32_t *lst, int32_t *pos, int32_t *n, int64_t k) noexcept nogil:
    cdef int32_t i = pos[k], last = lst[n[0] - 1]
    lst[i] = last
    pos[last] = i
    n[0] -= 1


cdef inline void _set_size(int64_t *n_k, double *ab, double *inv, SweepConfig *cfg, int64_t k,
                           int64_t delta) noexcept nogil:
    """n_k += delta, keeping inv_k and the smoothing total in step."""
    cfg.s_ab -= ab[k] * inv[k]
    n_k[k] += delta
    inv[k] = 1.0 / (n_k[k] + cfg.eta_tot)
    cfg.s_ab += ab[k] * inv[k]


cdef inline void _remove(int32_t *njk, int32_t *nwk, int64_t *n_k, double *beta, double *ab, double *inv,
                         SweepConfig *cfg, TopicLists *tl, int32_t *wl, int32_t *wpos, int32_t *wlen,
                         int64_t k) noexcept nogil:
    """Take one token out of topic k; an emptied topic returns its weight to beta_new."""
    njk[k] -= 1
    if njk[k] == 0:
        _list_remove(tl.dl, tl.dpos, &tl.dlen, k)
    nwk[k] -= 1
    if nwk[k] == 0:
        _list_remove(wl, wpos, wlen, k)
    _set_size(n_k, ab, inv, cfg, k, -1)
    if n_k[k] == 0:
        cfg.s_ab -= ab[k] * inv[k]
        cfg.beta_new += beta[k]
        beta[k] = 0.0
        ab[k] = 0.0
        cfg.n_free += 1


cdef inline void _add(int32_t *njk, int32_t *nwk, int64_t *n_k, double *ab, double *inv, SweepConfig *cfg,
                      TopicLists *tl, int32_t *wl, int32_t *wpos, int32_t *wlen, int64_t k) noexcept nogil:
    if njk[k] == 0:
        _list_add(tl.dl, tl.dpos, &tl.dlen, k)
    njk[k] += 1
    if nwk[k] == 0:
        _list_add(wl, wpos, wlen, k)
    nwk[k] += 1
    _set_size(n_k, ab, inv, cfg, k, 1)


cdef inline int64_t _new_topic(int64_t *n_k, double *beta, double *ab, double *inv, SweepConfig *cfg,
                               bnp_bitgen_t *g) noexcept nogil:
    """Instantiate a topic in a hole (or the next slot): beta_k = b beta_new, b ~ Beta(1, gamma)."""
    cdef int64_t k
    cdef double log1m, logb
    if cfg.n_free > 0 and cfg.reuse_holes:
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
    cfg.s_ab += ab[k] * inv[k]
    return k


cdef inline int64_t _draw(const int32_t *njk, const int32_t *nwk, const double *ab, const double *inv,
                          SweepConfig *cfg, TopicLists *tl, const int32_t *wl, int32_t wlen, double *cum,
                          double u01) noexcept nogil:
    """Topic of one token from the three buckets and the new-topic mass; -1 means new."""
    cdef double q = 0.0, r = 0.0, s, p_new, u, acc
    cdef int32_t i, n
    cdef int64_t k, last
    for i in range(wlen):
        k = wl[i]
        q += _w_word(nwk[k], njk[k], ab[k], inv[k])
        cum[i] = q
    n = tl.dlen
    for i in range(n):
        k = tl.dl[i]
        r += _w_doc(njk[k], inv[k], cfg.eta)
        cum[wlen + i] = r
    s = cfg.eta * cfg.s_ab
    if s < 0.0:
        s = 0.0                                   # rounding of the running total
    p_new = cfg.alpha * cfg.beta_new * cfg.eta / cfg.eta_tot
    u = u01 * (q + r + s + p_new)
    if u < q:
        i = 0
        while i < wlen - 1 and not cum[i] > u:
            i += 1
        return wl[i]
    u -= q
    if u < r:
        i = 0
        while i < n - 1 and not cum[wlen + i] > u:
            i += 1
        return tl.dl[i]
    u -= r
    if u < s:
        acc = 0.0
        last = -1
        for k in range(cfg.k_used):
            if ab[k] > 0.0:
                last = k
                acc += _w_smooth(ab[k], inv[k], cfg.eta)
                if acc > u:
                    return k
        if last >= 0:
            return last
    return -1


cdef void _setup(SweepConfig *cfg, double alpha, double gamma, double eta, int64_t n_words, double beta_new,
                 int64_t k_used, int64_t kcap, bint reuse_holes, const int64_t *n_k, const double *beta,
                 double *ab, double *inv) noexcept nogil:
    """The sweep's settings, and alpha beta_k and 1 / (n_k + W eta) of every slot."""
    cdef int64_t k
    cfg.alpha = alpha
    cfg.gamma = gamma
    cfg.eta = eta
    cfg.eta_tot = eta * n_words
    cfg.beta_new = beta_new
    cfg.k_used = k_used
    cfg.kcap = kcap
    cfg.n_free = 0
    cfg.reuse_holes = reuse_holes
    for k in range(kcap):
        ab[k] = alpha * beta[k] if k < k_used else 0.0
        inv[k] = 1.0 / (n_k[k] + cfg.eta_tot)
        if k < k_used:
            cfg.n_free += n_k[k] == 0


cdef int64_t _sweep(const bnp_csr_t *m, int32_t *z, int32_t *njk, int32_t *n_wk, int64_t *n_k, double *beta,
                    double *ab, double *inv, double *cum, SweepConfig *cfg, TopicLists *tl, int64_t start_tok,
                    bnp_bitgen_t *g) noexcept nogil:
    """Gibbs update of every token of the documents m from token start_tok on
    (tokens in CSR order: the copies of each (document, word) entry in turn; z has
    one label per token of m); returns the token at which it stopped for lack of
    a free slot (the number of tokens when done). ``njk`` is the current
    document's row of counts, rebuilt from its labels (kcap zeros on entry, left
    zero)."""
    cdef const int64_t *indptr = m.indptr
    cdef const int32_t *indices = m.indices
    cdef const int32_t *counts = m.counts
    cdef int64_t n_docs = m.n_rows
    cdef int64_t j = 0, t = 0, lo = 0, p, c, i, k, kcap = cfg.kcap
    cdef int32_t w
    cdef int32_t *nwk
    while j < n_docs:
        lo = t
        for p in range(indptr[j], indptr[j + 1]):
            t += counts[p]
        if t > start_tok:
            break
        j += 1
    t = lo
    for j in range(j, n_docs):
        lo = t
        for p in range(indptr[j], indptr[j + 1]):
            for c in range(counts[p]):
                njk[z[t]] += 1
                t += 1
        t = lo
        tl.dlen = 0
        cfg.s_ab = 0.0                            # fresh totals per document: no drift
        for k in range(cfg.k_used):
            if njk[k] > 0:
                _list_add(tl.dl, tl.dpos, &tl.dlen, k)
            cfg.s_ab += ab[k] * inv[k]
        for p in range(indptr[j], indptr[j + 1]):
            w = indices[p]
            nwk = n_wk + w * kcap
            for c in range(counts[p]):
                if t >= start_tok:
                    if (cfg.n_free == 0 or not cfg.reuse_holes) and cfg.k_used == kcap:
                        return t          # no slot for a new topic: the caller grows the arrays
                    _remove(njk, nwk, n_k, beta, ab, inv, cfg, tl, tl.wl + w * kcap, tl.wpos + w * kcap,
                            tl.wlen + w, z[t])
                    k = _draw(njk, nwk, ab, inv, cfg, tl, tl.wl + w * kcap, tl.wlen[w], cum,
                              bnp_rng_uniform(g))
                    if k < 0:
                        k = _new_topic(n_k, beta, ab, inv, cfg, g)
                    z[t] = <int32_t>k
                    _add(njk, nwk, n_k, ab, inv, cfg, tl, tl.wl + w * kcap, tl.wpos + w * kcap, tl.wlen + w, k)
                t += 1
        for i in range(tl.dlen):                  # clear the row: the document's topics are in its list
            njk[tl.dl[i]] = 0
    return t


def word_lists(const int32_t[:, ::1] n_wk, int64_t k_used, int n_threads=1, out=None):
    """The topics of each word with a positive count, ascending: ``(lists, wlen)`` with
    ``lists[0, w, :wlen[w]]`` the topics of word w and ``lists[1, w, k]`` the position
    of topic k in them; ``gibbs_sweep`` keeps them up to date. ``out``: a
    ``(lists, wlen)`` pair of the right shapes to fill instead of new arrays (a
    sampler rebuilds its lists every sweep: reusing them spares the page faults of
    fresh memory); words in parallel on ``n_threads``. Equivalent NumPy:
    ``np.flatnonzero(n_wk[w, :k_used])``."""
    cdef int64_t W = n_wk.shape[0], kcap = n_wk.shape[1], w, k
    if not 0 <= k_used <= kcap:
        raise ValueError(f"k_used={k_used} outside [0, {kcap}]")
    if n_threads < 1:
        raise ValueError(f"n_threads must be >= 1, got {n_threads}")
    if out is None:
        lists, wlen = np.empty((2, W, kcap), dtype=np.int32), np.zeros(W, dtype=np.int32)
    else:
        lists, wlen = out
        if lists.shape != (2, W, kcap) or wlen.shape != (W,):
            raise ValueError(f"out must be arrays of shapes (2, {W}, {kcap}) and ({W},)")
    cdef int32_t[:, :, ::1] lv = lists
    cdef int32_t[::1] nv = wlen
    with nogil:
        for w in prange(W, num_threads=n_threads, schedule="static"):
            nv[w] = 0
            for k in range(k_used):
                if n_wk[w, k] > 0:
                    _list_add(&lv[0, w, 0], &lv[1, w, 0], &nv[w], k)
    return lists, wlen


def _check_state(words, tok_ptr, z, n_jk, n_wk, n_k, beta, k_used):
    kcap = n_jk.shape[1]
    if n_wk.shape[1] != kcap or n_k.shape[0] != kcap or beta.shape[0] != kcap:
        raise ValueError("count arrays disagree on the topic capacity")
    if z.shape[0] != words.shape[0] or tok_ptr.shape[0] != n_jk.shape[0] + 1:
        raise ValueError("token arrays disagree with the count arrays")
    if not 0 <= k_used <= kcap:
        raise ValueError(f"k_used={k_used} outside [0, {kcap}]")


def gibbs_sweep(const int64_t[::1] indptr,       # IN  CSR of the documents: entry offsets,
                const int32_t[::1] indices,      # IN  word ids,
                const int32_t[::1] counts,       # IN  counts
                int32_t[::1] z,                  # IN/OUT topic slot of every token (CSR order)
                tuple table,                     # IN/OUT (n_wk, n_k, beta)
                double beta_new, int64_t k_used,
                SweepSettings settings,          # IN  {"alpha", "gamma", "eta", "reuse_holes"}
                int64_t start_tok,
                tuple lists,                     # IN/OUT word_lists(n_wk, k_used), kept up to date
                generator):
    """One sweep of topic indicators with the new-topic option (Teh et al. 2006, section 5.3, first step).

    ``table = (n_wk, n_k, beta)``: the counts, int32 (n_words, kcap) and int64
    (kcap,), and the global weights of the slots, float64 (kcap,);
    ``lists = (lists, wlen)``: ``word_lists(n_wk, k_used)``; ``settings``: a dict
    ``{"alpha", "gamma", "eta", "reuse_holes"}`` (every key required).

    For each token: remove it (an emptied topic is deleted, its weight returned to
    beta_new), draw ``k`` with probability proportional to
    ``(n_jk + alpha beta_k)(n_kw + eta)/(n_k + W eta)`` or a new topic with
    probability proportional to ``alpha beta_new / W``; a new topic takes
    ``beta_k = b beta_new``, ``b ~ Beta(1, gamma)``; add the token back. A new
    topic goes to the first hole (an emptied slot below ``k_used``) with
    ``reuse_holes`` true (the sequential sampler), else always to slot
    ``k_used``, so that the slots below the ``k_used`` passed in keep their
    topics (a block of the delayed schedule against its copy of the table). The
    weights are evaluated by buckets (module docstring); the distribution is the
    one above. The documents' counts n_jk are not stored: each document's are
    rebuilt from its labels when the sweep reaches it.

    Returns ``(next_tok, k_used, beta_new)``: ``next_tok < n_tokens`` means the slot
    capacity ran out before token ``next_tok`` (with ``reuse_holes`` false, holes
    do not count); grow the arrays, rebuild the word lists and call again from there.
    """
    cdef int32_t[:, ::1] n_wk
    cdef int64_t[::1] n_k
    cdef double[::1] beta
    cdef int32_t[:, :, ::1] wl
    cdef int32_t[::1] wlen
    n_wk, n_k, beta = table
    wl, wlen = lists
    cdef int64_t kcap = n_wk.shape[1], n_docs = indptr.shape[0] - 1, n_words = n_wk.shape[0], k, next_tok
    if n_k.shape[0] != kcap or beta.shape[0] != kcap:
        raise ValueError("count arrays disagree on the topic capacity")
    if not 0 <= k_used <= kcap:
        raise ValueError(f"k_used={k_used} outside [0, {kcap}]")
    if indices.shape[0] != counts.shape[0] or indptr[n_docs] != counts.shape[0]:
        raise ValueError("indptr, indices and counts do not form a CSR matrix")
    if z.shape[0] != np.asarray(counts).sum(dtype=np.int64):
        raise ValueError("z must hold one topic per token")
    if wl.shape[0] != 2 or wl.shape[1] != n_words or wl.shape[2] != kcap or wlen.shape[0] != n_words:
        raise ValueError("word lists disagree with n_wk")
    cdef SweepConfig cfg
    cdef TopicLists tl
    scratch = np.empty((3, max(kcap, 1) * 2), dtype=np.float64)
    ilists = np.empty((2, kcap), dtype=np.int32)
    njk = np.zeros(max(kcap, 1), dtype=np.int32)
    cdef double[:, ::1] sv = scratch
    cdef int32_t[:, ::1] iv = ilists
    cdef int32_t[::1] nv = njk
    _setup(&cfg, settings.alpha, settings.gamma, settings.eta, n_words, beta_new, k_used, kcap, settings.reuse_holes,
           &n_k[0], &beta[0], &sv[0, 0], &sv[1, 0])
    tl.wl = &wl[0, 0, 0]
    tl.wpos = &wl[1, 0, 0]
    tl.wlen = &wlen[0]
    tl.dl = &iv[0, 0]
    tl.dpos = &iv[1, 0]
    cdef bnp_bitgen_t *g = bitgen_of(generator)
    cdef bnp_csr_t docs = csr_view(indptr, indices, counts, n_words)
    with generator.bit_generator.lock, nogil:
        next_tok = _sweep(&docs, &z[0] if z.shape[0] else NULL, &nv[0], &n_wk[0, 0], &n_k[0], &beta[0], &sv[0, 0],
                          &sv[1, 0], &sv[2, 0], &cfg, &tl, start_tok, g)
    return next_tok, cfg.k_used, cfg.beta_new


def token_conditional(const int32_t[::1] words, const int64_t[::1] tok_ptr, const int32_t[::1] z,
                      const int32_t[:, ::1] n_jk, const int32_t[:, ::1] n_wk, const int64_t[::1] n_k,
                      const double[::1] beta, double beta_new, int64_t k_used, double alpha,
                      double eta, int64_t j, int64_t t):
    """The sampler's conditional of token ``t`` (of document ``j``) given all others,
    from the sweep's own bucket weights: probabilities over slots 0..k_used-1 and,
    last, the new topic (array of length k_used + 1). The state is not changed.
    """
    _check_state(words, tok_ptr, z, n_jk, n_wk, n_k, beta, k_used)
    if not (0 <= j < n_jk.shape[0] and tok_ptr[j] <= t < tok_ptr[j + 1]):
        raise ValueError(f"token {t} is not in document {j}")
    cdef int64_t k, w = words[t], k0 = z[t]
    cdef double eta_tot = eta * n_wk.shape[0], bn = beta_new, inv
    out = np.empty(k_used + 1, dtype=np.float64)
    cdef double[::1] ov = out
    cdef int32_t njk, nwk
    cdef int64_t nk
    cdef double ab
    for k in range(k_used):
        njk, nwk, nk, ab = n_jk[j, k] - (k == k0), n_wk[w, k] - (k == k0), n_k[k] - (k == k0), alpha * beta[k]
        if nk == 0:                       # the token was alone in its topic: deleted, weight to beta_new
            bn += beta[k]
            ab = 0.0
        inv = 1.0 / (nk + eta_tot)
        ov[k] = _w_word(nwk, njk, ab, inv) + _w_doc(njk, inv, eta) + _w_smooth(ab, inv, eta)
    ov[k_used] = alpha * bn * eta / eta_tot
    return out / out.sum()


def draw_tables(const int64_t[::1] tok_ptr,     # IN  token offsets of the documents
                const int32_t[::1] z,            # IN  topic slot of every token
                const double[::1] ab,            # IN  (kcap,) alpha * beta_k
                int64_t k_used, StirlingTable table, generator,
                int64_t[::1] m_k):               # OUT (kcap,) tables per topic
    """Table counts m_jk ~ Antoniak(n_jk, alpha beta_k) for every n_jk > 0, summed over
    documents into ``m_k`` (Teh et al. 2006, section 5.3, second step), documents in
    order and each document's topics in increasing slot order; n_jk is counted from
    the labels ``z`` of document j (a row of k_used counts, not stored). Draws use the
    Stirling table where it serves n_jk (grow it to the longest document first), CRP
    seating beyond. Equivalent to ``m_k[k] = sum_j antoniak_sample(n_jk[j, k], ab[k])``.
    """
    if ab.shape[0] < k_used or m_k.shape[0] < k_used:
        raise ValueError("arrays shorter than k_used")
    if tok_ptr.shape[0] < 1 or tok_ptr[tok_ptr.shape[0] - 1] != z.shape[0]:
        raise ValueError("tok_ptr must end at the number of labels")
    if z.shape[0] and not (0 <= np.min(z) and np.max(z) < k_used):
        raise ValueError(f"labels must lie in [0, {k_used})")
    cdef int64_t j, k, t, n
    row = np.zeros(max(k_used, 1), dtype=np.int64)
    cdef int64_t[::1] njk = row
    cdef bnp_bitgen_t *g = bitgen_of(generator)
    with generator.bit_generator.lock, nogil:
        for k in range(k_used):
            m_k[k] = 0
        for j in range(tok_ptr.shape[0] - 1):
            for t in range(tok_ptr[j], tok_ptr[j + 1]):
                njk[z[t]] += 1
            for k in range(k_used):
                n = njk[k]
                if n > 0:
                    m_k[k] += sample_tables(&table.table, n, ab[k], g)
                    njk[k] = 0


cdef struct FoldIn:
    # what fold_in does to every document
    const double *phi_wk     # (n_words, K) topic-word probabilities, word-major
    const double *cdf_wk     # (n_words, K) cumulative sums of prior_k phi_wk over k
    const double *prior      # (K,)
    int64_t K
    double prior_sum
    int64_t n_sweeps
    int64_t burn_in
    uint64_t key             # document j draws from the stream (key, doc_keys[j], 0)


cdef void _fold_in_doc(const FoldIn *f, const int32_t *words, int64_t lo, int64_t hi, uint64_t doc_key, int64_t *z,
                       int64_t *cnt, int64_t *dl, int64_t *dpos, double *dw, double *theta) noexcept nogil:
    """fold_in of the document with tokens lo..hi, drawing from stream (f.key, doc_key, 0). Scratch: cnt, dpos
    (K int64, zero on entry and on return), dl (K int64), dw (K doubles); theta is its output row."""
    cdef const double *phi_wk = f.phi_wk
    cdef const double *cdf_wk = f.cdf_wk
    cdef const double *prior = f.prior
    cdef int64_t K = f.K, n_sweeps = f.n_sweeps, burn_in = f.burn_in
    cdef double prior_sum = f.prior_sum
    cdef uint64_t key = f.key
    cdef bnp_stream_t stream
    cdef bnp_bitgen_t *g = &stream.bitgen
    cdef int64_t t, k, s, i, w, dlen = 0, n_avg = n_sweeps - burn_in
    cdef int64_t left, right, mid
    cdef double r, u, smooth
    cdef double norm = 1.0 / ((hi - lo + prior_sum) * n_avg)
    cdef const double *ph
    cdef const double *cw
    bnp_stream_init(&stream, key, doc_key, 0)
    for k in range(K):
        theta[k] = 0.0
    for s in range(n_sweeps):
        for t in range(lo, hi):
            w = words[t]
            ph = phi_wk + w * K
            cw = cdf_wk + w * K
            if s > 0:                                   # remove the token; its topic may leave the document
                k = z[t]
                cnt[k] -= 1
                if cnt[k] == 0:
                    i = dpos[k]
                    dlen -= 1
                    dl[i] = dl[dlen]
                    dpos[dl[i]] = i
            r = 0.0                                     # document bucket: sum over the document's topics
            for i in range(dlen):
                r += cnt[dl[i]] * ph[dl[i]]
                dw[i] = r
            smooth = cw[K - 1]                          # smoothing bucket: sum_k prior_k phi_kw
            u = bnp_rng_uniform(g) * (r + smooth)
            if u < r:
                i = 0
                while i < dlen - 1 and not dw[i] > u:
                    i += 1
                k = dl[i]
            else:                                       # first k with cdf_wk[w, k] > u - r
                u -= r
                left, right = 0, K - 1
                while left < right:
                    mid = (left + right) // 2
                    if cw[mid] > u:
                        right = mid
                    else:
                        left = mid + 1
                k = left
            z[t] = k
            if cnt[k] == 0:
                dpos[k] = dlen
                dl[dlen] = k
                dlen += 1
            cnt[k] += 1
        if s >= burn_in:
            for i in range(dlen):
                theta[dl[i]] += cnt[dl[i]]
    for k in range(K):
        theta[k] = (theta[k] + prior[k] * n_avg) * norm
    for i in range(dlen):                               # leave the scratch zeroed for the next document
        cnt[dl[i]] = 0


def fold_in(const int32_t[::1] words,        # IN  word ids of the new documents' tokens
            const int64_t[::1] tok_ptr,      # IN  token offsets
            const double[:, ::1] phi_wk,     # IN  (n_words, K) topic-word probabilities, word-major
            const double[::1] prior,         # IN  (K,) alpha * beta_k
            int64_t n_sweeps, int64_t burn_in,
            uint64_t key, const uint64_t[::1] doc_keys,   # IN  stream of document j: (key, doc_keys[j], 0)
            double[:, ::1] theta,            # OUT (n_docs, K) averaged posterior mean proportions
            int n_threads=1):
    """Per-document Gibbs sampling with the topics held fixed (transform of new documents).

    Token topics are drawn from ``p(z_i = k) ∝ (n^{-i}_jk + prior_k) phi_wk[w_i, k]``
    (first assignment from the prior times phi); after ``burn_in`` sweeps the
    posterior means ``(n_jk + prior_k) / (N_j + sum(prior))`` are averaged over the
    remaining sweeps. Each draw splits the weight into a document bucket,
    ``n_jk phi_wk`` over the topics of the document, and a smoothing bucket,
    ``prior_k phi_wk``, whose cumulative sums per word are computed once: a token
    costs the topics of its document plus a binary search over K, not K, and the
    draw is from the identical distribution. Documents run in parallel
    (``n_threads``), document j drawing from the keyed stream ``(key, doc_keys[j], 0)``:
    the result does not depend on the number of threads.

    Equivalent NumPy, per document (with ``rng`` its stream)::

        n = np.zeros(K); z = np.empty(len(doc), int); theta = np.zeros(K)
        for s in range(n_sweeps):
            for t, w in enumerate(doc):
                if s: n[z[t]] -= 1
                p = (n + prior) * phi_wk[w]
                z[t] = rng.choice(K, p=p / p.sum()); n[z[t]] += 1
            if s >= burn_in: theta += (n + prior) / (len(doc) + prior.sum())
        theta /= n_sweeps - burn_in
    """
    cdef int64_t n_docs = tok_ptr.shape[0] - 1, K = prior.shape[0], j
    cdef int tid
    cdef double prior_sum = 0.0
    if phi_wk.shape[1] != K or theta.shape[0] != n_docs or theta.shape[1] != K:
        raise ValueError("phi_wk, prior and theta disagree on the number of topics")
    if n_sweeps <= burn_in:
        raise ValueError("n_sweeps must exceed burn_in")
    if doc_keys.shape[0] != n_docs:
        raise ValueError(f"need {n_docs} document keys, got {doc_keys.shape[0]}")
    if n_threads < 1:
        raise ValueError(f"n_threads must be >= 1, got {n_threads}")
    if n_docs == 0 or K == 0:
        return
    prior_arr = np.asarray(prior)
    cdf_arr = np.cumsum(np.asarray(phi_wk) * prior_arr, axis=1)     # smoothing bucket, per word
    prior_sum = float(prior_arr.sum())
    z_arr = np.zeros(words.shape[0], dtype=np.int64)
    counts = np.zeros((n_threads, 3 * K + PAD), dtype=np.int64)
    weights = np.zeros((n_threads, K + PAD), dtype=np.float64)
    cdef const double[:, ::1] cdf = cdf_arr
    cdef int64_t[::1] z = z_arr
    cdef int64_t[:, ::1] cv = counts
    cdef double[:, ::1] wv = weights
    cdef const int32_t *wp = &words[0] if words.shape[0] else NULL
    cdef int64_t *zp = &z[0] if words.shape[0] else NULL
    cdef FoldIn f = FoldIn(&phi_wk[0, 0], &cdf[0, 0], &prior[0], K, prior_sum, n_sweeps, burn_in, key)
    for j in prange(n_docs, nogil=True, num_threads=n_threads, schedule="dynamic"):
        tid = threadid()
        _fold_in_doc(&f, wp, tok_ptr[j], tok_ptr[j + 1], doc_keys[j], zp, &cv[tid, 0], &cv[tid, K], &cv[tid, 2 * K],
                     &wv[tid, 0], &theta[j, 0])


# ---------------------------------------------------------------------------
# the delayed schedule (AD-HDP): blocks of documents against copies of the topic table
# ---------------------------------------------------------------------------

STREAM_BYTES = sizeof(bnp_stream_t)
# bytes per block of the streams buffer: a stream is written for every draw, so no two blocks'
# streams may share a cache line (false sharing); rows this long keep them apart at any alignment
STREAM_ROW = 4 * ((STREAM_BYTES + 63) // 64) * 64


cdef void _copy_word(const int32_t *src_row, const int32_t *src_list, int32_t src_len, int32_t *row,
                     int32_t *lst, int32_t *pos, int32_t *length) noexcept nogil:
    """A block's copy of one word's counts and topic list from the shared ones, touching only
    the topics listed in either (a copy's counts are zero outside its list)."""
    cdef int32_t i, k
    for i in range(length[0]):
        row[lst[i]] = 0
    for i in range(src_len):
        k = src_list[i]
        row[k] = src_row[k]
        lst[i] = k
        pos[k] = i
    length[0] = src_len


cdef struct BlockTable:
    # a block's own copy of the topic table (delayed_sweep's *_t arrays at the block)
    int32_t *n_wk            # (n_words, kcap)
    int64_t *n_k             # (kcap,)
    double *beta             # (kcap,)
    int32_t *wl              # (n_words, kcap) word lists, as TopicLists
    int32_t *wpos            # (n_words, kcap)
    int32_t *wlen            # (n_words,)
    double beta_new
    int64_t k_used
    int64_t next_tok         # token of the block to resume from
    int64_t kcap


cdef void _delayed_block(const bnp_csr_t *docs, int64_t first, int64_t last, int32_t *z, BlockTable *t,
                         int64_t n_words, double alpha, double gamma, double eta, bint reuse_holes, double *work,
                         int32_t *iwork, bnp_bitgen_t *g) noexcept nogil:
    """``gibbs_sweep`` of one block, documents first..last-1 of docs (z: their labels),
    from token t.next_tok on, against its own table t; updates t.beta_new, t.k_used and
    t.next_tok (the token where it stopped for lack of a slot)."""
    cdef SweepConfig cfg
    cdef TopicLists tl
    cdef int64_t kcap = t.kcap
    cdef bnp_csr_t block = docs[0]
    block.indptr = docs.indptr + first
    block.n_rows = last - first
    _setup(&cfg, alpha, gamma, eta, n_words, t.beta_new, t.k_used, kcap, reuse_holes, t.n_k, t.beta, work,
           work + kcap)
    memset(iwork + 2 * kcap, 0, kcap * sizeof(int32_t))
    tl.wl = t.wl
    tl.wpos = t.wpos
    tl.wlen = t.wlen
    tl.dl = iwork
    tl.dpos = iwork + kcap
    t.next_tok = _sweep(&block, z, iwork + 2 * kcap, t.n_wk, t.n_k, t.beta, work, work + kcap, work + 2 * kcap, &cfg,
                        &tl, t.next_tok, g)
    t.k_used = cfg.k_used
    t.beta_new = cfg.beta_new


def delayed_sweep(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,  # IN corpus
                  tuple blocks,                       # IN      (starts, tok_starts)
                  int32_t[::1] z,                     # IN/OUT  topic slot of every token, in its block's slots
                  tuple shared,                       # IN      (n_wk, n_k, beta, lists, wlen, beta_new, k_used)
                  tuple copies,                       # IN/OUT  the blocks' tables, below
                  Priors priors,                      # IN      {"alpha", "gamma", "eta"}
                  bint fresh, uint64_t key, generator, int n_threads):
    """The topic-indicator step of one sweep of the delayed schedule (AD-HDP; Newman,
    Asuncion, Smyth & Welling 2009, section 4), an approximation of ``gibbs_sweep``.

    ``fresh``: each block t (documents ``starts[t]`` to ``starts[t + 1]``) first
    copies the shared table (counts, sizes, weights, word lists, ``beta_new``,
    ``k_used``; the copy writes only the listed topics: a block's counts must be
    zero outside its lists, as they are when zero-allocated or left by a sweep)
    and starts from its first token, drawing from the keyed stream
    ``(key, t, 0)`` kept in ``streams[t]``. Then every block runs
    ``gibbs_sweep``'s draws over its tokens against its own table, in parallel.
    With T > 1 blocks, a block appends its new topics after slot ``k_used`` of
    its table and never reuses a hole, so that its slots below ``k_used`` are
    the shared topics and those above its own births (``delayed_merge`` then
    maps them); with T = 1 it reuses holes and draws from ``generator``, and
    the tables may be views of the shared arrays: ``gibbs_sweep``, draw for draw.
    A block that runs out of slots stops; ``next_tok_t[t]`` is then below its
    token count: grow the blocks' arrays (``word_lists`` for their lists) and
    call again with ``fresh=False``, which resumes every unfinished block.

    The arrays come in three groups:

    * ``blocks = (starts, tok_starts)``, int64 (T + 1,) each: the first document
      and the first token of each block, then D and N;
    * ``shared = (n_wk, n_k, beta, lists, wlen, beta_new, k_used)``: the shared
      table, int32 (n_words, kcap), int64 (kcap,), float64 (kcap,), its
      ``word_lists(n_wk, k_used)`` and its ``beta_new`` and ``k_used``;
    * ``copies = (n_wk_t, n_k_t, beta_t, lists_t, wlen_t, beta_new_t, k_used_t,
      next_tok_t, streams)``: the blocks' tables, (T, n_words, kcap_t) int32,
      (T, kcap_t) int64, (T, kcap_t) float64, (T, 2, n_words, kcap_t) and
      (T, n_words) int32 word lists, (T,) float64 ``beta_new``, (T,) int64
      ``k_used`` and token to resume from, and the blocks' random streams,
      (T, >= STREAM_ROW) uint8.
    """
    cdef const int64_t[::1] starts, tok_starts
    cdef const int32_t[:, ::1] n_wk
    cdef const int64_t[::1] n_k
    cdef const double[::1] beta
    cdef const int32_t[:, :, ::1] lists
    cdef const int32_t[::1] wlen
    cdef double beta_new
    cdef int64_t k_used
    cdef int32_t[:, :, ::1] n_wk_t
    cdef int64_t[:, ::1] n_k_t
    cdef double[:, ::1] beta_t
    cdef int32_t[:, :, :, ::1] lists_t
    cdef int32_t[:, ::1] wlen_t
    cdef double[::1] beta_new_t
    cdef int64_t[::1] k_used_t, next_tok_t
    cdef unsigned char[:, ::1] streams
    starts, tok_starts = blocks
    n_wk, n_k, beta, lists, wlen, beta_new, k_used = shared
    n_wk_t, n_k_t, beta_t, lists_t, wlen_t, beta_new_t, k_used_t, next_tok_t, streams = copies
    cdef double alpha = priors.alpha, gamma = priors.gamma, eta = priors.eta
    cdef int64_t T = n_wk_t.shape[0], W = n_wk.shape[0], kcap = n_wk.shape[1], kcap_t = n_wk_t.shape[2]
    cdef int64_t D = indptr.shape[0] - 1, b, w
    if T < 1 or starts.shape[0] != T + 1 or tok_starts.shape[0] != T + 1 or n_k_t.shape[0] != T \
            or beta_t.shape[0] != T or lists_t.shape[0] != T or wlen_t.shape[0] != T or beta_new_t.shape[0] != T \
            or k_used_t.shape[0] != T or next_tok_t.shape[0] != T or streams.shape[0] != T:
        raise ValueError("the block arrays disagree on the number of blocks")
    if n_wk_t.shape[1] != W or n_k_t.shape[1] != kcap_t or beta_t.shape[1] != kcap_t or lists_t.shape[1] != 2 \
            or lists_t.shape[2] != W or lists_t.shape[3] != kcap_t or wlen_t.shape[1] != W:
        raise ValueError("the blocks' tables disagree with each other")
    if kcap_t < kcap or n_k.shape[0] != kcap or beta.shape[0] != kcap or lists.shape[1] != W \
            or lists.shape[2] != kcap or wlen.shape[0] != W or not 0 <= k_used <= kcap:
        raise ValueError("the shared table disagrees with the blocks' (capacity, words or k_used)")
    if streams.shape[1] < STREAM_ROW:
        raise ValueError(f"streams need {STREAM_ROW} bytes a block (rows apart in memory)")
    if starts[0] != 0 or starts[T] != D or tok_starts[0] != 0 or tok_starts[T] != z.shape[0]:
        raise ValueError("blocks must cover the documents and tokens")
    if indices.shape[0] != counts.shape[0] or indptr[D] != counts.shape[0]:
        raise ValueError("indptr, indices and counts do not form a CSR matrix")
    if z.shape[0] != np.asarray(counts).sum(dtype=np.int64):
        raise ValueError("z must hold one topic per token")
    if n_threads < 1:
        raise ValueError(f"n_threads must be >= 1, got {n_threads}")
    for b in range(T):
        if not 0 <= k_used_t[b] <= kcap_t:
            raise ValueError(f"k_used_t[{b}] outside [0, {kcap_t}]")
    work = np.zeros((T, 4 * max(kcap_t, 1) + PAD), dtype=np.float64)
    iwork = np.zeros((T, 3 * max(kcap_t, 1) + PAD), dtype=np.int32)
    cdef double[:, ::1] wv = work
    cdef int32_t[:, ::1] iv = iwork
    cdef bnp_stream_t *st
    cdef bnp_bitgen_t *g = bitgen_of(generator)
    cdef bint reuse = T == 1
    cdef bnp_csr_t docs = csr_view(indptr, indices, counts, W)
    cdef int32_t *zp = &z[0] if z.shape[0] else NULL
    if fresh:
        for b in range(T):
            bnp_stream_init(<bnp_stream_t *>&streams[b, 0], key, <uint64_t>b, 0)
            beta_new_t[b] = beta_new
            k_used_t[b] = k_used
            next_tok_t[b] = 0
    cdef BlockTable *tab = <BlockTable *>malloc(T * sizeof(BlockTable))     # one per block
    if tab == NULL:
        raise MemoryError()
    try:
        for b in range(T):
            tab[b] = BlockTable(&n_wk_t[b, 0, 0], &n_k_t[b, 0], &beta_t[b, 0], &lists_t[b, 0, 0, 0],
                                &lists_t[b, 1, 0, 0], &wlen_t[b, 0], beta_new_t[b], k_used_t[b], next_tok_t[b], kcap_t)
        with generator.bit_generator.lock, nogil:
            for b in prange(T, num_threads=n_threads, schedule="static", chunksize=1):
                if fresh:
                    for w in range(W):
                        _copy_word(&n_wk[w, 0], &lists[0, w, 0], wlen[w], &n_wk_t[b, w, 0], &lists_t[b, 0, w, 0],
                                   &lists_t[b, 1, w, 0], &wlen_t[b, w])
                    memcpy(&n_k_t[b, 0], &n_k[0], kcap * sizeof(int64_t))
                    memcpy(&beta_t[b, 0], &beta[0], kcap * sizeof(double))
                    for w in range(kcap, kcap_t):
                        n_k_t[b, w] = 0
                        beta_t[b, w] = 0.0
                if next_tok_t[b] < tok_starts[b + 1] - tok_starts[b]:
                    st = <bnp_stream_t *>&streams[b, 0]
                    _delayed_block(&docs, starts[b], starts[b + 1], zp + tok_starts[b], &tab[b], W, alpha, gamma,
                                   eta, reuse, &wv[b, 0], &iv[b, 0], g if reuse else &st.bitgen)
                    beta_new_t[b] = tab[b].beta_new
                    k_used_t[b] = tab[b].k_used
                    next_tok_t[b] = tab[b].next_tok
    finally:
        free(tab)


def delayed_merge(int32_t[:, ::1] n_wk,               # IN/OUT (n_words, kcap) shared counts before the sweep
                  const int32_t[:, :, ::1] lists,     # IN  their word lists (the topics with n_wk > 0)
                  const int32_t[::1] wlen,            # IN
                  const int32_t[:, :, ::1] n_wk_t,    # IN  (T, n_words, kcap_t) the blocks' counts
                  const int32_t[:, :, :, ::1] lists_t,  # IN  their word lists
                  const int32_t[:, ::1] wlen_t,       # IN
                  const int64_t[:, ::1] slot_map,     # IN  (T, kcap_t) shared slot of each block slot
                  int n_threads=1):
    """Merge the blocks' word-topic counts after ``delayed_sweep``: for each word and
    shared slot g, ``n_wk[w, g] <- n_wk[w, g] + sum_t sum_{k: slot_map[t, k] = g}
    (n_wk_t[t, w, k] - n_wk[w, g] [k < k_used])``, i.e. the shared count plus every
    block's change, a block's new topics added into the slots ``slot_map`` gives
    them (below the shared ``k_used`` a slot maps to itself). Only the listed
    topics of each word are touched; words in parallel on ``n_threads``.
    Equivalent NumPy for a map without new topics:
    ``n_wk += (n_wk_t[:, :, :kcap] - n_wk).sum(0)``."""
    cdef int64_t T = n_wk_t.shape[0], W = n_wk.shape[0], kcap = n_wk.shape[1], kcap_t = n_wk_t.shape[2], w, b
    cdef int32_t i, k
    cdef int64_t g
    if n_wk_t.shape[1] != W or lists_t.shape[0] != T or lists_t.shape[2] != W or lists_t.shape[3] != kcap_t \
            or wlen_t.shape[0] != T or wlen_t.shape[1] != W or slot_map.shape[0] != T or slot_map.shape[1] != kcap_t:
        raise ValueError("the blocks' tables disagree with each other")
    if lists.shape[1] != W or lists.shape[2] > kcap or wlen.shape[0] != W:
        raise ValueError("the shared lists disagree with n_wk")
    m = np.asarray(slot_map)
    if m.size and m.max() >= kcap:
        raise ValueError(f"slot_map points beyond the shared capacity {kcap}")
    if n_threads < 1:
        raise ValueError(f"n_threads must be >= 1, got {n_threads}")
    for b in range(T):
        for w in range(W):
            for i in range(wlen_t[b, w]):
                if slot_map[b, lists_t[b, 0, w, i]] < 0:
                    raise ValueError(f"block {b} has counts in a slot without a shared slot")
    with nogil:
        for w in prange(W, num_threads=n_threads, schedule="static"):
            for i in range(wlen[w]):
                k = lists[0, w, i]
                n_wk[w, k] = n_wk[w, k] * <int32_t>(1 - T)
            for b in range(T):
                for i in range(wlen_t[b, w]):
                    k = lists_t[b, 0, w, i]
                    g = slot_map[b, k]
                    n_wk[w, g] += n_wk_t[b, w, k]


def draw_tables_blocks(const int64_t[::1] tok_ptr,  # IN  token offsets of the documents
                       const int32_t[::1] z,         # IN  topic slot of every token
                       const double[::1] ab,         # IN  (kcap,) alpha * beta_k
                       int64_t k_used, StirlingTable table,
                       const int64_t[::1] starts,    # IN  (T + 1,) first document of each block, then D
                       uint64_t key,
                       int64_t[:, ::1] m_k_t,        # OUT (T, >= k_used) tables per topic of each block
                       int n_threads):
    """``draw_tables`` of the delayed schedule: the documents of block t drawn from
    the keyed stream ``(key, t, 1)`` into ``m_k_t[t]``, blocks in parallel (sum the
    rows for m_k). The same law as ``draw_tables``; the draws depend on the blocks,
    not on ``n_threads``."""
    cdef int64_t T = starts.shape[0] - 1, D = tok_ptr.shape[0] - 1, b, j, k, t, n
    if T < 1 or m_k_t.shape[0] != T or m_k_t.shape[1] < k_used or ab.shape[0] < k_used:
        raise ValueError("arrays disagree on the blocks or shorter than k_used")
    if starts[0] != 0 or starts[T] != D or tok_ptr[D] != z.shape[0]:
        raise ValueError("blocks must cover the documents, tok_ptr the labels")
    if z.shape[0] and not (0 <= np.min(z) and np.max(z) < k_used):
        raise ValueError(f"labels must lie in [0, {k_used})")
    if n_threads < 1:
        raise ValueError(f"n_threads must be >= 1, got {n_threads}")
    rows = np.zeros((T, max(k_used, 1) + PAD), dtype=np.int64)
    streams = np.zeros((T, STREAM_ROW), dtype=np.uint8)
    cdef int64_t[:, ::1] njk = rows
    cdef unsigned char[:, ::1] sv = streams
    cdef bnp_stream_t *st
    for b in range(T):
        bnp_stream_init(<bnp_stream_t *>&sv[b, 0], key, <uint64_t>b, 1)
    with nogil:
        for b in prange(T, num_threads=n_threads, schedule="static", chunksize=1):
            st = <bnp_stream_t *>&sv[b, 0]
            for k in range(k_used):
                m_k_t[b, k] = 0
            for j in range(starts[b], starts[b + 1]):
                for t in range(tok_ptr[j], tok_ptr[j + 1]):
                    njk[b, z[t]] += 1
                for k in range(k_used):
                    n = njk[b, k]
                    if n > 0:
                        m_k_t[b, k] += sample_tables(&table.table, n, ab[k], &st.bitgen)
                        njk[b, k] = 0
