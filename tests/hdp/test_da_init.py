"""hdp.DirectAssignmentVB's start: the default batch fit from a short
DirectAssignmentGibbs run (init="auto"), random starts, init_from, and their
parameters' checks."""
import numpy as np
import pytest

import bnpcore
from bnpcore.datasets import make_bars
from bnpcore.hdp import DirectAssignmentGibbs, DirectAssignmentVB
from bnpcore.models import hdp_da


@pytest.fixture(scope="module")
def bars():
    return make_bars("sm", n_docs=120, n_test=10, random_state=0)


def test_default_is_a_batch_fit_from_a_gibbs_run_and_reproducible(bars):
    X = bars.train
    est = DirectAssignmentVB(init_gibbs_iter=4, max_iter=2, random_state=0).fit(X)
    again = DirectAssignmentVB(init_gibbs_iter=4, max_iter=2, random_state=0).fit(X)
    np.testing.assert_array_equal(est.components_, again.components_)
    assert [h["rho"] for h in est.history_] == [1.0, 1.0]          # batch iterations
    # the same as the sampler's last state given by hand, the generator shared in the same order
    rng = np.random.default_rng(0)
    sampler = DirectAssignmentGibbs(max_iter=4, burn_in=3, store_doc_topic=False, random_state=rng).fit(X)
    by_hand = DirectAssignmentVB(mode="batch", max_iter=2, random_state=rng).fit(X, init_from=sampler)
    np.testing.assert_array_equal(est.components_, by_hand.components_)
    np.testing.assert_array_equal(est.weights_, by_hand.weights_)


def test_what_auto_resolves_to(bars):
    X, rng = bars.train, np.random.default_rng(0)
    cases = [({}, "gibbs", "batch"), ({"mode": "batch"}, "gibbs", "batch"),
             ({"mode": "online"}, "random", "online"), ({"n_components": 7}, "random", "online"),
             ({"init": "random"}, "random", "online"), ({"init": "gibbs", "n_components": 7}, "gibbs", "batch")]
    for params, start, mode in cases:
        est = DirectAssignmentVB(**params)
        assert (est._start(), est._mode()) == (start, mode), params
        assert est._max_iter() == (hdp_da.AUTO_ITER_FROM_SAMPLE if start == "gibbs" else hdp_da.AUTO_ITER_RANDOM)
    assert DirectAssignmentVB(max_iter=3)._max_iter() == 3
    # a random start from "auto" topics has RANDOM_TOPICS of them
    est = DirectAssignmentVB(mode="online")
    assert est._init_state(X, rng).n_components == hdp_da.RANDOM_TOPICS
    # init_from makes "auto" a batch fit whatever n_components says
    est = DirectAssignmentVB(n_components=7)
    est._init_from = object()
    assert est._mode() == "batch"


@pytest.mark.parametrize("params, message", [
    ({"init": "sampler"}, "init must be 'auto', 'gibbs' or 'random'"),
    ({"init_gibbs_iter": 0}, "init_gibbs_iter"),
    ({"init_gibbs_iter": 2.5}, "init_gibbs_iter"),
    ({"n_components": "many"}, "n_components must be 'auto' or a positive integer"),
    ({"n_components": 0}, "n_components"),
    ({"mode": "stream"}, "mode must be 'auto', 'online' or 'batch'"),
    ({"max_iter": "many"}, "max_iter must be 'auto' or a positive integer"),
])
def test_bad_start_parameters_are_refused(bars, params, message):
    with pytest.raises((ValueError, TypeError), match=message):
        DirectAssignmentVB(**params).fit(bars.train)


def test_partial_fit_starts_from_random_topics(bars):
    X = bars.train
    est = DirectAssignmentVB(batch_size=60, random_state=0).partial_fit(X)
    assert len(est.history_) == 2
    assert est.history_[0]["n_components"] <= hdp_da.RANDOM_TOPICS + 3       # 60 random topics, a few splits
    with pytest.raises(ValueError, match="init='gibbs' starts fit"):
        DirectAssignmentVB(init="gibbs").partial_fit(X)
    # a model fitted from a Gibbs start continues online
    fitted = DirectAssignmentVB(init="gibbs", init_gibbs_iter=2, max_iter=1, random_state=0).fit(X)
    fitted.partial_fit(X[:30])
    assert fitted.history_[-1]["rho"] < 1.0


def test_init_from_is_used_instead_of_the_gibbs_start(bars, monkeypatch):
    X = bars.train
    sampler = DirectAssignmentGibbs(max_iter=4, burn_in=3, random_state=1).fit(X)
    explicit = DirectAssignmentVB(mode="batch", max_iter=2, random_state=0).fit(X, init_from=sampler)

    def no_sampler(*args, **kwargs):
        raise AssertionError("the Gibbs start ran although init_from was given")
    monkeypatch.setattr(DirectAssignmentGibbs, "fit", no_sampler)
    est = DirectAssignmentVB(max_iter=2, random_state=0).fit(X, init_from=sampler)
    np.testing.assert_array_equal(est.components_, explicit.components_)
    assert est._init_from is None


def test_the_default_fit_saves_loads_and_continues(bars, tmp_path):
    X = bars.train
    est = DirectAssignmentVB(init_gibbs_iter=4, max_iter=2, random_state=0).fit(X)
    est.save(tmp_path / "m.npz")
    loaded = bnpcore.load(tmp_path / "m.npz")
    assert loaded.get_params()["init"] == "auto" and loaded.get_params()["mode"] == "auto"
    np.testing.assert_array_equal(loaded.transform(bars.test), est.transform(bars.test))
    loaded.partial_fit(X[:30])          # an online step from the fitted topics
    assert loaded.n_updates_ == est.n_updates_ + 1
    assert loaded.history_[-1]["rho"] < 1.0


def test_a_batch_start_keeps_the_largest_topics_that_fit_in_memory(bars, monkeypatch):
    X = bars.train
    sampler = DirectAssignmentGibbs(max_iter=4, burn_in=3, random_state=1).fit(X)
    K = sampler.n_components_
    assert K > 3
    monkeypatch.setattr(hdp_da, "memory_limit", lambda: 4 * 3 * hdp_da.batch_bytes_per_topic(X))     # 3 topics
    est = DirectAssignmentVB(random_state=0, split_merge=False)
    est._init_from = sampler
    with pytest.warns(UserWarning, match=f"the start's {K} topics .* from the 3 largest"):
        state = est._init_state(X, np.random.default_rng(0))
    sizes = np.sort(sampler._component_sizes())[::-1]
    np.testing.assert_allclose(np.sort((state.lam - est.eta).sum(axis=1))[::-1],
                               sizes[:3] * X.n_tokens / sizes.sum())
    assert state.beta.sum() == pytest.approx(1.0) and len(state.beta) == 4
    # online holds one minibatch's pairs: every topic is kept
    est = DirectAssignmentVB(mode="online", random_state=0)
    est._init_from = sampler
    assert est._init_state(X, np.random.default_rng(0)).n_components == K
