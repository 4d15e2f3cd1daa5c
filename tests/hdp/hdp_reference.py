"""Naive NumPy/Python references for the HDP tests (never used by production code)."""
import itertools
import math

import numpy as np
from scipy import stats
from scipy.special import gammaln


def stirling1(n):
    """Unsigned Stirling numbers of the first kind s(n, m), m = 0..n, as Python ints."""
    row = [1]
    for i in range(1, n + 1):
        new = [0] * (i + 1)
        for m in range(1, i + 1):
            new[m] = row[m - 1] + (i - 1) * (row[m] if m < len(row) else 0)
        row = new
    return row


def set_partitions(n):
    """All set partitions of range(n) as canonical label tuples (first appearance order)."""
    def rec(i, labels, k):
        if i == n:
            yield tuple(labels)
            return
        for lab in range(k + 1):
            yield from rec(i + 1, labels + [lab], max(k, lab + 1))
    yield from rec(0, [], 0)


def canonical(z):
    """Relabel topics by first appearance."""
    seen = {}
    return tuple(seen.setdefault(int(k), len(seen)) for k in z)


def hdp_partition_posterior(doc_of, words, n_words, alpha, gamma, eta):
    """Exact posterior over token partitions of the HDP (ALGORITHMS.md 10.6): the
    CRF prior summed over table counts times the Dirichlet-multinomial likelihood.
    Returns (partitions, probabilities, log of the unnormalised total = log p(x))."""
    n = len(words)
    n_docs = max(doc_of) + 1
    lengths = [doc_of.count(j) for j in range(n_docs)]
    parts, logp = [], []
    for part in set_partitions(n):
        K = max(part) + 1
        njk = np.zeros((n_docs, K), dtype=int)
        nkw = np.zeros((K, n_words), dtype=int)
        for t, k in enumerate(part):
            njk[doc_of[t], k] += 1
            nkw[k, words[t]] += 1
        # sum over table counts 1 <= m_jk <= n_jk (m_jk = 0 when n_jk = 0)
        ranges = [range(1, c + 1) if c > 0 else range(0, 1) for c in njk.ravel()]
        total = 0.0
        for ms in itertools.product(*ranges):
            m = np.array(ms).reshape(njk.shape)
            p = 1.0
            for j in range(n_docs):
                p *= math.gamma(alpha) / math.gamma(alpha + lengths[j])
                for k in range(K):
                    p *= stirling1(njk[j, k])[m[j, k]] * alpha ** m[j, k]
            mk = m.sum(axis=0)
            p *= gamma ** K * math.gamma(gamma) / math.gamma(gamma + mk.sum())
            p *= np.prod([math.gamma(x) for x in mk])
            total += p
        lik = sum(gammaln(n_words * eta) - gammaln(n_words * eta + nkw[k].sum())
                  + (gammaln(nkw[k] + eta) - gammaln(eta)).sum() for k in range(K))
        parts.append(part)
        logp.append(math.log(total) + lik)
    logp = np.array(logp)
    log_norm = np.logaddexp.reduce(logp)
    return parts, np.exp(logp - log_norm), log_norm


def crp_tables(n, c, rng):
    """Number of tables of n customers in a CRP with concentration c (seating)."""
    return int((rng.random(n) * (c + np.arange(n)) < c).sum())


def words_given_labels(z, n_words, eta, rng):
    """Words of every token given its topic (``z``: per document), from the
    topic-word Polya urns (Phi ~ Dirichlet(eta) integrated out)."""
    counts = {}
    words = []
    for zj in z:
        wj = []
        for k in zj:
            c = counts.setdefault(k, np.zeros(n_words))
            w = rng.choice(n_words, p=(c + eta) / (c.sum() + n_words * eta))
            c[w] += 1
            wj.append(w)
        words.append(wj)
    return words


def assert_same_law(prior, chain, names):
    """Two-sample checks that a chain's statistics (rows) have the law of draws
    from the prior: column 0 (the number of topics) by a chi-square over its
    values (values seen fewer than 10 times pooled), the columns ``names`` by
    Kolmogorov-Smirnov; each p-value above 1e-3."""
    prior, chain = np.asarray(prior), np.asarray(chain)
    values = np.unique(prior[:, 0])
    table = np.array([[np.sum(s[:, 0] == v) for v in values] for s in (prior, chain)])
    keep = table.sum(0) >= 10
    table = np.column_stack([table[:, keep], table[:, ~keep].sum(1)]) if (~keep).any() else table
    assert stats.chi2_contingency(table)[1] > 1e-3, table
    for i, name in enumerate(names, start=1):
        p = stats.ks_2samp(prior[:, i], chain[:, i]).pvalue
        assert p > 1e-3, (name, p)


def make_bars(n_docs, doc_length, rng, alpha=1.0):
    """10 x 10 bars (ALGORITHMS.md 12.1): 20 topics, each uniform over one row or column."""
    topics = np.zeros((20, 100))
    for i in range(10):
        topics[i, i * 10:(i + 1) * 10] = 0.1
        topics[10 + i, i::10] = 0.1
    counts = np.zeros((n_docs, 100), dtype=np.int64)
    for j in range(n_docs):
        pi = rng.dirichlet(np.full(20, alpha))
        z = rng.choice(20, size=doc_length, p=pi)
        for k in np.unique(z):
            counts[j] += rng.multinomial((z == k).sum(), topics[k])
    return counts, topics


def match_topics(learned, truth):
    """For each true topic, the smallest L1 distance to a learned topic."""
    d = np.abs(truth[:, None, :] - learned[None, :, :]).sum(axis=2)
    return d.min(axis=1)


def poisson_binomial_pmf(q):
    """Exact pmf of a sum of independent Bernoulli(q_i), by convolution."""
    p = np.array([1.0])
    for qi in q:
        p = np.convolve(p, [1.0 - qi, qi])
    return p


class ExactCVHDP:
    """The CV-HDP bound with exact expectations over a factorised q(z) on a tiny
    corpus (enumeration of every assignment; ALGORITHMS.md 10.6)."""

    def __init__(self, doc_of, words, n_words, q):
        from scipy.special import digamma
        self.digamma = digamma
        self.doc_of, self.words, self.W = np.asarray(doc_of), np.asarray(words), n_words
        self.q = np.asarray(q, dtype=np.float64)
        self.N, self.K = self.q.shape
        self.D = self.doc_of.max() + 1
        self.lengths = np.bincount(self.doc_of, minlength=self.D)
        self.configs = np.array(list(itertools.product(range(self.K), repeat=self.N)))
        self.prob = np.prod(self.q[np.arange(self.N), self.configs], axis=1)
        C = len(self.configs)
        self.njk = np.zeros((C, self.D, self.K))
        self.nkw = np.zeros((C, self.K, self.W))
        for t in range(self.N):
            self.njk[np.arange(C), self.doc_of[t], self.configs[:, t]] += 1
            self.nkw[np.arange(C), self.configs[:, t], self.words[t]] += 1
        self.entropy = -(self.q * np.log(self.q)).sum()

    def log_z_aux(self, E_alpha, prior_doc, E_eta, prior_word):
        """E_z[log Z_aux(z)]: the first four lines of (18) with exact expectations."""
        out = (gammaln(E_alpha) - gammaln(E_alpha + self.lengths)).sum()
        per = (gammaln(prior_doc + self.njk) - gammaln(prior_doc)).sum(axis=(1, 2))
        nk = self.nkw.sum(2)
        per += np.where(nk > 0, gammaln(E_eta) - gammaln(E_eta + nk), 0.0).sum(1)
        per += (gammaln(prior_word + self.nkw) - gammaln(prior_word)).sum(axis=(1, 2))
        return out + self.prob @ per

    def antoniak_mean(self, n, c):
        return np.where(n > 0, c * (self.digamma(c + n) - self.digamma(c)), 0.0)

    def aux(self, E_alpha, prior_doc, E_eta, prior_word):
        """Exact sum_j E[log h_j], E[m.k], sum_k E[log g_k], E[t.w]."""
        d = self.digamma
        elog_h = (d(E_alpha) - d(E_alpha + self.lengths)).sum()
        m_k = self.prob @ self.antoniak_mean(self.njk, prior_doc).sum(1)
        nk = self.nkw.sum(2)
        elog_g = self.prob @ np.where(nk > 0, d(E_eta) - d(E_eta + nk), 0.0).sum(1)
        t_w = self.prob @ self.antoniak_mean(self.nkw, prior_word).sum(1)
        return elog_h, m_k, elog_g, t_w
