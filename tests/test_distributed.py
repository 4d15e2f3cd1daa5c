"""bnpcore.distributed on a LocalCluster of 2 worker processes: the same model as
the local fit (bit for bit: the partially collapsed LDA and HDP samplers and
the truncation-free online estimators; to rounding: StandardVB with more than
one partition and the mean-field online estimators), through a lost worker, a
checkpoint and a resume; clear errors for what it does not run."""
import os
import re
import signal
import time

import numpy as np
import pytest

pytest.importorskip("dask.distributed", reason="bnpcore.distributed needs dask[distributed]")

import bnpcore  # noqa: E402
from bnpcore import cli, datasets, hdp, lda, mixture  # noqa: E402
from bnpcore import distributed as bnpdist  # noqa: E402
from bnpcore.corpus import Corpus, write  # noqa: E402
from bnpcore.inference.batch import Partitions  # noqa: E402
from bnpcore.models import hdp_pc as pc_hdp  # noqa: E402

PARAMS = {"n_components": 5, "max_iter": 8, "tol": None, "random_state": 3}
# 8 sweeps, the last 4 averaged: the sample averages live on the workers too
PC_PARAMS = {"n_components": 5, "max_iter": 8, "burn_in": 4, "random_state": 3}
# 2 epochs of 301 documents in minibatches of 40: 16 local steps, pruning after 200 documents
ONLINE = {
    "hdp.TruncationFreeSVI": lambda: hdp.TruncationFreeSVI(batch_size=40, n_epochs=2, local_sweeps=2, n_samples=2,
                                                           prune_every=200, random_state=4, n_threads=1),
    "hdp.OnlineVB": lambda: hdp.OnlineVB(n_components=8, batch_size=40, n_epochs=2, prune_every=200, random_state=4,
                                         n_threads=1),
    "mixture.TruncationFreeSVI": lambda: mixture.TruncationFreeSVI(batch_size=40, n_epochs=2, prune_every=200,
                                                                   random_state=4, n_threads=1),
    "mixture.StochasticVB": lambda: mixture.StochasticVB(n_components=8, batch_size=40, n_epochs=2, prune_every=200,
                                                         random_state=4, n_threads=1),
}


@pytest.fixture(scope="module")
def corpus():
    return datasets.load_kos()[:301]     # 301 documents: uneven partitions for P = 2 and 3


def local_fit(corpus, n_threads, **params):
    return lda.StandardVB(**{**PARAMS, **params}, n_threads=n_threads).fit(corpus)


def assert_same_model(dist, local, rtol=1e-12):
    """Topics, proportions, every delta and bound term to ``rtol`` (0: bit for
    bit), the same stopping iteration. The sums over documents differ in order:
    each partition adds its documents' word counts and the client adds the
    partitions', where the local fit adds each word's pairs in one pass; the
    bound's documents term (D x K entries) is summed per partition even with one."""
    np.testing.assert_allclose(dist.components_, local.components_, rtol=rtol, atol=0)
    np.testing.assert_allclose(dist.doc_topic_, local.doc_topic_, rtol=rtol, atol=0)
    assert dist.n_iter_ == local.n_iter_ == len(dist.history_) == len(local.history_)
    for hd, hl in zip(dist.history_, local.history_):
        assert hd["delta"] == pytest.approx(hl["delta"], rel=rtol, abs=0)
        assert hd["bound"].keys() == hl["bound"].keys()
        for term, value in hl["bound"].items():
            tol = max(rtol, 1e-12) if term == "documents" else rtol
            assert hd["bound"][term] == pytest.approx(value, rel=tol, abs=0)


def assert_same_sampler(dist, local):
    """The partially collapsed sampler: the averaged samples bit for bit."""
    np.testing.assert_array_equal(dist.components_, local.components_)
    np.testing.assert_array_equal(dist.doc_topic_, local.doc_topic_)
    assert dist.n_iter_ == local.n_iter_ == len(dist.history_)


def assert_same_online(dist, local):
    """Online estimators: the global state and every record's trajectory. The
    truncation-free ones bit for bit (one task runs the hook on the same
    minibatch, state and generator); the mean-field ones to 1e-10 (each
    partition's share of a minibatch runs where it lives and the client sums
    the shares: the sums' order differs)."""
    if dist.additive_local_step:
        np.testing.assert_allclose(dist.components_, local.components_, rtol=1e-10, atol=0)
        np.testing.assert_allclose(dist.weights_, local.weights_, rtol=1e-10, atol=0)
    else:
        np.testing.assert_array_equal(dist.components_, local.components_)
        np.testing.assert_array_equal(dist.weights_, local.weights_)
    assert [(h["n_documents"], h["n_components"], h["rho"]) for h in dist.history_] == \
        [(h["n_documents"], h["n_components"], h["rho"]) for h in local.history_]


def local_pc(corpus, n_threads=2):
    return lda.PartiallyCollapsedGibbs(**PC_PARAMS, n_threads=n_threads).fit(corpus)


# the HDP sampler from 2 topics (16 slots): topics are born and the slots grow during the 6 sweeps
PCHDP_PARAMS = {"n_components": 2, "max_iter": 6, "burn_in": 3, "eta": 0.1, "random_state": 5}


def pchdp(n_threads=1, **params):
    return hdp.PartiallyCollapsedGibbs(**PCHDP_PARAMS, **params, n_threads=n_threads)


def assert_same_hdp(dist, local):
    """The PC-HDP sampler: the final sample bit for bit (topics from the counts,
    sticks, labels or topic sizes, concentrations) and every sweep's record."""
    for name in ("topics_", "weights_", "beta_new_", "alpha_", "gamma_", "n_components_", "_z", "_sizes"):
        np.testing.assert_array_equal(getattr(dist, name), getattr(local, name), err_msg=name)
    assert hasattr(dist, "doc_topic_") == hasattr(local, "doc_topic_")
    if hasattr(local, "doc_topic_"):
        np.testing.assert_array_equal(dist.doc_topic_, local.doc_topic_)
    keys = ("n_active", "n_tables", "alpha", "gamma", "log_lik", "n_components")
    assert [[h[k] for k in keys] for h in dist.history_] == [[h[k] for k in keys] for h in local.history_]


# name -> (a new estimator, its local fit on the corpus, the comparison)
CASES = {"StandardVB": (lambda: lda.StandardVB(**PARAMS), lambda c: local_fit(c, 2), assert_same_model),
         "PartiallyCollapsedGibbs": (lambda: lda.PartiallyCollapsedGibbs(**PC_PARAMS, n_threads=1), local_pc,
                                     assert_same_sampler),
         "hdp.PartiallyCollapsedGibbs": (pchdp, lambda c: pchdp(n_threads=2).fit(c), assert_same_hdp),
         **{name: (make, lambda c, make=make: make().fit(c), assert_same_online) for name, make in ONLINE.items()}}


@pytest.mark.parametrize("n_partitions", [1, 2, 3])
def test_equals_local_fit(client, corpus, n_partitions):
    """One partition: the local fit bit for bit; more: to rounding."""
    dist = bnpdist.fit(lda.StandardVB(**PARAMS), corpus, client, n_partitions=n_partitions)
    assert_same_model(dist, local_fit(corpus, n_partitions), rtol=1e-12 if n_partitions > 1 else 0)
    assert all(h["fit_seconds"] > 0 and 0 <= h["driver_seconds"] <= h["fit_seconds"] for h in dist.history_)


@pytest.mark.parametrize("n_partitions, phi", [(2, "dirichlet"), (3, "dirichlet"), (3, "ppu")])
def test_partially_collapsed_equals_local_fit(client, corpus, n_partitions, phi):
    """Any partitions, any client threads: the keyed streams of the threaded sampler
    (the urn's sparse Phi too)."""
    dist = bnpdist.fit(lda.PartiallyCollapsedGibbs(**PC_PARAMS, n_threads=1, phi=phi), corpus, client,
                       n_partitions=n_partitions)
    assert_same_sampler(dist, lda.PartiallyCollapsedGibbs(**PC_PARAMS, n_threads=2, phi=phi).fit(corpus))
    assert all(h["fit_seconds"] > 0 and 0 < h["client_seconds"] <= h["driver_seconds"] <= h["fit_seconds"]
               for h in dist.history_)


def test_partially_collapsed_without_doc_topic(client, corpus):
    """store_doc_topic=False: the partitions keep no sums of n_jk (nor does the
    client when it gathers them); the topics equal the local fit's."""
    make = lambda: lda.PartiallyCollapsedGibbs(**PC_PARAMS, n_threads=1, store_doc_topic=False)  # noqa: E731
    dist = bnpdist.fit(make(), corpus, client, n_partitions=2, checkpoint_every=6)     # gathered past burn-in
    np.testing.assert_array_equal(dist.components_, make().fit(corpus).components_)
    assert not hasattr(dist, "doc_topic_")


@pytest.mark.parametrize("store_doc_topic", [True, False])
def test_partially_collapsed_hdp_equals_local_fit(client, corpus, store_doc_topic):
    """Topics born and topic slots added during the run, on the client between the partitions' rounds."""
    dist = bnpdist.fit(pchdp(store_doc_topic=store_doc_topic), corpus, client, n_partitions=2)
    local = pchdp(n_threads=2, store_doc_topic=store_doc_topic).fit(corpus)
    assert_same_hdp(dist, local)
    assert dist.history_[-1]["n_active"] > 16 > dist.history_[0]["n_active"]
    assert all(0 < h["client_seconds"] <= h["driver_seconds"] <= h["fit_seconds"] for h in dist.history_)


@pytest.mark.parametrize("phi", ["ppu", "dirichlet"])
@pytest.mark.parametrize("tail_mass", [0.01, 0.5])
def test_partially_collapsed_hdp_state_equals_local_after_every_sweep(corpus, phi, tail_mass, wide_tail,
                                                                      monkeypatch):
    """The client's state after each sweep of the plan (3 partitions) is the
    threaded sweep's: counts and their slots, sticks, concentrations, the
    dense Phi (every candidate's column drawn), and the labels at the end;
    with the urn, the tail rows completed on the workers as locally. With the
    z-step's split at a stick mass of 0.01 topics are born, at 0.5 tokens sit
    in tail topics."""
    monkeypatch.setattr(pc_hdp, "TAIL_MASS", tail_mass)
    est = pchdp(phi=phi)
    est._check_params()
    local, dist = (est._init_state(corpus, np.random.default_rng(5)) for _ in range(2))
    local.n_threads = 2
    bounds = bnpdist.partition_bounds(corpus.n_docs, 3)
    parts = Partitions(dist, bounds)        # the driver's partitions without Dask: the same ``map``
    for _ in range(PCHDP_PARAMS["max_iter"]):
        record = dist.iterate(parts, False)
        assert record.pop("client_seconds") > 0 and record == local.sweep()
        for name in ("nwk", "nk", "sticks", "phi", "alpha", "gamma", "n_sweeps"):
            np.testing.assert_array_equal(getattr(dist, name), getattr(local, name), err_msg=name)
    if tail_mass < 0.5:
        assert local.nk.shape[0] > 16 if phi == "ppu" else local.n_active > 2    # topics were born
    else:
        assert max(wide_tail) > 0       # (the client's labels stay those of the start until gathered)
    parts.gather()
    np.testing.assert_array_equal(dist.labels, local.labels)


@pytest.mark.parametrize("name", sorted(ONLINE))
def test_online_equals_local_fit(client, corpus, name):
    dist = bnpdist.fit(ONLINE[name](), corpus, client, n_partitions=3)
    local = ONLINE[name]().fit(corpus)
    assert len(dist.history_) == 16 and dist.n_components_ > 1
    assert_same_online(dist, local)
    assert all(h["driver_seconds"] >= 0 for h in dist.history_)


def test_stops_at_tol_like_local(client, corpus):
    dist = bnpdist.fit(lda.StandardVB(**{**PARAMS, "tol": 5e-2, "max_iter": 100}), corpus, client, n_partitions=2)
    local = local_fit(corpus, 2, tol=5e-2, max_iter=100)
    assert dist.n_iter_ < 100
    assert_same_model(dist, local)


@pytest.mark.parametrize("name", ["StandardVB", "PartiallyCollapsedGibbs", "hdp.PartiallyCollapsedGibbs",
                                  "hdp.TruncationFreeSVI", "mixture.StochasticVB"])
def test_lost_worker_changes_nothing(client, corpus, name):
    fit_killing_a_worker(client, corpus, corpus, name)


@pytest.mark.parametrize("name", ["StandardVB", "hdp.TruncationFreeSVI"])
def test_lost_worker_changes_nothing_on_disk(client, corpus, disk, name):
    """The restarted worker opens the directory and reads the lost partition."""
    fit_killing_a_worker(client, corpus, disk, name)


def fit_killing_a_worker(client, corpus, data, name):
    """Fit ``data`` killing a worker at the 5th iteration; the model is the local fit's on ``corpus``."""
    make, local, assert_same = CASES[name]
    killed = []

    def kill_a_worker(est, record):
        if record["iteration"] == 5:
            # a worker holding a partition (the getitem of a batch step, the documents of an online fit)
            holders = [w for w, keys in client.has_what().items()
                       if any(k.startswith(("getitem", "_identity")) for k in keys)]
            assert holders, "no worker holds a partition"
            n_workers = len(client.scheduler_info()["workers"])
            pid = client.run(os.getpid, workers=holders[:1])[holders[0]]
            os.kill(pid, signal.SIGKILL)         # the LocalCluster's workers are local processes
            killed.append(pid)
            # the fit goes on once the scheduler has seen the loss and the nanny's new worker is up: a task sent
            # to a worker in the middle of dying can leave its future waiting forever (dask/distributed#3196;
            # seen once here, in a CI run on a loaded machine)
            deadline = time.monotonic() + 60
            while holders[0] in client.scheduler_info()["workers"] and time.monotonic() < deadline:
                time.sleep(0.05)
            client.wait_for_workers(n_workers, timeout=60)

    est = make()
    with est.reporting(kill_a_worker):
        bnpdist.fit(est, data, client, n_partitions=2)
    assert killed
    assert_same(est, local(corpus))


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
    np.testing.assert_allclose(bnpcore.load(path).fit(corpus, resume=True).components_, local.components_,
                               rtol=1e-12, atol=0)


@pytest.mark.parametrize("name", ["PartiallyCollapsedGibbs", "hdp.TruncationFreeSVI"])
def test_checkpoint_resume_other_estimators(client, corpus, tmp_path, name):
    """Past burn-in (the sample averages gathered) / mid-epoch (the stream and generator saved)."""
    make, local, assert_same = CASES[name]
    path = tmp_path / "model.npz"

    def crash(est, record):
        if record["iteration"] == 7:
            raise KeyboardInterrupt("client killed")

    est = make()
    with est.reporting(crash), pytest.raises(KeyboardInterrupt):
        # every 6 iterations; online: every 240 documents (after the 6th minibatch of 40)
        bnpdist.fit(est, corpus, client, n_partitions=2, checkpoint=path,
                    checkpoint_every=240 if name.startswith("hdp") else 6)
    resumed = bnpdist.fit(bnpcore.load(path), corpus, client, n_partitions=2, resume=True)
    assert [h["iteration"] for h in resumed.history_] == list(range(1, len(resumed.history_) + 1))
    assert_same(resumed, local(corpus))


def test_resume_needs_an_interrupted_fit(client, corpus):
    with pytest.raises(ValueError, match="resume=True needs an interrupted fit"):
        bnpdist.fit(lda.StandardVB(**PARAMS), corpus, client, resume=True)


def test_unsupported_estimators_are_named(client, corpus):
    with pytest.raises(TypeError, match=r"cannot fit Hybrid; it supports bnpcore\.lda\.StandardVB"):
        bnpdist.fit(lda.Hybrid(), corpus, client)
    with pytest.raises(ValueError, match="schedule='parallel'"):
        bnpdist.fit(lda.StandardVB(schedule="sequential"), corpus, client)
    with pytest.raises(ValueError, match="PartiallyCollapsedGibbs with optimize_hyperparameters=False"):
        bnpdist.fit(lda.PartiallyCollapsedGibbs(optimize_hyperparameters=True), corpus, client)
    with pytest.raises(ValueError, match="n_partitions"):
        bnpdist.fit(lda.StandardVB(), corpus, client, n_partitions=0)


def test_cli_scheduler(client, capsys):
    address = client.scheduler.address
    assert cli.main(["fit", "--model", "lda-svb", "--data", "bars", "--iterations", "3", "--n-topics", "4",
                     "--scheduler", address, "-q"]) == 0
    assert "fitted in" in capsys.readouterr().out
    for model in ("lda-pcgs", "dp-svb"):
        assert cli.main(["fit", "--model", model, "--data", "bars", "--iterations", "2", "--scheduler", address,
                         "-q"]) == 0
        assert "fitted in" in capsys.readouterr().out
    assert cli.main(["fit", "--model", "lda-svb-cgs", "--data", "bars", "--scheduler", address, "-q"]) == 2
    err = capsys.readouterr().err
    assert "--scheduler" in err and "StandardVB" in err


# -- on-disk corpora: the client sends (directory, documents, fingerprint), the workers read --
@pytest.fixture(scope="module")
def disk(corpus, tmp_path_factory):
    """The same 301 documents written to disk and opened (memory-mapped on the client)."""
    return write(corpus, tmp_path_factory.mktemp("disk") / "kos301")


@pytest.mark.parametrize("name", sorted(CASES))
def test_on_disk_equals_in_memory(client, corpus, disk, name):
    make, local, assert_same = CASES[name]
    assert_same(bnpdist.fit(make(), disk, client, n_partitions=2), local(corpus))


def documents_sent(client, monkeypatch, est, data):
    """Fit ``est`` to ``data`` with every ``client.submit`` recorded: whether
    any argument is a Corpus or an array holding the word ids of a partition."""
    sent = []

    def submit(*args, **kwargs):
        sent.append(args)
        return submit.original(*args, **kwargs)

    submit.original = client.submit
    monkeypatch.setattr(client, "submit", submit)
    bnpdist.fit(est, data, client, n_partitions=2)
    monkeypatch.undo()
    bounds = bnpdist.partition_bounds(data.n_docs, 2)
    ids = [np.asarray(data.indices[data.indptr[a]:data.indptr[b]]) for a, b in zip(bounds[:-1], bounds[1:])]

    def holds_documents(x):
        if isinstance(x, Corpus):
            return True
        if isinstance(x, dict):
            return any(holds_documents(v) for v in x.values())
        if isinstance(x, (list, tuple)):
            return any(holds_documents(v) for v in x)
        return isinstance(x, np.ndarray) and any(np.array_equal(x, i) for i in ids)

    return any(holds_documents(args) for args in sent)


@pytest.mark.parametrize("name", ["StandardVB", "PartiallyCollapsedGibbs", "hdp.TruncationFreeSVI",
                                  "mixture.StochasticVB"])
def test_on_disk_client_sends_no_documents(client, corpus, disk, monkeypatch, name):
    make = CASES[name][0]
    assert documents_sent(client, monkeypatch, make(), corpus)      # in memory: the arrays travel
    assert not documents_sent(client, monkeypatch, make(), disk)


@pytest.mark.parametrize("name", ["StandardVB", "hdp.TruncationFreeSVI"])
def test_on_disk_directory_unreadable_on_the_workers(client, corpus, tmp_path, name):
    """A directory the workers cannot open (as on workers without the client's
    file system): moved after the client opened it."""
    data = write(corpus, tmp_path / "corpus")
    os.rename(tmp_path / "corpus", tmp_path / "moved")
    message = r": worker .* cannot open this on-disk corpus .*must be readable at this path from every worker"
    with pytest.raises(ValueError, match=re.escape(str(tmp_path / "corpus")) + message):
        bnpdist.fit(CASES[name][0](), data, client, n_partitions=2)


@pytest.mark.parametrize("name", ["PartiallyCollapsedGibbs", "mixture.StochasticVB"])
def test_on_disk_directory_changed_after_opening(client, corpus, tmp_path, name):
    """The workers find other documents at the path (another corpus written
    there, or a different copy on a worker's machine): the fingerprints differ."""
    data = write(corpus, tmp_path / "corpus")
    os.rename(tmp_path / "corpus", tmp_path / "old")
    write(corpus[np.arange(corpus.n_docs)[::-1]], tmp_path / "corpus")
    message = r" on worker .*: documents \d+\.\.\d+ have fingerprint .*the client's corpus .*must hold the same corpus"
    with pytest.raises(ValueError, match=re.escape(str(tmp_path / "corpus")) + message):
        bnpdist.fit(CASES[name][0](), data, client, n_partitions=2)


def test_cli_scheduler_on_disk(client, disk, capsys, monkeypatch):
    """``--data DIR --heldout 0``: the opened directory itself goes to the driver (the workers read it)."""
    given = []
    fit = bnpdist.fit
    monkeypatch.setattr(bnpdist, "fit", lambda est, corpus, client: given.append(corpus._path) or fit(est, corpus,
                                                                                                       client))
    assert cli.main(["fit", "--model", "lda-svb", "--data", disk._path, "--heldout", "0", "--iterations", "2",
                     "--n-topics", "4", "--scheduler", client.scheduler.address, "-q"]) == 0
    out = capsys.readouterr().out
    assert given == [disk._path]
    assert "0 held-out tokens" in out and "fitted in" in out and "held-out per-word" not in out
