"""bnpcore.distributed on a LocalCluster of 2 worker processes: the same model as
the local fit (bit for bit), through a lost worker, a checkpoint and a resume;
clear errors for what it does not run."""
import os
import signal

import numpy as np
import pytest

distributed = pytest.importorskip("dask.distributed", reason="bnpcore.distributed needs dask[distributed]")

import bnpcore  # noqa: E402
from bnpcore import cli, datasets, lda  # noqa: E402
from bnpcore import distributed as bnpdist  # noqa: E402

PARAMS = {"n_components": 5, "max_iter": 8, "tol": None, "random_state": 3}


@pytest.fixture(scope="module")
def client():
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None) as cl, \
            distributed.Client(cl) as c:
        yield c


@pytest.fixture(scope="module")
def corpus():
    return datasets.load_kos()[:301]     # 301 documents: uneven partitions for P = 2 and 3


def local_fit(corpus, n_threads, **params):
    return lda.StandardVB(**{**PARAMS, **params}, n_threads=n_threads).fit(corpus)


def assert_same_model(dist, local):
    """Topics, proportions and delta bit for bit; the bound's documents term
    (summed per partition, D x K entries) to 1e-12."""
    np.testing.assert_array_equal(dist.components_, local.components_)
    np.testing.assert_array_equal(dist.doc_topic_, local.doc_topic_)
    assert dist.n_iter_ == local.n_iter_
    assert [h["delta"] for h in dist.history_] == [h["delta"] for h in local.history_]
    for hd, hl in zip(dist.history_, local.history_):
        assert hd["bound"]["topics"] == hl["bound"]["topics"]
        assert hd["bound"]["entropy"] == hl["bound"]["entropy"]
        assert hd["bound"]["documents"] == pytest.approx(hl["bound"]["documents"], rel=1e-12, abs=0)


@pytest.mark.parametrize("n_partitions", [2, 3])
def test_equals_local_fit_with_as_many_threads(client, corpus, n_partitions):
    dist = bnpdist.fit(lda.StandardVB(**PARAMS), corpus, client, n_partitions=n_partitions)
    assert_same_model(dist, local_fit(corpus, n_partitions))
    assert all(h["fit_seconds"] > 0 and 0 <= h["driver_seconds"] <= h["fit_seconds"] for h in dist.history_)


def test_stops_at_tol_like_local(client, corpus):
    dist = bnpdist.fit(lda.StandardVB(**{**PARAMS, "tol": 5e-2, "max_iter": 100}), corpus, client, n_partitions=2)
    local = local_fit(corpus, 2, tol=5e-2, max_iter=100)
    assert dist.n_iter_ < 100
    assert_same_model(dist, local)


def test_lost_worker_changes_nothing(client, corpus):
    killed = []

    def kill_a_worker(est, record):
        if record["iteration"] == 5:
            # a worker holding a partition's state (the getitem of its last step)
            holders = [w for w, keys in client.has_what().items() if any(k.startswith("getitem") for k in keys)]
            assert holders, "no worker holds a partition"
            pid = client.run(os.getpid, workers=holders[:1])[holders[0]]
            os.kill(pid, signal.SIGKILL)         # the LocalCluster's workers are local processes
            killed.append(pid)

    est = lda.StandardVB(**PARAMS)
    with est.reporting(kill_a_worker):
        bnpdist.fit(est, corpus, client, n_partitions=2)
    assert killed
    assert_same_model(est, local_fit(corpus, 2))


def test_checkpoint_resume_after_a_killed_client(client, corpus, tmp_path):
    path = tmp_path / "svb.npz"

    def crash(est, record):
        if record["iteration"] == 6:
            raise KeyboardInterrupt("client killed")

    est = lda.StandardVB(**PARAMS)
    with est.reporting(crash), pytest.raises(KeyboardInterrupt):
        bnpdist.fit(est, corpus, client, n_partitions=2, checkpoint=path, checkpoint_every=4)
    local = local_fit(corpus, 2)
    resumed = bnpdist.fit(bnpcore.load(path), corpus, client, n_partitions=2, resume=True)
    assert [h["iteration"] for h in resumed.history_] == list(range(1, 9))
    assert_same_model(resumed, local)
    # the checkpoint is an ordinary model file: the local fit resumes it too
    np.testing.assert_array_equal(bnpcore.load(path).fit(corpus, resume=True).components_, local.components_)


def test_resume_needs_an_interrupted_fit(client, corpus):
    with pytest.raises(ValueError, match="resume=True needs an interrupted fit"):
        bnpdist.fit(lda.StandardVB(**PARAMS), corpus, client, resume=True)


def test_unsupported_estimators_are_named(client, corpus):
    with pytest.raises(TypeError, match=r"cannot fit CollapsedGibbs; it supports bnpcore\.lda\.StandardVB"):
        bnpdist.fit(lda.CollapsedGibbs(), corpus, client)
    with pytest.raises(ValueError, match="schedule='parallel'"):
        bnpdist.fit(lda.StandardVB(schedule="sequential"), corpus, client)
    with pytest.raises(ValueError, match="n_partitions"):
        bnpdist.fit(lda.StandardVB(), corpus, client, n_partitions=0)


def test_cli_scheduler(client, capsys):
    address = client.scheduler.address
    assert cli.main(["fit", "--model", "lda-svb", "--data", "bars", "--iterations", "3", "--n-topics", "4",
                     "--scheduler", address, "-q"]) == 0
    assert "fitted in" in capsys.readouterr().out
    assert cli.main(["fit", "--model", "lda-cgs", "--data", "bars", "--scheduler", address, "-q"]) == 2
    err = capsys.readouterr().err
    assert "--scheduler" in err and "StandardVB" in err
