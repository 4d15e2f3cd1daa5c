"""The widest kernels take their scalar settings as one dict (a C settings struct):
a missing key is an error that names it, before anything is computed."""
import numpy as np
import pytest

from bnpcore.kernels import _dahdp, _hdp_gibbs, _nrm, _svi
from bnpcore.kernels.stirling import StirlingTable

# one document of two pairs over a minibatch vocabulary of two words
PTR, WORDS, COUNTS = np.array([0, 2], np.int64), np.array([0, 1], np.int32), np.array([1, 2], np.int32)


def restricted(settings):
    return _dahdp.restricted(PTR, WORDS, COUNTS, np.ones(2), np.zeros(2), np.zeros(2), settings, np.ones(1),
                             np.ones(1), np.full(2, 0.5), np.array([0.5, 1.0]), np.array([0.5, 1.0]))


def online_vb(settings):
    K = 2
    out = (np.empty((K, 2)), np.empty(K), np.empty((1, K)), np.empty(1), np.empty(1, np.int32))
    _svi.hdp_online_vb_step(PTR, WORDS, COUNTS, np.arange(2, dtype=np.int32), np.ones((K, 2)), np.full(K, 2.0),
                            np.arange(K, dtype=np.int64), 1.0, np.log(np.full(K, 0.5)), settings, out)
    return out


def local_step(settings):
    return _svi.hdp_local_step(PTR, WORDS, COUNTS, np.arange(2, dtype=np.int32), np.zeros((0, 2)), np.zeros(0),
                               np.zeros(0, np.int64), 1.0, np.zeros(0), settings, np.random.default_rng(0),
                               StirlingTable())


def gibbs_sweep(priors):
    cap = 4
    table = (np.zeros((2, cap), np.int32), np.zeros(cap, np.int64), np.zeros(cap))
    z = np.zeros(3, np.int32)
    return _hdp_gibbs.gibbs_sweep(PTR, WORDS, COUNTS, z, table, 1.0, 0, priors, 0, _hdp_gibbs.word_lists(table[0], 0),
                                  np.random.default_rng(0))


KERNELS = {
    "gibbs_sweep": (gibbs_sweep, {"alpha": 1.0, "gamma": 1.0, "eta": 0.1, "reuse_holes": True}),
    "restricted": (restricted, {"base1": 1.0, "base2": 1.0, "rho_eta": 0.5, "rho_scale": 1.0, "ab1": 0.5,
                                "ab2": 0.5, "tol": 1e-3, "max_iter": 5, "n_sweeps": 1}),
    "hdp_online_vb_step": (online_vb, {"eta": 0.5, "alpha": 1.0, "n_atoms": 3, "ranked": True, "max_iter": 5,
                                       "tol": 1e-4, "stats": True}),
    "hdp_local_step": (local_step, {"eta": 0.5, "gamma": 1.0, "alpha": 1.0, "sweeps": 1, "exact": True,
                                    "n_samples": 1}),
}


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_complete_settings_run(name):
    kernel, settings = KERNELS[name]
    kernel(dict(settings))


@pytest.mark.parametrize("name, key", [(name, key) for name in sorted(KERNELS) for key in KERNELS[name][1]])
def test_a_missing_setting_is_named(name, key):
    kernel, settings = KERNELS[name]
    settings = {k: v for k, v in settings.items() if k != key}
    with pytest.raises(ValueError, match=f"'{key}'"):
        kernel(settings)


def test_ep_run_takes_its_arrays_in_groups():
    """ep_run's cluster arrays and sites are tuples: a group of the wrong size is refused."""
    p = {"eta": 0.1, "n_words": 2, "a": 1.0, "sigma": 0.0, "tau": 1.0}
    cap = 4
    clusters = (np.full((cap, 2), 0.1), np.full(cap, 0.2), np.zeros(cap), np.zeros(cap), np.zeros(cap, np.uint8))
    sites = (np.zeros(2, np.int64), np.zeros(8, np.int32), np.zeros(8))
    new = (np.zeros(2, np.int64), np.zeros(8, np.int32), np.zeros(8))
    state = _nrm.new_state()
    assert _nrm.ep_run(PTR, WORDS, COUNTS, 0, 1, p, clusters, state, np.empty(cap + 1), sites, new) == 1
    assert state["n_slots"][0] == 1 and new[0][1] == 1
    with pytest.raises(ValueError):
        _nrm.ep_run(PTR, WORDS, COUNTS, 0, 1, p, clusters[:4], _nrm.new_state(), np.empty(cap + 1), sites, new)
    with pytest.raises(ValueError):
        _nrm.ep_run(PTR, WORDS, COUNTS, 0, 1, p, clusters, _nrm.new_state(), np.empty(cap + 1), sites[:2], new)
