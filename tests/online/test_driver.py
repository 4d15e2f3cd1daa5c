"""The online driver: schedules, the lazily decayed stick state, streams,
callbacks and checkpoint/resume (Wang & Blei 2012, "Truncation-free online
variational inference for Bayesian nonparametric models" [TF], §3; Hoffman et
al. 2013)."""
import numpy as np
import pytest

import bnpcore.base
from bnpcore import mixture
from bnpcore.corpus import Corpus
from bnpcore.inference import moves
from bnpcore.inference.callbacks import EarlyStopping
from bnpcore.inference.online import Minibatch, MinibatchStream, StickState, learning_rate
from bnpcore.inference.stats import SuffStats
from bnpcore.kernels._svi import dp_local_step


def batch_stats(vocab, block, sizes):
    return SuffStats({"words": block, "sizes": sizes}, vocab=vocab, word_fields=("words",))


def random_corpus(seed, n_docs=60, n_words=30, n_clusters=4, length=(0, 40)):
    rng = np.random.default_rng(seed)
    phi = rng.dirichlet(np.full(n_words, 0.2), n_clusters)
    z = rng.integers(n_clusters, size=n_docs)
    X = np.array([rng.multinomial(rng.integers(*length), phi[k]) for k in z])
    return Corpus(X), z


# -- learning rates -------------------------------------------------------------

def test_truncation_free_schedule_is_a_rescaled_running_average():
    """rho_t = S/n_t: lambda = eta + (n/n_t) sum of the statistics seen, and at
    n_t = n the batch update, for variable minibatch sizes."""
    rng = np.random.default_rng(1)
    n, W, K, eta = 37, 9, 3, 0.3
    stats = rng.gamma(0.5, 2.0, size=(n, K, W))
    sizes = rng.random((n, K))
    state = StickState(W, eta, 1.0)
    state.table.add(K)
    state.words[state.slots] = rng.random((K, W))        # erased by the first step (rho = 1)
    state.row_tilde[state.slots] = state.words[state.slots].sum(axis=1)
    seen, t = 0, 0
    for S in [1, 4, 2, 7, 1, 10, 5, 7]:
        block = stats[seen:seen + S].sum(axis=0)
        seen += S
        rho = learning_rate("truncation_free", t, seen, S, n)
        state.update(rho, n / S, batch_stats(np.arange(W, dtype=np.int32), block, sizes[seen - S:seen].sum(axis=0)))
        t += 1
        np.testing.assert_allclose(state.lam(), eta + n / seen * stats[:seen].sum(axis=0), rtol=1e-12)
        np.testing.assert_allclose(state.sizes, n / seen * sizes[:seen].sum(axis=0), rtol=1e-12)
    assert seen == n
    np.testing.assert_allclose(state.lam(), eta + stats.sum(axis=0), rtol=1e-12)
    np.testing.assert_allclose(state.word_mass(), stats.sum(axis=(0, 2)), rtol=1e-12)


def test_learning_rate_values_and_floor():
    assert learning_rate("truncation_free", 0, 10, 10, 1000) == 1.0
    assert learning_rate("truncation_free", 5, 60, 10, 1000) == pytest.approx(10 / 60)
    assert learning_rate("truncation_free", 500, 5000, 10, 1000) == pytest.approx(10 / 1000)
    assert learning_rate("robbins_monro", 0, 10, 10, 1000, offset=1.0, decay=0.6) == 1.0
    assert learning_rate("robbins_monro", 9, 100, 10, 1000, 1.0, 0.6) == pytest.approx(10 ** -0.6)
    assert learning_rate("robbins_monro", 10 ** 9, 10, 10, 1000, 1.0, 0.6) == pytest.approx(0.01)


# -- the stick state ------------------------------------------------------------

class DenseState:
    """Naive reference: Nst_kw and Nst_k as plain arrays."""

    def __init__(self, W, eta, g):
        self.N, self.s, self.eta, self.g = np.zeros((0, W)), np.zeros(0), eta, g

    def update(self, rho, factor, vocab, block, sizes):
        self.N *= 1 - rho
        self.N[:, vocab] += rho * factor * block
        self.s = (1 - rho) * self.s + rho * factor * sizes


def test_lazy_decay_equals_dense_updates_with_renormalisation():
    rng = np.random.default_rng(2)
    W, eta, g = 25, 0.1, 1.5
    lazy, dense = StickState(W, eta, g, capacity=2), DenseState(W, eta, g)
    folds = 0
    for step in range(1000):
        if step % 97 == 0:
            lazy.table.add(2)
            dense.N = np.vstack([dense.N, np.zeros((2, W))])
            dense.s = np.concatenate([dense.s, np.zeros(2)])
        K = lazy.n_components
        vocab = rng.choice(W, size=rng.integers(1, W), replace=False).astype(np.int32)
        block = rng.gamma(0.3, 1.0, size=(K, len(vocab))) * (rng.random((K, 1)) < 0.7)
        sizes = rng.random(K)
        rho = 1.0 if step == 500 else rng.choice([rng.uniform(0.001, 0.05), rng.uniform(0.5, 0.9)])
        before = lazy.scale
        lazy.update(rho, 3.0, batch_stats(vocab, block, sizes))
        dense.update(rho, 3.0, vocab, block, sizes)
        folds += lazy.scale == 1.0 and before * (1 - rho) != 1.0
        np.testing.assert_allclose(lazy.word_stats(), dense.N, rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(lazy.word_mass(), dense.N.sum(axis=1), rtol=1e-12)
        np.testing.assert_array_equal(lazy.sizes, dense.s)
    assert folds >= 2          # the rho = 1 step and scale underflows were exercised


def suffix_v(sizes, g):
    return np.array([g + sizes[k + 1:].sum() for k in range(len(sizes))])


def test_stick_invariant_after_random_updates_reorders_and_prunes():
    """v_k = g + sum_{l>k}(u_l - 1) to 1e-12; pruning removes exactly the
    components below the threshold; reordering keeps the multiset of
    (lambda_k, Nst_k)."""
    rng = np.random.default_rng(3)
    W, eta, g = 12, 0.5, 2.0
    state = StickState(W, eta, g)
    for step in range(300):
        action = rng.integers(4)
        if action == 0 or state.n_components == 0:
            state.table.add(rng.integers(1, 4))
        K = state.n_components
        if action == 1:
            before = {(tuple(r), s) for r, s in zip(state.lam().round(12), state.sizes.round(12))}
            order = moves.reorder(state.table, state.sizes if rng.random() < 0.5 else state.word_mass())
            after = {(tuple(r), s) for r, s in zip(state.lam().round(12), state.sizes.round(12))}
            assert before == after
            if order is not None:
                assert sorted(order) == list(range(K))
        elif action == 2:
            threshold = rng.uniform(0, 2)
            keep = state.sizes >= threshold
            expected = state.lam()[keep]
            state.table.remove(keep)
            assert np.all(state.sizes >= threshold)
            np.testing.assert_array_equal(state.lam(), expected)
        else:
            vocab = np.arange(W, dtype=np.int32)
            state.update(rng.uniform(0.01, 1.0), rng.uniform(1, 50),
                         batch_stats(vocab, rng.gamma(0.5, 1.0, size=(K, W)), rng.gamma(0.5, 1.0, size=K)))
        u, v = state.stick_params()
        np.testing.assert_allclose(v, suffix_v(u - 1, g), rtol=1e-12, atol=0)
        np.testing.assert_array_equal(u, 1 + state.sizes)


def test_stick_expectations():
    state = StickState(3, 0.5, 1.0)
    state.table.add(3)
    state.table.arrays["sizes"][state.slots] = [4.0, 2.0, 1.0]
    u, v = state.stick_params()
    np.testing.assert_allclose(v, [4.0, 2.0, 1.0])
    ev = u / (u + v)
    np.testing.assert_allclose(state.expected_weights(), [ev[0], ev[1] * (1 - ev[0]),
                                                          ev[2] * (1 - ev[0]) * (1 - ev[1])])
    assert state.expected_weights().sum() < 1
    state.truncated = True
    assert state.expected_weights().sum() == pytest.approx(1.0)
    # E[log pi] by Monte Carlo
    rng = np.random.default_rng(0)
    V = rng.beta(u, v, size=(200000, 3))
    V[:, -1] = 1.0
    logpi = np.log(V) + np.concatenate([np.zeros((len(V), 1)), np.cumsum(np.log1p(-V[:, :-1]), axis=1)], axis=1)
    np.testing.assert_allclose(state.expected_log_weights(), logpi.mean(axis=0), atol=5 * logpi.std(axis=0).max()
                               / np.sqrt(len(V)))


# -- minibatches and streams ------------------------------------------------------

def test_gather_batch_matches_corpus_slicing():
    X, _ = random_corpus(4)
    ids = np.array([5, 0, 17, 5, 59, 2])
    word_map = np.full(X.n_words, -1, dtype=np.int32)
    b = Minibatch(X, ids, word_map)
    assert np.all(word_map == -1)
    dense = np.zeros((len(ids), X.n_words), dtype=np.int64)
    for j in range(len(ids)):
        for p in range(b.ptr[j], b.ptr[j + 1]):
            dense[j, b.vocab[b.words[p]]] += b.counts[p]
    np.testing.assert_array_equal(dense, X.matrix[ids].toarray())
    assert len(np.unique(b.vocab)) == len(b.vocab)
    with pytest.raises(IndexError):
        Minibatch(X, np.array([60]), word_map)


def test_taking_documents_of_a_minibatch_keeps_their_pairs_and_its_vocabulary():
    X, _ = random_corpus(4)
    ids = np.array([5, 0, 17, 5, 59, 2])
    b = Minibatch(X, ids, np.full(X.n_words, -1, dtype=np.int32))
    positions = np.array([4, 1, 3])
    part = b.take(positions)
    assert part.vocab is b.vocab and part.n_docs == 3
    np.testing.assert_array_equal(part.doc_ids, ids[positions])
    for j, p in enumerate(positions):
        np.testing.assert_array_equal(part.words[part.ptr[j]:part.ptr[j + 1]], b.words[b.ptr[p]:b.ptr[p + 1]])
        np.testing.assert_array_equal(part.counts[part.ptr[j]:part.ptr[j + 1]], b.counts[b.ptr[p]:b.ptr[p + 1]])
    assert part.ptr[-1] == len(part.words) == sum(b.ptr[p + 1] - b.ptr[p] for p in positions)


def test_stream_visits_every_document_once_per_epoch():
    stream = MinibatchStream(23, 5)
    rng = np.random.default_rng(0)
    for epoch in range(3):
        seen = np.concatenate([stream.next(rng) for _ in range(5)])
        assert sorted(seen) == list(range(23))
        assert stream.documents_done == 23 * (epoch + 1)


# -- estimator-level driver behaviour ----------------------------------------------

def test_one_minibatch_of_the_whole_corpus_is_the_batch_update():
    """With S = n the first step has rho = 1 and n/S = 1: lambda = eta + the pooled
    counts of the sampled labels, u - 1 = their sizes ([TF] eq 10)."""
    X, _ = random_corpus(5)
    eta, a, seed = 0.2, 1.0, 11
    est = mixture.TruncationFreeSVI(eta=eta, a=a, batch_size=X.n_docs, n_epochs=1, local_sweeps=3, random_state=seed,
                                    prune_every=None).fit(X)
    rng = np.random.default_rng(seed)
    order = rng.permutation(X.n_docs)          # the stream's first (and only) permutation
    b = Minibatch(X, order, np.full(X.n_words, -1, dtype=np.int32))
    empty = StickState(X.n_words, eta, a)
    n_new, z, _, _ = dp_local_step(b.ptr, b.words, b.counts, b.vocab, empty.words, empty.row_tilde, empty.slots,
                                   1.0, empty.sizes, eta, a, 3, True, rng)
    counts = X.matrix[order].toarray()
    lam = np.array([eta + counts[z == k].sum(axis=0) for k in range(n_new)])
    sizes = np.bincount(z, minlength=n_new).astype(float)
    key = np.lexsort(lam.T[::-1])
    got = np.lexsort(est.components_.T[::-1])
    np.testing.assert_allclose(est.components_[got], lam[key], rtol=1e-12)
    np.testing.assert_allclose(est._state.sizes[got], sizes[key], rtol=1e-12)
    assert np.all(np.diff(est._state.sizes) <= 0)       # reordered by size


def test_pruning_every_n_documents():
    X, _ = random_corpus(6, n_docs=75)
    est = mixture.TruncationFreeSVI(eta=0.5, batch_size=1, n_epochs=2, prune_every=50, prune_threshold=3.0,
                                    random_state=0).fit(X)
    assert est._driver["next_prune"] == 200
    assert np.all(est._state.sizes >= 3.0)          # the last prune came after the last update


def model_arrays(est):
    arrays = est._state.to_arrays()
    return [est.components_, est.weights_, arrays["words"], arrays["sizes"], arrays["row_tilde"],
            np.array([arrays["scale"]])]


def assert_same_model(a, b):
    for x, y in zip(model_arrays(a), model_arrays(b)):
        np.testing.assert_array_equal(x, y)
    assert a._rng.bit_generator.state == b._rng.bit_generator.state
    strip = [{k: v for k, v in r.items() if k != "fit_seconds"} for r in a.history_]
    assert strip == [{k: v for k, v in r.items() if k != "fit_seconds"} for r in b.history_]


@pytest.mark.parametrize("stop_at", [1, 29, 64])
def test_checkpoint_resume_equals_uninterrupted_run(tmp_path, stop_at):
    X, _ = random_corpus(7, n_docs=45)
    params = dict(eta=0.3, batch_size=4, n_epochs=3, prune_every=40, random_state=123)
    test, _ = random_corpus(17, n_docs=10)
    full = mixture.TruncationFreeSVI(**params).fit(X, heldout=test, eval_every=20)
    path = tmp_path / "ckpt.npz"
    part = mixture.TruncationFreeSVI(**params).fit(X, heldout=test, eval_every=20, checkpoint=path,
                                                   max_documents=stop_at)
    assert part._driver["documents"] < 3 * X.n_docs
    resumed = bnpcore.base.load(path).fit(X, heldout=test, eval_every=20, resume=True)
    assert_same_model(full, resumed)
    with pytest.raises(ValueError, match="resume"):
        resumed.fit(X, resume=True)              # complete: nothing to resume
    other, _ = random_corpus(8, n_docs=45)
    with pytest.raises(ValueError, match="corpus"):
        bnpcore.base.load(path).fit(other, resume=True)


def test_periodic_checkpoints_and_partial_fit_resume(tmp_path):
    X, _ = random_corpus(9, n_docs=50)
    params = dict(eta=0.3, batch_size=6, random_state=5, total_samples=50)
    full = mixture.TruncationFreeSVI(**params)
    for s in range(0, 50, 10):
        full.partial_fit(X[np.arange(s, s + 10)])
    est = mixture.TruncationFreeSVI(**params)
    for s in range(0, 50, 10):
        est.partial_fit(X[np.arange(s, s + 10)])
        if s == 20:
            est.save(tmp_path / "m.npz")
            est = bnpcore.base.load(tmp_path / "m.npz")
    assert_same_model(full, est)
    # checkpoint_every writes the file during an uninterrupted fit
    mixture.TruncationFreeSVI(eta=0.3, batch_size=6, n_epochs=1, random_state=5).fit(
        X, checkpoint=tmp_path / "c.npz", checkpoint_every=20)
    assert bnpcore.base.load(tmp_path / "c.npz")._driver["documents"] == 42


def test_pickle_round_trip_continues_identically():
    import pickle
    X, _ = random_corpus(16, n_docs=40)
    a = mixture.TruncationFreeSVI(batch_size=5, random_state=2).partial_fit(X[np.arange(20)])
    b = pickle.loads(pickle.dumps(a))
    a.partial_fit(X[np.arange(20, 40)])
    b.partial_fit(X[np.arange(20, 40)])
    assert_same_model(a, b)


def test_save_before_fit_raises(tmp_path):
    with pytest.raises(bnpcore.base.NotFittedError):
        mixture.TruncationFreeSVI().save(tmp_path / "x.npz")


def test_truncated_baseline_resumes_exactly(tmp_path):
    X, _ = random_corpus(10, n_docs=30)
    params = dict(n_components=6, batch_size=4, n_epochs=2, random_state=1)
    full = mixture.StochasticVB(**params).fit(X)
    mixture.StochasticVB(**params).fit(X, checkpoint=tmp_path / "s.npz", max_documents=21)
    assert_same_model(full, bnpcore.base.load(tmp_path / "s.npz").fit(X, resume=True))


def test_history_heldout_and_early_stopping():
    """One record per minibatch through BaseEstimator._report; held-out scores
    every eval_every documents; a reporting callback stops the fit."""
    X, _ = random_corpus(11, n_docs=80)
    train, test = X[np.arange(60)], X[np.arange(60, 80)]
    seen = []
    est = mixture.TruncationFreeSVI(batch_size=5, n_epochs=4, random_state=0)
    with est.reporting(lambda e, r: seen.append(r)):
        est.fit(train, heldout=test, eval_every=15)
    assert [r["iteration"] for r in est.history_] == list(range(1, 49))
    assert [r["n_documents"] for r in est.history_] == list(range(5, 241, 5))
    assert seen == est.history_
    scored = [r for r in est.history_ if "heldout_loglik" in r]
    assert [r["n_documents"] for r in scored] == list(range(15, 241, 15))
    assert all(np.isfinite(r["heldout_loglik"]) for r in scored)
    assert scored[-1]["heldout_loglik"] == pytest.approx(est.score(test))
    stop = mixture.TruncationFreeSVI(batch_size=5, n_epochs=50, random_state=0)
    with stop.reporting(EarlyStopping(patience=2, min_delta=1.0)):
        stop.fit(train, heldout=test, eval_every=15)
    assert stop.history_[-1]["n_documents"] == 45 and stop._stream is not None        # stopped early, resumable


def test_early_stopping_logic():
    es = EarlyStopping(patience=2, min_delta=0.1)
    values = [1.0, 1.05, 1.5, 1.55, 1.58]
    assert [es(None, {"heldout_loglik": v}) for v in values] == [False, False, False, False, True]
    assert es(None, {"n_documents": 3}) is False


def test_partial_fit_after_fit_keeps_the_corpus_size():
    X, _ = random_corpus(18, n_docs=40)
    est = mixture.TruncationFreeSVI(batch_size=10, n_epochs=1, random_state=0).fit(X)
    est.partial_fit(X[np.arange(10)])
    assert est._driver["total"] == 40 and est._driver["documents"] == 50
    assert est.history_[-1]["iteration"] == 5


def test_progress_bar_does_not_change_the_fit():
    pytest.importorskip("tqdm")
    X, _ = random_corpus(12)
    a = mixture.TruncationFreeSVI(batch_size=7, random_state=3).fit(X, progress=True)
    b = mixture.TruncationFreeSVI(batch_size=7, random_state=3).fit(X)
    np.testing.assert_array_equal(a.components_, b.components_)


def test_partial_fit_without_total_samples_uses_documents_seen():
    X, _ = random_corpus(13, n_docs=40)
    est = mixture.TruncationFreeSVI(batch_size=40, random_state=0).partial_fit(X)
    assert est._driver["total"] is None
    # one minibatch with n = S: the batch update (sizes sum to the number of documents)
    assert est._state.sizes.sum() == pytest.approx(40)


@pytest.mark.parametrize("params, match", [
    ({"batch_size": 0}, "batch_size"), ({"n_epochs": 1.5}, "n_epochs"), ({"schedule": "adam"}, "schedule"),
    ({"learning_decay": 1.5}, "learning_decay"), ({"prune_every": 0}, "prune_every"),
    ({"eta": -1.0}, "eta"), ({"a": 0.0}, "a"), ({"local_sweeps": -1}, "local_sweeps"),
    ({"new_component": "walk"}, "new_component"), ({"total_samples": 0}, "total_samples"),
    ({"reorder": "yes"}, "reorder")])
def test_bad_parameters_raise_naming_the_parameter(params, match):
    X, _ = random_corpus(14)
    with pytest.raises((ValueError, TypeError), match=match):
        mixture.TruncationFreeSVI(**params).fit(X)


def test_resume_without_state_raises():
    X, _ = random_corpus(15)
    with pytest.raises(ValueError, match="resume"):
        mixture.TruncationFreeSVI().fit(X, resume=True)


@pytest.mark.parametrize("make", [lambda: mixture.TruncationFreeSVI(random_state=0),
                                  lambda: mixture.StochasticVB(n_components=3, random_state=0)])
def test_fit_on_a_corpus_without_tokens_is_an_error(make):
    """Like the batch estimators (an all-empty corpus made TF-SVI invent components)."""
    with pytest.raises(ValueError, match="no tokens"):
        make().fit(Corpus(np.zeros((5, 4), dtype=int)))


@pytest.mark.parametrize("make", [lambda **kw: mixture.TruncationFreeSVI(a=1e10, **kw),
                                  lambda **kw: __import__("bnpcore.hdp").hdp.TruncationFreeSVI(gamma=1e10, **kw)])
def test_concentrations_beyond_the_exact_walk_are_refused(make):
    """a or gamma = 1e10 made the new-stick walk allocate ~1e10 sticks (killed at 20 GB)."""
    X, _ = random_corpus(0, n_docs=20)
    with pytest.raises(ValueError, match="too large for new_component='exact'"):
        make(random_state=0).fit(X)
    est = make(new_component="paper", n_epochs=1, batch_size=10, random_state=0).fit(X)   # no walk: finite
    assert np.all(np.isfinite(est.topics_))


@pytest.mark.parametrize("cls", ["mixture.TruncationFreeSVI", "hdp.TruncationFreeSVI"])
def test_eta_below_the_counts_rounding_unit_is_refused(cls):
    """eta = 1e-20 was absorbed by the local sampler's counts (FloatingPointError, NaN weights)."""
    import bnpcore
    family, name = cls.split(".")
    X, _ = random_corpus(0, n_docs=20)
    with pytest.raises(ValueError, match="eta=1e-20 is below"):
        getattr(getattr(bnpcore, family), name)(eta=1e-20, random_state=0).fit(X)
    est = getattr(getattr(bnpcore, family), name)(eta=1e-6, n_epochs=2, batch_size=10, random_state=0).fit(X)
    assert np.all(np.isfinite(est.topics_)) and np.isfinite(est.score(X))
