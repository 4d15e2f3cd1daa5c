"""One table for every speed/quality comparison: bnpcore and peer libraries on the
same split, scored by the same bnpcore evaluation function.

Each benchmark script builds ``Row``s (peers skipped with a message when not
installed) and prints them with ``print_table``. The usual pattern::

    from harness import bnpcore_row, print_table, token_split
    corpus, observed, heldout = token_split("kos")
    rows = [bnpcore_row(hdp.CollapsedVB(max_iter=100, random_state=0), observed, heldout,
                        algorithm="CV-HDP", settings="K<=100, 100 sweeps", iterations=100)]
    print_table(rows)

Every row is scored the same way: each system's document-topic estimate for
the observed tokens of each document and its topic-word estimate, combined by
:func:`bnpcore.evaluation.token_log_likelihood` on the held-out tokens of the
same documents ([CVHDP] eq 16, [HYB] eq 30 with point estimates). Training
time excludes loading data and scoring.
"""
import collections
import dataclasses
import functools
import inspect
import os
import sys
import threading
import time

import numpy as np


@dataclasses.dataclass
class Row:
    system: str             # "bnpcore", "gensim", "tomotopy", "sklearn", "lda"
    algorithm: str          # e.g. "CGS", "CVB0", "HDP online VB"
    settings: str           # e.g. "K=100, 100 sweeps"
    threads: int
    train_seconds: float
    tokens_per_second: float
    topics_used: int
    heldout_loglik: float   # per held-out word, bnpcore.evaluation


def timed(fn, repeats):
    """(shortest, median, result) of ``repeats`` wall-clock runs of ``fn()``:
    seeded fits give the same result every run, so the shortest is the least
    disturbed measurement on a shared machine."""
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return float(np.min(times)), float(np.median(times)), out


def iteration_seconds(history):
    """Time of each iteration of a fit, from the cumulative ``fit_seconds`` of its records."""
    return np.diff([0.0] + [rec["fit_seconds"] for rec in history])


def print_table(rows, reference="bnpcore"):
    """Print rows with the time ratio to the first row of the ``reference`` system."""
    ref = next((r.train_seconds for r in rows if r.system == reference), None)
    head = f"{'system':10} {'algorithm':22} {'settings':30} {'thr':>3} {'train s':>9} {'tokens/s':>11} " \
           f"{'topics':>6} {'heldout ll':>10} {'time/bnp':>8}"
    print(head)
    print("-" * len(head))
    for r in rows:
        ratio = f"{r.train_seconds / ref:8.2f}" if ref else "       -"
        print(f"{r.system:10} {r.algorithm:22} {r.settings:30} {r.threads:3d} {r.train_seconds:9.2f} "
              f"{r.tokens_per_second:11.0f} {r.topics_used:6d} {r.heldout_loglik:10.4f} {ratio}")


def token_split(data="kos", vocab=None, test_fraction=0.1, seed=0):
    """``(corpus, observed, heldout)``: ``data`` as ``bnpcore fit --data`` reads it,
    with ``test_fraction`` of each document's tokens held out (the command
    line's default split, so its scores are comparable with these)."""
    from bnpcore.cli import load_data
    corpus = load_data(data, vocab)
    observed, heldout = corpus.split_tokens(test_fraction, random_state=seed)
    return corpus, observed, heldout


def topics_used(doc_topic, doc_lengths, min_share=1e-3):
    """Topics holding at least ``min_share`` of the expected tokens
    ``sum_j N_j theta_jk`` (a model-independent count for LDA, HDP and peers)."""
    mass = np.asarray(doc_lengths, dtype=float) @ np.asarray(doc_topic, dtype=float)
    return int(np.sum(mass >= min_share * mass.sum()))


def normalize_rows(a, empty=None):
    """Rows scaled to sum to 1; all-zero rows become ``empty`` (default uniform)."""
    a = np.asarray(a, dtype=np.float64)
    sums = a.sum(axis=1, keepdims=True)
    out = np.divide(a, sums, out=np.zeros_like(a), where=sums > 0)
    zero = sums[:, 0] <= 0
    out[zero] = np.full(a.shape[1], 1.0 / a.shape[1]) if empty is None else empty / np.sum(empty)
    return out


def timed_row(system, algorithm, settings, threads, fit, extract, observed, heldout, iterations=1):
    """Time ``model = fit()``, then score ``extract(model) -> (doc_topic, topic_word)``
    (estimates for the documents of ``observed``) on ``heldout``.

    ``iterations`` (sweeps or passes over the training tokens) gives tokens/s =
    training tokens x iterations / train seconds.
    """
    from bnpcore.evaluation import token_log_likelihood
    start = time.perf_counter()
    model = fit()
    seconds = time.perf_counter() - start
    doc_topic, topic_word = extract(model)
    ll = token_log_likelihood(doc_topic, topic_word, heldout)
    return Row(system, algorithm, settings, threads, seconds, observed.n_tokens * iterations / seconds,
               topics_used(doc_topic, observed.doc_lengths), ll)


def bnpcore_row(estimator, observed, heldout, algorithm=None, settings=None, iterations=None):
    """Fit any bnpcore topic-model estimator on ``observed`` and score it on
    ``heldout`` with its ``heldout_log_likelihood`` (transform on ``observed`` +
    ``topics_``). ``iterations`` defaults to the number of ``history_`` records."""
    from bnpcore._validation import effective_n_threads
    from bnpcore.cli import heldout_score
    threads = effective_n_threads(getattr(estimator, "n_threads", 1))
    start = time.perf_counter()
    estimator.fit(observed)
    seconds = time.perf_counter() - start
    if iterations is None:
        iterations = max(1, len(getattr(estimator, "history_", ()) or ()))
    doc_topic = estimator.transform(observed)
    return Row("bnpcore", algorithm or type(estimator).__name__, settings or _changed_params(estimator), threads,
               seconds, observed.n_tokens * iterations / seconds, topics_used(doc_topic, observed.doc_lengths),
               heldout_score(estimator, observed, heldout, doc_topic))


def _changed_params(estimator):
    text = repr(estimator)
    return text[text.index("(") + 1:-1]


def threads_note():
    """A line saying how many threads the libraries may use, for the table's caption."""
    return f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', 'unset')}, {os.cpu_count()} cpus"


class KernelClock:
    """Seconds and calls of every kernel function (the functions defined in the
    ``bnpcore.kernels._*`` modules) while the ``with`` block runs.

    Each kernel, and every name under which a ``bnpcore`` module imported it,
    is replaced by a timing wrapper for the duration of the block and restored
    after. Only the outermost kernel call of a thread is timed (a kernel that
    calls another module function counts once). Kernels that run in several
    Python threads at once (``map_threads``: DirectAssignmentVB's split
    proposals) add up their threads' seconds. ``parallel`` holds the kernels
    with an ``n_threads`` parameter. The wrapper costs 0.7 microseconds a call
    (measured on a kernel that returns at once), nothing against a kernel's
    milliseconds.
    """

    def __enter__(self):
        self.seconds, self.calls = collections.Counter(), collections.Counter()
        self.parallel = set()
        self._lock = threading.Lock()       # the counters' updates from several threads
        local = threading.local()
        kernels = {}
        for name, module in list(sys.modules.items()):
            if module is None or not name.startswith("bnpcore.kernels._"):
                continue
            for attr, fn in vars(module).items():
                if callable(fn) and not isinstance(fn, type) and getattr(fn, "__module__", None) == name:
                    kernels[id(fn)] = self._wrap(f"{name.rsplit('.', 1)[1]}.{attr}", fn, local)
        self._saved = []
        for name, module in list(sys.modules.items()):
            if module is None or not name.startswith("bnpcore"):
                continue
            for attr, fn in list(vars(module).items()):
                if id(fn) in kernels:
                    self._saved.append((module, attr, fn))
                    setattr(module, attr, kernels[id(fn)])
        return self

    def _wrap(self, label, fn, local):
        try:
            if "n_threads" in inspect.signature(fn).parameters:
                self.parallel.add(label)
        except (TypeError, ValueError):
            pass

        @functools.wraps(fn)
        def timed_kernel(*args, **kwargs):
            if getattr(local, "depth", 0):
                return fn(*args, **kwargs)
            local.depth = 1
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                local.depth = 0
                elapsed = time.perf_counter() - start
                with self._lock:
                    self.seconds[label] += elapsed
                    self.calls[label] += 1
        return timed_kernel

    def __exit__(self, *exc):
        for module, attr, fn in self._saved:
            setattr(module, attr, fn)
        return False


def short_documents(n_docs=50_000, n_words=37_000, n_topics=80, mean_length=46, seed=0):
    """Synthetic token lists shaped like a corpus of short texts (by default
    50,000 documents of about 46 tokens, 2.7 M tokens over 37,000 words, as
    one-line descriptions after ``Corpus.from_texts(min_df=2, max_df=0.5)``):
    each document mixes two of ``n_topics`` Zipf-like topics. Returns the
    documents as lists of words ``"w<id>"``, in their drawn order."""
    rng = np.random.default_rng(seed)
    zipf = 1.0 / np.arange(1, n_words + 1) ** 1.05
    cdfs = []
    for _ in range(n_topics):
        p = zipf[rng.permutation(n_words)] * rng.gamma(0.3, size=n_words)
        cdfs.append(np.cumsum(p / p.sum()))
    weights = rng.dirichlet(np.full(n_topics, 0.5))
    lengths = np.maximum(1, rng.lognormal(np.log(mean_length), 0.6, size=n_docs).astype(np.int64))
    pairs = rng.choice(n_topics, size=(n_docs, 2), p=weights)
    z = pairs[np.repeat(np.arange(n_docs), lengths), rng.integers(2, size=lengths.sum())]
    u = rng.random(lengths.sum())
    ids = np.empty(lengths.sum(), dtype=np.int64)
    for k in range(n_topics):
        m = z == k
        ids[m] = np.minimum(np.searchsorted(cdfs[k], u[m]), n_words - 1)
    words = np.array([f"w{i}" for i in range(n_words)], dtype=object)
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    return [words[ids[a:b]].tolist() for a, b in zip(bounds[:-1], bounds[1:])]
