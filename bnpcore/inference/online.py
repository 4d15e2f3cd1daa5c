"""The online driver: minibatch streams, learning rates, the natural-gradient
step on global sufficient statistics, pruning, callbacks and checkpoints.

Every stochastic (streaming) estimator shares this outer loop (C. Wang and
D. M. Blei, "Truncation-free online variational inference for Bayesian
nonparametric models", NIPS 2012, cited as [TF], sections 2.2-3; M. D.
Hoffman, D. M. Blei, C. Wang and J. Paisley, "Stochastic variational
inference", JMLR 2013):

1. draw a minibatch of S documents (random order over a fixed corpus in ``fit``,
   stream order in ``partial_fit``);
2. run the model's local step on it, which returns the minibatch sufficient
   statistics (and may instantiate new components);
3. take the natural-gradient step ``Nst <- (1 - rho_t) Nst + rho_t (n / S) stats``
   on the global statistics, where ``n`` is the corpus size;
4. reorder components by size, prune small ones every ``prune_every`` documents,
   record progress (``BaseEstimator._report``, once per minibatch), evaluate
   held-out data, write checkpoints.

The global state of every stick-breaking model (DP mixture, HDP, and their
truncated baselines) is a :class:`StickState`: variational Dirichlet
``lambda_kw = eta + Nst_kw`` and Beta sticks ``u_k = 1 + Nst_k``,
``v_k = g + sum_{l>k} Nst_l`` (the stick invariant: the only stored
quantities are the expected statistics ``Nst``, so reordering and pruning are
exact), with the lazily decayed representation ``Nst_kw = scale * Ntilde_kw``
that makes a global step cost O(nnz of the minibatch) instead of O(K W).

Estimators subclass :class:`OnlineEstimator` and implement a few hooks
(``_check_params``, ``_state_prior``, ``local_step``, ``_size_key``, and
optionally ``_init_state``); the base class owns ``fit``, ``partial_fit``,
``global_step``, checkpoints, ``history_`` and the fitted attributes.

In the terms of the state protocol (``bnpcore.inference.batch``): the online
loop is the local step on a minibatch (``OnlineEstimator.local_step(batch,
state, rng) -> (n_new, SuffStats)``: documents to statistics), then the global
step with the step size rho_t (``OnlineEstimator.global_step(stats, rho)``:
``StickState.update`` and reordering; the loop prunes on its schedule). The
local step is a function of the minibatch, the global state and the random
generator only, so ``bnpcore.distributed`` runs it on a Dask worker that holds
the minibatch's documents (``OnlineEstimator.fit_with_local_step``) and this
loop applies the global step.
"""
import functools
import math
import time

import numpy as np
from scipy.special import digamma

from bnpcore._defaults import warn_capacity
from bnpcore._validation import (LOCAL_SWEEPS_MAX, MAX_DOCUMENTS, check_inner, check_int, check_positive,
                                 check_random_state, effective_n_threads)
from bnpcore.base import BaseEstimator, exclusive, restore_generator
from bnpcore.corpus import as_corpus
from bnpcore.inference import moves
from bnpcore.inference.callbacks import progress_bar
from bnpcore.inference.stats import SuffStats
from bnpcore.kernels._svi import add_block, gather_batch

__all__ = ["auto_epochs", "check_local_sampler", "learning_rate", "StickState", "Minibatch", "MinibatchStream",
           "minibatch_stats", "OnlineEstimator", "SCHEDULES"]

SCHEDULES = ("truncation_free", "robbins_monro")

# n_epochs="auto": passes over the corpus until about this many training tokens
# have been seen (at least one pass, at most AUTO_MAX_EPOCHS), so that a default
# fit costs about the same on a small corpus as on a large one. On KOS (420,000
# training tokens: 12 passes) hdp.TruncationFreeSVI reaches -7.40 to -7.44 per
# held-out word this way (benchmarks/results/tfsvi_study_kos.txt, 30 s rows;
# benchmarks/results/bench_defaults_kos.txt); one pass gave mixed topics.
AUTO_EPOCH_TOKENS = 5_000_000
AUTO_MAX_EPOCHS = 20


def auto_epochs(n_tokens, budget=AUTO_EPOCH_TOKENS):
    """The passes of ``n_epochs="auto"`` over a corpus of ``n_tokens`` tokens:
    about ``budget`` tokens' worth, at least 1 and at most ``AUTO_MAX_EPOCHS``."""
    return int(max(1, min(AUTO_MAX_EPOCHS, round(budget / max(int(n_tokens), 1)))))

# Fold the lazy scale into the stored rows below this value (StickState.update).
_MIN_SCALE = 1e-100


# Largest stick concentration of the exact new-component walk, and smallest
# Dirichlet parameter of the local sampler (see check_local_sampler).
MAX_WALK_CONCENTRATION = 1000.0
MIN_LOCAL_ETA = 1e-6


def check_local_sampler(local_sweeps, new_component, concentration, name, eta):
    """Validate the options of a truncation-free local Gibbs sampler ([TF] S.2.2):
    ``local_sweeps`` >= 0 and ``new_component`` "exact" (a retrospective walk:
    the literal rule is not an exact Gibbs step with ordered sticks) or
    "paper" (the literal rule). The exact walk instantiates sticks V ~ Beta(1, g)
    until one is taken, about 1 + g of them (each with a row over the minibatch
    vocabulary) for every new component, so the concentration ``name`` = g is
    limited to MAX_WALK_CONCENTRATION there (at g = 1e10 the walk exhausted
    memory). The sampler adds and removes integer counts on eta + counts: an
    ``eta`` below the rounding unit of the counts (2**-21 for counts up to
    2**31) is lost and a component's parameter returns to exactly 0 (NaN
    weights: at eta = 1e-20 on KOS), so eta >= MIN_LOCAL_ETA."""
    check_inner(local_sweeps, "local_sweeps", minimum=0, maximum=LOCAL_SWEEPS_MAX)
    if new_component not in ("exact", "paper"):
        raise ValueError(f"new_component must be 'exact' or 'paper', got {new_component!r}")
    if eta < MIN_LOCAL_ETA:
        raise ValueError(f"eta={eta:g} is below {MIN_LOCAL_ETA:g}, where the local sampler's counts would absorb it "
                         "(the topic weights become NaN)")
    if new_component == "exact" and concentration > MAX_WALK_CONCENTRATION:
        raise ValueError(f"{name}={concentration:g} is too large for new_component='exact': the walk over new "
                         f"sticks visits about 1 + {name} of them per new component; use {name} <= "
                         f"{MAX_WALK_CONCENTRATION:g} or new_component='paper'")


def learning_rate(schedule, n_updates, n_seen, batch_size, total, offset=1.0, decay=0.6):
    """Step size rho_t of the natural-gradient update ([TF] §3; Hoffman et al. 2013).

    Parameters
    ----------
    schedule : {"truncation_free", "robbins_monro"}
        "truncation_free" ([TF] §3): ``rho_t = S / n_t`` while ``n_t < n``, where
        ``n_t`` counts the documents processed *including* the current
        minibatch (so the first step has rho = 1, not S / 0); afterwards ``S / n``.
        "robbins_monro" (Hoffman et al.; [TF]'s baselines): ``(tau0 + t)^-kappa``
        with ``t`` the number of updates done before this one.
    n_updates : int
        t, updates done so far.
    n_seen : int
        n_t, documents processed including the current minibatch.
    batch_size : int
        S, documents in the current minibatch.
    total : int
        n, the corpus size (the documents the model describes).
    offset, decay : float
        tau0 and kappa of the Robbins-Monro schedule (gensim's ``offset`` and
        ``decay``, scikit-learn's ``learning_offset`` and ``learning_decay``).

    Returns
    -------
    float in (0, 1]
        Both schedules are floored at ``S / n`` ([TF] §3: "for both ... we set
        the lower bound of learning rate as S/n").
    """
    floor = batch_size / total
    if schedule == "truncation_free":
        rho = batch_size / n_seen
    else:
        rho = math.inf if offset + n_updates == 0 else (offset + n_updates) ** (-decay)
    return min(1.0, max(rho, floor))


class StickState:
    """Global variational state of a stick-breaking mixture or topic model.

    Components k = 0..K-1 in stick order carry q(phi_k) = Dirichlet(lambda_k)
    and q(V_k) = Beta(u_k, v_k) with (Wang & Blei 2012, section 3)

    ``lambda_kw = eta + Nst_kw``, ``u_k = 1 + Nst_k``, ``v_k = g + sum_{l>k} Nst_l``.

    Only the expected statistics Nst are stored: components are born at their
    prior (Nst = 0), every natural-gradient step is the same convex
    combination of linear functions of Nst, so the invariant holds at all
    times and reordering or deleting components is exact.

    Storage. The per-component arrays live in a
    :class:`~bnpcore.inference.moves.Components` table in the indirect layout:
    ``words`` (the word statistics, lazily scaled: ``Nst_kw = scale *
    words[slots[k], w]``; a step multiplies ``scale`` and adds the sparse
    minibatch statistics divided by it, and the scale is folded into the rows
    when it falls below 1e-100), ``row_tilde`` (their row sums, same units) and
    ``sizes`` (``Nst_k``). ``slots`` (the table's) maps stick positions to
    physical rows, so reordering and pruning (``moves.reorder``,
    ``moves.prune``) permute an index array, never the K x W matrix, and
    ``table.add`` reuses the rows of pruned components. The kernels take the
    physical arrays ``words`` and ``row_tilde`` with ``slots``.

    Parameters
    ----------
    n_words : int
        Vocabulary size W.
    eta : float
        Symmetric Dirichlet prior of the components.
    concentration : float
        g, the prior Beta(1, g) of the sticks (a for the DP mixture, gamma for
        the HDP).
    truncated : bool
        The last stick is fixed at V_K = 1 (truncated baselines): it takes all
        the remaining mass.
    """

    def __init__(self, n_words, eta, concentration, truncated=False, capacity=8):
        self.n_words = int(n_words)
        self.eta = float(eta)
        self.concentration = float(concentration)
        self.truncated = bool(truncated)
        self.table = moves.Components({"words": ((self.n_words,), np.float64), "row_tilde": ((), np.float64),
                                       "sizes": ((), np.float64)}, capacity=capacity, indirect=True)
        self.scale = 1.0

    # -- the kernels' view ---------------------------------------------------------
    @property
    def words(self):
        """Physical rows of scaled word statistics (capacity x W)."""
        return self.table.arrays["words"]

    @property
    def row_tilde(self):
        return self.table.arrays["row_tilde"]

    @property
    def slots(self):
        """Physical row of each component, in stick order."""
        return self.table.slots

    @property
    def sizes(self):
        """Nst_k in stick order."""
        return self.table["sizes"]

    @property
    def n_components(self):
        return self.table.n

    # -- the natural-gradient step --------------------------------------------
    def update(self, rho, factor, stats):
        """The global step: ``Nst <- (1 - rho) Nst + rho * stats.scale(factor)``
        for every component.

        Costs O(K + the size of ``stats``): the decay multiplies ``scale`` and
        only the minibatch's word columns are touched (no K x W work).

        Parameters
        ----------
        rho : float in (0, 1]
        factor : float
            n / S, the corpus size over the minibatch size.
        stats : SuffStats
            Minibatch statistics in stick order over all K components (new
            ones added to ``table`` first): ``words`` (K, len(stats.vocab))
            over the minibatch vocabulary ``stats.vocab`` and ``sizes`` (K,)
            (the u_k - 1 increments); see :func:`minibatch_stats`.
        """
        if stats.n_components != self.n_components:
            raise ValueError(f"statistics of {stats.n_components} components for a state of {self.n_components} "
                             "(add the new components to the table first)")
        if stats.vocab is None:
            raise ValueError("the word statistics need their vocabulary (stats.vocab)")
        keep = 1.0 - rho
        scale = self.scale * keep
        slots = self.slots
        if scale < _MIN_SCALE:       # includes rho = 1, which erases the state
            self.words[slots] *= scale
            self.row_tilde[slots] *= scale
            scale = 1.0
        self.scale = scale
        sizes = self.table.arrays["sizes"]
        sizes[slots] = keep * sizes[slots] + (rho * factor) * stats["sizes"]
        add_block(self.words, self.row_tilde, slots, np.ascontiguousarray(stats.vocab, dtype=np.int32),
                  np.ascontiguousarray(stats["words"], dtype=np.float64), rho * factor / scale)

    # -- derived quantities -----------------------------------------------------
    def word_stats(self):
        """Nst_kw, ndarray of shape (K, W) in stick order."""
        return self.scale * self.words[self.slots]

    def word_mass(self):
        """sum_w Nst_kw per component (expected number of words)."""
        return self.scale * self.row_tilde[self.slots]

    def lam(self):
        """lambda_kw = eta + Nst_kw, ndarray of shape (K, W)."""
        return self.eta + self.word_stats()

    def stick_params(self):
        """(u, v) of the Beta sticks from the invariant, two arrays of shape (K,)."""
        sizes = self.sizes
        suffix = np.concatenate([np.cumsum(sizes[::-1])[::-1][1:], [0.0]]) if sizes.size else sizes
        return 1.0 + sizes, self.concentration + suffix

    def expected_log_weights(self):
        """E[log pi_k] = E[log V_k] + sum_{l<k} E[log(1 - V_l)] (E[log V_K] = 0 when truncated)."""
        u, v = self.stick_params()
        if u.size == 0:
            return u
        dig = digamma(u + v)
        elog_v, elog_1mv = digamma(u) - dig, digamma(v) - dig
        if self.truncated:
            elog_v[-1] = 0.0
        return elog_v + np.concatenate([[0.0], np.cumsum(elog_1mv[:-1])])

    def expected_weights(self):
        """E[pi_k] = E[V_k] prod_{l<k} E[1 - V_l] over the K components (E[V_K] = 1 when truncated).

        Untruncated, the remaining mass prod_k E[1 - V_k] belongs to the
        uninstantiated components and is not included ([TF] S.3).
        """
        u, v = self.stick_params()
        if u.size == 0:
            return u
        mean_v = u / (u + v)
        if self.truncated:
            mean_v[-1] = 1.0
        return mean_v * np.concatenate([[1.0], np.cumprod(1.0 - mean_v[:-1])])

    # -- persistence -------------------------------------------------------------
    def to_arrays(self):
        """The state as compact arrays in stick order (bit-exact: no arithmetic)."""
        return {"words": self.words[self.slots], "row_tilde": self.row_tilde[self.slots],
                "sizes": self.sizes, "scale": np.float64(self.scale)}

    @classmethod
    def from_arrays(cls, arrays, n_words, eta, concentration, truncated=False):
        words = np.asarray(arrays["words"], dtype=np.float64).reshape(-1, int(n_words))
        state = cls(n_words, eta, concentration, truncated, capacity=max(len(words), 8))
        slots = state.table.add(len(words))
        state.words[slots] = words
        state.row_tilde[slots] = np.asarray(arrays["row_tilde"], dtype=np.float64)
        state.table.arrays["sizes"][slots] = np.asarray(arrays["sizes"], dtype=np.float64)
        state.scale = float(arrays["scale"])
        return state


class Minibatch:
    """S documents with a local vocabulary: the form every local-step kernel takes.

    Attributes
    ----------
    doc_ids : ndarray of shape (S,), int64
        Rows of the source corpus.
    ptr : ndarray of shape (S + 1,), int64
        Pair offsets of each document.
    words : ndarray of shape (nnz,), int32
        Local word ids (columns of ``vocab``).
    counts : ndarray of shape (nnz,), int32
    vocab : ndarray of shape (n_batch_words,), int32
        Global word id of each local id (first-appearance order).
    """

    __slots__ = ("doc_ids", "ptr", "words", "counts", "vocab")

    def __init__(self, corpus, doc_ids, word_map):
        self.doc_ids = np.ascontiguousarray(doc_ids, dtype=np.int64)
        source, rows = corpus.read_documents(self.doc_ids)      # an on-disk corpus: read, not mapped
        self.ptr, self.words, self.counts, self.vocab = gather_batch(
            source.indptr, source.indices, source.counts, np.ascontiguousarray(rows, dtype=np.int64), word_map)

    @classmethod
    def from_arrays(cls, indptr, indices, counts, rows, word_map):
        """The documents ``rows`` (in that order) of the CSR arrays ``indptr``,
        ``indices``, ``counts`` (a block of a corpus, as a local step gets it);
        ``word_map``: work space of the vocabulary size, all -1."""
        out = object.__new__(cls)
        out.doc_ids = np.ascontiguousarray(rows, dtype=np.int64)
        out.ptr, out.words, out.counts, out.vocab = gather_batch(indptr, indices, counts, out.doc_ids, word_map)
        return out

    @property
    def n_docs(self):
        return len(self.doc_ids)

    @property
    def n_tokens(self):
        return int(self.counts.sum(dtype=np.int64))

    def take(self, positions):
        """The documents at ``positions`` of this minibatch, over the same vocabulary."""
        positions = np.asarray(positions, dtype=np.int64)
        starts, lengths = self.ptr[positions], np.diff(self.ptr)[positions]
        out = object.__new__(Minibatch)
        out.doc_ids, out.vocab = self.doc_ids[positions], self.vocab
        out.ptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        pairs = np.repeat(starts - out.ptr[:-1], lengths) + np.arange(out.ptr[-1])
        out.words, out.counts = self.words[pairs], self.counts[pairs]
        return out


def minibatch_stats(batch, block, sizes):
    """The statistics a local step returns: ``words`` (K, len(batch.vocab)) over
    the minibatch vocabulary and ``sizes`` (K,)."""
    return SuffStats({"words": block, "sizes": sizes}, vocab=batch.vocab, word_fields=("words",))


class MinibatchStream:
    """Random-order minibatches over a fixed corpus of ``n_docs`` documents.

    Each epoch is a fresh permutation drawn from ``rng`` when the previous one
    is used up; the last minibatch of an epoch may be smaller. The state
    (``order``, ``position``, ``epoch``) is saved with checkpoints so that a
    resumed run sees exactly the same minibatches.
    """

    def __init__(self, n_docs, batch_size, shuffle=True):
        self.n_docs = int(n_docs)
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.order = None
        self.position = 0
        self.epoch = 0

    @property
    def documents_done(self):
        """Documents delivered since the stream started."""
        return self.epoch * self.n_docs + self.position - (self.n_docs if self.order is not None else 0)

    def next(self, rng):
        if self.order is None or self.position >= self.n_docs:
            self.order = rng.permutation(self.n_docs) if self.shuffle else np.arange(self.n_docs)
            self.position = 0
            self.epoch += 1
        ids = self.order[self.position:self.position + self.batch_size]
        self.position += len(ids)
        return ids

    def state(self):
        return {"order": self.order, "position": self.position, "epoch": self.epoch}

    def set_state(self, state):
        order = state["order"]
        self.order = None if order is None else np.asarray(order, dtype=np.int64)
        self.position = int(state["position"])
        self.epoch = int(state["epoch"])


class OnlineEstimator(BaseEstimator):
    """Base class of the minibatch (stochastic variational) estimators.

    Subclasses are scikit-learn style estimators whose ``__init__`` stores
    (at least) ``batch_size``, ``n_epochs``, ``schedule``, ``learning_offset``,
    ``learning_decay``, ``prune_every``, ``prune_threshold``, ``reorder``,
    ``total_samples`` and ``random_state``, and which implement

    * ``_check_params()``: validate the hyperparameters (raise early);
    * ``_state_prior()``: ``(eta, g, truncated)`` of the :class:`StickState`;
    * ``_init_state(state, rng, n_docs)`` (optional): initialise a fresh state
      (e.g. the random topics of a truncated model; ``n_docs`` is the corpus
      size n); by default it starts empty (K = 0);
    * ``local_step(batch, state, rng) -> (n_new, stats)``: the local step of
      the state protocol (documents to statistics; :meth:`local_step`);
    * ``_size_key()``: the component sizes used for reordering and pruning;
    * ``additive_local_step`` (class attribute, default False): True when the
      local step draws no random numbers, adds no components and its
      statistics are a sum over the minibatch's documents, each computed from
      the global state alone (mean-field local steps): ``bnpcore.distributed``
      then runs it on every partition's share of a minibatch and sums.

    The base class's :meth:`global_step` applies the summed statistics with
    the step size rho_t.

    The driver state (updates t, documents n_t, the random generator, the
    stream position) is saved with ``save``: a checkpoint written mid-stream
    and resumed with ``fit(X, resume=True)`` (or further ``partial_fit``
    calls) continues exactly as the uninterrupted run.
    """

    _persist = ("_ckpt_words", "_ckpt_row_tilde", "_ckpt_sizes", "_ckpt_scale", "_ckpt_driver",
                "_ckpt_stream_order")

    # -- hooks -------------------------------------------------------------------
    def _check_params(self):
        raise NotImplementedError

    def _state_prior(self):
        raise NotImplementedError

    _iterations = "n_epochs"
    # the training tokens of n_epochs="auto" (an estimator whose passes cost more sets fewer)
    _auto_epoch_tokens = AUTO_EPOCH_TOKENS

    def _init_state(self, state, rng, n_docs):
        """A fresh state starts with no components ([TF] §3: "we start ... with 0 components")."""

    def _new_state(self, n_words, rng, n_docs):
        state = StickState(n_words, *self._state_prior())
        self._init_state(state, rng, n_docs)
        return state

    def local_step(self, batch, state, rng):
        """The local step of the state protocol: a minibatch's documents to statistics.

        Parameters
        ----------
        batch : Minibatch
            The documents, over their own vocabulary ``batch.vocab``.
        state : StickState
            The global state, read only.
        rng : numpy.random.Generator
            The random numbers the step draws (it advances it).

        Returns
        -------
        n_new : int
            Components the step instantiated, appended after the existing K.
        stats : SuffStats
            The minibatch statistics in stick order over all K + n_new
            components: ``words`` of shape (K + n_new, len(batch.vocab)) over
            the minibatch vocabulary and ``sizes`` of shape (K + n_new,)
            (:func:`minibatch_stats`), as :meth:`global_step` takes them.

        It reads the estimator's parameters but no fitted attribute:
        ``bnpcore.distributed`` calls it on a worker's copy of the unfitted
        estimator.
        """
        raise NotImplementedError

    def _size_key(self):
        raise NotImplementedError

    #: The local step's statistics are a sum over the minibatch's documents,
    #: each from the global state alone (no random numbers, no new components).
    additive_local_step = False

    # -- validation -----------------------------------------------------------
    def _check_driver_params(self):
        check_int(self.batch_size, "batch_size")
        effective_n_threads(getattr(self, "n_threads", None))      # refused before the first minibatch
        if isinstance(self.n_epochs, str):
            if self.n_epochs != "auto":
                raise ValueError(f"n_epochs must be 'auto' or a positive integer, got {self.n_epochs!r}")
        else:
            check_int(self.n_epochs, "n_epochs")
        if self.schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {SCHEDULES}, got {self.schedule!r}")
        check_positive(self.learning_offset, "learning_offset", allow_zero=True)
        decay = check_positive(self.learning_decay, "learning_decay")
        if decay > 1:
            raise ValueError(f"learning_decay must be in (0, 1], got {decay}")
        if self.prune_every is not None:
            check_int(self.prune_every, "prune_every")
        check_positive(self.prune_threshold, "prune_threshold", allow_zero=True)
        if not isinstance(self.reorder, (bool, np.bool_)):
            raise TypeError(f"reorder must be True or False, got {self.reorder!r}")
        if self.total_samples is not None:
            check_int(self.total_samples, "total_samples", maximum=MAX_DOCUMENTS)

    def _epochs(self, X):
        """The passes ``fit`` makes over the corpus ``X``: ``n_epochs``, or for
        "auto" :func:`auto_epochs` of its tokens."""
        return auto_epochs(X.n_tokens, self._auto_epoch_tokens) if isinstance(self.n_epochs, str) \
            else int(self.n_epochs)

    # -- fitting -----------------------------------------------------------------
    @exclusive
    def fit(self, X, y=None, *, heldout=None, eval_every=None, progress=False, checkpoint=None,
            checkpoint_every=None, max_documents=None, max_seconds=None, resume=False):
        """Fit on a corpus: ``n_epochs`` passes in random order, minibatches of ``batch_size``.

        Every minibatch adds a record to ``history_`` (``BaseEstimator._report``:
        iteration = updates so far, n_documents, fit_seconds, n_components,
        rho, n_used); a callback installed with ``reporting`` sees each record
        and stops the fit by returning True (e.g.
        :class:`~bnpcore.inference.callbacks.EarlyStopping`).

        Parameters
        ----------
        X : Corpus or anything ``Corpus`` accepts
            Training documents; n (the corpus size of the n/S scaling) is
            ``total_samples`` if set, else ``X.n_docs``.
        heldout : Corpus, optional
            Documents scored with ``score`` every ``eval_every`` documents; the
            record of that minibatch gets the key ``"heldout_loglik"``.
        eval_every : int, optional
            Documents between held-out evaluations (default: one epoch).
        progress : bool
            Show a tqdm progress bar over documents (if tqdm is installed).
        checkpoint : str or path, optional
            File that ``save`` writes every ``checkpoint_every`` documents and
            when the fit stops early.
        checkpoint_every : int, optional
        max_documents : int, optional
            Stop after this many documents in this call (the state stays
            resumable).
        max_seconds : float, optional
            Stop after this much training time in this call.
        resume : bool
            Continue an interrupted fit (a loaded checkpoint, or a fit stopped by
            ``max_documents``, ``max_seconds`` or a callback) on the same
            corpus, until ``n_epochs`` passes are complete.
        """
        return self._fit(as_corpus(X), None, heldout, eval_every, progress, checkpoint, checkpoint_every,
                         max_documents, max_seconds, resume)

    @exclusive
    def _fit(self, X, stats_of, heldout=None, eval_every=None, progress=False, checkpoint=None, checkpoint_every=None,
             max_documents=None, max_seconds=None, resume=False):
        """``fit`` on the Corpus ``X``, with the local step of every minibatch
        run by ``stats_of`` (``fit_with_local_step``; None: here)."""
        if X.n_tokens == 0:
            raise ValueError("the training corpus has no tokens")
        self._check_params()
        if resume:
            if getattr(self, "_stream", None) is None:
                raise ValueError("resume=True needs an interrupted fit (or a checkpoint of one) to continue")
            if self._driver["fingerprint"] != X.fingerprint() or self._stream.n_docs != X.n_docs:
                raise ValueError("resume=True must be given the corpus the interrupted fit was training on")
        else:
            self._start(X, self.total_samples if self.total_samples is not None else X.n_docs)
            self._driver["fingerprint"] = X.fingerprint()
            self._stream = MinibatchStream(X.n_docs, self.batch_size)
        stream = self._stream
        target = self._epochs(X) * X.n_docs

        def batches():
            while stream.documents_done < target:
                yield stream.next(self._rng)

        self._run(X, batches(), heldout, X.n_docs if eval_every is None else eval_every, progress, checkpoint,
                  checkpoint_every, max_documents, max_seconds, total=target - stream.documents_done, stats_of=stats_of)
        return self

    @exclusive
    def partial_fit(self, X, y=None, *, total_samples=None, heldout=None, eval_every=None):
        """Continue training on the next documents of a stream.

        ``X`` is split into minibatches of ``batch_size`` documents in the
        given order (no shuffling); each adds a record to ``history_``. The
        first call on an unfitted estimator initialises it.

        The n/S scaling of the statistics and the learning-rate floor S/n
        need the corpus size n: the number of documents the stream represents,
        from the ``total_samples`` argument, else the constructor parameter,
        else the value of the previous ``fit``. When none is known, n is the
        number of documents seen so far: the model then always describes the
        stream seen so far as the whole corpus (with the truncation-free
        schedule this is exactly the running average of [TF] §3, i.e. the batch
        update on everything seen).

        ``heldout`` and ``eval_every`` are as in ``fit`` (no evaluation unless
        ``eval_every`` is given); a ``reporting`` callback that returns True
        ends this call early.
        """
        X = self._check_input(X) if getattr(self, "_state", None) is not None else as_corpus(X)
        total = next((check_int(v, "total_samples", maximum=MAX_DOCUMENTS) for v in (total_samples, self.total_samples) if v is not None),
                     None)
        if getattr(self, "_state", None) is None:
            self._check_params()
            self._start(X, total)   # a known n also sizes the initial state (not the first chunk's size)
        if total is not None:
            self._driver["total"] = total
        bs = self.batch_size
        self._run(X, (np.arange(s, min(s + bs, X.n_docs)) for s in range(0, X.n_docs, bs)),
                  heldout, eval_every, False, None, None, None, None, total=X.n_docs)
        return self

    def fit_with_local_step(self, X, stats_of, *, checkpoint=None, checkpoint_every=None, resume=False):
        """``fit``, with the local step of every minibatch run by ``stats_of``
        (``bnpcore.distributed`` runs it on a Dask worker).

        ``stats_of(ids, state, rng) -> (n_new, stats, record)`` returns what
        :meth:`local_step` returns for the documents ``ids`` of ``X`` (in that
        order) given the global state ``state``, and advances ``rng`` as the
        local step does; ``record``, a dict, adds entries to the minibatch's
        ``history_`` record. The loop then applies :meth:`global_step`, as in
        ``fit``, whose ``checkpoint``, ``checkpoint_every`` and ``resume`` these are.
        """
        return self._fit(as_corpus(X), stats_of, checkpoint=checkpoint, checkpoint_every=checkpoint_every,
                         resume=resume)

    def _start(self, X, total):
        """Forget any previous fit and initialise the state for vocabulary size W."""
        self._rng = check_random_state(self.random_state)
        self._state = self._new_state(X.n_words, self._rng, total if total is not None else X.n_docs)
        self._driver = {"updates": 0, "documents": 0, "total": total, "rho": None,
                        "next_prune": self.prune_every, "seconds": 0.0, "fingerprint": None}
        self._stream = None
        self._word_map = np.full(X.n_words, -1, dtype=np.int32)
        self.history_ = []
        self.n_features_in_ = X.n_words
        self.vocabulary_ = X.vocabulary
        self._finalize()

    def _run(self, X, batches, heldout, eval_every, progress, checkpoint, checkpoint_every, max_documents,
             max_seconds, total, stats_of=None):
        drv = self._driver
        if stats_of is None:
            stats_of = functools.partial(self._stats_here, X)
        if eval_every is not None:
            check_int(eval_every, "eval_every", maximum=None)
        if checkpoint_every is not None:
            check_int(checkpoint_every, "checkpoint_every", maximum=None)
        if heldout is not None:
            heldout = as_corpus(heldout, n_words=X.n_words)
        start_docs, start_seconds = drv["documents"], drv["seconds"]
        stopped = False
        with progress_bar(self, progress, drv["documents"] + total, key="n_documents", initial=drv["documents"]):
            for ids in batches:
                tick = time.perf_counter()
                before = drv["documents"]
                n_new, stats, extra = stats_of(ids, self._state, self._rng)
                self._step(len(ids), n_new, stats)
                drv["seconds"] += time.perf_counter() - tick
                now = drv["documents"]
                metrics = {"n_documents": now, "fit_seconds": drv["seconds"], "n_components": self._state.n_components,
                           "rho": drv["rho"], "n_used": int((self._size_key() >= 1.0).sum()), **extra}
                if heldout is not None and eval_every is not None and now // eval_every > before // eval_every:
                    self._finalize()
                    metrics["heldout_loglik"] = float(self.score(heldout))
                stopped = self._report(drv["updates"], **metrics)
                if (max_documents is not None and now - start_docs >= max_documents) or \
                        (max_seconds is not None and drv["seconds"] - start_seconds >= max_seconds):
                    stopped = True
                if checkpoint is not None and (stopped or (
                        checkpoint_every is not None and now // checkpoint_every > before // checkpoint_every)):
                    self._finalize()
                    self.save(checkpoint)
                if stopped:
                    break
        if not stopped and self._stream is not None and self._stream.documents_done >= self._epochs(X) * X.n_docs:
            self._stream = None     # the fit is complete: nothing left to resume
        self._finalize()
        if self._state.truncated:  # a truncated model whose every component holds a word: say so
            warn_capacity(self, int((self._size_key() >= 1.0).sum()), int(self.n_components), "n_components")

    def _stats_here(self, X, ids, state, rng):
        """The local step on the documents ``ids`` of ``X`` in this process."""
        n_new, stats = self.local_step(Minibatch(X, ids, self._word_map), state, rng)
        X.release_pages()     # an opened on-disk corpus: keep only the next minibatch's pages resident
        return n_new, stats, {}

    def global_step(self, stats, rho, *, n_new=0, factor=1.0):
        """The global step of the state protocol: the global state moved by a
        minibatch's statistics.

        The ``n_new`` components the local step instantiated join the state
        at their prior, the natural-gradient step ``Nst <- (1 - rho) Nst +
        rho * factor * stats`` moves every component (:meth:`StickState.update`),
        and with ``reorder`` the components are sorted by size. The loop
        (``fit``, ``partial_fit``) calls it after every local step, with
        rho_t, and sets the fitted attributes at its end.

        Parameters
        ----------
        stats : SuffStats
            The minibatch statistics (:meth:`local_step`; the sum of the
            pieces' statistics when the local step ran on pieces).
        rho : float in (0, 1]
            The step size (:func:`learning_rate`).
        n_new : int
            Components the local step instantiated.
        factor : float
            n / S, the corpus size over the minibatch size.
        """
        if getattr(self, "_state", None) is None:
            self._check_fitted()
        state = self._state
        state.table.add(n_new)
        state.update(rho, factor, stats)
        if self.reorder:
            moves.reorder(state.table, self._size_key())

    def _step(self, S, n_new, stats):
        """The loop's part of a minibatch of ``S`` documents after its local
        step (``n_new`` new components, statistics ``stats``): count the
        documents, the step size rho_t, the global step, and pruning every
        ``prune_every`` documents."""
        drv = self._driver
        drv["documents"] += S
        total = drv["total"] if drv["total"] is not None else drv["documents"]
        rho = learning_rate(self.schedule, drv["updates"], drv["documents"], S, total,
                            self.learning_offset, self.learning_decay)
        self.global_step(stats, rho, n_new=n_new, factor=total / S)
        drv["updates"] += 1
        drv["rho"] = rho
        if self.prune_every is not None:
            while drv["documents"] >= drv["next_prune"]:
                drv["next_prune"] += self.prune_every
                self._prune()

    def _prune(self):
        """Remove components whose size (``_size_key``) is below ``prune_threshold``
        ([TF] §3: fewer than one document / word, counted in the corpus-scaled
        expected statistics); a truncated model keeps
        its largest component."""
        moves.prune(self._state.table, self._size_key(), self.prune_threshold, keep_largest=self._state.truncated)

    def _prune_state(self, keep):
        """``prune`` (``ResultsMixin``): the same removal as ``_prune``, of the
        components where the mask ``keep`` is False."""
        self._state.table.remove(keep)
        self._finalize()

    # -- fitted attributes ---------------------------------------------------------
    def _finalize(self):
        """Set the public fitted attributes from the state (deterministic, no RNG)."""
        state = self._state
        lam = state.lam()
        self.components_ = lam
        self.topics_ = lam / lam.sum(axis=1, keepdims=True) if len(lam) else lam
        self.weights_ = state.expected_weights()
        self.n_components_ = state.n_components
        self.n_documents_seen_ = self._driver["documents"]

    # -- persistence -----------------------------------------------------------------
    def save(self, path, *, doc_topic=False):
        """Save the model and everything needed to resume training (``bnpcore.load``)."""
        if getattr(self, "_state", None) is None:
            self._check_fitted()
        arrays = self._state.to_arrays()
        self._ckpt_words, self._ckpt_row_tilde = arrays["words"], arrays["row_tilde"]
        self._ckpt_sizes, self._ckpt_scale = arrays["sizes"], float(arrays["scale"])
        stream = self._stream.state() if getattr(self, "_stream", None) is not None else None
        self._ckpt_stream_order = stream.pop("order") if stream is not None else None
        self._ckpt_driver = {"driver": self._driver, "stream": stream,
                             "stream_params": None if stream is None else
                             [self._stream.n_docs, self._stream.batch_size],
                             "rng": self._rng.bit_generator.state,
                             "rng_class": type(self._rng.bit_generator).__name__}
        try:
            return super().save(path, doc_topic=doc_topic)
        finally:
            for name in self._persist:
                self.__dict__.pop(name, None)

    def _after_load(self):
        self._check_saved_state()
        ckpt = self.__dict__.pop("_ckpt_driver")
        self._driver = ckpt["driver"]
        self._rng = restore_generator(ckpt["rng_class"], ckpt["rng"])
        self._state = self._new_state_from_arrays({
            "words": self.__dict__.pop("_ckpt_words"), "row_tilde": self.__dict__.pop("_ckpt_row_tilde"),
            "sizes": self.__dict__.pop("_ckpt_sizes"), "scale": self.__dict__.pop("_ckpt_scale")})
        order = self.__dict__.pop("_ckpt_stream_order", None)
        self._stream = None
        if ckpt["stream"] is not None:
            self._stream = MinibatchStream(*ckpt["stream_params"])
            self._stream.set_state(dict(ckpt["stream"], order=order))
        self._word_map = np.full(self.n_features_in_, -1, dtype=np.int32)
        self.history_ = list(self.history_)

    def _check_saved_state(self):
        """ValueError naming the value unless the saved global state and stream
        are what ``save`` writes (shapes, dtypes, ranges): they reach the kernels."""
        from bnpcore.inference.batch import Array, Items, Number, OneOf
        d = self.__dict__
        ckpt = d.get("_ckpt_driver")
        if not isinstance(ckpt, dict) or not {"driver", "stream", "stream_params", "rng", "rng_class"} <= set(ckpt):
            raise ValueError("_ckpt_driver must be the dict save writes")
        W = d.get("n_features_in_")
        Number(1, integer=True).check("n_features_in_", W)
        Array("float64", (None, W), 0.0).check("_ckpt_words", d.get("_ckpt_words"))
        K = len(d["_ckpt_words"])
        Array("float64", (K,), 0.0).check("_ckpt_row_tilde", d.get("_ckpt_row_tilde"))
        Array("float64", (K,), 0.0).check("_ckpt_sizes", d.get("_ckpt_sizes"))
        Number(0.0).check("_ckpt_scale", d.get("_ckpt_scale"))
        if not isinstance(ckpt["driver"], dict):
            raise ValueError("_ckpt_driver['driver'] must be a dict")
        if ckpt["stream"] is None:
            OneOf(None).check("_ckpt_driver['stream_params']", ckpt["stream_params"])
            return
        Items(Number(1, integer=True), Number(1, integer=True)).check("_ckpt_driver['stream_params']",
                                                                      ckpt["stream_params"])
        n_docs = ckpt["stream_params"][0]
        stream = ckpt["stream"]
        if not isinstance(stream, dict):
            raise ValueError("_ckpt_driver['stream'] must be a dict")
        Number(0, n_docs, integer=True).check("the stream's position", stream.get("position"))
        Number(0, integer=True).check("the stream's epoch", stream.get("epoch"))
        order = d.get("_ckpt_stream_order")
        Array("int64", (n_docs,), 0, n_docs - 1, optional=True).check("_ckpt_stream_order", order)
        if order is not None and len(np.unique(order)) != n_docs:
            raise ValueError("_ckpt_stream_order is not a permutation of the documents")

    def _new_state_from_arrays(self, arrays):
        return StickState.from_arrays(arrays, self.n_features_in_, *self._state_prior())
