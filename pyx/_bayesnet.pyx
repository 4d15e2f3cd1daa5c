"""Message passing on the junction tree of a discrete Bayesian network with
collapsed Dirichlet CPTs: collapsed standard VB, collapsed Gibbs sampling by
forward filtering / backward sampling, and their hybrid (Welling, Teh & Kappen
2008, section 6).

The tree comes from ``bnpcore.bayesnet.junction.Plan`` as flat int64 tables
(``plan``, a dict):

* cliques ``c = 0..C-1``, root first, each after its ``parent[c]``; clique c's
  joint states occupy ``clique_off[c] : clique_off[c] + clique_size[c]`` of a
  belief vector;
* separator of c and its parent: ``sep_size[c]`` states at ``sep_off[c]`` of the
  message vector; ``cmap[clique_off[c] + i]`` is the separator state of c's
  state i, ``pmap[pmap_off[c] + b]`` that of the parent's state b;
* assigned families ``a``: in clique ``aclique[a]``; the joint state j of the
  family's hidden members (its scope, ``soff[a+1] - soff[a]`` states) selects
  the count entry ``base[n, a] + offtab[soff[a] + j]`` and column
  ``colbase[n, a] + coltab[soff[a] + j]`` for data case n, and clique state i
  lies in scope state ``scope[aoff[a] + i]``. Potentials are computed once per
  scope state and spread over the clique; count updates are gathered back.

Counts are flat doubles over all families' entries (``vb``: expectations of
the variational cases, ``cg``: the sampled cases' current sample) and columns
(``vb_col``, ``cg_col``), with the priors ``prior`` and their column sums
``prior_col``. The log potential of a family entry e in column l is

* P_TABLE: ``table[e]`` (parallel SVB, scoring);
* P_PSI:   ``psi(vb[e] + cg[e] + prior[e]) - psi(vb_col[l] + cg_col[l] + prior_col[l])``
  ([HYB] eq 28, counts including the case itself);
* P_RATIO: ``log((cg[e] + vb[e] + prior[e]) / (cg_col[l] + vb_col[l] + prior_col[l]))``
  ([HYB] eq 29, counts without the token being sampled).

Clique potentials are exponentiated after subtracting their maximum (the
shift goes into the log normaliser), messages are normalised, so nothing
underflows for the tables of real networks.
"""
from contextlib import nullcontext

import numpy as np
from cython.parallel cimport prange, threadid
from libc.math cimport exp, fabs, log, INFINITY
from libc.stdint cimport int32_t, int64_t
from libc.stdlib cimport free, malloc

from bnpcore.kernels.parallel cimport PAD
from bnpcore.kernels.rng cimport bitgen_of, bnp_bitgen_t, bnp_rng_uniform
from bnpcore.kernels.special cimport bnp_digamma

cdef enum:
    P_TABLE = 0
    P_PSI = 1
    P_RATIO = 2

# what a variational case does to the vb counts
cdef enum:
    U_CHANGE = 1    # add weight x (new - old) family marginals (sequential schedule)
    U_ADD = 2       # add weight x new family marginals (parallel: counts rebuilt from zero)


cdef struct Tree:
    int64_t C, A
    const int64_t *clique_size
    const int64_t *clique_off
    const int64_t *parent
    const int64_t *sep_size
    const int64_t *sep_off
    const int64_t *cmap
    const int64_t *pmap
    const int64_t *pmap_off
    const int64_t *aclique
    const int64_t *aoff
    const int64_t *soff
    const int64_t *scope
    const int64_t *offtab
    const int64_t *coltab
    double *belief       # clique_off[C] doubles
    double *lp           # soff[A]: log potentials of each family's scope states
    double *marg         # 2 x the largest scope: new and old family marginals
    double *msg          # sep_off[C]: upward messages (normalised)
    double *work         # max(clique, separator) size
    int64_t *assign      # C: sampled clique states


cdef struct Pots:
    int mode
    const double *table
    double *vb
    double *cg
    double *vb_col
    double *cg_col
    const double *prior
    const double *prior_col


cdef inline double log_potential(const Pots *p, int64_t e, int64_t l) noexcept nogil:
    if p.mode == P_TABLE:
        return p.table[e]
    if p.mode == P_PSI:
        return (bnp_digamma(p.vb[e] + p.cg[e] + p.prior[e])
                - bnp_digamma(p.vb_col[l] + p.cg_col[l] + p.prior_col[l]))
    return log((p.cg[e] + p.vb[e] + p.prior[e]) / (p.cg_col[l] + p.vb_col[l] + p.prior_col[l]))


cdef double potentials(Tree *t, const Pots *p, const int64_t *base, const int64_t *colbase) noexcept nogil:
    """lp <- the log potentials of every family's scope states, belief <- exp(sum of
    the clique's family log potentials - clique max); returns the sum of the
    subtracted maxima."""
    cdef int64_t a, c, i, j, off, n
    cdef double m, shift = 0.0
    cdef double *lp
    cdef const int64_t *sc
    for i in range(t.clique_off[t.C]):
        t.belief[i] = 0.0
    for a in range(t.A):
        lp = t.lp + t.soff[a]
        for j in range(t.soff[a + 1] - t.soff[a]):
            lp[j] = log_potential(p, base[a] + t.offtab[t.soff[a] + j], colbase[a] + t.coltab[t.soff[a] + j])
        c = t.aclique[a]
        off = t.clique_off[c]
        sc = t.scope + t.aoff[a]
        for i in range(t.clique_size[c]):
            t.belief[off + i] += lp[sc[i]]
    for c in range(t.C):
        off = t.clique_off[c]
        n = t.clique_size[c]
        m = -INFINITY
        for i in range(n):
            if t.belief[off + i] > m:
                m = t.belief[off + i]
        for i in range(n):
            t.belief[off + i] = exp(t.belief[off + i] - m)
        shift += m
    return shift


cdef inline void to_separator(double *out, const double *belief, const int64_t *sepmap, int64_t n,
                              int64_t n_sep) noexcept nogil:
    """out[s] = sum of belief[i] over the clique states i with sepmap[i] == s."""
    cdef int64_t i, s
    for s in range(n_sep):
        out[s] = 0.0
    for i in range(n):
        out[sepmap[i]] += belief[i]


cdef double upward(Tree *t) noexcept nogil:
    """Collect towards the root; child beliefs keep potential x messages from their
    children (what backward sampling needs). Returns log of the normaliser
    (relative to the potentials' scale); -inf if it is zero."""
    cdef int64_t c, i, p, off, poff, s
    cdef double tot, logz = 0.0
    cdef double *m
    for c in range(t.C - 1, 0, -1):
        p = t.parent[c]
        off = t.clique_off[c]
        m = t.msg + t.sep_off[c]
        to_separator(m, t.belief + off, t.cmap + off, t.clique_size[c], t.sep_size[c])
        tot = 0.0
        for s in range(t.sep_size[c]):
            tot += m[s]
        if tot <= 0.0:
            return -INFINITY
        for s in range(t.sep_size[c]):
            m[s] /= tot
        logz += log(tot)
        poff = t.clique_off[p]
        for i in range(t.clique_size[p]):
            t.belief[poff + i] *= m[t.pmap[t.pmap_off[c] + i]]
    tot = 0.0
    for i in range(t.clique_size[0]):
        tot += t.belief[i]
    if tot <= 0.0:
        return -INFINITY
    return logz + log(tot)


cdef inline void normalise(double *x, int64_t n) noexcept nogil:
    cdef double tot = 0.0
    cdef int64_t i
    for i in range(n):
        tot += x[i]
    for i in range(n):
        x[i] /= tot


cdef void downward(Tree *t) noexcept nogil:
    """Distribute from the root (Hugin): afterwards every clique's belief is its
    normalised marginal. Needs ``upward`` first."""
    cdef int64_t c, i, p, off, poff, s
    cdef double *m
    cdef double *new = t.work
    normalise(t.belief, t.clique_size[0])
    for c in range(1, t.C):
        p = t.parent[c]
        off = t.clique_off[c]
        poff = t.clique_off[p]
        m = t.msg + t.sep_off[c]
        to_separator(new, t.belief + poff, t.pmap + t.pmap_off[c], t.clique_size[p], t.sep_size[c])
        for i in range(t.clique_size[c]):
            s = t.cmap[off + i]
            t.belief[off + i] = t.belief[off + i] * new[s] / m[s] if m[s] > 0.0 else 0.0
        normalise(t.belief + off, t.clique_size[c])


cdef void backward_sample(Tree *t, bnp_bitgen_t *g) noexcept nogil:
    """Sample every clique's state top-down, one uniform per clique: the root from
    its belief, each child from its upward belief restricted to the separator
    state of its parent's sample ([HYB] section 6, forward filtering /
    backward sampling; Scott 2002). Needs ``upward`` first."""
    cdef int64_t c, i, off, n, s, last
    cdef double tot, u
    for c in range(t.C):
        off = t.clique_off[c]
        n = t.clique_size[c]
        s = t.pmap[t.pmap_off[c] + t.assign[t.parent[c]]] if c > 0 else 0
        tot = 0.0
        for i in range(n):
            if c == 0 or t.cmap[off + i] == s:
                tot += t.belief[off + i]
            t.work[i] = tot
        u = bnp_rng_uniform(g) * tot
        last = -1
        for i in range(n):
            if c == 0 or t.cmap[off + i] == s:
                last = i
                if t.work[i] > u:
                    break
        t.assign[c] = last


cdef double vb_case(Tree *t, Pots *p, const int64_t *base, const int64_t *colbase, double weight,
                    double *q, int update, double *delta) noexcept nogil:
    """Variational update of one case (weight = its count): belief propagation with
    the current potentials, clique marginals into q (its previous marginals), and
    the vb counts changed as ``update`` says (U_CHANGE: weight x the change of
    each family's marginal; U_ADD: weight x the new marginal). Reads only this
    tree's scratch, ``q`` and the potentials, writes q and p.vb / p.vb_col: cases
    can run in parallel with their own trees and count buffers. Returns weight x the entropy of the case's new posterior,
    log Z - E[sum of log potentials]."""
    cdef int64_t a, c, i, j, off, S, n = t.clique_off[t.C]
    cdef double logz, ent, d, change = 0.0
    cdef double *new = t.marg
    cdef double *old
    cdef const int64_t *sc
    logz = potentials(t, p, base, colbase) + upward(t)
    downward(t)
    ent = logz
    for a in range(t.A):
        c = t.aclique[a]
        off = t.clique_off[c]
        sc = t.scope + t.aoff[a]
        S = t.soff[a + 1] - t.soff[a]
        old = t.marg + S
        for j in range(S):
            new[j] = 0.0
            old[j] = 0.0
        for i in range(t.clique_size[c]):
            new[sc[i]] += t.belief[off + i]
            old[sc[i]] += q[off + i]
        for j in range(S):
            if new[j] > 0.0:
                ent -= new[j] * t.lp[t.soff[a] + j]
            d = weight * (new[j] - old[j]) if update == U_CHANGE else weight * new[j]
            p.vb[base[a] + t.offtab[t.soff[a] + j]] += d
            p.vb_col[colbase[a] + t.coltab[t.soff[a] + j]] += d
    for i in range(n):
        change += fabs(t.belief[i] - q[i])
        q[i] = t.belief[i]
    delta[0] += weight * change
    return weight * ent


cdef inline void move_token(Tree *t, Pots *p, const int64_t *base, const int64_t *colbase,
                            const int32_t *z, double step) noexcept nogil:
    """Add (step = 1) or remove (-1) one sampled token with clique states z to the cg counts."""
    cdef int64_t a, j
    for a in range(t.A):
        j = t.soff[a] + t.scope[t.aoff[a] + z[t.aclique[a]]]
        p.cg[base[a] + t.offtab[j]] += step
        p.cg_col[colbase[a] + t.coltab[j]] += step


cdef void cg_token(Tree *t, Pots *p, const int64_t *base, const int64_t *colbase, int32_t *z,
                   bnp_bitgen_t *g) noexcept nogil:
    """Collapsed Gibbs draw of all hidden nodes of one token jointly ([HYB] eq 29)."""
    cdef int64_t c
    move_token(t, p, base, colbase, z, -1.0)
    potentials(t, p, base, colbase)
    upward(t)
    backward_sample(t, g)
    for c in range(t.C):
        z[c] = <int32_t>t.assign[c]
    move_token(t, p, base, colbase, z, 1.0)


cdef const int64_t *index_table(dict plan, str name) except NULL:
    """Pointer to element 0 of a (non-empty, int64) table of the plan, which owns it."""
    cdef const int64_t[::1] v = plan[name]
    return &v[0]


cdef double *scratch_array(dict scratch, str name) except NULL:
    cdef double[::1] v = scratch[name]
    return &v[0]


cdef int bind_tree(Tree *t, dict plan, dict scratch) except -1:
    cdef int64_t[::1] assign = scratch["assign"]
    t.C = plan["n_cliques"]
    t.A = plan["n_assigned"]
    if t.C < 1:
        raise ValueError("the plan has no hidden nodes")
    t.clique_size = index_table(plan, "clique_size")
    t.clique_off = index_table(plan, "clique_off")
    t.parent = index_table(plan, "parent")
    t.sep_size = index_table(plan, "sep_size")
    t.sep_off = index_table(plan, "sep_off")
    t.cmap = index_table(plan, "cmap")
    t.pmap = index_table(plan, "pmap")
    t.pmap_off = index_table(plan, "pmap_off")
    t.aclique = index_table(plan, "aclique")
    t.aoff = index_table(plan, "aoff")
    t.soff = index_table(plan, "soff")
    t.scope = index_table(plan, "scope")
    t.offtab = index_table(plan, "offtab")
    t.coltab = index_table(plan, "coltab")
    t.belief = scratch_array(scratch, "belief")
    t.lp = scratch_array(scratch, "lp")
    t.marg = scratch_array(scratch, "marg")
    t.msg = scratch_array(scratch, "msg")
    t.work = scratch_array(scratch, "work")
    t.assign = &assign[0]
    return 0


def sweep(dict plan, dict scratch,                                                      # IN tree, scratch
          const int64_t[:, ::1] base, const int64_t[:, ::1] colbase,                    # IN cases
          const int64_t[::1] weights, int64_t threshold,                                # IN
          double[:, ::1] q, int32_t[:, ::1] z,                                          # IN/OUT state
          double[::1] vb, double[::1] cg, double[::1] vb_col, double[::1] cg_col,       # IN/OUT counts
          const double[::1] prior, const double[::1] prior_col,                         # IN
          generator=None):
    """One sequential pass over the cases in order: each case with weight >
    threshold gets a variational update with the P_PSI potentials of the live
    counts, which then change by weight x (new - old) family marginals; each of
    the weight tokens of the other cases a joint Gibbs draw of its hidden nodes
    (P_RATIO potentials without the token, counts changed after each token;
    ``generator`` draws).

    ``q`` holds one row of clique marginals per variational case (rows in case
    order), ``z`` one row of clique states per sampled token (cases in order,
    each case's tokens in a run). Equivalent NumPy for a variational case with
    one clique: ``q[row] = softmax(sum_a lp_a)``, ``vb[entries] += weight *
    (q_new - q_old)``.

    Returns ``(delta, entropy)``: sum over variational cases of weight x the
    sum of |q_new - q_old| over clique states, and of weight x the entropy of
    the new posterior.
    """
    cdef Tree t
    cdef Pots p
    cdef int64_t n, N = base.shape[0], row = 0, zi = 0, k
    cdef double delta = 0.0, entropy = 0.0
    cdef int64_t n_rows = 0, n_tokens = 0
    w = np.asarray(weights)
    n_rows = int(np.count_nonzero(w > threshold))
    n_tokens = int(w[w <= threshold].sum())
    if q.shape[0] != n_rows or z.shape[0] != n_tokens:
        raise ValueError(f"need {n_rows} marginal rows and {n_tokens} sample rows, got {q.shape[0]} and "
                         f"{z.shape[0]}")
    if colbase.shape[0] != N or weights.shape[0] != N or base.shape[1] != plan["n_assigned"]:
        raise ValueError("base, colbase and weights must have one row per case")
    bind_tree(&t, plan, scratch)
    p.table = NULL
    p.vb = &vb[0]
    p.cg = &cg[0]
    p.vb_col = &vb_col[0]
    p.cg_col = &cg_col[0]
    p.prior = &prior[0]
    p.prior_col = &prior_col[0]
    cdef bint do_cg = n_tokens > 0
    cdef bnp_bitgen_t *g = bitgen_of(generator) if do_cg else NULL
    lock = generator.bit_generator.lock if do_cg else nullcontext()
    with lock, nogil:
        for n in range(N):
            if weights[n] > threshold:
                p.mode = P_PSI
                entropy += vb_case(&t, &p, &base[n, 0], &colbase[n, 0], <double>weights[n], &q[row, 0],
                                   U_CHANGE, &delta)
                row += 1
            else:
                p.mode = P_RATIO
                for k in range(weights[n]):
                    cg_token(&t, &p, &base[n, 0], &colbase[n, 0], &z[zi + k, 0], g)
                zi += weights[n]
    return delta, entropy


def parallel_step(dict plan, list scratches,                                           # IN tree, per-thread scratch
                  const int64_t[:, ::1] base, const int64_t[:, ::1] colbase,            # IN cases
                  const int64_t[::1] weights, const double[::1] table,                  # IN
                  double[:, ::1] q,                                                     # IN/OUT marginals
                  double[:, ::1] vb_threads, double[:, ::1] col_threads):               # OUT counts
    """One standard VB step with the parallel schedule ([HYB] eq 28 for every case
    at once): each case's posterior from the frozen log potentials ``table``,
    cases split statically over ``len(scratches)`` threads. Thread t adds weight
    x the new family marginals to ``vb_threads[t]`` and ``col_threads[t]``
    (zeroed here; sum over axis 0 for the new counts).

    Equivalent NumPy for one clique: ``q[n] = softmax(sum_a table[entries_a(n)])``,
    ``vb[entries_a(n)] += weight[n] q[n]``. Returns ``(delta, entropy)`` as ``sweep``.
    """
    cdef int T = len(scratches), tid = 0
    cdef int64_t n, i, N = base.shape[0]
    if T < 1 or vb_threads.shape[0] < T or col_threads.shape[0] < T:
        raise ValueError(f"need one scratch and one count row per thread, got {T} scratches and "
                         f"{vb_threads.shape[0]} count rows")
    if q.shape[0] != N or colbase.shape[0] != N or weights.shape[0] != N or base.shape[1] != plan["n_assigned"]:
        raise ValueError("q, base, colbase and weights must have one row per case")
    acc_np = np.zeros((T, PAD))
    cdef double[:, ::1] acc = acc_np
    cdef Tree *trees = <Tree *>malloc(T * sizeof(Tree))
    cdef Pots *pots = <Pots *>malloc(T * sizeof(Pots))
    if trees == NULL or pots == NULL:
        free(trees)
        free(pots)
        raise MemoryError()
    try:
        for i in range(T):
            bind_tree(&trees[i], plan, scratches[i])
            pots[i].mode = P_TABLE
            pots[i].table = &table[0]
            pots[i].vb = &vb_threads[i, 0]
            pots[i].vb_col = &col_threads[i, 0]
        with nogil:
            vb_threads[:, :] = 0.0
            col_threads[:, :] = 0.0
            for n in prange(N, num_threads=T, schedule="static"):
                tid = threadid()
                acc[tid, 1] += vb_case(&trees[tid], &pots[tid], &base[n, 0], &colbase[n, 0], <double>weights[n],
                                       &q[n, 0], U_ADD, &acc[tid, 0])
    finally:
        free(trees)
        free(pots)
    return float(acc_np[:, 0].sum()), float(acc_np[:, 1].sum())


def propagate(dict plan, dict scratch, const int64_t[:, ::1] base, const int64_t[:, ::1] colbase,  # IN
              const double[::1] table, double[::1] logz, double[:, ::1] beliefs=None):            # IN, OUT
    """Belief propagation for every case under the log potentials ``table``.

    ``logz[n] = log sum_h exp(sum_a table[entry_a(n, h)])`` over the hidden
    states h of case n: with log CPTs as the table, the log-probability of the
    case's observed values, less the all-observed families. If ``beliefs`` is
    given, its row n receives the case's clique marginals (all cliques).

    Equivalent NumPy (one clique): ``logsumexp(sum_a table[base[n, a] + offtab_a])``
    and ``softmax`` of the same sum.
    """
    cdef Tree t
    cdef Pots p
    cdef int64_t n, i, N = base.shape[0]
    cdef bint with_beliefs = beliefs is not None
    if logz.shape[0] != N or colbase.shape[0] != N or base.shape[1] != plan["n_assigned"]:
        raise ValueError("base, colbase and logz must have one row per case")
    if with_beliefs and (beliefs.shape[0] != N or beliefs.shape[1] != plan["clique_off"][plan["n_cliques"]]):
        raise ValueError("beliefs must have one row of all clique states per case")
    bind_tree(&t, plan, scratch)
    p.mode = P_TABLE
    p.table = &table[0]
    with nogil:
        for n in range(N):
            logz[n] = potentials(&t, &p, &base[n, 0], &colbase[n, 0]) + upward(&t)
            if with_beliefs:
                downward(&t)
                for i in range(t.clique_off[t.C]):
                    beliefs[n, i] = t.belief[i]
