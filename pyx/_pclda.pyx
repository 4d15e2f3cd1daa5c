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

Every random draw comes from a keyed stream (``bnp_stream_t``): topic k of sweep
t from stream (key, 2t + 1, k), document j from stream (key, 2t, j). The draws
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
from libc.math cimport exp, log, pow, INFINITY
from libc.stdint cimport int32_t, int64_t, uint16_t, uint64_t

from bnpcore.kernels.parallel cimport PAD
from bnpcore.kernels.rng cimport (bnp_bitgen_t, bnp_rng_log_gamma, bnp_rng_uniform, bnp_rng_uniform_pos,
                                  bnp_stream_init, bnp_stream_t)

cnp.import_array()

# Topics per task of sample_phi: a task owns 8 adjacent columns of the
# word-major arrays (about one cache line of doubles per word) and keeps their
# 8 streams open, so that its passes over the words touch whole lines.
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
    int64_t W, K
    const int32_t *nwk
    const double *eta
    double *phi
    double *work         # n_threads x W x PHI_BLOCK
    uint64_t key, sweep


cdef void _phi_block(const PhiArgs *a, int64_t b, int tid) noexcept nogil:
    """Topics b*8 .. b*8+7: log-gamma draws (one stream per topic, words in order),
    then exp(x - max) and the normalisation, so that eta like 1e-6 (log-gamma
    draws near -1e6) give a proper distribution instead of 0/0. The first two
    passes run in the thread's own buffer; only the last writes the shared
    phi, whose 8-column blocks need not be cache-line aligned."""
    cdef bnp_stream_t st[PHI_BLOCK]
    cdef double mx[PHI_BLOCK]
    cdef double tot[PHI_BLOCK]
    cdef int64_t K = a.K, k0 = b * PHI_BLOCK, nb = min(PHI_BLOCK, a.K - b * PHI_BLOCK), w, i
    cdef double x
    cdef double *buf = a.work + tid * a.W * PHI_BLOCK
    cdef double *row
    cdef const int32_t *nrow
    for i in range(nb):
        bnp_stream_init(&st[i], a.key, 2 * a.sweep + 1, <uint64_t>(k0 + i))
        mx[i] = -INFINITY
        tot[i] = 0.0
    for w in range(a.W):
        row = buf + w * PHI_BLOCK
        nrow = a.nwk + w * K + k0
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
        row = a.phi + w * K + k0
        for i in range(nb):
            row[i] = buf[w * PHI_BLOCK + i] * tot[i]


def sample_phi(const int32_t[:, ::1] nwk, const double[::1] eta,   # IN counts (W, K), prior (W,)
               uint64_t key, uint64_t sweep,                         # IN stream key, sweep number
               double[:, ::1] phi,                                   # OUT topics, word-major (W, K)
               int n_threads=1):
    """Draw every topic from its full conditional given the topic-word counts.

    Topic k draws W log-gamma variates from stream (key, 2 sweep + 1, k), words
    in order, and normalises them. Equivalent NumPy, up to the streams::

        g = rng.gamma(eta[:, None] + nwk)        # (W, K)
        phi[:] = g / g.sum(axis=0)               # column k ~ Dirichlet(eta + nwk[:, k])
    """
    cdef int64_t W = nwk.shape[0], K = nwk.shape[1], b
    if eta.shape[0] != W or phi.shape[0] != W or phi.shape[1] != K:
        raise ValueError(f"eta must have {W} entries and phi shape ({W}, {K})")
    if n_threads < 1:
        raise ValueError(f"n_threads must be positive, got {n_threads}")
    if W == 0 or K == 0:
        return
    work = np.empty((n_threads, W, PHI_BLOCK))
    cdef double[:, :, ::1] wv = work
    cdef PhiArgs a
    cdef PhiArgs *ap = &a
    a.W, a.K = W, K
    a.nwk, a.eta, a.phi, a.work = &nwk[0, 0], &eta[0], &phi[0, 0], &wv[0, 0, 0]
    a.key, a.sweep = key, sweep
    with nogil:
        for b in prange((K + PHI_BLOCK - 1) // PHI_BLOCK, num_threads=n_threads, schedule="static"):
            _phi_block(ap, b, threadid())


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
    const int64_t *indptr
    const int32_t *indices
    const int32_t *counts
    const int64_t *tok_ptr
    const double *phi
    const double *prob
    const int32_t *alias
    const double *mass
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

    p(k) ∝ phi_wk (n_jk + alpha_k) = phi_wk n_jk + alpha_k phi_wk: the first
    bucket sums over the document's topics only (counted from its labels), the
    second is the word's alias table (the sparse decomposition of Magnusson et
    al. 2018). A token that changes topic moves its topic-word count at once."""
    cdef int64_t K = a.K, p, c, n, zi = a.tok_ptr[j]
    cdef int32_t w, t, s
    cdef int32_t *nd = a.nd + tid * a.stride
    cdef int32_t *dlist = a.dlist + tid * a.stride
    cdef int32_t *dpos = a.dpos + tid * a.stride
    cdef int64_t *nk_part = a.nk_part + tid * a.stride
    cdef double *cum = a.cum + tid * a.stride
    cdef const double *prow
    cdef double q, u
    cdef bnp_stream_t st
    bnp_stream_init(&st, a.key, 2 * a.sweep, a.first_doc + <uint64_t>j)
    n = _doc_open(z + zi, a.tok_ptr[j + 1] - zi, nd, dlist, dpos)
    for p in range(a.indptr[j], a.indptr[j + 1]):
        w = a.indices[p]
        prow = a.phi + w * K
        for c in range(a.counts[p]):
            s = <int32_t>z[zi]
            nd[s] -= 1
            if nd[s] == 0:                   # s leaves the document's list
                n = _list_remove(s, dlist, dpos, n)
            q = _bucket(prow, nd, dlist, n, cum)
            u = bnp_rng_uniform(&st.bitgen) * (q + a.mass[w])
            if u < q:
                t = _bucket_pick(cum, dlist, n, u)
            else:
                t = _alias_pick(a.prob + w * K, a.alias + w * K, K, bnp_rng_uniform(&st.bitgen))
            n = _list_add(t, dlist, dpos, n)
            nd[t] += 1
            z[zi] = <label_t>t
            _move_token(a.nwk + w * K, nk_part, s, t)
            zi += 1
    _doc_close(nd, dlist, dpos, n)


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
    cdef int64_t D = indptr.shape[0] - 1, K = nwk.shape[1], W = phi.shape[0], j
    if tok_ptr.shape[0] != D + 1 or z.shape[0] != tok_ptr[D]:
        raise ValueError("tok_ptr and z do not match the corpus")
    if phi.shape[1] != K or prob.shape[0] != W or prob.shape[1] != K or alias.shape[0] != W \
            or alias.shape[1] != K or mass.shape[0] != W or nwk.shape[0] != W or nk.shape[0] != K:
        raise ValueError("phi, prob, alias, mass, nwk and nk disagree on the number of topics or words")
    if n_threads < 1:
        raise ValueError(f"n_threads must be positive, got {n_threads}")
    check_labels(np.asarray(z), K)
    if z.shape[0] == 0:
        return
    cum, nds, lists, pos, parts = z_scratch(n_threads, K)
    cdef double[:, ::1] cv = cum
    cdef int32_t[:, ::1] nv = nds, lv = lists, pv = pos
    cdef int64_t[:, ::1] kv = parts
    cdef ZArgs a
    cdef ZArgs *ap = &a
    a.K, a.stride = K, K + PAD
    a.indptr, a.indices, a.counts, a.tok_ptr = &indptr[0], &indices[0], &counts[0], &tok_ptr[0]
    a.phi, a.prob, a.alias, a.mass, a.nwk = &phi[0, 0], &prob[0, 0], &alias[0, 0], &mass[0], &nwk[0, 0]
    a.cum, a.nd, a.dlist, a.dpos, a.nk_part = &cv[0, 0], &nv[0, 0], &lv[0, 0], &pv[0, 0], &kv[0, 0]
    a.key, a.sweep, a.first_doc = key, sweep, first_doc
    with nogil:
        for j in prange(D, num_threads=n_threads, schedule="dynamic", chunksize=8):
            _z_doc(ap, &z[0], j, threadid())
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
