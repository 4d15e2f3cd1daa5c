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
  a ``ValueError``; raw texts and token lists are counted in the model's
  vocabulary, texts by its ``text_pipeline_``).
* ``score(X, y=None) -> float``: higher is better. For topic models it is
  document completion on the documents ``X`` (:meth:`TopicMixin.score`);
  mixtures document theirs (the per-word predictive of whole documents).
* Fitted attributes end in ``_``: ``history_`` (list of per-iteration dicts,
  see ``_report``), ``n_components_``, ``n_features_in_`` (vocabulary size W);
  topic models ``topics_`` (K x W, rows sum to 1; the nonparametric ones list
  their components largest first, :mod:`bnpcore.results`) and
  ``vocabulary_`` (the fitted corpus's vocabulary, or None); DP models
  ``weights_``; ``text_pipeline_`` after a fit on a corpus counted from text
  (``bnpcore.text.TextPipeline.settings()``, kept by the :func:`exclusive`
  decorator that every ``fit``/``partial_fit`` wears). Methods called before
  ``fit`` raise :class:`NotFittedError`.
* ``random_state``: None, an int or a ``numpy.random.Generator``; the same int
  (or a Generator in the same state) gives the same fit. ``n_threads`` (where
  present) follows ``bnpcore._validation.effective_n_threads``. The iteration
  parameter is ``max_iter`` (batch) or ``n_epochs`` (online), named by the class
  attribute ``_iterations``; ``transform`` calls its iteration setting
  ``max_iter`` too (``burn_in`` where it samples).
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
import errno
import functools
import hashlib
import importlib
import inspect
import json
import os
import stat
import tempfile
import threading
import zipfile
import zlib

import numpy as np

from bnpcore._validation import blas_limited
from bnpcore.corpus import Corpus, as_corpus
from bnpcore.corpus_io import remove_stale_leftovers

__all__ = ["BaseEstimator", "TopicMixin", "NotFittedError", "load", "class_key", "exclusive", "FORMAT_VERSION"]

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
    own the cores). Afterwards the estimator keeps the text pipeline of a
    corpus counted from text (:func:`_keep_text_pipeline`)."""
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
                result = method(self, *args, **kwargs)
            if owner is None:
                _keep_text_pipeline(self, args[0] if args else kwargs.get("X"),
                                    refit=method.__name__ in ("fit", "_fit") and not kwargs.get("resume"))
            return result
        finally:
            if owner is None:
                self.__dict__.pop("_fitting", None)
    return wrapper


def _keep_text_pipeline(est, X, refit):
    """After ``fit``/``partial_fit`` on ``X``: the fitted attribute
    ``text_pipeline_`` (``bnpcore.text.TextPipeline.settings()``, the vocabulary
    being ``vocabulary_``) of a corpus counted from text, so that the model takes
    raw text afterwards. A new fit on other data forgets it; ``partial_fit`` and
    a resumed fit keep it while the vocabulary stays the same."""
    vocabulary = est.__dict__.get("vocabulary_")
    pipeline = getattr(X, "text_pipeline", None)
    if pipeline is not None and vocabulary is not None and list(pipeline.vocabulary) == list(vocabulary):
        est.text_pipeline_ = pipeline.settings()
    elif refit or vocabulary is None:
        est.__dict__.pop("text_pipeline_", None)


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
        more or fewer words (columns) than ``n_features_in_``.

        Raw text (a list of str, one per document) is counted by the model's
        text pipeline (``text_pipeline_``, kept from a fit on
        ``Corpus.from_texts``); token lists (lists of str) by its vocabulary
        (``vocabulary_``). Words outside the vocabulary are dropped in both."""
        self._check_fitted()
        n_words = int(self.n_features_in_)
        kind = _word_input(X)
        if kind is not None:
            return self._count_words(X, kind)
        shape = getattr(X, "shape", ())         # matrices; token lists have no width
        width = X.n_words if isinstance(X, Corpus) else shape[1] if len(shape) == 2 else None
        if width is not None and width != n_words:
            raise ValueError(f"X has {width} features, but {type(self).__name__} is expecting {n_words} features "
                             f"as input (words of its vocabulary)")
        return as_corpus(X, n_words=n_words)

    def _count_words(self, X, kind):
        """Raw texts (``kind`` "texts") or token lists ("tokens") as a Corpus of
        the fitted vocabulary (see ``_check_input``)."""
        from bnpcore.text import TextPipeline
        if isinstance(X, str):
            raise TypeError("X is a single str; give a list of texts, one str per document")
        vocabulary = self.__dict__.get("vocabulary_")
        name = type(self).__name__
        if vocabulary is None:
            raise ValueError(f"X holds {'texts' if kind == 'texts' else 'word strings'}, but this {name} has no "
                             "vocabulary (it was fitted on counts without words): give counts or word ids")
        if kind == "tokens":
            return Corpus.from_token_lists(X, vocabulary=vocabulary)
        settings = self.__dict__.get("text_pipeline_")
        if settings is None:
            raise ValueError(f"X holds raw texts, but this {name} was not fitted on a corpus counted from text "
                             "(Corpus.from_texts), so it does not know how to tokenize them: give token lists "
                             "(lists of str, counted in vocabulary_), or Corpus.from_texts(texts, "
                             "vocabulary=model.vocabulary_) with the tokenizer settings of the training corpus")
        try:
            pipeline = TextPipeline(vocabulary, **settings)
        except (TypeError, ValueError) as exc:    # e.g. a model file written by hand
            raise ValueError(f"this {name}'s text_pipeline_ is not a text pipeline ({exc})") from None
        return pipeline.transform(X)

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
    def save(self, path, *, doc_topic=False):
        """Save parameters and fitted state to ``path`` (an ``.npz`` file, written
        exactly at ``path``; read it back with :func:`bnpcore.load`).

        The file is written to a temporary name in the same directory and renamed
        into place, so a failed or interrupted save never damages an existing file;
        the temporary files of saves that were killed (SIGKILL) are removed by
        the next save into that directory.
        Raises ``TypeError`` naming the attribute when a value cannot be saved.

        Parameters
        ----------
        path : str or path-like
        doc_topic : bool, default False
            Also save ``doc_topic_``, the proportions of the training documents
            (documents x components, often most of the file). Without it the
            loaded model has no ``doc_topic_``; ``transform`` gives the
            proportions of any documents, the training ones included.
        """
        if not isinstance(doc_topic, (bool, np.bool_)):
            raise TypeError(f"doc_topic must be True or False, got {doc_topic!r}")
        arrays, attrs = {}, {}
        for name in self._fitted_names() + list(self._persist) + ["_scoring_entropy"]:
            if not hasattr(self, name) or (name == "doc_topic_" and not doc_topic):
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
        remove_stale_leftovers(directory, ".tmp", "bnpcore")      # of saves killed before they could clean up
        fd, tmp = tempfile.mkstemp(dir=directory, prefix=f".bnpcore.{os.getpid()}.", suffix=".tmp")
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

    Raises ``FileNotFoundError`` for a missing file, ``IsADirectoryError`` for
    a folder, and ``ValueError`` for anything that is not a bnpcore model,
    naming the path and the reason: not a regular file (a FIFO or a device is
    refused without reading it), corrupted, foreign, written by a newer format
    version, a class or attribute name that is not bnpcore's, arrays larger
    than the memory available (declared in the zip directory: checked after
    the names and before any array is read, so a zip bomb is never
    decompressed), Python objects, or fitted arrays that disagree. Nothing
    named in a file is imported or called except bnpcore's estimator classes
    and numpy's bit generators. A checkpoint's resume state is checked when
    ``fit(X, resume=True)`` uses it.
    """
    path = os.fspath(path)
    with _open_regular(path) as fh:
        try:
            archive = zipfile.ZipFile(fh)
        except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
            raise _not_a_model(path, f"not an .npz archive: {exc}") from None
        with archive:
            return _load_archive(archive, path)


def _load_archive(archive, path):
    """``load`` of an opened zip archive: the metadata first, then the class and
    the attribute names, then the sizes the zip directory declares against the
    memory available, and only then the arrays."""
    try:
        members = {info.filename: info for info in archive.infolist()}
        if "__meta__.npy" not in members:
            raise ValueError("no bnpcore metadata")
        available = _memory_available()
        limit = _META_BYTES if available is None else min(_META_BYTES, available // 8)
        if members["__meta__.npy"].file_size > limit:       # parsed, JSON takes several times its size
            raise ValueError(f"metadata of {members['__meta__.npy'].file_size} bytes declared, more than the "
                             f"{limit} read (a damaged file or a zip bomb)")
        meta = json.loads(str(_read_member(archive, members["__meta__.npy"])))
    except (ValueError, TypeError, OSError, EOFError, RecursionError, zipfile.BadZipFile, zlib.error) as exc:
        raise _not_a_model(path, str(exc) or type(exc).__name__) from None
    names = {name[:-4]: info for name, info in members.items() if name.endswith(".npy")}
    if len(names) != len(members):
        raise _not_a_model(path, "members other than .npy arrays")
    version = meta.get("format_version") if isinstance(meta, dict) else None
    if not isinstance(version, int) or not {"class", "params", "attrs"} <= meta.keys() \
            or not isinstance(meta["params"], dict) or not isinstance(meta["attrs"], dict):
        raise _not_a_model(path, "bad metadata")
    if version not in READABLE_FORMATS:
        newer = "a newer" if version > FORMAT_VERSION else "an older"
        raise ValueError(f"{path} has model format {version} (written by {newer} bnpcore); "
                         f"this bnpcore {_bnpcore_version()} reads format {FORMAT_VERSION}")
    cls = _estimator_class(meta["class"], path)
    for name in list(meta["attrs"]) + [key[2:] for key in names if key.startswith("a:")]:
        if not _is_saved_name(cls, name):
            raise _not_a_model(path, f"unknown attribute {name!r} for {cls.__name__}")
    unknown = [key for key in names if key != "__meta__" and not key.startswith(("a:", "n:"))]
    if unknown:
        raise _not_a_model(path, f"unknown member {unknown[0]!r}")
    declared = sum(info.file_size for info in archive.infolist())
    if available is not None and declared > available:
        raise ValueError(f"{path} declares {declared} bytes of arrays, more than the {available} bytes of memory "
                         "available (a damaged file or a zip bomb)")
    try:
        data = {key: _read_member(archive, names[key]) for key in names if key != "__meta__"}
    except (ValueError, TypeError, OSError, EOFError, zipfile.BadZipFile, zlib.error) as exc:
        raise _not_a_model(path, str(exc) or type(exc).__name__) from None
    arrays = {key[2:]: value for key, value in data.items() if key.startswith("a:")}
    nested = {key: value for key, value in data.items() if key.startswith("n:")}
    try:
        params = {k: _decode(v, nested) for k, v in meta["params"].items()}
        attrs = {name: _decode(value, nested) for name, value in meta["attrs"].items()}
    except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as exc:
        raise _not_a_model(path, f"a bad value: {exc}") from None
    try:
        est = cls(**params)
    except TypeError as exc:
        raise ValueError(f"{path}: the saved parameters do not fit {meta['class']} ({exc})") from None
    for name, value in attrs.items():
        setattr(est, name, value)
    for name, value in arrays.items():
        setattr(est, name, value)
    _check_fitted_arrays(est, path)
    if isinstance(est.__dict__.get("_resume"), dict):    # a checkpoint: errors on resuming name the file
        est._resume["file"] = path
    if hasattr(est, "_after_load"):
        try:
            est._after_load()
        except (ValueError, TypeError, KeyError, AttributeError, IndexError, NotImplementedError,
                RecursionError) as exc:
            raise _not_a_model(path, f"inconsistent fitted state: {type(exc).__name__}: {exc}") from None
    return est


# bytes of JSON metadata a model file may declare (at most an eighth of the memory available:
# parsing makes Python objects several times the text's size; format 1 also held nested arrays
# as JSON lists in it)
_META_BYTES = 1 << 28
# the bit generators a file may name for a saved numpy Generator
_BIT_GENERATORS = ("PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64")


def _check_fitted_arrays(est, path):
    """The fitted attributes that ``transform`` hands to kernels, checked as
    ``save`` writes them: the vocabulary size an integer >= 1, the topics and
    components finite, non-negative K x W arrays of that width, their K the
    same as the weights', the weights finite and non-negative, the fitted
    priors positive and finite."""
    d = est.__dict__
    width = d.get("n_features_in_")
    if width is not None and (not isinstance(width, int) or isinstance(width, bool) or width < 1):
        raise _not_a_model(path, f"n_features_in_ must be an integer >= 1, got {width!r}")
    rows = {}
    for name in ("topics_", "components_"):
        value = d.get(name)
        if value is None:
            continue
        if not isinstance(value, np.ndarray) or value.dtype.kind != "f" or value.ndim != 2 \
                or (width is not None and value.shape[1] != width):
            raise _not_a_model(path, f"{name} must be a 2-d float array of {width} columns, got "
                                     f"{getattr(value, 'shape', type(value).__name__)}")
        if value.size and not (np.isfinite(value).all() and value.min() >= 0):
            raise _not_a_model(path, f"{name} holds negative, NaN or infinite values")
        rows[name] = value.shape[0]
    weights = d.get("weights_")
    if isinstance(weights, np.ndarray) and weights.ndim == 1:
        rows["weights_"] = len(weights)
        if weights.size and not (np.isfinite(weights).all() and weights.min() >= 0):
            raise _not_a_model(path, "weights_ holds negative, NaN or infinite values")
    for name in ("alpha_", "eta_", "gamma_"):      # fitted priors: positive and finite
        value = d.get(name)
        if isinstance(value, (np.ndarray, float)) and np.size(value) \
                and not (np.isfinite(value).all() and np.min(value) > 0):
            raise _not_a_model(path, f"{name} holds values that are not positive and finite")
    if len(set(rows.values())) > 1:
        raise _not_a_model(path, f"the fitted arrays disagree on the number of components: {rows}")


def restore_generator(name, state):
    """A ``numpy.random.Generator`` over the bit generator ``name`` (only numpy's
    bit generators: no other attribute of ``np.random`` named in a file is ever
    called) in the saved ``state``; ValueError for anything else."""
    if not isinstance(name, str) or name not in _BIT_GENERATORS:
        raise ValueError(f"unknown bit generator {name!r}")
    gen = np.random.Generator(getattr(np.random, name)())
    try:
        gen.bit_generator.state = state
    except (TypeError, ValueError, KeyError) as exc:
        raise ValueError(f"a bad state of the bit generator {name}: {exc}") from None
    return gen


def _open_regular(path):
    """``path`` opened for reading if it is a regular file: a FIFO, a device or a
    socket is a ValueError (opened without blocking, then checked), a folder an
    IsADirectoryError, a missing file a FileNotFoundError."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, "is a folder, not a model file", path)
        if not stat.S_ISREG(mode):
            raise _not_a_model(path, "not a regular file")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _memory_available():
    """Bytes of memory this process may still fill (MemAvailable, and the
    address-space limit if one is set), or None where unknown."""
    limits = []
    try:
        with open("/proc/meminfo") as f:
            limits += [int(line.split()[1]) * 1024 for line in f if line.startswith("MemAvailable:")]
    except (OSError, ValueError, IndexError):
        pass
    try:
        import resource
        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft != resource.RLIM_INFINITY:
            limits.append(soft)
    except (ImportError, OSError, ValueError):
        pass
    return min(limits) if limits else None


def _read_member(archive, info):
    """The array of one ``.npy`` member, its header checked against the size the
    zip directory declares before anything else is read (no object dtypes)."""
    with archive.open(info) as f:
        version = np.lib.format.read_magic(f)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
        elif version in ((2, 0), (3, 0)):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
        else:
            raise ValueError(f"{info.filename}: .npy version {version}")
        if dtype.hasobject:
            raise ValueError("it holds Python objects")
        count = int(np.prod(shape, dtype=object))
        nbytes = count * dtype.itemsize
        if f.tell() + nbytes != info.file_size:
            raise ValueError(f"{info.filename}: its header declares {nbytes} bytes of data, its zip entry "
                             f"{info.file_size - f.tell()}")
        array = np.empty(count, dtype=dtype)
        buffer, done = array.view(np.uint8), 0
        while done < nbytes:            # in blocks: no second copy of the array in memory
            block = f.read(min(nbytes - done, 1 << 24))
            if not block:
                raise ValueError(f"{info.filename} is truncated")
            buffer[done:done + len(block)] = np.frombuffer(block, dtype=np.uint8)
            done += len(block)
    return array.reshape(shape[::-1]).T if fortran else array.reshape(shape)


def _word_input(X):
    """"texts" for a list (tuple, 1-d array or Series) of str, "tokens" for a
    list of documents given as lists of str, None for anything else (counts,
    word ids: ``as_corpus`` reads those)."""
    if isinstance(X, str):
        return "texts"     # one text: TextPipeline.transform refuses it with its message
    if isinstance(X, (list, tuple)):
        items = X
    elif isinstance(X, np.ndarray) and X.ndim == 1 and X.dtype.kind in "OU" or \
            type(X).__name__ == "Series" and getattr(X, "ndim", 0) == 1:
        items = list(X)
    else:
        return None
    for doc in items:
        if isinstance(doc, str):
            return "texts"
        if isinstance(doc, np.ndarray) or not isinstance(doc, (list, tuple)):
            return None
        if doc:
            return "tokens" if isinstance(doc[0], str) else None
    return None


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
    if callable(value) and hasattr(value, "__qualname__"):   # e.g. a custom tokenizer of text_pipeline_
        raise TypeError(f"{name} is the function {value.__module__}.{value.__qualname__}, which cannot be saved: "
                        "a model file holds data, never code")
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
        if "__ndarray__" in value:       # format 1
            dtype = np.dtype(value["dtype"])
            if dtype.hasobject:
                raise ValueError("an array of Python objects")
            return np.array(value["__ndarray__"], dtype=dtype).reshape(value["shape"])
        if "__generator__" in value:
            return restore_generator(value["__generator__"], value["state"])
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
    to 1) and ``vocabulary_`` (list of words or None). Topic k is row k of
    ``topics_`` and column k of ``transform``; the nonparametric estimators
    list their components largest first (:mod:`bnpcore.results`), the LDA
    family keeps its K topics in their fitted order."""

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
