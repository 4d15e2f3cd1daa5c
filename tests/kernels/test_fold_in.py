"""The fold-in kernel of the HDP samplers' ``transform`` (``_hdp_gibbs.fold_in``):
per-document Gibbs sampling of the tokens' topics with the topics fixed, checked
against exact enumeration of its stationary distribution."""
import itertools

import numpy as np
import pytest
from scipy.special import gammaln

from bnpcore.kernels import _hdp_gibbs


def exact_posterior_mean(doc, phi_wk, prior):
    """E[(n_k + prior_k) / (N + sum prior)] under p(z) ∝ prod_t phi[w_t, z_t] *
    DirMult(n | prior), by enumerating every assignment of the tokens."""
    K, N = len(prior), len(doc)
    total, mean = 0.0, np.zeros(K)
    for z in itertools.product(range(K), repeat=N):
        n = np.bincount(z, minlength=K)
        logp = sum(np.log(phi_wk[w, k]) for w, k in zip(doc, z)) + (gammaln(n + prior) - gammaln(prior)).sum()
        p = np.exp(logp)
        total += p
        mean += p * (n + prior)
    return mean / total / (N + prior.sum())


def run(docs, phi_wk, prior, n_sweeps, burn_in, n_threads=1, key=7):
    words = np.concatenate([np.asarray(d, dtype=np.int32) for d in docs]) if docs else np.zeros(0, np.int32)
    tok_ptr = np.concatenate([[0], np.cumsum([len(d) for d in docs])]).astype(np.int64)
    theta = np.zeros((len(docs), len(prior)))
    _hdp_gibbs.fold_in(words, tok_ptr, np.ascontiguousarray(phi_wk), np.ascontiguousarray(prior), n_sweeps, burn_in,
                       key, np.arange(1, len(docs) + 1, dtype=np.uint64), theta, n_threads)
    return theta


@pytest.mark.parametrize("seed", [0, 1])
def test_fold_in_matches_exact_enumeration(seed):
    rng = np.random.default_rng(seed)
    W, K = 5, 4
    phi_wk = rng.dirichlet(np.full(W, 0.7), size=K).T.copy()     # (W, K)
    prior = rng.gamma(1.0, size=K) * 0.8
    prior[2] = 1e-3                                             # a topic the prior nearly excludes
    doc = [0, 3, 3, 1, 4]
    exact = exact_posterior_mean(doc, phi_wk, prior)
    n_sweeps = 200_000
    theta = run([doc], phi_wk, prior, n_sweeps, 100)[0]
    # the average of an autocorrelated chain: a few hundred sweeps per independent draw at most
    assert np.abs(theta - exact).max() < 4e-3, (theta, exact)
    assert theta.sum() == pytest.approx(1.0)


def test_fold_in_does_not_depend_on_threads_or_batch():
    rng = np.random.default_rng(3)
    W, K = 30, 12
    phi_wk = rng.dirichlet(np.full(W, 0.3), size=K).T.copy()
    prior = rng.gamma(0.5, size=K)
    docs = [list(rng.integers(W, size=rng.integers(0, 40))) for _ in range(25)]
    one = run(docs, phi_wk, prior, 30, 10, n_threads=1)
    np.testing.assert_array_equal(one, run(docs, phi_wk, prior, 30, 10, n_threads=3))
    np.testing.assert_allclose(one.sum(axis=1), 1.0)
    empty = [j for j, d in enumerate(docs) if not d]
    np.testing.assert_allclose(one[empty], np.broadcast_to(prior / prior.sum(), (len(empty), K)))


def test_fold_in_keeps_the_weight_of_a_topic_without_prior_mass_at_zero():
    phi_wk = np.array([[0.5, 0.5], [0.5, 0.5]])
    prior = np.array([1.0, 0.0])
    theta = run([[0, 1, 1, 0]], phi_wk, prior, 50, 10)
    assert theta[0, 1] == 0.0 and theta[0, 0] == pytest.approx(1.0)
