"""Fit bnpcore estimators on a Dask cluster (``pip install bnpcore[distributed]``).

``fit(estimator, corpus, client)`` runs the estimator's algorithm with the
documents split into contiguous partitions that live on the Dask workers::

    from dask.distributed import Client
    from bnpcore import datasets, distributed, lda
    client = Client("tcp://scheduler:8786")            # or None: a LocalCluster for the call
    est = distributed.fit(lda.StandardVB(n_components=20, random_state=0), datasets.load_kos(), client)

Supported (``SUPPORTED``):

* ``lda.StandardVB`` with the parallel schedule (the batch E-step and M-step
  of Blei, Ng & Jordan 2003, "Latent Dirichlet allocation", section 5.3).
  Each partition keeps its responsibility rows r and document-topic counts
  N_jk on a worker; per iteration the client broadcasts the word factor
  psi(N_kw + eta_w) - psi(N_k + sum(eta)) (K x W doubles), every partition
  runs the estimator's own kernel on its documents with one thread and
  returns its word-topic counts (K x W doubles) with its share of delta and
  of the bound, and the client sums them in partition order. The local fit
  adds each word's pairs in corpus order in one pass (the same bits on any
  number of threads), so the fit equals it to rounding (1e-12 relative;
  with one partition bit for bit but for the bound's "documents" term).
* ``lda.CollapsedVB`` with the delayed schedule, CVB (``order=2``) and CVB0
  (Asuncion, Welling, Smyth & Teh 2009, "On smoothing and inference for
  topic models", section 5). Each partition keeps its rows of r and its
  expected document-topic counts (and their variances for CVB); per
  iteration the client broadcasts the word-topic and topic counts (and
  their variances: K x W doubles, twice for CVB), every partition sweeps its
  documents against its own copy of them with the estimator's kernel on one
  thread and returns its copy, and the client merges the copies' changes in
  partition order, as the threaded sweep merges its threads' copies. Every
  tenth sweep the partitions instead recount their expected counts from r
  and return their sums, which the client adds in partition order (the
  threaded fit recounts block by block the same way). The partitions are
  OpenMP's static chunks, so the fit equals the local one with
  ``n_threads = n_partitions`` bit for bit (topics, proportions, delta).
* ``lda.PartiallyCollapsedGibbs`` (Magnusson, Jonsson, Villani & Broman 2018,
  "Sparse partially collapsed MCMC for parallel inference in topic models").
  Each partition keeps its topic indicators z (and the sums of its n_jk
  past burn-in, with ``store_doc_topic``); per sweep the
  client draws Phi | n_kw (its own threads) and broadcasts it (W x K
  doubles; with ``phi="ppu"`` the urn's positive entries only), every partition builds the alias tables and resamples its z with
  the keyed stream of each document (seed, sweep, global document number),
  and returns the moves of its word-topic counts (W x K int32), which the
  client adds. Every draw comes from the same stream as in the threaded
  sampler and the counts are integers, so the fit equals the local one for
  any ``n_threads`` and any number of partitions, bit for bit.
* ``hdp.PartiallyCollapsedGibbs`` (Terenin, Magnusson, Jonsson & Draper 2020,
  "Sparse parallel training of hierarchical Dirichlet process topic
  models"). Each partition keeps its topic labels; a sweep is three rounds
  with ``PartiallyCollapsedHDPState.sweep``'s serial draws between them on
  the client: the partitions return their table counts l_k (given alpha Psi),
  the client draws the concentrations and the sticks; the partitions return
  their largest candidate tail topic (given the tail of Psi; with the urn's
  Phi, the words at which each candidate's row is read, n x W bytes), the
  client grows the topic slots and draws Phi; the partitions resample their
  labels (given Phi and alpha Psi: W x C and C doubles, or the urn's entries
  and the n candidates' rows) and return the moves of n_wk and n_k (W x C
  int32, C int64). Every kernel draws from the stream of the threaded
  sampler (``first_doc``), the serial draws come from the same generator in
  the same order, and the reductions are integer sums, a maximum and a union
  of marks, so the fit equals the local one bit for bit.
* ``hdp.DirectAssignmentVB`` (Bryant & Sudderth 2012, "Truly nonparametric
  online variational inference for hierarchical Dirichlet processes"),
  online (oHDP) and batch (bHDP), with or without split and merge moves.
  The partitions hold only the documents. Per iteration the client takes the
  documents (the next minibatch, or all of them) as the local fit does and
  reads them itself (the moves need them), sends E[log phi] of their words
  (their vocabulary x K doubles) once, and every partition holding some of
  them runs the E-step kernel to convergence on its share with one thread
  (batch: from the share's theta rows of the previous iteration, sent by the
  client) and returns its rows of theta, n_jk and psi(theta') and its pairs'
  responsibilities and log normalisers. The client puts them in the drawn
  order, redoes the kernel's sums (statistics, entropy) in the kernel's
  order (``reduce_estep``: one pass over the pairs, against the E-step's
  many) and runs the rest of the iteration (merges, global step, splits,
  hyperparameters, pruning: ``DAState.update``). Every document's E-step is
  the local one's and the sums are added in the same order, so the fit
  equals the local one bit for bit, for any number of partitions. The
  E-step's rounds run on the workers, everything else on the client, which
  holds what the local fit holds: the iteration's documents (batch: the
  corpus), theta (batch: D x (K + 1) doubles) and the responsibilities of
  the iteration's pairs (x K doubles; batch: every pair's).
* the online estimators (``bnpcore.inference.online.OnlineEstimator``:
  ``hdp.TruncationFreeSVI``, ``hdp.OnlineVB``, ``mixture.TruncationFreeSVI``,
  ``mixture.StochasticVB``). The partitions hold the documents; per minibatch
  the client draws the document ids (as the local fit does), the partitions
  holding them cut them out, and one worker assembles the minibatch in the
  drawn order and runs the estimator's ``_local_step`` on the broadcast
  global state (K x W doubles) and random generator; the client applies the
  global step with the returned statistics and takes the advanced generator
  back. The local fit calls the same hook in the same order, so the fit
  equals it bit for bit. The truncation-free local steps are one Gibbs
  sampler over the whole minibatch, so a minibatch is one task; the
  mean-field ones (``_sum_over_documents``: ``hdp.OnlineVB``,
  ``mixture.StochasticVB``) run on each partition's share of the minibatch
  where it lives, and the client sums the shares: the fit equals the local
  one up to the order of those sums (within 1e-10).

Where the documents come from: an in-memory corpus's partitions are its CSR
arrays, sent by the client into the partitions' root tasks. A corpus opened
from disk (``Corpus.open``) is never sent: a partition is its directory, its
first and end document and the fingerprint of its documents (computed by the
client in one sequential pass at the start and at every lineage restart);
each worker process opens the directory once, checks the fingerprint of each
partition it is given once, and reads the documents when a task needs them
(a batch iteration: its whole partition, released after; an online
minibatch: only the drawn documents, with positioned reads). The directory
must therefore be readable at the same path from every worker (a shared file
system, or the same copy on every machine): a worker that cannot open it, or
finds other documents there, fails the fit with a ValueError naming the path.

Fault tolerance: every task is a pure function of its inputs (a partition's
state in, a new state out; the random generator travels as a copy) and the
initial partitions are tasks too, so Dask recomputes the state of a partition
whose worker died from its inputs. Batch estimators: with
``checkpoint_every`` the client gathers the state every that many iterations
(writing it to ``checkpoint`` if given, a file that ``fit(..., resume=True)``
here or the estimator's own ``fit(X, resume=True)`` continue) and restarts the
lineage from it, which bounds the recomputation. Online estimators keep their
whole state on the client and checkpoint every ``checkpoint_every``
documents, as their own ``fit``.
"""
import contextlib
import copy
import math
import operator
import os
import socket
import threading
import time

import numpy as np
from scipy.special import gammaln

from bnpcore._validation import check_int
from bnpcore.base import _keep_text_pipeline
from bnpcore.corpus import _META, Corpus, as_corpus
from bnpcore.inference.online import Minibatch, OnlineEstimator
from bnpcore.kernels import _lda, _pchdp, _pclda
from bnpcore.models import hdp_pc as pc_hdp
from bnpcore.models.hdp_da import DirectAssignmentVB, _Minibatch, estep_documents, reduce_estep
from bnpcore.models.hdp_pc import PartiallyCollapsedGibbs as PartiallyCollapsedHDP
from bnpcore.models.lda import (_RECOUNT_EVERY, CollapsedVB, DelayedCVBState, StandardVB, block_counts,
                                delayed_cvb_sweep, svb_bound, svb_log_doc, svb_log_word, thread_blocks, word_index)
from bnpcore.models.lda_pc import PartiallyCollapsedGibbs

__all__ = ["fit", "SUPPORTED", "check_supported", "import_dask", "partition_bounds"]

#: What the driver runs, as shown in errors.
SUPPORTED = ("bnpcore.lda.StandardVB (schedule='parallel', optimize_hyperparameters=False)",
             "bnpcore.lda.CollapsedVB (schedule='delayed', optimize_hyperparameters=False)",
             "bnpcore.lda.PartiallyCollapsedGibbs (optimize_hyperparameters=False)",
             "bnpcore.hdp.PartiallyCollapsedGibbs",
             "bnpcore.hdp.DirectAssignmentVB (mode='online' or 'batch')",
             "the online estimators bnpcore.hdp.TruncationFreeSVI, bnpcore.hdp.OnlineVB, "
             "bnpcore.mixture.TruncationFreeSVI, bnpcore.mixture.StochasticVB")


def import_dask():
    """``(Client, LocalCluster)`` of dask.distributed, or an ImportError saying how to install it."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as exc:
        raise ImportError("bnpcore.distributed needs dask.distributed: pip install 'bnpcore[distributed]'") from exc
    return Client, LocalCluster


def check_supported(estimator):
    """Raise a TypeError/ValueError naming what the driver runs unless it runs ``estimator``."""
    if isinstance(estimator, OnlineEstimator):
        return
    if not isinstance(estimator, (StandardVB, CollapsedVB, PartiallyCollapsedGibbs, PartiallyCollapsedHDP,
                                  DirectAssignmentVB)):
        raise TypeError(f"bnpcore.distributed cannot fit {type(estimator).__name__}; it supports "
                        + "; ".join(SUPPORTED))
    name = type(estimator).__name__
    if getattr(estimator, "optimize_hyperparameters", False):
        raise ValueError(f"bnpcore.distributed runs {name} with optimize_hyperparameters=False only "
                         "(the updates need every document's counts on the client)")
    if isinstance(estimator, StandardVB) and estimator.schedule != "parallel":
        raise ValueError(f"bnpcore.distributed runs StandardVB with schedule='parallel' only, "
                         f"got schedule={estimator.schedule!r}")
    if isinstance(estimator, CollapsedVB) and estimator.schedule != "delayed":
        raise ValueError(f"bnpcore.distributed runs CollapsedVB with schedule='delayed' only (the sequential "
                         f"schedule updates the counts after every pair), got schedule={estimator.schedule!r}")


def partition_bounds(n_docs, n_partitions):
    """First document of each partition and the end: OpenMP's static schedule
    (the first ``n_docs % P`` chunks one document longer), so partition p holds
    block p of the delayed CVB schedule with ``n_threads = P``
    (``bnpcore.models.lda.thread_blocks``)."""
    return thread_blocks(n_docs, n_partitions)


def _documents(corpus, start, stop):
    """Documents [start, stop) as a partition holds them: their CSR arrays
    (``indptr`` from 0, ``indices``, ``counts``) for an in-memory corpus; for an
    opened on-disk corpus only ``on_disk``: (its directory, start, stop, the
    fingerprint of those documents), which the worker reads (``_run_step``)."""
    span = _span(corpus, start, stop)
    if corpus._path is None:
        return _arrays(span)
    return {"on_disk": (corpus._path, int(start), int(stop), span.fingerprint())}


def _span(corpus, start, stop):
    """Documents [start, stop) as a Corpus of views of ``corpus``'s arrays (row pointers from 0)."""
    ptr = np.array(corpus.indptr[start:stop + 1])
    lo, hi = int(ptr[0]), int(ptr[-1])
    return Corpus._from_arrays(ptr - lo, corpus.indices[lo:hi], corpus.counts[lo:hi], corpus.n_words)


def _arrays(span):
    """A partition's documents as the tasks read them: in-memory copies of the CSR arrays of ``span``."""
    return {"indptr": span.indptr, "indices": np.array(span.indices), "counts": np.array(span.counts)}


# -- on-disk partitions, on the workers ------------------------------------------------
_OPENED = {}        # this worker process's opened corpora: path -> (meta.json's inode and mtime, Corpus, checked)
_OPENED_LOCK = threading.Lock()


def _opened(on_disk):
    """The on-disk corpus of a partition descriptor, opened once per worker
    process (again if the directory was rewritten), after checking once that
    the partition's documents have the fingerprint the client saw."""
    path, start, stop, fingerprint = on_disk
    with _OPENED_LOCK:
        try:
            stat = os.stat(os.path.join(path, _META))
            version = (stat.st_ino, stat.st_mtime_ns)       # a corpus written again at the path is opened again
            if _OPENED.get(path, (None,))[0] != version:
                _OPENED[path] = (version, Corpus.open(path), set())
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path}: worker {socket.gethostname()} cannot open this on-disk corpus ({exc}); "
                             "bnpcore.distributed reads each partition on its worker, so the corpus directory "
                             "must be readable at this path from every worker (a shared file system, or the "
                             "same copy on every machine)") from None
        _, corpus, checked = _OPENED[path]
        if on_disk not in checked:
            found = _span(corpus, start, stop).fingerprint()
            if found != fingerprint:
                raise ValueError(f"{path} on worker {socket.gethostname()}: documents {start}..{stop - 1} have "
                                 f"fingerprint {found}, the client's corpus {fingerprint}: the directory must "
                                 "hold the same corpus on every worker as on the client")
            checked.add(on_disk)
    return corpus


def _run_step(task, part, *args, documents=True):
    """``task`` on the partition, with its documents if ``documents``: (the new
    partition, the task's output). An on-disk partition's documents are views
    of the worker's mapping of the directory, its pages released after the
    task (no copy), and not kept in the partition: the worker reads them again
    when a task needs them."""
    if not documents or "on_disk" not in part:
        return task(part, *args)
    _, start, stop, _ = part["on_disk"]
    corpus = _opened(part["on_disk"])
    span = _span(corpus, start, stop)
    try:
        new, out = task(dict(part, indptr=span.indptr, indices=span.indices, counts=span.counts), *args)
    finally:
        corpus._drop_pages()
    return {key: value for key, value in new.items() if key not in ("indptr", "indices", "counts")}, out


def _identity(value):
    return value


# -- worker tasks (pure: new arrays out, inputs untouched) ----------------------------
def _svb_step(part, log_word):
    """One parallel-schedule SVB iteration of a partition: (new partition,
    (its word-topic counts, delta, entropy, documents term of the bound, seconds))."""
    tick = time.perf_counter()
    alpha, ndk = part["alpha"], part["ndk"].copy()
    log_doc = svb_log_doc(ndk, alpha)
    nwk = np.empty_like(log_word)
    # built on the worker at the first step and kept with the partition (as ParallelSVBState keeps its own)
    index = part["word_index"] if "word_index" in part else word_index(part["indptr"], part["indices"],
                                                                         len(log_word))
    delta, entropy = _lda.svb_parallel_step(part["indptr"], part["indices"], part["counts"], index, log_word,
                                            log_doc, ndk, nwk, 1)
    documents = (gammaln(ndk + alpha) - gammaln(alpha)).sum()
    new = dict(part, ndk=ndk, word_index=index)
    return new, (nwk, delta, entropy, documents, time.perf_counter() - tick)


def _cvb_step(part, recount, *shared):
    """One delayed CVB / CVB0 sweep of a partition against its copy of the
    broadcast ``shared`` counts (``DelayedCVBState._run`` for one block), then,
    with ``recount``, its expected counts recomputed from r (one block of
    ``DelayedCVBState._recount``): (new partition, (its copies after the sweep,
    or with ``recount`` its counts, its delta, seconds))."""
    tick = time.perf_counter()
    r, vb_dk = part["r"].copy(), part["vb_dk"].copy()
    var_dk = None if part["var_dk"] is None else part["var_dk"].copy()
    docs = part["indptr"], part["indices"], part["counts"]
    copies, (delta, _) = delayed_cvb_sweep(*docs, part["alpha"], part["eta"], part["mode"], r, vb_dk, var_dk,
                                           shared, 1)
    out = block_counts(*docs, r, vb_dk, var_dk, len(part["eta"])) if recount else [c[0] for c in copies]
    return dict(part, r=r, vb_dk=vb_dk, var_dk=var_dk), (out, delta, time.perf_counter() - tick)


def _pc_step(part, phi, key, sweep, collect):
    """One z | Phi sweep of a partition (``PartiallyCollapsedState.sweep`` after
    the Phi draw): (new partition, (the moves of the word-topic counts, seconds)).
    ``collect``: add the partition's n_jk (from its labels) to its running sum
    (past burn-in, with ``store_doc_topic``)."""
    tick = time.perf_counter()
    K = len(part["alpha"])
    if isinstance(phi, tuple):          # the urn's word-major CSR (rows, topics, values): no tables
        W, tables = len(phi[0]) - 1, (part["alpha"],)
        step = _pclda.z_step_rows
    else:
        W, step = phi.shape[0], _pclda.z_step
        tables = (np.empty((W, K)), np.empty((W, K), dtype=np.int32), np.empty(W))
        _pclda.build_alias(phi, part["alpha"], *tables, 1)
        phi = (phi,)
    z = part["z"].copy()
    moves = np.zeros((W, K), dtype=np.int32)
    step(part["indptr"], part["indices"], part["counts"], part["tok_ptr"], *phi, *tables, key,
         sweep, z, moves, np.zeros(K, dtype=np.int64), 1, part["first_doc"])
    new = dict(part, z=z)
    if collect:
        ndk = np.empty((len(part["tok_ptr"]) - 1, K), dtype=np.int32)
        _pclda.doc_counts(part["tok_ptr"], z, ndk)
        new["sum_dk"] = part["sum_dk"] + ndk        # _State.collect's sum, row by row
    return new, (moves, time.perf_counter() - tick)


def _pchdp_tables(part, ab, K, key, stream):
    """Step 1 of ``PartiallyCollapsedHDPState.sweep`` on a partition: (the
    partition, (its table counts l_k, seconds))."""
    tick = time.perf_counter()
    l_k = np.zeros(K, dtype=np.int64)
    _pchdp.sample_tables(part["tok_ptr"], part["z"], ab, K, key, stream, l_k, 1, part["first_doc"])
    return part, (l_k, time.perf_counter() - tick)


def _pchdp_candidates(part, tail, key, sweep, n_words, ppu):
    """Step 3: (the partition, (its largest candidate tail index, or with the
    urn its marks of ``candidate_marks``, seconds))."""
    tick = time.perf_counter()
    if ppu:
        found = pc_hdp.candidate_marks([(part["first_doc"], part["indptr"], part["indices"], part["counts"])], tail,
                                       key, sweep, n_words)
    else:
        found = _pchdp.max_candidate(part["tok_ptr"], tail, key, pc_hdp.stream(sweep, pc_hdp.CANDIDATES), 1,
                                     part["first_doc"])
    return part, (found, time.perf_counter() - tick)


def _pchdp_z_step(part, phi, ab, K, alpha, tail, key, sweep):
    """Steps 5 and 6 (alias tables of a dense Phi, z | Phi, Psi) on a partition:
    (new partition, (the moves of n_wk and of n_k, seconds))."""
    tick = time.perf_counter()
    W, C = len(phi.rows) - 1 if isinstance(phi, pc_hdp.UrnPhi) else phi.shape[0], len(ab)
    z = part["z"].copy()
    moves, nk_moves = np.zeros((W, C), dtype=np.int32), np.zeros(C, dtype=np.int64)
    pc_hdp.z_step((part["indptr"], part["indices"], part["counts"], part["tok_ptr"]), K,
                  pc_hdp.z_tables(phi, ab, K, 1), ab, alpha, tail, key, sweep, z, moves, nk_moves, 1,
                  part["first_doc"])
    return dict(part, z=z), (moves, nk_moves, time.perf_counter() - tick)


def _take(docs, rows):
    """Documents ``rows`` (in that order) of a partition: (lengths, indices, counts).
    An on-disk partition reads only these documents (``Corpus._documents``:
    positioned reads, nothing left resident)."""
    if "on_disk" in docs:
        sub, _ = _opened(docs["on_disk"])._documents(docs["on_disk"][1] + rows)
        return np.diff(sub.indptr), sub.indices, sub.counts
    ptr = docs["indptr"]
    lengths = ptr[rows + 1] - ptr[rows]
    spans = [np.arange(ptr[r], ptr[r + 1]) for r in rows]
    at = np.concatenate(spans) if spans else np.zeros(0, dtype=np.int64)
    return lengths, docs["indices"][at], docs["counts"][at]


def _online_local_step(estimator, state, rng, n_words, pieces, order):
    """The online estimator's local step on the minibatch made of ``pieces``
    (documents of consecutive partitions) in the order ``order`` (positions
    in the concatenated pieces): (n_new, statistics, the advanced generator,
    seconds). ``rng`` is copied: a recomputed task draws the same numbers."""
    tick = time.perf_counter()
    rng = copy.deepcopy(rng)
    n_new, stats = estimator._local_step(_minibatch(pieces, order, n_words), state, rng)
    return n_new, stats, rng, time.perf_counter() - tick


def _partition_local_step(estimator, state, docs, rows, n_words):
    """The local step of a sum-over-documents estimator on the documents
    ``rows`` of a partition: (statistics, seconds)."""
    tick = time.perf_counter()
    _, stats = estimator._local_step(_minibatch([_take(docs, rows)], np.arange(len(rows)), n_words), state, None)
    return stats, time.perf_counter() - tick


def _minibatch(pieces, order, n_words):
    """The Minibatch of the documents ``order`` of the concatenated ``pieces`` (``_take``)."""
    lengths = np.concatenate([p[0] for p in pieces])
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    sub = Corpus._from_arrays(indptr, np.concatenate([p[1] for p in pieces]), np.concatenate([p[2] for p in pieces]),
                              n_words)
    return Minibatch(sub, order, np.full(n_words, -1, dtype=np.int32))


# -- batch estimators: one plan per algorithm ---------------------------------------------
def _labelled(state, labels, start, stop):
    """A partially collapsed sampler's partition: its documents, the number of
    its first one (whose keyed streams it uses), its token pointers from 0 and
    its tokens' labels z."""
    tp = state.tok_ptr
    return dict(_documents(state.corpus, start, stop), first_doc=int(start), tok_ptr=tp[start:stop + 1] - tp[start],
                z=labels[tp[start]:tp[stop]])


def _gather_labels(labels, tok_ptr, parts, bounds):
    """Copy the partitions' labels z into the client's ``labels``."""
    for p, part in enumerate(parts):
        labels[tok_ptr[bounds[p]]:tok_ptr[bounds[p + 1]]] = part["z"]


def _with_rows(state, start, stop, **per_document):
    """A variational plan's partition: its documents, alpha, its pairs' rows of
    the responsibilities r and its rows of the ``per_document`` arrays."""
    c = state.corpus
    lo, hi = c.indptr[start], c.indptr[stop]
    rows = {name: None if a is None else a[start:stop] for name, a in per_document.items()}
    return dict(_documents(c, start, stop), alpha=state.alpha, r=state.r[lo:hi], **rows)


def _gather_rows(state, parts, bounds, **per_document):
    """Copy the partitions' rows of r and of the ``per_document`` arrays into the client's arrays."""
    indptr = state.corpus.indptr
    for p, part in enumerate(parts):
        state.r[indptr[bounds[p]]:indptr[bounds[p + 1]]] = part["r"]
        for name, a in per_document.items():
            if a is not None:
                a[bounds[p]:bounds[p + 1]] = part[name]


class _SVB:
    """``lda.StandardVB``, parallel schedule: ``ParallelSVBState.sweep`` with the
    documents on the workers."""

    @staticmethod
    def partition(state, start, stop):      # no responsibilities: the rows follow from the counts
        return dict(_documents(state.corpus, start, stop), alpha=state.alpha, ndk=state.ndk[start:stop])

    @staticmethod
    def prepare(state, n_partitions):
        """Nothing: the local fit is the same on any number of threads."""

    @staticmethod
    def iterate(state, parts, sampling):
        """One iteration; updates ``state.nwk``/``nk``; returns (diagnostics, kernel seconds per partition)."""
        log_word = svb_log_word(state.nwk, state.nk, state.eta, state.eta_tot)
        stats = parts.step(_svb_step, log_word)
        # the partitions' counts added in partition order (the threaded fit adds each word's pairs in corpus order)
        np.sum(np.stack([s[0] for s in stats]), axis=0, out=state.nwk)
        state.nk = state.nwk.sum(axis=0)
        delta, entropy, documents, worker = (np.array([s[i] for s in stats]) for i in range(1, 5))
        A, lengths = state.alpha.sum(), state.lengths
        # the topics and entropy terms as svb_bound computes them (no documents: ndk lives on the workers)
        bound = svb_bound(state.alpha, state.eta, lengths[:0], state.ndk[:0], state.nwk, entropy.sum())
        bound["documents"] = float(len(lengths) * gammaln(A) - gammaln(lengths + A).sum() + documents.sum())
        return {"delta": float(delta.sum()) / state.corpus.n_tokens, "bound": bound}, worker

    @staticmethod
    def gather_into(state, parts, bounds):
        for p, part in enumerate(parts):
            state.ndk[bounds[p]:bounds[p + 1]] = part["ndk"]


class _CollapsedVB:
    """``lda.CollapsedVB``, delayed schedule: ``DelayedCVBState.sweep`` with the
    documents (and their rows of r and of the document counts) on the workers,
    one block per partition."""

    @staticmethod
    def partition(state, start, stop):
        return dict(_with_rows(state, start, stop, vb_dk=state.vb_dk, var_dk=state.var[0]), eta=state.eta,
                    mode=state.mode)

    @staticmethod
    def prepare(state, n_partitions):
        """The state of the local fit with ``n_threads = n_partitions`` (what a
        local resume of a checkpoint continues with): a delayed state with that
        many blocks, a new one counted in those blocks (as its ``__init__``)."""
        if not isinstance(state, DelayedCVBState):      # one thread's SequentialState: the same attributes
            state.__class__ = DelayedCVBState
        state.n_threads = n_partitions
        if state.n_sweeps == 0:
            state._recount()

    @staticmethod
    def iterate(state, parts, sampling):
        """``SequentialState.sweep``: one sweep, merged (or recounted) by the state's own methods in partition order."""
        recount = (state.n_sweeps + 1) % _RECOUNT_EVERY == 0
        stats = parts.step(_cvb_step, recount, *state.shared())
        if recount:     # the recount overwrites every shared count: the sweep's merge is not needed
            state.set_counts([s[0] for s in stats])
        else:
            state.merge([np.stack(copies) for copies in zip(*(s[0] for s in stats))])
        state.n_sweeps += 1
        delta = 0.0
        for s in stats:     # cvb_parallel_sweep's sum over its threads
            delta += s[1]
        return {"delta": delta / max(state.n_vb_tokens, 1)}, np.array([s[2] for s in stats])

    @staticmethod
    def gather_into(state, parts, bounds):
        _gather_rows(state, parts, bounds, vb_dk=state.vb_dk, var_dk=state.var[0])


class _PartiallyCollapsed:
    """``lda.PartiallyCollapsedGibbs``: ``PartiallyCollapsedState.sweep`` and
    ``collect`` with the labels z (and the sums of n_jk) on the workers."""

    @staticmethod
    def partition(state, start, stop):
        collected = state.n_collected and state.doc_topic
        return dict(_labelled(state, state.z, start, stop), alpha=state.alpha,
                    sum_dk=state.sum_dk[start:stop] if collected else 0.0)

    @staticmethod
    def prepare(state, n_partitions):
        """Nothing: the sampler's draws do not depend on the partitions."""

    @staticmethod
    def iterate(state, parts, sampling):
        tick = time.perf_counter()
        if state.ppu:
            phi = _pclda.sample_phi_urn(state.nwk, state.eta, state.key, 2 * state.n_sweeps + 1, state.n_threads)
        else:
            phi = state.phi
            _pclda.sample_phi(state.nwk, state.eta, state.key, 2 * state.n_sweeps + 1, phi, state.n_threads)
        client = time.perf_counter() - tick
        stats = parts.step(_pc_step, phi, state.key, state.n_sweeps, sampling and state.doc_topic)
        for moves, _ in stats:          # integer sums: exact in any order
            state.nwk += moves
        state.nk = state.nwk.sum(axis=0, dtype=np.int64)
        state.n_sweeps += 1
        if sampling:                    # _State.collect; the partitions add their n_jk
            state.sum_wk = state.sum_wk + state.nwk
            state.n_collected += 1
        return {"client_seconds": client}, np.array([s[1] for s in stats])

    @staticmethod
    def gather_into(state, parts, bounds):
        _gather_labels(state.z, state.tok_ptr, parts, bounds)
        if state.n_collected and state.doc_topic:
            if np.ndim(state.sum_dk) == 0:
                state.sum_dk = np.zeros((state.corpus.n_docs, state.n_components))
            for p, part in enumerate(parts):
                state.sum_dk[bounds[p]:bounds[p + 1]] = part["sum_dk"]


class _PartiallyCollapsedHDP:
    """``hdp.PartiallyCollapsedGibbs``: ``PartiallyCollapsedHDPState.sweep``
    with the labels on the workers, in three rounds: the partitions' table
    counts, their candidate tail topics, their z-step; the serial draws
    between the rounds (concentrations, sticks, the topic slots, Phi) on the
    client, by the state's own methods."""

    @staticmethod
    def partition(state, start, stop):
        return _labelled(state, state.labels, start, stop)

    @staticmethod
    def prepare(state, n_partitions):
        """Nothing: the sampler's draws do not depend on the partitions."""

    @staticmethod
    def iterate(state, parts, sampling):
        t, K, key = state.n_sweeps, state.n_active, state.key
        # the table counts and the candidates need the labels only, not the documents
        steps = [parts.step(_pchdp_tables, state.alpha * state.psi(), K, key, pc_hdp.stream(t, pc_hdp.TABLES),
                            documents=False)]
        l_k = np.sum([s[0] for s in steps[0]], axis=0)      # integer sums: exact in any order
        tick = time.perf_counter()
        K, tail = state.draw_sticks(l_k)
        client = time.perf_counter() - tick
        candidates = -1
        if tail.size:       # with the urn, the candidates' words: the documents too
            steps.append(parts.step(_pchdp_candidates, tail, key, t, state.nwk.shape[0], state.ppu,
                                    documents=state.ppu))
            found = [s[0] for s in steps[-1]]
            candidates = pc_hdp.merge_marks(found, state.nwk.shape[0]) if state.ppu else max(found)
        tick = time.perf_counter()
        ab, phi = state.draw_phi(K, tail, candidates)
        client += time.perf_counter() - tick
        steps.append(parts.step(_pchdp_z_step, phi, ab, K, state.alpha, tail, key, t))
        for moves, nk_moves, _ in steps[-1]:
            state.nwk += moves
            state.nk += nk_moves
        tick = time.perf_counter()
        record = state.end_sweep(l_k)
        record["client_seconds"] = client + time.perf_counter() - tick
        return record, sum(np.array([s[-1] for s in step]) for step in steps)

    @staticmethod
    def gather_into(state, parts, bounds):
        _gather_labels(state.labels, state.tok_ptr, parts, bounds)


class _DirectAssignment:
    """``hdp.DirectAssignmentVB``, online and batch: ``DAState.step`` with the
    E-step of each partition's share of the iteration's documents on its
    worker (``_da_estep``); the partitions hold only their documents, the
    client everything else (the moves and the global step by the state's own
    ``update``)."""

    @staticmethod
    def partition(state, start, stop):
        return _documents(state.corpus, start, stop)

    @staticmethod
    def prepare(state, n_partitions):
        """Nothing: the documents' E-steps do not depend on the partitions."""

    @staticmethod
    def iterate(state, parts, sampling):
        batch = Minibatch(state.corpus, state.next_ids(), state._word_map)
        client, b, ids = parts.client, parts.bounds, batch.doc_ids
        # the minibatch's documents by partition; each share's positions in the drawn order
        part = np.searchsorted(b, ids, side="right") - 1
        by_part = np.argsort(part, kind="stable")
        shares = [(p, pos) for p, pos in enumerate(np.split(by_part, np.cumsum(np.bincount(part))[:-1])) if len(pos)]
        elogphi = state.elogphi(batch.vocab)
        sent = client.submit(_identity, elogphi, pure=False), client.submit(_identity, batch.vocab, pure=False)
        settings, batch_mode = dict(state.settings, n_threads=1), state.settings["mode"] == "batch"
        tasks = [client.submit(_da_estep, parts.futures[p], None if batch_mode else ids[pos] - b[p], *sent,
                               state.alpha * state.beta, settings, state.theta[ids[pos]] if state.warm else None,
                               state.lam.shape[1], pure=False) for p, pos in shares]
        # the local E-step's outputs, rows and pairs in the drawn order, and its sums in the kernel's order
        S, K = batch.n_docs, state.n_components
        theta, ndk, psi_theta = np.empty((S, K + 1)), np.empty((S, K)), np.empty((S, K))
        resp, log_norm = np.empty((len(batch.words), K)), np.empty(len(batch.words))
        worker = []
        for (_, pos), (share, seconds) in zip(shares, client.gather(tasks)):
            pairs = _pairs_of(batch.ptr, pos)
            theta[pos], ndk[pos], psi_theta[pos], resp[pairs], log_norm[pairs] = share
            worker.append(seconds)
        stats, entropy = reduce_estep(batch, elogphi, ndk, resp, log_norm, psi_theta)
        local = _Minibatch(batch, theta, ndk, stats, entropy, resp if settings["split_merge"] else None)
        tick = time.perf_counter()
        record = state.update(local)        # serial in the local fit too: moves, global step, hyperparameters
        record["client_seconds"] = time.perf_counter() - tick
        return record, np.array(worker)

    @staticmethod
    def gather_into(state, parts, bounds):
        """Nothing: the partitions hold only their documents."""


def _da_estep(docs, rows, elogphi, vocab, alpha_beta, settings, theta, n_words):
    """``estep_documents`` on the documents ``rows`` of a partition (None: all
    of them), with the rows of ``elogphi`` (over the minibatch vocabulary
    ``vocab``) of their words and their warm-start ``theta`` (copied: a
    recomputed task starts from the same numbers): ((theta, ndk, psi(theta'),
    responsibilities, log normalisers), seconds)."""
    tick = time.perf_counter()
    if rows is None and "on_disk" not in docs:
        piece = np.diff(docs["indptr"]), docs["indices"], docs["counts"]
    else:       # on disk, all documents (rows None) are a range: one positioned read per file
        piece = _take(docs, np.arange(docs["on_disk"][2] - docs["on_disk"][1]) if rows is None else rows)
    share = _minibatch([piece], np.arange(len(piece[0])), n_words)
    where = np.full(n_words, -1, dtype=np.int64)
    where[vocab] = np.arange(len(vocab))
    theta, ndk, _, _, resp, log_norm, psi_theta = estep_documents(
        share, elogphi[where[share.vocab]], alpha_beta, settings, None if theta is None else theta.copy(), norms=True)
    return (theta, ndk, psi_theta, resp, log_norm), time.perf_counter() - tick


def _pairs_of(ptr, pos):
    """Positions, in a minibatch's CSR pairs (``ptr``), of the pairs of its documents ``pos``, in that order."""
    lengths = ptr[pos + 1] - ptr[pos]
    return np.repeat(ptr[pos] - (np.cumsum(lengths) - lengths), lengths) + np.arange(lengths.sum())


_PLANS = ((StandardVB, _SVB), (CollapsedVB, _CollapsedVB), (PartiallyCollapsedGibbs, _PartiallyCollapsed),
          (PartiallyCollapsedHDP, _PartiallyCollapsedHDP), (DirectAssignmentVB, _DirectAssignment))


class _Partitions:
    """The futures of the partitions' states and the client-side gather/reroot."""

    def __init__(self, client, plan, state, bounds):
        self.client, self.plan, self.state, self.bounds = client, plan, state, bounds
        self.root()

    def root(self):
        """Start the lineage at the client's state: each partition a task holding its arrays."""
        b = self.bounds
        self.futures = [self.client.submit(_identity, self.plan.partition(self.state, b[p], b[p + 1]))
                        for p in range(len(b) - 1)]

    def step(self, task, *args, documents=True):
        """``task(partition, *args)`` on every partition (arrays in ``args`` sent
        once; the documents read for an on-disk partition only if ``documents``);
        the partitions become the first items of the results, the second items
        are gathered and returned."""
        args = [self.client.submit(_identity, a) if isinstance(a, np.ndarray) else a for a in args]
        steps = [self.client.submit(_run_step, task, part, *args, documents=documents) for part in self.futures]
        self.futures = [self.client.submit(operator.getitem, s, 0) for s in steps]
        return self.client.gather([self.client.submit(operator.getitem, s, 1) for s in steps])

    def gather(self):
        """Copy the partitions' arrays into the client's state (checkpoints, the end)."""
        self.plan.gather_into(self.state, self.client.gather(self.futures), self.bounds)


def _fit_batch(estimator, X, client, n_partitions, checkpoint, checkpoint_every, resume):
    """The batch loop of ``BatchEstimator.fit`` with the plan's iterations on the cluster."""
    plan = next(plan for cls, plan in _PLANS if isinstance(estimator, cls))
    loop = estimator._loop_settings(X)
    max_iter, burn_in, tol = loop["max_iter"], loop.get("burn_in"), loop.get("tol")
    state, start, seconds = estimator._start_or_resume(X, resume)
    plan.prepare(state, n_partitions)
    state.restore(X)
    estimator.n_features_in_ = X.n_words
    stopped, it = False, start
    parts = _Partitions(client, plan, state, partition_bounds(X.n_docs, n_partitions))
    for it in range(start + 1, max_iter + 1):
        tick = time.perf_counter()
        metrics, worker = plan.iterate(state, parts, burn_in is not None and it > burn_in)
        spent = time.perf_counter() - tick
        seconds += spent
        stopped = estimator._report(it, **{"n_documents": it * X.n_docs, "fit_seconds": seconds,
                                           "n_components": int(state.n_components),
                                           "driver_seconds": spent - worker.max(), **metrics})
        if stopped or (tol is not None and metrics.get("delta", math.inf) < tol):
            break
        if checkpoint_every and it % checkpoint_every == 0:
            parts.gather()
            if checkpoint is not None:
                estimator._checkpoint(state, X, it, seconds, checkpoint)
            parts.root()
    parts.gather()
    estimator.n_iter_ = it
    if stopped and it < max_iter:
        if checkpoint is not None:
            estimator._checkpoint(state, X, it, seconds, checkpoint)
        else:
            estimator._keep_resumable(state, X, it, seconds)
    else:
        for name in ("_resume", "_batch_state", "_average"):
            estimator.__dict__.pop(name, None)
    estimator._set_fitted(state, X)


# -- online estimators -------------------------------------------------------------------
class _RemoteLocalStep:
    """``stats_of(ids)`` of ``OnlineEstimator._fit``: the local step of the
    minibatch ``ids`` on a worker (see the module docstring), and the driver's
    seconds (the round trip's time outside the local step) for the record."""

    def __init__(self, client, estimator, corpus, n_partitions):
        self.client, self.estimator, self.n_words = client, estimator, corpus.n_words
        self.bounds = partition_bounds(corpus.n_docs, n_partitions)
        b = self.bounds
        self.parts = [client.submit(_identity, _documents(corpus, b[p], b[p + 1])) for p in range(len(b) - 1)]
        # the worker's copy: parameters only (the hook reads no fitted attribute)
        self.copy = client.submit(_identity, type(estimator)(**estimator.get_params()), pure=False)

    def __call__(self, ids):
        tick = time.perf_counter()
        est, b, client = self.estimator, self.bounds, self.client
        part = np.searchsorted(b, ids, side="right") - 1
        # the minibatch in partition order (a stable sort keeps the drawn order inside a partition) ...
        by_part = np.argsort(part, kind="stable")
        rows = {p: ids[by_part[part[by_part] == p]] - b[p] for p in np.unique(part)}
        if est._sum_over_documents:
            # each partition's share where it lives, summed here (the sum's order differs from the local fit's)
            state = client.submit(_identity, est._state, pure=False)
            shares = client.gather([client.submit(_partition_local_step, self.copy, state, self.parts[p], r,
                                                  self.n_words, pure=False) for p, r in rows.items()])
            n_new, stats, worker = 0, sum(share[0] for share in shares), max(share[1] for share in shares)
        else:
            pieces = [client.submit(_take, self.parts[p], r, pure=False) for p, r in rows.items()]
            # ... whose position k holds document ids[by_part[k]]: the drawn order is argsort(by_part)
            n_new, stats, rng, worker = client.submit(_online_local_step, self.copy, est._state, est._rng,
                                                      self.n_words, pieces, np.argsort(by_part), pure=False).result()
            est._rng.bit_generator.state = rng.bit_generator.state
        return n_new, stats, {"driver_seconds": time.perf_counter() - tick - worker}


# -- the entry point ------------------------------------------------------------------
def fit(estimator, corpus, client=None, n_partitions=None, *, checkpoint=None, checkpoint_every=None, resume=False):
    """Fit ``estimator`` to ``corpus`` on a Dask cluster; returns the fitted estimator.

    Parameters
    ----------
    estimator : one of ``SUPPORTED``
        ``lda.StandardVB`` with ``schedule="parallel"`` or
        ``lda.CollapsedVB`` with ``schedule="delayed"`` (their ``n_threads``
        is not used: each partition runs on one worker thread),
        ``lda.PartiallyCollapsedGibbs`` or ``hdp.PartiallyCollapsedGibbs``
        (its ``n_threads`` draws Phi on the client), ``hdp.DirectAssignmentVB``
        (its ``n_threads`` is not used: each share of an E-step runs on one
        worker thread) or an online estimator
        (its ``n_threads`` runs the local step on the worker). Other
        estimators raise a TypeError listing the supported ones.
    corpus : Corpus or anything ``bnpcore.as_corpus`` accepts
        A corpus opened from disk (``Corpus.open(path)``) is read by the
        workers from ``path``, which every worker must be able to read.
    client : dask.distributed.Client, optional
        None: a ``LocalCluster`` with one thread per worker, made for this call
        and closed after.
    n_partitions : int, optional
        Contiguous document partitions (default: the cluster's worker threads;
        at most the number of documents). CollapsedVB: the fit equals
        ``estimator.set_params(n_threads=n_partitions).fit(corpus)`` exactly;
        the others equal their local fit for any ``n_partitions`` (bit for
        bit; StandardVB to 1e-12, the mean-field online ones to 1e-10).
    checkpoint : str or path, optional
        Model file written every ``checkpoint_every`` iterations (online
        estimators: documents; DirectAssignmentVB: its iterations, which
        online are minibatches, as in its ``fit``) and when a callback stops the fit;
        ``bnpcore.load`` it and call this function (or the estimator's
        ``fit``) with ``resume=True`` to continue.
    checkpoint_every : int, optional
        Batch estimators also gather the state to the client that often and
        restart the task lineage there (a lost worker then costs at most that
        many iterations of recomputation of its partition).
    resume : bool, default False
        Continue an interrupted fit (a callback stopped it, or ``estimator``
        was loaded from a checkpoint) on the same corpus.

    Returns
    -------
    estimator
        Fitted as by its own ``fit``, with ``history_`` records that also
        hold ``driver_seconds``: the iteration's (minibatch's) time outside
        the slowest partition's kernel (the local step), i.e. scheduling,
        communication and the client's reduction and global step.
    """
    check_supported(estimator)
    Client, LocalCluster = import_dask()
    if client is None:
        with LocalCluster(threads_per_worker=1, processes=True) as cluster, Client(cluster) as own:
            return fit(estimator, corpus, own, n_partitions, checkpoint=checkpoint,
                       checkpoint_every=checkpoint_every, resume=resume)
    X = as_corpus(corpus)
    if X.n_tokens == 0:
        raise ValueError("the training corpus has no tokens")
    if n_partitions is None:
        n_partitions = sum(client.nthreads().values())
    n_partitions = min(check_int(n_partitions, "n_partitions", minimum=1), X.n_docs)
    if checkpoint_every is not None:
        check_int(checkpoint_every, "checkpoint_every", minimum=1, maximum=None)
    with _quiet_large_graphs():
        if isinstance(estimator, OnlineEstimator):
            estimator._fit(X, _RemoteLocalStep(client, estimator, X, n_partitions), checkpoint=checkpoint,
                           checkpoint_every=checkpoint_every, resume=resume)
        else:
            _fit_batch(estimator, X, client, n_partitions, checkpoint, checkpoint_every, resume)
    _keep_text_pipeline(estimator, X, refit=not resume)     # as fit does: a corpus from text gives text_pipeline_
    return estimator


@contextlib.contextmanager
def _quiet_large_graphs():
    """The partitions' arrays travel inside their root tasks (so that Dask can
    recompute them): no warning about graph size for them."""
    import dask
    with dask.config.set({"distributed.admin.large-graph-warning-threshold": 2 ** 62}):
        yield
