"""Hybrids SVB/CGS and CVB/CGS (ALGORITHMS.md 3.5-3.6, test oracles 10.4)."""
import copy

import numpy as np
import pytest
from scipy.special import digamma

from bnpcore.corpus import Corpus
from bnpcore.kernels import _lda
from bnpcore.lda import CollapsedVB, Hybrid, StandardVB
from bnpcore.models.lda import SequentialState


def docs_of(corpus):
    words, ptr = corpus.tokens()
    return [list(words[ptr[j]:ptr[j + 1]]) for j in range(corpus.n_docs)]


@pytest.mark.parametrize("variational, twin", [
    ("standard", StandardVB(schedule="sequential")),
    ("collapsed", CollapsedVB(order=2)),
])
def test_threshold_zero_is_the_pure_variational_algorithm(counts, variational, twin):
    corpus = Corpus(counts)
    kw = dict(n_components=4, alpha=0.2, eta=0.05, random_state=3)
    hybrid = Hybrid(variational=variational, threshold=0, max_iter=12, burn_in=20, **kw).fit(corpus)
    pure = twin.set_params(max_iter=12, tol=None, **kw).fit(corpus)
    def timeless(history):
        return [{k: v for k, v in rec.items() if not k.endswith("seconds")} for rec in history]
    assert timeless(hybrid.history_) == timeless(pure.history_)   # bit for bit: bound and delta of every sweep
    np.testing.assert_array_equal(hybrid.components_, pure.components_)


def test_threshold_at_max_count_is_collapsed_gibbs_bit_for_bit(ref, make_counts):
    C = make_counts(7, max_count=5)
    corpus = Corpus(C)
    K, seed = 5, 11
    alpha = np.linspace(0.1, 0.6, K)
    eta = np.linspace(0.02, 0.2, corpus.n_words)
    state = SequentialState(corpus, K, alpha.copy(), eta.copy(), np.random.default_rng(seed), _lda.MODE_SVB,
                            int(C.max()))
    assert state.r.shape[0] == 0
    rng = np.random.default_rng(seed)                 # the same stream, drawn the same way
    z = rng.integers(0, K, size=corpus.n_tokens, dtype=np.int32)
    docs = docs_of(corpus)
    for _ in range(4):
        state.sweep()
        ref.cgs_sweep(docs, z, alpha, eta, rng)
        np.testing.assert_array_equal(state.z, z)


@pytest.mark.parametrize("mode", [_lda.MODE_SVB, _lda.MODE_CVB])
def test_sampled_part_targets_the_effective_prior_posterior(ref, mode):
    """With the variational rows frozen, the Gibbs sweep of the sampled tokens has
    as stationary law the collapsed posterior with alpha' = alpha + N^VB_jk and
    eta' = eta + N^VB_kw ([HYB] eqs 22-24), by enumeration and chi-square."""
    C = np.array([[2, 1, 0], [1, 0, 3], [0, 1, 2]])    # singletons sampled, the rest variational
    corpus = Corpus(C)
    K = 2
    alpha, eta = np.array([0.3, 0.8]), np.array([0.2, 0.4, 0.1])
    rng = np.random.default_rng(4)
    state = SequentialState(corpus, K, alpha, eta, rng, mode, 1)
    state.r[:] = rng.dirichlet(np.ones(K), size=state.r.shape[0])
    state._recount()
    vb_dk, vb_kw = state.vb_dk.copy(), state.vb_wk.T.copy()
    docs_cg = [[w for w in range(3) if C[j, w] == 1] for j in range(3)]
    states, post = ref.posterior_by_enumeration(docs_cg, alpha + vb_dk, eta + vb_kw)
    powers = K ** np.arange(len(state.z))
    index = np.array([s @ powers for s in states])
    draws = []
    for t in range(100_000):
        state._run(True, False, state.stack)
        if t % 5 == 4:
            draws.append(state.z @ powers)
    np.testing.assert_array_equal(state.vb_dk, vb_dk)
    observed = np.bincount(draws, minlength=K ** len(state.z))[index]
    assert ref.chi_square_pvalue(observed, post) > 1e-3


@pytest.mark.parametrize("mode", [_lda.MODE_SVB, _lda.MODE_CVB])
def test_sampled_part_is_cgs_with_the_effective_priors(ref, make_counts, mode):
    """With the variational rows frozen at random values, the Gibbs draws of the
    sampled tokens ([HYB] eq 25) are those of plain CGS with the effective priors
    alpha'_jk = alpha_k + N^VB_jk and eta'_kw = eta_w + N^VB_kw (eqs 22-24): the
    same topics from the same uniforms, sweep after sweep (10.4)."""
    C = make_counts(12, max_count=3)
    corpus = Corpus(C)
    K = 4
    alpha, eta = np.linspace(0.1, 0.7, K), np.linspace(0.02, 0.3, corpus.n_words)
    state = SequentialState(corpus, K, alpha, eta, np.random.default_rng(6), mode, 1)
    state.r[:] = np.random.default_rng(7).dirichlet(np.ones(K), size=state.r.shape[0])
    state._recount()
    docs_cg = [[w for w in range(C.shape[1]) if C[j, w] == 1] for j in range(C.shape[0])]
    rng = copy.deepcopy(state.rng)
    z = state.z.copy()
    for _ in range(4):
        state._run(True, False, state.stack)
        ref.cgs_sweep(docs_cg, z, alpha + state.vb_dk, eta + state.vb_wk.T, rng)
        np.testing.assert_array_equal(state.z, z)
    assert len(np.unique(z)) == K        # the draws did move over all topics


def test_several_samples_average_psi(ref, counts):
    """n_samples > 1: each variational row uses psi averaged over the samples
    (E62), with the expected counts updated pair by pair."""
    corpus = Corpus(counts)
    K, S = 3, 3
    alpha, eta = np.array([0.2, 0.5, 0.9]), np.linspace(0.05, 0.4, corpus.n_words)
    rng = np.random.default_rng(8)
    state = SequentialState(corpus, K, alpha, eta, rng, _lda.MODE_SVB, 1, n_samples=S)
    for s in range(S):                                  # any sampled counts will do here
        state.stack[0][s] = rng.integers(0, 3, size=state.stack[0][s].shape)
        state.stack[1][s] = rng.integers(0, 3, size=state.stack[1][s].shape)
        state.stack[2][s] = state.stack[1][s].sum(axis=0)
    vb_dk, vb_kw = state.vb_dk.copy(), state.vb_wk.T.copy()
    want = state.r.copy()
    docs = np.repeat(np.arange(corpus.n_docs), np.diff(corpus.indptr))
    row = 0
    for p, (j, w, c) in enumerate(zip(docs, corpus.indices, corpus.counts)):
        if c <= 1:
            continue
        lw = np.zeros(K)
        for s in range(S):
            st_dk, st_wk, st_k = (a[s] for a in state.stack)
            lw += (digamma(vb_kw[:, w] + st_wk[w] + eta[w]) - digamma(vb_kw.sum(1) + st_k + eta.sum())
                   + digamma(vb_dk[j] + st_dk[j] + alpha))
        new = np.exp(lw / S - (lw / S).max())
        new /= new.sum()
        vb_dk[j] += c * (new - want[row])
        vb_kw[:, w] += c * (new - want[row])
        want[row] = new
        row += 1
    state._run(False, True, state.stack)
    np.testing.assert_allclose(state.r, want, rtol=1e-10, atol=1e-13)


@pytest.mark.parametrize("variational", ["standard", "collapsed"])
@pytest.mark.parametrize("n_samples", [1, 3])
def test_hybrid_counts_stay_consistent(make_counts, variational, n_samples):
    corpus = Corpus(make_counts(9, max_count=4))
    est = Hybrid(n_components=4, variational=variational, n_samples=n_samples, max_iter=6, burn_in=2,
                 random_state=0).fit(corpus)
    np.testing.assert_allclose(est.components_.sum() - est.eta_.sum() * 4, corpus.n_tokens, rtol=1e-10)
    np.testing.assert_allclose(est.doc_topic_.sum(axis=1), 1.0, rtol=1e-12)
