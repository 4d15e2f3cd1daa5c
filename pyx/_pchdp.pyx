"""Kernels of the doubly sparse partially collapsed HDP sampler of Terenin,
Magnusson, Jonsson & Draper (2020), "Sparse parallel training of hierarchical
Dirichlet process topic models" (EMNLP): the topics Phi and the global weights
Psi are sampled explicitly, the document proportions are integrated out.

One sweep calls, each releasing the GIL and running in ``n_threads``:

1. ``sample_tables``: the table counts l_k = sum_j l_jk, each l_jk a sum of
   Bernoulli(alpha Psi_k / (alpha Psi_k + i)), i < n_jk, documents in parallel;
2. Phi | z, topics or words in parallel: exact, ``_pclda.sample_phi(...,
   n_topics=)`` draws the active topics and the tail candidates
   (``max_candidate`` first: the largest tail topic the z-step will propose)
   from their Dirichlet conditionals;
   with the Poisson Polya urn, ``_pclda.sample_phi_urn(..., n_topics=)``
   draws the topics with tokens as sparse word-major rows (those of the tail
   topics then densified for ``z_step_rows``), and ``sample_prior`` the
   other candidates from the prior at the words where the z-step reads them
   (``candidate_words``; 14 % of the entries on KOS), the rest of a row
   drawn in the z-step if a token takes its topic;
3. dense Phi only: ``_pclda.build_alias(..., n_topics=K)``, per word a Walker
   alias table of ``alpha Psi_k phi[w, k]`` over the active topics;
4. ``z_step`` (dense) or ``z_step_rows`` (urn): every token's topic given Phi
   and Psi, documents in parallel, each document's counts rebuilt from its
   labels, the topic-word counts moved as tokens change.

Every random draw comes from a keyed stream (``bnp_stream_t``) named by
(key, sweep, document, topic or word), so the state after a sweep is
bit-identical for any thread count. Layouts as in ``bnpcore.kernels._pclda``:
the labels (uint16 or int32, one per token) and ``tok_ptr``; ``nwk``, a dense
``phi``, ``prob`` and ``alias`` (W, C) word-major, C the capacity of topic
slots; only the first columns named by each call are used. Nothing per
document is kept.
"""
import numpy as np
cimport numpy as cnp
from cython.parallel cimport prange, threadid
from libc.math cimport exp, INFINITY
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint64_t

from bnpcore.kernels._pclda cimport (BNP_PREFETCH, _alias_pick, _bucket, _bucket_entries, _bucket_pick, _doc_close,
                                    _doc_open, _list_add, _list_remove, _log_gamma_small, _move_token, bnp_once_claim,
                                    bnp_once_done, label_t)
from bnpcore.kernels._pclda import check_labels, z_scratch
from bnpcore.kernels.parallel cimport PAD
from bnpcore.kernels.sparse cimport bnp_csr_t, csr_view
from bnpcore.kernels.special cimport bnp_lgamma
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

cdef struct Tail:
    const double *cdf            # cumulative Psi_k over the tail topics K, K + 1, ... (M entries)
    const int64_t *guide         # guide[g]: the pick of u = g / G (``_guide``)
    int64_t M, G


# Entries of the guide table per tail topic: with 8, a pick takes no step from its
# entry most of the time (with 1, the steps' mispredicted branches took most of
# the candidates' pass)
cdef enum:
    GUIDE = 8


def _guide(cdf):
    """The guide table of ``_tail_pick`` (Chen & Asau 1974): entry g of G =
    GUIDE M is the first i with cdf[i] > (g / G) cdf[M - 1] (M - 1 if none)."""
    cdf = np.asarray(cdf)
    M = cdf.shape[0]
    G = GUIDE * M
    return np.minimum(np.searchsorted(cdf, np.arange(G) / G * cdf[M - 1], side="right"), M - 1).astype(np.int64)


cdef inline int64_t _tail_pick(const Tail *t, double u) noexcept nogil:
    """The first i < M with cdf[i] > u cdf[M - 1] (M - 1 if none): a draw with
    probability (cdf[i] - cdf[i - 1]) / cdf[M - 1] for u ~ U[0, 1), monotone in u.
    From the guide table's entry of u, a step or two (a binary search cost 7
    steps over KOS's ~90 tail topics)."""
    cdef double x = u * t.cdf[t.M - 1]
    cdef int64_t i = t.guide[min(<int64_t>(u * t.G), t.G - 1)]
    while i > 0 and t.cdf[i - 1] > x:           # (u G rounded up)
        i -= 1
    while i < t.M - 1 and t.cdf[i] <= x:
        i += 1
    return i


cdef int64_t _max_candidate_doc(int64_t n_tok, const Tail *t, uint64_t key, uint64_t stream,
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
    return _tail_pick(t, top)


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
    guide = _guide(tail_cdf)
    cdef int64_t[::1] gv = guide
    cdef Tail t = Tail(&tail_cdf[0], &gv[0], M, GUIDE * M)
    best = np.full((n_threads, PAD), -1, dtype=np.int64)
    cdef int64_t[:, ::1] bv = best
    with nogil:
        for j in prange(D, num_threads=n_threads, schedule="dynamic", chunksize=64):
            if tok_ptr[j + 1] > tok_ptr[j]:
                c = _max_candidate_doc(tok_ptr[j + 1] - tok_ptr[j], &t, key, stream, first_doc + <uint64_t>j)
                if c > bv[threadid(), 0]:
                    bv[threadid(), 0] = c
    return int(best[:, 0].max())


cdef void _mark_doc(const bnp_csr_t *m, int64_t j, const Tail *t, uint64_t key, uint64_t stream, uint64_t doc,
                    int64_t W, uint8_t *marks) noexcept nogil:
    """Mark (candidate, word) of each token of document j of m, stream (key, stream, doc)."""
    cdef bnp_stream_t st
    cdef int64_t p, r
    bnp_stream_init(&st, key, stream, doc)
    for p in range(m.indptr[j], m.indptr[j + 1]):
        for r in range(m.counts[p]):
            marks[_tail_pick(t, bnp_rng_uniform(&st.bitgen)) * W + m.indices[p]] = 1


def candidate_words(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,  # IN corpus
                    const double[::1] tail_cdf, uint64_t key, uint64_t stream,                       # IN as z_step
                    int64_t n_words, int n_threads=1, uint64_t first_doc=0):
    """The words at which ``z_step_rows`` with the same ``tail_cdf``, key,
    candidate stream and ``first_doc`` reads the row of each candidate tail
    topic: (n, n_words) uint8, ``marks[i, w] = 1`` if some token of word w
    proposes tail topic K + i, n one past the largest candidate (0 without
    tokens). Token after token in the corpus' order (a word's ``counts[p]``
    tokens together), document j's candidates are ``_tail_pick(tail_cdf, u)``
    of the uniforms of stream (key, stream, first_doc + j), as in the z-step.
    Equivalent NumPy: ``marks[c, np.repeat(indices, counts)] = 1`` with c the
    tokens' candidates."""
    cdef int64_t D = indptr.shape[0] - 1, M = tail_cdf.shape[0], n, j
    if M == 0:
        raise ValueError("tail_cdf is empty")
    if n_threads < 1:
        raise ValueError(f"n_threads must be positive, got {n_threads}")
    if indices.shape[0] and (np.asarray(indices).max() >= n_words or np.asarray(indices).min() < 0):
        raise ValueError(f"a word id is not below n_words = {n_words}")
    tok_ptr = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)])[np.asarray(indptr)]
    n = max_candidate(tok_ptr, tail_cdf, key, stream, n_threads, first_doc) + 1
    part = np.zeros((n_threads, n * n_words + PAD), dtype=np.uint8)      # one copy per thread: no shared writes
    cdef uint8_t[:, ::1] pv = part
    guide = _guide(tail_cdf)
    cdef int64_t[::1] gv = guide
    cdef Tail t = Tail(&tail_cdf[0], &gv[0], M, GUIDE * M)
    cdef bnp_csr_t docs = csr_view(indptr, indices, counts, n_words)
    if n:
        with nogil:
            for j in prange(D, num_threads=n_threads, schedule="dynamic", chunksize=16):
                _mark_doc(&docs, j, &t, key, stream, first_doc + j, n_words, &pv[threadid(), 0])
    return np.bitwise_or.reduce(part[:, :n * n_words], axis=0).reshape(n, n_words)


# ---------------------------------------------------------------------------
# Phi | z
# ---------------------------------------------------------------------------

cdef inline double _log_gamma(bnp_bitgen_t *g, double a) noexcept nogil:
    return _log_gamma_small(g, a) if a < 1.0 else bnp_rng_log_gamma(g, a)


cdef void _prior_topic(int64_t W, int64_t k, double eta, uint64_t key, uint64_t stream, double *out,
                       double *buf, const uint8_t *mark, double *rest) noexcept nogil:
    """Topic k from stream (key, stream, k): Dirichlet(eta) by normalised
    log-gamma draws (exp(x - max), so that tiny eta, whose log-gamma draws
    reach -1e6, still gives a distribution), written to out[0..W) - the
    numbers of ``_pclda.sample_phi``'s topic k with no counts. With ``mark``,
    only the m words w with mark[w] are drawn, then one Gamma((W - m) eta) for
    the W - m others together (the Dirichlet's aggregation property), their
    total written to ``rest`` and 0 to their entries."""
    cdef bnp_stream_t st
    cdef int64_t w, m = 0
    cdef double x, mx = -INFINITY, tot = 0.0, lr = -INFINITY
    bnp_stream_init(&st, key, stream, <uint64_t>k)
    for w in range(W):
        if mark != NULL and not mark[w]:
            buf[w] = -INFINITY
            continue
        x = _log_gamma(&st.bitgen, eta)
        buf[w] = x
        m += 1
        if x > mx:
            mx = x
    if mark != NULL and m < W:
        lr = _log_gamma(&st.bitgen, (W - m) * eta)
        if lr > mx:
            mx = lr
    for w in range(W):
        x = exp(buf[w] - mx) if buf[w] > -INFINITY else 0.0
        buf[w] = x
        tot += x
    if mark != NULL:
        x = exp(lr - mx)
        tot = 1.0 / (tot + x)
        rest[0] = x * tot
    else:
        tot = 1.0 / tot
    for w in range(W):
        out[w] = buf[w] * tot


def sample_prior(int64_t first, double eta, uint64_t key, uint64_t stream,   # IN topics first.., prior, stream
                 double[:, ::1] out,                                          # OUT (n, W): topics first..first+n-1
                 int n_threads=1,
                 const uint8_t[:, ::1] marks=None,                             # IN (n, W) the words drawn, or all
                 double[::1] rest=None):                                      # OUT (n,) the others' mass
    """Draw topics first..first+n-1 without tokens (the tail candidates) from the
    prior Dirichlet(eta), one per row of ``out`` (topic-major: a token reads
    the row of its candidate), topic k from stream (key, stream, k) as in
    ``_pclda.sample_phi``. Equivalent NumPy: ``g = rng.gamma(eta, size=out.shape);
    out[:] = g / g.sum(axis=1, keepdims=True)``.

    With ``marks`` (from ``candidate_words``: the words at which the z-step
    reads each candidate's row), only the marked entries of row i are drawn,
    ``rest[i]`` the total of the others (0 in ``out``), exactly in law: by the
    Dirichlet's aggregation property, (phi_w for marked w, their rest) is
    Dirichlet(eta, ..., eta, (W - m) eta). ``z_step_rows`` completes a row
    when a token takes its topic. Equivalent NumPy for row i, ``m =
    marks[i].sum()``: ``g = rng.gamma(eta, size=m); r = rng.gamma((W - m)
    eta); out[i, marks[i] == 1] = g / (g.sum() + r); rest[i] = r / (g.sum() +
    r)``."""
    cdef int64_t n = out.shape[0], W = out.shape[1]
    if (marks is None) != (rest is None):
        raise ValueError("marks and rest go together")
    if marks is not None and (marks.shape[0] != n or marks.shape[1] != W or rest.shape[0] != n):
        raise ValueError(f"marks must have the shape of out ({n}, {W}) and rest {n} entries")
    if not eta > 0.0:
        raise ValueError(f"eta must be positive, got {eta}")
    if n_threads < 1:
        raise ValueError(f"n_threads must be positive, got {n_threads}")
    if W == 0 or n == 0:
        return
    work = np.empty((n_threads, W + PAD))
    cdef double[:, ::1] wv = work
    cdef double *op = &out[0, 0]
    cdef const uint8_t *mp = &marks[0, 0] if marks is not None else NULL
    cdef double *rp = &rest[0] if marks is not None else NULL
    cdef int64_t i
    with nogil:
        for i in prange(n, num_threads=n_threads, schedule="dynamic", chunksize=1):
            _prior_topic(W, first + i, eta, key, stream, op + i * W, &wv[threadid(), 0],
                         mp + i * W if mp != NULL else NULL, rp + i if rp != NULL else NULL)


# ---------------------------------------------------------------------------
# z | Phi, Psi, theta collapsed
# ---------------------------------------------------------------------------

cdef struct ZArgs:
    int64_t C, K                 # capacity (row stride); active topics 0..K-1
    bnp_csr_t docs
    const int64_t *tok_ptr
    const int64_t *rows          # NULL: phi, prob, alias dense over 0..K-1; else the urn's CSR rows of ...
    const int32_t *topics        # ... these active topics, with the values vals
    const double *vals
    const double *phi            # dense: (W, C), every drawn column; urn: (n_rows, W), the tail candidates'
    int64_t n_rows, W            # urn: the tail topics K..K+n_rows-1 drawn, the words
    double *rows_out             # urn with marks: phi, written by _complete_row; else NULL
    const uint8_t *marks         # (n_rows, W): the entries drawn by sample_prior
    const double *rest           # (n_rows,): the mass of the others
    int32_t *done                # (n_rows,): bnp_once flags of the completions
    double eta
    uint64_t rest_stream
    const double *prob
    const int32_t *alias
    const double *mass
    const double *ab             # alpha Psi_k, all C slots
    double tail                  # alpha R, R the stick mass of topics >= K
    Tail cands                   # the candidates' law (cands.M = 0: no tail)
    int32_t *nwk
    int64_t stride               # of the per-thread rows below: C + PAD
    double *cum
    int32_t *nd
    int32_t *dlist
    int32_t *dpos
    int64_t *nk_part
    int *bad                     # set when a candidate has no drawn column (max_candidate not respected)
    uint64_t key, stream, cand_stream, first_doc


cdef inline int32_t _candidate(const ZArgs *a, bnp_bitgen_t *g, int32_t w, const double **at) noexcept nogil:
    """A token's candidate tail topic c (from its document's candidate stream g)
    and in ``at`` where phi_cw is, NULL (and ``bad`` set) if c was not drawn."""
    cdef int32_t c = <int32_t>(a.K + _tail_pick(&a.cands, bnp_rng_uniform(g)))
    at[0] = NULL
    if a.rows == NULL and c < a.C:
        at[0] = a.phi + w * a.C + c
    elif a.rows != NULL and c - a.K < a.n_rows:
        at[0] = a.phi + (c - a.K) * a.W + w
    else:
        a.bad[0] = 1
    return c


cdef void _complete_row(const ZArgs *a, int64_t i) noexcept nogil:
    """Tail row i (topic K + i), drawn by ``sample_prior`` at its marked words:
    its other entries, rest[i] times a Dirichlet(eta, ..., eta) over them (the
    law of the rest of a Dirichlet row given the marked entries), from stream
    (key, rest_stream, K + i) in word order; by the first thread whose token
    takes the topic, once (the others wait for it)."""
    cdef bnp_stream_t st
    cdef const uint8_t *mark = a.marks + i * a.W
    cdef double *row = a.rows_out + i * a.W
    cdef double x, mx = -INFINITY, tot = 0.0
    cdef int64_t w
    if not bnp_once_claim(&a.done[i]):
        return
    if a.rest[i] > 0.0:
        bnp_stream_init(&st, a.key, a.rest_stream, <uint64_t>(a.K + i))
        for w in range(a.W):
            if not mark[w]:
                x = _log_gamma(&st.bitgen, a.eta)
                row[w] = x
                if x > mx:
                    mx = x
        for w in range(a.W):
            if not mark[w]:
                x = exp(row[w] - mx)
                row[w] = x
                tot += x
        tot = a.rest[i] / tot
        for w in range(a.W):
            if not mark[w]:
                row[w] *= tot
    bnp_once_done(&a.done[i])


cdef void _z_doc(const ZArgs *a, label_t *z, int64_t j, int tid) noexcept nogil:
    """Resample the topics of document j from stream (key, stream, first_doc + j),
    its tokens' candidates from stream (key, cand_stream, first_doc + j).

    p(z_i = k) ∝ phi_kw (n_jk + alpha Psi_k), and the flag topic carries the
    tail: with the token's candidate c (a tail topic drawn with probability
    Psi_c / R), weight alpha R phi_cw; choosing the flag sets z_i = c.

    Dense Phi: the document bucket sums phi_kw n_jk over the document's topics
    (counted from its labels, listed), the alias table of word w holds
    alpha Psi_k phi_kw over the active topics k < K. Urn Phi: one sum of
    phi_kw (n_jk + alpha Psi_k) over the word's entries (no active topic
    outside them has weight), then phi_cw n_jc over the document's tail
    topics (listed), then the flag. A token whose weights
    are all 0 (its word drawn 0 everywhere, by the urn or by underflow, and no
    tail) keeps its topic.

    The candidate is an auxiliary variable whose law given the token's
    current topic s makes each token's move exact for any split K that does
    not depend on the labels the sweep moves (the sampler's is a function of
    Psi): Psi_c / R over the tail if s < K; if s >= K, s itself with
    probability ab_s / (n_js + ab_s) (n_js without the token), else Psi_c /
    R."""
    cdef bint listed = a.rows == NULL
    cdef int64_t C = a.C, p, r, n = 0, i, zi = a.tok_ptr[j], end = a.tok_ptr[j + 1], b = 0, m = 0
    cdef int32_t w, t, s, c = 0, c_next = 0, w_next
    cdef const double *flag = NULL
    cdef const double *flag_next = NULL
    cdef int32_t *nd = a.nd + tid * a.stride
    cdef int32_t *dlist = a.dlist + tid * a.stride
    cdef int32_t *dpos = a.dpos + tid * a.stride
    cdef int64_t *nk_part = a.nk_part + tid * a.stride
    cdef double *cum = a.cum + tid * a.stride
    cdef const double *prow = NULL
    cdef double q, q2, u, f
    cdef bnp_stream_t st, cst
    bnp_stream_init(&st, a.key, a.stream, a.first_doc + <uint64_t>j)
    bnp_stream_init(&cst, a.key, a.cand_stream, a.first_doc + <uint64_t>j)
    if listed:
        n = _doc_open(z + zi, end - zi, nd, dlist, dpos)
    else:                               # the urn lists the document's tail topics only
        for i in range(zi, end):
            nd[z[i]] += 1
            if z[i] >= a.K:
                n = _list_add(<int32_t>z[i], dlist, dpos, n)
    # each token's candidate is drawn one token ahead (the same draws, in the same
    # order), so that its phi_cw and the next counts row are fetched while the
    # current token is drawn: these two reads are the z-step's cache misses
    if a.cands.M and zi < end:
        c_next = _candidate(a, &cst.bitgen, a.docs.indices[a.docs.indptr[j]], &flag_next)
    for p in range(a.docs.indptr[j], a.docs.indptr[j + 1]):
        w = a.docs.indices[p]
        if listed:                      # the word's row of the dense Phi
            prow = a.phi + w * C
        else:
            b = a.rows[w]
            m = a.rows[w + 1] - b
        for r in range(a.docs.counts[p]):
            c, flag = c_next, flag_next
            if zi + 1 < end:
                w_next = w if r + 1 < a.docs.counts[p] else a.docs.indices[p + 1]
                if a.cands.M:
                    c_next = _candidate(a, &cst.bitgen, w_next, &flag_next)
                    if flag_next != NULL:
                        BNP_PREFETCH(flag_next)
                BNP_PREFETCH(a.nwk + w_next * C + z[zi + 1])
            s = <int32_t>z[zi]
            nd[s] -= 1
            if (listed or s >= a.K) and nd[s] == 0:
                n = _list_remove(s, dlist, dpos, n)
            if s >= a.K:                # a token in a tail topic is its own candidate
                if bnp_rng_uniform(&st.bitgen) * (nd[s] + a.ab[s]) < a.ab[s]:   # w.p. ab_s / (n_js + ab_s)
                    c, flag = s, prow + s if listed else a.phi + (s - a.K) * a.W + w
            f = a.tail * flag[0] if flag != NULL else 0.0
            # two buckets and the flag; the flag only with weight, a bucket pick
            # by a u rounded to the end of the buckets takes their last entry
            if listed:                  # the document's topics, the word's alias table
                q = _bucket(prow, nd, dlist, n, cum)
                q2 = a.mass[w]
            else:                       # the word's entries, the document's tail topics
                q = _bucket_entries(a.vals + b, a.topics + b, m, nd, a.ab, cum)
                q2 = 0.0
                for i in range(n):
                    q2 += a.phi[(dlist[i] - a.K) * a.W + w] * nd[dlist[i]]
                    cum[m + i] = q2
            u = bnp_rng_uniform(&st.bitgen) * (q + q2 + f)
            if not q + q2 + f > 0.0:
                t = s
            elif f > 0.0 and u >= q + q2:
                t = c
                if a.done != NULL:      # its row, read at the document's later words
                    _complete_row(a, c - a.K)
            elif listed:
                if u < q or q2 == 0.0:
                    t = _bucket_pick(cum, dlist, n, u)
                else:
                    t = _alias_pick(a.prob + w * C, a.alias + w * C, a.K, bnp_rng_uniform(&st.bitgen))
            elif u < q or q2 == 0.0:
                t = _bucket_pick(cum, a.topics + b, m, u)
            else:
                t = _bucket_pick(cum + m, dlist, n, u - q)
            if listed or t >= a.K:
                n = _list_add(t, dlist, dpos, n)
            nd[t] += 1
            z[zi] = <label_t>t
            _move_token(a.nwk + w * C, nk_part, s, t)
            zi += 1
    if listed:
        _doc_close(nd, dlist, dpos, n)
    else:
        for i in range(a.tok_ptr[j], end):
            nd[z[i]] = 0
        for i in range(n):
            dpos[dlist[i]] = -1


def z_step(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,   # IN corpus
           const int64_t[::1] tok_ptr, int64_t K,                                              # IN (D + 1,), active
           tuple tables,                   # IN      (phi, prob, alias, mass): Phi and its alias tables
           tuple prior,                    # IN      (ab, tail, tail_cdf)
           tuple streams,                  # IN      (key, stream, cand_stream)
           label_t[::1] z,                                                                     # IN/OUT labels
           int32_t[:, ::1] nwk, int64_t[::1] nk,                                               # IN/OUT counts
           int n_threads=1, uint64_t first_doc=0):
    """Resample every token's topic given Phi and Psi with theta integrated out,
    documents in parallel (see ``_z_doc``), and move the topic-word counts of the
    tokens that change (atomic integer adds; ``nk`` the sum of per-thread
    changes). ``z``: uint16 or int32 labels, below K if there is no tail, else
    below the columns of ``phi`` (a token in a tail topic, whose column must be
    drawn, is its own candidate w.p. ab_s / (n_js + ab_s)); each document's
    counts are rebuilt from them. Each token's candidate is otherwise the tail
    topic ``K + i``, i drawn from ``tail_cdf`` (``K + max_candidate(...)`` is
    the largest of the sweep: columns of ``phi`` up to it must be drawn; a
    candidate beyond the columns is a ValueError, its token never taking the
    flag). ``first_doc``:
    the corpus is documents ``first_doc, ...`` of a larger one, whose streams
    document j uses.

    The grouped arguments: ``tables = (phi, prob, alias, mass)``, (W, C)
    float64, (W, C) float64, (W, C) int32, (W,) float64 (``_pclda.build_alias``
    over the K active topics); ``prior = (ab, tail, tail_cdf)``, alpha Psi_k
    over the C slots, alpha times the tail's stick mass, and the cumulative Psi
    of the tail topics; ``streams = (key, stream, cand_stream)``, the keyed
    streams of the draws and of the candidates.

    Equivalent NumPy for token i of document j, word w, with
    ``ab = alpha Psi`` over all topics (the tail as its candidate, in
    distribution)::

        ndk = np.bincount(z[tok_ptr[j]:tok_ptr[j + 1]], minlength=len(ab))    # once per document
        ndk[z[i]] -= 1
        p = phi[w] * (ndk + ab);  z[i] = rng.choice(len(p), p=p / p.sum())
        ndk[z[i]] += 1
    """
    cdef const double[:, ::1] phi, prob
    cdef const int32_t[:, ::1] alias
    cdef const double[::1] mass
    phi, prob, alias, mass = tables
    cdef int64_t W = nwk.shape[0], C = nwk.shape[1]
    if phi.shape[0] != W or phi.shape[1] != C or prob.shape[0] != W or prob.shape[1] != C \
            or alias.shape[0] != W or alias.shape[1] != C or mass.shape[0] != W or W == 0:
        raise ValueError("phi, prob, alias, mass and nwk disagree on the number of topics or words")
    cdef ZArgs a
    a.rows, a.topics, a.vals = NULL, NULL, NULL
    a.phi, a.n_rows, a.W = &phi[0, 0], 0, W
    a.rows_out, a.marks, a.rest, a.done = NULL, NULL, NULL, NULL
    a.prob, a.alias, a.mass = &prob[0, 0], &alias[0, 0], &mass[0]
    _z_run(&a, indptr, indices, counts, tok_ptr, K, prior, streams, z, nwk, nk, n_threads, first_doc)


def z_step_rows(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,  # IN corpus
                const int64_t[::1] tok_ptr, int64_t K,                                             # IN (D + 1,), active
                tuple urn,                      # IN      (rows, topics, vals): the urn's CSR, topics < K
                double[:, ::1] tail_phi,        # IN(/OUT with completion) tail rows
                tuple prior,                    # IN      (ab, tail, tail_cdf)
                tuple streams,                  # IN      (key, stream, cand_stream)
                label_t[::1] z,                                                                    # IN/OUT labels
                int32_t[:, ::1] nwk, int64_t[::1] nk,                                              # IN/OUT counts
                int n_threads=1, uint64_t first_doc=0,
                tuple completion=None):         # IN      (marks, rest, eta, rest_stream): sample_prior's
    """``z_step`` with the active topics' Phi as the Poisson Polya urn's sparse
    word-major rows (``bnpcore.kernels._pclda.sample_phi_urn`` over the first K
    columns): a token of word w sums ``vals[i] (n_jk + ab_k)``, k = ``topics[i]``,
    over the word's entries, then the document's tail topics and the flag
    from ``tail_phi``, whose row i is tail topic K + i (the tail topics with
    tokens', then the candidates', ``sample_prior``; topic-major, so that the
    rows of the likely candidates stay in cache); no alias tables. Labels must
    be below K + len(tail_phi). A token whose weights are all 0 keeps its
    topic. Equivalent NumPy: ``z_step`` with
    ``phi[w, topics[rows[w]:rows[w + 1]]] = vals[rows[w]:rows[w + 1]]``, 0
    elsewhere below K, and ``phi[:, K:K + len(tail_phi)] = tail_phi.T``.

    ``urn = (rows, topics, vals)``: int64 (W + 1,), int32 and float64 (nnz,);
    ``prior`` and ``streams`` as in ``z_step``. With ``completion = (marks,
    rest, eta, rest_stream)``, whose ``marks`` and ``rest`` are
    ``sample_prior``'s (rows drawn at the words ``candidate_words`` marked with
    the same streams; None for none), a row is completed in
    place when a token first takes its topic (``_complete_row``: prior eta,
    stream (key, rest_stream, K + i)), as the document's later tokens read it
    at any word; the result does not depend on which thread completes it.
    """
    cdef const int64_t[::1] rows
    cdef const int32_t[::1] topics
    cdef const double[::1] vals
    cdef const uint8_t[:, ::1] marks = None
    cdef const double[::1] rest = None
    cdef double eta = 0.0
    cdef uint64_t rest_stream = 0
    rows, topics, vals = urn
    if completion is not None:
        marks, rest, eta, rest_stream = completion
    cdef int64_t W = rows.shape[0] - 1, nnz = topics.shape[0]
    if W != nwk.shape[0] or rows[W] != nnz or vals.shape[0] != nnz:
        raise ValueError(f"rows must have {nwk.shape[0] + 1} entries, ending at the {nnz} entries of topics "
                         "and vals")
    if tail_phi.shape[0] and tail_phi.shape[1] != W:
        raise ValueError(f"tail_phi must have one column per word ({W}), got {tail_phi.shape[1]}")
    if K + tail_phi.shape[0] > nwk.shape[1]:
        raise ValueError(f"the tail rows' topics K..{K + tail_phi.shape[0] - 1} are not within the "
                         f"{nwk.shape[1]} columns of nwk")
    if nnz and (np.asarray(topics).max() >= K or np.asarray(topics).min() < 0):
        raise ValueError(f"a topic of the entries is not an active topic (below K = {K})")
    cdef ZArgs a
    a.rows, a.topics, a.vals = &rows[0], NULL, NULL
    a.phi, a.n_rows, a.W = NULL, tail_phi.shape[0], W
    a.prob, a.alias, a.mass = NULL, NULL, NULL
    a.rows_out, a.marks, a.rest, a.done = NULL, NULL, NULL, NULL
    if nnz:
        a.topics, a.vals = &topics[0], &vals[0]
    if a.n_rows:
        a.phi = &tail_phi[0, 0]
    if (marks is None) != (rest is None):
        raise ValueError("marks and rest go together")
    # completions of this call (a later call on another block of documents completes a row again, to the
    # same values: the draws are keyed)
    done = np.zeros(a.n_rows + 1, dtype=np.int32)
    cdef int32_t[::1] dv = done
    if marks is not None:
        if marks.shape[0] != a.n_rows or rest.shape[0] != a.n_rows or (a.n_rows and marks.shape[1] != W):
            raise ValueError(f"marks must have the shape of tail_phi ({a.n_rows}, {W}) and rest {a.n_rows} entries")
        if not eta > 0.0:
            raise ValueError(f"completing the tail rows needs eta > 0, got {eta}")
        if a.n_rows:
            a.rows_out, a.marks, a.rest, a.done = &tail_phi[0, 0], &marks[0, 0], &rest[0], &dv[0]
        a.eta, a.rest_stream = eta, rest_stream
    _z_run(&a, indptr, indices, counts, tok_ptr, K, prior, streams, z, nwk, nk, n_threads, first_doc)


cdef _z_run(ZArgs *a, const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,
            const int64_t[::1] tok_ptr, int64_t K, tuple prior, tuple streams,
            label_t[::1] z, int32_t[:, ::1] nwk, int64_t[::1] nk, int n_threads, uint64_t first_doc):
    """The checks and the parallel loop shared by ``z_step`` and ``z_step_rows``
    (``a`` holds the active topics' Phi or tables)."""
    cdef const double[::1] ab, tail_cdf
    cdef double tail
    cdef uint64_t key, stream, cand_stream
    ab, tail, tail_cdf = prior
    key, stream, cand_stream = streams
    cdef int64_t D = indptr.shape[0] - 1, C = nwk.shape[1], M = tail_cdf.shape[0], j
    if tok_ptr.shape[0] != D + 1 or z.shape[0] != tok_ptr[D]:
        raise ValueError("tok_ptr and z do not match the corpus")
    if nk.shape[0] != C or ab.shape[0] != C or not 0 < K <= C:
        raise ValueError("ab, nwk and nk disagree on the number of topics, or K is not within them")
    if n_threads < 1:
        raise ValueError(f"n_threads must be positive, got {n_threads}")
    check_labels(np.asarray(z), C)
    if z.shape[0] == 0:
        return
    # a tail topic's label needs its column (dense) or row (the urn's tail_phi)
    bound = K if M == 0 else (K + a.n_rows if a.rows != NULL else C)
    if np.asarray(z).max() >= bound:
        raise ValueError(f"a label is not below {bound}")
    cum, nds, lists, pos, parts = z_scratch(n_threads, C)
    cdef double[:, ::1] cv = cum
    cdef int32_t[:, ::1] nv = nds, lv = lists, pv = pos
    cdef int64_t[:, ::1] kv = parts
    a.C, a.K, a.stride = C, K, C + PAD
    a.docs = csr_view(indptr, indices, counts, nwk.shape[0])
    a.tok_ptr = &tok_ptr[0]
    a.ab, a.tail = &ab[0], tail
    guide = _guide(tail_cdf) if M else np.zeros(1, dtype=np.int64)
    cdef int64_t[::1] gv = guide
    a.cands.cdf, a.cands.guide, a.cands.M, a.cands.G = NULL, &gv[0], M, GUIDE * M
    if M:
        a.cands.cdf = &tail_cdf[0]
    a.nwk = &nwk[0, 0]
    a.cum, a.nd, a.dlist, a.dpos, a.nk_part = &cv[0, 0], &nv[0, 0], &lv[0, 0], &pv[0, 0], &kv[0, 0]
    a.key, a.stream, a.cand_stream, a.first_doc = key, stream, cand_stream, first_doc
    cdef int bad = 0
    a.bad = &bad
    with nogil:
        for j in prange(D, num_threads=n_threads, schedule="dynamic", chunksize=8):
            _z_doc(a, &z[0], j, threadid())
    np.asarray(nk)[:] += parts[:, :C].sum(axis=0)
    if bad:
        raise ValueError("a candidate topic is beyond the drawn topics of phi: draw the topics up to "
                         "K + max_candidate(...) first")


# ---------------------------------------------------------------------------
# the sample's log-likelihood
# ---------------------------------------------------------------------------

cdef enum:
    SMALL_COUNT = 1024


def word_log_likelihood(const int32_t[:, ::1] nwk, int64_t K, double eta,    # IN counts, topics 0..K-1, prior
                        double[::1] out,                                      # OUT (W,)
                        int n_threads=1):
    """Per word w, ``sum_{k < K, n_wk > 0} lgamma(n_wk + eta) - lgamma(eta)``,
    words in parallel (the topic-word part of the collapsed log p(x | z);
    summed over words by the caller, in word order, so the total is the same
    for any thread count), where NumPy's boolean selection of the positive
    counts ran serially and took a noticeable share of a two-thread sweep.
    Equivalent NumPy: ``out[:] = np.where(nwk[:, :K] > 0, gammaln(nwk[:, :K] +
    eta) - gammaln(eta), 0).sum(axis=1)``."""
    cdef int64_t W = nwk.shape[0], C = nwk.shape[1], w, k, n
    cdef double acc, base = bnp_lgamma(eta)
    if not 0 <= K <= C or out.shape[0] != W:
        raise ValueError(f"out must have {W} entries and K = {K} at most {C}")
    if not eta > 0.0:
        raise ValueError(f"eta must be positive, got {eta}")
    if n_threads < 1:
        raise ValueError(f"n_threads must be positive, got {n_threads}")
    # most counts are small: their terms from a table, cheaper than a bnp_lgamma call each
    small = np.array([bnp_lgamma(i + eta) - base for i in range(SMALL_COUNT)])
    cdef double[::1] sv = small
    with nogil:
        for w in prange(W, num_threads=n_threads, schedule="static"):
            acc = 0.0
            for k in range(K):
                n = nwk[w, k]
                if n >= SMALL_COUNT:
                    acc = acc + (bnp_lgamma(n + eta) - base)
                elif n > 0:
                    acc = acc + sv[n]
            out[w] = acc
