"""The Antoniak (number of tables) distribution, p(m | n, c) = s(n, m) c^m Gamma(c) / Gamma(c + n).

Oracles (ALGORITHMS.md section 10.1): normalisation, mean and variance formulas
(mpmath), the exact rational pmf for n = 5, c = 1/2, and Pearson chi-square of
both exact samplers against the pmf (fixed seeds, p > 1e-3).
"""
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats

from bnpcore.kernels import stirling
from bnpcore.kernels.stirling import (antoniak_logpmf, antoniak_mean, antoniak_sample,
                                      antoniak_var)

CASES = [(1, 0.3), (5, 0.01), (30, 2.5), (17, 50.0), (670, 1e-4)]


@pytest.mark.parametrize("n, c", CASES + [(2000, 3.0), (5, 1e-9), (50, 1e15), (50, 1e20), (3, 1e8), (40, 40.0)])
def test_pmf_sums_to_one_and_moments(n, c):
    p = np.exp(antoniak_logpmf(n, c))
    assert p.shape == (n,)
    assert p.sum() == pytest.approx(1.0, abs=1e-12)
    m = np.arange(1, n + 1)
    mean, var = antoniak_mean(n, c), antoniak_var(n, c)
    assert (m * p).sum() == pytest.approx(mean, rel=1e-10)
    assert ((m - mean) ** 2 * p).sum() == pytest.approx(var, rel=1e-8, abs=1e-14)


# c >= 10 n takes the asymptotic branch of the variance: (3, 1e8), (1000, 1e5), (200, 2000)
@pytest.mark.parametrize("n, c", CASES + [(10**6, 1e-10), (10**7, 3.0), (3, 1e8), (1000, 1e5),
                                          (200, 2000.0), (201, 2000.0), (2, 20.0)])
def test_mean_and_variance_formulas(n, c, mpmath):
    cc = mpmath.mpf(c)
    dpsi = mpmath.digamma(cc + n) - mpmath.digamma(cc)
    dtri = mpmath.polygamma(1, cc + n) - mpmath.polygamma(1, cc)
    assert antoniak_mean(n, c) == pytest.approx(float(cc * dpsi), rel=1e-12)
    assert antoniak_var(n, c) == pytest.approx(float(cc * dpsi + cc**2 * dtri), rel=1e-10)


def test_exact_example_n5_c_half():
    # s(5, m) (1/2)^m / ((1/2)(3/2)(5/2)(7/2)(9/2)), as exact fractions
    s5 = [24, 50, 35, 10, 1]
    rising = math.prod(Fraction(1, 2) + i for i in range(5))
    exact = [Fraction(s) * Fraction(1, 2) ** m / rising for m, s in enumerate(s5, start=1)]
    got = np.exp(antoniak_logpmf(5, 0.5))
    np.testing.assert_allclose(got, [float(f) for f in exact], rtol=1e-13)
    # the decimals quoted in ALGORITHMS.md 10.1
    np.testing.assert_allclose(got, [0.4063492063, 0.4232804233, 0.1481481481, 0.0211640212,
                                     0.0010582011], atol=1e-10)
    assert antoniak_mean(5, 0.5) == pytest.approx(float(sum(m * f for m, f in enumerate(exact, 1))), rel=1e-14)
    assert antoniak_mean(5, 0.5) == pytest.approx(1.7873015873, abs=1e-10)


def chi_square_pvalue(draws, p):
    """Pearson chi-square of integer draws in 1..len(p) against p; cells with
    expected count < 5 are pooled into one."""
    counts = np.bincount(draws, minlength=len(p) + 1)
    assert counts[0] == 0 and len(counts) == len(p) + 1, "draw outside 1..n"
    expected = p * len(draws)
    keep = expected >= 5
    obs = np.append(counts[1:][keep], counts[1:][~keep].sum())
    exp = np.append(expected[keep], expected[~keep].sum())
    if exp[-1] == 0 and obs[-1] == 0:
        obs, exp = obs[:-1], exp[:-1]
    exp *= obs.sum() / exp.sum()  # p sums to 1 up to rounding
    return stats.chisquare(obs, exp).pvalue


@pytest.mark.parametrize("method", ["table", "crp"])
@pytest.mark.parametrize("n, c", [(5, 0.5), (30, 2.5), (17, 50.0), (670, 1e-4), (200, 0.7)])
def test_samplers_chi_square(method, n, c):
    seed = 1000 * n + int(100 * c) + (method == "crp")
    draws = antoniak_sample(n, c, size=100_000, random_state=seed, method=method)
    assert draws.dtype == np.int64
    p = np.exp(antoniak_logpmf(n, c))
    assert chi_square_pvalue(draws, p) > 1e-3


def test_auto_uses_the_crp_beyond_the_cap():
    n, c, size = 3 * stirling.MAX_N, 2.0, 400
    draws = antoniak_sample(n, c, size=size, random_state=7)  # method="auto"
    z = (draws.mean() - antoniak_mean(n, c)) / math.sqrt(antoniak_var(n, c) / size)
    assert abs(z) < 4
    with pytest.raises(ValueError, match="crp"):
        antoniak_sample(n, c, size=2, method="table")


def test_sampler_edge_cases():
    assert antoniak_sample(0, 1.0, random_state=0) == 0
    assert antoniak_sample(1, 1.0, random_state=0) == 1
    assert isinstance(antoniak_sample(4, 1.0, random_state=0), int)
    assert antoniak_sample(3, 1.0, size=0).shape == (0,)
    assert antoniak_logpmf(0, 1.0).shape == (0,)
    assert antoniak_mean(0, 2.0) == 0.0 and antoniak_var(0, 2.0) == 0.0
    for method in ("table", "crp"):
        tiny = antoniak_sample(1000, 1e-12, size=1000, random_state=3, method=method)
        assert (tiny == 1).all()
        huge = antoniak_sample(50, 1e12, size=100, random_state=3, method=method)
        assert (huge == 50).all()


def test_reproducible_and_generator_streams():
    a = antoniak_sample(40, 1.5, size=50, random_state=11)
    b = antoniak_sample(40, 1.5, size=50, random_state=11)
    np.testing.assert_array_equal(a, b)
    gen = np.random.default_rng(11)
    first = antoniak_sample(40, 1.5, size=25, random_state=gen)
    second = antoniak_sample(40, 1.5, size=25, random_state=gen)  # continues the stream
    np.testing.assert_array_equal(np.concatenate([first, second]), a)


@pytest.mark.parametrize(
    "call, exc",
    [
        (lambda: antoniak_logpmf(-1, 1.0), ValueError),
        (lambda: antoniak_logpmf(5.5, 1.0), TypeError),
        (lambda: antoniak_logpmf(True, 1.0), TypeError),
        (lambda: antoniak_logpmf(5, 0.0), ValueError),
        (lambda: antoniak_logpmf(5, -1.0), ValueError),
        (lambda: antoniak_logpmf(5, np.nan), ValueError),
        (lambda: antoniak_logpmf(5, np.inf), ValueError),
        (lambda: antoniak_logpmf(5, "1"), TypeError),
        (lambda: antoniak_logpmf(5, True), TypeError),
        (lambda: antoniak_mean(-2, 1.0), ValueError),
        (lambda: antoniak_mean(2, np.nan), ValueError),
        (lambda: antoniak_var(2.0, 1.0), TypeError),
        (lambda: antoniak_sample(5, 1.0, method="gibbs"), ValueError),
        (lambda: antoniak_sample(5, 1.0, size=-1), ValueError),
        (lambda: antoniak_sample(5, 1.0, size=2.5), TypeError),
        (lambda: antoniak_sample(5, 1.0, random_state="seed"), TypeError),
        (lambda: antoniak_sample(-5, 1.0), ValueError),
        (lambda: antoniak_sample(5, 0.0), ValueError),
    ],
)
def test_bad_input(call, exc):
    with pytest.raises(exc):
        call()


@pytest.mark.parametrize("c", [1e15, 1e20])
def test_huge_concentration_seats_everyone_apart(c):
    """For c >> n nearly every customer opens a table (the normaliser lost every
    digit at c = 1e15 and the sampler returned 1 table for n = 50)."""
    gen = np.random.default_rng(0)
    draws = [antoniak_sample(50, c, random_state=gen) for _ in range(20)]
    assert np.all(np.asarray(draws) >= 49)
