"""CV-HDP (collapsed variational HDP): count statistics, auxiliary expectations,
update (15), hyperparameter posteriors as coordinate optima, the bound, bars, API."""
import numpy as np
import pytest
from scipy.special import digamma, gammaln

from bnpcore import base
from bnpcore.corpus import Corpus
from bnpcore.evaluation import token_log_likelihood
from bnpcore import lda
from bnpcore.hdp import CollapsedVB, DirectAssignmentGibbs
from bnpcore.kernels import _cvhdp
from bnpcore.models.hdp_collapsed import (expected_log_g, expected_stick_kl, expected_tables, gamma_posterior,
                                          kl_dirichlet, kl_gamma, positive_part, stick_expectations,
                                          stick_posteriors)

from hdp_reference import ExactCVHDP, make_bars, match_topics, poisson_binomial_pmf



def fit_keeping_state(model, X, **kwargs):
    """Fit ``model`` and return its final BatchState (seen by a reporting callback)."""
    seen = []
    with model.reporting(lambda est, rec: seen.append(est._batch_state)):
        model.fit(X, **kwargs)
    return seen[-1]

def _evz(q):
    q = np.asarray(q, dtype=np.float64)
    return q.sum(), (q * (1 - q)).sum(), np.log1p(-np.minimum(q, 1 - 1e-15)).sum()


@pytest.mark.parametrize("case", ["random", "with_ones", "tiny", "single"])
def test_positive_part_matches_poisson_binomial(case):
    rng = np.random.default_rng(abs(hash(case)) % 2**32)
    q = {"random": rng.random(30), "with_ones": np.r_[rng.random(10), 1.0, 1.0],
         "tiny": rng.random(12) * 1e-9, "single": np.array([0.3])}[case]
    pmf = poisson_binomial_pmf(q)
    n = np.arange(len(pmf))
    P = 1.0 - pmf[0] if case != "tiny" else -np.expm1(np.log1p(-q).sum())
    Ep = (n * pmf).sum() / P
    Vp = (n ** 2 * pmf).sum() / P - Ep ** 2
    got = positive_part(*_evz(q))
    np.testing.assert_allclose(got[:2], [P, Ep], rtol=1e-12)
    # (14) subtracts two terms of size E+^2: absolute accuracy on that scale
    np.testing.assert_allclose(got[2], Vp, rtol=1e-12, atol=1e-12 * Ep ** 2)


def test_positive_part_of_a_zero_count():
    P, Ep, Vp = positive_part(0.0, 0.0, 0.0)
    assert P == Ep == Vp == 0.0


@pytest.mark.parametrize("seed", range(5))
def test_improved_expectations_vs_exact(seed):
    """(11)-(12) against exact averages over the Poisson-binomial ("very accurate")."""
    rng = np.random.default_rng(seed)
    q = rng.random(20)
    pmf = poisson_binomial_pmf(q)
    n = np.arange(len(pmf))
    assert q.sum() >= 2
    for c in (0.05, 1e-6, 3.0):
        exact = (pmf[1:] * c * (digamma(c + n[1:]) - digamma(c))).sum()
        np.testing.assert_allclose(expected_tables(c, *_evz(q)), exact, rtol=1e-3)
    for eta in (100.0, 2.0):
        exact = (pmf[1:] * (digamma(eta) - digamma(eta + n[1:]))).sum()
        np.testing.assert_allclose(expected_log_g(eta, *_evz(q)), exact, rtol=1e-3)


def _tiny_corpus(seed=0, n_docs=4, n_words=5, length=6):
    rng = np.random.default_rng(seed)
    docs = [list(rng.integers(0, n_words, rng.integers(1, length + 1))) for _ in range(n_docs)]
    return Corpus(docs, n_words=n_words)


@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_statistics_kernel_matches_numpy(n_threads):
    X = _tiny_corpus()
    rng = np.random.default_rng(1)
    r = rng.dirichlet(np.ones(3), X.nnz)
    r[0] = [1.0, 0.0, 0.0]
    out = [np.full((X.n_docs, 3), np.nan) for _ in range(3)] + [np.full((X.n_words, 3), np.nan) for _ in range(3)]
    ent = _cvhdp.cv_statistics(X.indptr, X.indices, X.counts, r, *out, n_threads)
    one = [np.empty_like(a) for a in out]
    _cvhdp.cv_statistics(X.indptr, X.indices, X.counts, r, *one)
    for got, want in zip(out[:3], one[:3]):           # document rows: the same sums on any number of threads
        np.testing.assert_array_equal(got, want)
    doc = np.repeat(np.arange(X.n_docs), np.diff(X.indptr))
    c = X.counts[:, None]
    refs = (c * r, c * r * (1 - r), c * np.log1p(-np.minimum(r, 1 - 1e-15)))
    for stat, ref in zip(out[:3], refs):
        np.testing.assert_allclose(stat, np.array([ref[doc == j].sum(0) for j in range(X.n_docs)]), rtol=1e-12,
                                   atol=1e-12)
    for stat, ref in zip(out[3:], refs):
        np.testing.assert_allclose(stat, np.array([ref[X.indices == w].sum(0) for w in range(X.n_words)]),
                                   rtol=1e-12, atol=1e-15)
    with np.errstate(divide="ignore", invalid="ignore"):
        np.testing.assert_allclose(ent, -np.nansum(c * r * np.log(r)), rtol=1e-12)


@pytest.mark.parametrize("n_docs, n_words", [(2, 0), (0, 3), (3, 2)])
def test_moments_kernel_zeroes_every_row_of_a_corpus_without_pairs(n_docs, n_words):
    indptr, empty = np.zeros(n_docs + 1, np.int64), np.zeros(0, np.int32)
    for n_threads in (1, 2, 3):
        got = [np.full((rows, 4), np.nan) for rows in (n_docs, n_docs, n_words, n_words)]
        _cvhdp.cv_moments(indptr, empty, empty, np.zeros((0, 4)), *got, n_threads)
        assert all((g == 0).all() for g in got)


@pytest.mark.parametrize("n_threads", [1, 2, 3, 8])
def test_moments_kernel_is_one_pass_in_corpus_order(n_threads):
    """cv_moments adds every pair in corpus order, bit for bit, on any number of threads
    (8: more threads than words, some with no words)."""
    X = _tiny_corpus(3, n_docs=9, n_words=5, length=12)
    r = np.random.default_rng(4).dirichlet(np.ones(4), X.nnz)
    want = [np.zeros((X.n_docs, 4)), np.zeros((X.n_docs, 4)), np.zeros((X.n_words, 4)), np.zeros((X.n_words, 4))]
    for j in range(X.n_docs):
        for p in range(X.indptr[j], X.indptr[j + 1]):
            e = X.counts[p] * r[p]
            for E, V, row in ((want[0], want[1], j), (want[2], want[3], X.indices[p])):
                E[row] += e
                V[row] += e * (1.0 - r[p])
    got = [np.full_like(a, np.nan) for a in want]
    _cvhdp.cv_moments(X.indptr, X.indices, X.counts, r, *got, n_threads)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def _delayed_blocks(X, n_threads):
    """The documents of each block of the delayed schedule (about nnz / n_threads pairs each)."""
    b = np.searchsorted(X.indptr, np.arange(n_threads + 1) * (X.nnz / n_threads))
    b[0], b[-1] = 0, X.n_docs
    b = np.maximum.accumulate(np.minimum(b, X.n_docs))
    return [range(b[t], b[t + 1]) for t in range(n_threads)]


@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_sweep_matches_reference(n_threads):
    """cv_sweep against a naive per-pair implementation of (15): sequential with one
    thread; with more, each block of documents sees the word and topic statistics of
    the start of the sweep plus its own changes (delayed updates)."""
    X = _tiny_corpus(3, n_docs=7, n_words=4, length=8)
    K = 3
    rng = np.random.default_rng(2)
    r = rng.dirichlet(np.ones(K), X.nnz)
    prior_doc, prior_word, prior_topic = rng.random(K) + 0.1, rng.random(X.n_words) + 0.05, 2.5
    doc = np.repeat(np.arange(X.n_docs), np.diff(X.indptr))
    c = X.counts[:, None].astype(float)

    def stats(r, f=lambda r: r, docs=range(X.n_docs)):
        by_doc = np.array([(c * f(r))[doc == j].sum(0) for j in range(X.n_docs)])
        mask = np.isin(doc, list(docs))[:, None]
        by_word = np.array([(mask * c * f(r))[X.indices == w].sum(0) for w in range(X.n_words)])
        return by_doc, by_word

    var = lambda r: r * (1 - r)  # noqa: E731
    ref = r.copy()
    start = {"E": stats(r)[1], "V": stats(r, var)[1]}
    for block in _delayed_blocks(X, n_threads):
        own = lambda f: stats(ref, f, block)[1] - stats(r, f, block)[1]  # noqa: E731  this block's changes
        for p in np.flatnonzero(np.isin(doc, list(block))):
            (E_jk, E_wk), (V_jk, V_wk) = stats(ref), stats(ref, var)
            E_wk, V_wk = start["E"] + own(lambda r: r), start["V"] + own(var)
            j, w, q = doc[p], X.indices[p], ref[p]
            a = prior_doc + E_jk[j] - q
            b = prior_word[w] + E_wk[w] - q
            d = prior_topic + E_wk.sum(0) - q
            v1 = q * (1 - q)
            lw = (np.log(a) + np.log(b) - np.log(d) - (V_jk[j] - v1) / (2 * a ** 2) - (V_wk[w] - v1) / (2 * b ** 2)
                  + (V_wk.sum(0) - v1) / (2 * d ** 2))
            ref[p] = np.exp(lw - lw.max()) / np.exp(lw - lw.max()).sum()
    (E_jk, E_wk), (V_jk, V_wk) = stats(r), stats(r, var)
    Z_jk, Z_wk = np.full_like(E_jk, np.nan), np.full_like(E_wk, np.nan)
    E_k, V_k = E_wk.sum(0), V_wk.sum(0)
    ent = _cvhdp.cv_sweep(X.indptr, X.indices, X.counts, r, E_jk, V_jk, Z_jk, E_wk, V_wk, Z_wk, E_k, V_k,
                          prior_doc, prior_word, prior_topic, n_threads)
    np.testing.assert_allclose(r, ref, rtol=1e-12)
    log1m = lambda r: np.log1p(-np.minimum(r, 1 - 1e-15))  # noqa: E731
    want = [*stats(ref), *stats(ref, var), *stats(ref, log1m)]
    for got, w in zip((E_jk, E_wk, V_jk, V_wk, Z_jk, Z_wk), want):
        np.testing.assert_allclose(got, w, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose((E_k, V_k), (want[1].sum(0), want[3].sum(0)), rtol=1e-10)
    np.testing.assert_allclose(ent, -(c * ref * np.log(ref)).sum(), rtol=1e-12)


def test_fast_exp_and_log_within_two_ulp():
    """The kernels' own exp (x <= 0; bnpcore/internal/fastmath.h, shared with
    OnlineVB's document step) and log against libm over their whole ranges; exp
    is 0 below -708 (libm's subnormals there) and keeps NaN."""
    rng = np.random.default_rng(0)
    x = np.r_[-rng.random(10 ** 5) * 708, -rng.random(1000) * 1e-6, 0.0, -1e-300, -707.99]
    np.testing.assert_allclose(_cvhdp.fast_math(x, "exp_neg"), np.exp(x), rtol=4.5e-16, atol=0)
    np.testing.assert_array_equal(_cvhdp.fast_math(np.array([-708.5, -745.2, -1e10, -np.inf]), "exp_neg"), 0.0)
    assert np.isnan(_cvhdp.fast_math(np.array([np.nan]), "exp_neg")).all()
    x = np.r_[np.exp(rng.uniform(-707, 709, 10 ** 5)), 1 + rng.normal(size=1000) * 1e-8, 1.0, np.sqrt(2), np.sqrt(0.5),
              np.finfo(float).tiny, np.finfo(float).max]
    np.testing.assert_allclose(_cvhdp.fast_math(x, "log"), np.log(x), rtol=4.5e-16, atol=1e-300)


def test_printed_alpha_term_is_minus_kl():
    """The alpha line of the printed (18) equals -KL(q(alpha) || p(alpha)) at the update."""
    a0, b0 = 3.0, 2.5
    E_m, sum_elog_h = 7.3, -4.1
    a1, b1 = gamma_posterior((a0, b0), E_m, sum_elog_h)
    E_a, log_G_a = a1 / b1, digamma(a1) - np.log(b1)
    printed = -(a1 * np.log(b1) - a0 * np.log(b0) + gammaln(a0) - gammaln(a1) + E_m * log_G_a
                + E_a * sum_elog_h)
    np.testing.assert_allclose(printed, -kl_gamma(a1, b1, a0, b0), rtol=1e-12)


def test_printed_stick_term_is_minus_kl_for_fixed_gamma():
    gamma = 1.7
    m_k = np.array([5.2, 3.1, 0.4, 0.01])
    sticks = stick_posteriors(m_k, gamma)
    u, v = sticks[:, 0], sticks[:, 1]
    s_k, s_gt = u - 1, v - gamma
    elog_v, elog_1mv = digamma(u) - digamma(u + v), digamma(v) - digamma(u + v)
    printed = -(gammaln(1 + gamma + s_k + s_gt) - np.log(gamma) - gammaln(1 + s_k) - gammaln(gamma + s_gt)
                + s_k * elog_v + s_gt * elog_1mv)
    np.testing.assert_allclose(printed, -expected_stick_kl(u, v, gamma, np.log(gamma)), rtol=1e-12)


class _ExactState:
    """Hyperparameter posteriors on a tiny corpus, iterated to their joint fixed point with
    exact auxiliary expectations, using the production update functions."""

    def __init__(self, seed=0, K=2):
        rng = np.random.default_rng(seed)
        self.doc_of = [0, 0, 0, 1, 1, 2]
        self.words = [0, 1, 1, 2, 0, 2]
        self.W = 3
        self.ex = ExactCVHDP(self.doc_of, self.words, self.W, rng.dirichlet(np.ones(K), len(self.words)))
        self.K = K
        self.pa, self.pg, self.pe, self.a_tau = (3.0, 2.0), (6.0, 7.0), (4.0, 0.1), np.full(self.W, 0.5)
        self.q = {"alpha": np.array(self.pa), "gamma": np.array(self.pg), "eta": np.array(self.pe),
                  "sticks": np.column_stack([np.ones(K), np.full(K, 1.0)]), "tau": self.a_tau.copy()}
        for _ in range(400):
            self.update()

    def derived(self, q):
        a, b = q["alpha"]
        ga, gb = q["gamma"]
        ea, eb = q["eta"]
        log_g, _, _ = stick_expectations(q["sticks"])
        G_tau = np.exp(digamma(q["tau"]) - digamma(q["tau"].sum()))
        return dict(E_alpha=a / b, prior_doc=np.exp(digamma(a)) / b * np.exp(log_g), E_gamma=ga / gb,
                    Elog_gamma=digamma(ga) - np.log(gb), E_eta=ea / eb, prior_word=np.exp(digamma(ea)) / eb * G_tau)

    def bound(self, q):
        d = self.derived(q)
        L = self.ex.log_z_aux(d["E_alpha"], d["prior_doc"], d["E_eta"], d["prior_word"]) + self.ex.entropy
        L -= kl_gamma(*q["alpha"], *self.pa) + kl_gamma(*q["gamma"], *self.pg) + kl_gamma(*q["eta"], *self.pe)
        L -= expected_stick_kl(q["sticks"][:, 0], q["sticks"][:, 1], d["E_gamma"], d["Elog_gamma"]).sum()
        return L - kl_dirichlet(q["tau"], self.a_tau)

    def update(self):
        q = self.q
        d = self.derived(q)
        elog_h, m_k, elog_g, t_w = self.ex.aux(d["E_alpha"], d["prior_doc"], d["E_eta"], d["prior_word"])
        q["alpha"] = np.array(gamma_posterior(self.pa, m_k.sum(), elog_h))
        q["sticks"] = stick_posteriors(m_k, d["E_gamma"])
        q["gamma"] = np.array(gamma_posterior(self.pg, self.K, stick_expectations(q["sticks"])[2].sum()))
        q["eta"] = np.array(gamma_posterior(self.pe, t_w.sum(), elog_g))
        q["tau"] = self.a_tau + t_w


@pytest.mark.parametrize("seed", [0, 1])
def test_hyperparameter_updates_are_coordinate_optima(seed):
    """At the fixed point of (8) every perturbation of q(alpha), q(gamma), q(V_k), q(eta_tot),
    q(tau) lowers the exactly computed bound (ALGORITHMS.md 10.6)."""
    st = _ExactState(seed)
    before = {k: v.copy() for k, v in st.q.items()}
    st.update()
    for k in before:                                   # it is a fixed point
        np.testing.assert_allclose(st.q[k], before[k], rtol=1e-9)
    L0 = st.bound(st.q)
    for name, value in st.q.items():
        for idx in np.ndindex(value.shape):
            for step in (1e-3, -1e-3):
                q = {k: v.copy() for k, v in st.q.items()}
                q[name][idx] *= 1 + step
                assert st.bound(q) < L0, (name, idx, step)


def test_bound_matches_exact_in_lda_mode_and_is_a_lower_bound():
    """CV-LDA mode (fixed hyperparameters): the F-approximated bound is close to the bound with
    exact expectations, which is below log p(x) by brute force."""
    doc_of, words, W, K = [0, 0, 0, 1, 1, 1, 1], [0, 1, 1, 2, 0, 2, 2], 3, 2
    X = Corpus([[0, 1, 1], [2, 0, 2, 2]], n_words=W)
    model = CollapsedVB(n_components=K, max_iter=5, alpha=0.8, learn_weights=False, eta_tot=1.5, random_state=0)
    state = fit_keeping_state(model, X)
    # per-token responsibilities from the per-pair ones (tokens in CSR order)
    pair = np.repeat(np.arange(X.nnz), X.counts)
    words_csr = X.indices[pair]
    doc_csr = np.repeat(np.arange(X.n_docs), X.doc_lengths)
    ex = ExactCVHDP(doc_csr, words_csr, W, state._r[pair])
    prior_doc = np.full(K, 0.8 / K)
    prior_word = np.full(W, 1.5 / W)
    exact = ex.log_z_aux(0.8, prior_doc, 1.5, prior_word) + ex.entropy
    assert abs(model.bound_ - exact) < 1e-2 * len(words)
    # brute-force log p(x | hyper) of the collapsed joint (5)
    logs = []
    for njk, nkw in zip(ex.njk, ex.nkw):
        per = ((gammaln(prior_doc + njk) - gammaln(prior_doc)).sum()
               + (gammaln(0.8) - gammaln(0.8 + ex.lengths)).sum()
               + (gammaln(1.5) - gammaln(1.5 + nkw.sum(1))).sum()
               + (gammaln(prior_word + nkw) - gammaln(prior_word)).sum())
        logs.append(per)
    assert exact <= np.logaddexp.reduce(logs) + 1e-12


def test_bars_recovered_from_40_topics():
    # sparse document mixtures (Dir(0.1) over the bars): from the near-uniform initialisation,
    # variational methods get stuck on dense Dir(1) mixtures of 20 overlapping bars at this
    # corpus size (a plain NumPy CVB0 with the true K finds 15 of 20 there) -- local optima,
    # not a failure of the updates
    rng = np.random.default_rng(0)
    counts, truth = make_bars(300, 100, rng, alpha=0.1)
    model = CollapsedVB(n_components=40, max_iter=100, eta_tot=5.0, random_state=0).fit(Corpus(counts))
    dist = match_topics(model.topics_[model.expected_counts_ >= 1], truth)
    assert np.all(dist < 0.5), dist
    assert np.all(np.diff(model.expected_counts_) <= 1e-9)        # reordered by size
    # the bound improves overall (it is not guaranteed monotone: Gaussian approximations)
    assert sum(model.history_[-1]["bound"].values()) > sum(model.history_[0]["bound"].values())


@pytest.fixture(scope="module")
def small_fit():
    rng = np.random.default_rng(2)
    counts, _ = make_bars(60, 50, rng)
    counts[3] = 0                                       # an empty document
    train, test = Corpus(counts).split_tokens(0.1, random_state=0)
    model = CollapsedVB(n_components=15, max_iter=10, eta_tot=5.0, random_state=4)
    return model.fit(train, heldout=test), train, test


def test_fitted_attributes(small_fit):
    model, train, test = small_fit
    assert model.topics_.shape == (15, 100) and np.allclose(model.topics_.sum(1), 1)
    assert model.weights_.sum() < 1 and np.all(model.weights_ > 0)
    assert len(model.history_) == 10 and all(np.isfinite(sum(h["bound"].values())) for h in model.history_)
    assert np.isclose(model.heldout_log_likelihood(train, test), model.history_[-1]["heldout_loglik"])
    assert model.bound_ == sum(model.history_[-1]["bound"].values())
    theta = model.transform(train[:5])
    assert theta.shape == (5, 15) and np.allclose(theta.sum(1), 1)
    assert {"kl_alpha", "kl_gamma", "kl_sticks"} <= set(model.history_[-1]["bound"])


def test_float32_responsibilities_close_to_float64(small_fit):
    model, train, test = small_fit
    m32 = CollapsedVB(**{**model.get_params(), "r_dtype": "float32"})
    assert fit_keeping_state(m32, train)._r.dtype == np.float32
    np.testing.assert_allclose(m32.bound_, model.bound_, rtol=1e-4)


def test_learned_topic_prior_is_the_coordinate_optimum_and_is_used(small_fit):
    """With learn_topic_prior, q(eta_tot) and q(tau) are the updates (8) of the
    statistics, their KL terms enter the bound, and the topics use E[eta_tot] E[tau_w]."""
    model, train, test = small_fit
    m = CollapsedVB(**{**model.get_params(), "learn_topic_prior": True, "max_iter": 3})
    st = fit_keeping_state(m, train)
    shape, rate = m.eta_posterior_
    assert (shape, rate) == st._post["eta"]
    a_tau = 40.0 / train.n_words
    terms = m.history_[-1]["bound"]
    np.testing.assert_allclose(terms["kl_eta"], -kl_gamma(shape, rate, *m.eta_prior), rtol=1e-12)
    np.testing.assert_allclose(terms["kl_tau"], -kl_dirichlet(m.tau_posterior_, np.full(train.n_words, a_tau)),
                               rtol=1e-12)
    # eq 16 with the learned prior: E[eta_tot] = shape / rate, E[tau] = tau / sum(tau)
    assert m.eta_tot_ == shape / rate and m.eta_tot_ != model.eta_tot
    tau = m.tau_posterior_ / m.tau_posterior_.sum()
    want_topics = (m.eta_tot_ * tau[None, :] + st._E_wk.T[st._order]) / (m.eta_tot_ + m.expected_counts_)[:, None]
    np.testing.assert_allclose(m.topics_, want_topics, rtol=1e-12)
    # update (8) from the statistics, with the E[eta_tot] and G[eta_tot tau_w] of the iteration
    E_eta, prior_word = st._h["E_eta"], st._prior_word.copy()
    E_k, V_k, Z_k = st._E_wk.sum(0), st._V_wk.sum(0), st._Z_wk.sum(0)
    E_t = expected_tables(prior_word[:, None], st._E_wk, st._V_wk, st._Z_wk)
    st._update_all()
    want = gamma_posterior(m.eta_prior, E_t.sum(), expected_log_g(E_eta, E_k, V_k, Z_k).sum())
    np.testing.assert_allclose(st._post["eta"], want, rtol=1e-12)
    np.testing.assert_allclose(st._tau_post, a_tau + E_t.sum(1), rtol=1e-12)
    np.testing.assert_allclose(st._prior_word, np.exp(digamma(want[0])) / want[1]
                               * np.exp(digamma(st._tau_post) - digamma(st._tau_post.sum())), rtol=1e-12)


def test_warm_start_from_gibbs(small_fit):
    model, train, test = small_fit
    g = DirectAssignmentGibbs(n_components=10, max_iter=20, burn_in=10, eta_tot=5.0, random_state=0).fit(train)
    m = CollapsedVB(n_components=5, max_iter=2, eta_tot=5.0, random_state=0).fit(train, init_from=g)
    assert m.n_components_ == max(5, g.n_components_)
    m2 = CollapsedVB(n_components=5, max_iter=2, eta_tot=5.0, init="gibbs", init_gibbs_iter=5, random_state=0)
    assert m2.fit(train).n_components_ >= 5
    with pytest.raises(ValueError, match="different corpus"):
        CollapsedVB(max_iter=1).fit(train[:10], init_from=g)
    light = DirectAssignmentGibbs(n_components=10, max_iter=3, burn_in=1, store_doc_topic=False,
                                  random_state=0).fit(train)
    with pytest.raises(ValueError, match="store_doc_topic=False"):
        CollapsedVB(max_iter=1).fit(train, init_from=light)


def test_save_load(small_fit, tmp_path):
    model, train, test = small_fit
    loaded = base.load(model.save(tmp_path / "cv.npz", doc_topic=True))
    np.testing.assert_array_equal(loaded.topics_, model.topics_)
    assert loaded.heldout_log_likelihood(train, test) == model.heldout_log_likelihood(train, test)
    assert loaded.score(test) == model.score(test)
    light = base.load(model.save(tmp_path / "light.npz"))     # without doc_topic_: the training documents by transform
    assert not hasattr(light, "doc_topic_")
    assert light.score(test) == model.score(test)
    assert light.heldout_log_likelihood(train, test) == pytest.approx(model.heldout_log_likelihood(train, test),
                                                                      abs=0.05)


@pytest.mark.parametrize("params, match", [
    ({"n_components": 0}, "n_components"), ({"alpha": -1.0}, "alpha"), ({"init": "x"}, "init"),
    ({"r_dtype": "float16"}, "r_dtype"), ({"learn_weights": False}, "fixed alpha"),
    ({"eta_prior": (0, 1)}, "eta_prior"),
    ({"learn_weights": False, "alpha": 1.0, "gamma": 2.0}, "gamma has no effect"),
    ({"n_components": 5, "learn_weights": False, "alpha": 1.0, "gamma_prior": (2.0, 1.0)}, "gamma_prior has no effect"),
    ({"schedule": "async"}, "schedule"), ({"n_threads": 0}, "n_threads"), ({"n_threads": -2}, "n_threads"),
    ({"n_threads": 1.5}, "n_threads"),
])
def test_bad_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        CollapsedVB(**params).fit(Corpus([[0, 1]], n_words=2))


def test_transform_with_disjoint_topics_is_exact():
    model = CollapsedVB()
    model.topics_ = np.array([[0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.25, 0.75]])
    model.weights_ = np.array([0.6, 0.3])
    model.alpha_, model.n_components_, model.n_features_in_ = 2.0, 2, 4
    theta = model.transform(Corpus([[2, 3, 3], [0, 1, 0, 0, 1]], n_words=4))
    np.testing.assert_allclose(theta, [[1.2 / 4.8, 3.6 / 4.8], [6.2 / 6.8, 0.6 / 6.8]], rtol=1e-12)


def test_transform_is_a_fixed_point_of_the_document_equations(small_fit):
    """Run long enough, ``transform`` solves the document side of (15) with the
    topics fixed: N_jk = sum_w c_jw r_jwk, r_jwk proportional to (prior_k +
    N_jk - r_jwk) phi_wk exp(-V^-_jk / (2 (prior_k + N_jk - r_jwk)^2)),
    V^-_jk = sum_w c_jw r_jwk (1 - r_jwk) - r_jwk (1 - r_jwk)."""
    model, _, test = small_fit
    theta = model.transform(test, max_iter=3000)
    prior, phi = model.alpha_ * model.weights_, model.topics_.T
    for j in range(test.n_docs):
        lo, hi = test.indptr[j], test.indptr[j + 1]
        words, c = test.indices[lo:hi], test.counts[lo:hi, None].astype(float)
        N = theta[j] * (c.sum() + prior.sum()) - prior
        r = np.full((hi - lo, len(prior)), 1 / len(prior))
        for _ in range(300):
            e = N - r + prior
            V = (c * r * (1 - r)).sum(axis=0)
            r = phi[words] * e * np.exp(-(V - r * (1 - r)) / (2 * e * e))
            r /= r.sum(axis=1, keepdims=True)
        np.testing.assert_allclose((c * r).sum(axis=0), N, rtol=1e-9, atol=1e-9, err_msg=f"document {j}")


def test_transform_of_a_one_token_document_where_the_products_underflow():
    """One token: its row is proportional to prior_k phi_wk, here ~1e-350,
    below the smallest double, so it is normalised in log space (one pass:
    later passes see rounding residues of N_jk - r_jk, ~1e-17, above such priors)."""
    model = CollapsedVB()
    model.topics_ = np.array([[1e-100, 1.0 - 1e-100], [3e-100, 1.0 - 3e-100], [2e-100, 1.0 - 2e-100]])
    model.weights_ = np.array([1e-250, 2e-250, 1e-250])
    model.alpha_, model.n_components_, model.n_features_in_ = 1.0, 3, 2
    theta = model.transform(Corpus([[0]], n_words=2), max_iter=1)
    r = np.array([1.0, 6.0, 2.0]) / 9.0
    np.testing.assert_allclose(theta[0], (model.weights_ + r) / (model.weights_.sum() + 1.0), rtol=1e-12)


def test_heldout_log_likelihood_uses_the_fitted_state_for_training_documents(small_fit):
    model, train, test = small_fit
    want = token_log_likelihood(model.doc_topic_, model.topics_, test)      # eq 16 with the fitted E[n_jk]
    assert model.heldout_log_likelihood(train, test) == want
    other = model.heldout_log_likelihood(train[:20], test[:20])      # new documents: fold-in
    assert np.isfinite(other) and other != want


def test_gamma_prior_of_cv_lda_is_the_initial_samplers():
    """In CV-LDA mode gamma_prior is accepted only with init='gibbs', where the initial
    DirectAssignmentGibbs uses it."""
    X = _tiny_corpus(1, n_docs=6, n_words=5, length=6)
    m = CollapsedVB(n_components=3, max_iter=1, alpha=1.0, learn_weights=False, init="gibbs", init_gibbs_iter=2,
                    gamma_prior=(2.0, 1.0), random_state=0).fit(X)
    assert m.gamma_posterior_ is None and np.allclose(m.weights_, 1 / m.n_components_)


def test_cv_lda_mode_is_cvb_lda():
    """learn_weights=False with a fixed alpha is CVB LDA (Teh, Newman & Welling 2006) with
    alpha_k = alpha / K and eta_w = eta_tot / W: from the same responsibilities, every
    sweep gives the same responsibilities as lda.CollapsedVB(order=2)."""
    X = _tiny_corpus(5, n_docs=8, n_words=6, length=9)
    K, alpha, eta_tot = 3, 0.6, 2.0
    hdp = fit_keeping_state(CollapsedVB(n_components=K, max_iter=1, alpha=alpha, eta_tot=eta_tot,
                                        learn_weights=False, random_state=0), X)
    ref = fit_keeping_state(lda.CollapsedVB(n_components=K, order=2, alpha=alpha / K, eta=eta_tot / X.n_words,
                                            max_iter=1, random_state=1), X)
    r0 = np.random.default_rng(3).dirichlet(np.ones(K), X.nnz)
    hdp._r[:], ref.r[:] = r0, r0
    hdp._statistics()
    ref._recount()
    np.testing.assert_allclose(hdp._prior_doc, alpha / K, rtol=1e-15)
    for _ in range(25):
        hdp.sweep()
        ref.sweep()
        np.testing.assert_allclose(hdp._r, ref.r, rtol=1e-9, atol=1e-12)
    assert np.abs(r0 - hdp._r).max() > 0.1            # it moved: a fixed point of both, not of neither


def test_transform_is_the_same_on_any_thread_count(small_fit):
    model, train, test = small_fit
    many = Corpus(np.vstack([train.matrix.toarray()] * 20))        # enough documents for the threads to overlap
    want = CollapsedVB(**{**model.get_params(), "n_threads": 1}).fit(train).transform(many)
    for n in (2, 3):
        got = CollapsedVB(**{**model.get_params(), "n_threads": n}).fit(train).transform(many)
        np.testing.assert_array_equal(got, want)
    m = base.load(model.save(__import__("tempfile").mkdtemp() + "/m.npz"))
    scores = []
    for n in (1, 2):
        m.set_params(n_threads=n)
        scores.append(m.score(test))
    assert scores[0] == scores[1]


def test_delayed_schedule(small_fit):
    """The delayed-update schedule: one thread is the sequential schedule bit for bit;
    two threads are reproducible, differ from it (the standard approximation), and
    converge to a bound and held-out likelihood close to its."""
    model, train, test = small_fit
    params = {**model.get_params(), "max_iter": 40}
    seq = CollapsedVB(**{**params, "n_threads": 2}).fit(train, heldout=test)
    one = CollapsedVB(**{**params, "schedule": "delayed", "n_threads": 1}).fit(train, heldout=test)
    np.testing.assert_array_equal(one.topics_, seq.topics_)
    two = [CollapsedVB(**{**params, "schedule": "delayed", "n_threads": 2}).fit(train, heldout=test)
           for _ in range(2)]
    np.testing.assert_array_equal(two[0].topics_, two[1].topics_)
    assert not np.array_equal(two[0].topics_, seq.topics_)
    assert abs(two[0].bound_ - seq.bound_) < 0.01 * train.n_tokens          # per token, nats
    assert abs(two[0].history_[-1]["heldout_loglik"] - seq.history_[-1]["heldout_loglik"]) < 0.05
