"""Deliberately naive NumPy references for the LDA tests (never used in production).

Corpora are given as token lists: ``docs[j]`` is the list of word ids of
document j; ``z`` a flat array of topics, tokens in document order.
"""
import itertools

import numpy as np
from scipy.special import digamma, gammaln


def tokens_of(docs):
    """(doc id, word id) of every token, in order."""
    return [(j, w) for j, doc in enumerate(docs) for w in doc]


def counts_of(docs, z, K, W):
    toks = tokens_of(docs)
    ndk = np.zeros((len(docs), K))
    nkw = np.zeros((K, W))
    for (j, w), k in zip(toks, z):
        ndk[j, k] += 1
        nkw[k, w] += 1
    return ndk, nkw


def log_joint(docs, z, alpha, eta):
    """log p(z, x) of LDA with all normalising constants (ALGORITHMS.md 3.1).

    ``alpha`` is (K,) or per document (D, K); ``eta`` is (W,) or per topic (K, W)
    (the effective priors alpha'_jk, eta'_kw of [HYB] eqs 23-24)."""
    K = np.shape(alpha)[-1]
    W = np.shape(eta)[-1]
    alpha = np.broadcast_to(alpha, (len(docs), K))
    eta = np.broadcast_to(eta, (K, W))
    ndk, nkw = counts_of(docs, z, K, W)
    out = 0.0
    for j in range(len(docs)):
        out += gammaln(alpha[j].sum()) - gammaln(len(docs[j]) + alpha[j].sum())
        out += sum(gammaln(ndk[j, k] + alpha[j, k]) - gammaln(alpha[j, k]) for k in range(K))
    for k in range(K):
        out += gammaln(eta[k].sum()) - gammaln(nkw[k].sum() + eta[k].sum())
        out += sum(gammaln(nkw[k, w] + eta[k, w]) - gammaln(eta[k, w]) for w in range(W))
    return out


def posterior_by_enumeration(docs, alpha, eta):
    """All K^N assignments and their exact posterior probabilities."""
    K, N = np.shape(alpha)[-1], len(tokens_of(docs))
    states = [np.array(s) for s in itertools.product(range(K), repeat=N)]
    logp = np.array([log_joint(docs, s, alpha, eta) for s in states])
    p = np.exp(logp - logp.max())
    return states, p / p.sum()


def cgs_sweep(docs, z, alpha, eta, rng):
    """One collapsed Gibbs sweep with a plain inverse-CDF draw per token (one
    ``rng.random()`` each), arithmetic in the order of the production kernel.
    ``alpha`` is (K,) or per document (D, K), ``eta`` (W,) or per topic (K, W)
    (the effective priors of [HYB] eqs 23-24)."""
    K, W = np.shape(alpha)[-1], np.shape(eta)[-1]
    alpha = np.broadcast_to(alpha, (len(docs), K))
    eta = np.broadcast_to(eta, (K, W))
    ndk, nkw = counts_of(docs, z, K, W)
    nk = nkw.sum(axis=1)
    E = eta.sum(axis=1)
    for i, (j, w) in enumerate(tokens_of(docs)):
        t = z[i]
        ndk[j, t] -= 1
        nkw[t, w] -= 1
        nk[t] -= 1
        p = (nkw[:, w] + eta[:, w]) * (ndk[j] + alpha[j]) / (nk + E)
        cum = np.cumsum(p)
        t = min(int(np.searchsorted(cum, rng.random() * cum[-1], side="right")), K - 1)
        ndk[j, t] += 1
        nkw[t, w] += 1
        nk[t] += 1
        z[i] = t
    return z


# -- variational references: pairs are the non-zeros of a dense D x W count matrix C

def pairs_of(C):
    return [(j, w, C[j, w]) for j in range(C.shape[0]) for w in range(C.shape[1]) if C[j, w] > 0]


def expected_counts(C, r):
    """N_jk, N_kw (K x W) from per-pair rows r (dict (j, w) -> row)."""
    D, W = C.shape
    K = len(next(iter(r.values())))
    ndk, nkw = np.zeros((D, K)), np.zeros((K, W))
    for (j, w), row in r.items():
        ndk[j] += C[j, w] * row
        nkw[:, w] += C[j, w] * row
    return ndk, nkw


def svb_pair_update(C, r, j, w, alpha, eta):
    """[HYB] eq 11 for pair (j, w) from the current expected counts."""
    ndk, nkw = expected_counts(C, r)
    lw = digamma(nkw[:, w] + eta[w]) - digamma(nkw.sum(1) + eta.sum()) + digamma(ndk[j] + alpha)
    p = np.exp(lw - lw.max())
    r[(j, w)] = p / p.sum()


def svb_sequential_sweep(C, r, alpha, eta):
    """Sequential SVB: pairs in row-major order, counts updated after each."""
    for j, w, c in pairs_of(C):
        svb_pair_update(C, r, j, w, alpha, eta)
    return r


def svb_parallel_iteration(C, r, alpha, eta):
    """One E-step + M-step of Blei et al. (2003) in the Dirichlet parameters
    xi = eta + N_kw, zeta = alpha + N_jk (all pairs from the old counts)."""
    return svb_rows_from_counts(C, *expected_counts(C, r), alpha, eta)


def svb_rows_from_counts(C, ndk, nkw, alpha, eta):
    """The E-step of ``svb_parallel_iteration`` from the counts ndk (D x K) and nkw (K x W)."""
    xi, zeta = nkw + eta, ndk + alpha
    Elog_phi = digamma(xi) - digamma(xi.sum(1, keepdims=True))
    Elog_pi = digamma(zeta) - digamma(zeta.sum(1, keepdims=True))
    new = {}
    for j, w, c in pairs_of(C):
        lw = Elog_phi[:, w] + Elog_pi[j]
        p = np.exp(lw - lw.max())
        new[(j, w)] = p / p.sum()
    return new


def lda_elbo(C, r, alpha, eta):
    """The standard LDA ELBO E log p(x, z, phi, pi) - E log q(z, phi, pi) with
    q(phi_k) = Dir(eta + N_kw), q(pi_j) = Dir(alpha + N_jk), q(z) = r."""
    ndk, nkw = expected_counts(C, r)
    xi, zeta = nkw + eta, ndk + alpha
    Elog_phi = digamma(xi) - digamma(xi.sum(1, keepdims=True))
    Elog_pi = digamma(zeta) - digamma(zeta.sum(1, keepdims=True))

    def log_dir_norm(a):
        return gammaln(a.sum(-1)) - gammaln(a).sum(-1)

    out = 0.0
    # p(phi) - q(phi)
    for k in range(len(xi)):
        out += log_dir_norm(eta) + ((eta - 1) * Elog_phi[k]).sum()
        out -= log_dir_norm(xi[k]) + ((xi[k] - 1) * Elog_phi[k]).sum()
    # p(pi) - q(pi)
    for j in range(len(zeta)):
        out += log_dir_norm(alpha) + ((alpha - 1) * Elog_pi[j]).sum()
        out -= log_dir_norm(zeta[j]) + ((zeta[j] - 1) * Elog_pi[j]).sum()
    # p(z | pi) + p(x | z, phi) - q(z)
    for j, w, c in pairs_of(C):
        row = r[(j, w)]
        out += c * (row * (Elog_pi[j] + Elog_phi[:, w])).sum()
        out -= c * (row[row > 0] * np.log(row[row > 0])).sum()
    return out


def cvb_pair_sweep(C, r, alpha, eta, order, docs=None):
    """Per-pair collapsed VB (ALGORITHMS.md 3.4): all copies of a pair share a row,
    updated after removing one copy; order 0 (CVB0) or 2. ``docs``: update only
    the pairs of these documents (the others keep their rows)."""
    E = eta.sum()
    for j, w, c in pairs_of(C):
        if docs is not None and j not in docs:
            continue
        ndk, nkw = expected_counts(C, r)
        vdk, vkw = expected_counts(C, {key: row * (1 - row) for key, row in r.items()})
        ro = r[(j, w)]
        vo = ro * (1 - ro)
        ejk = np.maximum(ndk[j] - ro, 0) + alpha
        ekw = np.maximum(nkw[:, w] - ro, 0) + eta[w]
        ek = np.maximum(nkw.sum(1) - ro, 0) + E
        lw = np.log(ejk) + np.log(ekw) - np.log(ek)
        if order == 2:
            lw += (-np.maximum(vdk[j] - vo, 0) / (2 * ejk ** 2) - np.maximum(vkw[:, w] - vo, 0) / (2 * ekw ** 2)
                   + np.maximum(vkw.sum(1) - vo, 0) / (2 * ek ** 2))
        p = np.exp(lw - lw.max())
        r[(j, w)] = p / p.sum()
    return r


def cvb0_token_sweep(docs, q, alpha, eta):
    """Per-token CVB0 (Asuncion et al. 2009): every token its own row q[i],
    updated in turn with the expected counts of all other tokens."""
    K, W = len(alpha), len(eta)
    toks = tokens_of(docs)
    ndk = np.zeros((len(docs), K))
    nkw = np.zeros((K, W))
    for (j, w), row in zip(toks, q):
        ndk[j] += row
        nkw[:, w] += row
    for i, (j, w) in enumerate(toks):
        old = q[i].copy()
        p = (nkw[:, w] - old + eta[w]) * (ndk[j] - old + alpha) / (nkw.sum(1) - old + eta.sum())
        q[i] = p / p.sum()
        ndk[j] += q[i] - old
        nkw[:, w] += q[i] - old
    return q


def chi_square_pvalue(observed_counts, probs, min_expected=5.0):
    """Pearson chi-square p-value, pooling cells with expected count < min_expected."""
    from scipy.stats import chi2
    n = observed_counts.sum()
    expected = n * probs
    big = expected >= min_expected
    obs = np.append(observed_counts[big], observed_counts[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    keep = exp > 0
    stat = ((obs[keep] - exp[keep]) ** 2 / exp[keep]).sum()
    return chi2.sf(stat, keep.sum() - 1)


# -- exact one-sweep transition matrix of systematic-scan Gibbs (ALGORITHMS.md 10.2)

def cgs_conditional(docs, z, i, alpha, eta):
    """p(z_i = k | z_-i, x) ∝ (n^-_kw + eta_w)(n^-_jk + alpha_k) / (n^-_k + sum(eta)) ([HYB] eq 12)."""
    K, W = len(alpha), len(eta)
    toks = tokens_of(docs)
    zo = np.delete(np.asarray(z), i)
    rest = toks[:i] + toks[i + 1:]
    j, w = toks[i]
    ndk = np.zeros(K)
    nkw = np.zeros(K)
    nk = np.zeros(K)
    for (jj, ww), k in zip(rest, zo):
        nk[k] += 1
        ndk[k] += jj == j
        nkw[k] += ww == w
    p = (nkw + eta[w]) * (ndk + alpha) / (nk + eta.sum())
    return p / p.sum()


def gibbs_sweep_matrix(states, conditional):
    """Transition matrix of one systematic-scan sweep (tokens 0, 1, ..., N-1) over
    ``states`` (all K^N assignments, as from ``posterior_by_enumeration``), with
    ``conditional(z, i)`` the distribution token i is redrawn from."""
    index = {tuple(s): a for a, s in enumerate(states)}
    N = len(states[0])
    P = np.eye(len(states))
    for i in range(N):
        Pi = np.zeros_like(P)
        for a, s in enumerate(states):
            for k, pk in enumerate(conditional(s, i)):
                t = s.copy()
                t[i] = k
                Pi[a, index[tuple(t)]] += pk
        P = P @ Pi
    return P


# -- exact collapsed VB (ALGORITHMS.md 2.6, 10.3): per-token q, Poisson-binomial counts

def poisson_binomial_pmf(probs):
    """P(n = m), m = 0..len(probs), of a sum of independent Bernoulli(probs)."""
    pmf = np.array([1.0])
    for p in probs:
        pmf = np.append(pmf * (1 - p), 0.0) + np.append(0.0, pmf * p)
    return pmf


def expected_log(c, probs):
    """E[log(c + n)] for n Poisson-binomial(probs), exactly."""
    pmf = poisson_binomial_pmf(probs)
    return float(pmf @ np.log(c + np.arange(len(pmf))))


def exact_cvb_token_update(toks, q, i, alpha, eta):
    """Exact collapsed mean-field row of token i given the other tokens' rows:
    q_i(k) ∝ exp(E[log(n^-_jk + alpha_k)] + E[log(n^-_kw + eta_w)] - E[log(n^-_k + sum(eta))])
    with the expectations over the exact Poisson-binomial laws of the counts.
    ``toks`` lists (doc, word) per token, ``q`` is N x K."""
    j, w = toks[i]
    others = [l for l in range(len(toks)) if l != i]
    same_doc = [l for l in others if toks[l][0] == j]
    same_word = [l for l in others if toks[l][1] == w]
    lw = np.array([expected_log(alpha[k], q[same_doc, k]) + expected_log(eta[w], q[same_word, k])
                   - expected_log(eta.sum(), q[others, k]) for k in range(len(alpha))])
    p = np.exp(lw - lw.max())
    return p / p.sum()


def collapsed_bound(docs, q, alpha, eta):
    """E_q[log p(z, x)] + H(q) with q(z) = prod_i q_i(z_i), by enumerating all K^N states."""
    K, N = len(alpha), len(q)
    out = -(q[q > 0] * np.log(q[q > 0])).sum()
    for s in itertools.product(range(K), repeat=N):
        weight = np.prod(q[np.arange(N), s])
        if weight > 0:
            out += weight * log_joint(docs, np.array(s), alpha, eta)
    return out
