"""Standard VB (ALGORITHMS.md 3.3, test oracles 10.3)."""
import numpy as np
import pytest
from scipy.special import gammaln, logsumexp

from bnpcore.corpus import Corpus
from bnpcore.inference.stats import random_responsibilities
from bnpcore.kernels import _lda
from bnpcore.lda import StandardVB
from bnpcore.models import lda as lda_models
from bnpcore.models.lda import ParallelSVBState, SequentialState, word_index

K = 4



def total(record):
    """The bound of a history record (a dict of named terms)."""
    return sum(record["bound"].values())

def priors(corpus):
    return np.array([0.1, 0.3, 0.05, 0.8]), np.linspace(0.02, 0.3, corpus.n_words)


def rows_by_pair(corpus, r):
    """{(j, w): row} from CSR-ordered rows."""
    docs = np.repeat(np.arange(corpus.n_docs), np.diff(corpus.indptr))
    return {(int(j), int(w)): r[p].copy() for p, (j, w) in enumerate(zip(docs, corpus.indices))}


def new_state(schedule, corpus, seed=0, n_threads=1):
    alpha, eta = priors(corpus)
    rng = np.random.default_rng(seed)
    if schedule == "parallel":
        return ParallelSVBState(corpus, K, alpha, eta, rng, n_threads)
    return SequentialState(corpus, K, alpha, eta, rng, _lda.MODE_SVB, -1)


@pytest.mark.parametrize("schedule", ["parallel", "sequential"])
def test_bound_never_decreases(make_counts, schedule):
    for seed in range(3):
        corpus = Corpus(make_counts(seed))
        alpha, eta = priors(corpus)
        est = StandardVB(n_components=K, alpha=alpha, eta=eta, max_iter=60, tol=None, schedule=schedule,
                         n_threads=1, random_state=seed).fit(corpus)
        bounds = np.array([total(rec) for rec in est.history_])
        assert np.all(np.diff(bounds) >= -1e-10 * np.abs(bounds[1:])), np.diff(bounds).min()
        assert bounds[-1] > bounds[0]


def test_sequential_bound_never_decreases_pair_by_pair(ref, counts):
    """The claim behind the sequential schedule (linearisation bound, E61), on
    the reference update: B_SVB after every single pair update."""
    C = counts[:8, :10]
    alpha, eta = np.array([0.1, 0.3, 0.05, 0.8]), np.linspace(0.02, 0.3, 10)
    rng = np.random.default_rng(1)
    r = {(j, w): rng.dirichlet(np.ones(K)) for j, w, c in ref.pairs_of(C)}
    last = ref.lda_elbo(C, r, alpha, eta)
    for _ in range(3):
        for j, w, c in ref.pairs_of(C):
            ref.svb_pair_update(C, r, j, w, alpha, eta)
            now = ref.lda_elbo(C, r, alpha, eta)
            assert now >= last - 1e-10 * abs(last)
            last = now


@pytest.mark.parametrize("schedule", ["parallel", "sequential"])
def test_bound_equals_standard_lda_elbo(ref, counts, schedule):
    corpus = Corpus(counts)
    alpha, eta = priors(corpus)
    state = new_state(schedule, corpus)
    for _ in range(3):
        if schedule == "parallel":      # the sweep's rows, from the counts before it (the state keeps none)
            rows = ref.svb_rows_from_counts(counts, state.ndk, state.nwk.T, alpha, eta)
        record = state.sweep()
    if schedule == "sequential":
        rows = rows_by_pair(corpus, state.r)
    np.testing.assert_allclose(total(record), ref.lda_elbo(counts, rows, alpha, eta), rtol=1e-10)


def test_parallel_iteration_is_one_blei_em_step(ref, counts):
    corpus = Corpus(counts)
    alpha, eta = priors(corpus)
    state = new_state("parallel", corpus)
    rows = ref.svb_rows_from_counts(counts, state.ndk, state.nwk.T, alpha, eta)    # from the random start
    for _ in range(3):
        before = state.ndk.copy()
        record = state.sweep()
        ndk, nkw = ref.expected_counts(counts, rows)
        np.testing.assert_allclose(state.ndk, ndk, rtol=1e-12)
        np.testing.assert_allclose(state.nwk, nkw.T, rtol=1e-12)
        # delta: the mean absolute change of the document-topic counts per token
        assert record["delta"] == pytest.approx(np.abs(ndk - before).sum() / counts.sum(), rel=1e-12)
        rows = ref.svb_parallel_iteration(counts, rows, alpha, eta)


def test_sequential_sweep_matches_reference(ref, counts):
    corpus = Corpus(counts)
    alpha, eta = priors(corpus)
    state = new_state("sequential", corpus)
    for _ in range(2):
        want = ref.svb_sequential_sweep(counts, rows_by_pair(corpus, state.r), alpha, eta)
        state.sweep()
        got = rows_by_pair(corpus, state.r)
        for key in want:
            np.testing.assert_allclose(got[key], want[key], rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("n_threads", [2, 3])
def test_threads_give_the_same_iteration_bit_for_bit(counts, n_threads):
    corpus = Corpus(counts)
    one, many = new_state("parallel", corpus, n_threads=1), new_state("parallel", corpus, n_threads=n_threads)
    for _ in range(5):
        assert many.sweep() == one.sweep()              # delta and every bound term
        for name in ("ndk", "nwk", "nk"):
            np.testing.assert_array_equal(getattr(many, name), getattr(one, name), err_msg=name)


def test_parallel_state_keeps_no_rows_and_draws_its_start_in_blocks(counts, monkeypatch):
    """The parallel state is O((D + W) K): no array of nnz rows, also after
    restoring a checkpoint written when it kept them; its random start, drawn
    a block of documents at a time, has the counts of one draw of every row."""
    corpus = Corpus(counts)
    alpha, eta = priors(corpus)
    monkeypatch.setattr(lda_models, "_START_PAIRS", 9)             # blocks of a few documents
    assert corpus.nnz > 3 * corpus.n_words
    state = ParallelSVBState(corpus, K, alpha, eta, np.random.default_rng(5))
    r = random_responsibilities(np.random.default_rng(5), corpus.nnz, K)
    want = np.zeros((corpus.n_docs, K)), np.zeros((corpus.n_words, K)), np.zeros(K)
    _lda.count_expected(corpus.indptr, corpus.indices, corpus.counts, -1, r, *want)
    for got, expected in zip((state.ndk, state.nwk, state.nk), want):
        np.testing.assert_allclose(got, expected, rtol=1e-12)
    state.r = r                                                     # as an old checkpoint has it
    state.restore(corpus)
    state.sweep()
    arrays = [a for a in vars(state).values() if isinstance(a, np.ndarray) and a.ndim == 2]
    assert max(a.size for a in arrays) == max(corpus.n_docs, corpus.n_words) * K


def test_word_index_lists_each_words_pairs_in_corpus_order(make_counts):
    corpus = Corpus(make_counts(3, n_docs=25, n_words=12))
    word_ptr, word_pairs, word_docs = word_index(corpus.indptr, corpus.indices, corpus.n_words)
    docs = np.repeat(np.arange(corpus.n_docs), np.diff(corpus.indptr))
    np.testing.assert_array_equal(word_pairs, np.argsort(corpus.indices, kind="stable"))
    np.testing.assert_array_equal(word_ptr, np.r_[0, np.cumsum(np.bincount(corpus.indices, minlength=12))])
    np.testing.assert_array_equal(word_docs, docs[word_pairs])
    assert all(a.dtype == np.int64 for a in (word_ptr, word_pairs, word_docs))


@pytest.mark.parametrize("gap", [0.0, 300.0, 800.0])
def test_step_against_numpy_also_where_products_underflow(gap):
    """The step's ndk, nwk and sums against NumPy (nwk = sum of c r over each
    word's pairs). With ``gap``, words and documents favour different topics by
    ``gap`` nats: 300 leaves the products ew * ed near 1e-130 (word counts from
    r itself: c / z could overflow), 800 underflows them (r in log space, its
    rows recomputed by the word pass)."""
    rng = np.random.default_rng(1)
    D, W, K = 9, 14, 4
    dense = rng.integers(0, 4, size=(D, W)) * (rng.random((D, W)) < 0.6)
    dense[0] = 0                                                  # an empty document
    corpus = Corpus(dense)
    log_word, log_doc = -rng.random((W, K)), -rng.random((D, K))
    log_word[::2, 1:] -= gap                                      # even words: topic 0
    log_doc[::2, :1] -= gap                                       # even documents: not topic 0
    log_word -= log_word.max(axis=1, keepdims=True)
    log_doc -= log_doc.max(axis=1, keepdims=True)
    docs = np.repeat(np.arange(D), np.diff(corpus.indptr))
    logits = log_word[corpus.indices] + log_doc[docs]
    log_r = logits - logsumexp(logits, axis=1, keepdims=True)
    want_r = np.exp(log_r)
    c = corpus.counts[:, None]
    want_ndk, want_nwk = np.zeros((D, K)), np.zeros((W, K))
    np.add.at(want_ndk, docs, c * want_r)
    np.add.at(want_nwk, corpus.indices, c * want_r)
    old_ndk = rng.random((D, K))
    want_sums = (np.abs(want_ndk - old_ndk).sum(), -(c * np.where(want_r > 0, want_r * log_r, 0.0)).sum())
    index = word_index(corpus.indptr, corpus.indices, W)
    results = []
    for n_threads in (1, 2, 3):
        ndk, nwk = old_ndk.copy(), np.full((W, K), np.nan)
        sums = _lda.svb_parallel_step(corpus.indptr, corpus.indices, corpus.counts, index, log_word, log_doc,
                                      ndk, nwk, n_threads)
        np.testing.assert_allclose(ndk, want_ndk, rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(nwk, want_nwk, rtol=1e-12, atol=1e-300)
        np.testing.assert_allclose(sums, want_sums, rtol=1e-12)
        results.append((ndk, nwk, sums))
    for ndk, nwk, sums in results[1:]:                            # the same bits on any number of threads
        for got, want in zip((ndk, nwk), results[0][:2]):
            np.testing.assert_array_equal(got, want)
        assert sums == results[0][2]
    with pytest.raises(ValueError, match="word_index or nwk"):
        _lda.svb_parallel_step(corpus.indptr, corpus.indices, corpus.counts, index, log_word, log_doc,
                               ndk, np.empty((W - 1, K)))


@pytest.mark.parametrize("schedule", ["parallel", "sequential"])
def test_one_topic_bound_is_the_exact_marginal_likelihood(counts, schedule):
    corpus = Corpus(counts)
    eta = np.linspace(0.02, 0.3, corpus.n_words)
    est = StandardVB(n_components=1, alpha=0.7, eta=eta, max_iter=3, schedule=schedule, n_threads=1,
                     random_state=0).fit(corpus)
    n_w = counts.sum(axis=0)
    exact = gammaln(eta.sum()) - gammaln(n_w.sum() + eta.sum()) + (gammaln(n_w + eta) - gammaln(eta)).sum()
    np.testing.assert_allclose(total(est.history_[-1]), exact, rtol=1e-12)
    np.testing.assert_allclose(est.doc_topic_, 1.0)


def test_products_that_underflow_fall_back_to_log_space():
    C = np.array([[3, 0, 1], [0, 2, 0], [1, 1, 0]])
    est = StandardVB(n_components=3, alpha=1e-4, eta=1e-4, max_iter=20, n_threads=1, random_state=0)
    est.fit(Corpus(C))
    bounds = [total(rec) for rec in est.history_]
    assert np.all(np.isfinite(bounds)) and np.all(np.isfinite(est.topics_))
    assert np.all(np.diff(bounds) >= -1e-10 * np.abs(bounds[1:]))
