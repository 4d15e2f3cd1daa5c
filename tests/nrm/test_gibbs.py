"""Collapsed Gibbs sampler for NGGP mixtures (ALGORITHMS.md 6.5, 10.7, 10.10)."""
import numpy as np
import pytest
from scipy import integrate, stats

from bnpcore.corpus import Corpus
from bnpcore.kernels import _nrm
from bnpcore.mixture import CollapsedGibbs

from nrm_reference import dm_ref, eppf_ref, partitions

DOCS = np.array([[2, 0, 1], [0, 2, 0], [1, 1, 1], [2, 1, 0]])


def exact_partition_posterior(X, a, sigma, tau, eta):
    """p(partition | X) ∝ EPPF(sizes) prod_k DM(sum of the cluster's counts | eta)."""
    parts = list(partitions(len(X)))
    logp = []
    for labels in parts:
        labels = np.array(labels)
        sizes = np.bincount(labels)
        lik = sum(dm_ref(X[labels == k].sum(axis=0), np.full(X.shape[1], eta)) for k in range(len(sizes)))
        logp.append(np.log(eppf_ref(sizes, a, sigma, tau)) + lik)
    logp = np.array(logp)
    return parts, np.exp(logp - np.logaddexp.reduce(logp))


def canonical(z):
    seen = {}
    return tuple(seen.setdefault(k, len(seen)) for k in z)


def run_chain(X, a, sigma, tau, eta, n_sweeps, seed):
    docs = Corpus(X)
    p = {"a": a, "sigma": sigma, "tau": tau, "eta": eta, "n_words": docs.n_words}
    N, cap = len(X), len(X) + 1
    z = np.zeros(N, dtype=np.int32)
    nk = np.zeros(cap, dtype=np.int64)
    nk[0] = N
    C = np.zeros((cap, docs.n_words))
    C[0] = X.sum(axis=0)
    Ctot = C.sum(axis=1)
    state = _nrm.new_state(n_slots=1, n_alive=1, log_u=0.0)
    z_trace = np.zeros((n_sweeps, N), dtype=np.int32)
    u_trace = np.zeros(n_sweeps)
    done = _nrm.gibbs_run(docs.indptr, docs.indices, docs.counts, p, n_sweeps, np.random.default_rng(seed),
                          z, nk, C, Ctot, state, np.empty(cap + 1), z_trace, u_trace)
    assert done == n_sweeps
    # the count state is consistent with the final assignments
    np.testing.assert_array_equal(nk[:N], np.bincount(z, minlength=N)[:N])
    for k in range(cap):
        np.testing.assert_array_equal(C[k], X[z == k].sum(axis=0))
    return z_trace, u_trace


def chi_square_p(observed, expected):
    """Pearson test pooling the states with expected count < 5 (ALGORITHMS.md 10.10)."""
    big = expected >= 5
    obs = np.append(observed[big], observed[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    if exp[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    stat = ((obs - exp) ** 2 / exp).sum()
    return stats.chi2.sf(stat, len(obs) - 1)


@pytest.mark.parametrize("a,sigma,tau,eta", [(1.0, 0.5, 1.0, 0.5), (2.0, 0.0, 1.0, 0.5), (3.0, 0.25, 10.0, 1.0)])
def test_partition_frequencies_match_exact_posterior(a, sigma, tau, eta):
    parts, post = exact_partition_posterior(DOCS, a, sigma, tau, eta)
    thin = 10
    z_trace, _ = run_chain(DOCS, a, sigma, tau, eta, 20000 * thin, seed=11)
    index = {tuple(p): i for i, p in enumerate(parts)}
    counts = np.bincount([index[canonical(z)] for z in z_trace[thin - 1::thin]], minlength=len(parts))
    p = chi_square_p(counts, post * counts.sum())
    assert p > 1e-3, (p, counts, np.round(post * counts.sum()))


@pytest.mark.parametrize("n,k,a,sigma,tau", [(20, 4, 1.0, 0.5, 1.0), (300, 30, 10.0, 0.5, 100.0), (8, 3, 2.0, 0.25, 0.0)])
def test_u_slice_sampler_matches_density(n, k, a, sigma, tau):
    """KS test of the U-step against p(V) ∝ e^{nV} (e^V + tau)^(sigma K - n) e^{-lap(e^V)}, normalised numerically."""
    draws = _nrm.slice_sample_u(1.0, n, k, a, sigma, tau, 4000, 5, np.random.default_rng(5))
    v = np.log(draws)
    mode = np.log(_nrm.mode_u(n, k, a, sigma, tau))
    top = _nrm.log_q_u(mode, n, k, a, sigma, tau)
    dens = lambda x: np.exp(_nrm.log_q_u(x, n, k, a, sigma, tau) - top)
    lo, hi = mode - 30, mode + 30
    total = integrate.quad(dens, lo, hi, points=[mode], limit=200)[0]
    grid = np.linspace(lo, hi, 60001)
    cdf_grid = integrate.cumulative_trapezoid(dens(grid), grid, initial=0) / total
    res = stats.kstest(v, lambda x: np.interp(x, grid, cdf_grid))
    assert res.pvalue > 1e-3


def test_estimator_on_separated_clusters():
    rng = np.random.default_rng(0)
    phi = np.zeros((3, 30))
    for k in range(3):
        phi[k, 10 * k:10 * (k + 1)] = 0.1
    z = np.repeat([0, 1, 2], [15, 10, 5])
    X = np.array([rng.multinomial(40, phi[k]) for k in z])
    m = CollapsedGibbs(a=1.0, sigma=0.5, tau=1.0, eta=0.1, max_iter=30, n_samples=5, random_state=0)
    m.fit(X, heldout=X[:4], eval_every=range(26, 31))
    assert m.n_components_ == 3 and list(m.cluster_sizes_) == [15, 10, 5]
    assert len(set(zip(m.labels_, z))) == 3
    assert m.weights_.sum() + m.weight_new_ == pytest.approx(1.0)
    np.testing.assert_allclose(m.weights_, (m.cluster_sizes_ - 0.5) / (30 - 1.5 + (m.u_ + 1.0) ** 0.5))
    assert np.allclose(m.transform(X).argmax(axis=1), m.labels_)
    assert len(m.history_) == 30 and "heldout_total" in m.history_[-1] and "heldout_total" not in m.history_[-6]
    assert [h["iteration"] for h in m.history_] == list(range(1, 31))
    s = m.score_samples(X[:4])
    assert s.sum() == pytest.approx(np.mean([h["heldout_total"] for h in m.history_[-5:]]))
    a = CollapsedGibbs(sigma=0.0, a=1.0, max_iter=5, n_samples=2, random_state=4).fit(X)
    b = CollapsedGibbs(sigma=0.0, a=1.0, max_iter=5, n_samples=2, random_state=4).fit(X)
    np.testing.assert_array_equal(a.labels_, b.labels_)
    assert np.isnan(a.u_)
    with pytest.raises(ValueError):
        CollapsedGibbs(max_iter=3, n_samples=4).fit(X)


def test_gibbs_grows_capacity_mid_sweep():
    """Many singleton clusters: the sampler must add slots in the middle of a sweep."""
    X = np.eye(40, dtype=int) * 30
    m = CollapsedGibbs(a=50.0, sigma=0.5, tau=1.0, eta=0.01, max_iter=3, n_samples=1, random_state=0).fit(X)
    assert m.n_components_ > 16
    assert np.array_equal(np.sort(m.cluster_sizes_)[::-1], m.cluster_sizes_)
    assert m.cluster_sizes_.sum() == 40


def test_save_load_keeps_the_samples(tmp_path):
    from bnpcore.base import load
    rng = np.random.default_rng(1)
    X = rng.poisson(1.0, size=(30, 12))
    m = CollapsedGibbs(a=2.0, sigma=0.5, tau=1.0, max_iter=6, n_samples=3, random_state=2).fit(X)
    m.save(tmp_path / "g.npz")
    m2 = load(tmp_path / "g.npz")
    assert m2.score(X[:5]) == m.score(X[:5])
    np.testing.assert_array_equal(m2.labels_, m.labels_)
