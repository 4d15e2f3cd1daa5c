"""Special functions of the C core (bnpcore.kernels.special) against SciPy and mpmath.

Oracles: ALGORITHMS.md section 10.1. The issue asks for relative error <= 1e-12
over x in [1e-10, 1e10] and n up to 1e7; near a zero of a function only an
absolute error is meaningful (digamma at its root x0; dlgamma(x, n) ~ n psi(x)
for small n, which vanishes to first order at x0).
"""
import ctypes

import numpy as np
import pytest
from scipy import special as sp

from bnpcore.kernels import special

X0 = 1.4616321449683623  # positive root of digamma
EULER = 0.57721566490153286061

# log grid over the whole range, plus integers and half-integers
GRID = np.concatenate([np.logspace(-10, 10, 4001), np.arange(1.0, 1001.0), np.arange(0.5, 1000.0)])


@pytest.mark.parametrize(
    "name, ref, atol",
    [
        ("digamma", sp.psi, 0.0),
        ("gammaln", sp.gammaln, 0.0),
        ("trigamma", lambda x: sp.polygamma(1, x), 0.0),
        ("tetragamma", lambda x: sp.polygamma(2, x), 0.0),
    ],
)
def test_matches_scipy_on_grid(name, ref, atol):
    got = getattr(special, name)(GRID)
    np.testing.assert_allclose(got, ref(GRID), rtol=1e-12, atol=atol)


@pytest.mark.parametrize(
    "name, zeros",
    [("gammaln", [1.0, 2.0]), ("digamma", [X0])],
)
def test_relative_accuracy_near_zeros(name, zeros, mpmath):
    # both are computed as differences from their zeros there, so even a relative
    # (not just an absolute) error bound holds
    ref_f = mpmath.loggamma if name == "gammaln" else mpmath.digamma
    t = np.logspace(-15, -0.4, 60)
    x = np.concatenate([z + s * t for z in zeros for s in (1, -1)])
    ref = np.array([float(ref_f(mpmath.mpf(v))) for v in x])
    np.testing.assert_allclose(getattr(special, name)(x), ref, rtol=1e-12, atol=0)


def test_exact_zeros():
    assert special.gammaln(1.0) == 0.0 and special.gammaln(2.0) == 0.0
    assert abs(special.digamma(X0)) < 1e-16


def test_special_values():
    pi = np.pi
    assert special.digamma(1.0) == pytest.approx(-EULER, rel=1e-15)
    assert special.digamma(0.5) == pytest.approx(-EULER - 2 * np.log(2), rel=1e-15)
    assert special.trigamma(1.0) == pytest.approx(pi**2 / 6, rel=1e-15)
    assert special.trigamma(0.5) == pytest.approx(pi**2 / 2, rel=1e-15)
    assert special.tetragamma(1.0) == pytest.approx(-2 * sp.zeta(3), rel=1e-14)
    assert special.gammaln(0.5) == pytest.approx(0.5 * np.log(pi), rel=1e-15)
    # tiny arguments: psi(x) ~ -1/x - gamma, psi'(x) ~ 1/x^2, psi''(x) ~ -2/x^3
    assert special.digamma(1e-10) == pytest.approx(-1e10 - EULER, rel=1e-15)
    assert special.trigamma(1e-10) == pytest.approx(1e20 + pi**2 / 6, rel=1e-15)
    assert special.tetragamma(1e-10) == pytest.approx(-2e30, rel=1e-15)


def test_domain_and_infinities():
    bad = np.array([0.0, -1.0, -0.5, np.nan, -np.inf])
    for f in (special.digamma, special.trigamma, special.tetragamma):
        assert np.isnan(f(bad)).all()
    assert np.isnan(special.gammaln(np.array([-1.0, -0.5, np.nan, -np.inf]))).all()
    assert special.gammaln(0.0) == np.inf
    assert special.gammaln(np.inf) == np.inf
    assert special.digamma(np.inf) == np.inf
    assert special.trigamma(np.inf) == 0.0
    assert special.tetragamma(np.inf) == 0.0
    for f in (special.dlgamma, special.dpsi, special.xdpsi):
        assert np.isnan(f([0.0, -1.0, 1.0, np.nan, 1.0], [1.0, 1.0, -1.0, 1.0, np.nan])).all()
        assert f(2.5, 0) == 0.0
    assert special.dlgamma(2.0, np.inf) == np.inf and special.dpsi(2.0, np.inf) == np.inf


# ----------------------------------------------------------------------------
# Differences lgamma(x+n) - lgamma(x), psi(x+n) - psi(x), x (psi(x+n) - psi(x))
# ----------------------------------------------------------------------------

DIFF_X = [1e-10, 1e-8, 1e-3, 0.5, 1.0, X0, 2.0, 7.5, 9.99, 10.0, 10.01, 1e6, 1e10]
DIFF_N = [0, 1, 2, 3, 16, 17, 1000, 10**7,  # integers (16 is the last of the short-product path)
          1e-12, 1e-8, 1e-3, 0.3, 0.5, 2.5, 16.5, 17.25, 999.5, 1e7 + 0.5, 123456.789]


@pytest.fixture(scope="module")
def diff_refs():
    mpmath = pytest.importorskip("mpmath")
    rows = []
    with mpmath.workdps(60):
        for x in DIFF_X:
            for n in DIFF_N:
                mx, mn = mpmath.mpf(x), mpmath.mpf(n)
                dl = mpmath.loggamma(mx + mn) - mpmath.loggamma(mx)
                dp = mpmath.digamma(mx + mn) - mpmath.digamma(mx)
                rows.append((x, n, float(dl), float(dp), float(mx * dp)))
    return np.array(rows)


def test_dlgamma_vs_mpmath(diff_refs):
    x, n, ref = diff_refs[:, 0], diff_refs[:, 1], diff_refs[:, 2]
    got = special.dlgamma(x, n)
    # dlgamma ~ n psi(x) vanishes at (x0, n -> 0): there the error is measured against n
    err = np.abs(got - ref)
    assert np.all(err <= 1e-12 * np.abs(ref) + 1e-14 * n), np.column_stack([x, n, got, ref])[err > 1e-12 * np.abs(ref) + 1e-14 * n]
    far = np.abs(x - X0) > 1e-3
    np.testing.assert_allclose(got[far], ref[far], rtol=1e-12, atol=0)


@pytest.mark.parametrize("name, col", [("dpsi", 3), ("xdpsi", 4)])
def test_dpsi_xdpsi_vs_mpmath(diff_refs, name, col):
    x, n, ref = diff_refs[:, 0], diff_refs[:, 1], diff_refs[:, col]
    np.testing.assert_allclose(getattr(special, name)(x, n), ref, rtol=1e-12, atol=0)


def test_differences_beat_the_naive_scipy_expression(mpmath):
    # x large, n small: both terms of psi(x + n) - psi(x) and lgamma(x + n) - lgamma(x)
    # are ~log x, and SciPy's differences lose most digits; the C core does not
    x, n = mpmath.mpf(1e6), mpmath.mpf(1e-3)
    ref = float(mpmath.digamma(x + n) - mpmath.digamma(x))
    assert special.dpsi(1e6, 1e-3) == pytest.approx(ref, rel=1e-14)
    assert abs(sp.psi(1e6 + 1e-3) - sp.psi(1e6) - ref) > 1e-8 * ref
    x, n = mpmath.mpf(1e6), mpmath.mpf(1e-8)
    ref = float(mpmath.loggamma(x + n) - mpmath.loggamma(x))
    assert special.dlgamma(1e6, 1e-8) == pytest.approx(ref, rel=1e-14)
    assert abs(sp.gammaln(1e6 + 1e-8) - sp.gammaln(1e6) - ref) > 1e-6 * ref
    # x tiny: x (psi(x + n) - psi(x)) -> n / (x + n) exactly; keep all digits of the rest
    x, n = mpmath.mpf(1e-8), mpmath.mpf(0.5)
    ref = float(x * (mpmath.digamma(x + n) - mpmath.digamma(x)))
    assert special.xdpsi(1e-8, 0.5) == pytest.approx(ref, rel=1e-15)


def test_differences_agree_with_scipy_where_scipy_is_accurate():
    rng = np.random.default_rng(0)
    x = rng.uniform(0.1, 50.0, 2000)
    n = rng.integers(0, 60, 2000).astype(float) + rng.choice([0.0, 0.25], 2000)
    np.testing.assert_allclose(special.dlgamma(x, n), sp.gammaln(x + n) - sp.gammaln(x),
                               rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(special.dpsi(x, n), sp.psi(x + n) - sp.psi(x), rtol=1e-11, atol=1e-12)
    np.testing.assert_allclose(special.xdpsi(x, n), x * (sp.psi(x + n) - sp.psi(x)), rtol=1e-11, atol=1e-12)


def test_short_product_path_boundaries():
    # n = 16 takes the product path, 16.0000001 and 17 do not; both must agree smoothly
    x = np.array([1e-3, 0.7, 30.0, 9.9e16, 1.1e17])
    for f, ref in ((special.dlgamma, lambda x, n: sp.gammaln(x + n) - sp.gammaln(x)),
                   (special.dpsi, lambda x, n: sp.psi(x + n) - sp.psi(x))):
        a, b = f(x[:3], 16.0), f(x[:3], 16.0 + 1e-9)
        np.testing.assert_allclose(a, b, rtol=1e-8)
        np.testing.assert_allclose(a, ref(x[:3], 16.0), rtol=1e-12)
    big = special.dlgamma(x[3:], 16.0)
    np.testing.assert_allclose(big, 16 * np.log(x[3:]), rtol=1e-14)


# ----------------------------------------------------------------------------
# Array handling
# ----------------------------------------------------------------------------

def test_shapes_scalars_and_broadcasting():
    assert isinstance(special.digamma(0.5), np.float64)
    assert isinstance(special.dlgamma(0.5, 3), np.float64)
    assert np.ndim(special.digamma(0.5)) == 0
    x = np.linspace(0.5, 5, 12).reshape(3, 4)
    assert special.trigamma(x).shape == (3, 4)
    np.testing.assert_array_equal(special.digamma(x[:, ::2]), special.digamma(x[:, ::2].copy()))
    ro = x.copy()
    ro.flags.writeable = False
    np.testing.assert_allclose(special.gammaln(ro), sp.gammaln(ro), rtol=1e-13)
    out = special.dpsi(x[:, :1], np.arange(4))  # (3, 1) with (4,) -> (3, 4)
    assert out.shape == (3, 4)
    np.testing.assert_allclose(out, sp.psi(x[:, :1] + np.arange(4)) - sp.psi(x[:, :1]), rtol=1e-12, atol=1e-15)
    np.testing.assert_array_equal(special.digamma(np.arange(1, 5)), special.digamma(np.arange(1.0, 5.0)))
    np.testing.assert_array_equal(special.digamma(np.float32(0.25)), special.digamma(0.25))
    assert special.digamma([]).shape == (0,)


def test_logsumexp_matches_scipy():
    rng = np.random.default_rng(1)
    a = rng.normal(scale=50, size=(4, 5, 6))
    for axis in (None, 0, 1, 2, -1):
        np.testing.assert_allclose(special.logsumexp(a, axis=axis), sp.logsumexp(a, axis=axis), rtol=1e-14)
    assert special.logsumexp([1e308, 1e308]) == 1e308  # max-subtraction: no overflow
    assert special.logsumexp([-1000.0, -1000.0]) == pytest.approx(-1000 + np.log(2), rel=1e-15)


def test_logsumexp_edge_cases():
    inf = np.inf
    assert special.logsumexp([-inf, -inf]) == -inf
    assert special.logsumexp([]) == -inf
    assert special.logsumexp([1.0, inf]) == inf
    assert np.isnan(special.logsumexp([1.0, np.nan]))
    assert np.isnan(special.logsumexp([np.nan, -inf]))
    assert np.isnan(special.logsumexp([inf, np.nan]))
    np.testing.assert_array_equal(special.logsumexp(np.zeros((3, 0)), axis=1), [-inf] * 3)
    assert special.logsumexp(np.zeros((0, 3)), axis=1).shape == (0,)
    np.testing.assert_array_equal(special.logsumexp(np.zeros((0, 3)), axis=0), [-inf] * 3)
    np.testing.assert_array_equal(special.logsumexp([[-inf, 0.0], [-inf, -inf]], axis=1), [0.0, -inf])


@pytest.mark.parametrize("bad", ["1.0", [1 + 2j], np.array([True, False]), True, None, [object()]])
@pytest.mark.parametrize("name", ["digamma", "trigamma", "tetragamma", "gammaln", "logsumexp"])
def test_unary_rejects_non_real_input(name, bad):
    with pytest.raises(TypeError, match="real number"):
        getattr(special, name)(bad)


@pytest.mark.parametrize("name", ["dlgamma", "dpsi", "xdpsi"])
def test_binary_rejects_non_real_input(name):
    f = getattr(special, name)
    for x, n in (("1", 2), (1.0, "2"), (1.0, True), (np.array([1 + 1j]), 1), (1.0, None)):
        with pytest.raises(TypeError, match="real number"):
            f(x, n)
    with pytest.raises(ValueError):
        f(np.ones(3), np.ones(4))  # shapes do not broadcast


# ----------------------------------------------------------------------------
# The exported C functions (capsules in __pyx_capi__), called through ctypes
# ----------------------------------------------------------------------------

def _capi(name, restype, *argtypes):
    capsule = special.__pyx_capi__[name]
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    get_name = ctypes.pythonapi.PyCapsule_GetName
    get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
    return ctypes.CFUNCTYPE(restype, *argtypes)(get(capsule, get_name(capsule)))


def _ptr(a):
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_double))


def test_exported_array_functions():
    dp, ssize = ctypes.POINTER(ctypes.c_double), ctypes.c_ssize_t
    x = np.ascontiguousarray(np.logspace(-8, 8, 257))
    m = np.ascontiguousarray(np.arange(257) % 20 + 0.5)
    for name, py in (("digamma_array", special.digamma), ("trigamma_array", special.trigamma),
                     ("gammaln_array", special.gammaln)):
        out = np.empty_like(x)
        _capi(name, None, dp, dp, ssize)(_ptr(x), _ptr(out), x.size)
        np.testing.assert_array_equal(out, py(x))
    for name, py in (("dlgamma_array", special.dlgamma), ("dpsi_array", special.dpsi)):
        out = np.empty_like(x)
        _capi(name, None, dp, dp, dp, ssize)(_ptr(x), _ptr(m), _ptr(out), x.size)
        np.testing.assert_array_equal(out, py(x, m))
    lse = _capi("logsumexp_array", ctypes.c_double, dp, ssize)
    assert lse(_ptr(x), x.size) == special.logsumexp(x)
    assert lse(_ptr(x), 0) == -np.inf


def test_abi_version_is_exposed():
    assert isinstance(special.ABI_VERSION, int) and special.ABI_VERSION >= 1


@pytest.mark.parametrize("x, n", [(1e-200, 1e-200), (1e-160, 0.5), (1e-300, 17.5), (1e-300, 1e12), (1e-250, 3e-251),
                                  (1e-154, 1e-154), (1e-300, 1e-310)])
def test_differences_at_tiny_x_are_finite_and_accurate(x, n, mpmath):
    """dpsi(x, n) overflowed to inf below x ~ 1e-154 (x (x + n) underflowed) and
    dlgamma(1e-300, 1e12) was -inf (n / x overflowed)."""
    with mpmath.workdps(80):
        mx, mn = mpmath.mpf(x), mpmath.mpf(n)
        dl = float(mpmath.loggamma(mx + mn) - mpmath.loggamma(mx))
        dp = float(mpmath.digamma(mx + mn) - mpmath.digamma(mx))
    assert special.dpsi(x, n) == pytest.approx(dp, rel=1e-12)
    assert special.dlgamma(x, n) == pytest.approx(dl, rel=1e-12)
