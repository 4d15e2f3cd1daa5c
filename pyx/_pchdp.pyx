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
   then the topic-word counts from the changes.

Every random draw comes from a keyed stream (``bnp_stream_t``) named by
(key, sweep, document or topic), so the state after a sweep is bit-identical
for any thread count. Layouts as in ``bnpcore.kernels._pclda``: ``ndk`` (D, C),
``nwk``, ``phi``, ``prob`` (W, C) and ``alias`` (W, C) word-major, C the
capacity of topic slots; only the first columns named by each call are used.
"""
import numpy as np
cimport numpy as cnp
from cython.parallel cimport prange, threadid
from libc.math cimport exp, floor, sqrt, INFINITY
from libc.stdint cimport int32_t, int64_t, uint64_t

from bnpcore.kernels._pclda cimport (_alias_pick, _bucket, _bucket_pick, _list_add, _list_close, _list_open,
                                    _list_remove, _log_gamma_small, _move_counts)
from bnpcore.kernels._pclda import z_scratch
from bnpcore.kernels.rng cimport (bnp_bitgen_t, bnp_rng_log_gamma, bnp_rng_normal, bnp_rng_uniform,
                                  bnp_stream_init, bnp_stream_t)

cnp.import_array()

cdef enum:
    # padding of per-thread scratch rows (no false sharing between threads)
    _PAD = 16

# Above this mean a Poisson draw of the Polya urn is normal, rounded (the
# approximation is already the urn's; it keeps a draw O(1) for large counts).
cdef double _POISSON_NORMAL = 30.0


# ---------------------------------------------------------------------------
# table counts
# ---------------------------------------------------------------------------

cdef void _tables_doc(const int32_t *row, const double *ab, int64_t K, uint64_t key, uint64_t stream,
                      int64_t j, int64_t *l_k) noexcept nogil:
    """Add document j's table counts to l_k (stream (key, stream, j))."""
    cdef bnp_stream_t st
    cdef int64_t k, i
    bnp_stream_init(&st, key, stream, <uint64_t>j)
    for k in range(K):
        for i in range(row[k]):
            if bnp_rng_uniform(&st.bitgen) * (ab[k] + i) < ab[k]:
                l_k[k] += 1


def sample_tables(const int32_t[:, ::1] ndk, const double[::1] ab, int64_t K,   # IN counts, alpha Psi_k, topics
                  uint64_t key, uint64_t stream,                                 # IN stream (key, stream, j)
                  int64_t[::1] l_k,                                              # OUT (K,) table counts
                  int n_threads=1):
    """Table counts given the topics and the weights: document j draws from
    stream (key, stream, j), for each topic k < K with n_jk > 0,
    ``l_jk = sum_{i < n_jk} [u_i < ab_k / (ab_k + i)]`` (the Antoniak
    distribution of the number of tables of n_jk customers in a Chinese
    restaurant with concentration ab_k); ``l_k = sum_j l_jk``. Equivalent NumPy::

        for j, k with ndk[j, k] > 0:
            l_k[k] += (rng.random(ndk[j, k]) * (ab[k] + np.arange(ndk[j, k])) < ab[k]).sum()
    """
    cdef int64_t D = ndk.shape[0], C = ndk.shape[1], j, T = n_threads
    if K > C or ab.shape[0] < K or l_k.shape[0] < K:
        raise ValueError(f"K = {K} exceeds the columns of ndk, ab or l_k")
    if n_threads < 1:
        raise ValueError(f"n_threads must be positive, got {n_threads}")
    part = np.zeros((T, K + _PAD), dtype=np.int64)      # per-thread sums: integer, order-free
    cdef int64_t[:, ::1] pv = part
    with nogil:
        for j in prange(D, num_threads=n_threads, schedule="dynamic", chunksize=16):
            _tables_doc(&ndk[j, 0], &ab[0], K, key, stream, j, &pv[threadid(), 0])
    np.asarray(l_k)[:K] = part[:, :K].sum(axis=0)


# ---------------------------------------------------------------------------
# Phi | z
# ---------------------------------------------------------------------------

cdef inline double _poisson(bnp_bitgen_t *g, double lam) noexcept nogil:
    """A Poisson(lam) draw: inversion below _POISSON_NORMAL, else the normal
    approximation rounded (never negative)."""
    cdef double u, p, c
    cdef double n = 0.0
    if lam >= _POISSON_NORMAL:
        n = floor(lam + sqrt(lam) * bnp_rng_normal(g) + 0.5)
        return n if n > 0.0 else 0.0
    u = bnp_rng_uniform(g)
    p = exp(-lam)
    c = p
    while u >= c and p > 0.0:
        n += 1.0
        p *= lam / n
        c += p
    return n


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
    work = np.empty((n_threads, W + _PAD))
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
    const int32_t *cand          # per token: a tail topic drawn with probability Psi_c / R
    int32_t *z
    int32_t *z_prev
    int32_t *ndk
    int64_t stride               # of the per-thread rows below: C + _PAD
    double *cum
    int32_t *dlist
    int32_t *dpos
    uint64_t key, stream


cdef void _z_doc(const ZArgs *a, int64_t j, int tid) noexcept nogil:
    """Resample the topics of document j from stream (key, stream, j).

    p(z_i = k) ∝ phi_kw (n_jk + alpha Psi_k): the document bucket sums phi_kw n_jk
    over the document's topics, the alias table of word w holds alpha Psi_k phi_kw
    over the active topics k < K, and the flag topic carries the tail: with the
    token's candidate c (a tail topic drawn with probability Psi_c / R), weight
    alpha R phi_cw. Choosing the flag sets z_i = c. (A token's current topic is
    always active: K is one past the highest topic with tokens when the sweep
    starts, and every token is visited once.)"""
    cdef int64_t C = a.C, p, r, n, zi = a.tok_ptr[j]
    cdef int32_t w, t, c
    cdef int32_t *nd = a.ndk + j * C
    cdef int32_t *dlist = a.dlist + tid * a.stride
    cdef int32_t *dpos = a.dpos + tid * a.stride
    cdef double *cum = a.cum + tid * a.stride
    cdef const double *prow
    cdef double q, u, f
    cdef bnp_stream_t st
    bnp_stream_init(&st, a.key, a.stream, <uint64_t>j)
    n = _list_open(nd, C, dlist, dpos)
    for p in range(a.indptr[j], a.indptr[j + 1]):
        w = a.indices[p]
        prow = a.phi + w * C
        for r in range(a.counts[p]):
            t = a.z[zi]
            a.z_prev[zi] = t
            nd[t] -= 1
            if nd[t] == 0:
                n = _list_remove(t, dlist, dpos, n)
            c = a.cand[zi]
            q = _bucket(prow, nd, dlist, n, cum)
            f = a.tail * prow[c]
            u = bnp_rng_uniform(&st.bitgen) * (q + a.mass[w] + f)
            if u < q:
                t = _bucket_pick(cum, dlist, n, u)
            elif u < q + a.mass[w]:
                t = _alias_pick(a.prob + w * C, a.alias + w * C, a.K, bnp_rng_uniform(&st.bitgen))
            else:
                t = c
            n = _list_add(t, dlist, dpos, n)
            nd[t] += 1
            a.z[zi] = t
            zi += 1
    _list_close(dlist, dpos, n)


def z_step(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,   # IN corpus
           const int64_t[::1] tok_ptr, int64_t K,                                              # IN (D + 1,), active
           const double[:, ::1] phi, const double[:, ::1] prob, const int32_t[:, ::1] alias,   # IN Phi, tables
           const double[::1] mass, const double[::1] ab, double tail,                          # IN
           const int32_t[::1] cand, uint64_t key, uint64_t stream,                             # IN
           int32_t[::1] z, int32_t[::1] z_prev,                                                # IN/OUT, OUT
           int32_t[:, ::1] ndk, int32_t[:, ::1] nwk, int64_t[::1] nk,                          # IN/OUT counts
           int n_threads=1):
    """Resample every token's topic given Phi and Psi with theta integrated out,
    documents in parallel (see ``_z_doc``), then move the topic-word counts of
    the tokens that changed (``z_prev`` gets the old topics). Every candidate
    ``cand`` must be a topic >= K with a drawn column of ``phi``. Equivalent
    NumPy for token i of document j, word w, with ``ab = alpha Psi`` over all
    topics (the tail as its candidate, in distribution)::

        ndk[j, z[i]] -= 1
        p = phi[w] * (ndk[j] + ab);  z[i] = rng.choice(len(p), p=p / p.sum())
        ndk[j, z[i]] += 1
    """
    cdef int64_t D = indptr.shape[0] - 1, C = ndk.shape[1], W = phi.shape[0], j
    if ndk.shape[0] != D or tok_ptr.shape[0] != D + 1 or z.shape[0] != tok_ptr[D] or z_prev.shape[0] != z.shape[0] \
            or cand.shape[0] != z.shape[0]:
        raise ValueError("ndk, tok_ptr, z, z_prev and cand do not match the corpus")
    if phi.shape[1] != C or prob.shape[0] != W or prob.shape[1] != C or alias.shape[0] != W \
            or alias.shape[1] != C or mass.shape[0] != W or nwk.shape[0] != W or nwk.shape[1] != C \
            or nk.shape[0] != C or ab.shape[0] != C or not 0 < K <= C:
        raise ValueError("phi, prob, alias, mass, ab, nwk and nk disagree on the number of topics or words")
    if n_threads < 1:
        raise ValueError(f"n_threads must be positive, got {n_threads}")
    if z.shape[0] == 0:
        return
    cum, lists, pos = z_scratch(n_threads, C)
    cdef double[:, ::1] cv = cum
    cdef int32_t[:, ::1] lv = lists, pv = pos
    cdef ZArgs a
    cdef ZArgs *ap = &a
    a.C, a.K, a.stride = C, K, C + _PAD
    a.indptr, a.indices, a.counts, a.tok_ptr = &indptr[0], &indices[0], &counts[0], &tok_ptr[0]
    a.phi, a.prob, a.alias, a.mass, a.ab, a.tail = &phi[0, 0], &prob[0, 0], &alias[0, 0], &mass[0], &ab[0], tail
    a.cand, a.z, a.z_prev, a.ndk = &cand[0], &z[0], &z_prev[0], &ndk[0, 0]
    a.cum, a.dlist, a.dpos = &cv[0, 0], &lv[0, 0], &pv[0, 0]
    a.key, a.stream = key, stream
    with nogil:
        for j in prange(D, num_threads=n_threads, schedule="dynamic", chunksize=8):
            _z_doc(ap, j, threadid())
        _move_counts(&indices[0], &counts[0], indices.shape[0], C, &z[0], &z_prev[0], &nwk[0, 0], &nk[0])
