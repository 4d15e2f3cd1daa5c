"""benchmarks/harness.py and the peer adapters of benchmarks/bench_peers.py
(the scripts themselves run outside the test suite)."""
import collections
import importlib.util
import io
import pathlib
import sys
import types

import numpy as np
import pytest

from bnpcore import evaluation, lda
from bnpcore.evaluation import token_log_likelihood
from bnpcore.kernels import _lda

BENCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"


def _module(name):
    spec = importlib.util.spec_from_file_location(f"bnpcore_bench_{name}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


harness = _module("harness")
bench_peers = _module("bench_peers")


def test_topics_used_counts_topics_with_enough_expected_tokens():
    doc_topic = np.array([[0.5, 0.5, 0.0], [1.0, 0.0, 0.0], [0.9995, 0.0, 0.0005]])
    lengths = np.array([10, 1000, 1000])
    # masses: 1004.5 + 5 ... topic 2 holds 0.5 of 2010 tokens (0.025%)
    assert harness.topics_used(doc_topic, lengths) == 2
    assert harness.topics_used(doc_topic, lengths, min_share=1e-4) == 3


def test_normalize_rows_handles_empty_rows():
    out = harness.normalize_rows([[1.0, 3.0], [0.0, 0.0]])
    np.testing.assert_allclose(out, [[0.25, 0.75], [0.5, 0.5]])
    out = harness.normalize_rows([[0.0, 0.0]], empty=np.array([1.0, 3.0]))
    np.testing.assert_allclose(out, [[0.25, 0.75]])


def test_bnpcore_row_scores_with_the_shared_metric(tiny_corpus, toy_models):
    observed, heldout = tiny_corpus.split_tokens(0.2, random_state=0)
    est = toy_models["toy-kmeans"].make(test=True, random_state=0)
    row = harness.bnpcore_row(est, observed, heldout, algorithm="toy")
    assert row.heldout_loglik == token_log_likelihood(est.transform(observed), est.topics_, heldout)
    assert (row.system, row.algorithm, row.threads) == ("bnpcore", "toy", 1)
    assert row.tokens_per_second == pytest.approx(observed.n_tokens * len(est.history_) / row.train_seconds)
    assert 1 <= row.topics_used <= 3


def test_print_table_gives_time_ratio_to_bnpcore(capsys):
    rows = [harness.Row("bnpcore", "a", "s", 1, 2.0, 10.0, 3, -7.0),
            harness.Row("gensim", "b", "s", 1, 5.0, 4.0, 3, -7.5)]
    harness.print_table(rows)
    lines = capsys.readouterr().out.splitlines()
    assert lines[2].endswith("1.00") and lines[3].endswith("2.50")


def test_missing_peers_are_skipped_with_a_message(monkeypatch, tiny_corpus):
    monkeypatch.setattr(bench_peers, "installed", lambda module: False)
    out = io.StringIO()
    assert bench_peers.run_peers(list(bench_peers.PEERS), tiny_corpus, tiny_corpus, None, out=out) == []
    assert out.getvalue().count("is not installed (pip install .[bench])") == len(bench_peers.PEERS)


def test_tomotopy_estimates_match_its_sampled_assignments(tiny_corpus):
    """Topic-word rows rebuilt over the full vocabulary equal (n_kw + eta) / (n_k + W eta)
    counted from tomotopy's own token assignments."""
    tp = pytest.importorskip("tomotopy")
    observed, _ = tiny_corpus.split_tokens(0.2, random_state=0)
    observed = observed[np.flatnonzero(observed.matrix[:, 0].toarray().ravel() == 0)]   # word 0 never seen
    cfg = bench_peers.parse_args(["--sweeps", "5", "--topics", "3"])
    model = tp.LDAModel(k=3, alpha=0.1, eta=0.01, seed=0)
    kept = bench_peers._tomotopy_fit(model, observed, cfg)
    doc_topic, topic_word = bench_peers._tomotopy_extract(model, kept, observed, 0.01)
    index = {w: i for i, w in enumerate(observed.vocabulary)}
    counts = np.zeros((3, observed.n_words))
    for doc in model.docs:
        for w, z in zip(doc.words, doc.topics):
            counts[z, index[model.vocabs[w]]] += 1
    expected = (counts + 0.01) / (counts.sum(axis=1, keepdims=True) + observed.n_words * 0.01)
    np.testing.assert_allclose(topic_word, expected, rtol=1e-5)
    assert topic_word[:, 0].min() > 0
    assert doc_topic.shape == (observed.n_docs, 3)
    np.testing.assert_allclose(doc_topic.sum(axis=1), 1.0, rtol=1e-5)
    empty = np.flatnonzero(observed.doc_lengths == 0)
    assert len(empty) and np.allclose(doc_topic[empty], 1 / 3)


def test_registered_bnpcore_models_join_the_table(toy_registry, tiny_corpus):
    observed, heldout = tiny_corpus.split_tokens(0.2, random_state=0)
    cfg = bench_peers.parse_args(["--bnpcore-iterations", "3", "--seed", "2"])
    (row,) = bench_peers.run_registered(["toy-kmeans"], observed, heldout, cfg)
    est = toy_registry["toy-kmeans"].make(max_iter=3, random_state=2).fit(observed)
    assert (row.algorithm, row.settings) == ("toy-kmeans", "n_components=10, max_iter=3")
    assert row.heldout_loglik == est.heldout_log_likelihood(observed, heldout)
    assert row.tokens_per_second == pytest.approx(observed.n_tokens * 3 / row.train_seconds)


def test_repro_004_says_which_ordering_holds():
    """The paper's claims are checked against the ordering the seeds support:
    a difference beyond two standard errors is an ordering, within them a tie."""
    repro = _module("repro_004")

    def runs(*finals):
        return [{"curve": [f + 50.0, f]} for f in finals]

    base = np.array([1500.0, 1510.0, 1490.0, 1505.0])
    results = {"CVB/CGS": runs(*(base + [20.0, 21.0, 19.0, 20.5])),     # clearly worse than SVB/CGS
               "SVB/CGS": runs(*base),
               "CGS": runs(*(base + [20.0, 19.0, 22.0, 20.0]))}        # within noise of CVB/CGS
    checks = {claim: (ok, verdict) for claim, ok, verdict in repro.check(results)}
    ok, verdict = checks["CVB/CGS <= SVB/CGS"]
    assert not ok and verdict.startswith("CVB/CGS > SVB/CGS: +20.12 +- 0.4")
    ok, verdict = checks["CVB/CGS on par with CGS"]
    assert ok and verdict.startswith("CVB/CGS = CGS")
    assert repro.ordering(np.array([-3.0]))[0] == "?"       # one seed cannot judge
    assert repro.ordering(np.array([-3.0, -3.2, -2.9]))[0] == "<"


def test_bench_threads_reports_the_median_of_repeated_fits(monkeypatch, tiny_corpus):
    bench_threads = _module("bench_threads")
    durations = {1: iter([5.0, 1.0, 3.0]), 2: iter([2.0, 2.0, 8.0])}     # fit seconds by thread count
    clock, calls = [0.0], []

    class FakeTime:                       # fit: start, stop; evaluation: start, stop (1 s)
        @staticmethod
        def perf_counter():
            calls.append(clock[0])
            if len(calls) % 4 == 1:
                clock[0] += next(durations[1 + (len(calls) // 4) % 2])
            elif len(calls) % 4 == 3:
                clock[0] += 1.0
            return calls[-1]

    monkeypatch.setattr(bench_threads, "time", FakeTime)
    observed, heldout = tiny_corpus.split_tokens(0.2, random_state=0)
    cfg = bench_threads.parse_args(["--iterations", "2", "--repeat", "3"])
    rows = bench_threads.run_model("lda-pcgs", observed, heldout, cfg)
    assert [(r[2], r[4], r[7]) for r in rows] == [(1, 3.0, 1.0), (2, 2.0, 1.0)]
    assert rows[0][8] == rows[1][8]       # an exact sampler: the same fit at any thread count
    monkeypatch.undo()
    assert 0.0 < bench_threads.machine_ceiling(1, n=10_000) < 4.0


def test_bench_threads_iteration_seconds_and_topics():
    bench_threads = _module("bench_threads")
    history = [{"fit_seconds": 1.0}, {"fit_seconds": 1.5}, {"fit_seconds": 3.5}]    # 1.0, 0.5, 2.0 s
    assert bench_threads.iteration_seconds(history) == 1.0
    assert bench_threads.iteration_seconds([]) != bench_threads.iteration_seconds([])    # nan
    cfg = bench_threads.parse_args(["--topics", "7"])
    assert bench_threads.make_estimator("lda-cvb0/delayed", 2, cfg).get_params()["n_components"] == 7
    assert bench_threads.make_estimator("hdp-cvb", 2, cfg).get_params()["n_components"] == 120


def test_kernel_clock_times_the_outermost_kernel_calls_and_restores_the_kernels(monkeypatch, tmp_path,
                                                                                  tiny_corpus):
    before = (_lda.svb_parallel_step, evaluation.hdp_heldout)     # a kernel, and one imported by name
    source = tmp_path / "fake.py"                                   # a kernel that calls another
    source.write_text("def inner(x):\n    return x + 1\n\n\ndef outer(x, n_threads=1):\n    return 2 * inner(x)\n")
    spec = importlib.util.spec_from_file_location("bnpcore.kernels._fake", source)
    fake = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fake)
    monkeypatch.setitem(sys.modules, fake.__name__, fake)
    with harness.KernelClock() as clock:
        assert evaluation.hdp_heldout is not before[1]
        model = lda.StandardVB(n_components=3, max_iter=4, random_state=0).fit(tiny_corpus)
        assert fake.outer(1) == 4
    assert clock.calls["_lda.svb_parallel_step"] == len(model.history_) > 0
    assert clock.seconds["_lda.svb_parallel_step"] > 0.0
    assert clock.calls["_fake.outer"] == 1 and "_fake.inner" not in clock.calls
    assert {"_lda.svb_parallel_step", "_fake.outer"} <= clock.parallel and "_fake.inner" not in clock.parallel
    assert (_lda.svb_parallel_step, evaluation.hdp_heldout) == before
    assert not hasattr(fake.outer, "__wrapped__") and not hasattr(fake.inner, "__wrapped__")


def test_bench_threads_kernel_table_keeps_the_kernels_above_one_percent():
    bench_threads = _module("bench_threads")

    def clock(**seconds):
        return types.SimpleNamespace(seconds=collections.Counter(seconds), calls=collections.Counter(dict.fromkeys(
            seconds, 3)), parallel={"_m.a"})

    runs = {1: [(9.0, 1.0), (8.0, 1.0), (10.0, float("nan"))], 2: [(5.0, 1.0)] * 3}   # 1 thread: 10 s median
    clocks = {1: [clock(**{"_m.a": 4.0, "_m.b": 0.09, "_m.c": 1.0}), clock(**{"_m.a": 6.0, "_m.b": 0.09}),
                  clock(**{"_m.a": 5.0, "_m.b": 0.09, "_m.c": 2.0})],
              2: [clock(**{"_m.a": 2.0, "_m.c": 1.0}), clock(**{"_m.a": 3.0}), clock(**{"_m.a": 2.5, "_m.c": 1.0})]}
    rows = bench_threads.kernel_table("m", runs, clocks)
    assert rows == [("m", "_m.a", True, 3, 5.0, 2.5), ("m", "_m.c", False, 3, 1.0, 1.0)]   # _m.b: 0.9 % of 10 s
