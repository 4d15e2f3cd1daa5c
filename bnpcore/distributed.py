"""Fit bnpcore estimators on a Dask cluster (``pip install bnpcore[distributed]``).

``fit(estimator, corpus, client)`` runs the estimator's algorithm with the
documents split into contiguous partitions that live on the Dask workers::

    from dask.distributed import Client
    from bnpcore import datasets, distributed, lda
    client = Client("tcp://scheduler:8786")            # or None: a LocalCluster for the call
    est = distributed.fit(lda.StandardVB(n_components=20, random_state=0), datasets.load_kos(), client)

Supported: ``lda.StandardVB`` with the parallel schedule (the batch E-step and
M-step of Blei, Ng & Jordan 2003, "Latent Dirichlet allocation", section 5.3).
Each partition keeps its responsibility rows r and document-topic counts N_jk
on a worker; per iteration the client broadcasts the word factor
psi(N_kw + eta_w) - psi(N_k + sum(eta)) (K x W doubles), every partition runs
the estimator's own kernel on its documents with one thread and returns its
word-topic counts (K x W doubles) with its share of delta and of the bound,
and the client sums them in partition order. The partitions are OpenMP's
static chunks, so the fit equals the local one with ``n_threads =
n_partitions`` bit for bit (topics, proportions, delta); only the
"documents" term of the recorded bound, a sum over D x K entries, is summed
per partition and may differ from the local one in the last digits.

Fault tolerance: every task is a pure function of its inputs (a partition's
state in, a new state out) and the initial partitions are tasks too, so Dask
recomputes the state of a partition whose worker died from its inputs; with
``checkpoint_every`` the client gathers the state every that many
iterations (writing it to ``checkpoint`` if given, a file that ``fit(...,
resume=True)`` here or the estimator's own ``fit(X, resume=True)`` continue)
and restarts the lineage from it, which bounds the recomputation.
"""
import contextlib
import operator
import time

import numpy as np
from scipy.special import gammaln

from bnpcore._validation import check_int, check_random_state
from bnpcore.corpus import as_corpus
from bnpcore.kernels import _lda
from bnpcore.kernels.special import digamma
from bnpcore.models.lda import StandardVB, svb_bound

__all__ = ["fit", "SUPPORTED", "check_supported", "import_dask", "partition_bounds"]

#: What the driver runs, as shown in errors.
SUPPORTED = ("bnpcore.lda.StandardVB (schedule='parallel', optimize_hyperparameters=False)",)


def import_dask():
    """``(Client, LocalCluster)`` of dask.distributed, or an ImportError saying how to install it."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as exc:
        raise ImportError("bnpcore.distributed needs dask.distributed: pip install 'bnpcore[distributed]'") from exc
    return Client, LocalCluster


def check_supported(estimator):
    """Raise a TypeError/ValueError naming what the driver runs unless it runs ``estimator``."""
    if not isinstance(estimator, StandardVB):
        raise TypeError(f"bnpcore.distributed cannot fit {type(estimator).__name__}; it supports "
                        + "; ".join(SUPPORTED))
    if estimator.schedule != "parallel" or estimator.optimize_hyperparameters:
        raise ValueError("bnpcore.distributed runs StandardVB with schedule='parallel' and "
                         f"optimize_hyperparameters=False only, got schedule={estimator.schedule!r}, "
                         f"optimize_hyperparameters={estimator.optimize_hyperparameters!r}")


def partition_bounds(n_docs, n_partitions):
    """First document of each partition and the end: OpenMP's static schedule
    (the first ``n_docs % P`` chunks one document longer), so partition p holds
    the documents thread p sweeps in ``svb_parallel_step``."""
    q, extra = divmod(n_docs, n_partitions)
    sizes = [q + 1] * extra + [q] * (n_partitions - extra)
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


# -- worker tasks (pure: new arrays out, inputs untouched) ----------------------------
def _partition(corpus, state, start, stop):
    """The arrays of documents [start, stop): a worker's share of the state."""
    lo, hi = corpus.indptr[start], corpus.indptr[stop]
    return {"indptr": corpus.indptr[start:stop + 1] - lo, "indices": corpus.indices[lo:hi],
            "counts": corpus.counts[lo:hi], "alpha": state.alpha, "r": state.r[lo:hi], "ndk": state.ndk[start:stop]}


def _identity(value):
    return value


def _svb_step(part, log_word):
    """One parallel-schedule SVB iteration of a partition: (new partition,
    (its word-topic counts, delta, entropy, documents term of the bound, seconds))."""
    tick = time.perf_counter()
    alpha, r, ndk = part["alpha"], part["r"].copy(), np.empty_like(part["ndk"])
    log_doc = digamma(part["ndk"] + alpha)
    log_doc -= log_doc.max(axis=1, keepdims=True)
    nwk = np.empty((1,) + log_word.shape)
    delta, entropy = _lda.svb_parallel_step(part["indptr"], part["indices"], part["counts"], log_word, log_doc,
                                            r, ndk, nwk, 1)
    documents = (gammaln(ndk + alpha) - gammaln(alpha)).sum()
    new = dict(part, r=r, ndk=ndk)
    return new, (nwk[0], delta, entropy, documents, time.perf_counter() - tick)


# -- the driver ------------------------------------------------------------------------
class _Partitions:
    """The futures of the partitions' states and the client-side gather/reroot."""

    def __init__(self, client, corpus, state, bounds):
        self.client, self.corpus, self.bounds = client, corpus, bounds
        self.root(state)

    def root(self, state):
        """Start the lineage at ``state``: each partition a task holding its arrays."""
        b = self.bounds
        self.futures = [self.client.submit(_identity, _partition(self.corpus, state, b[p], b[p + 1]))
                        for p in range(len(b) - 1)]

    def step(self, log_word):
        """Run one iteration on every partition; returns the gathered statistics."""
        lw = self.client.submit(_identity, log_word)
        steps = [self.client.submit(_svb_step, part, lw) for part in self.futures]
        self.futures = [self.client.submit(operator.getitem, s, 0) for s in steps]
        return self.client.gather([self.client.submit(operator.getitem, s, 1) for s in steps])

    def gather_into(self, state):
        """Copy the partitions' r and N_jk into ``state`` (checkpoints, the end)."""
        b, indptr = self.bounds, self.corpus.indptr
        for p, part in enumerate(self.client.gather(self.futures)):
            state.r[indptr[b[p]]:indptr[b[p + 1]]] = part["r"]
            state.ndk[b[p]:b[p + 1]] = part["ndk"]


def _iterate(state, parts, n_tokens):
    """One iteration on the cluster: ParallelSVBState.sweep with the documents
    on the workers; updates ``state.nwk``/``nk``, returns (diagnostics, seconds,
    seconds outside the slowest partition's kernel)."""
    tick = time.perf_counter()
    log_word = digamma(state.nwk + state.eta[:, None]) - digamma(state.nk + state.eta_tot)
    log_word -= log_word.max(axis=1, keepdims=True)
    stats = parts.step(log_word)
    # the same reductions as the threaded kernel: partition order, np.sum over axis 0
    np.sum(np.stack([s[0] for s in stats]), axis=0, out=state.nwk)
    state.nk = state.nwk.sum(axis=0)
    delta, entropy, documents, worker = (np.array([s[i] for s in stats]) for i in range(1, 5))
    A, lengths = state.alpha.sum(), state.lengths
    # the topics and entropy terms as svb_bound computes them (no documents: ndk lives on the workers)
    bound = svb_bound(state.alpha, state.eta, lengths[:0], state.ndk[:0], state.nwk, entropy.sum())
    bound["documents"] = float(len(lengths) * gammaln(A) - gammaln(lengths + A).sum() + documents.sum())
    seconds = time.perf_counter() - tick
    return {"delta": float(delta.sum()) / n_tokens, "bound": bound}, seconds, seconds - worker.max()


def fit(estimator, corpus, client=None, n_partitions=None, *, checkpoint=None, checkpoint_every=None, resume=False):
    """Fit ``estimator`` to ``corpus`` on a Dask cluster; returns the fitted estimator.

    Parameters
    ----------
    estimator : lda.StandardVB
        With ``schedule="parallel"`` (its ``n_threads`` is not used: each
        partition runs on one worker thread). Other estimators raise a
        TypeError listing the supported ones (``SUPPORTED``).
    corpus : Corpus or anything ``bnpcore.as_corpus`` accepts
    client : dask.distributed.Client, optional
        None: a ``LocalCluster`` with one thread per worker, made for this call
        and closed after.
    n_partitions : int, optional
        Contiguous document partitions (default: the cluster's worker threads;
        at most the number of documents). The fit equals
        ``estimator.set_params(n_threads=n_partitions).fit(corpus)`` exactly.
    checkpoint : str or path, optional
        Model file written every ``checkpoint_every`` iterations and when a
        callback stops the fit; ``bnpcore.load`` it and call this function (or
        the estimator's ``fit``) with ``resume=True`` to continue.
    checkpoint_every : int, optional
        Also gathers the state to the client that often and restarts the
        task lineage there (a lost worker then costs at most that many
        iterations of recomputation of its partition).
    resume : bool, default False
        Continue an interrupted fit (a callback stopped it, or ``estimator``
        was loaded from a checkpoint) on the same corpus.

    Returns
    -------
    estimator
        Fitted as by its own ``fit``: ``components_``, ``topics_``,
        ``doc_topic_``, ``history_`` (``delta``, ``bound``, ``fit_seconds``,
        plus ``driver_seconds``: the iteration's time outside the slowest
        partition's kernel, i.e. scheduling, communication and reduction).
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
    loop = estimator._check_params()
    max_iter, tol = loop["max_iter"], loop["tol"]
    if n_partitions is None:
        n_partitions = sum(client.nthreads().values())
    n_partitions = min(check_int(n_partitions, "n_partitions", minimum=1), X.n_docs)
    if checkpoint_every is not None:
        check_int(checkpoint_every, "checkpoint_every", minimum=1)
    state, start, seconds = estimator._resume_state(X, None) if resume else (_fresh_state(estimator, X), 0, 0.0)
    state.n_threads = n_partitions      # what a local resume of a checkpoint continues with
    state.restore(X)
    estimator.n_features_in_ = X.n_words
    stopped, it = False, start
    with _quiet_large_graphs():
        parts = _Partitions(client, X, state, partition_bounds(X.n_docs, n_partitions))
        for it in range(start + 1, max_iter + 1):
            metrics, spent, driver = _iterate(state, parts, X.n_tokens)
            seconds += spent
            stopped = estimator._report(it, n_documents=it * X.n_docs, fit_seconds=seconds,
                                        n_components=int(state.n_components), driver_seconds=driver, **metrics)
            if stopped or (tol is not None and metrics["delta"] < tol):
                break
            if checkpoint_every and it % checkpoint_every == 0:
                parts.gather_into(state)
                if checkpoint is not None:
                    estimator._checkpoint(state, X, it, seconds, checkpoint)
                parts.root(state)
        parts.gather_into(state)
    estimator.n_iter_ = it
    if stopped and it < max_iter:
        if checkpoint is not None:
            estimator._checkpoint(state, X, it, seconds, checkpoint)
        else:
            estimator._keep_resumable(state, X, it, seconds)
    else:
        estimator.__dict__.pop("_resume", None)
        estimator.__dict__.pop("_batch_state", None)
    estimator._set_fitted(state, X)
    return estimator


def _fresh_state(estimator, X):
    """A new state, the estimator's previous fit forgotten (as ``BatchEstimator.fit`` starts)."""
    estimator._forget()
    estimator.history_ = []
    return estimator._init_state(X, check_random_state(estimator.random_state))


@contextlib.contextmanager
def _quiet_large_graphs():
    """The partitions' arrays travel inside their root tasks (so that Dask can
    recompute them): no warning about graph size for them."""
    import dask
    with dask.config.set({"distributed.admin.large-graph-warning-threshold": 2 ** 62}):
        yield
