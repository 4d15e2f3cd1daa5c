"""bnpcore.distributed with hdp.DirectAssignmentVB (online oHDP and batch bHDP,
with and without split-merge moves) on a LocalCluster of 2 worker processes:
the same model as the local fit (to 1e-10: the partitions' statistics are
summed in another order; bit for bit with one partition), with the same
accepted moves, from an on-disk corpus, through a checkpoint and resume and
through a lost worker."""
import os
import signal

import numpy as np
import pytest

distributed = pytest.importorskip("dask.distributed", reason="bnpcore.distributed needs dask[distributed]")

import bnpcore  # noqa: E402
from bnpcore import distributed as bnpdist  # noqa: E402
from bnpcore import hdp  # noqa: E402
from bnpcore.corpus import write  # noqa: E402
from bnpcore.datasets import make_bars  # noqa: E402

# from 2 topics on bars: splits (and merges) are accepted during the runs; online 4 minibatches per epoch
MODES = {"online": dict(mode="online", batch_size=25, max_iter=2),
         "batch": dict(mode="batch", max_iter=6, tol=0.0)}
COMMON = dict(n_components=2, eta=0.5, random_state=0, n_threads=1)
MOVES = ("splits", "split_tries", "merges", "merge_tries", "pruned", "n_components", "n_documents")


def make(mode, split_merge=True):
    return hdp.DirectAssignmentVB(**COMMON, **MODES[mode], split_merge=split_merge)


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cl, \
            distributed.Client(cl) as c:
        yield c


@pytest.fixture(scope="module")
def corpus():
    return make_bars("sm", n_docs=100, n_test=1, doc_length=60, random_state=0).train


@pytest.fixture(scope="module")
def local(corpus):
    """The local fits, by (mode, split_merge)."""
    return {(mode, sm): make(mode, sm).fit(corpus) for mode in MODES for sm in (True, False)}


def assert_same(dist, local, exact=False):
    """The model, every record's moves and bound: to 1e-10 (bit for bit if ``exact``)."""
    assert [[h[k] for k in MOVES] for h in dist.history_] == [[h[k] for k in MOVES] for h in local.history_]
    assert dist.n_iter_ == local.n_iter_
    for name in ("components_", "weights_", "rest_weight_", "alpha_", "gamma_"):
        if exact:
            np.testing.assert_array_equal(getattr(dist, name), getattr(local, name), err_msg=name)
        else:
            np.testing.assert_allclose(getattr(dist, name), getattr(local, name), rtol=1e-10, atol=0, err_msg=name)
    for hd, hl in zip(dist.history_, local.history_):
        assert hd.keys() - {"driver_seconds"} == hl.keys()
        for term, value in hl.get("bound", {}).items():
            assert hd["bound"][term] == (value if exact else pytest.approx(value, rel=1e-10, abs=0))


@pytest.mark.parametrize("split_merge", [True, False])
@pytest.mark.parametrize("mode", sorted(MODES))
def test_equals_local_fit(client, corpus, local, mode, split_merge):
    """3 partitions on 2 workers."""
    dist = bnpdist.fit(make(mode, split_merge), corpus, client, n_partitions=3)
    twin = local[mode, split_merge]
    assert_same(dist, twin)
    assert (sum(h["splits"] + h["merges"] for h in twin.history_) > 0) == split_merge
    assert all(0 <= h["driver_seconds"] <= h["fit_seconds"] for h in dist.history_)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_one_partition_is_the_local_fit_bit_for_bit(client, corpus, local, mode):
    """Each document's E-step is the local one's: only the order of the partitions' sums differs."""
    assert_same(bnpdist.fit(make(mode), corpus, client, n_partitions=1), local[mode, True], exact=True)


@pytest.mark.parametrize("mode", sorted(MODES))
def test_on_disk_equals_local_fit(client, corpus, local, tmp_path, mode):
    disk = write(corpus, tmp_path / "bars")
    assert_same(bnpdist.fit(make(mode), disk, client, n_partitions=2), local[mode, True])


@pytest.mark.parametrize("mode", sorted(MODES))
def test_checkpoint_resume_after_a_killed_client(client, corpus, local, tmp_path, mode):
    """Online: mid-epoch (the random order and position saved); the local fit resumes the checkpoint too."""
    path = tmp_path / "da.npz"

    def crash(est, record):
        if record["iteration"] == 5:
            raise KeyboardInterrupt("client killed")

    est = make(mode)
    with est.reporting(crash), pytest.raises(KeyboardInterrupt):
        bnpdist.fit(est, corpus, client, n_partitions=2, checkpoint=path, checkpoint_every=3)
    resumed = bnpdist.fit(bnpcore.load(path), corpus, client, n_partitions=2, resume=True)
    assert [h["iteration"] for h in resumed.history_] == list(range(1, len(local[mode, True].history_) + 1))
    assert_same(resumed, local[mode, True])
    assert_same(bnpcore.load(path).fit(corpus, resume=True), local[mode, True])


@pytest.mark.parametrize("mode", sorted(MODES))
def test_lost_worker_changes_nothing(client, corpus, local, mode):
    killed = []

    def kill_a_worker(est, record):
        if record["iteration"] == 3:
            holders = [w for w, keys in client.has_what().items() if any(k.startswith("_identity") for k in keys)]
            assert holders, "no worker holds a partition"
            pid = client.run(os.getpid, workers=holders[:1])[holders[0]]
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)

    est = make(mode)
    with est.reporting(kill_a_worker):
        bnpdist.fit(est, corpus, client, n_partitions=2)
    assert killed
    assert_same(est, local[mode, True])
