"""The batch loop: repeat full sweeps of a collapsed, sampling or batch
variational algorithm over a fixed corpus, record diagnostics and held-out
scores, stop, checkpoint and resume.

Every batch estimator (LDA by CGS, SVB, CVB, CVB0 and the hybrids; CV-HDP;
G-HDP; EP and Gibbs for NGGP mixtures) subclasses :class:`BatchEstimator` and
supplies a :class:`BatchState`, the algorithm's counts or variational
parameters with one ``sweep()``; the loop is written once, here
(:func:`run_iterations`, which ``bnpcore.distributed``, ``mixture.ADF`` and
the Bayes-net estimators run too):

1. ``state.sweep()`` (timed: ``fit_seconds`` is time in the algorithm only);
2. past ``burn_in`` (samplers), ``state.collect()`` adds the sample to the
   estimator's averages;
3. every ``eval_every`` iterations with ``heldout``: the estimator's
   ``_evaluate`` (by default the held-out token likelihood of the training
   documents, [HYB] eq 30, or for samplers past burn-in the average over the
   evaluated samples, eq 31);
4. one ``history_`` record through ``BaseEstimator._report`` (callbacks,
   progress bar, early stopping);
5. stop at ``max_iter``, when the state's ``delta`` falls below ``tol``, when a
   callback asks, or after ``max_seconds``; write a checkpoint every
   ``checkpoint_every`` iterations and when stopping early.

A checkpoint is an ordinary model file (``save``/``bnpcore.load``) that also
holds the state; ``fit(X, resume=True)`` on the same corpus continues the
interrupted run exactly as if it had not stopped (same random numbers).

The state protocol (docs/architecture.md). An iteration is either

* one **sequential sweep** (``BatchState.sequential_sweep = True``): the
  algorithm visits the documents in order and each update reads the ones
  before it (collapsed Gibbs, G-HDP, CV-HDP, CVB's sequential schedule, EP),
  so the state implements ``sweep()`` and nothing more; or
* a **local step** on blocks of documents and a **global step**: ``local_step``
  maps a partition (its documents and its rows of the per-document
  parameters) to a :class:`~bnpcore.inference.stats.SuffStats`, the blocks'
  statistics are summed, and ``global_step(stats, rho)`` sets the global
  parameters. The batch loop runs it over all documents as one block
  (``BatchState.sweep``); the online loop (``bnpcore.inference.online``) runs
  the local step on a minibatch and the global step with rho_t; and
  ``bnpcore.distributed.fit`` runs the local steps on the partitions that Dask
  workers hold and the global step on the client. A state whose iteration has
  several rounds, or reduces its blocks otherwise than by a sum (a merge of
  copies, a maximum), writes its iteration once as ``iterate(parts,
  sampling)`` with ``parts.map`` (:class:`Partitions` here, the Dask driver's
  partitions there).
"""
import functools
import math
import numbers
import operator
import time

import numpy as np

from bnpcore._validation import check_int, check_positive, check_random_state
from bnpcore.base import BaseEstimator, class_key, exclusive
from bnpcore.corpus import as_corpus
from bnpcore.evaluation import PredictiveAverage, token_log_likelihood
from bnpcore.inference.callbacks import progress_bar

__all__ = ["BatchState", "BatchEstimator", "Partitions", "block_bounds", "run_iterations", "timed_sweep", "total",
           "Array", "Number", "OneOf", "Items", "RandomGenerator", "same_counts"]

# "module:qualname" -> BatchState subclass: checkpoints name their state class,
# and only classes from here are rebuilt.
_STATE_CLASSES = {}


class Array:
    """What a restored state's array must be: one of ``dtypes``, ``shape`` (None:
    any length on that axis), every entry finite (floats) and within
    ``[low, high]`` (None: unbounded); ``optional``: None is also accepted;
    ``finite=False``: work space whose values are never read (only its size)."""

    def __init__(self, dtypes, shape, low=None, high=None, optional=False, finite=True):
        single = isinstance(dtypes, (str, type, np.dtype))
        self.dtypes = tuple(np.dtype(d) for d in ((dtypes,) if single else dtypes))
        self.shape, self.low, self.high, self.optional = tuple(shape), low, high, optional
        self.finite = finite

    def check(self, name, value):
        if value is None and self.optional:
            return
        if not isinstance(value, np.ndarray) or value.dtype not in self.dtypes:
            got = f"dtype {value.dtype}" if isinstance(value, np.ndarray) else type(value).__name__
            raise ValueError(f"{name} must be an array of {' or '.join(map(str, self.dtypes))}, got {got}")
        if value.ndim != len(self.shape) or any(n is not None and n != m for n, m in zip(self.shape, value.shape)):
            expected = "(" + ", ".join("any" if n is None else str(n) for n in self.shape) + ")"
            raise ValueError(f"{name} has shape {value.shape}, expected {expected}")
        if value.size == 0 or not self.finite:
            return
        if value.dtype.kind == "f" and not np.isfinite(value).all():
            raise ValueError(f"{name} holds NaN or infinite values")
        if self.low is not None and value.min() < self.low:
            raise ValueError(f"{name} holds {value.min()}, below its least valid value {self.low}")
        if self.high is not None and value.max() > self.high:
            raise ValueError(f"{name} holds {value.max()}, above its largest valid value {self.high}")


class Number:
    """A restored scalar: an int (``integer``) or a finite real in ``[low, high]``."""

    def __init__(self, low=None, high=None, integer=False, optional=False):
        self.low, self.high, self.integer, self.optional = low, high, integer, optional

    def check(self, name, value):
        if value is None and self.optional:
            return
        kind = numbers.Integral if self.integer else numbers.Real
        if not isinstance(value, kind) or isinstance(value, bool) or (
                not isinstance(value, numbers.Integral) and not math.isfinite(value)):
            raise ValueError(f"{name} must be {'an integer' if self.integer else 'a finite number'}, got {value!r}")
        if (self.low is not None and value < self.low) or (self.high is not None and value > self.high):
            raise ValueError(f"{name} must lie in [{self.low}, {self.high}], got {value!r}")


class OneOf:
    """A restored setting that takes one of a few values (compared with ``==``, same type)."""

    def __init__(self, *values):
        self.values = values

    def check(self, name, value):
        if not any(type(value) is type(v) and value == v for v in self.values):
            raise ValueError(f"{name} must be one of {self.values!r}, got {value!r}")


class Items:
    """A restored tuple or list of ``len(specs)`` values, each checked by its spec."""

    def __init__(self, *specs):
        self.specs = specs

    def check(self, name, value):
        if not isinstance(value, (tuple, list)) or len(value) != len(self.specs):
            raise ValueError(f"{name} must hold {len(self.specs)} values, got {type(value).__name__}")
        for i, (spec, item) in enumerate(zip(self.specs, value)):
            spec.check(f"{name}[{i}]", item)


class RandomGenerator:
    """A restored ``numpy.random.Generator``."""

    def check(self, name, value):
        if not isinstance(value, np.random.Generator):
            raise ValueError(f"{name} must be a numpy Generator, got {type(value).__name__}")


class BatchState:
    """The counts or variational parameters one batch fit sweeps.

    Subclasses implement

    * ``sweep() -> dict``: one iteration over all documents; returns its
      diagnostics (``delta`` for the convergence test, ``bound`` as a dict of
      named terms where the algorithm has one, anything else worth recording);
    * ``n_components``: an attribute or property, the current number of
      components;
    * ``predictive() -> (doc_topic, topic_word)`` (topic models): the point
      predictive of the training documents, for the default held-out
      evaluation;
    * ``collect()`` (samplers, optional): add the current sample to the
      averages behind the final estimates.

    Checkpoints save every instance attribute except those named in
    ``_transient`` (the corpus, caches); :meth:`restore` puts them back.
    What a checkpoint restores reaches the kernels, which index arrays by the
    labels and word ids in it: before the first sweep :meth:`validate` checks
    it against what the subclass declares in ``invariants(corpus)`` (a
    generator of ``(name, spec)`` pairs, or ``(label, spec, value)`` for values
    inside attributes, each spec an :class:`Array`, :class:`Number`,
    :class:`OneOf`, :class:`Items` or :class:`RandomGenerator`, checked in
    order, so that later specs may use the sizes of earlier values) and
    ``check_counts(corpus)`` (the counts that must agree with the labels and
    the corpus; raise ``ValueError`` naming them).
    ``layout`` numbers the saved attributes: a subclass that changes them
    increments it, so that resuming a checkpoint written before is a clear
    error rather than a fit that fails half-way.

    **Local and global steps** (the module docstring). A state whose
    iteration is not a sequential sweep implements

    * ``partition(start, stop) -> dict``: what the documents [start, stop)
      keep between iterations, such as their rows of the document-topic
      counts (default: nothing); the driver adds the documents themselves as
      ``indptr`` (from 0), ``indices`` and ``counts``;
    * ``local_step(part, *shared) -> (part, SuffStats)``, a static method: one
      block's step, a pure function of the partition and the ``broadcast()``
      values (a Dask worker runs it), returning the partition's new rows and
      its additive statistics;
    * ``broadcast() -> tuple``: the global values the local steps read;
    * ``global_step(stats, rho=1.0) -> dict``: the new global parameters from
      the statistics summed over all blocks, moved by the step size ``rho``
      (1 in batch); returns the iteration's diagnostics;
    * ``gather(parts, bounds)``: copy the partitions' rows back into the state
      (before a checkpoint and at the end; default: nothing);
    * optionally ``iterate(parts, sampling) -> dict``: the iteration in terms of
      ``parts.map`` (several rounds, or a reduction other than the sum), and
      ``for_partitions(n_partitions) -> BatchState``: the state to run on that
      many blocks when the algorithm depends on them (default: itself).
    """

    _transient = ("corpus",)
    layout = 1
    #: The iteration is one sequential sweep (``sweep()``), not local and global steps.
    sequential_sweep = False
    #: False for a state no checkpoint holds (the stream of one call): ``from_checkpoint`` refuses it.
    checkpointed = True

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        _STATE_CLASSES[class_key(cls)] = cls

    def sweep(self):
        """One iteration over all documents: the local step on them as one
        block, then the global step (a sequential state overrides it)."""
        if self.sequential_sweep or type(self).local_step is BatchState.local_step:
            raise NotImplementedError(f"{type(self).__name__} implements neither sweep() nor local_step()")
        parts = Partitions(self, np.array([0, self.corpus.n_docs]))
        metrics = self.iterate(parts, False)
        parts.gather()
        return metrics

    # -- local and global steps (the class docstring) --------------------------------
    def partition(self, start, stop):
        """The per-document values of documents [start, stop) a local step reads and updates."""
        return {}

    @staticmethod
    def local_step(part, *shared):
        raise NotImplementedError

    def broadcast(self):
        """The global values every local step of this iteration reads."""
        return ()

    def global_step(self, stats, rho=1.0):
        raise NotImplementedError

    def gather(self, parts, bounds):
        """Copy the partitions' per-document values back into the state."""

    def iterate(self, parts, sampling=False):
        """One iteration over the partitions ``parts``: the local step on each,
        their statistics summed, the global step, and past burn-in
        (``sampling``) ``collect``; its diagnostics."""
        metrics = self.global_step(total(parts.map(type(self).local_step, *self.broadcast())))
        if sampling:
            self.collect()
        return metrics

    def for_partitions(self, n_partitions):
        """The state that runs on ``n_partitions`` blocks (itself, unless the algorithm depends on the blocks)."""
        return self

    def predictive(self):
        raise NotImplementedError(f"{type(self).__name__} has no point predictive")

    def collect(self):
        """Add the current sample to the running averages (samplers)."""

    def state_dict(self):
        """The saved attributes (arrays, numbers, Generators, dicts and lists of them)."""
        return {k: v for k, v in vars(self).items() if k not in self._transient}

    def restore(self, corpus):
        """Reattach the corpus after loading a checkpoint; override to rebuild caches."""
        self.corpus = corpus

    def invariants(self, corpus):
        """``(name, spec)`` pairs that a restored state satisfies (class docstring)."""
        return iter(())

    def check_counts(self, corpus):
        """Raise ``ValueError`` if the restored counts disagree with the labels or the corpus."""

    def validate(self, corpus):
        """Check a state restored from a file against ``invariants`` and
        ``check_counts`` before anything uses it (``ValueError`` naming the value)."""
        where = f"its {type(self).__name__}"
        try:
            for name, spec, *value in self.invariants(corpus):
                if not value and name not in self.__dict__:
                    raise ValueError(f"{where} has no {name!r}")
                spec.check(f"{where}.{name}", value[0] if value else self.__dict__[name])
            self.check_counts(corpus)
        except (AttributeError, KeyError, TypeError, IndexError) as exc:
            # a value of another kind than the invariants expect (a saved state of another class)
            raise ValueError(f"{where} is not a state of this class ({type(exc).__name__}: {exc})") from None

    @staticmethod
    def from_checkpoint(key, saved, corpus, layout=1):
        if key not in _STATE_CLASSES:
            raise ValueError(f"the checkpoint holds an unknown state class {key!r}")
        cls = _STATE_CLASSES[key]
        if not cls.checkpointed:
            raise ValueError(f"the checkpoint names {key!r}, a state that checkpoints do not hold")
        if cls.sweep is BatchState.sweep and cls.local_step is BatchState.local_step and \
                cls.iterate is BatchState.iterate:
            raise ValueError(f"the checkpoint names {key!r}, a base class of states that does not sweep")
        if layout != cls.layout:
            raise ValueError(f"the checkpoint holds a {cls.__name__} of layout {layout}, written by another "
                             f"bnpcore version; this one resumes layout {cls.layout}: continue the fit with "
                             "the version that wrote it, or start a new fit (the checkpoint's fitted model "
                             "loads and predicts as it is)")
        state = object.__new__(cls)
        if not isinstance(saved, dict) or not all(isinstance(k, str) for k in saved):
            raise ValueError("the checkpoint's state is not a dict of named values")
        state.__dict__.update(saved)
        state.validate(corpus)
        state.restore(corpus)
        return state


def same_counts(name, saved, recounted, rtol=0.0):
    """Raise ``ValueError`` unless the restored counts ``saved`` equal those
    recounted from the labels or the corpus (within ``rtol`` of the largest
    count for expected counts, which incremental updates change by rounding)."""
    saved, recounted = np.asarray(saved), np.asarray(recounted)
    if saved.shape != recounted.shape:
        raise ValueError(f"{name} has shape {saved.shape}; the labels and the corpus give {recounted.shape}")
    tol = rtol * max(1.0, float(np.abs(recounted).max(initial=0.0)))
    if saved.size and float(np.abs(saved - recounted).max()) > tol:
        raise ValueError(f"{name} disagrees with the counts of the labels and the corpus")


def block_bounds(n_docs, n_blocks):
    """First document of each of ``n_blocks`` contiguous blocks and the end:
    OpenMP's static schedule (the first ``n_docs % n_blocks`` blocks one
    document longer)."""
    q, extra = divmod(int(n_docs), int(n_blocks))
    sizes = [q + 1] * extra + [q] * (int(n_blocks) - extra)
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def total(stats):
    """The sum, in order, of the blocks' statistics (``SuffStats`` or arrays)."""
    return functools.reduce(operator.add, stats)


class Partitions:
    """Blocks of documents of a state, in this process: ``bounds`` (the first
    document of each block and the end), ``parts`` (each block's
    ``state.partition`` with its documents) and ``map``. The Dask driver's
    partitions offer the same ``bounds`` and ``map``, so an iteration written
    with them (``BatchState.iterate``) runs there unchanged."""

    def __init__(self, state, bounds):
        c, self.state, self.bounds = state.corpus, state, np.asarray(bounds, dtype=np.int64)
        self.parts = []
        for start, stop in zip(self.bounds[:-1], self.bounds[1:]):
            lo, hi = int(c.indptr[start]), int(c.indptr[stop])
            docs = {"indptr": np.asarray(c.indptr[start:stop + 1]) - lo, "indices": c.indices[lo:hi],
                    "counts": c.counts[lo:hi]}
            self.parts.append(dict(state.partition(start, stop), **docs))
        self.seconds = np.zeros(len(self.parts))

    def map(self, step, *shared, documents=True, each=None, updates=True):
        """``step(part, *shared, *each[p])`` on every block p (with ``each``, a
        dict: on its blocks only, in block order); the blocks take the new
        partitions, and the outputs are returned in block order. ``documents``
        False: the step reads no documents (the Dask driver then does not read
        an on-disk partition); ``updates`` False: the step returns its
        partition unchanged (the Dask driver then keeps the partition's task)."""
        out = []
        for p in (range(len(self.parts)) if each is None else sorted(each)):
            tick = time.perf_counter()
            self.parts[p], result = step(self.parts[p], *shared, *(() if each is None else each[p]))
            self.seconds[p] += time.perf_counter() - tick
            out.append(result)
        return out

    def gather(self):
        """Copy the blocks' per-document values into the state."""
        self.state.gather(self.parts, self.bounds)

    def root(self):
        """Nothing to restart in one process (the Dask driver restarts its task lineage here)."""


def timed_sweep(state, sampling):
    """One iteration: ``state.sweep()``, then ``state.collect()`` for a sampler past
    its burn-in; returns (the sweep's diagnostics, seconds spent)."""
    tick = time.perf_counter()
    metrics = state.sweep()
    if sampling:
        state.collect()
    return metrics, time.perf_counter() - tick


def run_iterations(estimator, state, start, max_iter, seconds, *, burn_in=None, tol=None, record, evaluate=None,
                   after=None, parts=None):
    """The batch loop, written once (``BatchEstimator.fit``, ``bnpcore.distributed``
    through it, the Bayes-net estimators): iterations ``start + 1`` to
    ``max_iter`` of ``state``, each

    1. ``timed_sweep`` (past ``burn_in``: and ``collect``), or on the
       partitions ``parts`` ``state.iterate(parts, sampling)``, whose record
       also gets ``driver_seconds`` (the time outside the slowest partition);
    2. the record ``record(it, seconds)`` (``seconds``: the algorithm's time so
       far), the iteration's diagnostics and ``evaluate(it, sampling)`` (a dict:
       held-out scores), reported by ``estimator._report`` (callbacks);
    3. stop when ``delta`` falls below ``tol``, or when a callback (or
       ``after(it, seconds, stopped) -> stopped``: time budget, checkpoints) asks.

    Returns (the last iteration, whether a callback or ``after`` stopped it, seconds)."""
    stopped, it = False, start
    for it in range(start + 1, max_iter + 1):
        sampling = burn_in is not None and it > burn_in
        if parts is None:
            metrics, spent = timed_sweep(state, sampling)
        else:
            parts.seconds[:] = 0.0
            tick = time.perf_counter()
            metrics = state.iterate(parts, sampling)
            spent = time.perf_counter() - tick
            metrics = {"driver_seconds": spent - parts.seconds.max(), **metrics}
        seconds += spent
        entry = record(it, seconds)
        entry.update(metrics)
        if evaluate is not None:
            entry.update(evaluate(it, sampling))
        stopped = estimator._report(it, **entry)
        if tol is not None and metrics.get("delta", math.inf) < tol:
            break
        if after is not None:
            stopped = after(it, seconds, stopped)
        if stopped:
            break
    return it, stopped, seconds


class BatchEstimator(BaseEstimator):
    """Base class of the estimators that sweep a fixed corpus.

    Subclasses implement

    * ``_check_params() -> dict``: validate the hyperparameters (raise early)
      and return the loop settings ``max_iter`` and, where they apply,
      ``burn_in`` (samplers) and ``tol`` (deterministic algorithms);
    * ``_init_state(X, rng) -> BatchState``: a fresh state for corpus ``X``;
    * ``_set_fitted(state, X)``: the public fitted attributes from the state
      (called at the end of a fit and before every checkpoint);
    * optionally ``_check_heldout(heldout, X)`` and ``_evaluate(state,
      heldout)`` when held-out data mean something else than held-out
      tokens of the training documents (mixtures score new documents);
    * ``partitioned = True`` when its state implements the local and global
      steps (``BatchState``), with ``check_partitioned()`` refusing the
      settings under which it does not: ``bnpcore.distributed.fit`` then runs
      it on a Dask cluster.
    """

    _iterations = "max_iter"
    _persist = ("_resume",)
    # False for models that can be fitted to empty documents (mixtures cluster them)
    _requires_tokens = True
    #: The state implements the local and global steps (``bnpcore.distributed`` runs it).
    partitioned = False

    def check_partitioned(self):
        """Raise ValueError naming the setting under which the state's iteration
        is a sequential sweep (nothing here: every setting has the steps)."""

    # -- hooks ---------------------------------------------------------------------
    def _check_params(self):
        raise NotImplementedError

    def _loop_settings(self, X):
        """The loop settings for corpus ``X``: ``_check_params()`` unless they
        depend on the corpus (iterations per epoch of a minibatch method)."""
        return self._check_params()

    def _init_state(self, X, rng):
        raise NotImplementedError

    def _set_fitted(self, state, X):
        raise NotImplementedError

    def _check_heldout(self, heldout, X):
        """Held-out tokens of the training documents (same documents, same words)."""
        heldout = as_corpus(heldout, n_words=X.n_words)
        if heldout.n_docs != X.n_docs:
            raise ValueError(f"heldout has {heldout.n_docs} documents, X has {X.n_docs}: "
                             "give the held-out tokens of the training documents")
        if heldout.n_tokens == 0:
            raise ValueError("heldout has no tokens")
        return heldout

    def _evaluate(self, state, heldout, sampling):
        """Held-out token log-likelihood of the training documents ([HYB] eq 30);
        ``sampling`` (a sampler past ``burn_in``): of the average predictive over
        the samples evaluated so far (eq 31)."""
        doc_topic, topic_word = state.predictive()
        if sampling:
            loglik = self._average.add(doc_topic, topic_word).log_likelihood()
        else:
            loglik = token_log_likelihood(doc_topic, topic_word, heldout, getattr(self, "n_threads", None))
        return {"heldout_loglik": loglik, "perplexity": math.exp(-loglik)}

    # -- fit ---------------------------------------------------------------------------
    @exclusive
    def fit(self, X, y=None, *, heldout=None, eval_every=1, progress=False, checkpoint=None,
            checkpoint_every=None, max_seconds=None, resume=False):
        """Fit the model to the documents ``X``.

        Parameters
        ----------
        X : Corpus or anything ``bnpcore.as_corpus`` accepts
            Training documents.
        y : ignored
        heldout : Corpus, optional
            Held-out data scored every ``eval_every`` iterations into
            ``history_["heldout_loglik"]``: for topic models the held-out tokens
            of the training documents (e.g. the second corpus of
            ``X.split_tokens(0.1)``), for mixtures new documents.
        eval_every : int or collection of int, default 1
            Iterations between held-out evaluations (the last iteration is
            always evaluated), or the iterations (from 1) to evaluate.
        progress : bool, default False
            Show a progress bar over iterations (needs tqdm).
        checkpoint : str or path, optional
            Model file written every ``checkpoint_every`` iterations and when
            the fit stops early; ``bnpcore.load`` it and call
            ``fit(X, resume=True)`` to continue.
        checkpoint_every : int, optional
        max_seconds : float, optional
            Stop after this much time in the algorithm in this call (the fit
            stays resumable).
        resume : bool, default False
            Continue an interrupted fit (stopped by a callback, ``max_seconds``,
            or loaded from a checkpoint) on the same corpus until ``max_iter``.
            A checkpoint's state is checked first (``BatchState.validate``): a
            file whose values break the state's invariants, or that has done
            more than ``max_iter`` iterations, is a ValueError naming it.

        Returns
        -------
        self
        """
        return self._fit(as_corpus(X), heldout=heldout, eval_every=eval_every, progress=progress,
                         checkpoint=checkpoint, checkpoint_every=checkpoint_every, max_seconds=max_seconds,
                         resume=resume)

    def fit_on_partitions(self, X, partitions, **options):
        """``fit`` (with its keyword ``options``), every iteration run as
        ``state.iterate(parts, sampling)`` on the partitions that
        ``partitions(state) -> (state, parts)`` gives for the fit's state
        (``bnpcore.distributed``: Dask's partitions, with ``map``, ``gather``,
        ``root`` and ``seconds`` as :class:`Partitions`). Every record also
        holds ``driver_seconds``, the time outside the slowest partition's
        local steps; the partitions are gathered into the state before every
        checkpoint and at the end, and restart from it (``parts.root()``)
        every ``checkpoint_every`` iterations."""
        return self._fit(as_corpus(X), partitions=partitions, **options)

    @exclusive
    def _fit(self, X, *, heldout=None, eval_every=1, progress=False, checkpoint=None, checkpoint_every=None,
             max_seconds=None, resume=False, partitions=None):
        """``fit`` on the Corpus ``X``; ``partitions``: as in ``fit_on_partitions`` (None: one block here)."""
        if X.n_tokens == 0 and self._requires_tokens:
            raise ValueError("the training corpus has no tokens")
        loop = self._loop_settings(X)
        max_iter = loop["max_iter"]
        burn_in, tol = loop.get("burn_in"), loop.get("tol")
        if isinstance(eval_every, numbers.Integral):
            every = check_int(eval_every, "eval_every", maximum=None)
            evaluate = lambda it: it % every == 0 or it == max_iter  # noqa: E731 (no set: max_iter may be huge)
        else:
            evaluate = {check_int(it, "eval_every", maximum=None) for it in eval_every}.__contains__
        if checkpoint_every is not None:
            check_int(checkpoint_every, "checkpoint_every", maximum=None)
        if max_seconds is not None:
            check_positive(max_seconds, "max_seconds")
        if heldout is not None:
            heldout = self._check_heldout(heldout, X)
        state, start, seconds = self._start_or_resume(X, resume, heldout, burn_in)
        parts = None
        if partitions is not None:
            state, parts = partitions(state)
        self.n_features_in_ = X.n_words
        start_seconds = seconds
        self._batch_state = state           # callbacks may inspect the state during the fit

        def record(it, seconds):
            return {"n_documents": it * X.n_docs, "fit_seconds": seconds, "n_components": int(state.n_components)}

        def heldout_scores(it, sampling):
            return self._evaluate(state, heldout, sampling) if heldout is not None and evaluate(it) else {}

        def after(it, seconds, stopped):    # the time budget and the checkpoints
            stopped = stopped or (max_seconds is not None and seconds - start_seconds >= max_seconds)
            periodic = checkpoint_every and it % checkpoint_every == 0
            if parts is not None and (stopped or periodic):
                parts.gather()
            if checkpoint is not None and (stopped or periodic):
                self._checkpoint(state, X, it, seconds, checkpoint)
            if parts is not None and periodic and not stopped:
                parts.root()        # the lineage restarts at the gathered state
            return stopped

        with progress_bar(self, progress, max_iter, initial=start):
            it, stopped, seconds = run_iterations(self, state, start, max_iter, seconds, burn_in=burn_in, tol=tol,
                                                  record=record, evaluate=heldout_scores, after=after, parts=parts)
        if parts is not None:
            parts.gather()
        self.n_iter_ = it
        resumable = stopped and it < max_iter
        if resumable:
            self._keep_resumable(state, X, it, seconds)
        else:
            self.__dict__.pop("_resume", None)
            self.__dict__.pop("_batch_state", None)
        self._set_fitted(state, X)
        if not resumable:
            self.__dict__.pop("_average", None)
        return self

    # -- checkpoints ---------------------------------------------------------------------
    def _forget(self):
        """Drop every fitted attribute and the resume state of a previous fit."""
        for name in self._fitted_names() + list(self._persist) + ["_batch_state", "_average"]:
            self.__dict__.pop(name, None)

    def _keep_resumable(self, state, X, iteration, seconds):
        self._batch_state = state
        self._resume = {"iteration": iteration, "fit_seconds": seconds, "fingerprint": X.fingerprint(),
                        "state_class": class_key(type(state)), "state_layout": type(state).layout}

    def _checkpoint(self, state, X, iteration, seconds, path):
        self._keep_resumable(state, X, iteration, seconds)
        self._set_fitted(state, X)
        self.save(path)

    def save(self, path, *, doc_topic=False):
        """Save the model (and, for an interrupted fit, everything ``fit(X, resume=True)`` needs)."""
        resume = self.__dict__.get("_resume")
        if resume is not None:
            resume["state"] = self._batch_state.state_dict()
            average = self.__dict__.get("_average")
            resume["average"] = None if average is None else {"sum_p": average.sum_p, "n_samples": average.n_samples}
        try:
            return super().save(path, doc_topic=doc_topic)
        finally:
            if resume is not None:
                resume.pop("state")
                resume.pop("average")

    def _start_or_resume(self, X, resume, heldout=None, burn_in=None):
        """``(state, iterations done, fit seconds so far)``: the interrupted fit's
        (``resume``) or a new state, the previous fit forgotten (also the start
        of ``bnpcore.distributed.fit``)."""
        if resume:
            return self._resume_state(X, heldout)
        self._forget()
        state = self._init_state(X, check_random_state(self.random_state))
        self._average = (PredictiveAverage(heldout, getattr(self, "n_threads", None))
                         if heldout is not None and burn_in is not None else None)
        self.history_ = []
        return state, 0, 0.0

    def _resume_state(self, X, heldout):
        resume = self.__dict__.get("_resume")
        if resume is None:
            raise ValueError("resume=True needs an interrupted fit (or a checkpoint of one) to continue")
        state = self.__dict__.get("_batch_state")
        if state is None:         # loaded from a file: everything in it is checked before use
            source = resume.get("file", "the checkpoint") if isinstance(resume, dict) else "the checkpoint"
            try:
                state = self._restore_checkpoint(resume, X, heldout)
            except ValueError as exc:
                raise ValueError(f"{source}: cannot resume from it: {exc}") from None
        elif resume["fingerprint"] != X.fingerprint():
            raise ValueError("resume=True must be given the corpus the interrupted fit was training on")
        self.__dict__.setdefault("_average", None)
        return state, resume["iteration"], resume["fit_seconds"]

    def _restore_checkpoint(self, resume, X, heldout):
        """The state saved in ``resume`` (a loaded checkpoint's ``_resume``), every
        value checked: the iteration counters, then the state (``BatchState.validate``)."""
        if not isinstance(resume, dict):
            raise ValueError(f"its resume record is a {type(resume).__name__}, not a dict")
        checks = {"iteration": Number(0, self._loop_settings(X)["max_iter"], integer=True),
                  "fit_seconds": Number(0.0), "state_layout": Number(1, integer=True)}
        for name, spec in checks.items():
            if name in resume or name != "state_layout":    # before layouts were recorded: layout 1
                spec.check(name, resume.get(name))
        for name in ("fingerprint", "state_class"):
            if not isinstance(resume.get(name), str):
                raise ValueError(f"its {name} must be a string, got {resume.get(name)!r}")
        if resume["fingerprint"] != X.fingerprint():
            raise ValueError("resume=True must be given the corpus the interrupted fit was training on")
        state = BatchState.from_checkpoint(resume["state_class"], resume.get("state"), X,
                                           resume.get("state_layout", 1))
        saved = resume.get("average")
        self._average = None
        if saved is not None and heldout is not None:
            if not isinstance(saved, dict):
                raise ValueError("its sample average is not a dict")
            if isinstance(saved.get("sum_p"), np.ndarray) and len(saved["sum_p"]) != heldout.nnz:
                raise ValueError("resume=True must be given the held-out data of the interrupted fit")
            Array("float64", (heldout.nnz,), low=0.0).check("its sample average sum_p", saved.get("sum_p"))
            Number(0, integer=True).check("its sample average n_samples", saved.get("n_samples"))
            self._average = PredictiveAverage(heldout, getattr(self, "n_threads", None))
            self._average.sum_p[:] = saved["sum_p"]
            self._average.n_samples = saved["n_samples"]
        for name in ("state", "average", "file"):      # now held by the state and the average
            resume.pop(name, None)
        return state


class InitFromMixin:
    """Mixin (before ``BatchEstimator``) of an estimator whose fit can start from
    another fitted model: ``fit(X, init_from=model)`` keeps ``model`` as
    ``self._init_from`` for ``_init_state`` during that fit (None otherwise: the
    estimator's own start). Which models it takes, and how it starts from them,
    its class docstring says."""

    _init_from = None

    @exclusive
    def fit(self, X, y=None, *, init_from=None, **kwargs):
        """:meth:`BatchEstimator.fit` (``heldout``, ``eval_every``, ``progress``,
        ``checkpoint``, ``checkpoint_every``, ``max_seconds``, ``resume``), started
        from ``init_from``.

        Parameters
        ----------
        init_from : fitted model, optional
            Start from its state instead of the estimator's own initial state
            (the models it takes: the class docstring). Not read when
            ``resume=True`` continues an interrupted fit.
        """
        self._init_from = init_from
        try:
            return super().fit(X, y, **kwargs)
        finally:
            del self._init_from
