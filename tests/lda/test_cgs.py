"""Collapsed Gibbs sampling (ALGORITHMS.md 3.2, test oracles 10.2)."""
import itertools

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.stats import ks_2samp

from bnpcore import corpus as corpus_module
from bnpcore.corpus import Corpus
from bnpcore.lda import CollapsedGibbs
from bnpcore.kernels import _lda
from bnpcore.models.lda import GibbsState

ALL = np.iinfo(np.int32).max


def sparse_state(corpus, z, K):
    """Count arrays and word lists of the sparse sampler for assignment z."""
    ndk = np.zeros((corpus.n_docs, K), dtype=np.int32)
    nwk = np.zeros((corpus.n_words, K), dtype=np.int32)
    nk = np.zeros(K, dtype=np.int64)
    _lda.count_samples(corpus.indptr, corpus.indices, corpus.counts, ALL, z, ndk, nwk, nk)
    wtopics = np.empty((corpus.n_words, K), dtype=np.int32)
    wlen = np.empty(corpus.n_words, dtype=np.int32)
    _lda.word_topic_lists(nwk, wtopics, wlen)
    return ndk, nwk, nk, wtopics, wlen


def docs_of(corpus):
    words, ptr = corpus.tokens()
    return [list(words[ptr[j]:ptr[j + 1]]) for j in range(corpus.n_docs)]


@pytest.mark.parametrize("K", [2, 3])
def test_conditional_equals_brute_force_joint(ref, K):
    docs = [[0, 1], [1]]                       # 2 documents, 3 tokens, W = 2
    corpus = Corpus(docs, n_words=2)
    alpha = np.array([0.3, 0.7, 1.1][:K])
    eta = np.array([0.2, 0.5])
    for state in itertools.product(range(K), repeat=3):
        z = np.array(state, dtype=np.int32)
        arrays = sparse_state(corpus, z, K)
        for i in range(3):
            got = _lda.cgs_conditional(corpus.indptr, corpus.indices, corpus.counts, alpha, eta, eta.sum(),
                                       z, *arrays, i)
            logp = []
            for k in range(K):
                zk = z.copy()
                zk[i] = k
                logp.append(ref.log_joint(docs, zk, alpha, eta))
            want = np.exp(np.array(logp) - max(logp))
            np.testing.assert_allclose(got, want / want.sum(), rtol=1e-12, atol=1e-15)
        # the state is left unchanged
        ndk, nwk, nk, wtopics, wlen = sparse_state(corpus, z, K)
        for a, b in zip(arrays[:3] + arrays[4:], (ndk, nwk, nk, wlen)):
            np.testing.assert_array_equal(a, b)
        for w in range(2):   # same topics, still by decreasing count (ties in any order)
            topics = arrays[3][w, :wlen[w]]
            assert set(topics) == set(wtopics[w, :wlen[w]])
            assert np.all(np.diff(nwk[w, topics]) <= 0)


def run_chain(corpus, alpha, eta, K, n_sweeps, seed, thin):
    """States (as integers in base K) of the compiled sampler every ``thin`` sweeps."""
    rng = np.random.default_rng(seed)
    z = rng.integers(0, K, size=corpus.n_tokens, dtype=np.int32)
    _, nwk, nk, wtopics, wlen = sparse_state(corpus, z, K)
    scratch, iscratch = np.empty(3 * K), np.empty(3 * K, dtype=np.int32)
    powers = K ** np.arange(corpus.n_tokens)
    out = np.empty(n_sweeps // thin, dtype=np.int64)
    args = (corpus.indptr, corpus.indices, corpus.counts, alpha, eta, eta.sum(), z, nwk, nk, wtopics, wlen,
            scratch, iscratch, rng)
    for t in range(n_sweeps):
        _lda.cgs_sweep(*args)
        if (t + 1) % thin == 0:
            out[t // thin] = z @ powers
    return out


@pytest.mark.parametrize("docs, K, alpha, eta", [
    ([[0, 0, 1], [1]], 2, [0.3, 0.7], [0.2, 0.5]),      # a pair with count 2
    ([[0, 2], [1, 2]], 2, [0.5, 0.5], [0.1, 0.1, 0.1]),
    ([[0, 1], [1]], 3, [0.2, 0.4, 1.0], [0.3, 0.6]),
])
def test_sampler_stationary_distribution(ref, docs, K, alpha, eta):
    """Histogram of the compiled sparse sampler's states against the exact
    posterior by enumeration (fixed seed; thinning 5 removes the chain's
    autocorrelation)."""
    alpha, eta = np.array(alpha), np.array(eta)
    corpus = Corpus(docs, n_words=len(eta))
    states, post = ref.posterior_by_enumeration(docs_of(corpus), alpha, eta)
    powers = K ** np.arange(corpus.n_tokens)
    index = np.array([s @ powers for s in states])
    draws = run_chain(corpus, alpha, eta, K, n_sweeps=150_000, seed=1, thin=5)
    observed = np.bincount(draws, minlength=K ** corpus.n_tokens)[index]
    assert ref.chi_square_pvalue(observed, post) > 1e-3


def test_counts_and_word_lists_stay_consistent(make_counts):
    C = make_counts(3, n_docs=30, n_words=25, max_count=6)
    corpus = Corpus(C)
    K = 7
    alpha = np.linspace(0.05, 0.5, K)
    eta = np.linspace(0.01, 0.2, corpus.n_words)
    state = GibbsState(corpus, K, alpha, eta, np.random.default_rng(5))
    words, ptr = corpus.tokens()
    docs = np.repeat(np.arange(corpus.n_docs), np.diff(ptr))
    for _ in range(6):
        state.sweep()
        ndk = np.zeros((corpus.n_docs, K), dtype=np.int64)
        nwk = np.zeros((corpus.n_words, K), dtype=np.int64)
        np.add.at(ndk, (docs, state.z), 1)
        np.add.at(nwk, (words, state.z), 1)
        np.testing.assert_array_equal(state.counts()[0], ndk)
        np.testing.assert_array_equal(state.nwk, nwk)
        np.testing.assert_array_equal(state.nk, ndk.sum(0))
        for w in range(corpus.n_words):
            topics = state.wtopics[w, :state.wlen[w]]
            assert set(topics) == set(np.flatnonzero(nwk[w]))
            assert np.all(np.diff(nwk[w, topics]) <= 0), "word list not sorted by count"


def test_large_counts_and_tiny_priors():
    C = np.array([[5000, 3, 0], [0, 1, 2000], [7, 0, 0]])
    corpus = Corpus(C)
    K = 4
    state = GibbsState(corpus, K, np.full(K, 1e-6), np.full(3, 1e-8), np.random.default_rng(0))
    for _ in range(3):
        state.sweep()
    assert state.nk.sum() == corpus.n_tokens
    assert np.all(state.z >= 0) and np.all(state.z < K)


def test_kernels_reject_inconsistent_state():
    corpus = Corpus([[0, 1, 1], [2]], n_words=3)
    K = 2
    ndk, nwk, nk = np.zeros((2, K), np.int32), np.zeros((3, K), np.int32), np.zeros(K, np.int64)
    args = (corpus.indptr, corpus.indices, corpus.counts, ALL)
    with pytest.raises(ValueError, match="sampled tokens"):
        _lda.count_samples(*args, np.zeros(3, np.int32), ndk, nwk, nk)        # 4 tokens
    with pytest.raises(ValueError, match="lie in"):
        _lda.count_samples(*args, np.array([0, 1, 2, 0], np.int32), ndk, nwk, nk)
    with pytest.raises(ValueError, match="responsibility rows"):
        _lda.sequential_sweep(corpus.indptr, corpus.indices, corpus.counts, np.ones(K), np.ones(3), 3.0,
                              {"mode": _lda.MODE_CVB0, "threshold": -1, "do_cg": False, "do_vb": True},
                              np.full((2, K), 0.5), np.zeros(0, np.int32),
                              (np.zeros((2, K)), np.zeros((3, K)), np.zeros(K)), (None, None, None), (ndk, nwk, nk),
                              (np.zeros((0, 2, K), np.int32), np.zeros((0, 3, K), np.int32),
                               np.zeros((0, K), np.int64)), np.zeros(2 * K), None)




def test_sweep_rejects_bad_topics_and_lengths_leaving_a_consistent_state():
    """``cgs_sweep`` checks each document as it reaches it: a bad topic or a z of
    the wrong length raises, the documents before are sampled, and the counts
    and word lists still describe z."""
    corpus = Corpus([[0, 1, 1], [2, 0], [1, 2, 2]], n_words=3)
    K = 3
    alpha, eta = np.full(K, 0.5), np.full(3, 0.1)
    good = np.array([0, 1, 2, 0, 1, 2, 0, 1], np.int32)
    scratch, iscratch = np.empty(3 * K), np.empty(3 * K, np.int32)

    def sweep(z, valid):
        _, nwk, nk, wtopics, wlen = sparse_state(corpus, valid, K)
        _lda.cgs_sweep(corpus.indptr, corpus.indices, corpus.counts, alpha, eta, eta.sum(), z, nwk, nk,
                       wtopics, wlen, scratch, iscratch, np.random.default_rng(0))
        return nwk, nk, wtopics, wlen

    for bad in (K, -1):
        z = good.copy()
        z[-1] = bad                               # in the last document
        with pytest.raises(ValueError, match=rf"topics in z must lie in \[0, {K}\)"):
            sweep(z, good)
    for n in (7, 9):
        with pytest.raises(ValueError, match="one topic per token"):
            sweep(np.resize(good, n), good)
    z = good.copy()
    z[-1] = K
    valid = good.copy()
    _, nwk, nk, wtopics, wlen = sparse_state(corpus, valid, K)
    with pytest.raises(ValueError, match="topics in z"):
        _lda.cgs_sweep(corpus.indptr, corpus.indices, corpus.counts, alpha, eta, eta.sum(), z, nwk, nk,
                       wtopics, wlen, scratch, iscratch, np.random.default_rng(0))
    z[-1] = good[-1]                              # the counts describe z with its last topic as it was
    assert not np.array_equal(z[:5], good[:5]), "the first two documents were not sampled"
    _, want_nwk, want_nk, _, want_wlen = sparse_state(corpus, z, K)
    np.testing.assert_array_equal(nwk, want_nwk)
    np.testing.assert_array_equal(nk, want_nk)
    np.testing.assert_array_equal(wlen, want_wlen)
    for w in range(3):
        assert set(wtopics[w, :wlen[w]]) == set(np.flatnonzero(want_nwk[w]))
@pytest.mark.parametrize("K", [2, 3])
def test_sweep_transition_matrix_leaves_the_posterior_invariant(ref, K):
    """pi P = pi for the exact one-sweep transition matrix of the systematic scan,
    built over all K^N states from the compiled sampler's conditionals (and from
    the naive ones), pi the exact posterior of the collapsed joint."""
    docs = [[0, 1], [1]]
    corpus = Corpus(docs, n_words=2)
    alpha, eta = np.array([0.3, 0.7, 1.1][:K]), np.array([0.2, 0.5])
    states, post = ref.posterior_by_enumeration(docs, alpha, eta)

    def compiled(z, i):
        z = z.astype(np.int32)
        return _lda.cgs_conditional(corpus.indptr, corpus.indices, corpus.counts, alpha, eta, eta.sum(), z,
                                    *sparse_state(corpus, z, K), i)

    for conditional in (compiled, lambda z, i: ref.cgs_conditional(docs, z, i, alpha, eta)):
        P = ref.gibbs_sweep_matrix(states, conditional)
        np.testing.assert_allclose(P.sum(axis=1), 1.0, rtol=0, atol=1e-12)
        np.testing.assert_allclose(post @ P, post, rtol=0, atol=1e-12)
    # the check has teeth: a conditional with another alpha moves the posterior
    wrong = ref.gibbs_sweep_matrix(states, lambda z, i: ref.cgs_conditional(docs, z, i, 2 * alpha, eta))
    assert np.abs(post @ wrong - post).max() > 1e-3


def geweke_final_states(alpha, eta, lengths, n_words, n_chains, n_steps, seed, sampler_alpha=None):
    """Successive-conditional Geweke chains for the compiled sampler ([HYB] eq 12).

    Each chain starts from a forward draw (z, x) of the model and alternates one
    compiled Gibbs sweep z | x (with ``sampler_alpha``, default ``alpha``) with a
    fresh x | z (phi ~ Dir(eta), x_i ~ Cat(phi_{z_i}): the collapsed predictive).
    The joint model is stationary, so the final topics are draws from the prior
    p(z) exactly when the sampler is right. Returns (forward, final) statistics,
    n_chains x (K + 1) each, the forward ones from independent prior draws: the
    sorted topic sizes and the sum over documents of the largest document-topic
    count (the statistic most sensitive to alpha)."""
    rng = np.random.default_rng(seed)
    K, W = len(alpha), n_words
    sampler_alpha = alpha if sampler_alpha is None else sampler_alpha
    docs = np.repeat(np.arange(len(lengths)), lengths)
    scratch, iscratch = np.empty(3 * K), np.empty(3 * K, dtype=np.int32)

    def prior_topics():
        theta = rng.dirichlet(alpha, size=len(lengths))
        return (rng.random(len(docs))[:, None] > np.cumsum(theta[docs], axis=1)).sum(axis=1).astype(np.int32)

    def words_given(z):
        phi = rng.dirichlet(eta, size=K)
        return (rng.random(len(z))[:, None] > np.cumsum(phi[z], axis=1)).sum(axis=1).clip(0, W - 1)

    def sizes(z):
        per_doc = np.zeros((len(lengths), K), dtype=np.int64)
        np.add.at(per_doc, (docs, z), 1)
        return np.append(np.sort(per_doc.sum(axis=0)), per_doc.max(axis=1).sum())

    forward = np.array([sizes(prior_topics()) for _ in range(n_chains)])
    final = np.empty_like(forward)
    for c in range(n_chains):
        z = prior_topics()
        for _ in range(n_steps):
            x = words_given(z)
            order = np.lexsort((x, docs))              # CSR token order: by document, then word
            z, x = z[order].copy(), x[order]
            corpus = Corpus(sp.csr_matrix((np.ones(len(x)), (docs, x)), shape=(len(lengths), W)))
            _, nwk, nk, wtopics, wlen = sparse_state(corpus, z, K)
            _lda.cgs_sweep(corpus.indptr, corpus.indices, corpus.counts, sampler_alpha, eta, eta.sum(), z,
                           nwk, nk, wtopics, wlen, scratch, iscratch, rng)
        final[c] = sizes(z)
    return forward, final


def geweke_min_pvalue(forward, final):
    """Smallest two-sample KS p-value over the sorted-topic-size statistics."""
    return min(ks_2samp(forward[:, s], final[:, s]).pvalue for s in range(forward.shape[1]))


GEWEKE = dict(alpha=np.array([0.4, 0.8, 1.5]), eta=np.array([0.3, 0.3, 0.6, 1.0]), lengths=[6, 4, 8], n_words=4,
              n_chains=600, n_steps=6)


def test_geweke_successive_conditional():
    """Sorted topic sizes (and document concentration) after Gibbs / x | z
    alternation vs forward prior draws: two-sample KS per statistic, Bonferroni
    over the statistics (10.2, 10.10)."""
    forward, final = geweke_final_states(**GEWEKE, seed=0)
    assert geweke_min_pvalue(forward, final) > 1e-3 / forward.shape[1]


def test_geweke_detects_a_wrong_prior_in_the_sampler():
    """The same test rejects a sampler run with another alpha than the model's."""
    forward, final = geweke_final_states(**GEWEKE, seed=0, sampler_alpha=2 * GEWEKE["alpha"])
    assert geweke_min_pvalue(forward, final) < 1e-3 / forward.shape[1]


def test_count_kernels_match_numpy(make_counts):
    corpus = Corpus(make_counts(4, n_docs=25, n_words=12, max_count=5))
    K = 6
    z = np.random.default_rng(0).integers(0, K, size=corpus.n_tokens, dtype=np.int32)
    words, ptr = corpus.tokens()
    docs = np.repeat(np.arange(corpus.n_docs), np.diff(ptr))
    nwk, nk = np.ones((corpus.n_words, K), np.int32), np.ones(K, np.int64)    # the kernels add
    _lda.count_word_topics(corpus.indptr, corpus.indices, corpus.counts, z, nwk, nk)
    want_wk = np.ones((corpus.n_words, K), np.int64)
    np.add.at(want_wk, (words, z), 1)
    np.testing.assert_array_equal(nwk, want_wk)
    np.testing.assert_array_equal(nk, 1 + np.bincount(z, minlength=K))
    column = np.array([3, 0, 1, 2, 5, 4])
    out = np.full((corpus.n_docs, K), 0.5)
    _lda.doc_topic_counts(ptr, z, column, out)
    want = np.full((corpus.n_docs, K), 0.5)
    np.add.at(want, (docs, column[z]), 1)
    np.testing.assert_array_equal(out, want)
    with pytest.raises(ValueError, match="topics in z"):
        _lda.count_word_topics(corpus.indptr, corpus.indices, corpus.counts, z + K, nwk, nk)
    with pytest.raises(ValueError, match="labels"):
        _lda.doc_topic_counts(ptr, z, column[:3], out)


def _fit_in_blocks(monkeypatch, block, X, **params):
    """A fit whose sweeps run over the corpus in blocks of about ``block`` entries."""
    monkeypatch.setattr(corpus_module, "_BLOCK", block)
    return CollapsedGibbs(**params).fit(X)


def test_sweeps_in_blocks_equal_one_block(monkeypatch, make_counts):
    """The sweep runs block by block over the corpus (an on-disk corpus is not kept
    resident), each document's counts rebuilt from its topics: the draws are those
    of one pass over the whole corpus."""
    X = Corpus(make_counts(7, n_docs=60, n_words=30, max_count=5))
    params = dict(n_components=8, max_iter=5, burn_in=2, random_state=3, optimize_hyperparameters=True)
    whole = _fit_in_blocks(monkeypatch, 1 << 20, X, **params)
    blocks = _fit_in_blocks(monkeypatch, 23, X, **params)
    assert X.nnz > 20 * 23
    np.testing.assert_array_equal(blocks.components_, whole.components_)
    np.testing.assert_array_equal(blocks.doc_topic_, whole.doc_topic_)


def test_store_doc_topic_false_same_topics(make_counts):
    X = Corpus(make_counts(8, n_docs=40, n_words=20, max_count=4))
    full = CollapsedGibbs(n_components=5, max_iter=6, burn_in=2, random_state=1).fit(X)
    lean = CollapsedGibbs(n_components=5, max_iter=6, burn_in=2, random_state=1, store_doc_topic=False).fit(X)
    np.testing.assert_array_equal(lean.components_, full.components_)
    assert not hasattr(lean, "doc_topic_")
    np.testing.assert_array_equal(lean.transform(X[:3]), full.transform(X[:3]))
    with pytest.raises(TypeError, match="store_doc_topic"):
        CollapsedGibbs(store_doc_topic="no").fit(X)
