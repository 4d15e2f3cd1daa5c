"""bnpcore.distributed knows no estimator: it runs the state protocol of
bnpcore.inference.batch (local step on each partition, sum, global step), so an
estimator whose state implements it runs on Dask with no code of its own in
distributed.py. Here the example estimator of examples/unigram_mixture.py, on a
LocalCluster of 2 worker processes, and lda.CollapsedGibbs, whose state
runs AD-LDA on partitions; and the driver's source, which names no estimator
and imports or reads no private name."""
import ast
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("dask.distributed", reason="bnpcore.distributed needs dask[distributed]")

from bnpcore import datasets, lda  # noqa: E402
from bnpcore import distributed as bnpdist  # noqa: E402
from bnpcore.inference.batch import BatchState, Partitions  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "unigram_mixture.py"
PARAMS = {"n_components": 100, "max_iter": 15, "tol": 1e-9, "random_state": 2}   # 94 components left


@pytest.fixture(scope="module")
def unigram(client):
    """The example module, importable here and on the workers (``Client.upload_file``)."""
    sys.path.insert(0, str(EXAMPLE.parent))
    try:
        import unigram_mixture
    finally:
        sys.path.remove(str(EXAMPLE.parent))
    client.upload_file(str(EXAMPLE))
    return unigram_mixture


@pytest.fixture(scope="module")
def corpus():
    return datasets.load_kos()[:301]


def test_example_state_implements_the_protocol(unigram):
    state = unigram.UnigramMixtureState
    assert not state.sequential_sweep and "sweep" not in vars(state)       # the batch loop's sweep: local + global
    assert all(name in vars(state) for name in ("local_step", "global_step", "broadcast"))
    assert unigram.UnigramMixture.partitioned


@pytest.mark.parametrize("n_partitions", [1, 3])
def test_example_runs_on_dask(client, corpus, unigram, n_partitions):
    """One partition: the local fit bit for bit (the same local step on the
    same block). Three: the statistics are sums over three blocks, so equal to
    rounding; the same iterations, prunes and components."""
    dist = bnpdist.fit(unigram.UnigramMixture(**PARAMS), corpus, client, n_partitions=n_partitions)
    local = unigram.UnigramMixture(**PARAMS).fit(corpus)
    assert dist.n_iter_ == local.n_iter_ and dist.n_components_ == local.n_components_
    assert [h["n_components"] for h in dist.history_] == [h["n_components"] for h in local.history_]
    assert local.n_components_ < PARAMS["n_components"]       # a component was pruned (a move) on the way
    rtol = 0 if n_partitions == 1 else 1e-9
    np.testing.assert_allclose(dist.topics_, local.topics_, rtol=rtol, atol=0)
    np.testing.assert_allclose(dist.weights_, local.weights_, rtol=rtol, atol=0)
    for hd, hl in zip(dist.history_, local.history_):
        assert hd.keys() - {"driver_seconds"} == hl.keys()
        for term, value in hl["bound"].items():
            assert hd["bound"][term] == pytest.approx(value, rel=rtol, abs=0)


def test_in_process_partitions_sum_like_one_block(corpus, unigram):
    """The batch loop's one block and four blocks in this process: the same statistics up to rounding."""
    est = unigram.UnigramMixture(**PARAMS)
    est._check_params()
    one, four = (est._init_state(corpus, np.random.default_rng(0)) for _ in range(2))
    for _ in range(3):
        record = one.sweep()
        parts = Partitions(four, bnpdist.partition_bounds(corpus.n_docs, 4))
        assert four.iterate(parts, False)["bound"] == pytest.approx(record["bound"], rel=1e-10)
    np.testing.assert_allclose(four.params["log_phi"], one.params["log_phi"], rtol=1e-10)


def test_sequential_state_refuses_the_batch_sweep():
    """A state that declares a sequential sweep must write ``sweep()``: the
    batch loop does not compose local and global steps for it."""
    class Sequential(BatchState):
        sequential_sweep = True

        @staticmethod
        def local_step(part):
            return part, 0.0

    with pytest.raises(NotImplementedError, match="implements neither sweep"):
        Sequential().sweep()


def test_driver_names_no_estimator_and_imports_no_private_name():
    source = Path(bnpdist.__file__).read_text()
    tree = ast.parse(source)
    imported = [(node.module, alias.name) for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                for alias in node.names]
    assert not [name for _, name in imported if name.startswith("_")]
    assert not [module for module, _ in imported if module.startswith("bnpcore.models")]
    code = [node for node in tree.body if not isinstance(node, ast.Expr)]      # not the module docstring
    names = {n.id for node in code for n in ast.walk(node) if isinstance(n, ast.Name)}
    attributes = {n.attr for node in code for n in ast.walk(node) if isinstance(n, ast.Attribute)}
    for estimator in ("StandardVB", "CollapsedVB", "PartiallyCollapsedGibbs", "DirectAssignmentVB",
                      "UnigramMixture"):
        assert estimator not in names | attributes


def test_driver_reads_no_private_attribute():
    """The driver runs estimators, states and corpora through their public
    protocol only (the states' steps, the online ``local_step``,
    ``fit_on_partitions``, ``fit_with_local_step``, ``Corpus.blocks``): no
    attribute it reads is private."""
    tree = ast.parse(Path(bnpdist.__file__).read_text())
    private = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and n.attr.startswith("_")
               and not (n.attr.startswith("__") and n.attr.endswith("__"))}
    assert not private


# -- a built-in estimator that needed no code in distributed.py: lda.CollapsedGibbs as AD-LDA --
CGS = {"n_components": 5, "max_iter": 12, "burn_in": 6, "random_state": 3}


@pytest.mark.parametrize("store_doc_topic", [True, False])
def test_collapsed_gibbs_one_partition_is_the_local_sampler(client, corpus, store_doc_topic):
    """One partition samples against the counts themselves with the state's
    generator (sent and taken back): the local sweep, draw for draw."""
    dist = bnpdist.fit(lda.CollapsedGibbs(**CGS, store_doc_topic=store_doc_topic), corpus, client, n_partitions=1)
    local = lda.CollapsedGibbs(**CGS, store_doc_topic=store_doc_topic, n_threads=1).fit(corpus)
    np.testing.assert_array_equal(dist.components_, local.components_)
    assert hasattr(dist, "doc_topic_") == store_doc_topic
    if store_doc_topic:
        np.testing.assert_array_equal(dist.doc_topic_, local.doc_topic_)
    assert dist.n_iter_ == local.n_iter_ == len(dist.history_) == CGS["max_iter"]


def test_collapsed_gibbs_on_partitions_is_ad_lda(client, corpus):
    """Three partitions: AD-LDA (each samples against its own copy of the
    counts, the moves added after the sweep). Not the local chain, but a
    model as good as the sequential sampler's and the local AD-LDA's."""
    dist = bnpdist.fit(lda.CollapsedGibbs(**CGS), corpus, client, n_partitions=3)
    sequential = lda.CollapsedGibbs(**CGS, n_threads=1).fit(corpus)
    delayed = lda.CollapsedGibbs(**CGS, n_threads=3).fit(corpus)
    assert not np.array_equal(dist.components_, sequential.components_)
    for local in (sequential, delayed):
        assert dist.perplexity(corpus) == pytest.approx(local.perplexity(corpus), rel=0.03)
