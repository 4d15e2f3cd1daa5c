"""What every bnpcore estimator shares: parameters, topic printing, persistence.

Estimators follow scikit-learn's conventions: ``__init__`` only stores its
keyword arguments (validation happens in ``fit``), fitted attributes end in an
underscore, and ``get_params``/``set_params`` make ``sklearn.base.clone`` work.
Topic models expose ``topics_`` (K x W, rows sum to 1) and get gensim's topic
printing from :class:`TopicMixin`.
"""
import importlib
import inspect
import json
import os
import tempfile

import numpy as np

__all__ = ["BaseEstimator", "TopicMixin", "NotFittedError", "load", "FORMAT_VERSION"]

FORMAT_VERSION = 1


class NotFittedError(ValueError, AttributeError):
    """Raised when a method needs a fitted estimator."""


class BaseEstimator:
    """Parameters, repr, fitted checks and save/load for all estimators.

    Subclasses list private state needed to resume training (e.g. sampler
    assignments, random generator state) in ``_persist`` so that ``save`` keeps it.
    """

    _persist = ()

    @classmethod
    def _param_names(cls):
        sig = inspect.signature(cls.__init__)
        return sorted(p.name for p in sig.parameters.values()
                      if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))

    def get_params(self, deep=True):
        """Constructor parameters as a dict."""
        return {name: getattr(self, name) for name in self._param_names()}

    def set_params(self, **params):
        """Set constructor parameters; unknown names raise ``ValueError``."""
        valid = self._param_names()
        for name, value in params.items():
            if name not in valid:
                raise ValueError(f"invalid parameter {name!r} for {type(self).__name__}; valid: {valid}")
            setattr(self, name, value)
        return self

    def __repr__(self):
        defaults = {p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()}
        changed = [f"{k}={v!r}" for k, v in self.get_params().items()
                   if not (isinstance(defaults.get(k), type(v)) and defaults.get(k) == v)]
        return f"{type(self).__name__}({', '.join(changed)})"

    def _fitted_names(self):
        return [k for k in vars(self) if k.endswith("_") and not k.startswith("_")]

    def _check_fitted(self):
        if not self._fitted_names():
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit first")

    def fit_transform(self, X, y=None, **kwargs):
        return self.fit(X, **kwargs).transform(X)

    # -- persistence ---------------------------------------------------------
    def save(self, path):
        """Save parameters and fitted state to ``path`` (an ``.npz`` file).

        The file is written to a temporary name and renamed into place, so an
        interrupted save never leaves a corrupt model behind.
        """
        arrays, attrs = {}, {}
        for name in self._fitted_names() + list(self._persist):
            if not hasattr(self, name):
                continue
            value = getattr(self, name)
            if isinstance(value, np.ndarray):
                arrays["a:" + name] = value
            else:
                attrs[name] = _to_json(value, name)
        meta = {
            "format_version": FORMAT_VERSION,
            "class": f"{type(self).__module__}:{type(self).__qualname__}",
            "params": {k: _to_json(v, k) for k, v in self.get_params().items()},
            "attrs": attrs,
        }
        path = os.fspath(path)
        directory = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(dir=directory, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                np.savez_compressed(fh, __meta__=np.array(json.dumps(meta)), **arrays)
            os.replace(tmp, path)
        except BaseException:
            os.unlink(tmp)
            raise
        return path


def load(path):
    """Load an estimator saved with ``save``; checks the format version."""
    with np.load(os.fspath(path), allow_pickle=False) as data:
        if "__meta__" not in data:
            raise ValueError(f"{path} is not a bnpcore model file")
        meta = json.loads(str(data["__meta__"]))
        if meta.get("format_version") != FORMAT_VERSION:
            raise ValueError(f"{path} has model format {meta.get('format_version')}, "
                             f"this bnpcore reads format {FORMAT_VERSION}")
        module, _, qualname = meta["class"].partition(":")
        if not module.startswith("bnpcore"):
            raise ValueError(f"{path} names a class outside bnpcore: {meta['class']}")
        cls = importlib.import_module(module)
        for part in qualname.split("."):
            cls = getattr(cls, part)
        est = cls(**meta["params"])
        for name, value in meta["attrs"].items():
            setattr(est, name, value)
        for key in data.files:
            if key.startswith("a:"):
                setattr(est, key[2:], data[key])
    if hasattr(est, "_after_load"):
        est._after_load()
    return est


def _to_json(value, name):
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.random.Generator):
        raise TypeError(f"{name}: a Generator cannot be saved; use an int random_state")
    try:
        json.dumps(value)
    except TypeError:
        raise TypeError(f"{name} of type {type(value).__name__} cannot be saved") from None
    return value


class TopicMixin:
    """gensim-style topic access for estimators with ``topics_`` (K x W, rows sum
    to 1, largest first) and ``vocabulary_`` (list of words or None)."""

    def get_topics(self):
        """Topic-word distributions, ndarray of shape (n_topics, n_words)."""
        self._check_fitted()
        return np.asarray(self.topics_)

    def _word(self, w):
        vocab = getattr(self, "vocabulary_", None)
        return vocab[w] if vocab is not None else str(w)

    def top_words(self, k, topn=10):
        """The ``topn`` most probable words of topic ``k``."""
        return [w for w, _ in self.show_topic(k, topn)]

    def show_topic(self, k, topn=10):
        """``[(word, probability), ...]`` of topic ``k``, most probable first."""
        topics = self.get_topics()
        if not 0 <= k < topics.shape[0]:
            raise IndexError(f"topic {k} out of range for {topics.shape[0]} topics")
        order = np.argsort(-topics[k], kind="stable")[:topn]
        return [(self._word(w), float(topics[k, w])) for w in order]

    def show_topics(self, num_topics=10, num_words=10, formatted=True):
        """The first ``num_topics`` topics (-1: all) as ``(k, '0.031*"word" + ...')``
        or ``(k, [(word, prob), ...])``."""
        n = self.get_topics().shape[0]
        n = n if num_topics is None or num_topics < 0 else min(num_topics, n)
        out = []
        for k in range(n):
            pairs = self.show_topic(k, num_words)
            out.append((k, " + ".join(f'{p:.3f}*"{w}"' for w, p in pairs) if formatted else pairs))
        return out

    def print_topics(self, num_topics=10, num_words=10):
        """Print ``show_topics`` one per line and return it."""
        topics = self.show_topics(num_topics, num_words)
        for k, text in topics:
            print(f"topic {k}: {text}")
        return topics
