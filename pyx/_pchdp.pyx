"""Kernels of the doubly sparse partially collapsed HDP sampler of Terenin,
Magnusson, Jonsson & Draper (2020), "Sparse parallel training of hierarchical
Dirichlet process topic models" (EMNLP): the topics Phi and the global weights
Psi are sampled explicitly, the document proportions are integrated out.

One sweep calls, each releasing the GIL and running in ``n_threads``:

1. ``sample_tables``: the table counts l_k = sum_j l_jk, each l_jk a sum of
   Bernoulli(alpha Psi_k / (alpha Psi_k + i)), i < n_jk, documents in parallel;
2. ``sample_phi``: Phi | z per topic, in parallel over topics (Dirichlet, or the
   Poisson Polya urn approximation);
3. ``_pclda.build_alias(..., n_topics=K)``: per word, a Walker alias table of
   ``alpha Psi_k phi[w, k]`` over the active topics;
4. ``z_step``: every token's topic given Phi and Psi, documents in parallel,
   each document's counts rebuilt from its labels, the topic-word counts moved
   as tokens change (``max_candidate`` first: the largest tail topic the z-step
   will propose, whose Phi column ``sample_phi`` must draw).

Every random draw comes from a keyed stream (``bnp_stream_t``) named by
(key, sweep, document or topic), so the state after a sweep is bit-identical
for any thread count. Layouts as in ``bnpcore.kernels._pclda``: the labels
(uint16 or int32, one per token) and ``tok_ptr``; ``nwk``, ``phi``, ``prob`` (W, C)
and ``alias`` (W, C) word-major, C the capacity of topic slots; only the first
columns named by each call are used. Nothing per document is kept.
"""
import numpy as np
cimport numpy as cnp
from cython.parallel cimport prange, threadid
from libc.math cimport exp, INFINITY
from libc.stdint cimport int32_t, int64_t, uint16_t, uint64_t

from bnpcore.kernels._pclda cimport (_alias_pick, _bucket, _bucket_pick, _doc_close, _doc_open, _list_add,
                                    _list_remove, _log_gamma_small, _move_token, _poisson, label_t)
from bnpcore.kernels._pclda import check_labels, z_scratch
from bnpcore.kernels.parallel cimport PAD
from bnpcore.kernels.rng cimport (bnp_bitgen_t, bnp_rng_log_gamma, bnp_rng_uniform,
                                  bnp_stream_init, bnp_stream_t)

cnp.import_array()


# ---------------------------------------------------------------------------
# table counts
# ---------------------------------------------------------------------------

cdef void _tables_doc(const label_t *z, int64_t n_tok, const double *ab, uint64_t key, uint64_t stream,
                      uint64_t j, int64_t *l_k, int32_t *nd, int32_t *dlist, int32_t *dpos) noexcept nogil:
    """Add document j's table counts to l_k (stream (key, stream, j)), its counts
    n_jk rebuilt from its labels z[0..n_tok) in the thread's rows nd/dlist/dpos."""
    cdef bnp_stream_t st
    cdef int64_t n, m, i
    cdef int32_t k
    bnp_stream_init(&st, key, stream, j)
    n = _doc_open(z, n_tok, nd, dlist, dpos)
    for m in range(n):
        k = dlist[m]
        for i in range(nd[k]):
            if bnp_rng_uniform(&st.bitgen) * (ab[k] + i) < ab[k]:
                l_k[k] += 1
    _doc_close(nd, dlist, dpos, n)


def sample_tables(const int64_t[::1] tok_ptr, const label_t[::1] z,          # IN (D + 1,), labels < K
                  const double[::1] ab, int64_t K,                             # IN alpha Psi_k, topics
                  uint64_t key, uint64_t stream,                               # IN stream (key, stream, j)
                  int64_t[::1] l_k,                                            # OUT (K,) table counts
                  int n_threads=1, uint64_t first_doc=0):
    """Table counts given the topics and the weights: document j draws from
    stream (key, stream, first_doc + j) (``first_doc``: the documents are
    ``first_doc, ...`` of a larger corpus, whose streams they use), for each
    topic k (increasing) with n_jk > 0,
    ``l_jk = sum_{i < n_jk} [u_i < ab_k / (ab_k + i)]`` (the Antoniak
    distribution of the number of tables of n_jk customers in a Chinese
    restaurant with concentration ab_k); ``l_k = sum_j l_jk``. The counts n_jk
    come from the labels of document j, ``z[tok_ptr[j]:tok_ptr[j + 1]]``.
    Equivalent NumPy::

        for j, k with ndk[j, k] > 0:      # ndk[j] = np.bincount(z[tok_ptr[j]:tok_ptr[j + 1]], minlength=K)
            l_k[k] += (rng.random(ndk[j, k]) * (ab[k] + np.arange(ndk[j, k])) < ab[k]).sum()
    """
    cdef int64_t D = tok_ptr.shape[0] - 1, j, T = n_threads, stride = K + PAD
    if ab.shape[0] < K or l_k.shape[0] < K or tok_ptr[D] != z.shape[0]:
        raise ValueError(f"ab and l_k need K = {K} entries and tok_ptr must end at the number of labels")
    if n_threads < 1:
        raise ValueError(f"n_threads must be positive, got {n_threads}")
    if z.shape[0] and np.asarray(z).max() >= K:
        raise ValueError(f"a label is not below K = {K}")
    part = np.zeros((T, stride), dtype=np.int64)        # per-thread sums: integer, order-free
    _, nds, lists, pos, _ = z_scratch(n_threads, K)
    cdef int64_t[:, ::1] pv = part
    cdef int32_t[:, ::1] nv = nds, lv = lists, qv = pos
    with nogil:
        for j in prange(D, num_threads=n_threads, schedule="dynamic", chunksize=16):
            _tables_doc(&z[0] + tok_ptr[j], tok_ptr[j + 1] - tok_ptr[j], &ab[0], key, stream, first_doc + j,
                        &pv[threadid(), 0], &nv[threadid(), 0], &lv[threadid(), 0], &qv[threadid(), 0])
    np.asarray(l_k)[:K] = part[:, :K].sum(axis=0)


# ---------------------------------------------------------------------------
# the tail candidates
# ---------------------------------------------------------------------------

cdef inline int64_t _tail_pick(const double *cdf, int64_t M, double u) noexcept nogil:
    """The first i < M with cdf[i] > u cdf[M - 1] (M - 1 if none): a draw with
    probability (cdf[i] - cdf[i - 1]) / cdf[M - 1] for u ~ U[0, 1), monotone in u."""
    cdef double x = u * cdf[M - 1]
    cdef int64_t lo = 0, hi = M - 1, mid
    while lo < hi:
        mid = (lo + hi) // 2
        if cdf[mid] > x:
            hi = mid
        else:
            lo = mid + 1
    return lo


cdef int64_t _max_candidate_doc(int64_t n_tok, const double *cdf, int64_t M, uint64_t key, uint64_t stream,
                                uint64_t j) noexcept nogil:
    """The largest tail index among document j's candidates: that of its largest
    uniform (the pick is monotone), stream (key, stream, j) as in the z-step."""
    cdef bnp_stream_t st
    cdef double u, top = 0.0
    cdef int64_t i
    bnp_stream_init(&st, key, stream, j)
    for i in range(n_tok):
        u = bnp_rng_uniform(&st.bitgen)
        if u > top:
            top = u
    return _tail_pick(cdf, M, top)


def max_candidate(const int64_t[::1] tok_ptr, const double[::1] tail_cdf,   # IN (D + 1,), (M,) increasing
                  uint64_t key, uint64_t stream, int n_threads=1, uint64_t first_doc=0):
    """The largest tail index (0..M-1) that ``z_step`` will draw as a token's
    candidate with the same ``tail_cdf``, ``key``, candidate stream and
    ``first_doc``: token i of document j takes ``_tail_pick(tail_cdf, u_i)``
    with u_i the i-th uniform of stream (key, stream, first_doc + j). Run
    before the z-step so that the candidates'
    topic columns can be drawn first. Equivalent NumPy: the max over documents
    of ``np.searchsorted(tail_cdf, u.max() * tail_cdf[-1], side="right")``
    (capped at M - 1), u the document's uniforms; -1 without tokens."""
    cdef int64_t D = tok_ptr.shape[0] - 1, M = tail_cdf.shape[0], j, c
    if M == 0:
        raise ValueError("tail_cdf is empty")
    if n_threads < 1:
        raise ValueError(f"n_threads must be positive, got {n_threads}")
    best = np.full((n_threads, PAD), -1, dtype=np.int64)
    cdef int64_t[:, ::1] bv = best
    with nogil:
        for j in prange(D, num_threads=n_threads, schedule="dynamic", chunksize=64):
            if tok_ptr[j + 1] > tok_ptr[j]:
                c = _max_candidate_doc(tok_ptr[j + 1] - tok_ptr[j], &tail_cdf[0], M, key, stream,
                                       first_doc + <uint64_t>j)
                if c > bv[threadid(), 0]:
                    bv[threadid(), 0] = c
    return int(best[:, 0].max())


# ---------------------------------------------------------------------------
# Phi | z
# ---------------------------------------------------------------------------

cdef void _phi_topic(const int32_t *nwk, const int64_t *nk, int64_t W, int64_t C, int64_t k, double eta,
                     bint ppu, uint64_t key, uint64_t stream, double *phi, double *buf) noexcept nogil:
    """Column k of phi (stride C) from stream (key, stream, k): Dirichlet(eta + n_k.)
    by normalised log-gamma draws, or for ``ppu`` and a topic with tokens
    Poisson(eta + n_kw) draws normalised (redrawn if all are zero)."""
    cdef bnp_stream_t st
    cdef int64_t w
    cdef double x, mx = -INFINITY, tot = 0.0, a
    bnp_stream_init(&st, key, stream, <uint64_t>k)
    if ppu and nk[k] > 0:
        while tot == 0.0:
            for w in range(W):
                x = _poisson(&st.bitgen, eta + nwk[w * C + k])
                buf[w] = x
                tot += x
        for w in range(W):
            phi[w * C + k] = buf[w] / tot
        return
    for w in range(W):
        a = eta + nwk[w * C + k]
        x = _log_gamma_small(&st.bitgen, a) if a < 1.0 else bnp_rng_log_gamma(&st.bitgen, a)
        buf[w] = x
        if x > mx:
            mx = x
    for w in range(W):
        x = exp(buf[w] - mx)
        buf[w] = x
        tot += x
    tot = 1.0 / tot
    for w in range(W):
        phi[w * C + k] = buf[w] * tot


def sample_phi(const int32_t[:, ::1] nwk, const int64_t[::1] nk, int64_t K,    # IN counts, topics 0..K-1
               double eta, bint ppu, uint64_t key, uint64_t stream,            # IN prior, urn?, stream
               double[:, ::1] phi,                                             # OUT (W, C), columns < K
               int n_threads=1):
    """Draw topics 0..K-1 given the counts, topics in parallel, topic k from
    stream (key, stream, k). ``ppu=False``: exact, Equivalent NumPy::

        g = rng.gamma(eta + nwk[:, :K]);  phi[:, :K] = g / g.sum(axis=0)

    ``ppu=True``: topics with tokens by the Poisson Polya urn,
    ``g = rng.poisson(eta + nwk[:, k])`` normalised (Terenin et al. 2020);
    empty topics from the Dirichlet prior as above.
    """
    cdef int64_t W = nwk.shape[0], C = nwk.shape[1], k
    if K > C or phi.shape[0] != W or phi.shape[1] != C or nk.shape[0] < K:
        raise ValueError(f"phi must have shape ({W}, {C}) and K = {K} at most {C}")
    if n_threads < 1:
        raise ValueError(f"n_threads must be positive, got {n_threads}")
    if W == 0 or K == 0:
        return
    work = np.empty((n_threads, W + PAD))
    cdef double[:, ::1] wv = work
    with nogil:
        for k in prange(K, num_threads=n_threads, schedule="dynamic", chunksize=1):
            _phi_topic(&nwk[0, 0], &nk[0], W, C, k, eta, ppu, key, stream, &phi[0, 0], &wv[threadid(), 0])


# ---------------------------------------------------------------------------
# z | Phi, Psi, theta collapsed
# ---------------------------------------------------------------------------

cdef struct ZArgs:
    int64_t C, K                 # capacity (row stride); active topics 0..K-1 (alias tables)
    const int64_t *indptr
    const int32_t *indices
    const int32_t *counts
    const int64_t *tok_ptr
    const double *phi
    const double *prob
    const int32_t *alias
    const double *mass
    const double *ab             # alpha Psi_k, all C slots
    double tail                  # alpha R, R the stick mass of topics >= K
    const double *tail_cdf       # cumulative Psi_k over the tail topics K, K + 1, ...
    int64_t n_tail               # entries of tail_cdf (0: no tail)
    int32_t *nwk
    int64_t stride               # of the per-thread rows below: C + PAD
    double *cum
    int32_t *nd
    int32_t *dlist
    int32_t *dpos
    int64_t *nk_part
    int *bad                     # set when a candidate has no drawn column (max_candidate not respected)
    uint64_t key, stream, cand_stream, first_doc


cdef void _z_doc(const ZArgs *a, label_t *z, int64_t j, int tid) noexcept nogil:
    """Resample the topics of document j from stream (key, stream, first_doc + j),
    its tokens' candidates from stream (key, cand_stream, first_doc + j).

    p(z_i = k) ∝ phi_kw (n_jk + alpha Psi_k): the document bucket sums phi_kw n_jk
    over the document's topics (counted from its labels), the alias table of
    word w holds alpha Psi_k phi_kw over the active topics k < K, and the flag
    topic carries the tail: with the token's candidate c (a tail topic drawn with
    probability Psi_c / R), weight alpha R phi_cw. Choosing the flag sets z_i = c.
    (A token's current topic is always active: K is one past the highest topic
    with tokens when the sweep starts, and every token is visited once.)"""
    cdef int64_t C = a.C, p, r, n, zi = a.tok_ptr[j]
    cdef int32_t w, t, s, c = 0
    cdef int32_t *nd = a.nd + tid * a.stride
    cdef int32_t *dlist = a.dlist + tid * a.stride
    cdef int32_t *dpos = a.dpos + tid * a.stride
    cdef int64_t *nk_part = a.nk_part + tid * a.stride
    cdef double *cum = a.cum + tid * a.stride
    cdef const double *prow
    cdef double q, u, f
    cdef bnp_stream_t st, cst
    bnp_stream_init(&st, a.key, a.stream, a.first_doc + <uint64_t>j)
    bnp_stream_init(&cst, a.key, a.cand_stream, a.first_doc + <uint64_t>j)
    n = _doc_open(z + zi, a.tok_ptr[j + 1] - zi, nd, dlist, dpos)
    for p in range(a.indptr[j], a.indptr[j + 1]):
        w = a.indices[p]
        prow = a.phi + w * C
        for r in range(a.counts[p]):
            s = <int32_t>z[zi]
            nd[s] -= 1
            if nd[s] == 0:
                n = _list_remove(s, dlist, dpos, n)
            f = 0.0
            if a.n_tail:
                c = <int32_t>(a.K + _tail_pick(a.tail_cdf, a.n_tail, bnp_rng_uniform(&cst.bitgen)))
                if c < C:
                    f = a.tail * prow[c]
                else:
                    a.bad[0] = 1
            q = _bucket(prow, nd, dlist, n, cum)
            u = bnp_rng_uniform(&st.bitgen) * (q + a.mass[w] + f)
            if u < q:
                t = _bucket_pick(cum, dlist, n, u)
            elif u < q + a.mass[w]:
                t = _alias_pick(a.prob + w * C, a.alias + w * C, a.K, bnp_rng_uniform(&st.bitgen))
            else:
                t = c
            n = _list_add(t, dlist, dpos, n)
            nd[t] += 1
            z[zi] = <label_t>t
            _move_token(a.nwk + w * C, nk_part, s, t)
            zi += 1
    _doc_close(nd, dlist, dpos, n)


def z_step(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,   # IN corpus
           const int64_t[::1] tok_ptr, int64_t K,                                              # IN (D + 1,), active
           const double[:, ::1] phi, const double[:, ::1] prob, const int32_t[:, ::1] alias,   # IN Phi, tables
           const double[::1] mass, const double[::1] ab, double tail,                          # IN
           const double[::1] tail_cdf, uint64_t key, uint64_t stream, uint64_t cand_stream,    # IN
           label_t[::1] z,                                                                     # IN/OUT labels
           int32_t[:, ::1] nwk, int64_t[::1] nk,                                               # IN/OUT counts
           int n_threads=1, uint64_t first_doc=0):
    """Resample every token's topic given Phi and Psi with theta integrated out,
    documents in parallel (see ``_z_doc``), and move the topic-word counts of the
    tokens that change (atomic integer adds; ``nk`` the sum of per-thread
    changes). ``z``: uint16 or int32 labels, all below K; each document's
    counts are rebuilt from them. Each token's candidate is the tail topic
    ``K + i``, i drawn from ``tail_cdf`` (``K + max_candidate(...)`` is the
    largest of the sweep: columns of ``phi`` up to it must be drawn; a
    candidate beyond the columns is a ValueError, its token never taking the
    flag). ``first_doc``:
    the corpus is documents ``first_doc, ...`` of a larger one, whose streams
    document j uses. Equivalent NumPy for token i of document j, word w, with
    ``ab = alpha Psi`` over all topics (the tail as its candidate, in
    distribution)::

        ndk = np.bincount(z[tok_ptr[j]:tok_ptr[j + 1]], minlength=len(ab))    # once per document
        ndk[z[i]] -= 1
        p = phi[w] * (ndk + ab);  z[i] = rng.choice(len(p), p=p / p.sum())
        ndk[z[i]] += 1
    """
    cdef int64_t D = indptr.shape[0] - 1, C = nwk.shape[1], W = phi.shape[0], M = tail_cdf.shape[0], j
    if tok_ptr.shape[0] != D + 1 or z.shape[0] != tok_ptr[D]:
        raise ValueError("tok_ptr and z do not match the corpus")
    if phi.shape[1] != C or prob.shape[0] != W or prob.shape[1] != C or alias.shape[0] != W \
            or alias.shape[1] != C or mass.shape[0] != W or nwk.shape[0] != W \
            or nk.shape[0] != C or ab.shape[0] != C or not 0 < K <= C:
        raise ValueError("phi, prob, alias, mass, ab, tail_cdf, nwk and nk disagree on the number of topics or words")
    if n_threads < 1:
        raise ValueError(f"n_threads must be positive, got {n_threads}")
    check_labels(np.asarray(z), C)
    if z.shape[0] == 0:
        return
    if np.asarray(z).max() >= K:
        raise ValueError(f"a label is not below K = {K}")
    cum, nds, lists, pos, parts = z_scratch(n_threads, C)
    cdef double[:, ::1] cv = cum
    cdef int32_t[:, ::1] nv = nds, lv = lists, pv = pos
    cdef int64_t[:, ::1] kv = parts
    cdef ZArgs a
    cdef ZArgs *ap = &a
    a.C, a.K, a.stride = C, K, C + PAD
    a.indptr, a.indices, a.counts, a.tok_ptr = &indptr[0], &indices[0], &counts[0], &tok_ptr[0]
    a.phi, a.prob, a.alias, a.mass, a.ab, a.tail = &phi[0, 0], &prob[0, 0], &alias[0, 0], &mass[0], &ab[0], tail
    a.tail_cdf, a.n_tail, a.nwk = &tail_cdf[0] if M else NULL, M, &nwk[0, 0]
    a.cum, a.nd, a.dlist, a.dpos, a.nk_part = &cv[0, 0], &nv[0, 0], &lv[0, 0], &pv[0, 0], &kv[0, 0]
    a.key, a.stream, a.cand_stream, a.first_doc = key, stream, cand_stream, first_doc
    cdef int bad = 0
    a.bad = &bad
    with nogil:
        for j in prange(D, num_threads=n_threads, schedule="dynamic", chunksize=8):
            _z_doc(ap, &z[0], j, threadid())
    np.asarray(nk)[:] += parts[:, :C].sum(axis=0)
    if bad:
        raise ValueError(f"a candidate topic is beyond the {C} columns of phi: draw the columns up to "
                         "K + max_candidate(...) first")
