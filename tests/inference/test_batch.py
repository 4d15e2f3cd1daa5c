"""The batch loop (bnpcore.inference.batch) on a test-only estimator whose
state draws random predictives: held-out bookkeeping ([HYB] eqs 30-31),
stopping rules, checkpoints and resume."""
import math

import numpy as np
import pytest

from bnpcore.base import TopicMixin, load
from bnpcore.corpus import Corpus
from bnpcore.evaluation import PredictiveAverage, token_log_likelihood
from bnpcore.inference.batch import BatchEstimator, BatchState


class RandomState(BatchState):
    """Each sweep draws a random predictive; ``delta`` halves every sweep."""

    def __init__(self, corpus, K, rng):
        self.corpus, self.rng, self.K = corpus, rng, K
        self.delta = 1.0
        self.seen = []
        self.collected = 0

    @property
    def n_components(self):
        return self.K

    def sweep(self):
        D, W = self.corpus.n_docs, self.corpus.n_words
        self.seen.append((self.rng.dirichlet(np.ones(self.K), size=D), self.rng.dirichlet(np.ones(W), size=self.K)))
        self.delta /= 2
        return {"delta": self.delta}

    def predictive(self):
        return self.seen[-1]

    def collect(self):
        self.collected += 1


class RandomTopics(TopicMixin, BatchEstimator):
    def __init__(self, n_components=2, max_iter=6, burn_in=None, tol=None, random_state=None):
        self.n_components = n_components
        self.max_iter = max_iter
        self.burn_in = burn_in
        self.tol = tol
        self.random_state = random_state

    def _check_params(self):
        return {"max_iter": self.max_iter, "burn_in": self.burn_in, "tol": self.tol}

    def _init_state(self, X, rng):
        return RandomState(X, self.n_components, rng)

    def _set_fitted(self, state, X):
        self.topics_ = state.seen[-1][1]
        self.n_components_ = self.n_components
        self.n_collected_ = state.collected
        self.vocabulary_ = X.vocabulary

    def transform(self, X):
        X = self._check_input(X)
        return np.full((X.n_docs, self.n_components_), 1.0 / self.n_components_)


@pytest.fixture
def text():
    rng = np.random.default_rng(3)
    return Corpus(rng.integers(0, 4, size=(12, 9)))


def test_samples_are_averaged_after_burn_in(text):
    observed, heldout = text.split_tokens(0.3, random_state=1, mode="corpus_tokens")
    est = RandomTopics(max_iter=5, burn_in=2, random_state=0).fit(observed, heldout=heldout)
    state_draws = RandomState(observed, 2, np.random.default_rng(0))
    for _ in range(5):
        state_draws.sweep()
    assert est.n_collected_ == 3 and [r["iteration"] for r in est.history_] == [1, 2, 3, 4, 5]
    for i, rec in enumerate(est.history_):
        if i < 2:
            want = token_log_likelihood(*state_draws.seen[i], heldout)
        else:
            avg = PredictiveAverage(heldout)
            for dt, tw in state_draws.seen[2:i + 1]:
                avg.add(dt, tw)
            want = avg.log_likelihood()
        assert rec["heldout_loglik"] == pytest.approx(want, rel=1e-12)
        assert rec["perplexity"] == pytest.approx(math.exp(-want), rel=1e-12)
        assert rec["n_documents"] == (i + 1) * observed.n_docs and rec["n_components"] == 2
    assert all(b["fit_seconds"] >= a["fit_seconds"] for a, b in zip(est.history_, est.history_[1:]))


def test_eval_every_and_the_last_iteration(text):
    observed, heldout = text.split_tokens(0.3, random_state=1)
    est = RandomTopics(max_iter=7, random_state=0).fit(observed, heldout=heldout, eval_every=3)
    assert [r["iteration"] for r in est.history_ if "heldout_loglik" in r] == [3, 6, 7]


def test_stopping_rules(text):
    est = RandomTopics(max_iter=10, tol=0.1).fit(text)
    assert est.n_iter_ == 4 and est.history_[-1]["delta"] == 1 / 16       # first delta below tol
    with est.reporting(lambda e, rec: rec["iteration"] == 3):
        est.fit(text)
    assert est.n_iter_ == 3
    est = RandomTopics(max_iter=1000).fit(text, max_seconds=1e-9)
    assert est.n_iter_ == 1


def test_max_seconds_is_a_budget_per_call(text, monkeypatch):
    """A resumed fit gets its own max_seconds (the clock advances 0.5 s per reading:
    one sweep costs 0.5 s); an integer eval_every does not enumerate max_iter
    (a set of 10**7 iterations took ~0.5 GB)."""
    import itertools
    import tracemalloc
    from bnpcore.inference import batch
    clock = itertools.count(0.0, 0.5)
    monkeypatch.setattr(batch.time, "perf_counter", lambda: next(clock))
    tracemalloc.start()
    est = RandomTopics(max_iter=10 ** 7, random_state=0).fit(text, max_seconds=3)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 50 * 2 ** 20
    assert est.n_iter_ == 6
    est.fit(text, max_seconds=3, resume=True)
    assert est.n_iter_ == 12 and est.history_[-1]["fit_seconds"] == 6.0


def test_checkpoint_and_resume_continue_exactly(text, tmp_path):
    observed, heldout = text.split_tokens(0.3, random_state=1)
    full = RandomTopics(max_iter=8, burn_in=2, random_state=5).fit(observed, heldout=heldout)
    path = tmp_path / "ckpt.npz"
    part = RandomTopics(max_iter=8, burn_in=2, random_state=5)
    with part.reporting(lambda e, rec: rec["iteration"] == 5):
        part.fit(observed, heldout=heldout, checkpoint=path)
    resumed = load(path).fit(observed, heldout=heldout, resume=True)
    np.testing.assert_array_equal(resumed.topics_, full.topics_)
    strip = [{k: v for k, v in r.items() if k != "fit_seconds"} for r in full.history_]
    assert [{k: v for k, v in r.items() if k != "fit_seconds"} for r in resumed.history_] == strip
    # in memory too (no file)
    part = RandomTopics(max_iter=8, burn_in=2, random_state=5)
    part.fit(observed, heldout=heldout, max_seconds=1e-9)
    assert part.n_iter_ == 1
    part.fit(observed, heldout=heldout, resume=True)
    np.testing.assert_array_equal(part.topics_, full.topics_)
    with pytest.raises(ValueError, match="interrupted"):
        part.fit(observed, resume=True)           # finished: nothing to resume


def test_resume_refuses_a_checkpoint_of_another_state_layout(text, tmp_path, monkeypatch):
    path = tmp_path / "ckpt.npz"
    part = RandomTopics(max_iter=8, random_state=5)
    with part.reporting(lambda e, rec: rec["iteration"] == 3):
        part.fit(text, checkpoint=path)
    state_class = type(part._batch_state)
    unrecorded = load(path)
    del unrecorded._resume["state_layout"]          # a file from before layouts were recorded: layout 1
    assert unrecorded.fit(text, resume=True).n_iter_ == 8
    monkeypatch.setattr(state_class, "layout", 2)   # the state's saved attributes changed since
    with pytest.raises(ValueError, match=f"{state_class.__name__} of layout 1.*resumes layout 2"):
        load(path).fit(text, resume=True)


def test_periodic_checkpoints_are_loadable_models(text, tmp_path):
    path = tmp_path / "every.npz"
    RandomTopics(max_iter=6, random_state=0).fit(text, checkpoint=path, checkpoint_every=2)
    model = load(path)
    assert model.history_[-1]["iteration"] == 6 and model.transform(text).shape == (text.n_docs, 2)


def test_resume_checks_the_corpus(text, tmp_path):
    est = RandomTopics(max_iter=5, random_state=0)
    with est.reporting(lambda e, rec: True):
        est.fit(text)
    with pytest.raises(ValueError, match="corpus"):
        est.fit(text[:5], resume=True)
    with pytest.raises(ValueError, match="eval_every"):
        est.fit(text, eval_every=0)
