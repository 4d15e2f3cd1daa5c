"""Direct-assignment HDP with split-merge moves (Bryant & Sudderth 2012): kernels
against NumPy transcriptions, the bound against a direct evaluation and Monte
Carlo, monotone batch iterations, the moves' exact identities."""
import copy
import warnings

import numpy as np
import pytest
from scipy import integrate
from scipy.special import digamma, gammaln, xlogy

from bnpcore import Corpus, registry
from bnpcore.datasets import make_bars
from bnpcore.hdp import DirectAssignmentGibbs, DirectAssignmentVB
from bnpcore.inference.online import Minibatch
from bnpcore.kernels import _dahdp
from bnpcore.models import hdp_da_bound as da_bound, hdp_da_moves as da_moves


def tiny_corpus(seed=0, n_docs=12, n_words=9, max_count=4):
    rng = np.random.default_rng(seed)
    X = rng.integers(0, max_count + 1, size=(n_docs, n_words)) * (rng.random((n_docs, n_words)) < 0.6)
    X[0, :] = 0                       # an empty document
    X[1, 2] = 40                      # a large count
    return Corpus(X)


# The moves of Bryant & Sudderth (2012), the estimator's defaults before bnpcore's split-only defaults: the
# tests of the merges and of the "reassign" proposal need them.
PAPER_MOVES = dict(max_splits=1, max_merges=None, split_candidates=10, split_inits=("minibatch", "divide", "reassign"))


def fresh_state(corpus, K=4, seed=1, **params):
    moves = {**PAPER_MOVES, **{key: params.pop(key) for key in list(params) if key in da_moves.MOVE_DEFAULTS}}
    est = DirectAssignmentVB(n_components=K, random_state=seed, moves=moves, **params)
    return est._new_state(corpus, np.random.default_rng(seed), corpus.n_docs)


def full_bound(state, local, scale):
    """L_B evaluated directly from the responsibilities (ALGORITHMS-style transcription of the
    paper's eq. 2 with the rest cell), the oracle of the incremental terms."""
    lam, beta, b = state.lam, state.beta, local.batch
    K, W = lam.shape
    elog = digamma(lam) - digamma(lam.sum(1))[:, None]
    r, c = local.resp, b.counts.astype(float)
    tokens = (c[:, None] * (r * elog[:, b.vocab[b.words]].T - xlogy(r, r))).sum()
    theta, a = local.theta, state.alpha
    ab = a * beta
    elogpi = digamma(theta) - digamma(theta.sum(1))[:, None]
    n = np.zeros_like(theta)
    np.add.at(n[:, :K], np.repeat(np.arange(b.n_docs), np.diff(b.ptr)), c[:, None] * r)
    docs = (gammaln(a) - gammaln(ab).sum() + ((ab - 1) * elogpi).sum(1) + (n * elogpi).sum(1)
            - gammaln(theta.sum(1)) + gammaln(theta).sum(1) - ((theta - 1) * elogpi).sum(1)).sum()
    eta = state.eta
    topics = (gammaln(W * eta) - W * gammaln(eta) + ((eta - 1) * elog).sum(1)
              - gammaln(lam.sum(1)) + gammaln(lam).sum(1) - ((lam - 1) * elog).sum(1)).sum()
    prior = da_bound.gem_log_density(beta, state.gamma, state.settings["gem_density"])[0]
    return scale * tokens + scale * docs + topics + prior


def minibatch(state, corpus, ids=None):
    ids = np.arange(corpus.n_docs) if ids is None else ids
    return Minibatch(corpus, ids, state._word_map)


# ---------------------------------------------------------------------------
# kernels
# ---------------------------------------------------------------------------

def numpy_estep(batch, elogphi, ab, tol, max_iter):
    K = elogphi.shape[1]
    thetas, resps = [], []
    for j in range(batch.n_docs):
        lo, hi = batch.ptr[j], batch.ptr[j + 1]
        c, e = batch.counts[lo:hi].astype(float), elogphi[batch.words[lo:hi]]
        theta = ab[:K] + c.sum() * ab[:K] / ab[:K].sum()
        for _ in range(max_iter):
            s = e + digamma(theta)
            r = np.exp(s - s.max(1, keepdims=True))
            r /= r.sum(1, keepdims=True)
            new = ab[:K] + c @ r
            done = np.abs(new - theta).mean() < tol
            theta = new
            if done:
                break
        thetas.append(np.append(theta, ab[K]))
        resps.append(r if hi > lo else np.zeros((0, K)))
    return np.array(thetas), np.vstack(resps)


def run_estep(batch, elogphi, ab, tol=1e-10, max_iter=500):
    S, K, V = batch.n_docs, elogphi.shape[1], len(batch.vocab)
    theta, ndk, stats, ent = np.empty((S, K + 1)), np.empty((S, K)), np.zeros((V, K)), np.zeros(K)
    resp = np.empty((len(batch.words), K))
    _dahdp.estep(batch.ptr, batch.words, batch.counts, elogphi, ab, tol, max_iter, False, theta, ndk, stats, ent,
                 resp)
    return theta, ndk, stats, ent, resp


def test_estep_matches_numpy_transcription():
    corpus = tiny_corpus()
    state = fresh_state(corpus)
    batch = minibatch(state, corpus)
    elogphi = state.elogphi(batch.vocab)
    ab = state.alpha * state.beta
    theta, ndk, stats, ent, resp = run_estep(batch, elogphi, ab)
    ref_theta, ref_resp = numpy_estep(batch, elogphi, ab, 1e-10, 500)
    np.testing.assert_allclose(theta, ref_theta, rtol=1e-10)
    np.testing.assert_allclose(resp, ref_resp, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(resp.sum(1), 1.0, rtol=1e-13)
    c = batch.counts.astype(float)
    doc_of = np.repeat(np.arange(batch.n_docs), np.diff(batch.ptr))
    np.testing.assert_allclose(ndk, np.array([(c[doc_of == j, None] * resp[doc_of == j]).sum(0)
                                              for j in range(batch.n_docs)]), rtol=1e-12, atol=1e-12)
    # the fixed point: theta at eq. 4 for r, r at eq. 3 for theta (to the tolerance)
    np.testing.assert_allclose(theta[:, :-1], ab[:-1] + ndk, rtol=1e-12)
    s = elogphi[batch.words] + digamma(theta[doc_of, :-1])
    fixed = np.exp(s - s.max(1, keepdims=True))
    np.testing.assert_allclose(resp, fixed / fixed.sum(1, keepdims=True), atol=1e-8)
    # entropy per topic, once the caller removes sum_w stats E[log phi]
    ent -= np.einsum("wk,wk->k", stats, elogphi)
    np.testing.assert_allclose(ent, -(c[:, None] * xlogy(resp, resp)).sum(0), rtol=1e-10)


def test_a_minibatch_estep_normalises_the_topics_over_all_words():
    """A document's E-step does not depend on the other documents of its
    minibatch: E[log phi] of the minibatch's words is normalised by each
    topic's total over the whole vocabulary, not over the minibatch's words."""
    corpus = tiny_corpus()
    state = fresh_state(corpus)
    ids = np.array([3, 7])
    alone = state.estep(minibatch(state, corpus, ids))
    within = state.estep(minibatch(state, corpus))
    assert len(minibatch(state, corpus, ids).vocab) < corpus.n_words
    np.testing.assert_allclose(alone.theta, within.theta[ids], rtol=1e-12)
    np.testing.assert_allclose(da_bound.expected_log_phi(state.lam, [2, 5]),
                               digamma(state.lam[:, [2, 5]]) - digamma(state.lam.sum(1))[:, None], rtol=1e-14)


def test_estep_threads_and_chunks_give_identical_statistics():
    """More pairs than one chunk of the kernel (2**22 doubles of responsibilities),
    topics not divisible among the threads: statistics, entropy and proportions
    are bit-identical for 1, 2 and 3 threads and equal to sums of the returned
    responsibilities."""
    K = 151
    corpus = make_bars("sm", n_docs=420, n_test=1, random_state=2).train
    state = fresh_state(corpus, K=K)
    batch = minibatch(state, corpus)
    assert len(batch.words) > 2 ** 22 // K
    elogphi = state.elogphi(batch.vocab)
    ab = state.alpha * state.beta
    outs = []
    for threads in (1, 2, 3):
        S, V = batch.n_docs, len(batch.vocab)
        out = (np.empty((S, K + 1)), np.empty((S, K)), np.zeros((V, K)), np.zeros(K), np.empty((len(batch.words), K)))
        _dahdp.estep(batch.ptr, batch.words, batch.counts, elogphi, ab, 1e-3, 100, False, *out, threads)
        outs.append(out)
    for other in outs[1:]:
        for a, b in zip(outs[0], other):
            assert np.array_equal(a, b)
    theta, ndk, stats, ent, resp = outs[0]
    c = batch.counts.astype(float)
    expected = np.zeros_like(stats)
    np.add.at(expected, batch.words, c[:, None] * resp)
    np.testing.assert_allclose(stats, expected, rtol=1e-12)
    np.testing.assert_allclose(resp.sum(1), 1.0, rtol=1e-13)
    np.testing.assert_allclose(np.add.reduceat(c[:, None] * resp, batch.ptr[:-1]), ndk, rtol=1e-12)
    ent -= np.einsum("wk,wk->k", stats, elogphi)
    np.testing.assert_allclose(ent, -(c[:, None] * xlogy(resp, resp)).sum(0), rtol=1e-9)


def test_estep_survives_underflow_in_log_space():
    """Products that underflow (E[log phi] ~ -1000 for every topic of a word) are
    recomputed in log space: finite, normalised responsibilities."""
    corpus = Corpus(np.array([[3, 1, 0], [0, 2, 5]]))
    batch = Minibatch(corpus, np.arange(2), np.full(3, -1, dtype=np.int32))
    elogphi = np.ascontiguousarray(np.array([[-1000.0, -1001.0], [-2.0, -800.0], [-900.0, -1.0]])[:len(batch.vocab)])
    theta, ndk, stats, ent, resp = run_estep(batch, elogphi, np.array([0.3, 0.3, 0.4]))
    assert np.all(np.isfinite(resp)) and np.all(np.isfinite(ent))
    np.testing.assert_allclose(resp.sum(1), 1.0, rtol=1e-13)
    ref_theta, ref_resp = numpy_estep(batch, elogphi, np.array([0.3, 0.3, 0.4]), 1e-10, 500)
    np.testing.assert_allclose(resp, ref_resp, rtol=1e-9, atol=1e-300)


# ---------------------------------------------------------------------------
# the bound
# ---------------------------------------------------------------------------

def test_bound_terms_equal_direct_evaluation():
    corpus = tiny_corpus()
    state = fresh_state(corpus, split_merge=True)
    local = state.estep(minibatch(state, corpus, np.arange(3, 10)))
    scale = corpus.n_docs / 7
    terms = state.bound(local, scale)
    assert set(terms) == {"tokens", "documents", "topics", "beta_prior"}
    assert sum(terms.values()) == pytest.approx(full_bound(state, local, scale), rel=1e-12)


def test_topic_terms_change_is_the_difference_of_the_full_terms():
    """The reassign gain's topics term: rows changed only at ``cols`` (the
    minibatch's words), the other columns' special functions cancel."""
    rng = np.random.default_rng(0)
    eta, cols = 0.3, np.array([1, 4, 5, 8])
    old = eta + rng.gamma(0.5, 20.0, size=(5, 11))
    new = old.copy()
    new[:, cols] = eta + rng.gamma(0.5, 20.0, size=(5, len(cols)))
    want = da_bound.topic_terms(new, eta).sum() - da_bound.topic_terms(old, eta).sum()
    assert da_bound.topic_terms_change(old, new, eta, cols) == pytest.approx(want, rel=1e-10, abs=1e-8)


def test_compact_bound_at_the_batch_fixed_point():
    """With theta at eq. 4 and lambda at eq. 5 the bound has the compact form of the paper's derivation."""
    corpus = tiny_corpus()
    state = fresh_state(corpus, mode="batch", split_merge=True)
    local = state.estep(minibatch(state, corpus))
    b = local.batch
    state.lam = np.full(state.lam.shape, state.eta)
    state.lam[:, b.vocab] += local.stats.T
    a, ab, eta = state.alpha, state.alpha * state.beta, state.eta
    N = np.add.reduceat(b.counts.astype(float), b.ptr[:-1]) * (np.diff(b.ptr) > 0)
    W = state.lam.shape[1]
    c = b.counts.astype(float)
    compact = ((gammaln(a) - gammaln(a + N)).sum() + (gammaln(local.theta) - gammaln(ab)).sum()
               - (c[:, None] * xlogy(local.resp, local.resp)).sum()
               + (gammaln(W * eta) - W * gammaln(eta) + gammaln(state.lam).sum(1) - gammaln(state.lam.sum(1))).sum()
               + da_bound.gem_log_density(state.beta, state.gamma)[0])
    assert sum(state.bound(local, 1.0).values()) == pytest.approx(compact, rel=1e-10)


def test_bound_terms_match_monte_carlo():
    """documents and topics terms are expectations under q: sample pi ~ Dir(theta), phi ~ Dir(lambda)
    (theta off the fixed point of eq. 4, where the documents integrand would be constant)."""
    corpus = tiny_corpus(n_docs=4, n_words=5)
    state = fresh_state(corpus, K=2, split_merge=True)
    local = state.estep(minibatch(state, corpus))
    rng = np.random.default_rng(5)
    theta = local.theta * rng.uniform(0.5, 2.0, local.theta.shape)
    ab = state.alpha * state.beta
    expected = da_bound._Documents(theta, local.ndk, ab, state.alpha).value()
    R = 200_000

    def log_dir(x, a):
        return gammaln(a.sum()) - gammaln(a).sum() + ((a - 1) * np.log(x)).sum(-1)

    docs = 0.0
    for j in range(corpus.n_docs):
        pi = np.clip(rng.dirichlet(theta[j], R), 1e-300, None)
        docs = docs + log_dir(pi, ab) - log_dir(pi, theta[j]) + np.log(pi) @ np.append(local.ndk[j], 0.0)
    assert docs.std() > 0
    assert docs.mean() == pytest.approx(expected, abs=5 * docs.std() / np.sqrt(R))
    eta = np.full(state.lam.shape[1], state.eta)
    topics = sum(log_dir(phi, eta) - log_dir(phi, lam)
                 for lam in state.lam for phi in [np.clip(rng.dirichlet(lam, R), 1e-300, None)])
    assert topics.mean() == pytest.approx(state.bound(local, 1.0)["topics"], abs=5 * topics.std() / np.sqrt(R))


def test_beta_gradient_matches_finite_differences():
    rng = np.random.default_rng(3)
    for kind in da_bound.GEM_DENSITIES:
        beta = rng.dirichlet(np.ones(6))
        sum_elogpi = -rng.random(6) * 20
        f = lambda b: da_bound.beta_objective(b, sum_elogpi, 7, 3.0, 1.7, 2.3, kind)  # noqa: E731
        grad = f(beta)[1]
        for l in range(6):
            e = np.zeros(6)
            e[l] = 1e-6
            numeric = (f(beta + e)[0] - f(beta - e)[0]) / 2e-6
            assert grad[l] == pytest.approx(numeric, rel=1e-6, abs=1e-6)


@pytest.mark.parametrize("gamma", [0.5, 2.0])
def test_gem_density_integrates_to_one(gamma):
    one = integrate.quad(lambda b1: np.exp(da_bound.gem_log_density([b1, 1 - b1], gamma)[0]), 0, 1)[0]
    assert one == pytest.approx(1.0, rel=1e-7)
    two = integrate.dblquad(lambda b2, b1: np.exp(da_bound.gem_log_density([b1, b2, 1 - b1 - b2], gamma)[0]),
                            0, 1, 0, lambda b1: 1 - b1)[0]
    assert two == pytest.approx(1.0, rel=1e-6)


def test_beta_step_increases_objective_and_keeps_the_simplex():
    corpus = tiny_corpus()
    state = fresh_state(corpus, K=5)
    local = state.estep(minibatch(state, corpus))
    e = (digamma(local.theta) - digamma(local.theta.sum(1))[:, None]).sum(0)
    before = da_bound.beta_objective(state.beta, e, corpus.n_docs, 1.0, state.alpha, state.gamma)[0]
    beta = state._beta_step(local, 1.0)
    after = da_bound.beta_objective(beta, e, corpus.n_docs, 1.0, state.alpha, state.gamma)[0]
    assert after > before
    assert beta.sum() == pytest.approx(1.0, abs=1e-14) and np.all(beta > 0)


@pytest.mark.parametrize("learn", [False, True])
def test_batch_bound_never_decreases(learn):
    """Coordinate ascent without moves: E-step (warm), eq. 5, beta*, hyperparameters."""
    data = make_bars("sm", n_docs=120, n_test=10, random_state=0)
    est = DirectAssignmentVB(n_components=8, mode="batch", split_merge=False, prune_threshold=0.0, eta=0.5,
                             learn_hyperparameters=learn, max_iter=15, tol=0.0, estep_tol=1e-8, random_state=0)
    est.fit(data.train)
    bounds = [sum(r["bound"].values()) for r in est.history_]
    assert len(bounds) == 15
    steps = np.diff(bounds)
    assert np.all(steps >= -1e-9 * np.abs(bounds[1:])), steps
    assert bounds[-1] > bounds[0]


def test_hyperparameter_steps_maximise_the_bound():
    """alpha and eta by Newton, gamma in closed form: each ends at a maximum of the bound
    in its own coordinate (a 1% change either way lowers it)."""
    corpus = tiny_corpus(seed=6, n_docs=30)
    state = fresh_state(corpus, K=4, mode="batch", learn_hyperparameters=True)
    local = state.estep(minibatch(state, corpus))
    before = sum(state.bound(local, 1.0).values())
    da_bound.learn_hyperparameters(state, local, 1.0, 1.0)
    best = sum(state.bound(local, 1.0).values())
    assert best > before
    for name in ("alpha", "eta", "gamma"):
        for factor in (0.99, 1.01):
            moved = copy.copy(state)
            setattr(moved, name, getattr(state, name) * factor)
            assert sum(moved.bound(local, 1.0).values()) < best, (name, factor)


# ---------------------------------------------------------------------------
# moves
# ---------------------------------------------------------------------------

def online_step_parts(corpus, K=4, rho=0.6, seed=1, ids=None):
    """A state after the E-step and global step of one online iteration, with the
    pieces the split proposal needs."""
    state = fresh_state(corpus, K=K, seed=seed, split_merge=True)
    local = state.estep(minibatch(state, corpus, ids))
    return (state, local) + global_step(state, local, corpus, rho)


def global_step(state, local, corpus, rho):
    """The online global step (eqs. 6-8) in place: (scale, the pieces the split proposal needs)."""
    scale = corpus.n_docs / local.n_docs
    old_lam, old_beta = state.lam, state.beta
    lam_hat = np.full(state.lam.shape, state.eta)
    lam_hat[:, local.batch.vocab] += scale * local.stats.T
    state.lam = (1 - rho) * state.lam + rho * lam_hat
    beta_hat = state._beta_step(local, scale)
    state.beta = (1 - rho) * state.beta + rho * beta_hat
    return scale, (rho, old_lam, lam_hat, old_beta, beta_hat)


def test_split_then_merge_restores_the_state():
    corpus = tiny_corpus()
    state, local, scale, parts = online_step_parts(corpus, ids=np.arange(2, 10))
    before_state, before_local = copy.deepcopy(state), copy.deepcopy(local)
    before = full_bound(state, local, scale)
    proposal = da_moves.split_proposal(state, local, scale, *parts[:1], 1, *parts[1:], restricted_iter=0)
    da_moves.apply_split(state, local, 1, proposal)
    assert state.n_components == 5
    split_bound = full_bound(state, local, scale)
    assert split_bound - before == pytest.approx(proposal["gain"], rel=1e-9, abs=1e-9 * abs(before))
    gain = da_moves.merge_gain(state, local, scale, 1, 4)
    da_moves.apply_merge(state, local, 1, 4)
    for name in ("lam", "beta"):
        np.testing.assert_allclose(getattr(state, name), getattr(before_state, name), rtol=1e-13)
    for name in ("theta", "ndk", "stats", "resp", "entropy"):
        np.testing.assert_allclose(getattr(local, name), getattr(before_local, name), rtol=1e-12, atol=1e-12)
    after = full_bound(state, local, scale)
    assert after == pytest.approx(before, rel=1e-12)
    assert gain == pytest.approx(after - split_bound, rel=1e-9, abs=1e-9 * abs(before))


@pytest.mark.parametrize("init", ["minibatch", "divide"])
def test_restricted_split_gain_equals_full_evaluation_and_touches_only_the_pair(init):
    corpus = tiny_corpus(seed=4)
    state, local, scale, parts = online_step_parts(corpus, ids=np.arange(1, 11))
    before_state, before_local = copy.deepcopy(state), copy.deepcopy(local)
    before = full_bound(state, local, scale)
    k = 2
    proposal = da_moves.split_proposal(state, local, scale, *parts[:1], k, *parts[1:], init=init)
    if init == "divide":                            # the updated topic divided word by word
        np.testing.assert_allclose(sum(proposal["lam"]), state.lam[k], rtol=1e-14)
        assert not np.allclose(proposal["lam"][0] / proposal["lam"][1], 1.0)
    da_moves.apply_split(state, local, k, proposal)
    after = full_bound(state, local, scale)
    assert proposal["gain"] == pytest.approx(after - before, rel=1e-9, abs=1e-9 * abs(before))
    others = [l for l in range(4) if l != k]
    assert np.array_equal(state.lam[others], before_state.lam[others])
    assert np.array_equal(local.resp[:, others], before_local.resp[:, others])
    assert np.array_equal(local.theta[:, others + [5]], before_local.theta[:, others + [4]])
    np.testing.assert_allclose(local.resp.sum(1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(state.beta.sum(), 1.0, rtol=1e-14)


def test_divide_proposal_separates_a_blended_topic_late_in_a_run():
    """Late in an online run (small rho) a topic blending two bars is divided by
    the "divide" proposal (positive gain, one bar per half), while the paper's
    proposal gives the new half (what one minibatch adds) no gain."""
    rng = np.random.default_rng(0)
    bars = [np.arange(10), np.arange(10, 20)]
    X = np.zeros((60, 20), dtype=int)
    for j in range(60):
        np.add.at(X[j], rng.choice(bars[j % 2], 30), 1)
    corpus = Corpus(X)
    state = fresh_state(corpus, K=2, seed=0, split_merge=True)
    state.lam[0] = state.eta + 1800.0 / 20          # the blend: both bars' tokens, spread evenly
    state.lam[1] = state.eta + rng.gamma(1.0, 1.0, 20)
    local = state.estep(minibatch(state, corpus, np.arange(20)))
    scale, parts = global_step(state, local, corpus, rho=0.05)
    paper = da_moves.split_proposal(state, local, scale, *parts[:1], 0, *parts[1:], init="minibatch")
    divide = da_moves.split_proposal(state, local, scale, *parts[:1], 0, *parts[1:], init="divide")
    assert divide["gain"] > 0.0 and divide["gain"] > paper["gain"]
    halves = {frozenset(np.argsort(-lam)[:10]) for lam in divide["lam"]}
    assert halves == {frozenset(bar) for bar in bars}


def smeared_bar_state(K=5, share=0.15, n_docs=200, seed=0):
    """Documents of K + 1 bars (ten words each, proportions Dir(1)); a state late
    in an online run (rho = 0.05) whose K topics are the first K bars, each
    holding also a share of the last bar's tokens."""
    rng = np.random.default_rng(seed)
    bars = [np.arange(10 * b, 10 * b + 10) for b in range(K + 1)]
    X = np.zeros((n_docs, 10 * (K + 1)), dtype=int)
    for j in range(n_docs):
        for bar, n in zip(bars, rng.multinomial(50, rng.dirichlet(np.ones(K + 1)))):
            np.add.at(X[j], rng.choice(bar, n), 1)
    corpus = Corpus(X)
    state = fresh_state(corpus, K=K, seed=0, split_merge=True)
    for k in range(K):
        state.lam[k] = state.eta
        state.lam[k, bars[k]] += (1.0 - share) * X.sum() / K / 10
        state.lam[k, bars[K]] += share * X.sum() / K / 10
    state.beta, state.alpha = np.append(np.full(K, 0.95 / K), 0.05), K + 1.0
    local = state.estep(minibatch(state, corpus, np.arange(60)))
    scale, parts = global_step(state, local, corpus, rho=0.05)
    return state, local, scale, parts, bars


def test_reassign_proposal_gathers_a_topic_spread_over_all_topics():
    """A bar every topic holds a small share of: no restricted proposal gains,
    the "reassign" proposal of some topic does, judged on the half of the
    minibatch it did not fit, with the bar as most of its new topic and most
    of the bar in its new topic; its gain is the direct evaluation of the
    bound on that half, and the topics' total mass is kept."""
    K = 5
    state, local, scale, parts, bars = smeared_bar_state(K)
    for k in range(K):
        for init in ("minibatch", "divide"):
            assert da_moves.split_proposal(state, local, scale, *parts[:1], k, *parts[1:], init=init)["gain"] < 0.0
    halves = [state.refit(local.batch.take(np.arange(first, local.n_docs, 2)), state.lam, state.beta)
              for first in (0, 1)]
    best = max((da_moves.reassign_proposal(state, k, parts[0], *halves) for k in range(K)), key=lambda p: p["gain"])
    assert best["gain"] > 0.0
    data = best["lam"] - state.eta
    assert data[K, bars[K]].sum() > 0.7 * data[K].sum()             # the new topic is mostly the bar ...
    assert data[K, bars[K]].sum() > 0.5 * data[:, bars[K]].sum()    # ... and holds most of it
    np.testing.assert_allclose(best["lam"].sum(), state.lam.sum(), rtol=1e-12)
    check, check_scale = halves[1], state.n_total / halves[1].n_docs
    proposed = copy.copy(state)
    proposed.lam, proposed.beta = best["lam"], best["beta"]
    after = full_bound(proposed, state.refit(check.batch, best["lam"], best["beta"]), check_scale)
    before = full_bound(state, check, check_scale)
    assert best["gain"] == pytest.approx(after - before, rel=1e-9, abs=1e-9 * abs(before))


def test_reassign_proposal_keeps_lambda_positive_where_a_topic_holds_less_than_eta():
    """A "divide" split leaves a half below eta at words it rarely has (its
    share of lambda_k, eta included): such a topic has nothing there to give
    the new one, and every proposal keeps lambda positive."""
    K = 5
    state, local, scale, parts, bars = smeared_bar_state(K)
    state.lam[:, bars[K]] = 0.2 * state.eta          # every topic below eta at the smeared bar's words
    halves = [state.refit(local.batch.take(np.arange(first, local.n_docs, 2)), state.lam, state.beta)
              for first in (0, 1)]
    for k in range(K):
        proposal = da_moves.reassign_proposal(state, k, parts[0], *halves)
        assert proposal["lam"].min() > 0.0
        np.testing.assert_array_less(proposal["lam"][:K, bars[K]], 0.2 * state.eta + 1e-12)   # nothing taken


def test_an_accepted_reassign_split_refits_the_minibatch(monkeypatch):
    """After an accepted reassign every topic has changed: the minibatch's local
    state is its E-step under the new globals."""
    K = 5
    state, local, scale, parts = smeared_bar_state(K)[:4]
    monkeypatch.setattr(da_moves, "REASSIGN_TURNS", K)             # every candidate's turn
    assert da_moves.split(state, local, scale, *parts) == (1, K)
    assert state.n_components == K + 1
    whole = state.refit(local.batch, state.lam, state.beta)
    for name in ("theta", "ndk", "stats", "entropy", "resp"):
        np.testing.assert_array_equal(getattr(local, name), getattr(whole, name))


def test_merge_gain_equals_full_evaluation_and_merges_need_a_gain():
    corpus = tiny_corpus(seed=2)
    state = fresh_state(corpus, K=4, split_merge=True)
    state.lam[3] = state.lam[1] * (1 + 1e-3)          # a duplicate topic: merging it is a gain
    local = state.estep(minibatch(state, corpus))
    before = full_bound(state, local, 1.0)
    for ka, kb in [(0, 2), (1, 3)]:
        s, l = copy.deepcopy(state), copy.deepcopy(local)
        gain = da_moves.merge_gain(s, l, 1.0, ka, kb)
        da_moves.apply_merge(s, l, ka, kb)
        assert gain == pytest.approx(full_bound(s, l, 1.0) - before, rel=1e-9, abs=1e-9 * abs(before))
    state.settings["merge_threshold"] = -np.inf        # every pair is a candidate
    accepted, tried = da_moves.merge(state, local, 1.0)
    assert accepted >= 1 and tried >= accepted
    assert full_bound(state, local, 1.0) > before


def test_a_single_prior_merge_keeps_lambda_at_least_eta_where_both_topics_hold_less():
    """Two "divide" halves can each hold less than eta at a word; lambda' + lambda'' - eta
    went negative there (seen on KOS from 100 topics: negative topics, a NaN bound)."""
    corpus = tiny_corpus()
    state = fresh_state(corpus, K=4, eta=0.5, merge_prior="single")
    state.lam[0, :3] = state.lam[1, :3] = 0.3 * state.eta
    merged = da_moves.merged_lambda(state, 0, 1)
    assert merged.min() >= state.eta
    np.testing.assert_allclose(merged[3:], state.lam[0, 3:] + state.lam[1, 3:] - state.eta)
    local = state.estep(minibatch(state, corpus))
    assert np.isfinite(da_moves.merge_gain(state, local, 1.0, 0, 1))


def test_an_empty_topic_changes_only_the_gem_term():
    corpus = tiny_corpus()
    state = fresh_state(corpus, K=3, split_merge=True)
    local = state.estep(minibatch(state, corpus))
    before = state.bound(local, 1.0)
    # a topic at its prior, weight carved from the rest cell, no responsibilities
    new = copy.deepcopy(state)
    new.lam = np.vstack([state.lam, np.full(state.lam.shape[1], state.eta)])
    new.beta = np.insert(state.beta, 3, state.beta[-1] / 2)
    new.beta[-1] /= 2
    l2 = copy.deepcopy(local)
    S = local.n_docs
    l2.theta = np.column_stack([local.theta[:, :3], np.full(S, state.alpha * new.beta[3]),
                                np.full(S, state.alpha * new.beta[4])])
    l2.ndk = np.column_stack([local.ndk, np.zeros(S)])
    l2.stats = np.column_stack([local.stats, np.zeros(len(local.batch.vocab))])
    l2.entropy = np.append(local.entropy, 0.0)
    l2.resp = np.column_stack([local.resp, np.zeros(len(local.batch.words))])
    after = new.bound(l2, 1.0)
    for name in ("tokens", "documents", "topics"):
        assert after[name] == pytest.approx(before[name], rel=1e-12, abs=1e-10)
    assert after["beta_prior"] != before["beta_prior"]
    assert full_bound(new, l2, 1.0) == pytest.approx(full_bound(state, local, 1.0) + after["beta_prior"]
                                                     - before["beta_prior"], rel=1e-12)


def test_online_with_one_minibatch_and_rho_one_is_one_batch_iteration():
    data = make_bars("sm", n_docs=60, n_test=5, random_state=1)
    common = dict(n_components=6, split_merge=False, prune_threshold=0.0, eta=0.5, max_iter=1, random_state=3)
    online = DirectAssignmentVB(mode="online", batch_size=60, **common).fit(data.train)
    batch = DirectAssignmentVB(mode="batch", **common).fit(data.train)
    assert online.history_[0]["rho"] == 1.0
    np.testing.assert_allclose(online.components_, batch.components_, rtol=1e-10)
    np.testing.assert_allclose(online.weights_, batch.weights_, rtol=1e-8)
    assert online.alpha_ == pytest.approx(batch.alpha_, rel=1e-8)


# ---------------------------------------------------------------------------
# the estimator
# ---------------------------------------------------------------------------

def test_split_merge_grows_from_few_topics_and_records_moves():
    data = make_bars("sm", n_docs=400, n_test=40, random_state=0)
    est = DirectAssignmentVB(n_components=2, eta=0.5, max_iter=3, batch_size=50, random_state=0).fit(data.train)
    h = est.history_
    assert sum(r["splits"] for r in h) > 0
    assert est.n_components_ > 2
    for key in ("splits", "split_tries", "merges", "merge_tries", "pruned", "rho", "alpha", "gamma", "eta"):
        assert key in h[-1]
    assert h[0]["rho"] == 1.0 and h[1]["rho"] == pytest.approx(2 ** -0.5)
    plain = DirectAssignmentVB(n_components=2, eta=0.5, max_iter=3, batch_size=50, split_merge=False,
                               random_state=0).fit(data.train)
    assert plain.n_components_ == 2
    assert est.score(data.test) > plain.score(data.test)


def test_max_merges_caps_the_merges_of_an_iteration():
    """From 40 topics the first minibatches merge several pairs an iteration;
    max_merges=1 accepts one at most, max_merges=0 none (nor tests any)."""
    data = make_bars("sm", n_docs=200, n_test=20, random_state=0)

    def merges(cap):
        est = DirectAssignmentVB(n_components=40, eta=0.5, max_iter=1, batch_size=50,
                                 moves={"max_splits": 0, "max_merges": cap}, random_state=0).fit(data.train)
        return [(r["merges"], r["merge_tries"]) for r in est.history_]

    assert max(m for m, _ in merges(None)) >= 2
    capped = merges(1)
    assert max(m for m, _ in capped) == 1
    assert merges(0) == [(0, 0)] * len(capped)


def test_sizes_sorted_and_transform_normalised():
    data = make_bars("sm", n_docs=200, n_test=20, random_state=0)
    est = DirectAssignmentVB(n_components=10, eta=0.5, max_iter=2, batch_size=50, random_state=0).fit(data.train)
    assert np.all(np.diff(est.topic_sizes_) <= 0)          # largest first (bnpcore.results)
    assert est.weights_.sum() + est.rest_weight_ == pytest.approx(1.0)
    theta = est.transform(data.test)
    assert theta.shape == (20, est.n_components_)
    np.testing.assert_allclose(theta.sum(1), 1.0)
    # several batches take their rows of one E[log phi] of the whole vocabulary: one batch's numbers
    np.testing.assert_array_equal(est.transform(data.test, batch_size=3), theta)


def test_partial_fit_streams_and_continues_after_load(tmp_path):
    import bnpcore
    data = make_bars("sm", n_docs=200, n_test=20, random_state=0)
    X = data.train
    est = DirectAssignmentVB(n_components=4, eta=0.5, batch_size=50, total_samples=200, random_state=0)
    est.partial_fit(X[:100])
    assert len(est.history_) == 2 and est.history_[-1]["n_documents"] == 100
    est.save(tmp_path / "m.npz")
    loaded = bnpcore.load(tmp_path / "m.npz")
    est.partial_fit(X[100:])
    loaded.partial_fit(X[100:])
    np.testing.assert_array_equal(est.components_, loaded.components_)
    assert [r["n_documents"] for r in est.history_] == [50, 100, 150, 200]
    batch = DirectAssignmentVB(n_components=4, eta=0.5, mode="batch", max_iter=2, random_state=0).fit(X[:100])
    batch.partial_fit(X[100:150])
    assert batch.history_[-1]["rho"] == pytest.approx(3 ** -0.5)      # online step t = 2 after two passes


def test_partial_fit_runs_on_the_batch_loop():
    """partial_fit's minibatches are iterations of the batch loop: a callback that
    returns True stops the call after that minibatch, with the model of the
    minibatches so far."""
    X = make_bars("sm", n_docs=200, n_test=20, random_state=0).train
    params = dict(n_components=4, eta=0.5, batch_size=50, total_samples=200, random_state=0)
    stopped = DirectAssignmentVB(**params)
    seen = []
    with stopped.reporting(lambda est, record: seen.append(record["iteration"]) or True):
        stopped.partial_fit(X[:150])
    assert seen == [1] and len(stopped.history_) == 1
    first = DirectAssignmentVB(**params).partial_fit(X[:50])
    np.testing.assert_array_equal(stopped.components_, first.components_)
    assert stopped.history_[0]["n_documents"] == 50 and stopped.history_[0]["fit_seconds"] > 0


@pytest.mark.parametrize("params, match", [
    ({"alpha": -1.0}, "alpha"), ({"gamma": float("nan")}, "gamma"), ({"eta": 0.0}, "eta"),
    ({"mode": "stream"}, "mode"), ({"learn_hyperparameters": ["beta"]}, "learn_hyperparameters"),
    ({"moves": {"merge_prior": "half"}}, "merge_prior"), ({"gem_density": "x"}, "gem_density"),
    ({"batch_size": 0}, "batch_size"), ({"learning_decay": 1.5}, "learning_decay"),
    ({"n_components": 0}, "n_components"), ({"moves": {"split_inits": "divide"}}, "split_inits"),
    ({"moves": {"split_inits": ()}}, "split_inits"), ({"moves": {"split_inits": ["paper"]}}, "split_inits"),
    ({"moves": {"max_merges": -1}}, "max_merges"), ({"moves": {"max_merges": 1.5}}, "max_merges"),
    ({"moves": {"max_split": 1}}, "unknown settings \\['max_split'\\]"), ({"moves": [("max_splits", 1)]}, "moves"),
    ({"moves": {"restricted_sweeps": 0}}, "restricted_sweeps"),
    ({"moves": {"merge_threshold": "x"}}, "merge_threshold"),
])
def test_bad_parameters_are_refused(params, match):
    with pytest.raises((ValueError, TypeError), match=match):
        DirectAssignmentVB(**params).fit(tiny_corpus())


@pytest.mark.parametrize("mode", ["online", "batch"])
def test_fit_is_identical_on_any_thread_count(mode, monkeypatch):
    """The E-step and the split proposals (those of n_threads candidates at
    once, read in order; here at any size) on 1, 2 and 3 threads: the same
    splits, bit for bit."""
    monkeypatch.setattr(da_moves, "SPLIT_THREADS_PAIRS", 0)
    if mode == "online":
        X, K = make_bars("sm", n_docs=150, n_test=10, random_state=0).train, 6
    else:       # four clusters of four words: two batch splits at once, the second one's proposal made again
        rng = np.random.default_rng(0)
        X, K = np.zeros((80, 16), dtype=int), 2
        for j in range(80):
            X[j, 4 * (j % 4):4 * (j % 4) + 4] = rng.poisson(5, 4)
    fits = [DirectAssignmentVB(n_components=K, mode=mode, eta=0.5, max_iter=2 if mode == "online" else 6,
                               batch_size=50, n_threads=t, random_state=0,
                               moves={**PAPER_MOVES, "max_splits": 2}).fit(X)
            for t in (1, 2, 3)]
    splits = [[(r["splits"], r["split_tries"]) for r in fit.history_] for fit in fits]
    assert sum(s for s, _ in splits[0]) > 0
    for fit, tries in zip(fits[1:], splits[1:]):
        assert np.array_equal(fit.components_, fits[0].components_)
        assert tries == splits[0]


def test_a_tiny_eta_keeps_the_moves_finite():
    """Found by the hypothesis suite: with eta = 1e-100 a "divide" half's share
    1 - s rounded to 0 where the other half held the counts (lambda = 0, psi = -inf),
    the reassign proposal built on it had a NaN gain, and NaN passed the test
    ``gain <= 0`` for rejection: NaN topics."""
    X = np.zeros((12, 18), dtype=int)
    X[7, 17], X[9, 15], X[9, 17] = 3, 1, 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        est = registry.get("hdp-da-sm").make(test=True, eta=1e-100, gamma=1.0, max_iter=2, random_state=0).fit(X)
    assert sum(r["splits"] for r in est.history_) > 0
    assert np.all(est.components_ > 0) and np.all(np.isfinite(est.topics_))
    np.testing.assert_allclose(est.transform(X).sum(axis=1), 1.0)


def test_pruning_everything_keeps_the_largest_topic():
    """Found by the hypothesis suite: a one-word corpus of one token leaves every topic
    under the threshold; deleting them out of order indexed past the end."""
    X = np.zeros((16, 11), dtype=int)
    X[-1, -1] = 1
    est = DirectAssignmentVB(n_components=3, mode="batch", max_iter=3, eta=1.0, random_state=0).fit(X)
    assert est.n_components_ == 1
    np.testing.assert_allclose(est.transform(X[-1:]).sum(1), 1.0)


def test_bad_data_is_refused():
    with pytest.raises(ValueError, match="no tokens"):
        DirectAssignmentVB().fit(Corpus(np.zeros((3, 4), dtype=int)))
    est = DirectAssignmentVB(n_components=2, max_iter=1, batch_size=4, random_state=0).fit(tiny_corpus())
    with pytest.raises(ValueError, match="9"):
        est.partial_fit(np.ones((2, 5), dtype=int))
    with pytest.raises(ValueError, match="9"):
        est.transform(np.ones((2, 10), dtype=int))


@pytest.fixture(scope="module")
def bars_sampler():
    data = make_bars("sm", n_docs=300, n_test=30, random_state=0)
    return data, DirectAssignmentGibbs(n_components=40, max_iter=60, burn_in=59, random_state=0).fit(data.train)


def test_init_from_starts_at_the_samplers_counts_and_hyperparameters(bars_sampler):
    """lambda - eta is the sample's topic-word count matrix (rebuilt here from its token
    assignments), beta* its weights and rest weight; alpha, gamma start at its values."""
    data, sampler = bars_sampler
    X = data.train
    word = np.repeat(X.indices, X.counts)
    counts = np.zeros((sampler.n_components_, X.n_words))
    np.add.at(counts, (sampler._z, word), 1.0)
    est = DirectAssignmentVB(n_components=3, eta=0.05, alpha=7.0, learn_hyperparameters=("gamma",))
    est._init_from = sampler
    state = est._init_state(X, np.random.default_rng(0))
    np.testing.assert_allclose(state.lam - 0.05, counts, atol=1e-8)
    np.testing.assert_allclose(state.beta, np.append(sampler.weights_, sampler.beta_new_))
    assert state.alpha == 7.0 and state.gamma == sampler.gamma_          # only gamma is learned
    # a sampler of a tenth of the corpus: its counts scaled to the corpus's tokens
    small = type(sampler)(n_components=5, max_iter=5, burn_in=4, random_state=0).fit(X[:30])
    est._init_from = small
    state = est._init_state(X, np.random.default_rng(0))
    assert (state.lam - 0.05).sum() == pytest.approx(X.n_tokens)


def test_a_batch_fit_from_a_sample_beats_random_starts(bars_sampler):
    data, sampler = bars_sampler
    params = {"mode": "batch", "split_merge": False, "eta": 0.05, "max_iter": 20, "tol": 0.0, "random_state": 0}
    started = DirectAssignmentVB(**params).fit(data.train, init_from=sampler)
    random = DirectAssignmentVB(n_components=sampler.n_components_, **params).fit(data.train)
    bound = [sum(est.history_[-1]["bound"].values()) for est in (started, random)]
    assert bound[0] > bound[1]
    assert started.score(data.test) > random.score(data.test)
    assert started._init_from is None                     # the fit does not keep the sampler


def test_init_from_refuses_what_it_cannot_start_from(bars_sampler):
    data, sampler = bars_sampler
    with pytest.raises(TypeError, match="fitted hdp.DirectAssignmentGibbs"):
        DirectAssignmentVB().fit(data.train, init_from=DirectAssignmentGibbs())
    with pytest.raises(TypeError, match="DirectAssignmentVB"):
        DirectAssignmentVB().fit(data.train, init_from=DirectAssignmentVB())
    with pytest.raises(ValueError, match="100 words, the corpus 101"):
        DirectAssignmentVB().fit(np.ones((4, 101), dtype=int), init_from=sampler)


@pytest.mark.slow
@pytest.mark.parametrize("K", [2, 5, 10, 20, 40, 50, 80, 100])
def test_bars_starts_find_the_twenty_bars(K):
    """T-SM-1: oHDP-SM with the paper's moves and "reassign" started from any of
    the eight K ends at the 20 bars (each bar the ten most probable pixels of a
    topic). Without the "reassign" proposal (as with the default moves) the
    starts below 20 ended with 18 topics, 17-18 bars, and K = 100 with a
    near-empty 21st topic."""
    data = make_bars("sm", random_state=0)
    est = DirectAssignmentVB(n_components=K, eta=0.5, max_iter=20, random_state=0, moves=PAPER_MOVES).fit(data.train)
    found = {frozenset(np.argsort(-t)[:10]) for t in est.topics_}
    bars = [frozenset(np.flatnonzero(bar > bar.min())) for bar in data.topics]
    assert all(bar in found for bar in bars)
    assert est.n_components_ == 20


def test_minibatch_moves_renumber_every_topic_quantity_and_keep_the_rest_cell():
    """_Minibatch.split / merge / select / permute (through SuffStats) act on theta's
    topic columns, n, the statistics, the entropy and the responsibilities alike;
    theta's rest cell stays last."""
    from bnpcore.models.hdp_da import _Minibatch
    rng = np.random.default_rng(0)
    S, K, V, N = 3, 4, 5, 7
    arrays = dict(theta=rng.random((S, K + 1)), ndk=rng.random((S, K)), stats=rng.random((V, K)),
                  entropy=rng.random(K), resp=rng.random((N, K)))
    local = _Minibatch(None, *(a.copy() for a in arrays.values()))
    names = ("theta", "ndk", "stats", "entropy", "resp")

    def column(a, k):
        return a[..., k]

    first = {n: 0.25 * column(arrays[n], 1) for n in names}
    second = {n: 0.75 * column(arrays[n], 1) for n in names}
    local.split(1, first, second)
    assert local.theta.shape == (S, K + 2) and local.resp.shape == (N, K + 1)
    np.testing.assert_array_equal(local.theta[:, -1], arrays["theta"][:, -1])
    for n in names:
        np.testing.assert_array_equal(column(getattr(local, n), K), second[n])
    local.merge(1, K)
    for n in names:
        np.testing.assert_allclose(getattr(local, n), arrays[n], rtol=1e-15)
    order = np.array([2, 0, 3, 1])
    local.permute(order)
    np.testing.assert_array_equal(local.theta, arrays["theta"][:, np.append(order, K)])
    np.testing.assert_array_equal(local.resp, arrays["resp"][:, order])
    np.testing.assert_array_equal(local.entropy, arrays["entropy"][order])
    local.select(np.array([True, False, True, True]))
    np.testing.assert_array_equal(local.theta, arrays["theta"][:, [2, 3, 1, K]])
    np.testing.assert_array_equal(local.stats, arrays["stats"][:, [2, 3, 1]])
