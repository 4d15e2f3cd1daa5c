"""bnpcore.distributed with hdp.DirectAssignmentVB (online oHDP and batch bHDP,
with and without split-merge moves) on a LocalCluster of 2 worker processes:
the same model as the local fit bit for bit (the client redoes the E-step's
sums in the kernel's order), with the same accepted moves, from an on-disk
corpus, through a checkpoint and resume and through a lost worker."""
import os
import signal

import numpy as np
import pytest

pytest.importorskip("dask.distributed", reason="bnpcore.distributed needs dask[distributed]")

import bnpcore  # noqa: E402
from bnpcore import distributed as bnpdist  # noqa: E402
from bnpcore import hdp  # noqa: E402
from bnpcore.corpus import write  # noqa: E402
from bnpcore.datasets import make_bars  # noqa: E402
from bnpcore.inference.online import Minibatch  # noqa: E402
from bnpcore.models.hdp_da import estep_documents, reduce_estep  # noqa: E402

# from 2 topics on 5 x 5 bars: splits are accepted in both modes; online 4 minibatches per epoch
MODES = {"online": dict(mode="online", batch_size=30, max_iter=2),
         "batch": dict(mode="batch", max_iter=6, tol=0.0)}
COMMON = dict(n_components=2, eta=0.5, random_state=0, n_threads=1)
MOVES = ("splits", "split_tries", "merges", "merge_tries", "pruned", "n_components", "n_documents")


def make(mode, split_merge=True):
    return hdp.DirectAssignmentVB(**COMMON, **MODES[mode], split_merge=split_merge)


@pytest.fixture(scope="module")
def corpus():
    return make_bars("sm", n_docs=120, n_test=1, doc_length=150, side=5, random_state=0).train


@pytest.fixture(scope="module")
def local(corpus):
    """The local fits, by (mode, split_merge)."""
    return {(mode, sm): make(mode, sm).fit(corpus) for mode in MODES for sm in (True, False)}


def assert_same(dist, local):
    """The model, every record's moves and bound, bit for bit."""
    assert [[h[k] for k in MOVES] for h in dist.history_] == [[h[k] for k in MOVES] for h in local.history_]
    assert dist.n_iter_ == local.n_iter_
    for name in ("components_", "weights_", "rest_weight_", "alpha_", "gamma_"):
        np.testing.assert_array_equal(getattr(dist, name), getattr(local, name), err_msg=name)
    for hd, hl in zip(dist.history_, local.history_):
        assert hd.keys() - {"driver_seconds", "client_seconds"} == hl.keys()
        assert hd.get("bound") == hl.get("bound")


@pytest.mark.parametrize("split_merge", [True, False])
@pytest.mark.parametrize("mode", sorted(MODES))
def test_equals_local_fit(client, corpus, local, mode, split_merge):
    """3 partitions on 2 workers."""
    dist = bnpdist.fit(make(mode, split_merge), corpus, client, n_partitions=3)
    twin = local[mode, split_merge]
    assert_same(dist, twin)
    assert (sum(h["splits"] + h["merges"] for h in twin.history_) > 0) == split_merge
    assert all(0 <= h["driver_seconds"] <= h["fit_seconds"] for h in dist.history_)


def test_redone_sums_equal_the_kernels():
    """``reduce_estep`` from the per-document outputs: the kernel's statistics and entropy, bit for bit."""
    data = make_bars("sm", n_docs=40, n_test=1, doc_length=50, side=5, random_state=1).train
    est = make("online", split_merge=False)
    state = est._init_state(data, np.random.default_rng(0))
    batch = Minibatch(data, np.random.default_rng(1).permutation(data.n_docs), state._word_map)
    elogphi = state.elogphi(batch.vocab)
    theta, ndk, stats, entropy, resp, log_norm, psi_theta = estep_documents(
        batch, elogphi, state.alpha * state.beta, state.settings, norms=True)
    again = reduce_estep(batch, elogphi, ndk, resp, log_norm, psi_theta)
    np.testing.assert_array_equal(again[0], stats)
    np.testing.assert_array_equal(again[1], entropy)
    local = state.estep(batch)       # what the local fit computes
    for name, value in zip(("theta", "ndk", "stats", "entropy"), (theta, ndk, stats, entropy)):
        np.testing.assert_array_equal(getattr(local, name), value, err_msg=name)


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


def test_cli_scheduler(client, capsys):
    """``bnpcore fit --scheduler`` runs the batch and the online direct-assignment HDP on the cluster."""
    from bnpcore import cli
    for model in ("hdp-da-batch", "hdp-da-sm"):
        assert cli.main(["fit", "--model", model, "--data", "bars", "--iterations", "2", "--scheduler",
                         client.scheduler.address, "-q"]) == 0
        assert "fitted in" in capsys.readouterr().out
