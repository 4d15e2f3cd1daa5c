"""Regressions of issue 45's settings (each failed before its fix): NaN models
inside the documented ranges, errors of an undocumented type for huge values,
and settings whose memory or time had no bound."""
import math
import os
import tempfile

import numpy as np
import pytest

from bnpcore import hdp, lda, mixture
from bnpcore._validation import check_memory, check_positive, check_int, memory_limit
from bnpcore.corpus import Corpus


@pytest.fixture(scope="module")
def X():
    rng = np.random.default_rng(0)
    counts = rng.poisson(0.6, size=(30, 20))
    counts[:, 0] += 1
    return Corpus(counts)


def finite_model(model, X):
    """transform and get_topics rows are finite distributions."""
    for rows in (model.transform(X), model.get_topics()):
        assert np.all(np.isfinite(rows))
        np.testing.assert_allclose(rows.sum(axis=1), 1.0, atol=1e-8)


# -- 1. NaN inside the documented ranges ------------------------------------------------
def test_cvhdp_tiny_hyperprior_shape_is_finite_or_refused(X):
    model = hdp.CollapsedVB(alpha_prior=(1e-300, 1e-300), n_components=5, max_iter=3, random_state=0)
    try:
        model.fit(X)
    except ValueError as exc:
        assert "alpha_prior" in str(exc)
    else:
        finite_model(model, X)


def test_cvhdp_from_a_gibbs_start_with_a_small_gamma_is_finite():
    """Far sticks' G[beta_k] underflowed to 0 under gamma = 2**-8, and the
    expected tables c (psi(c + n) - psi(c)) were 0 / 0: NaN weights (found by
    the hypothesis suite)."""
    docs = [[0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 2], [0, 0, 0, 0, 0, 0, 4],
            [0, 0, 0, 0, 0, 0, 1], [0, 0, 0, 0, 0, 1, 16], [0, 0, 0, 0, 4, 43, 44], [0, 0, 0, 0, 1, 1, 0],
            [0, 0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 2, 0, 4], [0, 0, 0, 0, 0, 0, 1], [0, 0, 2, 2, 2, 9, 1],
            [0, 0, 2, 0, 0, 0, 0], [0, 0, 0, 42, 22, 46, 0], [0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 1, 1, 1, 2],
            [1, 1, 6, 1, 0, 4, 0]]
    X = Corpus(np.array(docs))
    model = hdp.CollapsedVB(alpha=77.0, eta_tot=1.0, gamma=2.0 ** -8, tau_prior=1.0, init="gibbs",
                            init_gibbs_iter=5, max_iter=3, random_state=0).fit(X)
    assert np.all(np.isfinite(model.weights_))
    finite_model(model, X)


@pytest.mark.parametrize("make", [
    lambda: hdp.OnlineVB(init_scale=1.7e308, n_components=5, n_atoms=3, batch_size=5, n_epochs=2, random_state=0),
    lambda: mixture.StochasticVB(init_scale=1.7e308, n_components=5, batch_size=5, n_epochs=2, random_state=0)],
    ids=["hdp.OnlineVB", "mixture.StochasticVB"])
def test_huge_init_scale_is_finite_or_refused(make, X):
    model = make()
    try:
        model.fit(X)
    except ValueError as exc:
        assert "init_scale" in str(exc)
    else:
        finite_model(model, X)


# -- 2. errors of the documented type, naming the problem --------------------------------
@pytest.mark.parametrize("make, name", [
    (lambda v: lda.CollapsedGibbs(alpha=v, n_components=3, max_iter=2), "alpha"),
    (lambda v: hdp.DirectAssignmentGibbs(eta_tot=v, max_iter=2), "eta_tot"),
    (lambda v: hdp.DirectAssignmentGibbs(alpha_prior=(v, 1.0), max_iter=2), "alpha_prior"),
    (lambda v: mixture.StochasticVB(learning_offset=v, n_components=3), "learning_offset"),
    (lambda v: hdp.DirectAssignmentVB(moves={"merge_threshold": v}, n_components=3), "merge_threshold"),
], ids=["alpha", "eta_tot", "alpha_prior", "learning_offset", "merge_threshold"])
def test_an_integer_too_large_for_a_float_is_a_value_error_naming_it(make, name, X):
    with pytest.raises(ValueError, match=name):
        make(10 ** 400).fit(X)


@pytest.mark.parametrize("make, name", [
    (lambda v: hdp.TruncationFreeSVI(local_sweeps=v, batch_size=5), "local_sweeps"),
    (lambda v: hdp.TruncationFreeSVI(n_samples=v, batch_size=5), "n_samples"),
    (lambda v: hdp.OnlineVB(n_atoms=v, n_components=3, batch_size=5), "n_atoms"),
    (lambda v: hdp.OnlineVB(max_doc_iter=v, n_components=3, batch_size=5), "max_doc_iter"),
    (lambda v: lda.Hybrid(n_samples=v, n_components=3, max_iter=2), "n_samples"),
    (lambda v: mixture.TruncationFreeSVI(local_sweeps=v, batch_size=5), "local_sweeps"),
], ids=["tf-svi local_sweeps", "tf-svi n_samples", "n_atoms", "max_doc_iter", "hybrid n_samples",
        "dp local_sweeps"])
def test_integers_past_the_kernels_range_are_refused_by_name(make, name, X):
    for value in (2 ** 31, 2 ** 63, 10 ** 400):
        with pytest.raises(ValueError, match=f"{name} must be <="):
            make(value).fit(X)


@pytest.mark.parametrize("offset", [0, 1e-300])
def test_direct_assignment_vb_takes_a_learning_offset_below_one(offset, X):
    model = hdp.DirectAssignmentVB(learning_offset=offset, n_components=3, batch_size=10, max_iter=1,
                                   random_state=0).fit(X)
    finite_model(model, X)


def test_the_command_line_reads_nan_and_inf_as_floats_refused_by_name(X):
    from bnpcore import cli, registry
    assert math.isnan(cli._parse_value("nan")) and cli._parse_value("-Inf") == -math.inf
    shape, rate = cli._parse_value("(inf, 1.0)")
    assert shape == math.inf and rate == 1.0
    assert cli._parse_value("os.getcwd()") == "os.getcwd()"        # still no code runs
    with pytest.raises(ValueError, match="alpha must be a positive finite number, got nan"):
        registry.get("lda-cgs").make(test=True, alpha=cli._parse_value("nan")).fit(X)


def test_value_checks_refuse_huge_integers_by_name():
    with pytest.raises(ValueError, match="beta must be a finite number"):
        check_positive(-10 ** 400, "beta")
    with pytest.raises(ValueError, match="rounds must be <= 2147483647"):
        check_int(2 ** 31, "rounds")
    assert check_int(2 ** 40, "documents", maximum=None) == 2 ** 40


# -- 3. bounded memory and time ------------------------------------------------------------
@pytest.mark.parametrize("make, name", [
    (lambda v: hdp.DirectAssignmentGibbs(n_concentration_rounds=v, max_iter=2, burn_in=1), "n_concentration_rounds"),
    (lambda v: hdp.PartiallyCollapsedGibbs(n_concentration_rounds=v, max_iter=2, burn_in=1),
     "n_concentration_rounds"),
    (lambda v: hdp.TruncationFreeSVI(local_sweeps=v, batch_size=5), "local_sweeps"),
    (lambda v: hdp.TruncationFreeSVI(n_samples=v, batch_size=5), "n_samples"),
    (lambda v: mixture.TruncationFreeSVI(local_sweeps=v, batch_size=5), "local_sweeps"),
    (lambda v: lda.Hybrid(n_samples=v, n_components=3, max_iter=2), "n_samples"),
    (lambda v: hdp.PartiallyCollapsedGibbs(max_topics=v, max_iter=2, burn_in=1), "max_topics"),
    (lambda v: hdp.DirectAssignmentVB(moves={"restricted_sweeps": v}, n_components=3),
     r"moves\['restricted_sweeps'\]"),
    (lambda v: hdp.CollapsedVB(init_gibbs_iter=v, init="gibbs", n_components=3), "init_gibbs_iter"),
], ids=["G-HDP rounds", "PC-HDP rounds", "tf-svi local_sweeps", "tf-svi n_samples", "dp local_sweeps",
        "hybrid n_samples", "max_topics", "restricted_sweeps", "init_gibbs_iter"])
def test_work_inside_an_iteration_is_bounded(make, name, X):
    """max_seconds is checked between iterations: 10**7 rounds, sweeps or
    samples inside one ran for minutes past it; now refused by name."""
    with pytest.raises(ValueError, match=f"{name} must be <= "):
        make(10 ** 7).fit(X)


@pytest.fixture
def two_gib(monkeypatch):
    """A process that may allocate 2 GiB, whatever the machine has."""
    import bnpcore._validation as validation
    monkeypatch.setattr(validation, "memory_limit", lambda: 2 << 30)


@pytest.mark.parametrize("make, name", [
    (lambda: lda.CollapsedGibbs(n_components=10 ** 7, max_iter=2), "n_components=10000000"),
    (lambda: lda.CollapsedVB(n_components=10 ** 7, max_iter=2), "n_components=10000000"),
    (lambda: lda.StandardVB(n_components=10 ** 7, max_iter=2), "n_components=10000000"),
    (lambda: hdp.CollapsedVB(n_components=10 ** 7, max_iter=2), "n_components=10000000"),
    (lambda: hdp.DirectAssignmentGibbs(n_components=10 ** 7, max_iter=2), "n_components=10000000"),
    (lambda: hdp.DirectAssignmentVB(n_components=10 ** 7, max_iter=2), "n_components=10000000"),
    (lambda: hdp.OnlineVB(n_components=10 ** 7, batch_size=5), "n_components=10000000"),
    (lambda: hdp.OnlineVB(n_atoms=10 ** 7, n_components=5, batch_size=5), "n_atoms=10000000"),
    (lambda: mixture.StochasticVB(n_components=10 ** 7, batch_size=5), "n_components=10000000"),
], ids=["lda-cgs", "lda-cvb", "lda-svb", "hdp-cvb", "hdp-gibbs", "hdp-da", "online-vb", "n_atoms", "dp-svb"])
def test_a_fit_beyond_the_memory_is_refused_naming_the_setting_and_bytes(make, name, X, two_gib):
    with pytest.raises(ValueError, match=rf"{name}.*needs about .* GiB \(\d+ bytes\), more than the 2 GiB"):
        make().fit(X)


def test_memory_limit_is_the_smaller_of_the_machine_and_the_address_space():
    limit = memory_limit()
    assert 0 < limit <= os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    with pytest.raises(ValueError, match="n_components=7 on 30 documents, 20 words.*: needs about"):
        rng = np.random.default_rng(0)
        check_memory(limit + 1, "n_components=7", Corpus(rng.poisson(1.0, size=(30, 20)) + 1))
    assert check_memory(1000, "small") == 1000


def test_a_uci_header_declaring_too_many_documents_is_refused(tmp_path):
    path = tmp_path / "docword.txt"
    path.write_text("1000000000000\n5\n2\n1 1 3\n2 2 4\n")
    with pytest.raises(ValueError, match=r"header D=1000000000000: needs about"):
        Corpus.from_uci(path)


_HUGE_COUNT_CHILD = """
import json, resource, sys, warnings
resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
warnings.simplefilter("ignore")
import numpy as np
from bnpcore import registry
from bnpcore.corpus import Corpus
counts = np.ones((5, 4), dtype=np.int64)
counts[0, 0] = 2 ** 31 - 1
X = Corpus(counts)
for name in registry.names():
    est = registry.get(name).make(test=True, random_state=0)
    try:
        est.fit(X)
        outcome = "fit"
    except ValueError as exc:
        outcome = "refused" if "needs about" in str(exc) else "ValueError: " + str(exc)
    except MemoryError as exc:
        outcome = "MemoryError: " + str(exc)
    print(json.dumps([name, outcome]), flush=True)
"""


def test_a_count_of_2_31_is_refused_or_fitted_within_the_memory_of_the_process():
    """One count of 2**31 - 1: the per-token arrays of the samplers (8-64 GB)
    are refused by the memory estimate, in a process limited to 3 GB; the
    estimators that keep nothing per token fit."""
    import json
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", _HUGE_COUNT_CHILD], capture_output=True, text=True, timeout=600,
                         env={**os.environ, "OMP_NUM_THREADS": "1"}, cwd=tempfile.gettempdir())   # not the source tree
    assert out.returncode == 0, out.stderr[-2000:]
    outcomes = dict(json.loads(line) for line in out.stdout.splitlines())
    assert set(outcomes.values()) <= {"fit", "refused"}, outcomes
    for name in ("lda-cgs", "hdp-gibbs", "hdp-pcgs", "hdp-tf-svi"):
        assert outcomes[name] == "refused"
