"""The estimator contract (bnpcore.base), checked on every model of
``bnpcore.registry`` (so estimators added later, also by an installed package's
entry point, are covered automatically) and on the test-only models of conftest.py."""
import inspect
import numbers
import pickle

import numpy as np
import pytest
import scipy.sparse as sp

from bnpcore.base import NotFittedError, TopicMixin, load
from bnpcore.corpus import Corpus

from .conftest import make_tiny_corpus


def make(spec, **overrides):
    cls = spec.load_class()
    if "random_state" in inspect.signature(cls.__init__).parameters:
        overrides.setdefault("random_state", 0)
    return spec.make(test=True, **overrides)


@pytest.fixture
def fitted(model_spec, tiny_corpus):
    return make(model_spec).fit(tiny_corpus)


def public_state(est):
    return {k: v for k, v in vars(est).items() if k.endswith("_") and not k.startswith("_")}


def assert_same_history(a, b):
    """Equal records (NaN equals NaN), ignoring wall-clock entries (keys ending in "seconds")."""
    def strip(history):
        return [{k: v for k, v in rec.items() if not k.endswith("seconds")} for rec in history]
    np.testing.assert_equal(strip(a.history_), strip(b.history_))


def assert_same_predictions(a, b, corpus):
    np.testing.assert_array_equal(a.transform(corpus), b.transform(corpus))
    assert a.score(corpus) == b.score(corpus)
    if isinstance(a, TopicMixin):
        np.testing.assert_array_equal(a.get_topics(), b.get_topics())


def test_init_only_stores_parameters(model_spec):
    cls = model_spec.load_class()
    for p in list(inspect.signature(cls.__init__).parameters.values())[1:]:
        assert p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD), p.name
        assert p.default is not p.empty, f"parameter {p.name} has no default"
    est = make(model_spec)
    params = est.get_params()
    assert set(params) == {k for k in vars(est) if not k.startswith("_")}
    assert not est._fitted_names()


def test_one_name_per_setting(model_spec):
    """Iteration counts are ``max_iter`` (or the class's ``_iterations``) in the
    constructor and in ``transform``; no other spelling of a setting is accepted."""
    cls = model_spec.load_class()
    init = set(cls._param_names())
    transform = set(inspect.signature(cls.transform).parameters) - {"self", "X"}
    assert not (init | transform) & {"n_iter", "n_sweeps", "max_passes", "init_topics", "n_topics"}
    counts = {name for name in transform if "iter" in name or "sweep" in name or "pass" in name}
    assert counts <= {"max_iter"}, f"{cls.__name__}.transform: {sorted(counts)}"
    with pytest.raises(TypeError):
        cls(n_iter=3)


def test_fit_returns_self_and_sets_fitted_attributes(model_spec, tiny_corpus):
    est = make(model_spec)
    assert est.fit(tiny_corpus, None) is est
    assert isinstance(est.history_, list) and est.history_, "fit must _report at least one iteration"
    iterations = [rec["iteration"] for rec in est.history_]
    assert all(isinstance(i, int) for i in iterations) and iterations == sorted(iterations)
    if hasattr(est, "n_features_in_"):
        assert est.n_features_in_ == tiny_corpus.n_words
    if isinstance(est, TopicMixin):
        topics = est.get_topics()
        assert topics.ndim == 2 and topics.shape[1] == tiny_corpus.n_words
        assert np.all(topics >= 0)
        np.testing.assert_allclose(topics.sum(axis=1), 1.0, rtol=1e-10)
        assert est.vocabulary_ == tiny_corpus.vocabulary
        if hasattr(est, "n_components_"):
            assert est.n_components_ == topics.shape[0]


def test_transform_gives_proportions(fitted, tiny_corpus):
    theta = fitted.transform(tiny_corpus)
    assert theta.shape[0] == tiny_corpus.n_docs
    if isinstance(fitted, TopicMixin):
        assert theta.shape[1] == fitted.get_topics().shape[0]
    assert np.all(np.isfinite(theta)) and np.all(theta >= 0)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-8)   # including the empty document
    np.testing.assert_array_equal(theta, fitted.transform(tiny_corpus))  # deterministic
    np.testing.assert_array_equal(theta, fitted.transform(tiny_corpus.matrix))  # any Corpus input
    assert fitted.transform(tiny_corpus[[0, 3, 5]]).shape == (3, theta.shape[1])


def test_score_is_finite_and_deterministic(fitted, tiny_corpus):
    s = fitted.score(tiny_corpus)
    assert isinstance(s, numbers.Real) and np.isfinite(s)
    assert fitted.score(tiny_corpus) == s


def test_heldout_log_likelihood(fitted, tiny_corpus):
    if not isinstance(fitted, TopicMixin):
        pytest.skip("not a topic model")
    observed, heldout = tiny_corpus.split_tokens(0.2, random_state=0)
    ll = fitted.heldout_log_likelihood(observed, heldout)
    assert np.isfinite(ll) and ll <= 0


def test_fit_transform_matches_fit_then_transform(model_spec, tiny_corpus):
    a = make(model_spec).fit_transform(tiny_corpus)
    b = make(model_spec).fit(tiny_corpus).transform(tiny_corpus)
    np.testing.assert_array_equal(a, b)


def test_methods_need_a_fit(model_spec, tiny_corpus):
    est = make(model_spec)
    for method in (est.transform, est.score):
        with pytest.raises(NotFittedError):
            method(tiny_corpus)


@pytest.mark.parametrize("change", [-1, 1], ids=["narrower", "wider"])
def test_vocabulary_size_mismatch_is_an_error(fitted, tiny_corpus, change):
    W = tiny_corpus.n_words
    dense = tiny_corpus.matrix.toarray()
    dense = dense[:, :W - 1] if change < 0 else np.hstack([dense, np.ones((dense.shape[0], 1), dtype=dense.dtype)])
    for X in (sp.csr_matrix(dense), Corpus(dense), dense):
        for method in (fitted.transform, fitted.score):
            with pytest.raises(ValueError, match=f"{W + change}"):
                method(X)


# Keys every history_ record carries (bnpcore.base): cumulative documents and
# algorithm time, and the current number of components.
HISTORY_KEYS = {"iteration", "n_documents", "fit_seconds", "n_components"}


def test_history_records_have_the_documented_keys(fitted, tiny_corpus):
    observed = [rec["n_documents"] for rec in fitted.history_]
    assert observed == sorted(observed) and observed[-1] > 0
    for rec in fitted.history_:
        assert HISTORY_KEYS <= rec.keys(), sorted(HISTORY_KEYS - rec.keys())
        assert isinstance(rec["n_components"], int) and rec["fit_seconds"] >= 0
        if "bound" in rec:
            assert isinstance(rec["bound"], dict) and all(np.isfinite(v) for v in rec["bound"].values())
    seconds = [rec["fit_seconds"] for rec in fitted.history_]
    assert seconds == sorted(seconds), "fit_seconds is cumulative"


def test_score_depends_on_the_documents(fitted, tiny_corpus):
    """``score`` scores the documents it is given (not the training documents)."""
    new = make_tiny_corpus(seed=11)
    assert fitted.score(tiny_corpus) != fitted.score(new)
    assert fitted.score(new) == fitted.score(new.matrix)


def test_get_set_params_and_clone(model_spec, tiny_corpus):
    est = make(model_spec)
    params = est.get_params()
    other = type(est)(**params)
    assert other.get_params() == params
    assert est.set_params(**params) is est
    with pytest.raises(ValueError, match="no_such_parameter"):
        est.set_params(no_such_parameter=1)
    est.fit(tiny_corpus)
    assert est.get_params() == params, "fit must not change parameters"
    sklearn_base = pytest.importorskip("sklearn.base")
    clone = sklearn_base.clone(est)
    assert clone.get_params() == params and not clone._fitted_names()


@pytest.mark.parametrize("seed", [lambda: 7, lambda: np.random.default_rng(7)], ids=["int", "Generator"])
def test_same_random_state_same_fit(model_spec, tiny_corpus, seed):
    if "random_state" not in model_spec.load_class()._param_names():
        pytest.skip("deterministic estimator")
    a = make(model_spec, random_state=seed()).fit(tiny_corpus)
    b = make(model_spec, random_state=seed()).fit(tiny_corpus)
    for name in ("components_", "topics_", "weights_"):
        if hasattr(a, name):
            np.testing.assert_array_equal(getattr(a, name), getattr(b, name))
    assert_same_predictions(a, b, tiny_corpus)
    assert_same_history(a, b)
    if isinstance(a.random_state, int):
        refit = a.fit(tiny_corpus)            # refitting forgets the previous fit
        assert_same_predictions(refit, b, tiny_corpus)
        assert_same_history(refit, b)


def test_save_load_round_trip(fitted, tiny_corpus, tmp_path):
    path = tmp_path / "model.npz"
    assert fitted.save(path) == str(path)
    loaded = load(path)
    assert type(loaded) is type(fitted)
    assert loaded.get_params() == fitted.get_params()
    assert public_state(loaded).keys() == public_state(fitted).keys() - {"doc_topic_"}   # saved only if asked
    if hasattr(fitted, "doc_topic_"):
        fitted.save(path, doc_topic=True)
        np.testing.assert_array_equal(load(path).doc_topic_, fitted.doc_topic_)
    assert_same_predictions(loaded, fitted, tiny_corpus)
    np.testing.assert_equal(loaded.history_, fitted.history_)
    if hasattr(fitted, "partial_fit"):   # streaming estimators resume where they stopped
        batch = tiny_corpus[:8]
        assert_same_predictions(loaded.partial_fit(batch), fitted.partial_fit(batch), tiny_corpus)


def test_pickle_round_trip(fitted, tiny_corpus):
    clone = pickle.loads(pickle.dumps(fitted))
    assert type(clone) is type(fitted) and clone.get_params() == fitted.get_params()
    assert_same_predictions(clone, fitted, tiny_corpus)


def _bad_values(est):
    """(parameter, invalid value) pairs derivable from the defaults: positive
    float hyperparameters get -1.0 and NaN, string options an unknown name."""
    defaults = inspect.signature(type(est).__init__).parameters
    for name in est._param_names():
        default = defaults[name].default
        if isinstance(default, float) and default > 0:
            yield name, -1.0
            yield name, float("nan")
        elif isinstance(default, str):
            yield name, "__no_such_option__"


def test_bad_hyperparameters_raise_value_error(model_spec, tiny_corpus):
    est = make(model_spec)
    bad = list(_bad_values(est))
    if not bad:
        pytest.skip("no float or string hyperparameters")
    for name, value in bad:
        est = make(model_spec, **{name: value})
        with pytest.raises(ValueError, match=name):
            est.fit(tiny_corpus)


def test_reporting_callback_sees_every_iteration_and_can_stop(model_spec, tiny_corpus):
    est = make(model_spec)
    seen = []
    with est.reporting(lambda e, rec: seen.append(dict(rec))):
        est.fit(tiny_corpus)
    np.testing.assert_equal(seen, est.history_)
    assert "_callback" not in vars(est)
    with est.reporting(lambda e, rec: True):      # stop after the first iteration
        est.fit(tiny_corpus)
    assert len(est.history_) == 1
    assert est.transform(tiny_corpus).shape[0] == tiny_corpus.n_docs


def test_partial_fit(model_spec, tiny_corpus):
    est = make(model_spec)
    if not hasattr(est, "partial_fit"):
        pytest.skip("batch estimator")
    batches = list(tiny_corpus.minibatches(10, shuffle=False))
    assert est.partial_fit(batches[0]) is est
    n = len(est.history_)
    theta = est.transform(tiny_corpus)
    assert theta.shape[0] == tiny_corpus.n_docs
    est.partial_fit(batches[1])
    assert len(est.history_) > n
    np.testing.assert_allclose(est.transform(tiny_corpus).sum(axis=1), 1.0, rtol=1e-8)
    with pytest.raises(ValueError):
        est.partial_fit(Corpus(tiny_corpus.matrix, n_words=tiny_corpus.n_words + 1))


def test_parallel_transform_equals_serial(fitted, tiny_corpus):
    if "n_threads" not in fitted._param_names():
        pytest.skip("no n_threads parameter")
    serial = fitted.set_params(n_threads=1).transform(tiny_corpus)
    parallel = fitted.set_params(n_threads=2).transform(tiny_corpus)
    np.testing.assert_allclose(parallel, serial, rtol=1e-12, atol=1e-15)


def test_topic_printing(fitted):
    if not isinstance(fitted, TopicMixin):
        pytest.skip("not a topic model")
    pairs = fitted.show_topic(0, topn=4)
    assert len(pairs) == 4 and all(w in fitted.vocabulary_ for w, _ in pairs)
    probs = [p for _, p in pairs]
    assert probs == sorted(probs, reverse=True)
    assert fitted.top_words(0, 4) == [w for w, _ in pairs]
    shown = fitted.show_topics(num_topics=-1, num_words=3)
    assert len(shown) == fitted.get_topics().shape[0] and '*"' in shown[0][1]


SKLEARN_CHECKS = ["check_parameters_default_constructible", "check_no_attributes_set_in_init",
                  "check_get_params_invariance", "check_set_params", "check_estimator_cloneable",
                  "check_estimator_repr", "check_do_not_raise_errors_in_init_or_set_params"]


@pytest.mark.parametrize("check", SKLEARN_CHECKS)
def test_sklearn_estimator_checks(model_spec, check):
    """The scikit-learn checks that need no data (its generated data are not counts)."""
    checks = pytest.importorskip("sklearn.utils.estimator_checks")
    est = make(model_spec)
    getattr(checks, check)(type(est).__name__, est)


def test_repeated_score_calls_agree_with_a_generator_seed(model_spec, tiny_corpus):
    """score spawned from the Generator's own seed sequence, so a second call drew another split."""
    if "random_state" not in model_spec.load_class()._param_names():
        pytest.skip("deterministic estimator")
    est = make(model_spec, random_state=np.random.default_rng(4)).fit(tiny_corpus)
    new = make_tiny_corpus(seed=12)
    assert est.score(new) == est.score(new)
    np.testing.assert_array_equal(est.transform(new), est.transform(new))
