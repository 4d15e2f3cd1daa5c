"""Fixtures of the estimator contract suite: a tiny corpus, and two test-only
topic models that exercise the protocol of ``bnpcore.base`` (a batch and an
online "k-means of documents"). They are never registered outside the tests.
"""
import importlib.util
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from scipy.special import logsumexp

from bnpcore import cli, registry
from bnpcore._validation import check_int, check_prior, check_random_state
from bnpcore.base import BaseEstimator, TopicMixin
from bnpcore.corpus import Corpus, as_corpus


class DocumentKMeans(BaseEstimator, TopicMixin):
    """Test-only topic model: a mixture of unigrams fitted by hard EM.

    Each document belongs to one topic; ``transform`` returns the posterior over
    topics of each document given the fitted topics and weights.
    """

    _iterations = "max_iter"

    def __init__(self, n_components=3, max_iter=10, alpha=1.0, eta=0.1, random_state=None):
        self._store_params(locals())

    def _validate(self):
        check_int(self.n_components, "n_components")
        check_prior(self.alpha, "alpha")
        check_prior(self.eta, "eta")
        return check_random_state(self.random_state)

    def _set_model(self, nkw, nk, X):
        """topics_/weights_ from topic-word counts, largest topic first."""
        order = np.argsort(-nk, kind="stable")
        phi = nkw[order] + self.eta
        self.topics_ = phi / phi.sum(axis=1, keepdims=True)
        self.weights_ = (nk[order] + self.alpha) / (nk.sum() + self.n_components * self.alpha)
        self.n_components_ = self.n_components
        self.n_features_in_ = X.n_words
        self.vocabulary_ = X.vocabulary

    def _log_joint(self, X):
        return X.matrix @ np.log(self.topics_).T + np.log(self.weights_)

    def fit(self, X, y=None):
        X = as_corpus(X)
        rng = self._validate()
        check_int(self.max_iter, "max_iter")
        self.history_ = []
        K = self.n_components
        labels = rng.integers(K, size=X.n_docs)
        start = time.perf_counter()
        for it in range(1, self.max_iter + 1):
            onehot = np.eye(K)[labels]
            self._set_model(np.asarray(X.matrix.T @ onehot).T, onehot.sum(axis=0), X)
            joint = self._log_joint(X)
            labels = np.argmax(joint, axis=1)
            if self._report(it, n_documents=it * X.n_docs, fit_seconds=time.perf_counter() - start,
                            n_components=K, loglik=float(logsumexp(joint, axis=1).sum())):
                break
        return self

    def transform(self, X):
        joint = self._log_joint(self._check_input(X))
        return np.exp(joint - logsumexp(joint, axis=1, keepdims=True))

    def score(self, X, y=None):
        """Per-word log predictive of the documents (token sequences)."""
        X = self._check_input(X)
        return float(logsumexp(self._log_joint(X), axis=1).sum() / max(X.n_tokens, 1))


class OnlineDocumentKMeans(DocumentKMeans):
    """Test-only streaming variant: each minibatch assigns its documents to the
    best current topic and adds their counts (``partial_fit``)."""

    _persist = ("_nkw", "_nk", "_rng")
    _iterations = "n_passes"

    def __init__(self, n_components=3, batch_size=10, n_passes=2, alpha=1.0, eta=0.1, random_state=None):
        self._store_params(locals())

    def partial_fit(self, X, y=None):
        X = as_corpus(X, n_words=getattr(self, "n_features_in_", None))
        if not hasattr(self, "_nkw"):
            self._rng = self._validate()
            self._nkw = self._rng.gamma(1.0, size=(self.n_components, X.n_words))
            self._nk = np.zeros(self.n_components)
            self.history_ = []
            self._set_model(self._nkw, self._nk, X)
        labels = np.argmax(self._log_joint(X), axis=1)
        onehot = np.eye(self.n_components)[labels]
        self._nkw += np.asarray(X.matrix.T @ onehot).T
        self._nk += onehot.sum(axis=0)
        self._set_model(self._nkw, self._nk, X)
        self._stop = self._report(len(self.history_) + 1, n_documents=int(self._nk.sum()), fit_seconds=0.0,
                                  n_components=self.n_components)
        return self

    def fit(self, X, y=None):
        X = as_corpus(X)
        check_int(self.batch_size, "batch_size")
        check_int(self.n_passes, "n_passes")
        for name in ("_nkw", "_nk", "_rng", "history_"):
            self.__dict__.pop(name, None)
        order_rng = check_random_state(self.random_state)
        for _ in range(self.n_passes):
            for batch in X.minibatches(self.batch_size, random_state=order_rng):
                if self.partial_fit(batch)._stop:
                    return self
        return self

    def _after_load(self):
        self._stop = False


def _load_example(name):
    """A module of examples/ (not a package), imported once under its own name."""
    if name not in sys.modules:
        path = Path(__file__).resolve().parents[2] / "examples" / f"{name}.py"
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
    return sys.modules[name]


_load_example("unigram_mixture")     # the worked example of docs/architecture.md

TOY_MODELS = {
    "example-unigram-mixture": registry.Model("unigram_mixture:UnigramMixture", {"n_components": 10},
                                         test_kwargs={"n_components": 4, "max_iter": 8}),
    "toy-kmeans": registry.Model(f"{__name__}:DocumentKMeans", {"n_components": 10, "max_iter": 50},
                            test_kwargs={"n_components": 3, "max_iter": 8}),
    "toy-online-kmeans": registry.Model(f"{__name__}:OnlineDocumentKMeans", {"n_components": 10},
                                   test_kwargs={"n_components": 3, "batch_size": 8}),
}


def make_tiny_corpus(seed=0, n_docs=40, n_topics=3, words_per_topic=8):
    """Documents drawn from ``n_topics`` disjoint word blocks, plus one empty document."""
    rng = np.random.default_rng(seed)
    n_words = n_topics * words_per_topic
    docs = []
    for _ in range(n_docs):
        theta = rng.dirichlet(np.full(n_topics, 0.3))
        z = rng.choice(n_topics, size=rng.integers(15, 40), p=theta)
        docs.append(list(z * words_per_topic + rng.integers(words_per_topic, size=len(z))))
    docs.insert(n_docs // 2, [])
    return Corpus(docs, vocabulary=[f"w{w:02d}" for w in range(n_words)])


THEMES = ["apple banana cherry orchard fruit harvest".split(), "engine wheel motor road speed garage".split(),
          "election vote senate campaign party ballot".split()]


def write_theme_texts(folder, n_docs=30):
    """Text files of 40 words each, document i drawn from theme i % 3 of ``THEMES``."""
    rng = np.random.default_rng(0)
    for i in range(n_docs):
        (folder / f"{i:02d}.txt").write_text(" ".join(rng.choice(THEMES[i % 3], size=40)), encoding="utf-8")
    return THEMES


@pytest.fixture
def tiny_corpus():
    return make_tiny_corpus()


@pytest.fixture(params=registry.names() + sorted(TOY_MODELS))
def model_spec(request):
    """Every registered estimator (built-in, or an installed package's entry point)
    and the test-only ones, as a ``registry.Model``."""
    name = request.param
    return TOY_MODELS[name] if name in TOY_MODELS else registry.get(name)


@pytest.fixture
def toy_models():
    return TOY_MODELS


@pytest.fixture
def toy_registry(monkeypatch):
    """The registry holding only the test-only models (no entry points read), the command line's flagship one."""
    monkeypatch.setattr(registry, "_REGISTRY", registry._Registry(TOY_MODELS, entry_points_read=True))
    monkeypatch.setattr(cli, "FLAGSHIP", "toy-kmeans")
    return registry._REGISTRY.entries
