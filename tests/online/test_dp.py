"""Truncation-free SVI for the DP mixture and its truncated baseline (Wang &
Blei 2012, "Truncation-free online variational inference for Bayesian
nonparametric models" [TF], §2.3, §3 and supplement S.2-S.3)."""
import numpy as np
import pytest
from scipy import integrate, stats
from scipy.special import betaln, gammaln, logsumexp

from bnpcore import mixture
from bnpcore.corpus import Corpus
from bnpcore.inference.online import Minibatch, StickState
from bnpcore.kernels._svi import dp_local_step, dp_log_weights, dp_meanfield_step
from bnpcore.evaluation import dp_heldout_log_likelihood


def make_state(lam, sizes, eta, a, truncated=False):
    """A StickState holding lambda (K x W) and Nst_k = sizes."""
    lam = np.asarray(lam, dtype=float)
    state = StickState(lam.shape[1], eta, a, truncated)
    state.table.add(len(lam))
    state.words[state.slots] = lam - eta
    state.row_tilde[state.slots] = (lam - eta).sum(axis=1)
    state.table.arrays["sizes"][state.slots] = sizes
    return state


def log_weights(state, X):
    out = np.empty((X.n_docs, state.n_components + 1))
    dp_log_weights(X.indptr, X.indices, X.counts, state.words, state.row_tilde, state.slots, state.scale,
                   state.sizes, state.eta, state.concentration, out)
    return out


def local_step(state, X, sweeps, exact, rng, docs=None, trace=None):
    b = Minibatch(X, np.arange(X.n_docs) if docs is None else docs, np.full(X.n_words, -1, dtype=np.int32))
    return dp_local_step(b.ptr, b.words, b.counts, b.vocab, state.words, state.row_tilde, state.slots,
                         state.scale, state.sizes, state.eta, state.concentration, sweeps, exact, rng, trace)


# -- the analytic local distribution -----------------------------------------------

def test_local_distribution_matches_numerical_integration():
    """W = 2: q(z = k) ∝ E_q[pi_k phi_k1^c1 phi_k2^c2] by quadrature over the
    Beta q(phi_k) and the Beta sticks (1e-10), including the new component."""
    eta, a = 0.7, 1.3
    lam = np.array([[3.0, 1.5], [0.9, 4.2], [2.2, 2.2]])
    sizes = np.array([5.0, 2.5, 0.7])
    state = make_state(lam, sizes, eta, a)
    u, v = state.stick_params()
    X = Corpus(np.array([[2, 1], [0, 3], [4, 0], [0, 0]]))

    def beta_mean(f, p, q):
        return integrate.quad(lambda x: f(x) * stats.beta.pdf(x, p, q), 0, 1, epsabs=0, epsrel=1e-13)[0]

    mean_v = [beta_mean(lambda x: x, u[k], v[k]) for k in range(3)]
    mean_1mv = [beta_mean(lambda x: 1 - x, u[k], v[k]) for k in range(3)]
    pis = [mean_v[k] * np.prod(mean_1mv[:k]) for k in range(3)] + [np.prod(mean_1mv)]
    got = log_weights(state, X)
    for j, (c1, c2) in enumerate(X.matrix.toarray()):
        lik = [beta_mean(lambda x: x ** c1 * (1 - x) ** c2, *lam[k]) for k in range(3)]
        lik.append(beta_mean(lambda x: x ** c1 * (1 - x) ** c2, eta, eta))
        ref = np.log(np.array(pis) * np.array(lik))
        np.testing.assert_allclose(got[j] - logsumexp(got[j]), ref - logsumexp(ref), rtol=1e-10, atol=1e-12)


def test_single_document_sampler_marginal_is_the_analytic_distribution():
    """S = 1: the minibatch sampler (sticks sampled, not integrated) draws z from
    the analytic q(z_j) of [TF] §2.3, new component included (chi-square)."""
    eta, a = 0.5, 1.0
    state = make_state([[3.0, 1.0, 2.0], [1.0, 1.0, 6.0], [0.6, 2.0, 0.9]], [6.0, 3.0, 1.0], eta, a)
    X = Corpus(np.array([[2, 0, 1]]))
    lw = log_weights(state, X)[0]
    p = np.exp(lw - logsumexp(lw))
    rng = np.random.default_rng(42)
    n = 20000
    draws = np.empty(n, dtype=int)
    for i in range(n):
        n_new, z, _, _ = local_step(state, X, 2, True, rng)
        draws[i] = z[0] if n_new == 0 else 3
    observed = np.bincount(draws, minlength=4)
    assert stats.chisquare(observed, n * p).pvalue > 1e-3


@pytest.mark.parametrize("w1, case_a, case_b", [(1, -2.2083, 0.0), (5, -7.2061, -3.8915),
                                                (10, -10.7638, -7.1040), (50, -21.5663, -17.4798)])
def test_figure_2_toy_log_odds(w1, case_a, case_b):
    """[TF] Figure 2: V = 10, q(phi_2) = Dir(0.1 x 10), document = w1 copies of word 1,
    equal prior weights; exact log q(z=1)/q(z=2) of both approaches."""
    eta = 0.1
    X = Corpus(np.array([[w1] + [0] * 9]))
    for lam1, collapsed, meanfield in [([0.1] + [1.0] * 9, case_a, -2.7295 * w1),
                                       ([1.0] * 10, case_b, 7.0176 * w1)]:
        state = make_state([lam1, [0.1] * 10], [3.0, 1.0], eta, 1.0)
        u, v = state.stick_params()
        log_prior_odds = np.log(u[0] / v[0]) - np.log(u[1] / (u[1] + v[1]))
        lw = log_weights(state, X)[0]
        assert lw[0] - lw[1] - log_prior_odds == pytest.approx(collapsed, abs=5e-5)
        b = Minibatch(X, np.array([0]), np.full(10, -1, dtype=np.int32))
        resp = np.empty((1, 2))
        dp_meanfield_step(b.ptr, b.words, b.counts, b.vocab, state.words, state.row_tilde, state.slots,
                          state.scale, np.zeros(2), eta, np.empty((2, len(b.vocab))), np.empty(2), resp)
        assert np.log(resp[0, 0] / resp[0, 1]) == pytest.approx(meanfield, rel=1e-4)


# -- the minibatch sampler, prior only ---------------------------------------------

def batch_means_z(x, n_batches=100):
    """(mean, autocorrelation-corrected standard error) by batch means."""
    m = x[: len(x) // n_batches * n_batches].reshape(n_batches, -1).mean(axis=1)
    return x.mean(), m.std(ddof=1) / np.sqrt(n_batches)


def prior_only_same_component(exact, a=1.0, sweeps=300_000, seed=0):
    """Two documents of one word (W = 1: every likelihood is constant), K = 0:
    the fraction of sweeps with z_1 = z_2 along one long chain."""
    X = Corpus(np.array([[1], [1]]))
    trace = np.empty((sweeps, 2), dtype=np.int32)
    local_step(StickState(1, 0.5, a), X, sweeps, exact, np.random.default_rng(seed), trace=trace)
    return batch_means_z((trace[:, 0] == trace[:, 1]).astype(float))


def test_prior_only_minibatch_sampler_is_exact_with_the_walk():
    """P(same component) = 1/(1 + a) under the DP (E17), within the 1e-3
    two-sided threshold of the autocorrelation-corrected standard error."""
    for a in (1.0, 0.4):
        mean, se = prior_only_same_component(True, a)
        assert abs(mean - 1 / (1 + a)) < 3.29 * se, (a, mean, se)


@pytest.mark.xfail(strict=True, reason="E17: [TF] S.2.2's new-component rule is not an exact Gibbs step "
                                       "(P(same) = 0.51-0.53 instead of 0.5)")
def test_prior_only_minibatch_sampler_paper_rule():
    mean, se = prior_only_same_component(False)
    assert abs(mean - 0.5) < 3.29 * se, (mean, se)


def test_minibatch_sampler_is_exact_on_a_tiny_posterior():
    """Three documents, W = 2, one instantiated component: the chain's
    distribution of the partition of the minibatch equals the exact
    posterior of the locally collapsed model (enumeration over labellings
    with the sticks integrated: a finite sum over the DP partition prior
    with q(V_1) for the first stick)."""
    eta, a = 0.6, 0.8
    lam1 = np.array([4.0, 1.0])
    state = make_state([lam1], [3.0], eta, a)
    u1, v1 = state.stick_params()
    docs = np.array([[3, 0], [0, 2], [1, 1]])
    X = Corpus(docs)

    def log_dm(c, lam):
        return gammaln(lam.sum()) - gammaln(lam.sum() + c.sum()) + np.sum(gammaln(lam + c) - gammaln(lam))

    # labels: 0 = the existing component, 1, 2, 3 = new components in order of
    # first appearance (exchangeable beyond K: their sticks are Beta(1, a)).
    import itertools
    probs = {}
    for z in itertools.product(range(4), repeat=3):
        new = [k for k in z if k > 0]
        if new and sorted(set(new)) != list(range(1, max(new) + 1)):
            continue
        if any(z[i] > 0 and z[i] > max([0] + [zz for zz in z[:i]]) + 1 for i in range(3)):
            continue
        m0 = sum(k == 0 for k in z)
        sizes = [sum(k == c for k in z) for c in range(1, 4) if c in z]
        # E over V_1 ~ Beta(u1, v1) of V_1^m0 (1 - V_1)^(n - m0), then the CRP(a) of the rest
        n_rest = 3 - m0
        lp = betaln(u1[0] + m0, v1[0] + n_rest) - betaln(u1[0], v1[0])
        lp += len(sizes) * np.log(a) + sum(gammaln(s) for s in sizes) + gammaln(a) - gammaln(a + n_rest)
        for c in set(z):
            members = docs[[i for i in range(3) if z[i] == c]]
            lp += log_dm(members.sum(axis=0), lam1 if c == 0 else np.full(2, eta))
        probs[z] = lp
    keys = list(probs)
    p = np.exp(np.array([probs[k] for k in keys]) - logsumexp([probs[k] for k in keys]))

    def canonical(z):
        seen, out = {}, []
        for k in z:
            out.append(0 if k == 0 else seen.setdefault(k, len(seen) + 1))
        return tuple(out)

    sweeps = 60000
    trace = np.empty((sweeps, 3), dtype=np.int32)
    local_step(state, X, sweeps, True, np.random.default_rng(7), trace=trace)
    index = {k: i for i, k in enumerate(keys)}
    observed = np.bincount([index[canonical(z)] for z in map(tuple, trace[::10])], minlength=len(keys))
    expected = observed.sum() * p
    big = expected >= 5
    chi2 = ((observed[big] - expected[big]) ** 2 / expected[big]).sum()
    assert stats.chi2.sf(chi2, big.sum() - 1) > 1e-3


# -- growth from zero and the baselines -------------------------------------------

def pitman_yor_corpus(seed, n_docs=500, n_words=80, length=60, discount=0.25, conc=1.0):
    """Labels from the two-parameter CRP, centres Dir(0.2), multinomial documents."""
    rng = np.random.default_rng(seed)
    z, counts = [], []
    for _ in range(n_docs):
        w = np.array(counts + [conc + discount * len(counts)]) - np.array([discount] * len(counts) + [0])
        k = rng.choice(len(w), p=w / w.sum())
        if k == len(counts):
            counts.append(0)
        counts[k] += 1
        z.append(k)
    phi = rng.dirichlet(np.full(n_words, 0.2), len(counts))
    X = np.array([rng.multinomial(length, phi[k]) for k in z])
    return Corpus(X), np.array(z), phi, np.array(counts) / n_docs


def adjusted_rand(a, b):
    from scipy.special import comb
    table = np.zeros((a.max() + 1, b.max() + 1))
    np.add.at(table, (a, b), 1)
    s = comb(table, 2).sum()
    sa, sb = comb(table.sum(1), 2).sum(), comb(table.sum(0), 2).sum()
    expected = sa * sb / comb(len(a), 2)
    return (s - expected) / (0.5 * (sa + sb) - expected)


def test_truncation_free_grows_from_zero_and_recovers_the_clusters():
    """Pitman-Yor(0.25, 1) clusters: components grow from zero; the recovered
    clustering matches the truth (adjusted Rand index) and the held-out score
    is within 0.02 nats/word of the true components (with the training
    frequencies as weights)."""
    X, z, phi, weights = pitman_yor_corpus(0)
    train, test = X[np.arange(400)], X[np.arange(400, 500)]
    est = mixture.TruncationFreeSVI(eta=0.2, a=1.0, batch_size=10, n_epochs=3, prune_every=400,
                                    random_state=0)
    est.fit(train, heldout=test, eval_every=100)
    sizes = np.bincount(z[:400], minlength=len(phi))
    ks = [r["n_components"] for r in est.history_]
    assert 0 < ks[0] < max(ks)
    assert est.n_components_ >= (sizes >= 3).sum()
    labels = est.transform(train).argmax(axis=1)
    big = sizes[z[:400]] >= 3
    assert adjusted_rand(z[:400], labels) > 0.99
    assert adjusted_rand(z[:400][big], labels[big]) == pytest.approx(1.0)
    oracle = dp_heldout_log_likelihood(sizes[sizes > 0] / 400, phi[sizes > 0], test)
    assert est.score(test) > oracle - 0.02


def test_stochastic_vb_recovers_well_separated_clusters():
    X, z, phi, weights = pitman_yor_corpus(1, n_docs=400)
    est = mixture.StochasticVB(n_components=30, eta=0.2, batch_size=50, n_epochs=5, random_state=0).fit(X)
    assert adjusted_rand(z, est.transform(X).argmax(axis=1)) > 0.9
    np.testing.assert_allclose(est.transform(X).sum(axis=1), 1.0)
    assert est.weights_.sum() == pytest.approx(1.0)


def test_truncated_baseline_with_one_component_is_the_corpus_dirichlet():
    """K = 1: r_j1 = 1, so one pass with rho_t = S/n_t gives lambda = eta + corpus counts."""
    X, _, _, _ = pitman_yor_corpus(2, n_docs=53)
    est = mixture.StochasticVB(n_components=1, eta=0.3, batch_size=5, n_epochs=1, schedule="truncation_free",
                               random_state=0).fit(X)
    np.testing.assert_allclose(est.components_[0], 0.3 + np.asarray(X.matrix.sum(axis=0))[0], rtol=1e-12)
    assert est._state.sizes[0] == pytest.approx(53, rel=1e-12)
    np.testing.assert_array_equal(est.weights_, [1.0])


def test_transform_and_score_contract():
    X, _, _, _ = pitman_yor_corpus(3, n_docs=120)
    X = Corpus(np.vstack([X.matrix.toarray(), np.zeros((1, X.n_words), dtype=int)]))    # empty document
    for est in (mixture.TruncationFreeSVI(batch_size=10, random_state=0),
                mixture.StochasticVB(n_components=10, batch_size=10, random_state=0)):
        est.fit(X)
        r = est.transform(X)
        assert r.shape == (X.n_docs, est.n_components_)
        np.testing.assert_allclose(r.sum(axis=1), 1.0)
        assert np.isfinite(est.score(X))
        assert est.topics_.shape == (est.n_components_, X.n_words)
        np.testing.assert_allclose(est.topics_.sum(axis=1), 1.0)
