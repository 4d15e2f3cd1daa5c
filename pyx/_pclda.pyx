"""Kernels of the partially collapsed LDA sampler of Magnusson, Jonsson, Villani &
Broman (2018), "Sparse partially collapsed MCMC for parallel inference in topic
models" (JCGS 27(2)): the topics Phi are sampled explicitly, the document
proportions are integrated out.

One sweep is three calls, each releasing the GIL and running in ``n_threads``:

1. ``sample_phi``: phi_k ~ Dirichlet(eta + n_k.) for every topic, in parallel
   over topics;
2. ``build_alias``: per word w, a Walker alias table of ``alpha_k phi[w, k]``,
   in parallel over words (Phi stays fixed until the next sweep, so the tables
   are exact for the whole z-step);
3. ``z_step``: every token's topic from ``p(k) ∝ phi[w, k] (n_jk^- + alpha_k)``,
   in parallel over documents, each document's counts n_jk rebuilt from its
   labels, the topic-word counts moved as tokens change (atomic integer adds).

With the Poisson Polya urn (Terenin et al. 2019) Phi is sparse (word-major
CSR arrays) and a sweep is two calls: ``sample_phi_urn`` (words in parallel,
cost O(entries with counts + K eta) instead of W K gamma draws) and
``z_step_rows`` (a token costs the topics in which its word has weight, not
its document's topics; no alias tables).

Every random draw comes from a keyed stream (``bnp_stream_t``): in sweep t
topic k from stream (key, 2t + 1, k) (the urn: word w from (key, 2t + 1, 2w)
and (key, 2t + 1, 2w + 1); the Phi steps take the stream number, 2t + 1, as
an argument), document j from stream (key, 2t, j). The draws
do not depend on which thread runs a topic or a document, and the count updates
are integer sums, so the state after a sweep is bit-identical for any thread
count. The state is the labels and the topic-word counts: nothing per document.

Shapes and types as in ``bnpcore.kernels._lda``: CSR corpus ``indptr`` (int64,
D + 1), ``indices`` (int32), ``counts`` (int32 > 0); ``tok_ptr`` (int64, D + 1)
the first token of each document (cumsum of document lengths); ``z`` one topic
per token in CSR order, uint16 (at most 65536 topics) or int32; ``nwk`` (W, K,
word-major) int32, ``nk`` (K,) int64; ``phi`` and ``prob`` (W, K) float64 and ``alias``
(W, K) int32, word-major so that a token reads one contiguous row.
"""
import numpy as np
cimport numpy as cnp
from cython.parallel cimport prange, threadid
from libc.math cimport exp, expm1, log, pow, INFINITY
from libc.stdint cimport int32_t, int64_t, uint16_t, uint64_t
from libc.string cimport memmove

from bnpcore.kernels.parallel cimport PAD
from bnpcore.kernels.sparse cimport bnp_csr_t, csr_view
from bnpcore.kernels.rng cimport (bnp_bitgen_t, bnp_rng_log_gamma, bnp_rng_uniform, bnp_rng_uniform_pos,
                                  bnp_stream_init, bnp_stream_t)

cnp.import_array()

# Topics per task of sample_phi: a task owns up to 8 adjacent columns of the
# word-major arrays (about one cache line of doubles per word) and keeps their
# streams open, so that its passes over the words touch whole lines; fewer
# when there are too few topics to give every thread four tasks, which keeps
# small K's step gaining from a second thread (benchmarks/results/design_choices.txt).
cdef enum:
    PHI_BLOCK = 8


# ---------------------------------------------------------------------------
# Phi | z
# ---------------------------------------------------------------------------

def log_gamma_small(double a, uint64_t key, Py_ssize_t n):
    """``n`` draws of the Phi step's small-shape sampler from stream (key, 0, 0),
    for tests. Equivalent NumPy, in distribution: ``np.log(rng.gamma(a, size=n))``."""
    if not 0.0 < a < 1.0:
        raise ValueError(f"a must lie in (0, 1), got {a}")
    out = np.empty(n)
    cdef double[::1] ov = out
    cdef bnp_stream_t st
    cdef Py_ssize_t i
    with nogil:
        bnp_stream_init(&st, key, 0, 0)
        for i in range(n):
            ov[i] = _log_gamma_small(&st.bitgen, a)
    return out


cdef struct PhiArgs:
    int64_t W, K, C      # words, topics drawn, columns of nwk and phi
    int64_t width        # topics per block, at most PHI_BLOCK
    const int32_t *nwk
    const double *eta
    double *phi
    double *work         # n_threads x W x PHI_BLOCK
    uint64_t key, stream


cdef void _phi_block(const PhiArgs *a, int64_t b, int tid) noexcept nogil:
    """The topics of block b (``width`` from b * width on): log-gamma draws (one
    stream per topic, words in order), then exp(x - max) and the normalisation,
    so that eta like 1e-6 (log-gamma draws near -1e6) give a proper
    distribution instead of 0/0. Every topic's numbers are its own, whatever
    the blocks. The first two passes run in the thread's own buffer; only the
    last writes the shared phi, whose blocks need not be cache-line aligned."""
    cdef bnp_stream_t st[PHI_BLOCK]
    cdef double mx[PHI_BLOCK]
    cdef double tot[PHI_BLOCK]
    cdef int64_t C = a.C, k0 = b * a.width, nb = min(a.width, a.K - b * a.width), w, i
    cdef double x
    cdef double *buf = a.work + tid * a.W * PHI_BLOCK
    cdef double *row
    cdef const int32_t *nrow
    for i in range(nb):
        bnp_stream_init(&st[i], a.key, a.stream, <uint64_t>(k0 + i))
        mx[i] = -INFINITY
        tot[i] = 0.0
    for w in range(a.W):
        row = buf + w * PHI_BLOCK
        nrow = a.nwk + w * C + k0
        for i in range(nb):
            if nrow[i] == 0 and a.eta[w] < 1.0:
                x = _log_gamma_small(&st[i].bitgen, a.eta[w])
            else:
                x = bnp_rng_log_gamma(&st[i].bitgen, a.eta[w] + nrow[i])
            row[i] = x
            if x > mx[i]:
                mx[i] = x
    for w in range(a.W):
        row = buf + w * PHI_BLOCK
        for i in range(nb):
            x = exp(row[i] - mx[i])
            row[i] = x
            tot[i] += x
    for i in range(nb):
        tot[i] = 1.0 / tot[i]
    for w in range(a.W):
        row = a.phi + w * C + k0
        for i in range(nb):
            row[i] = buf[w * PHI_BLOCK + i] * tot[i]


def sample_phi(const int32_t[:, ::1] nwk, const double[::1] eta,   # IN counts (W, C), prior (W,)
               uint64_t key, uint64_t stream,                        # IN stream key, stream number
               double[:, ::1] phi,                                   # OUT topics, word-major (W, C)
               int n_threads=1, n_topics=None):
    """Draw every topic from its full conditional given the topic-word counts.

    Topic k draws W log-gamma variates from stream (key, stream, k), words in
    order, and normalises them. ``n_topics``: only the first K columns of
    ``nwk`` and ``phi`` (by default all). Equivalent NumPy, up to the streams::

        g = rng.gamma(eta[:, None] + nwk[:, :K])      # (W, K)
        phi[:, :K] = g / g.sum(axis=0)                # column k ~ Dirichlet(eta + nwk[:, k])
    """
    cdef int64_t W = nwk.shape[0], C = nwk.shape[1], K = nwk.shape[1] if n_topics is None else n_topics, b
    if eta.shape[0] != W or phi.shape[0] != W or phi.shape[1] != C:
        raise ValueError(f"eta must have {W} entries and phi shape ({W}, {C})")
    if not 0 <= K <= C:
        raise ValueError(f"n_topics={K} is not within the {C} columns of nwk")
    if n_threads < 1:
        raise ValueError(f"n_threads must be positive, got {n_threads}")
    if W == 0 or K == 0:
        return
    work = np.empty((n_threads, W, PHI_BLOCK))
    cdef double[:, :, ::1] wv = work
    cdef PhiArgs a
    cdef PhiArgs *ap = &a
    a.W, a.K, a.C = W, K, C
    a.width = max(1, min(<int64_t>PHI_BLOCK, K // (4 * n_threads)))
    a.nwk, a.eta, a.phi, a.work = &nwk[0, 0], &eta[0], &phi[0, 0], &wv[0, 0, 0]
    a.key, a.stream = key, stream
    # blocks handed out one at a time: with few blocks a static schedule leaves one thread most of them
    with nogil:
        for b in prange((K + a.width - 1) // a.width, num_threads=n_threads, schedule="dynamic", chunksize=1):
            _phi_block(ap, b, threadid())


# ---------------------------------------------------------------------------
# Phi | z by the Poisson Polya urn, sparse and word-major
# ---------------------------------------------------------------------------

cdef inline int64_t _next_hit(bnp_bitgen_t *g, double eta, int64_t k, int64_t K) noexcept nogil:
    """The next column after k whose Poisson(eta) draw is positive: a geometric
    gap of success probability 1 - exp(-eta); K if past the row."""
    cdef double gap = -log(bnp_rng_uniform_pos(g)) / eta
    return k + 1 + <int64_t>gap if gap < K - k - 1 else K


cdef inline double _poisson_positive(bnp_bitgen_t *g, double lam) noexcept nogil:
    """A Poisson(lam) draw conditioned on being positive: inversion from 1, or
    ``_poisson`` redrawn while 0 above POISSON_NORMAL."""
    cdef double n = 0.0
    if lam >= POISSON_NORMAL:
        while n == 0.0:
            n = _poisson(g, lam)
        return n
    return _poisson_inversion(g, lam, 1.0, lam * exp(-lam) / -expm1(-lam))


cdef inline int64_t _next_count(const int32_t *nrow, int64_t k, int64_t K) noexcept nogil:
    """The first column >= k with counts, K if none."""
    while k < K and nrow[k] == 0:
        k += 1
    return k


cdef int64_t _urn_room(const int32_t *nrow, int64_t K, double eta, uint64_t key, uint64_t stream,
                       int64_t w) noexcept nogil:
    """An upper bound of the positive entries of row w (``_urn_row``): its
    columns with counts and the zero columns its gaps land on."""
    cdef bnp_stream_t gaps
    bnp_stream_init(&gaps, key, stream, 2 * <uint64_t>w + 1)
    cdef int64_t k, room = 0, hit = _next_hit(&gaps.bitgen, eta, -1, K)
    for k in range(K):
        room += nrow[k] > 0
    while hit < K:
        room += nrow[hit] == 0
        hit = _next_hit(&gaps.bitgen, eta, hit, K)
    return room


cdef int64_t _urn_row(const int32_t *nrow, int64_t K, double eta, uint64_t key, uint64_t stream, int64_t w,
                      int32_t *topics, double *vals, double *total) noexcept nogil:
    """Row w of the urn, x_k ~ Poisson(eta + n_wk) for k < K: writes its positive
    entries (k, x_k) into topics/vals, adds x_k to total[k], and returns their
    number. A column with counts draws Poisson(eta + n_wk); the zero columns
    are Poisson(eta), positive with probability 1 - exp(-eta), so only their
    positive entries are drawn, at geometric gaps over the row (a gap that
    lands on a column with counts is passed over: that column's draw already
    holds the eta). The gaps come from stream (key, stream, 2w + 1), the
    values from (key, stream, 2w), the columns in increasing order: the cost
    is the scan for counts plus a draw per entry."""
    cdef bnp_stream_t values, gaps
    bnp_stream_init(&values, key, stream, 2 * <uint64_t>w)
    bnp_stream_init(&gaps, key, stream, 2 * <uint64_t>w + 1)
    cdef bnp_bitgen_t *g = &values.bitgen
    cdef int64_t m = 0, at, k = _next_count(nrow, 0, K), hit = _next_hit(&gaps.bitgen, eta, -1, K)
    cdef double x
    while k < K or hit < K:
        if k < hit:                                 # a column with counts
            at, x = k, _poisson(g, eta + nrow[k])
            k = _next_count(nrow, k + 1, K)
        elif hit < k:                               # a zero column drawn positive
            at, x = hit, _poisson_positive(g, eta)
            hit = _next_hit(&gaps.bitgen, eta, hit, K)
        else:                                       # the gap landed on column k: passed over
            hit = _next_hit(&gaps.bitgen, eta, hit, K)
            continue
        if x > 0.0:
            topics[m] = <int32_t>at
            vals[m] = x
            total[at] += x
            m += 1
    return m


def sample_phi_urn(const int32_t[:, ::1] nwk, const double[::1] eta,    # IN counts (W, >= K), prior (W,)
                   uint64_t key, uint64_t stream,                         # IN stream key, stream number
                   int n_threads=1, bint normalize=True, n_topics=None):
    """Draw the topics by the Poisson Polya urn of Terenin, Magnusson, Jonsson &
    Draper, "Polya urn latent Dirichlet allocation: a doubly sparse massively
    parallel sampler" (IEEE TPAMI 41(7), 2019): ``x_wk ~ Poisson(eta_w + n_wk)``
    and ``phi[w, k] = x_wk / sum_v x_vk``. The draws are independent, so word w
    draws its row from its own streams (key, stream, 2w) and (key, stream,
    2w + 1) (``_urn_row``), words in parallel, in O(entries with counts +
    K eta_w); the column sums are sums of integers, exact in any order.

    Returns the positive entries, word-major, as CSR ``(rows (W + 1,) int64,
    topics int32 increasing within a row, phi float64)``; ``normalize=False``
    leaves the draws x_wk unnormalised (for tests). A topic whose draws are all
    0 has no entries (no token can take it this sweep). ``n_topics``: only the
    first K columns of ``nwk`` (by default all). Equivalent NumPy, up to
    the streams::

        x = rng.poisson(eta[:, None] + nwk)      # (W, K)
        phi = x / x.sum(axis=0)                   # 0/0 columns: no entries
    """
    cdef int64_t W = nwk.shape[0], K = nwk.shape[1] if n_topics is None else n_topics, w, i, nnz
    if eta.shape[0] != W:
        raise ValueError(f"eta must have {W} entries")
    if not 0 <= K <= nwk.shape[1]:
        raise ValueError(f"n_topics={K} is not within the {nwk.shape[1]} columns of nwk")
    if n_threads < 1:
        raise ValueError(f"n_threads must be positive, got {n_threads}")
    rows = np.zeros(W + 1, dtype=np.int64)
    if W == 0 or K == 0:
        return rows, np.empty(0, dtype=np.int32), np.empty(0)
    room = np.zeros(W + 1, dtype=np.int64)          # row w writes from room[w], rows[w + 1] entries
    totals = np.zeros((n_threads, K + PAD))
    cdef int64_t[::1] rv = rows, mv = room
    cdef double[:, ::1] sv = totals
    cdef double[::1] scale_v
    with nogil:
        for w in prange(W, num_threads=n_threads, schedule="dynamic", chunksize=16):
            mv[w + 1] = _urn_room(&nwk[w, 0], K, eta[w], key, stream, w)
    np.cumsum(room, out=room)
    topics, vals = np.empty(max(room[W], 1), dtype=np.int32), np.empty(max(room[W], 1))
    cdef int32_t[::1] tv = topics
    cdef double[::1] xv = vals
    cdef int32_t *tp = &tv[0]                       # pointers: a row may start at the end
    cdef double *xp = &xv[0]
    with nogil:
        for w in prange(W, num_threads=n_threads, schedule="dynamic", chunksize=16):
            rv[w + 1] = _urn_row(&nwk[w, 0], K, eta[w], key, stream, w, tp + mv[w], xp + mv[w],
                                 &sv[threadid(), 0])
        for w in range(W):                          # close the gaps, rows in order (entries only move left)
            memmove(tp + rv[w], tp + mv[w], rv[w + 1] * sizeof(int32_t))
            memmove(xp + rv[w], xp + mv[w], rv[w + 1] * sizeof(double))
            rv[w + 1] += rv[w]
    nnz = rv[W]
    if normalize:
        total = totals[:, :K].sum(axis=0)           # integers: exact in any order
        scale_v = 1.0 / np.where(total > 0, total, 1.0)
        with nogil:
            for i in prange(nnz, num_threads=n_threads, schedule="static"):
                xv[i] *= scale_v[tv[i]]
    return rows, topics[:nnz], vals[:nnz]


# ---------------------------------------------------------------------------
# alias tables of alpha_k phi[w, k]
# ---------------------------------------------------------------------------

cdef double _alias_row(const double *phi, const double *alpha, int64_t K, double *prob, int32_t *alias,
                       int32_t *small, int32_t *large) noexcept nogil:
    """Walker's alias table (Vose's stable construction) of the weights
    alpha_k phi_k into prob/alias; returns their sum. small/large: K int32 each."""
    cdef int64_t k, ns = 0, nl = 0
    cdef int32_t s, l
    cdef double total = 0.0, scale
    for k in range(K):
        prob[k] = alpha[k] * phi[k]
        total += prob[k]
    if not total > 0.0:                 # no weight: mass 0, a table never drawn from
        return total
    scale = K / total
    for k in range(K):
        prob[k] *= scale
        if prob[k] < 1.0:
            small[ns] = <int32_t>k
            ns += 1
        else:
            large[nl] = <int32_t>k
            nl += 1
    while ns > 0 and nl > 0:
        ns -= 1
        s = small[ns]
        l = large[nl - 1]
        alias[s] = l                    # prob[s] stays: the share of s in its column
        prob[l] = (prob[l] + prob[s]) - 1.0
        if prob[l] < 1.0:
            nl -= 1
            small[ns] = l
            ns += 1
    while nl > 0:                       # the rest are exactly 1 up to rounding
        nl -= 1
        prob[large[nl]] = 1.0
        alias[large[nl]] = large[nl]
    while ns > 0:
        ns -= 1
        prob[small[ns]] = 1.0
        alias[small[ns]] = small[ns]
    return total


def build_alias(const double[:, ::1] phi, const double[::1] alpha,                    # IN (W, K), (K,)
                double[:, ::1] prob, int32_t[:, ::1] alias, double[::1] mass,       # OUT (W, K), (W, K), (W,)
                int n_threads=1, n_topics=None):
    """Per word w, an alias table of the weights ``alpha_k phi[w, k]`` and their
    sum ``mass[w]``, words in parallel. Drawing column ``i = floor(K u)`` and
    then ``i`` if ``frac(K u) < prob[w, i]`` else ``alias[w, i]`` gives topic k
    with probability ``alpha_k phi[w, k] / mass[w]``. Equivalent NumPy of that
    distribution::

        p = np.zeros(K); np.add.at(p, alias[w], 1 - prob[w]); p += prob[w]
        p / K == alpha * phi[w] / mass[w]

    ``n_topics``: only the first columns (topics) of the arrays, K <= their width
    (``alpha`` needs K entries); by default all. A word whose weights are all
    zero gets ``mass[w] = 0`` and an unusable table.
    """
    cdef int64_t W = phi.shape[0], C = phi.shape[1], K = C if n_topics is None else n_topics, w
    if not 0 <= K <= C or alpha.shape[0] < K or prob.shape[0] != W or prob.shape[1] != C \
            or alias.shape[0] != W or alias.shape[1] != C or mass.shape[0] != W \
            or (n_topics is None and alpha.shape[0] != K):
        raise ValueError(f"alpha must have {K} entries, prob and alias shape ({W}, {C}), mass {W} entries")
    if n_threads < 1:
        raise ValueError(f"n_threads must be positive, got {n_threads}")
    if W == 0 or K == 0:
        return
    stacks = np.empty((n_threads, 2 * K + PAD), dtype=np.int32)
    cdef int32_t[:, ::1] sv = stacks
    with nogil:
        for w in prange(W, num_threads=n_threads, schedule="static"):
            mass[w] = _alias_row(&phi[w, 0], &alpha[0], K, &prob[w, 0], &alias[w, 0],
                                 &sv[threadid(), 0], &sv[threadid(), K])


# ---------------------------------------------------------------------------
# z | Phi, theta collapsed
# ---------------------------------------------------------------------------

cdef struct ZArgs:
    int64_t K
    bnp_csr_t docs
    const int64_t *tok_ptr
    const int64_t *rows      # NULL: phi, prob, alias dense (W, K); else CSR rows of ...
    const int32_t *topics    # ... these topics, phi at the same positions, and alpha (K,)
    const double *phi
    const double *prob
    const int32_t *alias
    const double *mass
    const double *alpha
    int32_t *nwk
    int64_t stride       # of the per-thread rows below: K + PAD
    double *cum          # n_threads x stride: cumulative weights of the document bucket
    int32_t *nd          # n_threads x stride: the document's counts n_jk (0 between documents)
    int32_t *dlist       # n_threads x stride: topics with n_jk > 0
    int32_t *dpos        # n_threads x stride: position in dlist, -1 if absent (restored after each document)
    int64_t *nk_part     # n_threads x stride: the thread's changes of the topic totals
    uint64_t key, sweep, first_doc


cdef void _z_doc(const ZArgs *a, label_t *z, int64_t j, int tid) noexcept nogil:
    """Resample the topics of document j from stream (key, 2 sweep, first_doc + j).

    Dense Phi: p(k) ∝ phi_wk (n_jk + alpha_k) = phi_wk n_jk + alpha_k phi_wk,
    the first bucket a sum over the document's topics (counted from its
    labels, listed), the second the word's alias table (the sparse
    decomposition of Magnusson et al. 2018). Sparse Phi: one sum of
    phi_wk (n_jk + alpha_k) over the word's entries, which no topic outside
    them can take. A token that changes topic moves its topic-word count at
    once; a token whose word has weight 0 in every topic (possible only for a
    sparse Phi) keeps its topic."""
    cdef bint listed = a.rows == NULL
    cdef int64_t K = a.K, p, c, n = 0, i, zi = a.tok_ptr[j], b = 0, m = 0
    cdef int32_t w, t, s
    cdef int32_t *nd = a.nd + tid * a.stride
    cdef int32_t *dlist = a.dlist + tid * a.stride
    cdef int32_t *dpos = a.dpos + tid * a.stride
    cdef int64_t *nk_part = a.nk_part + tid * a.stride
    cdef double *cum = a.cum + tid * a.stride
    cdef double q, u
    cdef bnp_stream_t st
    bnp_stream_init(&st, a.key, 2 * a.sweep, a.first_doc + <uint64_t>j)
    if listed:
        n = _doc_open(z + zi, a.tok_ptr[j + 1] - zi, nd, dlist, dpos)
    else:
        for i in range(zi, a.tok_ptr[j + 1]):
            nd[z[i]] += 1
    for p in range(a.docs.indptr[j], a.docs.indptr[j + 1]):
        w = a.docs.indices[p]
        if a.rows != NULL:
            b = a.rows[w]
            m = a.rows[w + 1] - b
        for c in range(a.docs.counts[p]):
            s = <int32_t>z[zi]
            nd[s] -= 1
            if listed:
                if nd[s] == 0:               # s leaves the document's list
                    n = _list_remove(s, dlist, dpos, n)
                q = _bucket(a.phi + w * K, nd, dlist, n, cum)
                u = bnp_rng_uniform(&st.bitgen) * (q + a.mass[w])
                if u < q:
                    t = _bucket_pick(cum, dlist, n, u)
                else:
                    t = _alias_pick(a.prob + w * K, a.alias + w * K, K, bnp_rng_uniform(&st.bitgen))
                n = _list_add(t, dlist, dpos, n)
            else:
                q = _bucket_entries(a.phi + b, a.topics + b, m, nd, a.alpha, cum)
                t = _bucket_pick(cum, a.topics + b, m, bnp_rng_uniform(&st.bitgen) * q) if q > 0.0 else s
            nd[t] += 1
            z[zi] = <label_t>t
            _move_token(a.nwk + w * K, nk_part, s, t)
            zi += 1
    if listed:
        _doc_close(nd, dlist, dpos, n)
    else:
        for i in range(a.tok_ptr[j], zi):
            nd[z[i]] = 0


def z_scratch(int n_threads, int64_t K):
    """Per-thread rows of K topics (padded) for a z-step: the cumulative weights
    of the document bucket, the document's counts (0), topic list and positions
    in it (-1), and the thread's changes of the topic totals (0)."""
    shape = (n_threads, K + PAD)
    return (np.empty(shape), np.zeros(shape, dtype=np.int32), np.empty(shape, dtype=np.int32),
            np.full(shape, -1, dtype=np.int32), np.zeros(shape, dtype=np.int64))


def check_labels(z, int64_t K):
    """Raise unless the labels' dtype (uint16 or int32) holds topics 0..K-1."""
    if z.dtype == np.uint16 and K > 65536:
        raise ValueError(f"uint16 labels hold at most 65536 topics, got {K}")


def z_step(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,   # IN corpus
           const int64_t[::1] tok_ptr,                                                         # IN (D + 1,)
           const double[:, ::1] phi, const double[:, ::1] prob, const int32_t[:, ::1] alias,   # IN Phi, tables
           const double[::1] mass, uint64_t key, uint64_t sweep,                               # IN
           label_t[::1] z,                                                                     # IN/OUT labels
           int32_t[:, ::1] nwk, int64_t[::1] nk,                                               # IN/OUT counts
           int n_threads=1, uint64_t first_doc=0):
    """Resample every token's topic given Phi with theta integrated out
    (Magnusson et al. 2018), documents in parallel, and move the topic-word
    counts of the tokens that change. ``z``: uint16 or int32 labels. Each
    document's counts n_jk are rebuilt from its labels in a per-thread row, so
    nothing per document is kept; ``nwk`` takes atomic integer adds and ``nk``
    the sum of per-thread changes: the result does not depend on the thread
    count. ``first_doc``: the corpus is documents ``first_doc, ...`` of a
    larger one (a block, or a partition of ``bnpcore.distributed``), whose
    streams document j uses. Equivalent NumPy for document j, then token i of
    it, word w, in order::

        ndk = np.bincount(z[tok_ptr[j]:tok_ptr[j + 1]], minlength=K)
        ndk[z[i]] -= 1
        p = phi[w] * (ndk + alpha);  z[i] = rng.choice(K, p=p / p.sum())
        ndk[z[i]] += 1

    with ``alpha`` the prior behind ``prob``/``alias``/``mass`` (``build_alias``),
    and ``nwk``, ``nk`` moved with each change.
    """
    cdef int64_t K = nwk.shape[1], W = nwk.shape[0]
    if phi.shape[0] != W or phi.shape[1] != K or prob.shape[0] != W or prob.shape[1] != K \
            or alias.shape[0] != W or alias.shape[1] != K or mass.shape[0] != W:
        raise ValueError("phi, prob, alias, mass and nwk disagree on the number of topics or words")
    cdef ZArgs a
    a.rows, a.topics, a.phi, a.prob, a.alias, a.mass, a.alpha = NULL, NULL, NULL, NULL, NULL, NULL, NULL
    if W and K:
        a.phi, a.prob, a.alias, a.mass = &phi[0, 0], &prob[0, 0], &alias[0, 0], &mass[0]
    _z_run(&a, indptr, indices, counts, tok_ptr, key, sweep, z, nwk, nk, n_threads, first_doc)


def z_step_rows(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,  # IN corpus
                const int64_t[::1] tok_ptr,                                                        # IN (D + 1,)
                const int64_t[::1] rows, const int32_t[::1] topics, const double[::1] phi,         # IN CSR Phi
                const double[::1] alpha, uint64_t key, uint64_t sweep,                             # IN (K,)
                label_t[::1] z,                                                                    # IN/OUT labels
                int32_t[:, ::1] nwk, int64_t[::1] nk,                                              # IN/OUT counts
                int n_threads=1, uint64_t first_doc=0):
    """``z_step`` with the sparse word-major Phi of ``sample_phi_urn``: a token
    of word w draws from ``phi[i] (n_jk + alpha_k)``, k = ``topics[i]``, over
    the word's entries i (the document's counts read from a dense per-thread
    row), so it costs the number of topics in which its word has weight, not
    the document's topics, and needs no alias table (no topic outside the
    entries has weight). A token whose word has no entry keeps its topic (the
    urn gave its word weight 0 in every topic). Equivalent NumPy: ``z_step``
    with ``phi_dense[w, topics[rows[w]:rows[w + 1]]] = phi[rows[w]:rows[w + 1]]``
    (0 elsewhere).
    """
    cdef int64_t W = rows.shape[0] - 1, nnz = topics.shape[0]
    if W != nwk.shape[0] or rows[W] != nnz or phi.shape[0] != nnz:
        raise ValueError(f"rows must have {nwk.shape[0] + 1} entries, ending at the {nnz} entries of topics "
                         "and phi")
    if alpha.shape[0] != nwk.shape[1]:
        raise ValueError(f"alpha must have {nwk.shape[1]} entries, one per topic")
    if nnz and (np.asarray(topics).max() >= nwk.shape[1] or np.asarray(topics).min() < 0):
        raise ValueError(f"a topic of the entries is outside the {nwk.shape[1]} columns of nwk")
    cdef ZArgs a
    a.rows, a.alpha = &rows[0], &alpha[0]
    a.topics, a.phi, a.prob, a.alias, a.mass = NULL, NULL, NULL, NULL, NULL
    if nnz:
        a.topics, a.phi = &topics[0], &phi[0]
    _z_run(&a, indptr, indices, counts, tok_ptr, key, sweep, z, nwk, nk, n_threads, first_doc)


cdef _z_run(ZArgs *a, const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,
            const int64_t[::1] tok_ptr, uint64_t key, uint64_t sweep,
            label_t[::1] z, int32_t[:, ::1] nwk, int64_t[::1] nk, int n_threads, uint64_t first_doc):
    """The checks and the parallel loop shared by ``z_step`` and ``z_step_rows``
    (``a`` holds Phi and the tables)."""
    cdef int64_t D = indptr.shape[0] - 1, K = nwk.shape[1], j
    if tok_ptr.shape[0] != D + 1 or z.shape[0] != tok_ptr[D]:
        raise ValueError("tok_ptr and z do not match the corpus")
    if nk.shape[0] != K:
        raise ValueError("nwk and nk disagree on the number of topics")
    if n_threads < 1:
        raise ValueError(f"n_threads must be positive, got {n_threads}")
    check_labels(np.asarray(z), K)
    if z.shape[0] == 0:
        return
    cum, nds, lists, pos, parts = z_scratch(n_threads, K)
    cdef double[:, ::1] cv = cum
    cdef int32_t[:, ::1] nv = nds, lv = lists, pv = pos
    cdef int64_t[:, ::1] kv = parts
    a.K, a.stride = K, K + PAD
    a.docs = csr_view(indptr, indices, counts, nwk.shape[0])
    a.tok_ptr = &tok_ptr[0]
    a.nwk = &nwk[0, 0]
    a.cum, a.nd, a.dlist, a.dpos, a.nk_part = &cv[0, 0], &nv[0, 0], &lv[0, 0], &pv[0, 0], &kv[0, 0]
    a.key, a.sweep, a.first_doc = key, sweep, first_doc
    with nogil:
        for j in prange(D, num_threads=n_threads, schedule="dynamic", chunksize=8):
            _z_doc(a, &z[0], j, threadid())
    np.asarray(nk)[:] += parts[:, :K].sum(axis=0)


# ---------------------------------------------------------------------------
# counts from the labels
# ---------------------------------------------------------------------------

def count_topics(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,   # IN corpus
                 const label_t[::1] z,                                                              # IN labels
                 int32_t[:, ::1] nwk, int64_t[::1] nk):                                             # IN/OUT
    """Add the topic-word counts of the labels ``z`` (one per token, CSR order).
    Equivalent NumPy::

        np.add.at(nwk, (np.repeat(indices, counts), z), 1);  nk += np.bincount(z, minlength=len(nk))
    """
    cdef int64_t C = nwk.shape[1], p, r, zi = 0
    cdef int32_t t
    if z.shape[0] != np.asarray(counts).sum(dtype=np.int64) or nk.shape[0] != C:
        raise ValueError("z must hold one label per token and nk one entry per column of nwk")
    if z.shape[0] and (np.asarray(z).max() >= C or np.asarray(indices).max() >= nwk.shape[0]):
        raise ValueError("a label or word id exceeds the columns or rows of nwk")
    with nogil:
        for p in range(indices.shape[0]):
            for r in range(counts[p]):
                t = <int32_t>z[zi]
                nwk[indices[p], t] += 1
                nk[t] += 1
                zi += 1


def doc_counts(const int64_t[::1] tok_ptr, const label_t[::1] z,    # IN (D + 1,), labels
               int32_t[:, ::1] ndk,                                 # OUT (D, C), C > every label
               int n_threads=1):
    """The document-topic counts of the labels, documents in parallel.
    Equivalent NumPy: ``ndk[j] = np.bincount(z[tok_ptr[j]:tok_ptr[j + 1]], minlength=C)``."""
    cdef int64_t D = tok_ptr.shape[0] - 1, C = ndk.shape[1], j, i
    if ndk.shape[0] != D or z.shape[0] != tok_ptr[D]:
        raise ValueError("ndk, tok_ptr and z do not match")
    if z.shape[0] and np.asarray(z).max() >= C:
        raise ValueError(f"a label exceeds the {C} columns of ndk")
    np.asarray(ndk)[:] = 0
    with nogil:
        for j in prange(D, num_threads=n_threads, schedule="static"):
            for i in range(tok_ptr[j], tok_ptr[j + 1]):
                ndk[j, z[i]] += 1
