"""bnpcore.registry: register/get/names, and estimators of an installed package
found through the entry-point group ``bnpcore.estimators``, here a fake
distribution (a ``*.dist-info`` folder on sys.path) whose estimator is the one of
examples/unigram_mixture.py."""
import os
import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import bnpcore.datasets
from bnpcore import cli, registry
from bnpcore.registry import RegistryWarning

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

PLUGIN = '''\
from bnpcore.registry import Model
ENTRY = Model("unigram_mixture:UnigramMixture", {"n_components": 10}, test_kwargs={"n_components": 4, "max_iter": 8})
NOT_AN_ESTIMATOR = object()
'''
GOOD = {"unigram-mixture": "unigram_mixture:UnigramMixture", "unigram-mixture-10": "bnpcore_demo_plugin:ENTRY"}
BROKEN = {"broken": "no_such_module_bnpcore_test:Thing", "not-an-estimator": "bnpcore_demo_plugin:NOT_AN_ESTIMATOR",
          "hdp-gibbs": "bnpcore_demo_plugin:ENTRY"}


def write_distribution(folder, entry_points):
    """A distribution ``bnpcore-demo-plugin`` in ``folder`` with these entry points."""
    folder.mkdir(exist_ok=True)
    (folder / "bnpcore_demo_plugin.py").write_text(PLUGIN)
    info = folder / "bnpcore_demo_plugin-1.0.dist-info"
    info.mkdir(exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: bnpcore-demo-plugin\nVersion: 1.0\n")
    lines = [f"{name} = {value}" for name, value in entry_points.items()]
    (info / "entry_points.txt").write_text("[bnpcore.estimators]\n" + "\n".join(lines) + "\n")
    return folder


@pytest.fixture
def fresh_registry(monkeypatch):
    """The built-in entries only, entry points not read yet."""
    builtin = {name: model for name, model in registry._REGISTRY.entries.items()
               if registry._REGISTRY.origins[name] == "bnpcore"}
    monkeypatch.setattr(registry, "_REGISTRY", registry._Registry(builtin))
    monkeypatch.syspath_prepend(str(EXAMPLES))
    return builtin


@pytest.fixture
def plugin(tmp_path, monkeypatch, fresh_registry):
    folder = write_distribution(tmp_path / "site", GOOD)
    monkeypatch.syspath_prepend(str(folder))
    return folder


@pytest.fixture
def broken_plugin(tmp_path, monkeypatch, fresh_registry):
    folder = write_distribution(tmp_path / "site", {**GOOD, **BROKEN})
    monkeypatch.syspath_prepend(str(folder))
    return folder


@pytest.fixture
def kos_is_tiny(monkeypatch, tiny_corpus):
    monkeypatch.setattr(bnpcore.datasets, "load_kos", lambda: tiny_corpus, raising=False)


def test_entry_points_join_the_registry(plugin, fresh_registry, tiny_corpus):
    import unigram_mixture
    assert registry.names() == sorted([*fresh_registry, *GOOD])
    by_class = registry.get("unigram-mixture")
    assert by_class.load_class() is unigram_mixture.UnigramMixture
    assert (by_class.path, by_class.kwargs, by_class.test_kwargs) == ("unigram_mixture:UnigramMixture", {}, None)
    assert by_class.make(test=True).max_iter == 5
    by_model = registry.get("unigram-mixture-10")
    assert by_model.kwargs == {"n_components": 10} and by_model.make(test=True).n_components == 4
    est = by_model.make(test=True, random_state=0).fit(tiny_corpus)
    assert est.get_topics().shape[1] == tiny_corpus.n_words


def test_entry_points_in_bnpcore_list_and_fit(plugin, kos_is_tiny, capsys):
    assert cli.main(["list"]) == 0
    out, err = capsys.readouterr()
    assert err == ""
    assert re.search(r"^  unigram-mixture +unigram_mixture:UnigramMixture +[A-Z]", out, re.M)
    assert re.search(r"^  unigram-mixture-10 +unigram_mixture:UnigramMixture ", out, re.M)
    assert re.search(r"^\* hdp-gibbs ", out, re.M)                     # the built-in ones stay
    assert cli.main(["fit", "--model", "unigram-mixture-10", "--iterations", "3", "-q"]) == 0
    out, err = capsys.readouterr()
    assert "fitting unigram-mixture-10 (unigram_mixture:UnigramMixture) on kos" in out, err
    assert "held-out per-word log-likelihood" in out


def test_broken_entry_points_warn_and_are_left_out(broken_plugin, fresh_registry):
    with pytest.warns(RegistryWarning) as caught:
        names = registry.names()
    assert names == sorted([*fresh_registry, *GOOD])
    assert registry.get("hdp-gibbs").path == "bnpcore.hdp:DirectAssignmentGibbs"   # not replaced
    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == 3
    assert "entry point 'broken = no_such_module_bnpcore_test:Thing' of bnpcore-demo-plugin is left out: " \
           "ModuleNotFoundError" in messages[0]
    assert "'hdp-gibbs = bnpcore_demo_plugin:ENTRY'" in messages[1] and "is taken (by bnpcore)" in messages[1]
    assert "'not-an-estimator = bnpcore_demo_plugin:NOT_AN_ESTIMATOR'" in messages[2]
    assert "expected an estimator class" in messages[2]


def test_broken_entry_points_do_not_break_bnpcore_list(broken_plugin, capsys):
    assert cli.main(["list"]) == 0
    out, err = capsys.readouterr()
    warned = err.strip().splitlines()
    assert len(warned) == 3 and all(line.startswith("bnpcore: warning: bnpcore.registry: entry point '")
                                    for line in warned)
    assert any("'broken = no_such_module_bnpcore_test:Thing'" in line for line in warned)
    assert re.search(r"^  unigram-mixture ", out, re.M) and re.search(r"^  lda-cgs ", out, re.M)


def test_the_contract_suite_runs_on_entry_points(plugin):
    """tests/api/test_contract.py runs on an installed package's estimators (found at collection)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(plugin), str(EXAMPLES), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "pytest", "-v", "-p", "no:cacheprovider",
                           str(Path(__file__).with_name("test_contract.py")), "-k", "unigram-mixture-10"],
                          capture_output=True, text=True, timeout=600, cwd=plugin.parent, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    passed = [line for line in proc.stdout.splitlines() if "[unigram-mixture-10" in line and "PASSED" in line]
    assert any("test_save_load_round_trip[unigram-mixture-10]" in line for line in passed)
    assert len(passed) >= 20


def test_register_get_unregister(fresh_registry, plugin, tiny_corpus):
    from unigram_mixture import UnigramMixture
    model = registry.register("my-mixture", UnigramMixture, {"n_components": 6}, test_kwargs={"max_iter": 2})
    assert registry.get("my-mixture") is model and "my-mixture" in registry.names()
    assert model.path == "unigram_mixture:UnigramMixture" and model.load_class() is UnigramMixture
    assert model.make(test=True).get_params()["n_components"] == 6
    assert "unigram-mixture" in registry.names()          # register() read the entry points first
    with pytest.raises(ValueError, match="'unigram-mixture' is already registered .*entry point"):
        registry.register("unigram-mixture", UnigramMixture)
    with pytest.raises(ValueError, match="'lda-cgs' is already registered \\(by bnpcore\\)"):
        registry.register("lda-cgs", "bnpcore.lda:CollapsedGibbs")
    registry.register("lda-cgs", "bnpcore.lda:CollapsedGibbs", {"max_iter": 7}, replace=True)
    assert registry.get("lda-cgs").make().max_iter == 7
    registry.unregister("my-mixture")
    with pytest.raises(ValueError, match="unknown model 'my-mixture' \\(available: .*lda-cgs"):
        registry.get("my-mixture")
    with pytest.raises(ValueError, match="unknown model"):
        registry.unregister("my-mixture")


@pytest.mark.parametrize("args, message", [
    (("", "bnpcore.lda:StandardVB"), "a model name"),
    (("two words", "bnpcore.lda:StandardVB"), "a model name"),
    (("--model", "bnpcore.lda:StandardVB"), "a model name"),
    (("x", "bnpcore.lda.StandardVB"), "expected an estimator class"),
    (("x", dict), "expected an estimator class"),
    (("x", "bnpcore.lda:StandardVB", [("max_iter", 3)]), "kwargs must be a dict"),
    (("x", "bnpcore.lda:StandardVB", {}, {1: 2}), "test_kwargs must be a dict"),
    (("x", registry.Model("bnpcore.lda:StandardVB"), {"max_iter": 3}), "in the Model, not beside it"),
])
def test_register_refuses_bad_entries(fresh_registry, args, message):
    with pytest.raises(ValueError, match=message):
        registry.register(*args)


def test_register_checks_a_class_parameters(fresh_registry):
    from bnpcore.lda import StandardVB
    with pytest.raises(ValueError, match="StandardVB has no parameter max_iters"):
        registry.register("x", StandardVB, {"max_iters": 3})
    with pytest.raises(ValueError, match="cannot import bnpcore.x:A"):
        registry.register("x", "bnpcore.x:A").load_class()


def test_refresh_reads_the_entry_points_again(fresh_registry, tmp_path, monkeypatch):
    assert "unigram-mixture" not in registry.names()
    folder = write_distribution(tmp_path / "site", GOOD)
    monkeypatch.syspath_prepend(str(folder))
    assert "unigram-mixture" not in registry.names()        # read once
    registry.register("kept", "bnpcore.lda:StandardVB")
    registry.refresh()
    assert {"unigram-mixture", "unigram-mixture-10", "kept"} <= set(registry.names())
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p != str(folder)])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        registry.refresh()
    assert "unigram-mixture" not in registry.names() and "kept" in registry.names()
