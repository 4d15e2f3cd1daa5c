"""Fixtures shared by the test modules of ``bnpcore.distributed``."""
import pytest


@pytest.fixture(scope="module")
def client():
    """A LocalCluster of 2 worker processes with one thread each, for one module's tests."""
    distributed = pytest.importorskip("dask.distributed", reason="bnpcore.distributed needs dask[distributed]")
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cl, \
            distributed.Client(cl) as c:
        yield c
