"""One thread-count parameter everywhere (issue #14): every built-in estimator
takes ``n_threads``, rejects bad counts early, gives the same ``transform`` (and,
where the fit is exact, the same fitted state) at 1 and 2 threads, and the
command line's ``--threads`` reaches every model."""
import re
import warnings

import numpy as np
import pytest

from bnpcore import cli, load, registry

from .conftest import make_tiny_corpus


# bnpcore's own estimators (an installed package's need not take n_threads)
BUILT_IN = [name for name in registry.names() if registry.get(name).path.startswith("bnpcore.")]


def _fitted_arrays(est):
    return {k: v for k, v in vars(est).items()
            if k.endswith("_") and not k.startswith("_") and isinstance(v, np.ndarray)}


@pytest.mark.parametrize("name", BUILT_IN)
def test_every_registered_estimator_takes_n_threads(name):
    assert "n_threads" in registry.get(name).load_class()._param_names()


@pytest.mark.parametrize("name", BUILT_IN)
@pytest.mark.parametrize("bad", [0, -2, 1.5, "2"])
def test_bad_thread_counts_are_rejected(name, bad):
    est = registry.get(name).make(test=True, n_threads=bad, random_state=0)
    with pytest.raises(ValueError, match="n_threads"):
        est.fit(make_tiny_corpus())


@pytest.mark.parametrize("name", BUILT_IN)
def test_same_result_at_one_and_two_threads(name):
    """Same seed: bit-identical fitted arrays and transform at 1 and 2 threads
    (the registry fits CollapsedVB with its default, sequential schedule: the
    delayed one depends on ``n_threads`` by design)."""
    corpus, new = make_tiny_corpus(seed=0), make_tiny_corpus(seed=1)
    spec = registry.get(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)       # convergence notes of tiny fits
        one = spec.make(test=True, n_threads=1, random_state=3).fit(corpus)
        two = spec.make(test=True, n_threads=2, random_state=3).fit(corpus)
    a, b = _fitted_arrays(one), _fitted_arrays(two)
    assert a.keys() == b.keys() and a
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=key)
    theta = one.transform(new)
    np.testing.assert_array_equal(one.set_params(n_threads=2).transform(new), theta)
    assert np.isfinite(one.score(new))


@pytest.mark.parametrize("name", BUILT_IN)
def test_cli_threads_reaches_every_model(capsys, tmp_path, monkeypatch, name):
    monkeypatch.setattr("bnpcore.datasets.load_kos", make_tiny_corpus)
    spec = registry.get(name)
    path = str(tmp_path / "model.npz")
    params = [arg for k, v in (spec.test_kwargs or {}).items() for arg in ("-p", f"{k}={v}")]
    code = cli.main(["fit", "--model", name, "--data", "kos", "--threads", "2", "-q", "--output", path] + params)
    err = capsys.readouterr().err
    assert code == 0, err
    assert load(path).n_threads == 2
    code = cli.main(["fit", "--model", name, "--data", "kos", "--threads", "0", "-q"] + params)
    assert code != 0 and re.search(r"n_threads", capsys.readouterr().err)


@pytest.mark.parametrize("name", ["lda-svb", "dp-svb"])
def test_blas_runs_on_one_thread_during_fit(name):
    """No oversubscription: while a fit runs its OpenMP kernels, BLAS is limited
    to one thread (threadpoolctl), and gets its threads back afterwards."""
    threadpoolctl = pytest.importorskip("threadpoolctl")

    def blas_threads():
        return {i["filepath"]: i["num_threads"] for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"}

    before = blas_threads()
    with threadpoolctl.threadpool_limits(2, "blas"):
        seen = []
        est = registry.get(name).make(test=True, n_threads=2, random_state=0)
        with est.reporting(lambda est, record: seen.append(blas_threads())):
            est.fit(make_tiny_corpus())
        assert seen and all(set(s.values()) == {1} for s in seen)
        assert set(blas_threads().values()) == {2}
    assert blas_threads() == before
