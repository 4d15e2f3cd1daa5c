"""NGGP functions of U, the mode of q(U), Dirichlet-multinomial kernel (ALGORITHMS.md 10.7)."""
import numpy as np
import pytest
from scipy.special import gammaln

from bnpcore.corpus import Corpus
from bnpcore.kernels import _nrm

from nrm_reference import dm_mp, eppf_ref, lap_mp, log_kappa_ref, mode_ref, partitions

U = np.logspace(-6, 8, 57)


@pytest.mark.parametrize("a,sigma,tau", [(1.0, 0.5, 1.0), (10.0, 0.5, 100.0), (2.0, 0.25, 0.0), (3.0, 0.9, 1e-3)])
def test_laplace_exponent_matches_formula(a, sigma, tau):
    np.testing.assert_allclose(_nrm.laplace_exponent(U, a, sigma, tau), lap_mp(U, a, sigma, tau), rtol=1e-13)


@pytest.mark.parametrize("tau", [0.1, 1.0, 100.0])
def test_laplace_exponent_continuous_at_sigma_zero(tau):
    dp = 3.0 * np.log1p(U / tau)
    np.testing.assert_allclose(_nrm.laplace_exponent(U, 3.0, 1e-12, tau), dp, rtol=1e-9)
    np.testing.assert_allclose(_nrm.laplace_exponent(U, 3.0, 0.0, tau), dp, rtol=1e-14)


@pytest.mark.parametrize("sigma,tau", [(0.0, 1.0), (0.5, 100.0), (0.25, 0.0)])
def test_kappa_identities(sigma, tau):
    a = 2.5
    for m in range(1, 30):
        ratio = np.exp(log_kappa_ref(m + 1, U, a, sigma, tau) - log_kappa_ref(m, U, a, sigma, tau))
        np.testing.assert_allclose(ratio, (m - sigma) / (U + tau), rtol=1e-12)
    np.testing.assert_allclose(np.exp(log_kappa_ref(1, U, a, sigma, tau)), a * (U + tau) ** (sigma - 1), rtol=1e-12)


REFERENCE_MODES = [  # (m, Ke, a, tau, sigma) -> Uhat (sigma K form), Uhat (printed a K form); ALGORITHMS.md 10.7
    ((100, 10, 10, 100, 0.5), 77.89532638, 161.8033989),
    ((2744, 92, 10, 100, 0.5), 974.0123443, 8938.292998),
    ((10, 3, 1, 1, 0.5), 7.269325377, 13.14375078),
    ((1000, 50, 100, 1, 0.25), 6.529536181, 6249999.8),
]


@pytest.mark.parametrize("args,corrected,printed", REFERENCE_MODES)
def test_mode_reference_values(args, corrected, printed):
    m, ke, a, tau, sigma = args
    assert _nrm.mode_u(m, ke, a, sigma, tau) == pytest.approx(corrected, rel=2e-10)
    assert _nrm.mode_u(m, ke, a, sigma, tau, "paper") == pytest.approx(printed, rel=2e-10)
    cold = _nrm.mode_u(m, ke, a, sigma, tau)
    for u0 in (1e-8, 1.0, 1e12):       # the warm start does not change the answer
        assert _nrm.mode_u(m, ke, a, sigma, tau, u0=u0) == pytest.approx(cold, rel=1e-12)


@pytest.mark.parametrize("m,ke,a,sigma,tau", [(100, 10, 10, 0.5, 100), (5, 4.5, 0.1, 0.9, 0.0),
                                              (1e6, 300, 1e3, 0.3, 1e-4), (1, 1, 1, 0.5, 1)])
def test_mode_matches_dense_grid_and_is_concave(m, ke, a, sigma, tau):
    v = np.linspace(-40, 60, 400001)
    f = _nrm.log_q_u(v, m, ke, a, sigma, tau)
    assert np.all(np.diff(f, 2) < 1e-9 * np.abs(f[1:-1]).max())      # f'' < 0 (up to rounding)
    i = np.argmax(f)
    uhat = _nrm.mode_u(m, ke, a, sigma, tau)
    assert abs(np.log(uhat) - v[i]) <= 2 * (v[1] - v[0])
    assert _nrm.log_q_u(np.log(uhat), m, ke, a, sigma, tau) >= f[i] - 1e-9 * abs(f[i])
    assert uhat == pytest.approx(mode_ref(m, ke, a, sigma, tau), rel=1e-10)


def test_mode_special_cases():
    assert np.isnan(_nrm.mode_u(10, 2, 1.0, 0.0, 1.0))           # DP: U not needed
    assert _nrm.mode_u(0, 0, 1.0, 0.5, 1.0) == 0.0
    # tau = 0: U^sigma = sigma Ke / a in closed form
    assert _nrm.mode_u(50, 5, 2.0, 0.5, 0.0) == pytest.approx((0.5 * 5 / 2.0) ** 2, rel=1e-12)


def test_dm_matrix_matches_gammaln():
    rng = np.random.default_rng(3)
    X = rng.poisson(0.4, size=(12, 30))
    X[0] = 0                                  # empty document
    X[1, 3] = 40                              # counts beyond the product fast path
    X[2, :5] = [1, 8, 9, 16, 17]
    docs = Corpus(X)
    rows = rng.gamma(0.3, 20.0, size=(5, 30)) + 1e-3
    rows[4] = 1e6                             # large parameters
    for offset in (0.0, 0.37):
        out = np.empty((12, 5))
        _nrm.dm_matrix(docs.indptr, docs.indices, docs.counts, rows, rows.sum(axis=1), offset, out)
        ref = np.array([[dm_mp(x, offset + r) for r in rows] for x in X])
        np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-10)


@pytest.mark.parametrize("a,sigma,tau", [(1.0, 0.5, 1.0), (2.0, 0.0, 1.0), (10.0, 0.5, 100.0)])
def test_eppf_sums_to_one(a, sigma, tau):
    parts = list(partitions(4))
    assert len(parts) == 15
    total = sum(eppf_ref(np.bincount(p), a, sigma, tau) for p in parts)
    assert total == pytest.approx(1.0, abs=1e-9)
    if sigma == 0:   # the DP closed form a^K Gamma(a) / Gamma(a + n) prod (n_k - 1)!
        for p in parts:
            sizes = np.bincount(p)
            closed = np.exp(len(sizes) * np.log(a) + gammaln(a) - gammaln(a + 4) + gammaln(sizes).sum())
            assert eppf_ref(sizes, a, sigma, tau) == pytest.approx(closed, rel=1e-9)


def test_eppf_with_printed_exponent_does_not_sum_to_one():
    """E28: with (U + tau)^(n - a K) the partition probabilities are not a distribution."""
    total = sum(eppf_ref(np.bincount(p), 10.0, 0.5, 100.0, printed=True) for p in partitions(4))
    assert abs(total - 1.0) > 0.1
