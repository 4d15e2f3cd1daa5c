"""LDA as the network d -> z -> w reproduces bnpcore.lda's StandardVB (both
schedules), Hybrid and, through Hybrid at the largest count, collapsed Gibbs."""
import numpy as np
import pytest

from bnpcore import bayesnet, lda
from bnpcore.corpus import Corpus
from bnpcore.kernels import _lda
from bnpcore.bayesnet.inference import NetworkState
from bnpcore.models.lda import GibbsState, SequentialState

from .conftest import corpus_cases, lda_network

K, SEED = 3, 7


def random_counts(seed, n_docs=12, n_words=9, max_count=4):
    rng = np.random.default_rng(seed)
    C = rng.integers(1, max_count + 1, size=(n_docs, n_words)) * (rng.random((n_docs, n_words)) < 0.4)
    C[np.arange(n_docs), rng.integers(0, n_words, n_docs)] += 1
    C[rng.integers(0, n_docs, n_words), np.arange(n_words)] += 1
    return C


@pytest.fixture
def setup():
    train, test = Corpus(random_counts(0)).split_tokens(0.2, random_state=1)
    alpha, eta = np.linspace(0.1, 0.5, K), np.linspace(0.05, 0.3, train.n_words)
    net = lda_network(train.n_docs, train.n_words, K, alpha, eta)
    return train, test, alpha, eta, net


def compare_histories(mine, theirs, with_bound, with_delta=True):
    assert len(mine) == len(theirs)
    for a, b in zip(mine, theirs):
        np.testing.assert_allclose(a["heldout_loglik"], b["heldout_loglik"], rtol=0, atol=1e-8)
        if with_delta and "delta" in b:
            np.testing.assert_allclose(a["delta"], b["delta"], rtol=0, atol=1e-10)
        if with_bound:
            np.testing.assert_allclose([a["bound"]["family:z"], a["bound"]["family:w"], a["bound"]["entropy"]],
                                       [b["bound"]["documents"], b["bound"]["topics"], b["bound"]["entropy"]],
                                       rtol=0, atol=1e-8)


def fitted_components(est, eta):
    """bnpcore.lda's components_ (topics by decreasing size) from the network's counts."""
    words = est.counts_["w"]
    order = np.argsort(-words.sum(axis=1), kind="stable")
    return words[order] + eta


@pytest.mark.parametrize("schedule", ["parallel", "sequential"])
def test_standard_vb_matches_lda(setup, schedule):
    train, test, alpha, eta, net = setup
    data, counts = corpus_cases(train)
    hdata, hcounts = corpus_cases(test)
    theirs = lda.StandardVB(n_components=K, alpha=alpha, eta=eta, max_iter=12, tol=None, schedule=schedule,
                            n_threads=1, random_state=SEED).fit(train, heldout=test)
    mine = bayesnet.StandardVB(net, max_iter=12, tol=None, schedule=schedule, random_state=SEED).fit(
        data, counts, heldout=hdata, heldout_counts=hcounts, given=["d"])
    # lda's parallel schedule keeps no responsibilities: its delta is the change of the document-topic counts
    compare_histories(mine.history_, theirs.history_, with_bound=True, with_delta=schedule == "sequential")
    np.testing.assert_allclose(fitted_components(mine, eta), theirs.components_, rtol=1e-10)


def test_hybrid_matches_lda_state_by_state(setup):
    train, _, alpha, eta, net = setup
    data, counts = corpus_cases(train)
    assert 0 < np.sum(counts <= 1) < len(counts)           # both kinds of case
    theirs = SequentialState(train, K, alpha.copy(), eta.copy(), np.random.default_rng(SEED), _lda.MODE_SVB, 1)
    mine = NetworkState(net, data, counts, np.random.default_rng(SEED), 1)
    for _ in range(12):
        np.testing.assert_array_equal(mine.hidden_states()[:, 0], theirs.z)
        np.testing.assert_allclose(mine.q, theirs.r, rtol=0, atol=1e-12)
        mine.sweep()
        theirs.sweep()
    np.testing.assert_array_equal(mine.z[:, 0], theirs.z)


def test_hybrid_estimator_matches_lda(setup):
    train, test, alpha, eta, net = setup
    data, counts = corpus_cases(train)
    hdata, hcounts = corpus_cases(test)
    kw = dict(threshold=1, max_iter=8, burn_in=3, random_state=SEED)
    theirs = lda.Hybrid(n_components=K, alpha=alpha, eta=eta, **kw).fit(train, heldout=test)
    mine = bayesnet.Hybrid(net, **kw).fit(data, counts, heldout=hdata, heldout_counts=hcounts, given=["d"])
    compare_histories(mine.history_, theirs.history_, with_bound=False)
    np.testing.assert_allclose(fitted_components(mine, eta), theirs.components_, rtol=1e-10)


def test_gibbs_matches_lda_sampler_with_the_plain_draw(setup):
    """Same initial topics as lda.CollapsedGibbs for the same seed; the same states
    sweep after sweep as lda.Hybrid at the largest count (the lda sampler with a
    plain O(K) draw: lda.CollapsedGibbs maps its uniform through sparse buckets,
    so only its distribution, not its draws, can agree)."""
    train, test, alpha, eta, net = setup
    data, counts = corpus_cases(train)
    mine = NetworkState(net, data, counts, np.random.default_rng(SEED), bayesnet.inference._ALL_SAMPLED)
    cgs = GibbsState(train, K, alpha.copy(), eta.copy(), np.random.default_rng(SEED))
    np.testing.assert_array_equal(mine.z[:, 0], cgs.z)
    theirs = SequentialState(train, K, alpha.copy(), eta.copy(), np.random.default_rng(SEED), _lda.MODE_SVB,
                             int(counts.max()))
    for _ in range(10):
        mine.sweep()
        theirs.sweep()
        np.testing.assert_array_equal(mine.z[:, 0], theirs.z)
    hdata, hcounts = corpus_cases(test)
    kw = dict(max_iter=8, burn_in=3, random_state=SEED)
    est = bayesnet.CollapsedGibbs(net, **kw).fit(data, counts, heldout=hdata, heldout_counts=hcounts, given=["d"])
    ref = lda.Hybrid(n_components=K, alpha=alpha, eta=eta, threshold=int(counts.max()), **kw).fit(train,
                                                                                                  heldout=test)
    compare_histories(est.history_, ref.history_, with_bound=False)


@pytest.mark.slow
def test_equivalence_on_kos():
    """The first 300 KOS documents, K = 10, 20 sweeps (about 5 s): every method's
    held-out scores agree to rounding (measured 4e-15) and the bounds to 1e-14
    relative."""
    from bnpcore.datasets import load_kos

    train, test = Corpus(load_kos().matrix[:300]).split_tokens(0.1, random_state=0, mode="corpus_tokens")
    net = lda_network(train.n_docs, train.n_words, 10, 0.1, 0.1)
    data, counts = corpus_cases(train)
    hdata, hcounts = corpus_cases(test)
    common = dict(n_components=10, alpha=0.1, eta=0.1, max_iter=20, random_state=1)
    pairs = [
        (lda.StandardVB(tol=None, n_threads=1, **common), bayesnet.StandardVB(net, max_iter=20, tol=None,
                                                                               random_state=1), True),
        (lda.StandardVB(tol=None, schedule="sequential", **common),
         bayesnet.StandardVB(net, max_iter=20, tol=None, schedule="sequential", random_state=1), True),
        (lda.Hybrid(burn_in=5, **common), bayesnet.Hybrid(net, max_iter=20, burn_in=5, random_state=1), False),
        (lda.Hybrid(threshold=int(counts.max()), burn_in=5, **common),
         bayesnet.CollapsedGibbs(net, max_iter=20, burn_in=5, random_state=1), False),
    ]
    for theirs, mine, with_bound in pairs:
        theirs.fit(train, heldout=test)
        mine.fit(data, counts, heldout=hdata, heldout_counts=hcounts, given=["d"])
        for a, b in zip(mine.history_, theirs.history_):
            np.testing.assert_allclose(a["heldout_loglik"], b["heldout_loglik"], rtol=0, atol=1e-8)
            if with_bound:
                np.testing.assert_allclose([a["bound"]["family:z"], a["bound"]["family:w"], a["bound"]["entropy"]],
                                           [b["bound"]["documents"], b["bound"]["topics"], b["bound"]["entropy"]],
                                           rtol=1e-12)
