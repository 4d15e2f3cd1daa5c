"""Fit bnpcore estimators on a Dask cluster (``pip install bnpcore[distributed]``).

``fit(estimator, corpus, client)`` runs the estimator's algorithm with the
documents split into contiguous partitions that live on the Dask workers::

    from dask.distributed import Client
    from bnpcore import datasets, distributed, lda
    client = Client("tcp://scheduler:8786")            # or None: a LocalCluster for the call
    est = distributed.fit(lda.StandardVB(n_components=20, random_state=0), datasets.load_kos(), client)

The driver knows no estimator: it runs the state protocol of
``bnpcore.inference.batch`` (docs/architecture.md). A batch estimator whose
``partitioned`` is True (``SUPPORTED`` lists the built-in ones) fits through
its own batch loop (``BatchEstimator.fit_on_partitions``: ``fit``'s records,
callbacks, tolerance, checkpoints), with each iteration run as
``state.iterate(parts, sampling)`` on the partitions here (cut with
``Corpus.blocks``): every ``parts.map(local_step, *shared)`` runs the
local step on each partition where it lives (the partition's documents and
its rows of the per-document parameters, ``state.partition``; one thread
each) and returns the outputs to the client in partition order, where they
are summed (or, for the steps that say so, merged) and the global step runs.
How each algorithm splits its iteration, and why the fit equals the local one
(bit for bit, or to the order of a sum), its state class says:
``ParallelSVBState``, ``DelayedCVBState``, ``GibbsState`` (AD-LDA),
``PartiallyCollapsedState``, ``PartiallyCollapsedHDPState``,
``hdp.DirectAssignmentVB``'s state, ``hdp.DirectAssignmentGibbs``'s delayed
state (AD-HDP: the partitions' new topics merged by its ``new_topics`` rule). An
estimator outside bnpcore runs here as soon as it implements the protocol
(``examples/unigram_mixture.py``).

The online estimators (``bnpcore.inference.online.OnlineEstimator``:
``hdp.TruncationFreeSVI``, ``hdp.OnlineVB``, ``mixture.TruncationFreeSVI``,
``mixture.StochasticVB``) run their own online loop with the local step on
the workers. The partitions hold the documents; per minibatch the client
draws the document ids (as the local fit does), the partitions holding them
cut them out, and one worker assembles the minibatch in the drawn order and
runs the estimator's ``local_step`` on the broadcast global state (K x W
doubles) and random generator; the client applies the ``global_step`` with the
returned statistics and rho_t, and takes the advanced generator back
(``OnlineEstimator.fit_with_local_step``). The local fit calls the same local
step in the same order, so the fit equals it bit for bit. The truncation-free
local steps are one Gibbs sampler over the whole minibatch, so a minibatch is
one task; the mean-field ones (``additive_local_step``: ``hdp.OnlineVB``,
``mixture.StochasticVB``) run on
each partition's share of the minibatch where it lives, and the client sums
the shares: the fit equals the local one up to the order of those sums
(within 1e-10).

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
import operator
import os
import socket
import threading
import time

import numpy as np

from bnpcore._validation import check_int
from bnpcore.corpus import Corpus, as_corpus
from bnpcore.corpus_io import META_FILE
from bnpcore.inference.batch import BatchEstimator, block_bounds
from bnpcore.inference.online import Minibatch, OnlineEstimator

__all__ = ["fit", "SUPPORTED", "check_supported", "import_dask", "partition_bounds"]

#: The built-in estimators the driver runs, as shown in errors (and any other
#: whose state implements the local and global steps).
SUPPORTED = ("bnpcore.lda.StandardVB (schedule='parallel', optimize_hyperparameters=False)",
             "bnpcore.lda.CollapsedGibbs (AD-LDA on the partitions, optimize_hyperparameters=False)",
             "bnpcore.lda.CollapsedVB (schedule='delayed', optimize_hyperparameters=False)",
             "bnpcore.lda.PartiallyCollapsedGibbs (optimize_hyperparameters=False)",
             "bnpcore.hdp.PartiallyCollapsedGibbs",
             "bnpcore.hdp.DirectAssignmentVB (mode='online' or 'batch')",
             "bnpcore.hdp.DirectAssignmentGibbs (schedule='delayed': AD-HDP on the partitions)",
             "the online estimators bnpcore.hdp.TruncationFreeSVI, bnpcore.hdp.OnlineVB, "
             "bnpcore.mixture.TruncationFreeSVI, bnpcore.mixture.StochasticVB",
             "any batch estimator whose state implements the local and global steps "
             "(bnpcore.inference.batch.BatchState)")


def import_dask():
    """``(Client, LocalCluster)`` of dask.distributed, or an ImportError saying how to install it."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as exc:
        raise ImportError("bnpcore.distributed needs dask.distributed: pip install 'bnpcore[distributed]'") from exc
    return Client, LocalCluster


def check_supported(estimator):
    """Raise a TypeError/ValueError naming what the driver runs unless it runs
    ``estimator``: an online estimator, or a batch estimator that declares
    ``partitioned`` and whose ``check_partitioned()`` accepts its settings."""
    if isinstance(estimator, OnlineEstimator):
        return
    if not (isinstance(estimator, BatchEstimator) and estimator.partitioned):
        raise TypeError(f"bnpcore.distributed cannot fit {type(estimator).__name__}; it supports "
                        + "; ".join(SUPPORTED))
    estimator.check_partitioned()


def partition_bounds(n_docs, n_partitions):
    """First document of each partition and the end: OpenMP's static schedule
    (the first ``n_docs % P`` chunks one document longer), so partition p holds
    block p of the delayed CVB schedule with ``n_threads = P``
    (``bnpcore.models.lda.thread_blocks``)."""
    return block_bounds(n_docs, n_partitions)


def _documents(corpus, bounds):
    """The documents of each partition ``[bounds[p], bounds[p + 1])``, in order
    (``corpus.blocks(bounds=bounds)``), as the partition holds them: their CSR
    arrays (``indptr`` from 0, ``indices``, ``counts``) for an in-memory corpus;
    for an opened on-disk corpus only ``on_disk``: (its directory, start, stop,
    the fingerprint of those documents), which the worker reads (``_run_step``)."""
    for start, chunk, _ in corpus.blocks(bounds=bounds):
        if corpus.path is None:
            yield _arrays(chunk)
        else:
            yield {"on_disk": (corpus.path, start, start + chunk.n_docs, chunk.fingerprint())}


def _span(corpus, start, stop):
    """Documents [start, stop) as a Corpus of views of ``corpus``'s arrays
    (row pointers from 0): a worker's one partition of its opened corpus
    (``Corpus.blocks`` walks a corpus from its first document, reading the
    counts of every block before)."""
    ptr = np.array(corpus.indptr[start:stop + 1])
    lo, hi = int(ptr[0]), int(ptr[-1])
    return Corpus.from_csr(ptr - lo, corpus.indices[lo:hi], corpus.counts[lo:hi], corpus.n_words, check=False)


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
            stat = os.stat(os.path.join(path, META_FILE))
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
    partition, (the task's output, seconds)). An on-disk partition's documents are views
    of the worker's mapping of the directory, its pages released after the
    task (no copy), and not kept in the partition: the worker reads them again
    when a task needs them."""
    tick = time.perf_counter()
    if not documents or "on_disk" not in part:
        new, out = task(part, *args)
        return new, (out, time.perf_counter() - tick)
    _, start, stop, _ = part["on_disk"]
    corpus = _opened(part["on_disk"])
    span = _span(corpus, start, stop)
    try:
        new, out = task(dict(part, indptr=span.indptr, indices=span.indices, counts=span.counts), *args)
    finally:
        corpus.release_pages()
    new = {key: value for key, value in new.items() if key not in ("indptr", "indices", "counts")}
    return new, (out, time.perf_counter() - tick)



def _identity(value):
    return value


class _Partitions:
    """The futures of the partitions (``state.partition`` of their documents,
    with the documents) on the workers, and ``map``, as
    ``bnpcore.inference.batch.Partitions`` in one process."""

    def __init__(self, client, state, bounds):
        self.client, self.state, self.bounds = client, state, bounds
        self.seconds = np.zeros(len(bounds) - 1)
        self.root()

    def root(self):
        """Start the lineage at the client's state: each partition a task holding its arrays."""
        b = self.bounds
        self.futures = [self.client.submit(_identity, dict(docs, **self.state.partition(start, stop)))
                        for docs, start, stop in zip(_documents(self.state.corpus, b), b[:-1], b[1:])]

    def map(self, step, *shared, documents=True, each=None, updates=True):
        """``step(partition, *shared, *each[p])`` on every partition p (with
        ``each``, a dict: on its partitions only, in order), where it lives
        (arrays in ``shared`` sent once; an on-disk partition's documents read
        only if ``documents``); the partitions become the first items of the
        results (unless ``updates`` is False: the step leaves its partition as
        it is, which then stays the task it was), the second items are
        gathered and returned, and each task's seconds added to ``seconds``."""
        client = self.client
        shared = [client.submit(_identity, a) if isinstance(a, np.ndarray) else a for a in shared]
        which = range(len(self.futures)) if each is None else sorted(each)
        steps = {p: client.submit(_run_step, step, self.futures[p], *shared, *(() if each is None else each[p]),
                                  documents=documents, pure=each is None) for p in which}
        for p, s in steps.items() if updates else ():
            self.futures[p] = client.submit(operator.getitem, s, 0)
        out = client.gather([client.submit(operator.getitem, s, 1) for s in steps.values()])
        for p, (_, seconds) in zip(which, out):
            self.seconds[p] += seconds
        return [result for result, _ in out]

    def gather(self):
        """Copy the partitions' per-document values into the client's state (checkpoints, the end)."""
        self.state.gather(self.client.gather(self.futures), self.bounds)


# -- online estimators: their local step on the workers ------------------------------------
def _take(docs, rows):
    """Documents ``rows`` (in that order) of a partition: (lengths, indices, counts).
    An on-disk partition reads only these documents (``Corpus.read_documents``:
    positioned reads, nothing left resident)."""
    if "on_disk" in docs:
        sub, _ = _opened(docs["on_disk"]).read_documents(docs["on_disk"][1] + rows)
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
    n_new, stats = estimator.local_step(_minibatch(pieces, order, n_words), state, rng)
    return n_new, stats, rng, time.perf_counter() - tick


def _partition_local_step(estimator, state, docs, rows, n_words):
    """The local step of a sum-over-documents estimator on the documents
    ``rows`` of a partition: (statistics, seconds)."""
    tick = time.perf_counter()
    _, stats = estimator.local_step(_minibatch([_take(docs, rows)], np.arange(len(rows)), n_words), state, None)
    return stats, time.perf_counter() - tick


def _minibatch(pieces, order, n_words):
    """The Minibatch of the documents ``order`` of the concatenated ``pieces`` (``_take``)."""
    lengths = np.concatenate([p[0] for p in pieces])
    indptr = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
    indices, counts = (np.ascontiguousarray(np.concatenate([p[i] for p in pieces]), dtype=np.int32) for i in (1, 2))
    return Minibatch.from_arrays(indptr, indices, counts, order, np.full(n_words, -1, dtype=np.int32))


class _RemoteLocalStep:
    """``stats_of(ids, state, rng)`` of ``OnlineEstimator.fit_with_local_step``:
    the local step of the minibatch ``ids`` on a worker (see the module
    docstring), and the driver's seconds (the round trip's time outside the
    local step) for the record."""

    def __init__(self, client, estimator, corpus, n_partitions):
        self.client, self.estimator, self.n_words = client, estimator, corpus.n_words
        self.bounds = partition_bounds(corpus.n_docs, n_partitions)
        self.parts = [client.submit(_identity, docs) for docs in _documents(corpus, self.bounds)]
        # the worker's copy: parameters only (the local step reads no fitted attribute)
        self.copy = client.submit(_identity, type(estimator)(**estimator.get_params()), pure=False)

    def __call__(self, ids, state, rng):
        tick = time.perf_counter()
        est, b, client = self.estimator, self.bounds, self.client
        part = np.searchsorted(b, ids, side="right") - 1
        # the minibatch in partition order (a stable sort keeps the drawn order inside a partition) ...
        by_part = np.argsort(part, kind="stable")
        rows = {p: ids[by_part[part[by_part] == p]] - b[p] for p in np.unique(part)}
        if est.additive_local_step:
            # each partition's share where it lives, summed here (the sum's order differs from the local fit's)
            state = client.submit(_identity, state, pure=False)
            shares = client.gather([client.submit(_partition_local_step, self.copy, state, self.parts[p], r,
                                                  self.n_words, pure=False) for p, r in rows.items()])
            n_new, stats, worker = 0, sum(share[0] for share in shares), max(share[1] for share in shares)
        else:
            pieces = [client.submit(_take, self.parts[p], r, pure=False) for p, r in rows.items()]
            # ... whose position k holds document ids[by_part[k]]: the drawn order is argsort(by_part)
            n_new, stats, advanced, worker = client.submit(_online_local_step, self.copy, state, rng, self.n_words,
                                                           pieces, np.argsort(by_part), pure=False).result()
            rng.bit_generator.state = advanced.bit_generator.state
        return n_new, stats, {"driver_seconds": time.perf_counter() - tick - worker}


# -- the entry point ------------------------------------------------------------------
def fit(estimator, corpus, client=None, n_partitions=None, *, checkpoint=None, checkpoint_every=None, resume=False):
    """Fit ``estimator`` to ``corpus`` on a Dask cluster; returns the fitted estimator.

    Parameters
    ----------
    estimator : one of ``SUPPORTED``
        A batch estimator whose state implements the local and global steps
        (``partitioned``; their ``n_threads`` is not used by the local steps:
        each partition runs on one worker thread; ``hdp.PartiallyCollapsedGibbs``
        draws Phi on the client with it), or an online estimator
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
        the slowest partition's local steps, i.e. scheduling, communication
        and the client's reduction and global step.
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
            estimator.fit_with_local_step(X, _RemoteLocalStep(client, estimator, X, n_partitions),
                                          checkpoint=checkpoint, checkpoint_every=checkpoint_every, resume=resume)
        else:
            def partitions(state):
                state = state.for_partitions(n_partitions)
                state.restore(X)
                return state, _Partitions(client, state, partition_bounds(X.n_docs, n_partitions))
            estimator.fit_on_partitions(X, partitions, checkpoint=checkpoint, checkpoint_every=checkpoint_every,
                                        resume=resume)
    return estimator


@contextlib.contextmanager
def _quiet_large_graphs():
    """The partitions' arrays travel inside their root tasks (so that Dask can
    recompute them): no warning about graph size for them."""
    import dask
    with dask.config.set({"distributed.admin.large-graph-warning-threshold": 2 ** 62}):
        yield
