"""Unsigned Stirling numbers of the first kind (bnpcore.kernels.stirling).

Oracles (ALGORITHMS.md section 10.1): the exact big-integer recurrence for
n <= 300; beyond that, row identities in log space (sum_m s(n, m) = n!,
sum_m s(n, m) x^m = x (x + 1) ... (x + n - 1)) checked against mpmath.
"""
import math

import numpy as np
import pytest

from bnpcore.kernels import stirling
from bnpcore.kernels.stirling import StirlingTable, log_stirling1, log_stirling1_row


def exact_rows(n_max):
    """s(n, m) as Python ints, rows 0..n_max, by s(n, m) = s(n-1, m-1) + (n-1) s(n-1, m)."""
    rows = [[1]]
    for n in range(1, n_max + 1):
        prev = rows[-1] + [0]
        rows.append([0] + [prev[m - 1] + (n - 1) * prev[m] for m in range(1, n + 1)])
    return rows


def test_exact_big_integer_recurrence_up_to_300(mpmath):
    from bnpcore.kernels.stirling import antoniak_logpmf

    rows = exact_rows(300)
    table = StirlingTable(300)
    for n in range(1, 301):
        ref = np.array([math.log(v) for v in rows[n][1:]])
        np.testing.assert_allclose(table.row(n), ref, rtol=1e-12, atol=0)
    for n, m in [(1, 1), (10, 3), (170, 85), (171, 2), (300, 1), (300, 150), (300, 299)]:
        assert log_stirling1(n, m) == pytest.approx(math.log(rows[n][m]), rel=1e-12)
        assert table.log(n, m) == log_stirling1(n, m)
    # The table keeps P(n, m) = log(s(n, m) / n!), which the Antoniak pmf at c = 1 is.
    # Each entry is accurate to a few ulps of |P| (errors grow like sqrt(n) along the
    # recurrence), so the entries that carry the mass (|P| of order 1) keep ~1e-15.
    for n in (7, 50, 171, 300):
        lf = mpmath.loggamma(n + 1)
        ref = np.array([float(mpmath.log(v) - lf) for v in rows[n][1:]])
        err = np.abs(antoniak_logpmf(n, 1.0) - ref)
        assert np.all(err <= 1e-14 * np.abs(ref) + 1e-15), n


def test_known_rows_and_edges():
    np.testing.assert_allclose(np.exp(log_stirling1_row(5)), [24, 50, 35, 10, 1], rtol=1e-14)
    np.testing.assert_allclose(np.exp(log_stirling1_row(6)), [120, 274, 225, 85, 15, 1], rtol=1e-14)
    assert log_stirling1(0, 0) == 0.0
    assert log_stirling1(7, 0) == -np.inf
    assert log_stirling1(7, 7) == 0.0
    assert log_stirling1(7, 1) == pytest.approx(math.log(math.factorial(6)), rel=1e-15)
    assert log_stirling1(7, 6) == pytest.approx(math.log(21), rel=1e-15)  # s(n, n-1) = C(n, 2)
    assert log_stirling1_row(0).shape == (0,)


@pytest.fixture(scope="module")
def table5000():
    return StirlingTable(5000)


def test_row_identities_in_log_space_up_to_5000(table5000, mpmath):
    from bnpcore.kernels.special import logsumexp

    for n in range(1, 5001):
        row = table5000.row(n)
        # sum_m s(n, m) = n!
        assert logsumexp(row) == pytest.approx(float(mpmath.loggamma(n + 1)), rel=1e-12, abs=1e-15)
    m = np.arange(1, 5001)
    for n in (2, 17, 300, 1000, 2500, 4999, 5000):
        row = table5000.row(n)
        for x in (1e-6, 0.3, 7.0):
            # sum_m s(n, m) x^m = x (x + 1) ... (x + n - 1) = Gamma(x + n) / Gamma(x)
            ref = float(mpmath.loggamma(mpmath.mpf(x) + n) - mpmath.loggamma(x))
            got = logsumexp(row + m[:n] * np.log(x))
            assert got == pytest.approx(ref, rel=1e-12), (n, x)


def test_table_growth_matches_a_fresh_table(table5000):
    t = StirlingTable()
    assert t.n_max == 0 and t.nbytes == 0
    t.grow(10)
    assert t.n_max == 10
    t.grow(3)  # no-op
    assert t.n_max == 10
    assert t.log(60, 7) == table5000.log(60, 7)  # a lookup grows the table
    assert t.n_max == 60
    t.row(200)
    assert t.n_max == 200 and t.nbytes == 200 * 201 // 2 * 8
    for n in (1, 2, 10, 11, 60, 61, 200):
        np.testing.assert_array_equal(t.row(n), table5000.row(n))
    row = t.row(5)
    row[:] = 0  # a copy: the table is unchanged
    np.testing.assert_allclose(np.exp(t.row(5)), [24, 50, 35, 10, 1], rtol=1e-14)


def test_cap(table5000):
    assert stirling.MAX_N == 10000
    t = StirlingTable(50)
    with pytest.raises(ValueError, match="10000"):
        t.grow(stirling.MAX_N + 1)
    with pytest.raises(ValueError, match="10000"):
        t.log(stirling.MAX_N + 1, 1)
    assert t.n_max == 50  # unchanged by the failed growth
    np.testing.assert_array_equal(t.row(50), table5000.row(50))


def test_row_beyond_the_cap(mpmath):
    from bnpcore.kernels.special import logsumexp

    n = stirling.MAX_N + 1
    row = log_stirling1_row(n)  # computed alone in O(n) memory, not via the table
    assert row.shape == (n,) and np.isfinite(row).all()
    assert logsumexp(row) == pytest.approx(float(mpmath.loggamma(n + 1)), rel=1e-13)
    m = np.arange(1, n + 1)
    for x in (1e-6, 0.3, 7.0):
        ref = float(mpmath.loggamma(mpmath.mpf(x) + n) - mpmath.loggamma(x))
        assert logsumexp(row + m * np.log(x)) == pytest.approx(ref, rel=1e-12)
    assert row[0] == pytest.approx(float(mpmath.loggamma(n)), rel=1e-13)      # s(n, 1) = (n-1)!
    harmonic = math.fsum(1.0 / i for i in range(1, n))
    assert row[1] == pytest.approx(float(mpmath.loggamma(n)) + math.log(harmonic), rel=1e-13)  # (n-1)! H
    # far from the row's mass: absolute error a few ulps of |log(s / n!)| (see above)
    scaled = math.log(n * (n - 1) // 2) - float(mpmath.loggamma(n + 1))
    assert abs(row[n - 2] - math.log(n * (n - 1) // 2)) <= 1e-14 * abs(scaled)  # s(n, n-1) = C(n, 2)
    assert row[n - 1] == 0.0
    assert log_stirling1(n, 2) == row[1]


@pytest.mark.parametrize(
    "call, exc",
    [
        (lambda: StirlingTable(-1), ValueError),
        (lambda: StirlingTable(2.5), TypeError),
        (lambda: StirlingTable(True), TypeError),
        (lambda: StirlingTable().grow("3"), TypeError),
        (lambda: StirlingTable().log(5, 6), ValueError),
        (lambda: StirlingTable().log(5, -1), ValueError),
        (lambda: StirlingTable().row(-2), ValueError),
        (lambda: log_stirling1(-1, 0), ValueError),
        (lambda: log_stirling1(5, 6), ValueError),
        (lambda: log_stirling1(5.0, 2), TypeError),
        (lambda: log_stirling1(np.nan, 2), TypeError),
        (lambda: log_stirling1(5, True), TypeError),
        (lambda: log_stirling1(np.int64(5), np.float64(2)), TypeError),
        (lambda: log_stirling1_row(-3), ValueError),
        (lambda: log_stirling1_row(None), TypeError),
    ],
)
def test_bad_input(call, exc):
    with pytest.raises(exc):
        call()


def test_numpy_integers_are_accepted():
    assert log_stirling1(np.int32(6), np.int64(2)) == pytest.approx(math.log(274), rel=1e-15)
