"""bnpcore.distributed with lda.CollapsedVB (delayed schedule, CVB and CVB0) on a
LocalCluster of 2 worker processes: the same model as the local fit with
``n_threads = n_partitions`` bit for bit, across the periodic recount of the
expected counts, from an on-disk corpus, through a lost worker, a checkpoint
and a resume; clear errors for what it does not run."""
import os
import signal

import numpy as np
import pytest

pytest.importorskip("dask.distributed", reason="bnpcore.distributed needs dask[distributed]")

import bnpcore  # noqa: E402
from bnpcore import cli, datasets, lda  # noqa: E402
from bnpcore import distributed as bnpdist  # noqa: E402
from bnpcore.corpus import Corpus, write  # noqa: E402
from bnpcore.inference.stats import RECOUNT_EVERY  # noqa: E402

# 12 sweeps: the expected counts are recomputed from r after sweep 10 (RECOUNT_EVERY)
PARAMS = {"n_components": 5, "max_iter": 12, "tol": None, "schedule": "delayed", "random_state": 3}
assert PARAMS["max_iter"] > RECOUNT_EVERY


@pytest.fixture(scope="module")
def corpus():
    return datasets.load_kos()[:301]     # 301 documents: uneven partitions for P = 2 and 3


def cvb(order, n_threads=1, **params):
    """The estimator; the driver's ``n_threads`` is not used (one block per partition)."""
    return lda.CollapsedVB(**{**PARAMS, **params}, order=order, n_threads=n_threads)


def assert_same_model(dist, local):
    """Topics, proportions, the stopping iteration and every sweep's delta bit for bit."""
    np.testing.assert_array_equal(dist.components_, local.components_)
    np.testing.assert_array_equal(dist.doc_topic_, local.doc_topic_)
    assert dist.n_iter_ == local.n_iter_ == len(dist.history_)
    assert [h["delta"] for h in dist.history_] == [h["delta"] for h in local.history_]


@pytest.mark.parametrize("n_partitions", [1, 2, 3])
@pytest.mark.parametrize("order", [0, 2])
def test_equals_local_fit_with_as_many_threads(client, corpus, order, n_partitions):
    """3 partitions on 2 workers; one partition is the sequential schedule (the local fit with one thread)."""
    dist = bnpdist.fit(cvb(order), corpus, client, n_partitions=n_partitions)
    assert_same_model(dist, cvb(order, n_threads=n_partitions).fit(corpus))
    assert all(h["fit_seconds"] > 0 and 0 <= h["driver_seconds"] <= h["fit_seconds"] for h in dist.history_)


def test_on_disk_corpus(client, corpus, tmp_path):
    write(corpus, tmp_path / "kos301")
    data = Corpus.open(tmp_path / "kos301")
    assert_same_model(bnpdist.fit(cvb(2, n_threads=None), data, client, n_partitions=2),
                      cvb(2, n_threads=2).fit(corpus))


@pytest.mark.parametrize("order", [0, 2])
def test_lost_worker_changes_nothing(client, corpus, order):
    """A worker holding a partition killed after sweep 9: its partition is
    recomputed from the lineage, through the recount of sweep 10."""
    killed = []

    def kill_a_worker(est, record):
        if record["iteration"] == RECOUNT_EVERY - 1:
            holders = [w for w, keys in client.has_what().items() if any(k.startswith("getitem") for k in keys)]
            assert holders, "no worker holds a partition"
            pid = client.run(os.getpid, workers=holders[:1])[holders[0]]
            os.kill(pid, signal.SIGKILL)         # the LocalCluster's workers are local processes
            killed.append(pid)

    est = cvb(order)
    with est.reporting(kill_a_worker):
        bnpdist.fit(est, corpus, client, n_partitions=2)
    assert killed
    assert_same_model(est, cvb(order, n_threads=2).fit(corpus))


def test_checkpoint_resume_after_a_killed_client(client, corpus, tmp_path):
    """Checkpoints every 4 sweeps (the lineage restarted there), the client
    killed after sweep 9, resumed from sweep 8 across the recount; the
    checkpoint is the local delayed fit with 3 threads, which resumes it too."""
    path = tmp_path / "cvb.npz"

    def crash(est, record):
        if record["iteration"] == 9:
            raise KeyboardInterrupt("client killed")

    est = cvb(2)
    with est.reporting(crash), pytest.raises(KeyboardInterrupt):
        bnpdist.fit(est, corpus, client, n_partitions=3, checkpoint=path, checkpoint_every=4)
    saved = bnpcore.load(path)
    assert saved._resume["iteration"] == 8
    assert saved._resume["state_class"].endswith("DelayedCVBState") and saved._resume["state"]["n_threads"] == 3
    local = cvb(2, n_threads=3).fit(corpus)
    resumed = bnpdist.fit(saved, corpus, client, n_partitions=3, resume=True)
    assert [h["iteration"] for h in resumed.history_] == list(range(1, 13))
    assert_same_model(resumed, local)
    assert_same_model(bnpcore.load(path).fit(corpus, resume=True), local)


def test_errors_name_what_runs(client, corpus):
    with pytest.raises(ValueError, match=r"CollapsedVB with schedule='delayed' only.*got schedule='sequential'"):
        bnpdist.fit(cvb(0, schedule="sequential"), corpus, client)
    with pytest.raises(ValueError, match="runs CollapsedVB with optimize_hyperparameters=False only"):
        bnpdist.fit(cvb(2, optimize_hyperparameters=True), corpus, client)
    with pytest.raises(TypeError, match=r"lda\.CollapsedVB \(schedule='delayed'"):
        bnpdist.fit(lda.Hybrid(), corpus, client)


def test_cli_scheduler(client, capsys):
    """``--param schedule=delayed`` runs lda-cvb0 on the cluster; the default sequential schedule is refused."""
    fit = ["fit", "--model", "lda-cvb0", "--data", "bars", "--iterations", "3", "--scheduler",
           client.scheduler.address, "-q"]
    assert cli.main(fit + ["--param", "schedule=delayed"]) == 0
    assert "fitted in" in capsys.readouterr().out
    assert cli.main(fit) == 2
    assert "--scheduler cannot run model lda-cvb0: bnpcore.distributed runs CollapsedVB with schedule='delayed'" \
        in capsys.readouterr().err
