"""The online estimators on the model protocol: StickState on a moves.Components
table, the global step on SuffStats, and the estimator contract (repeatable
transform/score, score on new documents, history keys)."""
import numpy as np
import pytest

from bnpcore import hdp, mixture
from bnpcore.corpus import Corpus
from bnpcore.inference import moves
from bnpcore.inference.online import Minibatch, StickState
from bnpcore.inference.stats import SuffStats


def word_stats(vocab, block, sizes):
    return SuffStats({"words": block, "sizes": sizes}, vocab=vocab, word_fields=("words",))


def dense(stats, W):
    """(K, W) word statistics and sizes of a SuffStats, by NumPy."""
    out = np.zeros((stats.n_components, W))
    out[:, stats.vocab] = stats["words"]
    return out, stats["sizes"]


# -- StickState on moves.Components --------------------------------------------------

def hand_built(W=4, eta=0.5, g=2.0, truncated=False):
    """Three components in physical rows 0, 1, 2 of a capacity-4 table, lazily
    scaled by 0.5: Nst_kw = 0.5 * stored."""
    state = StickState(W, eta, g, truncated, capacity=4)
    slots = state.table.add(3)
    stored = np.arange(3 * W, dtype=float).reshape(3, W) + 1.0
    state.words[slots] = stored
    state.row_tilde[slots] = stored.sum(axis=1)
    state.table.arrays["sizes"][slots] = [1.0, 5.0, 3.0]
    state.scale = 0.5
    return state, slots, stored


def test_stick_state_is_an_indirect_components_table():
    state, slots, stored = hand_built()
    assert state.table.indirect and state.table.capacity == 4
    np.testing.assert_array_equal(slots, [0, 1, 2])
    np.testing.assert_array_equal(state.slots, state.table.slots)
    np.testing.assert_array_equal(state.word_stats(), 0.5 * stored)
    np.testing.assert_array_equal(state.word_mass(), 0.5 * stored.sum(axis=1))
    np.testing.assert_array_equal(state.lam(), 0.5 + 0.5 * stored)
    np.testing.assert_array_equal(state.sizes, [1.0, 5.0, 3.0])


def test_reorder_permutes_slots_only():
    state, _, stored = hand_built()
    physical = state.words
    order = moves.reorder(state.table, state.sizes)
    np.testing.assert_array_equal(order, [1, 2, 0])
    np.testing.assert_array_equal(state.slots, [1, 2, 0])
    assert state.words is physical                                   # the K x W rows did not move
    np.testing.assert_array_equal(state.words[:3], stored)
    np.testing.assert_array_equal(state.word_stats(), 0.5 * stored[[1, 2, 0]])
    np.testing.assert_array_equal(state.sizes, [5.0, 3.0, 1.0])
    u, v = state.stick_params()
    np.testing.assert_array_equal(u, [6.0, 4.0, 2.0])
    np.testing.assert_array_equal(v, [2.0 + 4.0, 2.0 + 1.0, 2.0])
    assert moves.reorder(state.table, state.sizes) is None           # already sorted


def test_prune_then_add_reuses_the_freed_row_at_the_prior():
    state, _, stored = hand_built()
    mapping = moves.prune(state.table, state.sizes, 2.0)
    np.testing.assert_array_equal(mapping, [-1, 0, 1])
    np.testing.assert_array_equal(state.slots, [1, 2])
    np.testing.assert_array_equal(state.word_stats(), 0.5 * stored[1:])
    assert moves.prune(state.table, state.sizes, 2.0) is None
    new = state.table.add(1)
    np.testing.assert_array_equal(new, [0])                          # the pruned component's row
    np.testing.assert_array_equal(state.words[0], 0.0)
    assert state.row_tilde[0] == 0.0 and state.table.arrays["sizes"][0] == 0.0
    np.testing.assert_array_equal(state.lam()[2], np.full(4, 0.5))   # born at the prior
    np.testing.assert_array_equal(state.sizes, [5.0, 3.0, 0.0])
    # growing past the capacity keeps every row (doubling)
    state.table.add(3)
    assert state.table.capacity == 8 and state.n_components == 6
    np.testing.assert_array_equal(state.word_stats()[:2], 0.5 * stored[1:])
    np.testing.assert_array_equal(state.word_stats()[2:], 0.0)


def test_prune_keeps_the_largest_component_of_a_truncated_model():
    for truncated, expected in [(True, [5.0]), (False, [])]:
        state, _, stored = hand_built(truncated=truncated)
        moves.prune(state.table, state.sizes, 100.0, keep_largest=state.truncated)
        np.testing.assert_array_equal(state.sizes, expected)
        if truncated:
            np.testing.assert_array_equal(state.word_stats(), 0.5 * stored[[1]])
            np.testing.assert_array_equal(state.expected_weights(), [1.0])


def test_persistence_is_in_stick_order_and_exact():
    state, _, _ = hand_built()
    moves.reorder(state.table, state.sizes)
    moves.prune(state.table, state.sizes, 2.0)
    back = StickState.from_arrays(state.to_arrays(), 4, 0.5, 2.0)
    np.testing.assert_array_equal(back.slots, [0, 1])
    for name in ("word_stats", "word_mass", "lam", "expected_log_weights"):
        np.testing.assert_array_equal(getattr(back, name)(), getattr(state, name)())
    assert back.scale == state.scale


# -- the global step on SuffStats ---------------------------------------------------------

def test_update_is_the_naive_convex_combination_after_moves():
    """Nst <- (1 - rho) Nst + rho (n / S) stats, against NumPy, on a state whose
    slots were permuted and reused (stats in stick order over a minibatch vocabulary)."""
    rng = np.random.default_rng(0)
    W = 4
    state, _, _ = hand_built(W)
    moves.reorder(state.table, state.sizes)
    moves.prune(state.table, state.sizes, 2.0)
    state.table.add(2)
    N, s = state.word_stats(), state.sizes.copy()
    for rho, factor in [(0.3, 7.0), (1e-3, 2.5), (1.0, 3.0), (0.9, 1.0)]:
        vocab = np.sort(rng.choice(W, size=2, replace=False))
        stats = word_stats(vocab, rng.gamma(1.0, 1.0, size=(4, 2)), rng.random(4))
        state.update(rho, factor, stats)
        block, sizes = dense(stats, W)
        N = (1 - rho) * N + rho * factor * block
        s = (1 - rho) * s + rho * factor * sizes
        np.testing.assert_allclose(state.word_stats(), N, rtol=1e-13, atol=1e-300)
        np.testing.assert_allclose(state.word_mass(), N.sum(axis=1), rtol=1e-13)
        np.testing.assert_allclose(state.sizes, s, rtol=1e-13)


def test_update_takes_summed_statistics_and_scale_semantics():
    """Statistics of two parts over different vocabularies add (aligned on the union
    of their words); update(rho, factor, stats) = update(rho, 1, stats.scale(factor))."""
    rng = np.random.default_rng(1)
    W, K = 9, 3
    a = word_stats(np.array([0, 4, 7]), rng.random((K, 3)), rng.random(K))
    b = word_stats(np.array([2, 4]), rng.random((K, 2)), rng.random(K))
    total = a + b
    np.testing.assert_array_equal(total.vocab, [0, 2, 4, 7])
    one, two = StickState(W, 0.1, 1.0), StickState(W, 0.1, 1.0)
    for st in (one, two):
        st.table.add(K)
        st.words[st.slots] = rng.random((K, W)) if st is one else one.words[one.slots]
        st.row_tilde[st.slots] = st.words[st.slots].sum(axis=1)
    start = one.word_stats()
    one.update(0.25, 4.0, total)
    two.update(0.25, 1.0, total.scale(4.0))
    expected = 0.75 * start + 0.25 * 4.0 * (dense(a, W)[0] + dense(b, W)[0])
    np.testing.assert_allclose(one.word_stats(), expected, rtol=1e-13)
    np.testing.assert_allclose(two.word_stats(), expected, rtol=1e-13)
    np.testing.assert_allclose(one.sizes, 0.25 * 4.0 * (a["sizes"] + b["sizes"]), rtol=1e-13)


def test_update_refuses_statistics_of_another_number_of_components():
    state, _, _ = hand_built()
    with pytest.raises(ValueError, match="2 components"):
        state.update(0.5, 1.0, word_stats(np.array([0]), np.ones((2, 1)), np.ones(2)))


# -- the estimator contract ----------------------------------------------------------------

def corpus(seed, n_docs=60, n_words=20):
    rng = np.random.default_rng(seed)
    phi = rng.dirichlet(np.full(n_words, 0.3), 3)
    return Corpus(np.array([rng.multinomial(rng.integers(10, 30), phi[rng.integers(3)]) for _ in range(n_docs)]))


ESTIMATORS = {
    "hdp.TruncationFreeSVI": lambda seed: hdp.TruncationFreeSVI(batch_size=10, n_epochs=1, heldout_samples=20,
                                                                heldout_burnin=5, random_state=seed),
    "hdp.OnlineVB": lambda seed: hdp.OnlineVB(n_components=6, n_atoms=3, batch_size=10, n_epochs=1,
                                              heldout_samples=20, heldout_burnin=5, random_state=seed),
    "mixture.TruncationFreeSVI": lambda seed: mixture.TruncationFreeSVI(batch_size=10, n_epochs=1,
                                                                        random_state=seed),
    "mixture.StochasticVB": lambda seed: mixture.StochasticVB(n_components=6, batch_size=10, n_epochs=1,
                                                              random_state=seed),
}
SEEDS = {"int": lambda: 7, "Generator": lambda: np.random.default_rng(7)}


@pytest.mark.parametrize("seed", SEEDS.values(), ids=SEEDS.keys())
@pytest.mark.parametrize("make", ESTIMATORS.values(), ids=ESTIMATORS.keys())
def test_seeded_fits_transform_and_score_repeat(make, seed):
    X, new = corpus(0), corpus(1, n_docs=15)
    a, b = make(seed()).fit(X), make(seed()).fit(X)
    np.testing.assert_array_equal(a.components_, b.components_)
    np.testing.assert_array_equal(a.transform(new), b.transform(new))
    np.testing.assert_array_equal(a.transform(new), a.transform(new))
    assert a.score(new) == b.score(new)
    if hasattr(a, "heldout_document_log_likelihood"):
        assert a.heldout_document_log_likelihood(new) == b.heldout_document_log_likelihood(new)
        assert a.heldout_document_log_likelihood(new) == a.heldout_document_log_likelihood(new)


@pytest.mark.parametrize("make, seed", [pytest.param(make, seed, id=f"{name}-{kind}")
                                        for name, make in ESTIMATORS.items() for kind, seed in SEEDS.items()])
def test_repeated_score_calls_agree(make, seed):
    X, new = corpus(0), corpus(1, n_docs=15)
    est = make(seed()).fit(X)
    assert est.score(new) == est.score(new)


@pytest.mark.parametrize("make", ESTIMATORS.values(), ids=ESTIMATORS.keys())
def test_score_depends_on_the_documents(make):
    X, new = corpus(0), corpus(1, n_docs=15)
    est = make(3).fit(X)
    assert est.score(X) != est.score(new)
    assert est.score(new) == est.score(new.matrix)
    with pytest.raises(ValueError):
        est.score(Corpus(new.matrix[:, :-1]))


def test_hdp_score_is_document_completion_and_the_papers_metric_is_a_method():
    """The HDP topic models inherit TopicMixin.score (token split of the documents
    passed in); the [TF] S.3 whole-document estimate is a separate method."""
    from bnpcore.base import TopicMixin
    for cls in (hdp.TruncationFreeSVI, hdp.OnlineVB):
        assert cls.score is TopicMixin.score
    for cls in (mixture.TruncationFreeSVI, mixture.StochasticVB):
        assert cls.score is not TopicMixin.score and "whole" in cls.score.__doc__
    X, new = corpus(0), corpus(1, n_docs=15)
    est = ESTIMATORS["hdp.TruncationFreeSVI"](0).fit(X)
    observed, heldout = new.split_tokens(0.2, random_state=est._scoring_rng().spawn(1)[0])
    assert est.score(new) == est.heldout_log_likelihood(observed, heldout)
    assert est.score(new) != est.heldout_document_log_likelihood(new)


@pytest.mark.parametrize("make", ESTIMATORS.values(), ids=ESTIMATORS.keys())
def test_history_keys(make):
    X, new = corpus(0), corpus(1, n_docs=15)
    est = make(0).fit(X, heldout=new, eval_every=30)
    assert type(est)._iterations == "n_epochs"
    keys = {"iteration", "n_documents", "fit_seconds", "n_components", "rho", "n_used"}
    assert all(set(r) in (keys, keys | {"heldout_loglik"}) for r in est.history_)
    assert [r["n_documents"] for r in est.history_] == list(range(10, 61, 10))
    assert [r["n_documents"] for r in est.history_ if "heldout_loglik" in r] == [30, 60]
    seconds = [r["fit_seconds"] for r in est.history_]
    assert seconds == sorted(seconds)
    assert est.history_[-1]["n_components"] == est.n_components_
    assert est.history_[-1]["heldout_loglik"] == est.score(new)


# -- the public local and global steps -----------------------------------------------------

@pytest.mark.parametrize("name", ["hdp.TruncationFreeSVI", "mixture.StochasticVB"])
def test_fit_is_the_public_local_step_then_the_global_step(name):
    """``fit`` equals the online loop run with the public local step given from
    outside (``fit_with_local_step``, as bnpcore.distributed gives it), on the
    loop's state and generator, bit for bit; the record takes its entries."""
    X = corpus(0)
    make = ESTIMATORS[name]
    reference = make(4).fit(X)
    est, word_map, sizes = make(4), np.full(X.n_words, -1, dtype=np.int32), []

    def stats_of(ids, state, rng):
        sizes.append(len(ids))
        n_new, stats = est.local_step(Minibatch(X, ids, word_map), state, rng)
        return n_new, stats, {"from_outside": True}

    est.fit_with_local_step(X, stats_of)
    np.testing.assert_array_equal(est.components_, reference.components_)
    np.testing.assert_array_equal(est.weights_, reference.weights_)
    assert sizes == [10] * 6 and all(record["from_outside"] for record in est.history_)


def test_global_step_is_the_natural_gradient_step_with_new_components():
    """``global_step(stats, rho, n_new, factor)``: the new components join at the
    prior, every component moves to (1 - rho) Nst + rho * factor * stats."""
    X = corpus(0)
    est = mixture.TruncationFreeSVI(batch_size=10, n_epochs=1, reorder=False, prune_every=None,
                                    random_state=0).fit(X)
    state = est._state
    K = state.n_components
    words, sizes = state.word_stats(), state.sizes.copy()
    block = np.zeros((K + 1, 2))
    block[0], block[K] = [1.0, 0.0], [4.0, 2.0]
    est.global_step(word_stats(np.array([0, 3]), block, np.r_[np.zeros(K), 1.0]), 0.25, n_new=1, factor=2.0)
    expected = np.vstack([0.75 * words, np.zeros(X.n_words)])
    expected[:, [0, 3]] += 0.5 * block
    assert state.n_components == K + 1
    np.testing.assert_allclose(state.word_stats(), expected, rtol=1e-13, atol=0)
    np.testing.assert_allclose(state.sizes, np.r_[0.75 * sizes, 0.5], rtol=1e-13, atol=0)

