"""Fixtures shared by several test modules."""
import pytest

from bnpcore.models import hdp_pc


@pytest.fixture(scope="module")
def client():
    """A LocalCluster of 2 worker processes with one thread each, for one module's tests."""
    distributed = pytest.importorskip("dask.distributed", reason="bnpcore.distributed needs dask[distributed]")
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cl, \
            distributed.Client(cl) as c:
        yield c


@pytest.fixture
def wide_tail(monkeypatch):
    """PC-HDP's z-step split with half the stick in the tail (TAIL_MASS =
    0.5, against the default 1e-4; with any function of Psi the Dirichlet
    form is exact), so that tokens sit in tail topics (on the five-token
    corpus of the enumeration tests, at the start of 68 % of the sweeps, 31 %
    of the tokens, against 0.04 % of the sweeps at the default; at 0.05, 10 %
    of the sweeps, the enumeration tests passed without the tail tokens' own
    candidates): the list to which each sweep appends its number of tail
    tokens."""
    monkeypatch.setattr(hdp_pc, "TAIL_MASS", 0.5)
    found, draw = [], hdp_pc.PartiallyCollapsedHDPState.draw_sticks

    def draw_sticks(self, l_k):
        K, tail = draw(self, l_k)
        found.append(int((self.labels >= K).sum()))
        return K, tail

    monkeypatch.setattr(hdp_pc.PartiallyCollapsedHDPState, "draw_sticks", draw_sticks)
    return found
