"""The header's Dirichlet-multinomial sums (bnp_log_rising, bnp_log_dirmult) against
scipy.special.gammaln on small inputs, called through ctypes from a shim compiled
against include/bnpcore/bnpcore.h; and one kernel that uses them (_nrm.dm_matrix)."""
import ctypes
import os
import shutil
import subprocess

import numpy as np
import pytest
from scipy.special import gammaln

import bnpcore
from bnpcore.kernels import _nrm, special

SHIM = r"""
#include "bnpcore/bnpcore.h"
double log_rising(const int32_t *ids, const int32_t *c, int64_t nnz, const double *row, double offset,
                  double scale) { return bnp_log_rising(ids, c, nnz, row, offset, scale); }
double log_dirmult(const int32_t *ids, const int32_t *c, int64_t nnz, const double *lam, double lam_total)
                  { return bnp_log_dirmult(ids, c, nnz, lam, lam_total); }
"""
I32, F64 = ctypes.POINTER(ctypes.c_int32), ctypes.POINTER(ctypes.c_double)


@pytest.fixture(scope="module")
def header(tmp_path_factory):
    cc = os.environ.get("CC", "cc").split()
    if shutil.which(cc[0]) is None:
        pytest.skip(f"no C compiler ({cc[0]})")
    tmp = tmp_path_factory.mktemp("dirmult")
    (tmp / "shim.c").write_text(SHIM)
    cmd = cc + ["-std=c99", "-O2", "-shared", "-fPIC", "-I", bnpcore.get_include(), str(tmp / "shim.c"),
                "-o", str(tmp / "shim.so"), "-lm"]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    lib = ctypes.CDLL(str(tmp / "shim.so"))
    lib.log_rising.argtypes = [I32, I32, ctypes.c_int64, F64, ctypes.c_double, ctypes.c_double]
    lib.log_dirmult.argtypes = [I32, I32, ctypes.c_int64, F64, ctypes.c_double]
    lib.log_rising.restype = lib.log_dirmult.restype = ctypes.c_double
    return lib


def ptr(a, kind):
    return a.ctypes.data_as(kind) if a is not None else None


def document(rng, W, nnz):
    """Distinct word ids and counts 1..20 (both sides of the running product's c <= 8)."""
    ids = rng.choice(W, size=nnz, replace=False).astype(np.int32)
    return ids, rng.integers(1, 21, size=nnz).astype(np.int32)


def test_log_rising_matches_gammaln(header):
    rng = np.random.default_rng(0)
    W = 40
    row = rng.uniform(1e-3, 50.0, size=W)
    row[::7] = 1e-90            # running product far below 1e-150: rescaled
    row[3] = 1e-120             # below the product's range: bnp_dlgamma
    for offset, scale in ((0.0, 1.0), (0.25, 2.0), (1e-3, 0.5)):
        for nnz in (1, 5, 40):
            ids, c = document(rng, W, nnz)
            x = offset + scale * row[ids]
            ref = np.sum(gammaln(x + c) - gammaln(x))
            got = header.log_rising(ptr(ids, I32), ptr(c, I32), nnz, ptr(row, F64), offset, scale)
            assert got == pytest.approx(ref, rel=1e-12, abs=1e-12)
    assert header.log_rising(ptr(ids, I32), ptr(c, I32), 0, ptr(row, F64), 0.25, 2.0) == 0.0


def test_log_rising_symmetric_prior_is_the_dlgamma_sum(header):
    """row NULL: sum_i lgamma(offset + c_i) - lgamma(offset), summed in order exactly as
    the kernels did before the header function (bit for bit)."""
    rng = np.random.default_rng(1)
    for offset in (0.01, 0.5, 3.0):
        c = rng.integers(1, 21, size=30).astype(np.int32)
        got = header.log_rising(None, ptr(c, I32), c.size, None, offset, 1.0)
        assert got == pytest.approx(np.sum(gammaln(offset + c) - gammaln(offset)), rel=1e-12)
        s = 0.0
        for n in c:
            s += special.dlgamma(offset, float(n))
        assert got == s


def test_log_dirmult_matches_gammaln(header):
    rng = np.random.default_rng(2)
    W = 25
    lam = rng.uniform(0.05, 4.0, size=W)
    for nnz in (0, 1, 10, 25):
        ids, c = document(rng, W, nnz)
        ref = (np.sum(gammaln(lam[ids] + c) - gammaln(lam[ids]))
               + gammaln(lam.sum()) - gammaln(lam.sum() + c.sum()))
        got = header.log_dirmult(ptr(ids, I32), ptr(c, I32), nnz, ptr(lam, F64), lam.sum())
        assert got == pytest.approx(ref, rel=1e-12, abs=1e-12)


def test_dm_matrix_kernel_matches_gammaln():
    """_nrm.dm_matrix (bnp_log_rising per document and row) against its Equivalent formula."""
    rng = np.random.default_rng(3)
    D, K, W, offset = 6, 4, 30, 0.1
    X = rng.integers(0, 12, size=(D, W)) * (rng.random((D, W)) < 0.3)
    X[0] = 0                                        # an empty document
    indptr = np.concatenate([[0], np.cumsum((X > 0).sum(1))]).astype(np.int64)
    indices = np.nonzero(X)[1].astype(np.int32)
    counts = X[X > 0].astype(np.int32)
    rows = rng.uniform(0.0, 20.0, size=(K, W))
    out = np.empty((D, K))
    _nrm.dm_matrix(indptr, indices, counts, rows, rows.sum(1), offset, out)
    lam = offset + rows
    L = lam.sum(1)
    ref = (gammaln(lam[None] + X[:, None]) - gammaln(lam[None])).sum(2) + gammaln(L) - gammaln(L + X.sum(1)[:, None])
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12)
