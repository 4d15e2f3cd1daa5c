"""What every bnpcore estimator shares: parameters, progress reports, topic
printing, persistence.

The estimator protocol
----------------------
Every estimator subclasses :class:`BaseEstimator` (topic models also
:class:`TopicMixin`) and follows scikit-learn's conventions, so that
``sklearn.base.clone``, grid searches and pipelines work:

* ``__init__(self, *, hyper=default, ..., random_state=None)`` only stores its
  keyword arguments, unchanged, as attributes of the same name
  (``self._store_params(locals())``). Every parameter has a default. Nothing
  is validated or computed here.
* ``fit(X, y=None) -> self``. ``X`` is a :class:`bnpcore.Corpus` or anything
  ``Corpus`` accepts (a SciPy sparse or dense count matrix, a list of token-id
  lists). ``y`` is ignored. ``fit`` validates the hyperparameters first
  (``ValueError``/``TypeError`` whose message names the parameter), forgets any
  previous fit, sets ``history_ = []`` and calls :meth:`BaseEstimator._report`
  once per iteration (sweep, pass or minibatch).
* ``partial_fit(X, y=None) -> self``, online and streaming estimators only: the
  first call on an unfitted estimator initialises it, later calls continue
  from the current state (``history_`` keeps growing).
* ``transform(X) -> ndarray (n_docs, n_components_)``: per-document topic
  proportions (cluster responsibilities for mixtures), non-negative rows that
  sum to 1; an empty document gets the prior mean. ``transform`` and ``score``
  are deterministic functions of the fitted state: randomised inference inside
  them draws from :meth:`BaseEstimator._scoring_rng`, so calling them twice, or
  on a saved and reloaded model, gives the same answer. Their input goes
  through :meth:`BaseEstimator._check_input` (a vocabulary of another width is
  a ``ValueError``).
* ``score(X, y=None) -> float``: higher is better. For topic models it is
  document completion on the documents ``X`` (:meth:`TopicMixin.score`);
  mixtures document theirs (the per-word predictive of whole documents).
* Fitted attributes end in ``_``: ``history_`` (list of per-iteration dicts,
  see ``_report``), ``n_components_``, ``n_features_in_`` (vocabulary size W);
  topic models ``topics_`` (K x W, rows sum to 1, largest topic first) and
  ``vocabulary_`` (the fitted corpus's vocabulary, or None); DP models
  ``weights_``. Methods called before ``fit`` raise :class:`NotFittedError`.
* ``random_state``: None, an int or a ``numpy.random.Generator``; the same int
  (or a Generator in the same state) gives the same fit. ``n_threads`` (where
  present) follows ``bnpcore._validation.effective_n_threads``. The iteration
  parameter is ``max_iter`` (batch) or ``n_epochs`` (online), named by the class
  attribute ``_iterations``; renamed parameters stay one release as aliases
  (:meth:`BaseEstimator._renamed`).
* Batch and online estimators do not write these loops themselves: they
  subclass ``bnpcore.inference.batch.BatchEstimator`` or
  ``bnpcore.inference.online.OnlineEstimator`` (docs/architecture.md).

Progress and early stopping
---------------------------
An estimator calls ``self._report(iteration, **metrics)`` after each
iteration (``iteration`` counts completed iterations from 1). Every record
carries ``n_documents`` (documents processed so far), ``fit_seconds``
(cumulative time in the algorithm, evaluation excluded), ``n_components``, and
where they apply ``heldout_loglik`` and ``bound`` (a dict of named terms);
wall-clock times go under keys ending in ``seconds``, the only entries allowed
to differ between two fits with the same ``random_state``. ``_report`` appends
``{"iteration": iteration, **metrics}`` to ``history_`` and passes it to the
callback installed with :meth:`BaseEstimator.reporting`, if any; it returns
True when the callback asks to stop, and the estimator then ends ``fit``
early (leaving a valid fitted state)::

    for it in range(1, self.max_iter + 1):
        ...one sweep...
        if self._report(it, n_documents=it * n_docs, fit_seconds=seconds, n_components=K):
            break

Persistence
-----------
``est.save(path)`` writes one ``.npz`` file (format version
:data:`FORMAT_VERSION`): the constructor parameters, every public attribute
ending in ``_`` and the private names listed in the class attribute
``_persist`` (resume state such as sampler assignments or a random generator).
Arrays are stored as arrays of the file, also inside other values; everything
else must be numbers, strings, None, lists, tuples, dicts with string keys, or
NumPy scalars, arrays and ``Generator``s inside such values (NumPy scalars come
back as Python numbers). :func:`load` rebuilds the estimator and calls its
optional ``_after_load()`` hook (to rebuild caches). Files of format 1 are
still read. Estimators also pickle.
"""
import contextlib
import functools
import hashlib
import importlib
import inspect
import json
import os
import tempfile
import threading
import warnings

import numpy as np

from bnpcore._validation import blas_limited
from bnpcore.corpus import Corpus, as_corpus

__all__ = ["BaseEstimator", "TopicMixin", "NotFittedError", "load", "class_key", "exclusive", "FORMAT_VERSION",
           "DEPRECATED"]

# Default of a renamed parameter kept one release as an alias (``BaseEstimator._renamed``).
DEPRECATED = "deprecated"

FORMAT_VERSION = 2
# 1: arrays nested in other values were stored as JSON lists; 2: as arrays of the .npz
READABLE_FORMATS = (1, 2)

# "module:qualname" -> class, for every BaseEstimator subclass defined so far;
# load() only instantiates classes from here (never an arbitrary name from a file),
# after importing the estimator families below.
_ESTIMATOR_CLASSES = {}
_FAMILIES = ("bnpcore.lda", "bnpcore.hdp", "bnpcore.mixture")


class NotFittedError(ValueError, AttributeError):
    """Raised when a method needs a fitted estimator."""


_FIT_GUARD = threading.Lock()


def exclusive(method):
    """Decorator of ``fit``/``partial_fit``: one thread at a time may train an
    estimator (its state is not thread-safe); another thread gets a clear
    RuntimeError instead of a corrupted state. Nested calls from the training
    thread (``fit`` calling ``partial_fit``) are allowed. BLAS runs on one
    thread meanwhile (``bnpcore._validation.blas_limited``: the OpenMP kernels
    own the cores)."""
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        me = threading.get_ident()
        with _FIT_GUARD:
            owner = self.__dict__.get("_fitting")
            if owner is not None and owner != me:
                raise RuntimeError(f"this {type(self).__name__} is being trained in another thread: estimators "
                                   "are not thread-safe (use one estimator per thread)")
            self._fitting = me
        try:
            with blas_limited() if owner is None else contextlib.nullcontext():
                return method(self, *args, **kwargs)
        finally:
            if owner is None:
                self.__dict__.pop("_fitting", None)
    return wrapper


def class_key(cls):
    """``module:qualname`` of a class (the name files and registries use)."""
    return f"{cls.__module__}:{cls.__qualname__}"


class BaseEstimator:
    """Parameters, repr, fitted checks, progress reports and save/load for all
    estimators (the protocol is described in the module docstring).

    Subclasses list private state needed to resume training (e.g. sampler
    assignments, random generator state) in ``_persist`` so that ``save`` keeps it.
    """

    _persist = ()
    # The constructor parameter that counts iterations ("max_iter" for batch
    # sweeps, "n_epochs" for online passes), None when there is none: the
    # command line's --iterations sets it and sizes its progress bar from it.
    _iterations = None

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _ESTIMATOR_CLASSES[class_key(cls)] = cls

    @classmethod
    def _param_names(cls):
        sig = inspect.signature(cls.__init__)
        return sorted(p.name for p in sig.parameters.values()
                      if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD))

    def _store_params(self, values):
        """The body of every ``__init__``: ``self._store_params(locals())`` stores
        each constructor parameter unchanged under its own name (scikit-learn's
        rule), and nothing else."""
        for name in self._param_names():
            setattr(self, name, values[name])

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

    def __sklearn_is_fitted__(self):
        return bool(self._fitted_names())

    def __sklearn_tags__(self):
        """scikit-learn's estimator tags (scikit-learn >= 1.6 asks every
        estimator in a ``Pipeline`` or search for them; imported here, so
        scikit-learn stays optional): unsupervised; sparse or dense matrices
        of non-negative integers (``categorical``, scikit-learn's only tag for
        integer input: its checks then generate counts); a transformer when
        ``transform`` exists; deterministic (the same ``random_state`` gives
        the same fit and the same scores)."""
        from sklearn.utils import InputTags, Tags, TargetTags, TransformerTags
        return Tags(estimator_type=None, target_tags=TargetTags(required=False),
                    transformer_tags=TransformerTags() if hasattr(self, "transform") else None,
                    input_tags=InputTags(sparse=True, positive_only=True, categorical=True))

    def get_feature_names_out(self, input_features=None):
        """Names of the ``transform`` columns, scikit-learn style: the lower-cased
        class name and the component index (``collapsedvb0``, ``collapsedvb1``, ...).
        ``input_features`` is checked for length only."""
        self._check_fitted()
        if input_features is not None and len(input_features) != self.n_features_in_:
            raise ValueError(f"input_features has {len(input_features)} names, but {type(self).__name__} was "
                             f"fitted on {self.n_features_in_} features")
        prefix = type(self).__name__.lower()
        return np.array([f"{prefix}{k}" for k in range(int(self.n_components_))], dtype=object)

    def fit_transform(self, X, y=None, **kwargs):
        return self.fit(X, **kwargs).transform(X)

    # -- what every estimator repeats -------------------------------------------
    def _check_input(self, X):
        """``X`` as a Corpus of the fitted vocabulary: ``NotFittedError`` before a
        fit, and ``ValueError`` naming both widths when a matrix or corpus has
        more or fewer words (columns) than ``n_features_in_``."""
        self._check_fitted()
        n_words = int(self.n_features_in_)
        shape = getattr(X, "shape", ())         # matrices; token lists have no width
        width = X.n_words if isinstance(X, Corpus) else shape[1] if len(shape) == 2 else None
        if width is not None and width != n_words:
            raise ValueError(f"X has {width} features, but {type(self).__name__} is expecting {n_words} features "
                             f"as input (words of its vocabulary)")
        return as_corpus(X, n_words=n_words)

    def _scoring_rng(self):
        """A generator for randomised inference in ``transform`` and ``score``
        (Gibbs fold-in, importance sampling, token splits): seeded from
        ``random_state`` and independent of the training stream, so scoring never
        changes a fit and repeated calls, on this model or a saved and reloaded
        copy, agree. A Generator ``random_state`` contributes its seed sequence
        (not its current position); None draws fresh entropy once per model."""
        seed = self.random_state
        if isinstance(seed, np.random.Generator):     # a copy: spawning from it must not touch the original
            ss = seed.bit_generator.seed_seq
            seed = np.random.SeedSequence(ss.entropy, spawn_key=ss.spawn_key, pool_size=ss.pool_size)
        elif seed is None:
            seed = self.__dict__.setdefault("_scoring_entropy", np.random.SeedSequence().entropy)
        return np.random.default_rng(seed)

    def _document_keys(self, X):
        """``(key, doc_keys)`` for the C core's keyed streams in ``transform``:
        document j draws from stream ``(key, doc_keys[j], 0)``, ``key`` from the
        scoring stream and ``doc_keys`` (uint64) a hash of each document's words
        and counts, so the draws of a document depend neither on the other
        documents of ``X`` nor on the number of threads."""
        key = int(self._scoring_rng().integers(2 ** 63))
        doc_keys = np.empty(X.n_docs, dtype=np.uint64)
        for j, (lo, hi) in enumerate(zip(X.indptr[:-1], X.indptr[1:])):
            digest = hashlib.blake2b(X.indices[lo:hi].tobytes() + X.counts[lo:hi].tobytes(), digest_size=8)
            doc_keys[j] = int.from_bytes(digest.digest(), "little")
        return key, doc_keys

    def _renamed(self, old, new):
        """The value of parameter ``new``, or of its deprecated alias ``old``
        (with a ``FutureWarning``) when the caller set ``old``."""
        value = getattr(self, old)
        if isinstance(value, str) and value == DEPRECATED:
            return getattr(self, new)
        warnings.warn(f"{type(self).__name__}: parameter {old!r} is renamed {new!r}; {old!r} will be removed "
                      f"in bnpcore 0.3", FutureWarning, stacklevel=3)
        return value

    # -- progress ------------------------------------------------------------
    def _report(self, iteration, **metrics):
        """Record one iteration in ``history_`` and tell the callback; returns
        True when the callback asks the estimator to stop early."""
        record = {"iteration": int(iteration)}
        record.update((k, v.item() if isinstance(v, np.generic) else v) for k, v in metrics.items())
        self.__dict__.setdefault("history_", []).append(record)
        bar = self.__dict__.get("_progress")     # fit(progress=True)
        if bar is not None:
            bar(self, record)
        callback = self.__dict__.get("_callback")
        return bool(callback(self, record)) if callback is not None else False

    @contextlib.contextmanager
    def reporting(self, callback):
        """Call ``callback(estimator, record)`` after every iteration of the
        ``fit``/``partial_fit`` calls inside the ``with`` block; ``record`` is the
        dict appended to ``history_``. A callback that returns True stops the fit
        early.

        Examples
        --------
        >>> with est.reporting(lambda est, rec: print(rec)):   # doctest: +SKIP
        ...     est.fit(corpus)
        """
        previous = self.__dict__.get("_callback")
        self._callback = callback
        try:
            yield self
        finally:
            if previous is None:
                self.__dict__.pop("_callback", None)
            else:
                self._callback = previous

    def __getstate__(self):
        state = self.__dict__.copy()
        state.pop("_callback", None)   # callbacks (progress bars) are not part of a model
        state.pop("_progress", None)
        state.pop("_fitting", None)
        return state

    # -- persistence ---------------------------------------------------------
    def save(self, path):
        """Save parameters and fitted state to ``path`` (an ``.npz`` file, written
        exactly at ``path``; read it back with :func:`bnpcore.load`).

        The file is written to a temporary name in the same directory and renamed
        into place, so a failed or interrupted save never damages an existing file.
        Raises ``TypeError`` naming the attribute when a value cannot be saved.
        """
        arrays, attrs = {}, {}
        for name in self._fitted_names() + list(self._persist) + ["_scoring_entropy"]:
            if not hasattr(self, name):
                continue
            value = getattr(self, name)
            if isinstance(value, np.ndarray) and value.dtype != object:
                arrays["a:" + name] = value
            else:
                attrs[name] = _encode(value, name, arrays)
        meta = {
            "format_version": FORMAT_VERSION,
            "bnpcore_version": _bnpcore_version(),
            "class": class_key(type(self)),
            "params": {k: _encode(v, k, arrays) for k, v in self.get_params().items()},
            "attrs": attrs,
        }
        text = json.dumps(meta)
        path = os.fspath(path)
        directory = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=".bnpcore-", suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as fh:
                np.savez_compressed(fh, __meta__=np.array(text), **arrays)
            os.chmod(tmp, 0o666 & ~_umask())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        return path


def load(path):
    """Load an estimator saved with ``save``.

    Raises ``FileNotFoundError`` for a missing file and ``ValueError`` for a
    file that is not a bnpcore model (corrupted, foreign, or written by a newer
    format version), naming the path and the reason.
    """
    path = os.fspath(path)
    try:
        with np.load(path, allow_pickle=False) as data:
            if "__meta__" not in data.files:
                raise ValueError("no bnpcore metadata")
            meta = json.loads(str(data["__meta__"]))
            arrays = {key[2:]: data[key] for key in data.files if key.startswith("a:")}
            nested = {key: data[key] for key in data.files if key.startswith("n:")}
    except (FileNotFoundError, IsADirectoryError, PermissionError):
        raise
    except AttributeError:   # np.load of a plain .npy gives an ndarray, which has no .files
        raise _not_a_model(path, "a plain NumPy array") from None
    except Exception as exc:  # zip, zlib, json and format errors of every kind
        reason = "it holds Python objects" if "allow_pickle" in str(exc) else str(exc)
        raise _not_a_model(path, reason) from None
    version = meta.get("format_version") if isinstance(meta, dict) else None
    if not isinstance(version, int) or not {"class", "params", "attrs"} <= meta.keys() \
            or not isinstance(meta["params"], dict) or not isinstance(meta["attrs"], dict):
        raise _not_a_model(path, "bad metadata")
    if version not in READABLE_FORMATS:
        newer = "a newer" if version > FORMAT_VERSION else "an older"
        raise ValueError(f"{path} has model format {version} (written by {newer} bnpcore); "
                         f"this bnpcore {_bnpcore_version()} reads format {FORMAT_VERSION}")
    cls = _estimator_class(meta["class"], path)
    try:
        est = cls(**{k: _decode(v, nested) for k, v in meta["params"].items()})
    except TypeError as exc:
        raise ValueError(f"{path}: the saved parameters do not fit {meta['class']} ({exc})") from None
    for name in list(meta["attrs"]) + list(arrays):
        if not _is_saved_name(cls, name):
            raise _not_a_model(path, f"unknown attribute {name!r} for {cls.__name__}")
    for name, value in meta["attrs"].items():
        setattr(est, name, _decode(value, nested))
    for name, value in arrays.items():
        setattr(est, name, value)
    if hasattr(est, "_after_load"):
        est._after_load()
    return est


def _not_a_model(path, reason):
    return ValueError(f"not a bnpcore model file: {path} ({reason})")


def _estimator_class(key, path):
    """The registered BaseEstimator subclass saved as ``module:qualname``. The
    estimator families are imported (a fixed list) to register their classes;
    a module named in a file is never imported."""
    if key not in _ESTIMATOR_CLASSES:
        for module in _FAMILIES:
            importlib.import_module(module)
    if not isinstance(key, str) or key not in _ESTIMATOR_CLASSES:
        raise ValueError(f"{path} holds a {key} model, which is not a bnpcore estimator available here")
    return _ESTIMATOR_CLASSES[key]


def _is_saved_name(cls, name):
    """Names ``save`` writes: public fitted attributes (``name_``) that are not
    class attributes, and the class's private resume state."""
    if name in cls._persist or name == "_scoring_entropy":
        return True
    return (isinstance(name, str) and name.isidentifier() and name.endswith("_") and not name.startswith("_")
            and not hasattr(cls, name))


def _encode(value, name, arrays):
    """A JSON-able form of ``value``; NumPy arrays inside it go to ``arrays`` (the
    .npz members, referenced by key) and Generators are tagged."""
    if value is None or isinstance(value, (bool, str)):
        return value
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise TypeError(f"{name}: object arrays cannot be saved")
        key = f"n:{len(arrays)}"
        arrays[key] = value
        return {"__array__": key}
    if isinstance(value, np.random.Generator):
        return {"__generator__": type(value.bit_generator).__name__, "state": value.bit_generator.state}
    if isinstance(value, list):
        return [_encode(v, f"{name}[{i}]", arrays) for i, v in enumerate(value)]
    if isinstance(value, tuple):   # e.g. (shape, rate) priors: must come back as tuples
        return {"__tuple__": [_encode(v, f"{name}[{i}]", arrays) for i, v in enumerate(value)]}
    if isinstance(value, dict):
        if not all(isinstance(k, str) for k in value):
            raise TypeError(f"{name}: only dicts with string keys can be saved")
        return {k: _encode(v, f"{name}[{k!r}]", arrays) for k, v in value.items()}
    raise TypeError(f"{name} of type {type(value).__name__} cannot be saved")


def _decode(value, arrays):
    if isinstance(value, list):
        return [_decode(v, arrays) for v in value]
    if isinstance(value, dict):
        if "__tuple__" in value:
            return tuple(_decode(v, arrays) for v in value["__tuple__"])
        if "__array__" in value:
            if value["__array__"] not in arrays:
                raise ValueError(f"missing array {value['__array__']!r}")
            return arrays[value["__array__"]]
        if "__ndarray__" in value:
            return np.array(value["__ndarray__"], dtype=np.dtype(value["dtype"])).reshape(value["shape"])
        if "__generator__" in value:
            bitgen = getattr(np.random, value["__generator__"], None)
            if not (isinstance(bitgen, type) and issubclass(bitgen, np.random.BitGenerator)):
                raise ValueError(f"unknown bit generator {value['__generator__']!r}")
            gen = np.random.Generator(bitgen())
            gen.bit_generator.state = value["state"]
            return gen
        return {k: _decode(v, arrays) for k, v in value.items()}
    return value


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _bnpcore_version():
    from bnpcore import __version__
    return __version__


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

    def score(self, X, y=None):
        """Document completion, the held-out score of every topic model: 20% of
        the tokens of each document of ``X`` (a fixed random subset, drawn from
        the scoring stream of ``random_state``) are scored, per word, given the
        topic proportions ``transform`` infers from the other 80%
        (:meth:`heldout_log_likelihood`). Higher is better; ``X`` should be
        documents the model was not trained on."""
        X = self._check_input(X)
        if X.n_tokens == 0:
            raise ValueError("the documents to score have no tokens")
        observed, heldout = X.split_tokens(0.2, random_state=self._scoring_rng().spawn(1)[0])
        return self.heldout_log_likelihood(observed, heldout)

    def heldout_log_likelihood(self, observed, heldout):
        """Per-word log-likelihood of the held-out tokens of documents whose other
        tokens are ``observed`` (a token split, ``Corpus.split_tokens``).

        The document proportions are inferred on ``observed`` by ``transform``
        with the topics fixed, and scored with
        :func:`bnpcore.evaluation.token_log_likelihood` ([HYB] eq 30, [CVHDP]
        eq 16). Samplers may override this with the sample average of eq 31.
        """
        from bnpcore.evaluation import token_log_likelihood
        return token_log_likelihood(self.transform(observed), self.get_topics(), heldout,
                                    getattr(self, "n_threads", None))
