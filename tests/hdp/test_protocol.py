"""G-HDP and CV-HDP on the batch protocol: history keys,
interrupted fits resumed exactly, score = document completion of the documents passed in."""
import shutil

import numpy as np
import pytest

from bnpcore import base
from bnpcore.corpus import Corpus
from bnpcore.hdp import CollapsedVB, DirectAssignmentGibbs

from hdp_reference import make_bars

ESTIMATORS = pytest.mark.parametrize("cls, params", [
    (DirectAssignmentGibbs, dict(n_components=5, max_iter=8, burn_in=3, eta_tot=5.0)),
    (CollapsedVB, dict(n_components=6, max_iter=6, eta_tot=5.0)),
], ids=["G-HDP", "CV-HDP"])


@pytest.fixture(scope="module")
def data():
    """(train, held-out tokens of train, new documents) of a small bars corpus with an empty document."""
    counts, _ = make_bars(80, 50, np.random.default_rng(2))
    counts[3] = 0
    X = Corpus(counts)
    train, test = X[:60].split_tokens(0.1, random_state=0)
    return train, test, X[60:]


def _without_time(history):
    return [{k: v for k, v in r.items() if k != "fit_seconds"} for r in history]


@ESTIMATORS
def test_history_keys(data, cls, params):
    train, test, _ = data
    model = cls(random_state=0, **params).fit(train, heldout=test, eval_every=3)
    standard = {"iteration", "n_documents", "fit_seconds", "n_components"}
    extra = ({"alpha", "gamma", "n_tables", "steps", "log_lik"} if cls is DirectAssignmentGibbs
             else {"alpha", "gamma", "bound", "n_active"})
    evaluated = {3, 6, params["max_iter"]}
    for it, rec in enumerate(model.history_, 1):
        assert set(rec) == standard | extra | ({"heldout_loglik", "perplexity"} if it in evaluated else set())
        assert rec["iteration"] == it and rec["n_documents"] == it * train.n_docs
    assert np.all(np.diff([r["fit_seconds"] for r in model.history_]) >= 0)
    assert model.history_[-1]["n_components"] == model.n_components_
    if cls is CollapsedVB:
        bound = model.history_[-1]["bound"]
        assert isinstance(bound, dict) and model.bound_ == sum(bound.values())
        assert model.history_[-1]["n_active"] == model.n_active_


@ESTIMATORS
def test_checkpoint_resume_continues_exactly(data, tmp_path, cls, params):
    train, test, _ = data
    full = cls(random_state=3, **params).fit(train, heldout=test)
    part = cls(random_state=3, **params)
    with part.reporting(lambda est, rec: rec["iteration"] == 4):
        part.fit(train, heldout=test, checkpoint=tmp_path / "ck.npz")
    assert part.n_iter_ == 4
    resumed = base.load(tmp_path / "ck.npz").fit(train, heldout=test, resume=True)
    np.testing.assert_array_equal(resumed.topics_, full.topics_)
    np.testing.assert_array_equal(resumed.doc_topic_, full.doc_topic_)
    np.testing.assert_array_equal(resumed.weights_, full.weights_)
    np.testing.assert_equal(_without_time(resumed.history_), _without_time(full.history_))
    assert resumed.heldout_log_likelihood(train, test) == full.heldout_log_likelihood(train, test)
    if cls is DirectAssignmentGibbs:
        np.testing.assert_array_equal(resumed._z, full._z)
        assert resumed.heldout_loglik_ == full.heldout_loglik_


@ESTIMATORS
def test_periodic_checkpoint_and_max_seconds_resume_exactly(data, tmp_path, cls, params):
    train, _, _ = data
    full = cls(random_state=np.random.default_rng(7), **params).fit(train)
    # a checkpoint written in passing (iteration 2 of a fit that goes on) resumes exactly
    def keep_copy(est, rec):
        if rec["iteration"] == 3:           # the file still holds iteration 2's checkpoint
            shutil.copy(tmp_path / "ck.npz", tmp_path / "ck2.npz")

    model = cls(random_state=np.random.default_rng(7), **params)
    with model.reporting(keep_copy):
        model.fit(train, checkpoint=tmp_path / "ck.npz", checkpoint_every=2)
    np.testing.assert_array_equal(model.topics_, full.topics_)
    loaded = base.load(tmp_path / "ck2.npz")
    assert loaded._resume["iteration"] == 2
    resumed = loaded.fit(train, resume=True)
    np.testing.assert_array_equal(resumed.topics_, full.topics_)
    np.testing.assert_equal(_without_time(resumed.history_), _without_time(full.history_))
    # max_seconds stops after one iteration; the same object continues in memory
    part = cls(random_state=np.random.default_rng(7), **params).fit(train, max_seconds=1e-9)
    assert part.n_iter_ == 1
    part.fit(train, resume=True)
    np.testing.assert_array_equal(part.topics_, full.topics_)
    np.testing.assert_equal(_without_time(part.history_), _without_time(full.history_))


@ESTIMATORS
def test_score_is_document_completion_of_the_documents_passed(data, cls, params):
    train, test, new = data
    model = cls(random_state=np.random.default_rng(11), **params).fit(train)
    on_new = model.score(new)
    assert np.isfinite(on_new) and model.score(new) == on_new            # repeatable
    assert model.score(train) != on_new                                  # not the training predictive
    np.testing.assert_array_equal(model.transform(new), model.transform(new))
    # a Generator of the same seed gives the same fit and the same scores
    again = cls(random_state=np.random.default_rng(11), **params).fit(train)
    assert again.score(new) == on_new
    np.testing.assert_array_equal(again.transform(new), model.transform(new))
    # the training predictive stays available for held-out tokens of the training documents
    assert np.isfinite(model.heldout_log_likelihood(train, test))


def test_sampled_transform_does_not_depend_on_the_batch(data):
    """G-HDP samples each document's proportions from a stream of its own (scoring
    seed and words), TF-SVI's fold-in is deterministic per document: reordered,
    subset or repeated, a document gets the same row."""
    from bnpcore import hdp
    train, _, new = data
    for model in (hdp.DirectAssignmentGibbs(n_components=5, max_iter=5, burn_in=2, random_state=3).fit(train),
                  hdp.TruncationFreeSVI(batch_size=10, n_epochs=1, random_state=3).fit(train)):
        full = model.transform(new)
        order = np.arange(new.n_docs)[::-1]
        np.testing.assert_array_equal(model.transform(new[order]), full[order])
        np.testing.assert_array_equal(model.transform(new[1:3]), full[1:3])


@ESTIMATORS
def test_input_width_is_checked(data, cls, params):
    train, _, new = data
    model = cls(random_state=0, **params).fit(train)
    for width in (99, 101):
        with pytest.raises(ValueError, match="words"):
            model.score(Corpus(np.ones((2, width), dtype=np.int64)))
        with pytest.raises(ValueError, match="words"):
            model.transform(Corpus(np.ones((2, width), dtype=np.int64)))
