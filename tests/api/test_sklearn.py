"""scikit-learn conformance of every registered estimator: its own estimator
checks (``parametrize_with_checks``), ``Pipeline(CountVectorizer(), est)``,
``GridSearchCV`` with ``score`` as the criterion, ``get_feature_names_out``;
and bnpcore without scikit-learn installed.

scikit-learn is an optional dependency: bnpcore imports it only inside
``BaseEstimator.__sklearn_tags__`` and ``Corpus.from_vectorizer`` users' code.
"""
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

from bnpcore import registry
from bnpcore.corpus import Corpus

estimator_checks = pytest.importorskip("sklearn.utils.estimator_checks")
from sklearn.feature_extraction.text import CountVectorizer  # noqa: E402
from sklearn.model_selection import GridSearchCV, KFold  # noqa: E402
from sklearn.pipeline import Pipeline, make_pipeline  # noqa: E402

# Checks that fail only because a clear bnpcore error is worded differently
# from scikit-learn's (the checks match its wording), or is a TypeError where
# scikit-learn raises ValueError. ``xfail_strict`` turns a check that starts
# passing into a failure, so this list cannot go stale.
EXPECTED_FAILED_CHECKS = {
    "check_positive_only_tag_during_fit": "negative counts raise ValueError('counts must be non-negative, found "
                                          "-3'); the check wants scikit-learn's 'Negative values in data'",
    "check_complex_data": "complex counts raise TypeError ('counts must be numeric'): a complex dtype is the "
                          "wrong type for counts; the check wants ValueError",
    "check_estimators_empty_data_messages": "a matrix without columns raises ValueError('the corpus has an "
                                            "empty vocabulary'); the check wants '0 feature(s) (shape=...'",
    "check_fit2d_predict1d": "a 1-d array raises ValueError('expected a 2-d count matrix (n_docs, n_words), got "
                             "shape (3,)'); the check wants 'Reshape your data'",
}

# Estimators whose full check run takes 5-10 s on the checks' generated data.
SLOW = {"hdp-online-vb", "lda-svb"}


def make(name, **overrides):
    spec = registry.get(name)
    if "random_state" in spec.load_class()._param_names():
        overrides.setdefault("random_state", 0)
    return spec.make(test=True, **overrides)


def expected_failures(estimator):
    return EXPECTED_FAILED_CHECKS


def parametrize_with_checks(names):
    # scikit-learn warns that the estimators do not inherit from its
    # BaseEstimator: they cannot, scikit-learn being optional for bnpcore.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Estimator .* does not inherit from `sklearn.base.BaseEstimator`")
        return estimator_checks.parametrize_with_checks([make(n) for n in sorted(names)], xfail_strict=True,
                                                        expected_failed_checks=expected_failures)


def one_name_per_class(names):
    """Registry names, one per estimator class (lda-cvb and lda-cvb0 share one)."""
    by_class = {}
    for name in sorted(names, reverse=True):
        by_class[registry.get(name).path] = name
    return set(by_class.values())


@parametrize_with_checks(one_name_per_class(set(registry.names()) - SLOW))
def test_sklearn_check_estimator(estimator, check):
    """scikit-learn's own checks on every estimator class, on integer data: the
    tag ``categorical`` makes them round their generated data to non-negative
    integers (counts), as for ``CategoricalNB``."""
    check(estimator)


@pytest.mark.slow
@parametrize_with_checks(SLOW & set(registry.names()))
def test_sklearn_check_estimator_slow(estimator, check):
    check(estimator)


def themed_texts(n_docs=60, seed=0):
    """Documents of 25 words, each drawn from one of three disjoint themes."""
    themes = ["apple banana cherry orchard fruit harvest pear plum".split(),
              "engine wheel motor road speed garage brake fuel".split(),
              "election vote senate campaign party ballot mayor poll".split()]
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(themes[j % 3], size=25)) for j in range(n_docs)]


@pytest.mark.parametrize("name", registry.names())
def test_pipeline_with_count_vectorizer(name):
    texts = themed_texts()
    pipe = make_pipeline(CountVectorizer(), make(name))
    pipe.fit(texts[:45])
    est, X_test = pipe[-1], pipe[0].transform(texts[45:])
    assert est.n_features_in_ == len(pipe[0].vocabulary_)
    # the pipeline's score is the estimator's held-out score of the vectorized documents
    assert pipe.score(texts[45:]) == est.score(X_test)
    theta = pipe.transform(texts[45:])
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)
    names = pipe.get_feature_names_out()
    assert len(names) == theta.shape[1] == est.n_components_
    assert names[0] == f"{type(est).__name__.lower()}0"


def test_grid_search_chooses_the_number_of_topics_by_score():
    """Three themes: document completion prefers 3 topics to 1; the search
    refits the best and its score is the pipeline's own."""
    texts = themed_texts(90)
    pipe = Pipeline([("counts", CountVectorizer()), ("lda", make("lda-cvb", max_iter=30))])
    search = GridSearchCV(pipe, {"lda__n_components": [1, 3]}, cv=KFold(3, shuffle=True, random_state=0))
    search.fit(texts)
    scores = search.cv_results_["mean_test_score"]
    assert np.all(np.isfinite(scores)) and scores[1] > scores[0] + 0.3
    assert search.best_params_ == {"lda__n_components": 3}
    assert search.best_score_ == scores[1]
    best = search.best_estimator_
    assert best["lda"].n_components_ == 3
    assert search.score(texts[:10]) == best.score(texts[:10])


def test_feature_names_and_vocabulary_from_the_vectorizer():
    texts = themed_texts()
    vectorizer = CountVectorizer()
    corpus = Corpus.from_vectorizer(vectorizer.fit_transform(texts), vectorizer)
    est = make("lda-cvb", n_components=3, max_iter=30).fit(corpus)
    assert set(est.top_words(0, 5)) <= set(vectorizer.get_feature_names_out())
    with pytest.raises(ValueError, match="input_features has 2 names"):
        est.get_feature_names_out(["a", "b"])
    np.testing.assert_array_equal(est.get_feature_names_out(vectorizer.get_feature_names_out()),
                                  ["collapsedvb0", "collapsedvb1", "collapsedvb2"])


def test_bnpcore_works_without_scikit_learn(tmp_path):
    """scikit-learn is optional: with it made unimportable, bnpcore imports,
    reads text, fits, transforms and scores; only the tags need it."""
    code = textwrap.dedent("""
        import sys
        sys.modules["sklearn"] = None          # any import of sklearn now fails
        import bnpcore
        from bnpcore.lda import CollapsedVB
        corpus = bnpcore.Corpus.from_texts(["apple pear apple", "motor road motor", "pear apple"])
        est = CollapsedVB(n_components=2, max_iter=5, random_state=0).fit(corpus)
        assert est.transform(corpus).shape == (3, 2) and est.score(corpus) < 0
        try:
            est.__sklearn_tags__()
        except ImportError:
            print("ok")
    """)
    # run outside the source tree: "python -c" puts the working directory first on sys.path
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
