"""Kernels of truncation-free stochastic variational inference ([TF] 000) and of
its truncated stochastic mean-field baselines (shared/ALGORITHMS.md §5, §8.4).

One call handles one minibatch (or one set of documents); loops run without
the GIL. The global variational state is passed in the lazily scaled form of
``bnpcore.inference.online.StickState``: ``lambda_kw = eta + scale * gwords[rows[k], w]``,
``Lambda_k = W eta + scale * row_tilde[rows[k]]``, ``u_k = 1 + sizes[k]``,
``v_k = g + sum_{l>k} sizes[l]``. Minibatches use a local vocabulary
(``bnpcore.inference.online.Minibatch``): pair p of document j has local word
id ``words[p]`` (global id ``vocab[words[p]]``) and count ``counts[p]``.

Random draws go through the numpy Generator passed in (its bit generator,
under its lock), so a seeded run is reproducible draw for draw.
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memset
from libc.math cimport exp, log, INFINITY
from cython.parallel cimport prange

from bnpcore.kernels.special cimport bnp_dlgamma, bnp_digamma, bnp_logsumexp, bnp_sample_logweights
from bnpcore.kernels.rng cimport bnp_bitgen_t, bitgen_of, bnp_rng_uniform, bnp_rng_log_beta

cnp.import_array()


# --------------------------------------------------------------------------- #
# Minibatches and the global step                                              #
# --------------------------------------------------------------------------- #

def gather_batch(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,
                 const int64_t[::1] docs, int32_t[::1] word_map):  # IN x4, scratch
    """CSR of the documents ``docs`` of a corpus, with a local vocabulary.

    ``word_map`` is scratch of length W filled with -1 (restored on return).
    Returns ``(ptr, words, counts, vocab)``: ptr (S + 1, int64), local word id
    and count of every pair (int32), and the global id of each local id (int32,
    first-appearance order). Equivalent NumPy: ``sub = corpus[docs]``;
    ``vocab = pd.unique(sub.indices)``; ``words = index of sub.indices in vocab``.
    """
    cdef Py_ssize_t S = docs.shape[0], n_docs = indptr.shape[0] - 1, j, p, q = 0, nv = 0, n = 0
    cdef int64_t d
    cdef int32_t w
    for j in range(S):
        d = docs[j]
        if d < 0 or d >= n_docs:
            raise IndexError(f"document {d} is out of range for {n_docs} documents")
        n += indptr[d + 1] - indptr[d]
    ptr = np.empty(S + 1, dtype=np.int64)
    local = np.empty(n, dtype=np.int32)
    cnt = np.empty(n, dtype=np.int32)
    vocab = np.empty(min(n, word_map.shape[0]), dtype=np.int32)
    cdef int64_t[::1] pv = ptr
    cdef int32_t[::1] lv = local, cv = cnt, vv = vocab
    with nogil:
        for j in range(S):
            pv[j] = q
            d = docs[j]
            for p in range(indptr[d], indptr[d + 1]):
                w = indices[p]
                if word_map[w] < 0:
                    word_map[w] = <int32_t>nv
                    vv[nv] = w
                    nv += 1
                lv[q] = word_map[w]
                cv[q] = counts[p]
                q += 1
        pv[S] = q
        for j in range(nv):
            word_map[vv[j]] = -1
    return ptr, local, cnt, vocab[:nv].copy()


def add_block(double[:, ::1] gwords, double[::1] row_tilde, const int64_t[::1] rows,
              const int32_t[::1] vocab, const double[:, ::1] block, double coef):  # OUT x2, IN x3
    """Sparse part of the lazily decayed natural-gradient step (ALGORITHMS.md §2.9).

    Equivalent NumPy: ``gwords[rows[:, None], vocab] += coef * block`` and
    ``row_tilde[rows] += coef * block.sum(axis=1)``.
    """
    cdef Py_ssize_t B = block.shape[0], nv = block.shape[1], b, v
    cdef int64_t r
    cdef double x, s
    if rows.shape[0] != B or vocab.shape[0] != nv:
        raise ValueError(f"block {B}x{nv} does not match {rows.shape[0]} rows and {vocab.shape[0]} words")
    with nogil:
        for b in range(B):
            r = rows[b]
            s = 0.0
            for v in range(nv):
                x = block[b, v]
                if x != 0.0:
                    x = coef * x
                    gwords[r, vocab[v]] += x
                    s += x
            row_tilde[r] += s


# --------------------------------------------------------------------------- #
# Growable arrays for the truncation-free local samplers                      #
# --------------------------------------------------------------------------- #

cdef int _resize(void **p, size_t nbytes) except -1 nogil:
    """realloc that keeps *p on failure and raises MemoryError."""
    cdef void *q = realloc(p[0], nbytes if nbytes > 0 else 1)
    if q == NULL:
        with gil:
            raise MemoryError(f"cannot allocate {nbytes} bytes")
    p[0] = q
    return 0


cdef int _resize_rows(void **p, size_t n_rows, size_t old_cols, size_t new_cols, size_t elsize) except -1 nogil:
    """Re-lay an n_rows x old_cols array as n_rows x new_cols (new columns uninitialised)."""
    cdef char *q = <char *>malloc(n_rows * new_cols * elsize if n_rows * new_cols > 0 else 1)
    cdef char *old = <char *>p[0]
    cdef size_t i
    if q == NULL:
        with gil:
            raise MemoryError(f"cannot allocate {n_rows * new_cols * elsize} bytes")
    if old != NULL:
        for i in range(n_rows):
            memcpy(q + i * new_cols * elsize, old + i * old_cols * elsize, old_cols * elsize)
    free(old)
    p[0] = q
    return 0


cdef inline double _stick_prefix(const double *log1mv, double *cum, int64_t n) noexcept nogil:
    """cum[k] = sum_{l<k} log(1 - V_l) for k = 0..n; returns cum[n]."""
    cdef int64_t k
    cum[0] = 0.0
    for k in range(n):
        cum[k + 1] = cum[k] + log1mv[k]
    return cum[n]


# --------------------------------------------------------------------------- #
# DP mixture of multinomials: truncation-free local step (§5.2)              #
# --------------------------------------------------------------------------- #

cdef struct DPWork:
    int64_t S, nv, K, L, cap, counter
    double eta, a, w_eta
    bint exact
    const int64_t *ptr
    const int32_t *words
    const int32_t *counts
    int64_t *doclen
    double *dmrest         # S: log DM(c_j | eta)
    int32_t *z             # S
    # per component, capacity cap (k-major rows of nv or S entries)
    double *lc             # cap x nv: lambda_kw + C_kw
    int32_t *C             # cap x nv: pooled minibatch counts
    double *lamtot         # Lambda_k + C_k
    int64_t *m             # minibatch documents in k
    double *u
    double *v              # Beta "prior" of stick k: q(V_k), or Beta(1, a) beyond K
    double *logv
    double *log1mv
    double *cum            # cap + 1
    int64_t *ver           # version of component k (changes with C_k)
    double *dm             # cap x S cached log DM(c_j | lambda_k + C_k)
    int64_t *dmver         # cap x S version of the cached value
    double *lw             # cap + 1 scratch


cdef int dp_reserve(DPWork *w, int64_t need) except -1 nogil:
    cdef int64_t cap = w.cap if w.cap > 0 else 8
    if need <= w.cap:
        return 0
    while cap < need:
        cap *= 2
    _resize(<void **>&w.lc, cap * w.nv * sizeof(double))
    _resize(<void **>&w.C, cap * w.nv * sizeof(int32_t))
    _resize(<void **>&w.lamtot, cap * sizeof(double))
    _resize(<void **>&w.m, cap * sizeof(int64_t))
    _resize(<void **>&w.u, cap * sizeof(double))
    _resize(<void **>&w.v, cap * sizeof(double))
    _resize(<void **>&w.logv, cap * sizeof(double))
    _resize(<void **>&w.log1mv, cap * sizeof(double))
    _resize(<void **>&w.cum, (cap + 1) * sizeof(double))
    _resize(<void **>&w.ver, cap * sizeof(int64_t))
    _resize(<void **>&w.dm, cap * w.S * sizeof(double))
    _resize(<void **>&w.dmver, cap * w.S * sizeof(int64_t))
    _resize(<void **>&w.lw, (cap + 1) * sizeof(double))
    w.cap = cap
    return 0


cdef void dp_free(DPWork *w) noexcept nogil:
    free(w.doclen); free(w.dmrest); free(w.z)
    free(w.lc); free(w.C); free(w.lamtot); free(w.m); free(w.u); free(w.v)
    free(w.logv); free(w.log1mv); free(w.cum); free(w.ver); free(w.dm); free(w.dmver); free(w.lw)


cdef inline double dp_log_dm(DPWork *w, int64_t j, int64_t k) noexcept nogil:
    """log DM(c_j | lambda_k + C_k), the document's token sequence (§2.3)."""
    cdef int64_t p
    cdef double s = 0.0
    cdef const double *row = w.lc + k * w.nv
    for p in range(w.ptr[j], w.ptr[j + 1]):
        s += bnp_dlgamma(row[w.words[p]], w.counts[p])
    return s - bnp_dlgamma(w.lamtot[k], <double>w.doclen[j])


cdef inline void dp_move(DPWork *w, int64_t j, int64_t k, int sign) noexcept nogil:
    """Add (sign = 1) or remove (sign = -1) document j to or from component k."""
    cdef int64_t p
    cdef int32_t c
    for p in range(w.ptr[j], w.ptr[j + 1]):
        c = sign * w.counts[p]
        w.C[k * w.nv + w.words[p]] += c
        w.lc[k * w.nv + w.words[p]] += c
    w.lamtot[k] += sign * w.doclen[j]
    w.m[k] += sign
    w.counter += 1
    w.ver[k] = w.counter


cdef int dp_new_stick(DPWork *w, bnp_bitgen_t *g) except -1 nogil:
    """Instantiate stick L at the prior: lambda = eta, V_L ~ Beta(1, a)."""
    cdef int64_t k = w.L, v, j
    dp_reserve(w, k + 1)
    for v in range(w.nv):
        w.lc[k * w.nv + v] = w.eta
        w.C[k * w.nv + v] = 0
    w.lamtot[k] = w.w_eta
    w.m[k] = 0
    w.u[k] = 1.0
    w.v[k] = w.a
    w.logv[k] = bnp_rng_log_beta(g, 1.0, w.a, &w.log1mv[k])
    w.cum[k + 1] = w.cum[k] + w.log1mv[k]
    w.counter += 1
    w.ver[k] = w.counter
    for j in range(w.S):
        w.dmver[k * w.S + j] = -1
    w.L = k + 1
    return 0


cdef int64_t dp_sample_z(DPWork *w, int64_t j, bnp_bitgen_t *g) except -1 nogil:
    """Draw z_j given the sticks and the other documents' pooled counts."""
    cdef int64_t k, L = w.L, pick
    cdef int64_t slot
    for k in range(L):
        slot = k * w.S + j
        if w.dmver[slot] != w.ver[k]:
            w.dm[slot] = dp_log_dm(w, j, k)
            w.dmver[slot] = w.ver[k]
        w.lw[k] = w.logv[k] + w.cum[k] + w.dm[slot]
    w.lw[L] = w.cum[L] + w.dmrest[j]
    pick = bnp_sample_logweights(w.lw, L + 1, bnp_rng_uniform(g))
    if pick < 0:
        with gil:
            raise FloatingPointError(f"document {j}: no finite component weight")
    if pick < L:
        return pick
    # The unrepresented sticks share lambda = eta, so the document picks one of
    # them in proportion to pi_k: walk down the sticks drawn from their prior
    # (retrospective sampling, E17); the paper's rule takes the next one.
    while True:
        dp_new_stick(w, g)
        if not w.exact or bnp_rng_uniform(g) < exp(w.logv[w.L - 1]):
            return w.L - 1


cdef int dp_sample_sticks(DPWork *w, bnp_bitgen_t *g) except -1 nogil:
    """V_k ~ Beta(u_k + m_k, v_k + sum_{l>k} m_l); drop trailing empty sticks beyond K."""
    cdef int64_t k
    cdef double suffix = 0.0
    for k in range(w.L - 1, -1, -1):
        w.logv[k] = bnp_rng_log_beta(g, w.u[k] + w.m[k], w.v[k] + suffix, &w.log1mv[k])
        suffix += w.m[k]
    while w.L > w.K and w.m[w.L - 1] == 0:
        w.L -= 1
    _stick_prefix(w.log1mv, w.cum, w.L)
    return 0


def dp_local_step(const int64_t[::1] ptr, const int32_t[::1] words, const int32_t[::1] counts,
                  const int32_t[::1] vocab, const double[:, ::1] gwords, const double[::1] row_tilde,
                  const int64_t[::1] rows, double scale, const double[::1] sizes,
                  double eta, double a, int sweeps, bint exact, rng, int32_t[:, ::1] trace=None):
    """Truncation-free local step of the DP mixture on one minibatch (§5.2).

    Joint collapsed Gibbs over the S document labels z_j and the sticks V_k,
    with q(phi_k) = Dir(lambda_k) integrated out into pooled minibatch counts
    and q(V_k) = Beta(u_k, v_k) acting as the sticks' prior (sticks beyond the
    K instantiated ones: Beta(1, a), lambda = eta). Initialisation: V_k ~ q(V_k),
    then each z_j given the earlier documents; then ``sweeps`` times: all
    sticks given z, all z_j given the sticks. A document choosing the
    unrepresented mass walks down fresh sticks (``exact``, E17) or takes the
    next one (``exact=False``, the literal [TF] S.2.2 rule).

    Parameters
    ----------
    ptr, words, counts, vocab : the minibatch (``Minibatch``)
    gwords, row_tilde, rows, scale, sizes : the global state (``StickState``)
    eta, a : float
        Dirichlet prior of the components and DP concentration.
    sweeps : int
    exact : bool
    rng : numpy.random.Generator
    trace : int32 array of shape (sweeps, S), optional
        OUT: the labels (stick positions) after every sweep.

    Returns
    -------
    n_new : int
        Components instantiated (non-empty ones only, appended after the K).
    z : ndarray of shape (S,), int32
        Final labels in [0, K + n_new).
    block : ndarray of shape (K + n_new, n_batch_words)
        Word counts of each component over the minibatch.
    docs : ndarray of shape (K + n_new,)
        Number of minibatch documents of each component.
    """
    cdef DPWork w
    cdef int64_t S = ptr.shape[0] - 1, nv = vocab.shape[0], K = rows.shape[0], W = gwords.shape[1]
    cdef int64_t j, k, v, p, s, kout
    cdef double suffix
    cdef int64_t[::1] remap
    cdef double[:, ::1] bv
    cdef double[::1] dv
    cdef int32_t[::1] zv
    cdef bint do_trace = trace is not None
    cdef bnp_bitgen_t *g = bitgen_of(rng)
    if sizes.shape[0] != K or row_tilde.shape[0] != gwords.shape[0]:
        raise ValueError("inconsistent global state")
    if trace is not None and (trace.shape[0] != sweeps or trace.shape[1] != S):
        raise ValueError(f"trace must have shape ({sweeps}, {S})")
    memset(&w, 0, sizeof(DPWork))
    w.S, w.nv, w.K, w.L = S, nv, K, K
    w.eta, w.a, w.w_eta, w.exact = eta, a, W * eta, exact
    w.ptr = &ptr[0]
    w.words = &words[0] if words.shape[0] else NULL
    w.counts = &counts[0] if counts.shape[0] else NULL
    try:
        with rng.bit_generator.lock, nogil:
            _resize(<void **>&w.doclen, S * sizeof(int64_t))
            _resize(<void **>&w.dmrest, S * sizeof(double))
            _resize(<void **>&w.z, S * sizeof(int32_t))
            dp_reserve(&w, K + 8)
            for j in range(S):
                w.doclen[j] = 0
                w.dmrest[j] = 0.0
                for p in range(ptr[j], ptr[j + 1]):
                    w.doclen[j] += counts[p]
                    w.dmrest[j] += bnp_dlgamma(eta, counts[p])
                w.dmrest[j] -= bnp_dlgamma(w.w_eta, <double>w.doclen[j])
            suffix = 0.0
            for k in range(K - 1, -1, -1):
                w.u[k] = 1.0 + sizes[k]
                w.v[k] = a + suffix
                suffix += sizes[k]
            for k in range(K):
                for v in range(nv):
                    w.lc[k * nv + v] = eta + scale * gwords[rows[k], vocab[v]]
                    w.C[k * nv + v] = 0
                w.lamtot[k] = w.w_eta + scale * row_tilde[rows[k]]
                w.m[k] = 0
                w.logv[k] = bnp_rng_log_beta(g, w.u[k], w.v[k], &w.log1mv[k])
                w.counter += 1
                w.ver[k] = w.counter
                for j in range(S):
                    w.dmver[k * S + j] = -1
            _stick_prefix(w.log1mv, w.cum, K)
            for j in range(S):                       # sequential initialisation
                k = dp_sample_z(&w, j, g)
                w.z[j] = <int32_t>k
                dp_move(&w, j, k, 1)
            for s in range(sweeps):
                dp_sample_sticks(&w, g)
                for j in range(S):
                    dp_move(&w, j, w.z[j], -1)
                    k = dp_sample_z(&w, j, g)
                    w.z[j] = <int32_t>k
                    dp_move(&w, j, k, 1)
                if do_trace:
                    for j in range(S):
                        trace[s, j] = w.z[j]
        # Keep the K global components and the new ones that hold documents.
        remap_arr = np.full(w.L, -1, dtype=np.int64)
        remap = remap_arr
        kout = 0
        for k in range(w.L):
            if k < K or w.m[k] > 0:
                remap[k] = kout
                kout += 1
        block = np.empty((kout, nv), dtype=np.float64)
        docs = np.empty(kout, dtype=np.float64)
        z = np.empty(S, dtype=np.int32)
        bv, dv, zv = block, docs, z
        with nogil:
            for k in range(w.L):
                if remap[k] >= 0:
                    dv[remap[k]] = w.m[k]
                    for v in range(nv):
                        bv[remap[k], v] = w.C[k * nv + v]
            for j in range(S):
                zv[j] = <int32_t>remap[w.z[j]]
        return kout - K, z, block, docs
    finally:
        dp_free(&w)


def dp_log_weights(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,
                   const double[:, ::1] gwords, const double[::1] row_tilde, const int64_t[::1] rows,
                   double scale, const double[::1] sizes, double eta, double a,
                   double[:, ::1] out, int n_threads=1):  # IN x9, OUT
    """Locally collapsed q(z_j = k) of the DP mixture, unnormalised, in log space ([TF] §2.3).

    ``out[j, k] = log E[pi_k] + log DM(c_j | lambda_k)`` for k < K and
    ``out[j, K] = log prod_{l<K} E[1 - V_l] + log DM(c_j | eta)`` (all new
    components), with ``log E[pi_k] = log(u_k/(u_k+v_k)) + sum_{l<k} log(v_l/(u_l+v_l))``.
    Documents are rows of the CSR (indptr, indices, counts) with global word ids.
    """
    cdef Py_ssize_t D = indptr.shape[0] - 1, K = rows.shape[0], W = gwords.shape[1], j, k
    cdef int64_t p, n
    cdef double s, suffix, w_eta = W * eta
    if out.shape[0] != D or out.shape[1] != K + 1 or sizes.shape[0] != K:
        raise ValueError(f"out must have shape ({D}, {K + 1})")
    logpi = np.empty(K + 1, dtype=np.float64)
    lamtot = np.empty(K, dtype=np.float64)
    cdef double[::1] lp = logpi, lt = lamtot
    cdef double u, v, cum = 0.0
    suffix = 0.0
    for k in range(K - 1, -1, -1):
        lp[k] = suffix                 # temporarily v_k - a
        suffix += sizes[k]
    for k in range(K):
        u = 1.0 + sizes[k]
        v = a + lp[k]
        lp[k] = log(u / (u + v)) + cum
        cum += log(v / (u + v))
        lt[k] = w_eta + scale * row_tilde[rows[k]]
    lp[K] = cum
    for j in prange(D, nogil=True, schedule="static", num_threads=n_threads):
        n = 0
        s = 0.0
        for p in range(indptr[j], indptr[j + 1]):
            n = n + counts[p]
            s = s + bnp_dlgamma(eta, counts[p])
        out[j, K] = lp[K] + s - bnp_dlgamma(w_eta, <double>n)
        for k in range(K):
            s = 0.0
            for p in range(indptr[j], indptr[j + 1]):
                s = s + bnp_dlgamma(eta + scale * gwords[rows[k], indices[p]], counts[p])
            out[j, k] = lp[k] + s - bnp_dlgamma(lt[k], <double>n)


# --------------------------------------------------------------------------- #
# DP mixture: truncated stochastic mean-field local step (§5.4 a)             #
# --------------------------------------------------------------------------- #

def dp_meanfield_step(const int64_t[::1] ptr, const int32_t[::1] words, const int32_t[::1] counts,
                      const int32_t[::1] vocab, const double[:, ::1] gwords, const double[::1] row_tilde,
                      const int64_t[::1] rows, double scale, const double[::1] elog_pi, double eta,
                      double[:, ::1] block, double[::1] docs, double[:, ::1] resp):  # IN x10, OUT x3
    """Mean-field responsibilities of the truncated DP mixture (§5.4 a) and their statistics.

    ``log r_jk = elog_pi[k] + sum_w c_jw (psi(lambda_kw) - psi(Lambda_k))``, normalised
    over k; ``block[k, v] = sum_j r_jk c_jv``, ``docs[k] = sum_j r_jk`` (both
    overwritten); ``resp`` (S x K) receives r (pass an array of shape (0, K) to skip).
    """
    cdef Py_ssize_t S = ptr.shape[0] - 1, nv = vocab.shape[0], K = rows.shape[0], W = gwords.shape[1]
    cdef Py_ssize_t j, k, v
    cdef int64_t p
    cdef double lz, r, digtot
    cdef bint keep = resp.shape[0] == S
    if block.shape[0] != K or block.shape[1] != nv or docs.shape[0] != K or elog_pi.shape[0] != K:
        raise ValueError("output shapes do not match the state")
    if resp.shape[0] not in (0, S) or resp.shape[1] != K:
        raise ValueError(f"resp must have shape ({S}, {K}) or (0, {K})")
    elogphi = np.empty((K, nv), dtype=np.float64)
    logr = np.empty(K, dtype=np.float64)
    cdef double[:, ::1] ep = elogphi
    cdef double[::1] lr = logr
    with nogil:
        for k in range(K):
            digtot = bnp_digamma(W * eta + scale * row_tilde[rows[k]])
            docs[k] = 0.0
            for v in range(nv):
                ep[k, v] = bnp_digamma(eta + scale * gwords[rows[k], vocab[v]]) - digtot
                block[k, v] = 0.0
        for j in range(S):
            for k in range(K):
                r = elog_pi[k]
                for p in range(ptr[j], ptr[j + 1]):
                    r = r + counts[p] * ep[k, words[p]]
                lr[k] = r
            lz = bnp_logsumexp(&lr[0], K)
            for k in range(K):
                r = exp(lr[k] - lz)
                if keep:
                    resp[j, k] = r
                if r == 0.0:
                    continue
                docs[k] += r
                for p in range(ptr[j], ptr[j + 1]):
                    block[k, words[p]] += r * counts[p]
