"""Kernels of truncation-free stochastic variational inference ([TF]) and of
its truncated stochastic mean-field baselines (Wang & Blei 2012 and its supplement S.1-S.3).

One call handles one minibatch (or one set of documents); loops run without
the GIL. The global variational state is passed in the lazily scaled form of
``bnpcore.inference.online.StickState``: ``lambda_kw = eta + scale * gwords[rows[k], w]``,
``Lambda_k = W eta + scale * row_tilde[rows[k]]``, ``u_k = 1 + sizes[k]``,
``v_k = g + sum_{l>k} sizes[l]``. Minibatches use a local vocabulary
(``bnpcore.inference.online.Minibatch``): pair p of document j has local word
id ``words[p]`` (global id ``vocab[words[p]]``) and count ``counts[p]`` (one
``bnp_csr_t`` in the nogil code).

Random draws go through the numpy Generator passed in (its bit generator,
under its lock), so a seeded run is reproducible draw for draw.
"""
import numpy as np
cimport numpy as cnp
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcpy, memset
from libc.math cimport exp, log, log1p, INFINITY
from cpython.pycapsule cimport PyCapsule_GetName, PyCapsule_GetPointer
from cython.parallel cimport parallel, prange

from bnpcore.kernels.special cimport (bnp_digamma, bnp_dlgamma, bnp_lgamma, bnp_log_rising, bnp_logaddexp,
                                      bnp_logsumexp, bnp_sample_logweights)
from bnpcore.kernels.rng cimport bnp_bitgen_t, bitgen_of, bnp_rng_log_beta, bnp_rng_log_gamma, bnp_rng_uniform
from bnpcore.kernels.sparse cimport bnp_csr_t, csr_view
from bnpcore.kernels.stirling cimport BNP_STIRLING_MAX_N, StirlingTable, bnp_stirling_t, sample_tables

cnp.import_array()

# BLAS dgemm from SciPy's exported Cython BLAS (bound at import through its capsule,
# so building bnpcore needs no SciPy headers).
ctypedef void (*dgemm_t)(char *transa, char *transb, int *m, int *n, int *k, double *alpha, double *a,
                         int *lda, double *b, int *ldb, double *beta, double *c, int *ldc) noexcept nogil
cdef dgemm_t _dgemm = NULL


def _bind_blas():
    global _dgemm
    from scipy.linalg import cython_blas
    capsule = cython_blas.__pyx_capi__["dgemm"]
    _dgemm = <dgemm_t>PyCapsule_GetPointer(capsule, PyCapsule_GetName(capsule))


_bind_blas()


cdef inline void gemm(bint ta, bint tb, int m, int n, int k, double alpha, const double *a, int lda,
                      const double *b, int ldb, double beta, double *c, int ldc) noexcept nogil:
    """Row-major C (m x n) = alpha op(A) op(B) + beta C, op(A) m x k, op(B) k x n
    (column-major BLAS on the transposes: C^T = op(B)^T op(A)^T)."""
    cdef char transa = b'T' if ta else b'N'
    cdef char transb = b'T' if tb else b'N'
    if m == 0 or n == 0:
        return
    _dgemm(&transb, &transa, &n, &m, &k, &alpha, <double *>b, &ldb, <double *>a, &lda, &beta, c, &ldc)


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
    """Sparse part of the lazily decayed natural-gradient step.

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
# Stick-breaking weights of the truncation-free local steps (DP and HDP)       #
# --------------------------------------------------------------------------- #

cdef struct Sticks:
    int64_t K              # sticks of the global state (kept even when empty)
    int64_t L              # sticks in use: K plus those instantiated in this minibatch
    double g               # concentration: a stick beyond K is V ~ Beta(1, g)
    double *u
    double *v              # Beta "prior" of stick k: q(V_k) for k < K, else Beta(1, g)
    double *logv           # log V_k
    double *log1mv         # log(1 - V_k)
    double *cum            # cum[k] = sum_{l<k} log(1 - V_l), k = 0..L


cdef int sticks_reserve(Sticks *s, int64_t cap) except -1 nogil:
    _resize(<void **>&s.u, cap * sizeof(double))
    _resize(<void **>&s.v, cap * sizeof(double))
    _resize(<void **>&s.logv, cap * sizeof(double))
    _resize(<void **>&s.log1mv, cap * sizeof(double))
    _resize(<void **>&s.cum, (cap + 1) * sizeof(double))
    return 0


cdef void sticks_free(Sticks *s) noexcept nogil:
    free(s.u); free(s.v); free(s.logv); free(s.log1mv); free(s.cum)


cdef void sticks_start(Sticks *s, const double *sizes, bnp_bitgen_t *g) noexcept nogil:
    """The K sticks of the global state, q(V_k) = Beta(1 + Nst_k, g + sum_{l>k} Nst_l)
    (the invariant of the stick state), and one draw of each, k = 0..K-1."""
    cdef int64_t k
    cdef double suffix = 0.0
    for k in range(s.K - 1, -1, -1):
        s.u[k] = 1.0 + sizes[k]
        s.v[k] = s.g + suffix
        suffix += sizes[k]
    for k in range(s.K):
        s.logv[k] = bnp_rng_log_beta(g, s.u[k], s.v[k], &s.log1mv[k])
    _stick_prefix(s.log1mv, s.cum, s.K)


cdef void sticks_new(Sticks *s, bnp_bitgen_t *g) noexcept nogil:
    """Instantiate stick L from its prior, V_L ~ Beta(1, g) (capacity reserved by the caller)."""
    cdef int64_t k = s.L
    s.u[k] = 1.0
    s.v[k] = s.g
    s.logv[k] = bnp_rng_log_beta(g, 1.0, s.g, &s.log1mv[k])
    s.cum[k + 1] = s.cum[k] + s.log1mv[k]
    s.L = k + 1


cdef inline bint sticks_taken(const Sticks *s, bint exact, bnp_bitgen_t *g) noexcept nogil:
    """After instantiating stick L-1 for an observation that chose the
    unrepresented mass: does the observation take it? Walking down freshly drawn
    sticks and taking stick k with probability V_k picks k in proportion to
    pi_k (retrospective sampling, exact); ``exact`` False is the paper's rule
    (always the next stick)."""
    return not exact or bnp_rng_uniform(g) < exp(s.logv[s.L - 1])


cdef void sticks_sample(Sticks *s, const int64_t *counts, const int64_t *sizes, bnp_bitgen_t *g) noexcept nogil:
    """V_k ~ Beta(u_k + n_k, v_k + sum_{l>k} n_l) given the counts n (documents
    or tables), k = L-1..0; then drop the trailing sticks beyond K whose
    ``sizes`` are zero."""
    cdef int64_t k
    cdef double suffix = 0.0
    for k in range(s.L - 1, -1, -1):
        s.logv[k] = bnp_rng_log_beta(g, s.u[k] + counts[k], s.v[k] + suffix, &s.log1mv[k])
        suffix += counts[k]
    while s.L > s.K and sizes[s.L - 1] == 0:
        s.L -= 1
    _stick_prefix(s.log1mv, s.cum, s.L)


# --------------------------------------------------------------------------- #
# DP mixture of multinomials: truncation-free local step (§5.2)              #
# --------------------------------------------------------------------------- #

cdef tuple kept_components(const int64_t *size, int64_t L, int64_t K):
    """Output row of each of the L components of a local step: the K global ones
    keep their rows, new ones are kept (in order) when ``size > 0``, else -1.
    Returns (remap, number of output rows)."""
    remap = np.full(L, -1, dtype=np.int64)
    cdef int64_t[::1] rv = remap
    cdef int64_t k, kout = 0
    for k in range(L):
        if k < K or size[k] > 0:
            rv[k] = kout
            kout += 1
    return remap, kout


cdef struct DPWork:
    int64_t S, nv, cap, counter
    double eta, w_eta
    bint exact
    Sticks st              # pi_k = V_k prod_{l<k}(1 - V_l), V ~ Beta(1, a) beyond the K global sticks
    bnp_csr_t docs         # the minibatch (local word ids)
    int64_t *doclen
    double *dmrest         # S: log DM(c_j | eta)
    int32_t *z             # S
    # per component, capacity cap (k-major rows of nv or S entries)
    double *lc             # cap x nv: lambda_kw + C_kw
    int32_t *C             # cap x nv: pooled minibatch counts
    double *lamtot         # Lambda_k + C_k
    int64_t *m             # minibatch documents in k
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
    sticks_reserve(&w.st, cap)
    _resize(<void **>&w.ver, cap * sizeof(int64_t))
    _resize(<void **>&w.dm, cap * w.S * sizeof(double))
    _resize(<void **>&w.dmver, cap * w.S * sizeof(int64_t))
    _resize(<void **>&w.lw, (cap + 1) * sizeof(double))
    w.cap = cap
    return 0


cdef void dp_free(DPWork *w) noexcept nogil:
    free(w.doclen); free(w.dmrest); free(w.z)
    free(w.lc); free(w.C); free(w.lamtot); free(w.m)
    free(w.ver); free(w.dm); free(w.dmver); free(w.lw)
    sticks_free(&w.st)


cdef inline double dp_log_dm(DPWork *w, int64_t j, int64_t k) noexcept nogil:
    """log DM(c_j | lambda_k + C_k), the document's token sequence (§2.3)."""
    cdef int64_t lo = w.docs.indptr[j]
    return bnp_log_rising(w.docs.indices + lo, w.docs.counts + lo, w.docs.indptr[j + 1] - lo, w.lc + k * w.nv,
                          0.0, 1.0) \
        - bnp_dlgamma(w.lamtot[k], <double>w.doclen[j])


cdef inline void dp_move(DPWork *w, int64_t j, int64_t k, int sign) noexcept nogil:
    """Add (sign = 1) or remove (sign = -1) document j to or from component k."""
    cdef int64_t p
    cdef int32_t c
    for p in range(w.docs.indptr[j], w.docs.indptr[j + 1]):
        c = sign * w.docs.counts[p]
        w.C[k * w.nv + w.docs.indices[p]] += c
        w.lc[k * w.nv + w.docs.indices[p]] += c
    w.lamtot[k] += sign * w.doclen[j]
    w.m[k] += sign
    w.counter += 1
    w.ver[k] = w.counter


cdef int dp_new_stick(DPWork *w, bnp_bitgen_t *g) except -1 nogil:
    """Instantiate stick L at the prior: lambda = eta, V_L ~ Beta(1, a)."""
    cdef int64_t k = w.st.L, v, j
    dp_reserve(w, k + 1)
    for v in range(w.nv):
        w.lc[k * w.nv + v] = w.eta
        w.C[k * w.nv + v] = 0
    w.lamtot[k] = w.w_eta
    w.m[k] = 0
    sticks_new(&w.st, g)
    w.counter += 1
    w.ver[k] = w.counter
    for j in range(w.S):
        w.dmver[k * w.S + j] = -1
    return 0


cdef int64_t dp_sample_z(DPWork *w, int64_t j, bnp_bitgen_t *g) except -1 nogil:
    """Draw z_j given the sticks and the other documents' pooled counts."""
    cdef int64_t k, L = w.st.L, pick
    cdef int64_t slot
    for k in range(L):
        slot = k * w.S + j
        if w.dmver[slot] != w.ver[k]:
            w.dm[slot] = dp_log_dm(w, j, k)
            w.dmver[slot] = w.ver[k]
        w.lw[k] = w.st.logv[k] + w.st.cum[k] + w.dm[slot]
    w.lw[L] = w.st.cum[L] + w.dmrest[j]
    pick = bnp_sample_logweights(w.lw, L + 1, bnp_rng_uniform(g))
    if pick < 0:
        with gil:
            raise FloatingPointError(f"document {j}: no finite component weight")
    if pick < L:
        return pick
    # The unrepresented sticks share lambda = eta, so the document picks one of
    # them in proportion to pi_k (sticks_taken).
    while True:
        dp_new_stick(w, g)
        if sticks_taken(&w.st, w.exact, g):
            return w.st.L - 1


cdef int dp_sample_sticks(DPWork *w, bnp_bitgen_t *g) except -1 nogil:
    """V_k ~ Beta(u_k + m_k, v_k + sum_{l>k} m_l); drop trailing empty sticks beyond K."""
    sticks_sample(&w.st, w.m, w.m, g)
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
    unrepresented mass walks down fresh sticks (``exact``) or takes the
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
    w.S, w.nv, w.st.K, w.st.L, w.st.g = S, nv, K, K, a
    w.eta, w.w_eta, w.exact = eta, W * eta, exact
    w.docs = csr_view(ptr, words, counts, nv)
    try:
        with rng.bit_generator.lock, nogil:
            _resize(<void **>&w.doclen, S * sizeof(int64_t))
            _resize(<void **>&w.dmrest, S * sizeof(double))
            _resize(<void **>&w.z, S * sizeof(int32_t))
            dp_reserve(&w, K + 8)
            for j in range(S):
                w.doclen[j] = 0
                for p in range(ptr[j], ptr[j + 1]):
                    w.doclen[j] += counts[p]
                w.dmrest[j] = bnp_log_rising(NULL, w.docs.counts + ptr[j], ptr[j + 1] - ptr[j], NULL, eta, 1.0) \
                    - bnp_dlgamma(w.w_eta, <double>w.doclen[j])
            for k in range(K):
                for v in range(nv):
                    w.lc[k * nv + v] = eta + scale * gwords[rows[k], vocab[v]]
                    w.C[k * nv + v] = 0
                w.lamtot[k] = w.w_eta + scale * row_tilde[rows[k]]
                w.m[k] = 0
                w.counter += 1
                w.ver[k] = w.counter
                for j in range(S):
                    w.dmver[k * S + j] = -1
            sticks_start(&w.st, &sizes[0] if K else NULL, g)
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
        remap, kout = kept_components(w.m, w.st.L, K)          # new components that hold documents
        block = np.empty((kout, nv), dtype=np.float64)
        docs = np.empty(kout, dtype=np.float64)
        z = np.empty(S, dtype=np.int32)
        bv, dv, zv = block, docs, z
        with nogil:
            for k in range(w.st.L):
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
    cdef int64_t p, n, nnz
    cdef const int32_t *ids = &indices[0] if indices.shape[0] else NULL
    cdef const int32_t *cnt = &counts[0] if counts.shape[0] else NULL
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
        for p in range(indptr[j], indptr[j + 1]):
            n = n + counts[p]
        nnz = indptr[j + 1] - indptr[j]
        out[j, K] = lp[K] + bnp_log_rising(NULL, cnt + indptr[j], nnz, NULL, eta, 1.0) \
            - bnp_dlgamma(w_eta, <double>n)
        for k in range(K):
            out[j, k] = lp[k] + bnp_log_rising(ids + indptr[j], cnt + indptr[j], nnz,
                                               &gwords[rows[k], 0], eta, scale) - bnp_dlgamma(lt[k], <double>n)


# --------------------------------------------------------------------------- #
# DP mixture: truncated stochastic mean-field local step (§5.4 a)             #
# --------------------------------------------------------------------------- #

def dp_meanfield_step(const int64_t[::1] ptr, const int32_t[::1] words, const int32_t[::1] counts,
                      const int32_t[::1] vocab, const double[:, ::1] gwords, const double[::1] row_tilde,
                      const int64_t[::1] rows, double scale, const double[::1] elog_pi, double eta,
                      double[:, ::1] block, double[::1] docs, double[:, ::1] resp,  # IN x10, OUT x3
                      int n_threads=1):
    """Mean-field responsibilities of the truncated DP mixture (§5.4 a) and their statistics.

    ``log r_jk = elog_pi[k] + sum_w c_jw (psi(lambda_kw) - psi(Lambda_k))``, normalised
    over k; ``block[k, v] = sum_j r_jk c_jv``, ``docs[k] = sum_j r_jk`` (both
    overwritten); ``resp`` (S x K) receives r (pass an array of shape (0, K) to skip).

    In parallel (``n_threads``): the responsibilities by document, then the
    statistics by component, each sum over documents in document order, so the
    result is the same for any number of threads.
    """
    cdef Py_ssize_t S = ptr.shape[0] - 1, nv = vocab.shape[0], K = rows.shape[0], W = gwords.shape[1]
    cdef Py_ssize_t j, k, v
    cdef int64_t p
    cdef double lz, r, digtot
    if block.shape[0] != K or block.shape[1] != nv or docs.shape[0] != K or elog_pi.shape[0] != K:
        raise ValueError("output shapes do not match the state")
    if resp.shape[0] not in (0, S) or resp.shape[1] != K:
        raise ValueError(f"resp must have shape ({S}, {K}) or (0, {K})")
    if K == 0:
        raise ValueError("the truncated model has no components")
    if n_threads < 1:
        raise ValueError(f"n_threads must be >= 1, got {n_threads}")
    cdef double[:, ::1] rv = resp if resp.shape[0] == S else np.empty((S, K), dtype=np.float64)
    elogphi = np.empty((K, nv), dtype=np.float64)
    cdef double[:, ::1] ep = elogphi
    with nogil, parallel(num_threads=n_threads):
        for k in prange(K, schedule="static"):
            digtot = bnp_digamma(W * eta + scale * row_tilde[rows[k]])
            for v in range(nv):
                ep[k, v] = bnp_digamma(eta + scale * gwords[rows[k], vocab[v]]) - digtot
        for j in prange(S, schedule="guided"):
            for k in range(K):
                r = elog_pi[k]
                for p in range(ptr[j], ptr[j + 1]):
                    r = r + counts[p] * ep[k, words[p]]
                rv[j, k] = r
            lz = bnp_logsumexp(&rv[j, 0], K)
            for k in range(K):
                rv[j, k] = exp(rv[j, k] - lz)
        for k in prange(K, schedule="static"):
            docs[k] = 0.0
            for v in range(nv):
                block[k, v] = 0.0
            for j in range(S):
                r = rv[j, k]
                if r == 0.0:
                    continue
                docs[k] += r
                for p in range(ptr[j], ptr[j + 1]):
                    block[k, words[p]] += r * counts[p]


# --------------------------------------------------------------------------- #
# HDP topic model: truncation-free local step ([TF] S.2.2, §5.3)              #
# --------------------------------------------------------------------------- #

cdef struct HDPWork:
    int64_t S, nv, ntok, cap
    double eta, alpha, w_eta, inv_w
    bint exact
    Sticks st              # beta_k = V_k prod_{l<k}(1 - V_l), V ~ Beta(1, gamma) beyond the K global sticks
    const int64_t *tptr    # S + 1 token offsets
    const int32_t *tw      # local word id of every token
    int32_t *z             # topic of every token
    # k-inner arrays (row stride cap), re-laid out when cap grows
    double *wk             # nv x cap: lambda_kw + n^B_kw
    int32_t *njk           # S x cap
    # per topic
    double *den            # Lambda_k + n^B_k
    double *inv            # 1 / den
    int64_t *nk
    int64_t *M             # sum_j m_jk (tables)
    double *ab             # alpha beta_k
    double ab_new          # alpha beta_new
    double *cw             # cap + 1 cumulative weights
    # sums over the kept samples, by stick position (zeroed when cap grows)
    double *acc_kw         # nv x cap: sum_s n^B_kw
    double *acc_m          # sum_s M_k
    int64_t *acc_nk        # sum_s n^B_k
    int64_t acc_L          # positions that held a sample


cdef int hdp_reserve(HDPWork *w, int64_t need) except -1 nogil:
    cdef int64_t cap = w.cap if w.cap > 0 else 8, i
    if need <= w.cap:
        return 0
    while cap < need:
        cap *= 2
    _resize_rows(<void **>&w.acc_kw, w.nv, w.cap, cap, sizeof(double))
    _resize(<void **>&w.acc_m, cap * sizeof(double))
    _resize(<void **>&w.acc_nk, cap * sizeof(int64_t))
    for i in range(w.nv):
        memset(w.acc_kw + i * cap + w.cap, 0, (cap - w.cap) * sizeof(double))
    memset(w.acc_m + w.cap, 0, (cap - w.cap) * sizeof(double))
    memset(w.acc_nk + w.cap, 0, (cap - w.cap) * sizeof(int64_t))
    _resize_rows(<void **>&w.wk, w.nv, w.cap, cap, sizeof(double))
    _resize_rows(<void **>&w.njk, w.S, w.cap, cap, sizeof(int32_t))
    _resize(<void **>&w.den, cap * sizeof(double))
    _resize(<void **>&w.inv, cap * sizeof(double))
    _resize(<void **>&w.nk, cap * sizeof(int64_t))
    _resize(<void **>&w.M, cap * sizeof(int64_t))
    sticks_reserve(&w.st, cap)
    _resize(<void **>&w.ab, cap * sizeof(double))
    _resize(<void **>&w.cw, (cap + 1) * sizeof(double))
    w.cap = cap
    return 0


cdef void hdp_free(HDPWork *w) noexcept nogil:
    free(w.z); free(w.wk); free(w.njk); free(w.den); free(w.inv); free(w.nk); free(w.M)
    free(w.ab); free(w.cw); free(w.acc_kw); free(w.acc_m); free(w.acc_nk)
    sticks_free(&w.st)


cdef inline void hdp_weights(HDPWork *w) noexcept nogil:
    """alpha beta_k = alpha V_k prod_{l<k}(1 - V_l) and alpha beta_new from the sticks."""
    cdef int64_t k
    _stick_prefix(w.st.log1mv, w.st.cum, w.st.L)
    for k in range(w.st.L):
        w.ab[k] = w.alpha * exp(w.st.logv[k] + w.st.cum[k])
    w.ab_new = w.alpha * exp(w.st.cum[w.st.L])


cdef int hdp_new_stick(HDPWork *w, bnp_bitgen_t *g) except -1 nogil:
    """Instantiate topic L at the prior: lambda = eta, V_L ~ Beta(1, gamma)."""
    cdef int64_t k = w.st.L, i
    hdp_reserve(w, k + 1)
    for i in range(w.nv):
        w.wk[i * w.cap + k] = w.eta
    for i in range(w.S):
        w.njk[i * w.cap + k] = 0
    w.den[k] = w.w_eta
    w.inv[k] = 1.0 / w.w_eta
    w.nk[k] = 0
    w.M[k] = 0
    sticks_new(&w.st, g)
    w.ab[k] = w.alpha * exp(w.st.logv[k] + w.st.cum[k])
    w.ab_new = w.alpha * exp(w.st.cum[k + 1])
    return 0


cdef inline void hdp_move(HDPWork *w, int64_t j, int64_t t, int64_t k, int sign) noexcept nogil:
    cdef int64_t i = w.tw[t] * w.cap + k
    w.wk[i] += sign
    w.njk[j * w.cap + k] += sign
    w.nk[k] += sign
    w.den[k] += sign
    w.inv[k] = 1.0 / w.den[k]


cdef int64_t hdp_sample_token(HDPWork *w, int64_t j, int64_t t, bnp_bitgen_t *g) except -1 nogil:
    """Draw z of token t of document j (removed from the counts) ([TF] S.2.2, counts over the whole minibatch):
    p(k) ∝ (n_jk + alpha beta_k)(n^B_kw + lambda_kw)/(n^B_k + Lambda_k), new ∝ alpha beta_new / W."""
    cdef int64_t k, L = w.st.L, lo, hi, mid
    cdef const double *row_w = w.wk + w.tw[t] * w.cap
    cdef const int32_t *row_j = w.njk + j * w.cap
    cdef double total = 0.0, target
    for k in range(L):
        total += (row_j[k] + w.ab[k]) * row_w[k] * w.inv[k]
        w.cw[k] = total
    total += w.ab_new * w.inv_w
    w.cw[L] = total
    target = bnp_rng_uniform(g) * total
    lo, hi = 0, L
    while lo < hi:                               # first k with cw[k] > target
        mid = (lo + hi) // 2
        if w.cw[mid] > target:
            hi = mid
        else:
            lo = mid + 1
    if lo < L:
        return lo
    # a new topic: the uninstantiated topics share the word weight 1/W, so the
    # token picks one in proportion to beta_k (sticks_taken)
    while True:
        hdp_new_stick(w, g)
        if sticks_taken(&w.st, w.exact, g):
            return w.st.L - 1


cdef int hdp_sweep_tokens(HDPWork *w, bint initial, bnp_bitgen_t *g) except -1 nogil:
    cdef int64_t j, t, k
    for j in range(w.S):
        for t in range(w.tptr[j], w.tptr[j + 1]):
            if not initial:
                hdp_move(w, j, t, w.z[t], -1)
            k = hdp_sample_token(w, j, t, g)
            w.z[t] = <int32_t>k
            hdp_move(w, j, t, k, 1)
    return 0


cdef void hdp_sample_tables(HDPWork *w, const bnp_stirling_t *table, bnp_bitgen_t *g) noexcept nogil:
    """m_jk ~ Antoniak(n_jk, alpha beta_k); M_k = sum_j m_jk ([TF] S.2 eq 3)."""
    cdef int64_t j, k, n
    cdef double c
    for k in range(w.st.L):
        w.M[k] = 0
    for j in range(w.S):
        for k in range(w.st.L):
            n = w.njk[j * w.cap + k]
            if n > 0:
                c = w.ab[k] if w.ab[k] > 1e-300 else 1e-300     # beta_k may underflow
                w.M[k] += sample_tables(table, n, c, g)


cdef void hdp_accumulate(HDPWork *w) noexcept nogil:
    """Add the current sample (z and the table counts) to the sums, by stick position."""
    cdef int64_t t, k
    for t in range(w.ntok):
        w.acc_kw[w.tw[t] * w.cap + w.z[t]] += 1.0
        w.acc_nk[w.z[t]] += 1
    for k in range(w.st.L):
        w.acc_m[k] += w.M[k]
    if w.st.L > w.acc_L:
        w.acc_L = w.st.L


cdef int hdp_sample_sticks(HDPWork *w, bnp_bitgen_t *g) except -1 nogil:
    """V_k ~ Beta(u_k + M_k, v_k + sum_{l>k} M_l) (the conjugate update of S.2.2, with its printed exponent v_k - a read as v_k - 1); drop trailing empty topics beyond K."""
    sticks_sample(&w.st, w.M, w.nk, g)
    hdp_weights(w)
    return 0


cdef struct HDPLocalSettings:
    # the truncation-free local sampler of the HDP; from Python, a dict with these keys (every key required)
    double eta           # topic Dirichlet prior
    double gamma         # top-level concentration
    double alpha         # document-level concentration
    int sweeps           # burn-in sweeps before the first sample
    bint exact           # new topics by the retrospective walk (else the next-stick rule)
    int n_samples        # samples averaged into the statistics (at least 1)


def hdp_local_step(const int64_t[::1] ptr, const int32_t[::1] words, const int32_t[::1] counts,  # IN minibatch
                   const int32_t[::1] vocab,                                                     # IN
                   const double[:, ::1] gwords, const double[::1] row_tilde,                     # IN state
                   const int64_t[::1] rows, double scale, const double[::1] sizes,               # IN state
                   HDPLocalSettings settings, rng,                                               # IN
                   StirlingTable stirling,                                                       # IN/OUT cache
                   int32_t[:, ::1] trace=None):                                                  # OUT (optional)
    """Truncation-free local step of the HDP topic model on one minibatch ([TF] S.2.2, §5.3).

    Collapsed Gibbs over the topics z of all minibatch tokens (q(phi_k)
    integrated out, counts pooled over the minibatch), the table counts
    m_jk (Antoniak) and the sticks V_k (q(V_k) as prior; Beta(1, gamma) beyond
    the K instantiated topics). Initialisation: V_k ~ q(V_k), every token
    given the earlier ones, tables; then ``sweeps + n_samples - 1`` times:
    sticks, tokens, tables. New topics: retrospective walk (``exact``) or
    the literal next-stick rule.

    The statistics are the average over ``n_samples`` samples ([TF] §2.3 "one
    (or more) samples", S.2.1 footnote 3): the state after sweep ``sweeps``
    (the initialisation when ``sweeps`` is 0) and after each further sweep,
    labelled by stick position (the empirical q(z) of the samples). One sample
    is the last state after ``sweeps`` sweeps.

    Parameters
    ----------
    ptr, words, counts, vocab : the minibatch (``Minibatch``)
    gwords, row_tilde, rows, scale, sizes : the global state (``StickState``;
        sizes are expected table counts)
    settings : dict
        Every key required: ``eta``, ``gamma``, ``alpha`` (topic Dirichlet
        prior, top-level and document-level concentrations), ``sweeps``
        (burn-in sweeps before the first sample), ``exact`` (new topics by
        the retrospective walk) and ``n_samples`` (samples averaged into the
        statistics, at least 1).
    rng : numpy.random.Generator
    stirling : bnpcore.kernels.stirling.StirlingTable
        Grown here to the longest minibatch document (at most its cap; longer
        counts use the seating sampler).
    trace : int32 array of shape (sweeps + n_samples - 1, n_tokens), optional
        OUT: topic (stick position) of every token after every sweep.

    Returns
    -------
    n_new : int
        Topics instantiated (those holding tokens in some sample), appended
        after the K.
    block : ndarray of shape (K + n_new, n_batch_words)
        n^B_kw, minibatch word counts of every topic (averaged over the samples).
    tables : ndarray of shape (K + n_new,)
        sum_j m_jk, minibatch table counts of every topic (averaged).
    """
    cdef double eta = settings.eta, gamma = settings.gamma, alpha = settings.alpha
    cdef int sweeps = settings.sweeps, n_samples = settings.n_samples
    cdef bint exact = settings.exact
    cdef HDPWork w
    cdef int64_t S = ptr.shape[0] - 1, nv = vocab.shape[0], K = rows.shape[0], W = gwords.shape[1]
    cdef int64_t j, k, i, p, c, s, t, kout, ntok = 0, longest = 0, n, total_sweeps = sweeps + n_samples - 1
    cdef double inv_samples = 1.0 / n_samples if n_samples > 0 else 0.0
    cdef int64_t[::1] remap
    cdef double[:, ::1] bv
    cdef double[::1] mv
    cdef int64_t[::1] tpv
    cdef int32_t[::1] twv
    cdef bint do_trace = trace is not None
    cdef bnp_bitgen_t *g = bitgen_of(rng)
    if sizes.shape[0] != K or row_tilde.shape[0] != gwords.shape[0]:
        raise ValueError("inconsistent global state")
    if sweeps < 0 or n_samples < 1:
        raise ValueError(f"need sweeps >= 0 and n_samples >= 1, got {sweeps} and {n_samples}")
    for j in range(S):
        n = 0
        for p in range(ptr[j], ptr[j + 1]):
            n += counts[p]
        ntok += n
        longest = max(longest, n)
    if trace is not None and (trace.shape[0] != total_sweeps or trace.shape[1] != ntok):
        raise ValueError(f"trace must have shape ({total_sweeps}, {ntok})")
    stirling.reserve(min(longest, BNP_STIRLING_MAX_N))
    tptr = np.empty(S + 1, dtype=np.int64)
    tword = np.empty(ntok, dtype=np.int32)
    tpv, twv = tptr, tword
    t = 0
    for j in range(S):
        tpv[j] = t
        for p in range(ptr[j], ptr[j + 1]):
            for c in range(counts[p]):
                twv[t] = words[p]
                t += 1
    tpv[S] = t
    memset(&w, 0, sizeof(HDPWork))
    w.S, w.nv, w.ntok, w.st.K, w.st.L, w.st.g = S, nv, ntok, K, K, gamma
    w.eta, w.alpha, w.w_eta, w.inv_w, w.exact = eta, alpha, W * eta, 1.0 / W, exact
    w.tptr = &tpv[0]
    w.tw = &twv[0] if ntok else NULL
    try:
        with rng.bit_generator.lock, nogil:
            _resize(<void **>&w.z, ntok * sizeof(int32_t))
            hdp_reserve(&w, K + 8)
            memset(w.njk, 0, S * w.cap * sizeof(int32_t))
            for k in range(K):
                for i in range(nv):
                    w.wk[i * w.cap + k] = eta + scale * gwords[rows[k], vocab[i]]
                w.den[k] = w.w_eta + scale * row_tilde[rows[k]]
                w.inv[k] = 1.0 / w.den[k]
                w.nk[k] = 0
            sticks_start(&w.st, &sizes[0] if K else NULL, g)
            hdp_weights(&w)
            hdp_sweep_tokens(&w, True, g)
            hdp_sample_tables(&w, &stirling.table, g)
            if sweeps == 0:
                hdp_accumulate(&w)
            for s in range(total_sweeps):
                hdp_sample_sticks(&w, g)
                hdp_sweep_tokens(&w, False, g)
                hdp_sample_tables(&w, &stirling.table, g)
                if s >= sweeps - 1:
                    hdp_accumulate(&w)
                if do_trace:
                    for t in range(ntok):
                        trace[s, t] = w.z[t]
        remap, kout = kept_components(w.acc_nk, w.acc_L, K)     # new topics that hold tokens in a sample
        block = np.empty((kout, nv), dtype=np.float64)
        tables = np.empty(kout, dtype=np.float64)
        bv, mv = block, tables
        with nogil:
            for k in range(w.acc_L):
                if remap[k] >= 0:
                    mv[remap[k]] = w.acc_m[k] * inv_samples
                    for i in range(nv):
                        bv[remap[k], i] = w.acc_kw[i * w.cap + k] * inv_samples
        return kout - K, block, tables
    finally:
        hdp_free(&w)


# --------------------------------------------------------------------------- #
# HDP: the online variational baseline of Wang, Paisley & Blei (2011) (§5.4 b)  #
# --------------------------------------------------------------------------- #

cdef extern from *:
    """
    #include <math.h>
    #include <stdint.h>
    #include <string.h>
    #include "bnpcore/internal/simd.h"
    /* The softmax below is compiled for AVX-512 (with GCC), AVX2 and the baseline
     * ISA (function multiversioning, as BNP_SIMD_CLONES), without FMA contraction
     * and with the reduction order written out, so every clone gives the same
     * bits (on 50,000 short texts the AVX-512 clone took 0.84 of the AVX2 one's
     * time, identical results; benchmarks/results/bench_user_path.txt). */

    /* the selects vectorise only if comparisons may not trap (GCC -ftrapping-math
     * keeps them as branches); the results are the same */
    #if defined(__GNUC__) && !defined(__clang__)
    #pragma GCC push_options
    #pragma GCC optimize("no-trapping-math", "fp-contract=off")
    #endif

    #include "bnpcore/internal/fastmath.h"

    /* Each of the `rows` rows of v (n entries each, row-major) <- exp(v - lse) with
     * lse = log sum exp(v) of the row. With `prior` (n entries), also cross[r] =
     * sum_i p_i (prior_i - log p_i), the entropy term of a bound (an entry with
     * p_i = 0 adds nothing). The row's maximum is that of the scan "m = v[0];
     * m = v[i] if v[i] > m" (a NaN after v[0] is skipped), its sums four running
     * sums in a fixed order. The exps run over all rows at once (short rows
     * leave no short vector loops). Scratch: e (rows x n), mx (rows). */
    #if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
    __attribute__((target_clones("avx512f", "avx2", "default")))    /* fp-contract off: the same bits in each */
    #else
    BNP_SIMD_CLONES
    #endif
    static void svi__softmax_rows(double *restrict v, int64_t rows, int64_t n, const double *restrict prior,
                                  double *restrict cross, double *restrict e, double *restrict mx) {
        int64_t r, i, l, N = rows * n;
        const double *row;
        for (r = 0; r < rows; ++r) {
            double m[4];
            row = v + r * n;
            m[0] = m[1] = m[2] = m[3] = row[0];
            for (i = 1; i + 4 <= n; i += 4)
                for (l = 0; l < 4; ++l) m[l] = row[i + l] > m[l] ? row[i + l] : m[l];
            for (; i < n; ++i) m[0] = row[i] > m[0] ? row[i] : m[0];
            for (l = 1; l < 4; ++l) m[0] = m[l] > m[0] ? m[l] : m[0];
            mx[r] = m[0];
            for (i = 0; i < n; ++i) e[r * n + i] = row[i] - m[0];
        }
        for (i = 0; i < N; ++i) e[i] = bnp_exp_neg(e[i]);
        for (r = 0; r < rows; ++r, v += n, e += n) {
            double s[4] = {0.0, 0.0, 0.0, 0.0}, a[4] = {0.0, 0.0, 0.0, 0.0}, tot, inv, lr;
            for (i = 0; i + 4 <= n; i += 4)
                for (l = 0; l < 4; ++l) s[l] += e[i + l];
            for (; i < n; ++i) s[0] += e[i];
            tot = (s[0] + s[1]) + (s[2] + s[3]);
            if (prior != NULL) {
                lr = mx[r] + log(tot);
                for (i = 0; i + 4 <= n; i += 4)
                    for (l = 0; l < 4; ++l) a[l] += e[i + l] > 0.0 ? e[i + l] * (prior[i + l] - v[i + l]) : 0.0;
                for (; i < n; ++i) a[0] += e[i] > 0.0 ? e[i] * (prior[i] - v[i]) : 0.0;
                cross[r] = ((a[0] + a[1]) + (a[2] + a[3])) / tot + lr;
            }
            inv = 1.0 / tot;
            for (i = 0; i < n; ++i) v[i] = e[i] * inv;
        }
    }

    #if defined(__GNUC__) && !defined(__clang__)
    #pragma GCC pop_options
    #endif
    """
    void svi__softmax_rows(double *v, int64_t rows, int64_t n, const double *prior, double *cross, double *e,
                           double *mx) noexcept nogil


def softmax_rows(double[:, ::1] v, prior=None):
    """The document step's softmax, for tests: a copy of ``v`` with each row
    replaced by exp(row - log sum exp(row)), and (with ``prior``, one entry per
    column; else zeros) per row the entropy term sum_i p_i (prior_i - log p_i)."""
    cdef double[:, ::1] out = np.array(v, dtype=np.float64, order="C", copy=True)
    cdef Py_ssize_t R = out.shape[0], n = out.shape[1]
    cdef double[::1] pv, cross = np.zeros(R), e = np.empty(max(R * n, 1)), mx = np.empty(max(R, 1))
    if n == 0:
        raise ValueError("rows must have at least one entry")
    if prior is not None:
        pv = np.ascontiguousarray(prior, dtype=np.float64)
        if pv.shape[0] != n:
            raise ValueError(f"prior has {pv.shape[0]} entries for rows of {n}")
    if R:
        svi__softmax_rows(&out[0, 0], R, n, &pv[0] if prior is not None else NULL, &cross[0], &e[0], &mx[0])
    return np.asarray(out), np.asarray(cross)


cdef struct OnlineVBSettings:
    # the document-level fit of the online HDP; from Python, a dict with these keys (every key required)
    double eta           # topic Dirichlet prior
    double alpha         # document-level concentration
    int n_atoms          # T, the document's stick atoms
    bint ranked          # atoms start at the document's best topics (else uniform zeta)
    int max_iter         # iterations per document, at most ...
    double tol           # ... or until the relative change of the document bound is in [0, tol)
    bint stats           # sum the minibatch statistics (block, sizes); transform needs only doc_topic


cdef double wpb_document(const double *E, int64_t K, const int32_t *wd, const int32_t *cd, int64_t nnz,
                         const double *elog_beta, const double *zeros, const OnlineVBSettings *s,
                         double *varphi, double *zeta, double *ed, double *zc, double *dots,
                         double *entropy, double *est, double *colsum, double *crosses, double *e, double *mx,
                         int *n_iter) noexcept nogil:
    """Document-level coordinate ascent of the online HDP (Wang et al. 2011).

    E is the nv x K matrix of E[log phi_kw] (word-major). Iterates
    varphi_tk ∝ exp(sum_p c_p zeta_pt E[log phi_k w_p] + E[log beta_k]),
    zeta_pt ∝ exp(sum_k varphi_tk E[log phi_k w_p] + E[log pi_t]), and the
    document sticks Beta(1 + N_t, alpha + sum_{s>t} N_s); the first three
    iterations leave out both stick terms (as Wang et al.'s code). It stops
    after max_iter iterations or when the relative change of the document
    bound is in [0, tol): from the second iteration on (``ranked`` false), or
    from the fifth, after two iterations with the stick terms (``ranked``).

    Initialisation (unstated in the paper): with ``ranked``, atom t points to
    the document's t-th best topic by sum_p c_p E[log phi_k w_p] + E[log beta_k],
    and zeta follows; otherwise zeta is uniform, as in the reference code.
    (Uniform zeta makes every atom the same mixture of topics; only the stick
    terms, from the fourth iteration, can break that symmetry, and the
    document usually converges before.) Scratch: ed (nnz x K), zc and dots (nnz x T),
    entropy (nnz), est, colsum and crosses (T), e (T x K), mx (max(nnz, T));
    ``zeros`` holds max(K, T) zeros.
    Returns the document bound.
    """
    cdef int64_t T = s.n_atoms
    cdef double alpha = s.alpha, tol = s.tol
    cdef bint ranked = s.ranked
    cdef int max_iter = s.max_iter
    cdef int64_t t, k, p, best
    cdef int it = 0, min_iter = 5 if ranked else 0
    cdef bint need_bound, need_sticks
    cdef double d, g, h, dg, elv, el1mv, cum, acc, cross = 0.0
    cdef double bound = 0.0, old = -INFINITY, conv = INFINITY
    cdef double *row = varphi
    for p in range(nnz):                                     # the document's rows of E
        memcpy(ed + p * K, E + wd[p] * K, K * sizeof(double))
    if ranked:
        for k in range(K):                                   # document scores of the topics
            row[k] = elog_beta[k]
        for p in range(nnz):
            for k in range(K):
                row[k] += cd[p] * ed[p * K + k]
        for t in range(T if T < K else K):                   # ranks, in colsum
            best = 0
            for k in range(1, K):
                if row[k] > row[best]:
                    best = k
            colsum[t] = best
            row[best] = -INFINITY
        for t in range(K, T):                                # more atoms than topics: cycle
            colsum[t] = colsum[t % K]
        for p in range(nnz):
            for t in range(T):
                zeta[p * T + t] = ed[p * K + <int64_t>colsum[t]]
        svi__softmax_rows(zeta, nnz, T, NULL, NULL, zc, mx)
    else:
        for p in range(nnz * T):
            zeta[p] = 1.0 / T
    for t in range(T):
        est[t] = 0.0
    while it < max_iter and (it < min_iter or conv < 0.0 or conv > tol):
        bound = 0.0
        # the stopping rule compares the bounds of iterations min_iter - 2 and on (and the last one is returned):
        # those before are skipped, and the sticks (E[log pi]) enter from the fourth iteration, so they are
        # needed from the third on
        need_bound = it >= min_iter - 2 or it == max_iter - 1
        need_sticks = need_bound or it >= 2
        if not ranked and it < 3:
            # Uniform start, no stick terms yet: zeta stays exactly uniform and
            # every atom has the same varphi row, so compute that row once.
            memset(varphi, 0, K * sizeof(double))
            for p in range(nnz):
                for k in range(K):
                    varphi[k] += cd[p] * ed[p * K + k]
            for k in range(K):
                varphi[k] /= T
            svi__softmax_rows(varphi, 1, K, elog_beta, &cross, e, mx)
            bound += T * cross
            for t in range(1, T):
                memcpy(varphi + t * K, varphi, K * sizeof(double))
            for p in range(nnz):
                d = 0.0
                for k in range(K):
                    d += ed[p * K + k] * varphi[k]
                for t in range(T):
                    dots[p * T + t] = d
                    zeta[p * T + t] = 1.0 / T
                entropy[p] = log(<double>T)
        else:
            for p in range(nnz):                             # varphi = (c zeta)^T ed (+ E[log beta])
                for t in range(T):
                    zc[p * T + t] = cd[p] * zeta[p * T + t]
            if nnz > 0:
                gemm(True, False, T, K, nnz, 1.0, zc, T, ed, K, 0.0, varphi, K)
            else:
                memset(varphi, 0, T * K * sizeof(double))
            if it >= 3:
                for t in range(T):
                    for k in range(K):
                        varphi[t * K + k] += elog_beta[k]
            svi__softmax_rows(varphi, T, K, elog_beta if need_bound else NULL, crosses, e, mx)
            if need_bound:
                for t in range(T):
                    bound += crosses[t]
            gemm(False, True, nnz, T, K, 1.0, ed, K, varphi, K, 0.0, dots, T)     # dots = ed varphi^T
            for p in range(nnz):                             # zeta
                for t in range(T):
                    zeta[p * T + t] = dots[p * T + t] + est[t] if it >= 3 else dots[p * T + t]
            # entropy[p] = -sum_t zeta log zeta
            svi__softmax_rows(zeta, nnz, T, zeros if need_bound else NULL, entropy, zc, mx)
        if not need_sticks:
            it += 1
            continue
        for t in range(T):
            colsum[t] = 0.0
        for p in range(nnz):
            for t in range(T):
                colsum[t] += cd[p] * zeta[p * T + t]
        cum = 0.0                                            # document sticks
        acc = 0.0
        for t in range(T):
            acc += colsum[t]
        for t in range(T - 1):
            acc -= colsum[t]
            g = 1.0 + colsum[t]
            h = alpha + acc
            dg = bnp_digamma(g + h)
            elv = bnp_digamma(g) - dg
            el1mv = bnp_digamma(h) - dg
            est[t] = elv + cum
            cum += el1mv
            if need_bound:
                bound += log(alpha) + bnp_lgamma(g) + bnp_lgamma(h) - bnp_lgamma(g + h) \
                    + (1.0 - g) * elv + (alpha - h) * el1mv
        est[T - 1] = cum
        if need_bound:
            for p in range(nnz):                             # assignments and words
                acc = entropy[p]
                for t in range(T):
                    acc += zeta[p * T + t] * (est[t] + dots[p * T + t])
                bound += cd[p] * acc
            conv = (bound - old) / -old if old > -INFINITY else INFINITY
            old = bound
        it += 1
    n_iter[0] = it
    return bound


def online_vb_elogphi(const double[:, ::1] gwords, const double[::1] row_tilde, const int64_t[::1] rows,
                      double scale, double eta, const int32_t[::1] vocab, int n_threads=1):
    """E[log phi_kw] = psi(lambda_kw) - psi(Lambda_k) of the words ``vocab``
    (global ids) for the topics ``rows`` of the lazily scaled state: float64
    (len(vocab), K), word-major (a document gathers its words' rows). What
    ``hdp_online_vb_step`` computes for its minibatch unless given it."""
    cdef Py_ssize_t K = rows.shape[0], nv = vocab.shape[0], W = gwords.shape[1], k, v
    elogphi_k = np.empty((K, nv), dtype=np.float64)     # topic-major (row writes), then transposed
    digtot = np.empty(K, dtype=np.float64)
    cdef double[:, ::1] ek = elogphi_k
    cdef double[::1] dt = digtot
    for k in range(K):
        dt[k] = bnp_digamma(W * eta + scale * row_tilde[rows[k]])
    for k in prange(K, nogil=True, schedule="static", num_threads=n_threads):
        for v in range(nv):
            ek[k, v] = bnp_digamma(eta + scale * gwords[rows[k], vocab[v]]) - dt[k]
    return np.ascontiguousarray(elogphi_k.T)


def hdp_online_vb_step(const int64_t[::1] ptr, const int32_t[::1] words, const int32_t[::1] counts,  # IN minibatch
                       const int32_t[::1] vocab,                                                     # IN
                       const double[:, ::1] gwords, const double[::1] row_tilde,                     # IN state
                       const int64_t[::1] rows, double scale, const double[::1] elog_beta,           # IN state
                       OnlineVBSettings settings,                                                    # IN
                       tuple out,                                                                    # OUT
                       int n_threads=1, elogphi=None):
    """Local step of the online HDP of Wang, Paisley & Blei (2011) on a minibatch (§5.4 b).

    ``settings`` is a dict ``{"eta", "alpha", "n_atoms", "ranked", "max_iter",
    "tol", "stats"}`` (every key required): the topic prior, the document-level
    concentration, the T atoms of a document, their initialisation, the
    per-document stopping rule (``wpb_document``) and whether to sum the
    minibatch statistics (``stats`` false: ``block`` and ``sizes`` are left
    alone and may be empty, as for ``transform``, which needs only
    ``doc_topic``). ``out = (block, sizes, doc_topic, bound, n_iter)``:
    float64 (K, Vb) (or (0, Vb) without stats), (K,) (or (0,)), (S, K) or
    (0, K), (S,) and int32 (S,), written here.

    Every document runs ``wpb_document`` (in parallel over documents); the
    minibatch statistics are then summed serially, in document order, so the
    result does not depend on the number of threads:
    ``block[k, v] = sum_j sum_t varphi_jtk sum_{p: w_p = v} c_p zeta_jpt``,
    ``sizes[k] = sum_j sum_t varphi_jtk``, and (unless it has shape (0, K))
    ``doc_topic[j, k] = sum_t varphi_jtk N_jt`` (expected topic counts).
    ``bound`` and ``n_iter`` receive each document's bound and iterations.

    ``elogphi``: E[log phi] of the minibatch's words, (nv, K) as
    ``online_vb_elogphi`` computes it, when the caller has it already
    (``OnlineVB.transform`` computes it once for all its chunks); by default
    the step computes it.
    """
    cdef double[:, ::1] block, doc_topic
    cdef double[::1] sizes, bound
    cdef int32_t[::1] n_iter
    block, sizes, doc_topic, bound, n_iter = out
    cdef double eta = settings.eta
    cdef bint ranked = settings.ranked, stats = settings.stats
    cdef Py_ssize_t S = ptr.shape[0] - 1, nv = vocab.shape[0], K = rows.shape[0], W = gwords.shape[1]
    cdef Py_ssize_t T = settings.n_atoms, nnz = words.shape[0], j, k, t, v, i
    cdef int64_t p, maxnnz = 0
    cdef bint keep = doc_topic.shape[0] == S
    if (block.shape[0] != (K if stats else 0) or block.shape[1] != nv or sizes.shape[0] != (K if stats else 0)
            or elog_beta.shape[0] != K):
        raise ValueError("output shapes do not match the state (block and sizes are empty without stats)")
    if bound.shape[0] != S or n_iter.shape[0] != S or doc_topic.shape[0] not in (0, S) or doc_topic.shape[1] != K:
        raise ValueError("per-document outputs do not match the minibatch")
    if T < 1 or K < 1:
        raise ValueError(f"need at least one topic and one document atom, got {K} and {T}")
    for j in range(S):
        maxnnz = max(maxnnz, ptr[j + 1] - ptr[j])
    if elogphi is None:
        elogphi = online_vb_elogphi(gwords, row_tilde, rows, scale, eta, vocab, n_threads)
    elif elogphi.shape != (nv, K) or elogphi.dtype != np.float64 or not elogphi.flags.c_contiguous:
        raise ValueError(f"elogphi must be a C-contiguous float64 array of shape {(nv, K)}")
    varphi = np.empty((S, T, K), dtype=np.float64)
    zeta = np.empty((nnz, T), dtype=np.float64)
    blockt = np.zeros((nv if stats else 0, K), dtype=np.float64)
    cdef double[:, ::1] bt = blockt, zv = zeta
    cdef const double[:, ::1] ev = elogphi
    cdef double[:, :, ::1] vv = varphi
    cdef double *scratch = NULL
    zeros = np.zeros(max(K, T), dtype=np.float64)
    cdef double[::1] zr = zeros
    cdef double coef
    cdef int it
    cdef const double *evp = &ev[0, 0] if nv else NULL     # no minibatch words: only empty documents
    contrib = np.empty((max(maxnnz, 1), K), dtype=np.float64)
    weighted = np.empty((max(maxnnz, 1), T), dtype=np.float64)
    cdef double[:, ::1] cv = contrib, zcv = weighted
    cdef int64_t n
    with nogil:
        with parallel(num_threads=n_threads):
            scratch = <double *>malloc((maxnnz * (K + 2 * T + 1) + 3 * T + T * K + max(maxnnz, T) + 1)
                                       * sizeof(double))
            if scratch != NULL:
                for j in prange(S, schedule="dynamic"):
                    bound[j] = wpb_document(evp, K, &words[ptr[j]] if ptr[j] < nnz else NULL,
                                            &counts[ptr[j]] if ptr[j] < nnz else NULL, ptr[j + 1] - ptr[j],
                                            &elog_beta[0], &zr[0], &settings, &vv[j, 0, 0],
                                            &zv[ptr[j], 0] if ptr[j] < nnz else NULL, scratch,
                                            scratch + maxnnz * K, scratch + maxnnz * (K + T),
                                            scratch + maxnnz * (K + 2 * T), scratch + maxnnz * (K + 2 * T + 1),
                                            scratch + maxnnz * (K + 2 * T + 1) + T,
                                            scratch + maxnnz * (K + 2 * T + 1) + 2 * T,
                                            scratch + maxnnz * (K + 2 * T + 1) + 3 * T,
                                            scratch + maxnnz * (K + 2 * T + 1) + 3 * T + T * K, &it)
                    n_iter[j] = it
                free(scratch)
            else:
                for j in prange(S, schedule="static"):
                    n_iter[j] = -1
        if stats:
            for k in range(K):
                sizes[k] = 0.0
        for j in range(S):                                   # in document order: thread-independent sums
            n = ptr[j + 1] - ptr[j]
            if stats:
                for t in range(T):
                    for k in range(K):
                        sizes[k] += vv[j, t, k]
                if not ranked and n_iter[j] <= 3:            # still symmetric: sum_t zeta_pt varphi_tk = varphi_0k
                    for p in range(n):
                        for k in range(K):
                            bt[words[ptr[j] + p], k] += counts[ptr[j] + p] * vv[j, 0, k]
                else:
                    for p in range(n):                       # contribution (c zeta) varphi, n x K
                        for t in range(T):
                            zcv[p, t] = counts[ptr[j] + p] * zv[ptr[j] + p, t]
                    gemm(False, False, n, K, T, 1.0, &zcv[0, 0], T, &vv[j, 0, 0], K, 0.0, &cv[0, 0], K)
                    for p in range(n):
                        for k in range(K):
                            bt[words[ptr[j] + p], k] += cv[p, k]
            if keep:
                for k in range(K):
                    doc_topic[j, k] = 0.0
                for t in range(T):
                    coef = 0.0
                    for p in range(ptr[j], ptr[j + 1]):
                        coef = coef + counts[p] * zv[p, t]
                    for k in range(K):
                        doc_topic[j, k] += coef * vv[j, t, k]
    for j in range(S):
        if n_iter[j] < 0:
            raise MemoryError("cannot allocate the document scratch space")
    if stats:
        np.asarray(block)[:] = blockt.T
