"""Kernels of the NGGP mixture of multinomials ([NRM], Tank, Foti & Fox 2015).

ADF-NRM (Alg. 1), EP-NRM (supp Alg. 2) and the collapsed Gibbs sampler, each one
call over many documents with the GIL released. Cluster state lives in arrays
owned by the Python layer (``bnpcore.models.nrm``) with spare capacity: a kernel
that needs a new cluster slot (or site space) when none is left returns the
position it stopped at, the caller grows the arrays and calls again.

Documents are a CSR count matrix (``indptr``, ``indices``, ``counts``; one
``bnp_csr_t`` in the nogil code).

Notation: ``lam`` (K x W) Dirichlet parameters of q(phi_k), ``lam_tot`` their row
sums Lambda_k, ``S`` soft masses S_k = sum_i q_ik, ``logP`` = sum_i log(1 - q_ik)
(for E[K], supp (18)), ``V = log U`` of the auxiliary variable.

The Dirichlet-multinomial log-likelihoods of a document under every cluster are
the hot loop (O(K nnz) per document): ``sum_w lgamma(x_w + c_w) - lgamma(x_w)`` is
the header's ``bnp_log_rising``, the log of a running product of rising factorials
x (x+1) ... (x+c-1), rescaled before it can leave [1e-150, 1e150], i.e. one
multiplication per (word, cluster) pair and a log every few dozen pairs.
"""
import numpy as np
cimport numpy as cnp
from libc.math cimport exp, log, log1p, expm1, fabs, INFINITY, NAN, isfinite
from libc.stdint cimport int32_t, int64_t, uint8_t
from cython.parallel cimport prange

from bnpcore.kernels.sparse cimport bnp_csr_t, csr_view
from bnpcore.kernels.special cimport bnp_dlgamma, bnp_log_rising, bnp_sample_logweights
from bnpcore.kernels.rng cimport bnp_bitgen_t, bitgen_of, bnp_rng_uniform, bnp_rng_uniform_pos

cnp.import_array()

# The scalar state of the ADF, EP and Gibbs kernels: everything but the
# per-cluster arrays, kept by the caller between kernel calls (a call may stop
# early to let the caller grow the arrays). Eight-byte fields, no padding, so
# that a NumPy structured dtype mirrors it.
cdef struct nggp_state_t:
    int64_t n_slots         # cluster slots in use, alive or dead (Gibbs: highest used + 1)
    int64_t n_alive         # alive (Gibbs: occupied) clusters
    int64_t n_obs           # ADF/EP: documents absorbed, m
    int64_t n_sites         # EP: entries of the new sites written so far
    int64_t position        # Gibbs: next document of the current sweep
    double log_u            # V = log U: warm start of the mode of q(U) (ADF/EP), the chain's V (Gibbs)
    double u_last           # the last Uhat used (NaN for sigma = 0 or no other observation)
    double change           # EP: summed total-variation change of the sites in the current epoch

# nggp_state_t as a NumPy record: the Python layer keeps one (``new_state``)
# and passes it to every kernel call, which reads and updates it.
NGGP_STATE_DTYPE = np.dtype([("n_slots", np.int64), ("n_alive", np.int64), ("n_obs", np.int64),
                             ("n_sites", np.int64), ("position", np.int64), ("log_u", np.float64),
                             ("u_last", np.float64), ("change", np.float64)])
assert NGGP_STATE_DTYPE.itemsize == sizeof(nggp_state_t)


def new_state(n_slots=0, n_alive=0, log_u=float("nan")):
    """A fresh scalar state (array of one NGGP_STATE_DTYPE record)."""
    state = np.zeros(1, dtype=NGGP_STATE_DTYPE)
    state["n_slots"], state["n_alive"] = n_slots, n_alive
    state["log_u"], state["u_last"] = log_u, float("nan")
    return state

cdef double Q_ONE = 1.0 - 1e-15      # clamp of q in log(1 - q) (E[K] recursion)
cdef double V_MIN = -700.0            # search range of V = log U
cdef double V_MAX = 700.0


cdef struct nrm_cfg:
    double eta          # Dirichlet pseudo-count per word
    double eta_tot      # W * eta
    double a
    double sigma
    double tau
    double log_a
    double eps          # new-cluster threshold
    double q_min        # responsibilities <= q_min are dropped (sparse updates and sites)
    int paper           # u_posterior == "paper": exponent n - a Ke instead of n - sigma Ke
    int exact_k         # E[K] by the recursion (1) or K (0)
    int64_t n_words


cdef int fill_cfg(nrm_cfg *c, dict p) except -1:
    c.eta = p["eta"]
    c.n_words = p["n_words"]
    c.eta_tot = c.eta * c.n_words
    c.a = p["a"]
    c.sigma = p["sigma"]
    c.tau = p["tau"]
    c.log_a = log(c.a)
    c.eps = p.get("epsilon", 0.5)
    c.q_min = p.get("min_responsibility", 0.0)
    c.paper = 1 if p.get("u_posterior", "corrected") == "paper" else 0
    c.exact_k = 1 if p.get("expected_k", "exact") == "exact" else 0
    return 0


# ---------------------------------------------------------------------------
# The NGGP functions of U (section 6.1)
# ---------------------------------------------------------------------------

cdef inline double log_u_plus_tau(double v, double tau) noexcept nogil:
    """log(e^v + tau) without overflow or cancellation."""
    if tau <= 0.0:
        return v
    cdef double lt = log(tau)
    if v > lt:
        return v + log1p(exp(lt - v))
    return lt + log1p(exp(v - lt))


cdef inline double lap_exponent(double v, const nrm_cfg *c) noexcept nogil:
    """Laplace exponent lap(U) at U = e^v: (a/sigma)((U+tau)^sigma - tau^sigma), a log1p(U/tau) at sigma = 0."""
    if c.sigma == 0.0:
        if c.tau <= 0.0:
            return INFINITY
        return c.a * log1p(exp(v - log(c.tau)))
    if c.tau <= 0.0:
        return c.a / c.sigma * exp(c.sigma * v)
    # (a/sigma) tau^sigma expm1(sigma log1p(U/tau)): no cancellation as sigma -> 0
    return c.a / c.sigma * exp(c.sigma * log(c.tau)) * expm1(c.sigma * log1p(exp(v - log(c.tau))))


cdef inline double u_exponent(double m, double ke, const nrm_cfg *c) noexcept nogil:
    """The power m - sigma Ke of 1/(U + tau) in q(U) (derived from supp eq. 20), or the printed m - a Ke."""
    return m - (c.a if c.paper else c.sigma) * ke


cdef inline double log_q_v(double v, double m, double ke, const nrm_cfg *c) noexcept nogil:
    """log q(V) up to a constant: m V - (m - sigma Ke) log(e^V + tau) - lap(e^V) (supp (17) in V = log U)."""
    return m * v - u_exponent(m, ke, c) * log_u_plus_tau(v, c.tau) - lap_exponent(v, c)


cdef inline double dlogq_v(double v, double m, double ke, const nrm_cfg *c, double *d2) noexcept nogil:
    """f'(V) / m and (through d2) f''(V) / m for f = log q(V) (section 6.2)."""
    cdef double lupt = log_u_plus_tau(v, c.tau)
    cdef double s = 1.0, one_m_s = 0.0                 # U / (U + tau), tau / (U + tau)
    if c.tau > 0.0:
        s = exp(v - lupt)
        one_m_s = exp(log(c.tau) - lupt)
    cdef double cm = u_exponent(m, ke, c)
    cdef double h = exp(c.log_a + v + (c.sigma - 1.0) * lupt)   # a U (U + tau)^(sigma - 1)
    d2[0] = (-cm * s * one_m_s - h * (one_m_s + c.sigma * s)) / m
    return (m - cm * s - h) / m


cdef double u_mode(double m, double ke, const nrm_cfg *c, double v0) noexcept nogil:
    """argmax over V = log U of q(V) (section 6.2): safeguarded Newton inside a bracket.

    The bracket [lo, hi] (f' > 0 at lo, < 0 at hi) is found by doubling steps
    from the warm start v0; a Newton step that leaves it, or a non-negative
    f'' (possible under u_posterior="paper"), is replaced by bisection.
    Returns V; m must be > 0 and sigma > 0.
    """
    cdef double d2, g, v, lo, hi, step, vn
    cdef int it
    if not isfinite(v0):
        v0 = 0.0
    v0 = min(max(v0, V_MIN), V_MAX)
    g = dlogq_v(v0, m, ke, c, &d2)
    if g == 0.0:
        return v0
    step = 1.0
    if g > 0.0:
        lo = v0
        hi = v0 + step
        while hi < V_MAX and dlogq_v(hi, m, ke, c, &d2) > 0.0:
            lo = hi
            step *= 2.0
            hi = min(v0 + step, V_MAX)
    else:
        hi = v0
        lo = v0 - step
        while lo > V_MIN and dlogq_v(lo, m, ke, c, &d2) < 0.0:
            hi = lo
            step *= 2.0
            lo = max(v0 - step, V_MIN)
    v = v0 if (v0 > lo and v0 < hi) else 0.5 * (lo + hi)
    for it in range(200):
        g = dlogq_v(v, m, ke, c, &d2)
        if g > 0.0:
            lo = v
        elif g < 0.0:
            hi = v
        else:
            return v
        vn = v - g / d2 if d2 < 0.0 else NAN
        if not (vn > lo and vn < hi):
            vn = 0.5 * (lo + hi)
        if fabs(vn - v) <= 1e-13 * (1.0 + fabs(v)) or hi - lo <= 1e-13 * (1.0 + fabs(v)):
            return vn
        v = vn
    return v


# ---------------------------------------------------------------------------
# One document of ADF / EP (Alg. 1 body; supp Alg. 2 body after the cavity)
# ---------------------------------------------------------------------------

cdef struct nrm_state:
    double *lam         # cap x n_words
    double *lam_tot     # cap
    double *S           # cap
    double *logP        # cap
    uint8_t *alive      # cap
    int64_t n_slots     # slots in use (alive or dead)
    int64_t n_alive
    int64_t cap
    double v_prev       # warm start of the U mode (NaN: none yet)
    double u_last       # the last Uhat used (NaN for sigma = 0 or no other observation)


cdef inline double expected_k(const nrm_state *st, const nrm_cfg *c) noexcept nogil:
    """E[K] = K - sum_k prod_i (1 - q_ik) (supp (18)) or K."""
    cdef double ke = st.n_alive
    cdef int64_t k
    if c.exact_k:
        for k in range(st.n_slots):
            if st.alive[k]:
                ke -= exp(st.logP[k])
    return ke


cdef inline void add_site(nrm_state *st, const nrm_cfg *c, int64_t k, double q,
                          const int32_t *ids, const int32_t *cnt, int64_t nnz, double n_tok) noexcept nogil:
    """lambda_k += q x, Lambda_k += q N, S_k += q, log P_k += log(1 - q) ([NRM] (18))."""
    cdef double *row = st.lam + k * c.n_words
    cdef int64_t i
    for i in range(nnz):
        row[ids[i]] += q * cnt[i]
    st.lam_tot[k] += q * n_tok
    st.S[k] += q
    st.logP[k] += log1p(-min(q, Q_ONE))


cdef inline void remove_site(nrm_state *st, const nrm_cfg *c, int64_t k, double q,
                             const int32_t *ids, const int32_t *cnt, int64_t nnz, double n_tok) noexcept nogil:
    """The cavity of supp (28): subtract what add_site added (lambda clamped at eta)."""
    cdef double *row = st.lam + k * c.n_words
    cdef int64_t i
    cdef double x
    for i in range(nnz):
        x = row[ids[i]] - q * cnt[i]
        row[ids[i]] = x if x > c.eta else c.eta
    x = st.lam_tot[k] - q * n_tok
    st.lam_tot[k] = x if x > c.eta_tot else c.eta_tot
    st.S[k] -= q
    st.logP[k] -= log1p(-min(q, Q_ONE))



cdef int64_t doc_step(nrm_state *st, const nrm_cfg *c,
                      const int32_t *ids, const int32_t *cnt, int64_t nnz, double n_tok,
                      double m_other, double ke, double *lw,
                      int32_t *out_k, double *out_q) noexcept nogil:
    """Responsibilities of one document, the threshold rule and the global update.

    m_other observations (with E[K] = ke) form the predictive rule (23):
    prior weight max(S_k - sigma, 0) for cluster k, a (Uhat + tau)^sigma for a
    new one. A new cluster is instantiated when its responsibility exceeds
    epsilon (Alg. 1), otherwise q is renormalised over the existing clusters.
    Every q_k > q_min is added to cluster k and, when out_k is not NULL,
    written to (out_k, out_q); the number of such k is returned. The caller
    guarantees a free slot (n_slots < cap).
    """
    cdef int64_t k, n_out = 0, K = st.n_slots
    cdef double lw_new, v, mx, tot, lse, q
    cdef double *row
    # new-cluster weight a (Uhat + tau)^sigma; with no other observation the
    # urn opens a new cluster with probability 1
    if m_other <= 0.0:
        lw_new = 0.0
        st.u_last = NAN
    elif c.sigma == 0.0:
        lw_new = c.log_a
        st.u_last = NAN
    else:
        v = u_mode(m_other, ke, c, st.v_prev)
        st.v_prev = v
        st.u_last = exp(v)
        lw_new = c.log_a + c.sigma * log_u_plus_tau(v, c.tau)
    lw_new += bnp_log_rising(NULL, cnt, nnz, NULL, c.eta, 1.0) - bnp_dlgamma(c.eta_tot, n_tok)
    mx = lw_new
    for k in range(K):
        if st.alive[k] and m_other > 0.0 and st.S[k] > c.sigma:
            lw[k] = log(st.S[k] - c.sigma) + bnp_log_rising(ids, cnt, nnz, st.lam + k * c.n_words, 0.0, 1.0) \
                    - bnp_dlgamma(st.lam_tot[k], n_tok)
            if lw[k] > mx:
                mx = lw[k]
        else:
            lw[k] = -INFINITY
    tot = 0.0
    for k in range(K):
        tot += exp(lw[k] - mx)
    q = exp(lw_new - mx)
    if q / (tot + q) > c.eps or not (tot > 0.0):
        row = st.lam + K * c.n_words
        for k in range(c.n_words):
            row[k] = c.eta
        st.lam_tot[K] = c.eta_tot
        st.S[K] = 0.0
        st.logP[K] = 0.0
        st.alive[K] = 1
        st.n_slots += 1
        st.n_alive += 1
        lw[K] = lw_new
        tot += q
        K += 1
    lse = mx + log(tot)
    for k in range(K):
        if lw[k] == -INFINITY:
            continue
        q = exp(lw[k] - lse)
        if q > c.q_min:
            add_site(st, c, k, q, ids, cnt, nnz, n_tok)
            if out_k != NULL:
                out_k[n_out] = <int32_t>k
                out_q[n_out] = q
            n_out += 1
    return n_out


cdef inline double doc_tokens(const int32_t *cnt, int64_t nnz) noexcept nogil:
    cdef double n = 0.0
    cdef int64_t i
    for i in range(nnz):
        n += cnt[i]
    return n


cdef nrm_state load_state(tuple clusters, nggp_state_t *scalars, double[::1] scratch,
                          int64_t n_words) except *:
    """The kernels' view of the cluster arrays ``clusters = (lam, lam_tot, S, logP,
    alive)``: float64 (cap, W), (cap,), (cap,), (cap,) and uint8 (cap,)."""
    cdef double[:, ::1] lam
    cdef double[::1] lam_tot, S, logP
    cdef uint8_t[::1] alive
    lam, lam_tot, S, logP, alive = clusters
    if (lam.shape[1] != n_words or lam_tot.shape[0] != lam.shape[0] or S.shape[0] != lam.shape[0]
            or logP.shape[0] != lam.shape[0] or alive.shape[0] != lam.shape[0]
            or scratch.shape[0] < lam.shape[0] + 1 or not 0 <= scalars.n_slots <= lam.shape[0]):
        raise ValueError("NRM state arrays do not match each other")
    cdef nrm_state st
    st.lam = &lam[0, 0]
    st.lam_tot = &lam_tot[0]
    st.S = &S[0]
    st.logP = &logP[0]
    st.alive = &alive[0]
    st.cap = lam.shape[0]
    st.n_slots = scalars.n_slots
    st.n_alive = scalars.n_alive
    st.v_prev = scalars.log_u
    st.u_last = scalars.u_last
    return st


cdef void store_state(const nrm_state *st, nggp_state_t *scalars) noexcept:
    scalars.n_slots = st.n_slots
    scalars.n_alive = st.n_alive
    scalars.log_u = st.v_prev
    scalars.u_last = st.u_last


cdef nggp_state_t *scalar_state(nggp_state_t[::1] state) except NULL:
    if state.shape[0] != 1:
        raise ValueError("state must be one NGGP_STATE_DTYPE record (new_state())")
    return &state[0]


def adf_run(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,  # IN corpus
            int64_t start, int64_t stop, dict params,                                          # IN
            tuple clusters, nggp_state_t[::1] state,                                           # IN/OUT
            double[::1] scratch,                                                               # scratch
            tuple sites=None):                                                                 # OUT (optional)
    """ADF-NRM (Alg. 1) over documents start..stop-1, in order.

    ``clusters = (lam, lam_tot, S, logP, alive)`` are the cluster arrays over
    all slots (module docstring; float64 (cap, W), (cap,), (cap,), (cap,),
    uint8 (cap,)). ``state`` (``new_state()``) carries the scalar state: n_slots, n_alive,
    n_obs (m, the observations already absorbed: document n uses the
    predictive rule of the first n - 1: Alg. 1 starts at n = 2), n_sites (site entries written),
    log_u (warm start of the mode of q(U)) and u_last. ``scratch`` has at least cap + 1 entries. With
    ``sites = (site_ptr, site_k, site_q)`` (int64 n_docs + 1 with ``site_ptr[start]``
    set, int32 and float64 of one capacity) the responsibilities of each
    document are appended to ``site_k``/``site_q`` (EP's initial sites).
    Returns the index of the first unprocessed document:
    ``stop``, or earlier when a cluster slot or site space must be added first.

    Equivalent, for one document x (dense NumPy over clusters k = 1..K)::

        lw = log(max(S - sigma, 0)) + logDM(x | lam)   # plus log a (U + tau)^sigma + logDM(x | eta)
        q = softmax(lw)             # new cluster if q_new > epsilon, else renormalise over 1..K
        q[q <= q_min] = 0
        lam += q[:, None] * x; S += q; logP += log1p(-q)
    """
    cdef nrm_cfg c
    fill_cfg(&c, params)
    cdef nggp_state_t *sc = scalar_state(state)
    cdef nrm_state st = load_state(clusters, sc, scratch, c.n_words)
    cdef bint store = sites is not None
    cdef int64_t[::1] site_ptr
    cdef int32_t[::1] site_k
    cdef double[::1] site_q
    cdef int64_t site_cap = 0
    cdef int64_t used = sc.n_sites, m = sc.n_obs, i, lo, n
    cdef int32_t *ok = NULL
    cdef double *oq = NULL
    if store:
        site_ptr, site_k, site_q = sites
        site_cap = site_k.shape[0]
        if site_ptr.shape[0] != indptr.shape[0] or site_q.shape[0] != site_cap:
            raise ValueError("adf_run: site arrays do not match the corpus")
    if not 0 <= start <= stop <= indptr.shape[0] - 1:
        raise ValueError("adf_run: bad document range")
    cdef bnp_csr_t docs = csr_view(indptr, indices, counts, c.n_words)
    with nogil:
        i = start
        while i < stop:
            if st.n_slots >= st.cap or (store and used + st.n_slots + 1 > site_cap):
                break
            lo = docs.indptr[i]
            n = docs.indptr[i + 1] - lo
            if store:
                ok = &site_k[0] + used
                oq = &site_q[0] + used
            n = doc_step(&st, &c, docs.indices + lo, docs.counts + lo, n, doc_tokens(docs.counts + lo, n),
                         <double>m, expected_k(&st, &c), &scratch[0], ok, oq)
            if store:
                used += n
                site_ptr[i + 1] = used
            m += 1
            i += 1
    store_state(&st, sc)
    sc.n_obs = m
    sc.n_sites = used
    return i


def ep_run(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,   # IN corpus
           int64_t start, int64_t stop, dict params,                                           # IN
           tuple clusters, nggp_state_t[::1] state,                                            # IN/OUT
           double[::1] scratch,                                                                # scratch
           tuple old_sites,                                                                    # IN
           tuple new_sites):                                                                   # OUT
    """One EP-NRM epoch (supp Alg. 2) over documents start..stop-1 of N = n_docs.

    ``clusters = (lam, lam_tot, S, logP, alive)`` as in ``adf_run``; the sites
    are CSR triples ``(ptr, k, q)`` by document (int64 n_docs + 1, int32 and
    float64 of one capacity): ``old_sites`` those of the last epoch,
    ``new_sites`` receives this epoch's.

    For document i: remove its stored site (old_k, old_q) from the clusters it
    names (the cavity, supp (28); sites of removed clusters are skipped),
    compute the predictive rule with m = N - 1 and E[K] over the other
    documents (supp (33)-(34)), run the ADF step on the cavity (new cluster if
    q_new > epsilon), store the new site in (new_k, new_q) and drop every
    cluster whose S_k fell below epsilon (``alive[k] = 0``; slots are not
    reused within an epoch). ``state``: n_slots, n_alive, n_sites (new site
    entries written), log_u (warm start), u_last, change (the sum over
    documents of the total variation between old and new site). Returns the first unprocessed
    document (stop, or earlier when a slot or site space is needed).

    E[K] over the other documents needs prod_{l != i} (1 - q_lk): log P_k is
    kept as a sum of log(1 - q) with q clamped at 1 - 1e-15, so removing a site
    is a subtraction in log space, stable even for q_ik ~ 1 (no division by
    1 - q_ik).

    Equivalent, for document i (dense)::

        S -= qbar[i]; lam -= qbar[i][:, None] * x_i          # cavity
        q = adf_step(x_i, S, lam, m=N-1); qbar[i] = q          # as adf_run
        alive &= ~(S < epsilon)
    """
    cdef const int64_t[::1] old_ptr
    cdef const int32_t[::1] old_k
    cdef const double[::1] old_q
    cdef int64_t[::1] new_ptr
    cdef int32_t[::1] new_k
    cdef double[::1] new_q
    old_ptr, old_k, old_q = old_sites
    new_ptr, new_k, new_q = new_sites
    cdef nrm_cfg c
    fill_cfg(&c, params)
    cdef nggp_state_t *sc = scalar_state(state)
    cdef nrm_state st = load_state(clusters, sc, scratch, c.n_words)
    cdef int64_t n_docs = indptr.shape[0] - 1
    cdef int64_t site_cap = new_k.shape[0], used = sc.n_sites, i, lo, n, e, f, k
    cdef double n_tok, tv = sc.change, q, dq
    cdef const int32_t *ids
    cdef const int32_t *cnt
    if old_ptr.shape[0] != n_docs + 1 or new_ptr.shape[0] != n_docs + 1 or new_q.shape[0] != site_cap:
        raise ValueError("ep_run: site arrays do not match the corpus")
    if not 0 <= start <= stop <= n_docs:
        raise ValueError("ep_run: bad document range")
    cdef bnp_csr_t docs = csr_view(indptr, indices, counts, c.n_words)
    with nogil:
        i = start
        while i < stop:
            if st.n_slots >= st.cap or used + st.n_slots + 1 > site_cap:
                break
            lo = docs.indptr[i]
            n = docs.indptr[i + 1] - lo
            ids = docs.indices + lo
            cnt = docs.counts + lo
            n_tok = doc_tokens(cnt, n)
            for e in range(old_ptr[i], old_ptr[i + 1]):
                if st.alive[old_k[e]]:
                    remove_site(&st, &c, old_k[e], old_q[e], ids, cnt, n, n_tok)
            f = doc_step(&st, &c, ids, cnt, n, n_tok, <double>(n_docs - 1), expected_k(&st, &c),
                         &scratch[0], &new_k[0] + used, &new_q[0] + used)
            new_ptr[i + 1] = used + f
            # total variation between the old and the new site (sites are tiny)
            dq = 0.0
            for e in range(old_ptr[i], old_ptr[i + 1]):
                q = old_q[e]
                for k in range(used, used + f):
                    if new_k[k] == old_k[e]:
                        q -= new_q[k]
                dq += fabs(q)
            for k in range(used, used + f):
                q = new_q[k]
                for e in range(old_ptr[i], old_ptr[i + 1]):
                    if new_k[k] == old_k[e]:
                        q = 0.0
                dq += q
            tv += 0.5 * dq
            # clusters whose mass fell below epsilon are removed (only the old site's can have shrunk)
            for e in range(old_ptr[i], old_ptr[i + 1]):
                k = old_k[e]
                if st.alive[k] and st.S[k] < c.eps:
                    st.alive[k] = 0
                    st.n_alive -= 1
            used += f
            i += 1
    store_state(&st, sc)
    sc.n_sites = used
    sc.change = tv
    return i


def dm_matrix(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,  # IN
              const double[:, ::1] rows, const double[::1] row_tot, double offset,               # IN
              double[:, ::1] out, int n_threads=1):                                              # OUT
    """out[d, k] = log DM(x_d | offset + rows[k]) of the token sequence.

    Equivalent::

        lam = offset + rows; L = offset * W + row_tot
        out[d, k] = sum_w gammaln(lam[k, w] + c_dw) - gammaln(lam[k, w]) + gammaln(L[k]) - gammaln(L[k] + N_d)

    Documents run in parallel (``n_threads``); each entry is computed alone, so
    the result does not depend on the number of threads.
    """
    cdef int64_t n_docs = indptr.shape[0] - 1, K = rows.shape[0], W = rows.shape[1], d, k, lo, n
    cdef double n_tok
    cdef bnp_csr_t docs = csr_view(indptr, indices, counts, W)
    if out.shape[0] != n_docs or out.shape[1] != K or row_tot.shape[0] != K:
        raise ValueError("dm_matrix: shapes do not match")
    if n_threads < 1:
        raise ValueError(f"n_threads must be >= 1, got {n_threads}")
    if K == 0:
        return
    for d in prange(n_docs, nogil=True, num_threads=n_threads, schedule="guided"):
        lo = docs.indptr[d]
        n = docs.indptr[d + 1] - lo
        n_tok = doc_tokens(docs.counts + lo, n)
        for k in range(K):
            out[d, k] = bnp_log_rising(docs.indices + lo, docs.counts + lo, n, &rows[k, 0], offset, 1.0) \
                        - bnp_dlgamma(offset * W + row_tot[k], n_tok)


# ---------------------------------------------------------------------------
# Collapsed Gibbs sampler (section 6.5)
# ---------------------------------------------------------------------------

cdef double slice_v(double v0, double n, double k, const nrm_cfg *c, bnp_bitgen_t *g) noexcept nogil:
    """One slice-sampling update (stepping out, width 1, shrinkage; Neal 2003) of V = log U
    targeting log p(V) = n V - (n - sigma K) log(e^V + tau) - lap(e^V)."""
    cdef double ly = log_q_v(v0, n, k, c) + log(bnp_rng_uniform_pos(g))
    cdef double lo = v0 - bnp_rng_uniform(g), hi, v1
    cdef int it
    hi = lo + 1.0
    for it in range(1000):
        if lo < V_MIN or log_q_v(lo, n, k, c) <= ly:
            break
        lo -= 1.0
    for it in range(1000):
        if hi > V_MAX or log_q_v(hi, n, k, c) <= ly:
            break
        hi += 1.0
    for it in range(10000):
        v1 = lo + bnp_rng_uniform(g) * (hi - lo)
        if log_q_v(v1, n, k, c) > ly:
            return v1
        if v1 < v0:
            lo = v1
        else:
            hi = v1
    return v0


def gibbs_run(const int64_t[::1] indptr, const int32_t[::1] indices, const int32_t[::1] counts,  # IN
              dict params, int64_t n_sweeps, object generator,                                  # IN
              int32_t[::1] z, int64_t[::1] nk, double[:, ::1] C, double[::1] Ctot,              # IN/OUT
              nggp_state_t[::1] state, double[::1] scratch,                                     # IN/OUT
              int32_t[:, ::1] z_trace, double[::1] u_trace):                                     # OUT (optional)
    """Sweeps of the marginal sampler for NGGP mixtures (Favaro & Teh 2013; [NRM] (5)-(6)).

    Each sweep first updates V = log U by slice sampling given the partition
    (skipped for sigma = 0, the CRP sampler), then reassigns every document in
    order: w_k = (n_k - sigma) DM(x_j | eta + C_k), w_new = a (U + tau)^sigma
    DM(x_j | eta). ``nk``/``C``/``Ctot`` are document counts, word counts and
    their totals per slot (n_k = 0: free slot). ``state``: n_slots (highest slot
    in use + 1), n_alive (occupied clusters), position (next document of the
    current sweep), log_u (V). Returns the number of completed sweeps; fewer
    than ``n_sweeps`` when a free slot is needed (grow the arrays and call
    again: the sweep resumes at ``position``). Completed sweep s writes z to
    ``z_trace[s]`` and U to ``u_trace[s]`` when those have rows.
    """
    cdef nrm_cfg c
    fill_cfg(&c, params)
    cdef int64_t n_docs = indptr.shape[0] - 1, cap = C.shape[0], W = C.shape[1]
    cdef nggp_state_t *sc = scalar_state(state)
    cdef int64_t n_slots = sc.n_slots, n_occ = sc.n_alive, pos = sc.position, done = 0, j, k, lo, n, e
    cdef double v = sc.log_u, n_tok, lw_prior, lw_new
    cdef double *row
    cdef const int32_t *ids
    cdef const int32_t *cnt
    cdef bint trace = z_trace.shape[0] > 0
    if (W != c.n_words or z.shape[0] != n_docs or nk.shape[0] != cap or Ctot.shape[0] != cap
            or scratch.shape[0] < cap + 1 or (trace and (z_trace.shape[0] < n_sweeps
            or z_trace.shape[1] != n_docs or u_trace.shape[0] < n_sweeps))):
        raise ValueError("gibbs_run: state arrays do not match")
    cdef bnp_bitgen_t *g = bitgen_of(generator)
    cdef bnp_csr_t docs = csr_view(indptr, indices, counts, W)
    with generator.bit_generator.lock, nogil:
        while done < n_sweeps:
            if pos == 0 and c.sigma > 0.0:
                v = slice_v(v, <double>n_docs, <double>n_occ, &c, g)
            while pos < n_docs:
                if n_occ >= cap:
                    break
                j = pos
                lo = docs.indptr[j]
                n = docs.indptr[j + 1] - lo
                ids = docs.indices + lo
                cnt = docs.counts + lo
                n_tok = doc_tokens(cnt, n)
                k = z[j]
                row = &C[k, 0]
                for e in range(n):
                    row[ids[e]] -= cnt[e]
                Ctot[k] -= n_tok
                nk[k] -= 1
                if nk[k] == 0:
                    n_occ -= 1
                for k in range(n_slots):
                    if nk[k] > 0:
                        scratch[k] = log(nk[k] - c.sigma) + bnp_log_rising(ids, cnt, n, &C[k, 0], c.eta, 1.0) \
                                     - bnp_dlgamma(c.eta_tot + Ctot[k], n_tok)
                    else:
                        scratch[k] = -INFINITY
                lw_new = c.log_a + bnp_log_rising(NULL, cnt, n, NULL, c.eta, 1.0) - bnp_dlgamma(c.eta_tot, n_tok)
                if c.sigma > 0.0:
                    lw_new += c.sigma * log_u_plus_tau(v, c.tau)
                scratch[n_slots] = lw_new
                k = bnp_sample_logweights(&scratch[0], n_slots + 1, bnp_rng_uniform(g))
                if k == n_slots:            # a new cluster: the first free slot
                    k = 0
                    while nk[k] > 0:
                        k += 1
                    if k >= n_slots:
                        n_slots = k + 1
                if nk[k] == 0:
                    n_occ += 1
                row = &C[k, 0]
                for e in range(n):
                    row[ids[e]] += cnt[e]
                Ctot[k] += n_tok
                nk[k] += 1
                z[j] = <int32_t>k
                pos += 1
            if pos < n_docs:
                break
            while n_slots > 0 and nk[n_slots - 1] == 0:
                n_slots -= 1
            if trace:
                for j in range(n_docs):
                    z_trace[done, j] = z[j]
                u_trace[done] = exp(v) if c.sigma > 0.0 else NAN
            pos = 0
            done += 1
    sc.n_slots = n_slots
    sc.n_alive = n_occ
    sc.position = pos
    sc.log_u = v
    return done


# ---------------------------------------------------------------------------
# Python-level access for tests and the model layer
# ---------------------------------------------------------------------------

def _cfg_for(a, sigma, tau, u_posterior="corrected"):
    return {"eta": 1.0, "n_words": 1, "a": float(a), "sigma": float(sigma), "tau": float(tau),
            "u_posterior": u_posterior}


def laplace_exponent(u, a, sigma, tau):
    """lap(U) = (a/sigma)((U + tau)^sigma - tau^sigma) (a log(1 + U/tau) at sigma = 0), elementwise."""
    cdef nrm_cfg c
    fill_cfg(&c, _cfg_for(a, sigma, tau))
    u = np.asarray(u, dtype=np.float64)
    out = np.empty_like(u)
    flat_u = u.reshape(-1)
    flat_o = out.reshape(-1)
    cdef Py_ssize_t i
    for i in range(flat_u.shape[0]):
        flat_o[i] = lap_exponent(log(flat_u[i]), &c) if flat_u[i] > 0 else 0.0
    return out if out.ndim else float(out)


def log_q_u(v, double m, double ke, a, sigma, tau, u_posterior="corrected"):
    """log q(V) of section 6.2 at V = log U (elementwise, up to a constant)."""
    cdef nrm_cfg c
    fill_cfg(&c, _cfg_for(a, sigma, tau, u_posterior))
    v = np.asarray(v, dtype=np.float64)
    out = np.empty_like(v)
    flat_v = v.reshape(-1)
    flat_o = out.reshape(-1)
    cdef Py_ssize_t i
    for i in range(flat_v.shape[0]):
        flat_o[i] = log_q_v(flat_v[i], m, ke, &c)
    return out if out.ndim else float(out)


def mode_u(double m, double ke, a, sigma, tau, u_posterior="corrected", u0=None):
    """Uhat = exp(argmax_V log q(V)) with m observations and E[K] = ke (section 6.2).

    sigma = 0 returns NaN (the DP's new-cluster weight a does not depend on U);
    m = 0 returns 0 (the density has no maximum; the urn then opens a new cluster).
    """
    cdef nrm_cfg c
    fill_cfg(&c, _cfg_for(a, sigma, tau, u_posterior))
    if c.sigma == 0.0:
        return float("nan")
    if m <= 0:
        return 0.0
    cdef double v0 = NAN if u0 is None or not u0 > 0 else log(u0)
    return exp(u_mode(m, ke, &c, v0))


def slice_sample_u(double u0, int64_t n, int64_t k, a, sigma, tau, int64_t n_draws, int64_t thin,
                   object generator):
    """``n_draws`` states of the U slice sampler (every ``thin``-th) for a fixed partition of
    n items into k clusters (the U-step of ``gibbs_run``; for tests)."""
    cdef nrm_cfg c
    fill_cfg(&c, _cfg_for(a, sigma, tau))
    out = np.empty(n_draws)
    cdef double[::1] o = out
    cdef double v = log(u0)
    cdef int64_t i, t
    cdef bnp_bitgen_t *g = bitgen_of(generator)
    with generator.bit_generator.lock, nogil:
        for i in range(n_draws):
            for t in range(thin):
                v = slice_v(v, <double>n, <double>k, &c, g)
            o[i] = exp(v)
    return out
