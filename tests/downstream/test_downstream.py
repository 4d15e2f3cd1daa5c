"""C-level reuse: build, against the *installed* bnpcore, a tiny Cython extension
that cimports every public .pxd (ext.pyx) and a C/C++ program that includes
bnpcore/bnpcore.h (ctest.c); run them and check their results against SciPy.

Skipped for editable installs (their .pxd files are not laid out as an importable
bnpcore/kernels/ package, so other builds cannot cimport them) and when there is
no compiler or no Cython.
"""
import importlib.util
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from scipy import special as sp
from scipy import stats

import bnpcore
import bnpcore.kernels
from bnpcore.kernels import special

HERE = Path(__file__).parent
KERNELS = Path(bnpcore.kernels.__file__).parent
IS_EDITABLE = not (KERNELS / "special.pxd").is_file() or KERNELS.name != "kernels"

pytestmark = pytest.mark.skipif(IS_EDITABLE, reason="editable install: its .pxd files cannot be cimported")


def test_installed_layout():
    include = Path(bnpcore.get_include())
    assert include == Path(bnpcore.__file__).parent / "include"  # the installed copy, not the checkout
    assert (include / "bnpcore" / "bnpcore.h").is_file()
    for name in ("special", "rng", "stirling", "sparse"):
        assert (KERNELS / f"{name}.pxd").is_file()


@pytest.fixture(scope="module")
def ext(tmp_path_factory):
    if shutil.which(os.environ.get("CC", "cc").split()[0]) is None:
        pytest.skip("no C compiler")
    pytest.importorskip("Cython")
    build = tmp_path_factory.mktemp("downstream")
    for name in ("setup.py", "ext.pyx"):
        shutil.copy(HERE / name, build / name)
    proc = subprocess.run([sys.executable, "setup.py", "build_ext", "--inplace"], cwd=build,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    so = next(build.glob("bnp_downstream_ext*.so"), None) or next(build.glob("bnp_downstream_ext*.pyd"))
    spec = importlib.util.spec_from_file_location("bnp_downstream_ext", so)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_extension_abi_matches(ext):
    assert ext.abi_version() == special.ABI_VERSION


def test_extension_digamma_both_channels(ext):
    x = np.logspace(-8, 8, 101)
    header, exported = ext.digamma_both(x)
    np.testing.assert_allclose(header, sp.psi(x), rtol=1e-12)
    np.testing.assert_array_equal(header, exported)
    assert ext.dlgamma(0.5, 3.0) == pytest.approx(sp.gammaln(3.5) - sp.gammaln(0.5), rel=1e-13)
    v = np.array([-1.0, 0.5, 3.0])
    assert ext.logsumexp(v) == pytest.approx(sp.logsumexp(v), rel=1e-14)


def test_extension_stirling_both_channels(ext):
    for n, m, exact in [(6, 2, 274), (10, 3, 1172700), (25, 25, 1)]:
        header, table = ext.log_stirling_both(n, m)
        assert header == table == pytest.approx(math.log(exact), rel=1e-13, abs=1e-15)
    draws, mean = ext.antoniak_draws(30, 2.5, 20000, np.random.default_rng(0))
    assert mean == pytest.approx(2.5 * (sp.psi(32.5) - sp.psi(2.5)), rel=1e-13)
    var = mean + 2.5**2 * (sp.polygamma(1, 32.5) - sp.polygamma(1, 2.5))
    assert abs(draws.mean() - mean) < 5 * math.sqrt(var / draws.size)
    assert draws.min() >= 1 and draws.max() <= 30


def test_extension_rng_and_sparse(ext):
    x = ext.gamma_draws(2.5, 20000, np.random.default_rng(1))
    assert stats.kstest(x, stats.gamma(2.5).cdf).pvalue > 1e-3
    indptr = np.array([0, 2, 2, 3], np.int64)
    totals, nnz = ext.row_totals(indptr, np.array([0, 4, 1], np.int32), np.array([3, 2, 7], np.int32))
    assert totals == [5, 0, 7] and nnz == [2, 0, 1]


@pytest.mark.parametrize(
    "flavour, cmd",
    [("c99", ["cc", "-std=c99", "-Wall", "-Wextra", "-Werror", "-pedantic"]),
     ("c++", ["c++", "-Wall", "-Wextra", "-Werror", "-pedantic", "-x", "c++"])],
)
def test_c_program_against_installed_header(flavour, cmd, tmp_path):
    if shutil.which(cmd[0]) is None:
        pytest.skip(f"no {flavour} compiler")
    shutil.copy(HERE / "ctest.c", tmp_path / "ctest.c")
    exe = tmp_path / "ctest"
    proc = subprocess.run(cmd + ["-I", bnpcore.get_include(), "ctest.c", "-o", str(exe), "-lm"],
                          cwd=tmp_path, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()
    checked = 0
    for line in out:
        name, *args = line.split()
        if name == "abi":
            assert int(args[0]) == special.ABI_VERSION
            continue
        *params, value = map(float, args)
        if name == "digamma":
            ref = sp.psi(params[0])
        elif name == "dlgamma":  # SciPy's difference cancels at x = 1e8: mpmath
            mpmath = pytest.importorskip("mpmath")
            with mpmath.workdps(40):
                x, n = mpmath.mpf(params[0]), mpmath.mpf(params[1])
                ref = float(mpmath.loggamma(x + n) - mpmath.loggamma(x))
        elif name == "log_stirling1":
            n, m = map(int, params)
            ref = math.log(stirling1(n, m))
        else:  # antoniak_mean
            n, c = params
            ref = c * (sp.psi(c + n) - sp.psi(c))
        assert value == pytest.approx(ref, rel=1e-12, abs=1e-13), line
        checked += 1
    assert checked == 14


def stirling1(n, m):
    """Unsigned Stirling number of the first kind, exact (Python integers)."""
    row = [1]
    for k in range(1, n + 1):
        prev = row + [0]
        row = [0] + [prev[j - 1] + (k - 1) * prev[j] for j in range(1, k + 1)]
    return row[m]
