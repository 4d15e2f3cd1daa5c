"""Random variates of the C core (bnpcore.kernels.rng) against their distributions.

One-sample Kolmogorov-Smirnov tests against scipy.stats, two-sample KS tests against
numpy's own samplers, and log-moment tests (E[log G] = psi(a) within 4 standard
errors) for shapes so small that the draws underflow unless kept in log space
(ALGORITHMS.md 2.7, 10.1). Fixed seeds, p-value threshold 1e-3.
"""
import numpy as np
import pytest
from scipy import special as sp
from scipy import stats

from bnpcore._validation import spawn_generators
from bnpcore.kernels import rng

N = 20_000
P_MIN = 1e-3


def log_moment_z(log_draws, mean, var):
    """z-score of the sample mean of log draws."""
    return (log_draws.mean() - mean) / np.sqrt(var / log_draws.size)


@pytest.mark.parametrize("shape", [0.5, 1.0, 7.5, 1e-3, 1e-6])
def test_gamma_log_moments(shape):
    lg = rng.gamma(shape, N, random_state=int(1e6 * shape) + 1, log=True)
    assert np.isfinite(lg).all()
    assert abs(log_moment_z(lg, sp.psi(shape), sp.polygamma(1, shape))) < 4


@pytest.mark.parametrize("shape", [0.5, 1.0, 7.5])
def test_gamma_ks(shape):
    x = rng.gamma(shape, N, random_state=11)
    assert (x > 0).all()
    assert stats.kstest(x, stats.gamma(shape).cdf).pvalue > P_MIN
    # and against numpy's own gamma sampler
    ref = np.random.default_rng(12).standard_gamma(shape, N)
    assert stats.ks_2samp(x, ref).pvalue > P_MIN


def log_gamma_cdf(shape):
    """CDF of log G, G ~ Gamma(shape): P(shape, e^t). Below t = -700, where e^t
    underflows, P(a, x) = x^a / Gamma(a + 1) (1 - a x / (a + 1) + ...) = e^(a t) / Gamma(a + 1)."""
    def cdf(t):
        t = np.asarray(t, dtype=float)
        deep = t < -700
        out = np.empty_like(t)
        out[~deep] = sp.gammainc(shape, np.exp(t[~deep]))
        out[deep] = np.exp(shape * t[deep] - sp.gammaln(shape + 1))
        return out
    return cdf


@pytest.mark.parametrize("shape", [1e-6, 1e-3, 0.05])
def test_tiny_shape_gamma_ks_in_log_space(shape):
    lg = rng.gamma(shape, N, random_state=21, log=True)
    assert np.isfinite(lg).all()  # e.g. log G ~ -1e6 for shape 1e-6: no underflow to -inf
    assert stats.kstest(lg, log_gamma_cdf(shape)).pvalue > P_MIN


def test_log_and_plain_draws_agree():
    for shape in (0.3, 2.0):
        plain = rng.gamma(shape, 100, random_state=5)
        logged = rng.gamma(shape, 100, random_state=5, log=True)
        np.testing.assert_allclose(np.log(plain), logged, rtol=1e-14)
    plain = rng.beta(0.7, 1.3, 100, random_state=6)
    logged = rng.beta(0.7, 1.3, 100, random_state=6, log=True)
    np.testing.assert_allclose(np.log(plain), logged, rtol=1e-14)
    plain = rng.dirichlet([0.4, 1.0, 3.0], 50, random_state=7)
    logged = rng.dirichlet([0.4, 1.0, 3.0], 50, random_state=7, log=True)
    np.testing.assert_allclose(np.log(plain), logged, rtol=1e-13)


@pytest.mark.parametrize("a, b", [(0.5, 0.5), (2.5, 7.0), (0.1, 3.0), (30.0, 1.0)])
def test_beta_ks(a, b):
    x = rng.beta(a, b, N, random_state=31)
    assert ((x >= 0) & (x <= 1)).all()
    assert stats.kstest(x, stats.beta(a, b).cdf).pvalue > P_MIN
    assert stats.ks_2samp(x, np.random.default_rng(33).beta(a, b, N)).pvalue > P_MIN


@pytest.mark.parametrize("a, b", [(1e-3, 1e-3), (1e-6, 2.0), (0.5, 1e-4)])
def test_tiny_beta_log_moments(a, b):
    lv = rng.beta(a, b, N, random_state=32, log=True)
    assert np.isfinite(lv).all() and (lv <= 0).all()
    mean = sp.psi(a) - sp.psi(a + b)
    var = sp.polygamma(1, a) - sp.polygamma(1, a + b)
    assert abs(log_moment_z(lv, mean, var)) < 4


def test_dirichlet_marginals_ks():
    alpha = np.array([0.3, 1.0, 2.5])
    x = rng.dirichlet(alpha, N, random_state=41)
    assert x.shape == (N, 3)
    np.testing.assert_allclose(x.sum(axis=1), 1.0, rtol=1e-14)
    for k, a in enumerate(alpha):
        assert stats.kstest(x[:, k], stats.beta(a, alpha.sum() - a).cdf).pvalue > P_MIN
    ref = np.random.default_rng(42).dirichlet(alpha, N)
    for k in range(3):
        assert stats.ks_2samp(x[:, k], ref[:, k]).pvalue > P_MIN


def test_tiny_dirichlet_log_moments():
    alpha = np.array([1e-3, 1e-3, 1e-2, 1e-6])
    lp = rng.dirichlet(alpha, N, random_state=43, log=True)
    assert np.isfinite(lp).all()
    np.testing.assert_allclose(sp.logsumexp(lp, axis=1), 0.0, atol=1e-12)
    total = alpha.sum()
    for k, a in enumerate(alpha):
        var = sp.polygamma(1, a) - sp.polygamma(1, total)
        assert abs(log_moment_z(lp[:, k], sp.psi(a) - sp.psi(total), var)) < 4


def test_dirichlet_single_component():
    np.testing.assert_array_equal(rng.dirichlet([2.0], 5, random_state=0), np.ones((5, 1)))
    np.testing.assert_array_equal(rng.dirichlet([2.0], 5, random_state=0, log=True), np.zeros((5, 1)))


def test_normal_ks():
    z = rng.normal(N, random_state=51)
    assert stats.kstest(z, stats.norm.cdf).pvalue > P_MIN
    assert stats.ks_2samp(z, np.random.default_rng(52).standard_normal(N)).pvalue > P_MIN


def test_reproducible_streams():
    a = rng.gamma(0.5, 50, random_state=3)
    np.testing.assert_array_equal(a, rng.gamma(0.5, 50, random_state=3))
    assert not np.array_equal(a, rng.gamma(0.5, 50, random_state=4))
    gen = np.random.default_rng(3)
    first = rng.gamma(0.5, 20, random_state=gen)
    second = rng.gamma(0.5, 30, random_state=gen)  # the generator's stream continues
    np.testing.assert_array_equal(np.concatenate([first, second]), a)
    np.testing.assert_array_equal(rng.normal((2, 3), random_state=1).ravel(), rng.normal(6, random_state=1))
    # one stream per thread or chunk: spawned children differ and are reproducible
    kids = spawn_generators(np.random.default_rng(9), 3)
    draws = [rng.beta(1.0, 2.0, 10, random_state=g) for g in kids]
    assert not np.array_equal(draws[0], draws[1])
    again = [rng.beta(1.0, 2.0, 10, random_state=g) for g in spawn_generators(np.random.default_rng(9), 3)]
    np.testing.assert_array_equal(draws, again)
    # the parent is not changed: the same generator gives the same children again,
    # and they are the children SeedSequence.spawn makes first
    parent = np.random.default_rng(9)
    for _ in range(2):
        kids = spawn_generators(parent, 3)
        assert parent.bit_generator.seed_seq.n_children_spawned == 0
        np.testing.assert_array_equal([rng.beta(1.0, 2.0, 10, random_state=g) for g in kids], draws)
    first = np.random.Generator(np.random.PCG64(np.random.SeedSequence(9).spawn(1)[0]))
    np.testing.assert_array_equal(rng.beta(1.0, 2.0, 10, random_state=first), draws[0])


M64 = 2 ** 64 - 1


def _mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def _rotl(x, k):
    return ((x << k) | (x >> (64 - k))) & M64


def reference_stream(key, a, b, n):
    """xoshiro256** (Blackman & Vigna's reference algorithm) seeded by splitmix64
    from the hash of (key, a, b), in pure Python: the keyed streams' specification."""
    golden = 0x9E3779B97F4A7C15
    x = _mix64(_mix64(_mix64(key) ^ ((a + golden) & M64)) ^ ((b + 2 * golden) & M64))
    s = []
    for _ in range(4):
        x = (x + golden) & M64
        s.append(_mix64(x))
    out = []
    for _ in range(n):
        result = (_rotl((s[1] * 5) & M64, 7) * 9) & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]; s[3] ^= s[1]; s[1] ^= s[2]; s[0] ^= s[3]
        s[2] ^= t
        s[3] = _rotl(s[3], 45)
        out.append((result >> 11) / 2.0 ** 53)
    return np.array(out)


@pytest.mark.parametrize("key, a, b", [(0, 0, 0), (12345, 7, 3), (2 ** 64 - 1, 2 ** 63, 1)])
def test_keyed_stream_matches_reference(key, a, b):
    np.testing.assert_array_equal(rng.stream_uniform(key, a, b, 64), reference_stream(key, a, b, 64))


def test_keyed_streams_uniform_and_distinct():
    u = rng.stream_uniform(42, 1, 2, N)
    assert stats.kstest(u, stats.uniform.cdf).pvalue > P_MIN
    np.testing.assert_array_equal(u, rng.stream_uniform(42, 1, 2, N))
    # neighbouring keys (the next document, the next sweep, the next seed) give unrelated streams
    firsts = np.array([rng.stream_uniform(42, t, j, 1)[0] for t in range(40) for j in range(50)])
    assert stats.kstest(firsts, stats.uniform.cdf).pvalue > P_MIN
    for other in [(42, 1, 3), (42, 2, 2), (43, 1, 2), (42, 2, 1)]:
        assert abs(np.corrcoef(u[:5000], rng.stream_uniform(*other, 5000))[0, 1]) < 0.05
    with pytest.raises(ValueError, match="key"):
        rng.stream_uniform(2 ** 64, 0, 0, 1)
    with pytest.raises(ValueError, match="b"):
        rng.stream_uniform(0, 0, -1, 1)


@pytest.mark.parametrize("bitgen", [np.random.PCG64, np.random.Philox, np.random.MT19937, np.random.SFC64])
def test_any_numpy_bit_generator(bitgen):
    x = rng.gamma(2.0, 5000, random_state=np.random.Generator(bitgen(8)))
    assert stats.kstest(x, stats.gamma(2.0).cdf).pvalue > P_MIN


def test_shapes_and_empty():
    assert rng.gamma(1.0, (2, 3)).shape == (2, 3)
    assert rng.beta(1.0, 1.0, 0).shape == (0,)
    assert rng.dirichlet([1.0, 2.0], 0).shape == (0, 2)
    assert rng.normal(0).shape == (0,)


@pytest.mark.parametrize(
    "call, exc",
    [
        (lambda: rng.gamma(0.0, 3), ValueError),
        (lambda: rng.gamma(-1.0, 3), ValueError),
        (lambda: rng.gamma(np.nan, 3), ValueError),
        (lambda: rng.gamma(np.inf, 3), ValueError),
        (lambda: rng.gamma("1", 3), TypeError),
        (lambda: rng.gamma(True, 3), TypeError),
        (lambda: rng.gamma([1.0, 2.0], 3), TypeError),
        (lambda: rng.gamma(1.0, -3), ValueError),
        (lambda: rng.gamma(1.0, 2.5), TypeError),
        (lambda: rng.gamma(1.0, True), TypeError),
        (lambda: rng.gamma(1.0, (2, -1)), ValueError),
        (lambda: rng.gamma(1.0, 3, random_state="x"), TypeError),
        (lambda: rng.gamma(1.0, 3, random_state=-1), ValueError),
        (lambda: rng.gamma(1.0, 3, random_state=np.random.RandomState(0)), TypeError),
        (lambda: rng.beta(0.0, 1.0, 3), ValueError),
        (lambda: rng.beta(1.0, np.nan, 3), ValueError),
        (lambda: rng.beta(1.0, 1.0, None), TypeError),
        (lambda: rng.dirichlet([], 3), ValueError),
        (lambda: rng.dirichlet([[1.0, 2.0]], 3), ValueError),
        (lambda: rng.dirichlet([1.0, -1.0], 3), ValueError),
        (lambda: rng.dirichlet([1.0, np.nan], 3), ValueError),
        (lambda: rng.dirichlet([1.0, np.inf], 3), ValueError),
        (lambda: rng.dirichlet(["a", "b"], 3), TypeError),
        (lambda: rng.dirichlet([True, True], 3), TypeError),
        (lambda: rng.dirichlet([1.0, 2.0], -1), ValueError),
        (lambda: rng.dirichlet([1.0, 2.0], (2, 2)), TypeError),
        (lambda: rng.normal(-2), ValueError),
        (lambda: rng.normal(1.5), TypeError),
    ],
)
def test_bad_input(call, exc):
    with pytest.raises(exc):
        call()
