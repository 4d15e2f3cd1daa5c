"""Defaults that work out of the box: ``burn_in="auto"`` for any ``max_iter`` (and
the command line's ``--iterations``), ``n_epochs="auto"`` passes that scale with
the corpus, truncations picked from the data, and a ``CapacityWarning`` naming
the parameter to raise when a truncated estimator fills its capacity."""
import warnings

import numpy as np
import pytest

from bnpcore import cli, hdp, mixture
from bnpcore._defaults import CapacityWarning, check_burn_in, warn_capacity
from bnpcore.datasets import load_kos, make_bars
from bnpcore.inference.online import AUTO_EPOCH_TOKENS, AUTO_MAX_EPOCHS, auto_epochs
from bnpcore.models.hdp_collapsed import auto_truncation


@pytest.fixture(scope="module")
def bars():
    """LDA bars (10 x 10 grid, 20 bars), 150 documents of 60 tokens."""
    return make_bars("sm", n_docs=150, n_test=0, doc_length=60, random_state=0).corpus


@pytest.fixture(scope="module")
def mixture_bars():
    """Mixture bars (8 x 8 grid, 16 bars), 200 documents of 50 draws."""
    return make_bars("nrm", random_state=0).corpus


def no_capacity_warnings(fit):
    with warnings.catch_warnings():
        warnings.simplefilter("error", CapacityWarning)
        return fit()


# -- burn_in="auto" ------------------------------------------------------------------
def test_check_burn_in_auto_is_half_of_max_iter_and_an_integer_must_be_smaller():
    assert [check_burn_in("auto", m) for m in (1, 2, 60, 500)] == [0, 1, 30, 250]
    assert check_burn_in(0, 1) == 0 and check_burn_in(19, 20) == 19
    with pytest.raises(ValueError, match=r"burn_in=20 must be smaller than max_iter=20"):
        check_burn_in(20, 20)
    with pytest.raises(ValueError, match="'auto' or an integer"):
        check_burn_in("half", 20)


@pytest.mark.parametrize("cls", [hdp.DirectAssignmentGibbs, hdp.PartiallyCollapsedGibbs])
def test_samplers_default_burn_in_fits_any_max_iter(cls, bars):
    assert cls().burn_in == "auto"
    for max_iter in (1, 6):
        model = cls(n_components=5, max_iter=max_iter, random_state=0).fit(bars)
        assert len(model.history_) == max_iter
    # the samples after max_iter // 2 sweeps enter the held-out average of eq 17
    train, heldout = bars.split_tokens(0.1, random_state=0)
    traced = cls(n_components=5, max_iter=6, random_state=0).fit(train, heldout=heldout)
    assert traced.heldout_loglik_ == pytest.approx(traced.history_[-1]["heldout_loglik"])
    with pytest.raises(ValueError, match=r"burn_in=6 must be smaller than max_iter=6"):
        cls(max_iter=6, burn_in=6).fit(bars)


def test_direct_assignment_gibbs_max_iter_60_with_the_defaults(bars):
    model = hdp.DirectAssignmentGibbs(max_iter=60, random_state=0).fit(bars)
    assert model.n_iter_ == 60


@pytest.fixture(scope="module")
def text_folder(tmp_path_factory):
    root = tmp_path_factory.mktemp("defaults_texts")
    rng = np.random.default_rng(0)
    themes = ["apple banana cherry orchard fruit harvest".split(), "engine wheel motor road speed garage".split()]
    for i in range(16):
        (root / f"doc{i:02d}.txt").write_text(" ".join(rng.choice(themes[i % 2], size=20)), encoding="utf-8")
    return root


@pytest.mark.parametrize("argv", [["--iterations", "20"], ["--model", "hdp-pcgs", "--iterations", "10"]])
def test_command_line_iterations_below_the_old_burn_in(argv, text_folder, capsys):
    assert cli.main(["fit", "--texts", str(text_folder), "-q"] + argv) == 0
    assert "burn_in" not in capsys.readouterr().err


# -- n_epochs="auto" ------------------------------------------------------------------
def test_auto_epochs_see_a_fixed_number_of_tokens_within_bounds():
    assert auto_epochs(420_208) == round(AUTO_EPOCH_TOKENS / 420_208) == 12     # KOS's training tokens
    assert auto_epochs(10 ** 9) == 1
    assert auto_epochs(10) == AUTO_MAX_EPOCHS


@pytest.mark.parametrize("make", [lambda: hdp.TruncationFreeSVI(batch_size=50, random_state=0),
                                  lambda: hdp.OnlineVB(n_components=30, batch_size=50, random_state=0),
                                  lambda: mixture.TruncationFreeSVI(batch_size=50, random_state=0)],
                         ids=["hdp.TruncationFreeSVI", "hdp.OnlineVB", "mixture.TruncationFreeSVI"])
def test_online_default_passes_scale_with_the_corpus(make, bars):
    model = make()
    assert model.n_epochs == "auto"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CapacityWarning)
        model.fit(bars)
    assert model.history_[-1]["n_documents"] == auto_epochs(bars.n_tokens, model._auto_epoch_tokens) * bars.n_docs
    with pytest.raises(ValueError, match="n_epochs must be 'auto' or a positive integer"):
        type(model)(n_epochs="many").fit(bars)


# -- truncations and capacity -------------------------------------------------------------
def test_warn_capacity_names_the_parameter_only_when_full():
    est = hdp.OnlineVB()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert warn_capacity(est, 9, 10, "n_components") is False
    with pytest.warns(CapacityWarning, match=r"OnlineVB used all 10 .*raise n_components"):
        assert warn_capacity(est, 10, 10, "n_components") is True


def test_collapsed_vb_default_picks_its_truncation_from_a_sampler_and_keeps_room(bars):
    model = no_capacity_warnings(lambda: hdp.CollapsedVB(max_iter=5, random_state=0).fit(bars))
    sampler = hdp.DirectAssignmentGibbs(n_components=100, max_iter=model.init_gibbs_iter, eta_tot=model.eta_tot,
                                        random_state=np.random.default_rng(0)).fit(bars)
    found = sampler.n_components_
    assert model.n_components_ == auto_truncation(found) == found + max(5, -(-found // 10))    # room to grow
    assert model.n_active_ < model.n_components_


def test_collapsed_vb_default_truncation_fits_in_memory(bars, monkeypatch):
    """A corpus whose sample has more topics than a quarter of the memory holds (a
    50,000-document corpus filled 24 GiB): the largest topics are kept, with a
    CapacityWarning, and the fit runs."""
    from bnpcore.models import hdp_collapsed
    one_topic = hdp_collapsed._state_bytes(bars, 1, "float64")
    monkeypatch.setattr(hdp_collapsed, "memory_limit", lambda: 4 * one_topic * (hdp_collapsed.RANDOM_TRUNCATION + 3))
    assert auto_truncation(1000, bars) == hdp_collapsed.RANDOM_TRUNCATION + 3
    sampler = hdp.DirectAssignmentGibbs(n_components=100, max_iter=5, random_state=0).fit(bars)
    assert sampler.n_components_ > hdp_collapsed.RANDOM_TRUNCATION + 3
    with pytest.warns(CapacityWarning, match="keeping its 43 largest"):
        model = hdp.CollapsedVB(max_iter=2, random_state=0).fit(bars, init_from=sampler)
    assert model.n_components_ == hdp_collapsed.RANDOM_TRUNCATION + 3
    assert np.isfinite(model.topics_).all() and np.isfinite(model.score(bars))


def test_collapsed_vb_warns_when_every_truncation_slot_holds_a_topic(bars):
    with pytest.warns(CapacityWarning, match="raise n_components"):
        model = hdp.CollapsedVB(n_components=3, init="random", max_iter=5, random_state=0).fit(bars)
    assert model.n_active_ == model.n_components_ == 3


def test_truncated_online_estimators_warn_when_full(bars, mixture_bars):
    with pytest.warns(CapacityWarning, match=r"OnlineVB used all 3 .*raise n_components"):
        hdp.OnlineVB(n_components=3, n_epochs=1, batch_size=50, random_state=0).fit(bars)
    with pytest.warns(CapacityWarning, match=r"StochasticVB used all 2 .*raise n_components"):
        mixture.StochasticVB(n_components=2, n_epochs=1, batch_size=50, random_state=0).fit(mixture_bars)


def test_partially_collapsed_gibbs_warns_when_it_reaches_max_topics(bars):
    kos = load_kos()[:200]
    with pytest.warns(CapacityWarning, match=r"used all 3 .*raise max_topics"):
        model = hdp.PartiallyCollapsedGibbs(n_components=2, max_topics=3, max_iter=10, random_state=0).fit(kos)
    assert model.n_components_ == 3
    no_capacity_warnings(lambda: hdp.PartiallyCollapsedGibbs(max_iter=5, random_state=0).fit(bars))


def test_nrm_gibbs_default_samples_fit_any_max_iter(mixture_bars):
    assert len(mixture.CollapsedGibbs(max_iter=6, random_state=0).fit(mixture_bars)._samples_z) == 3
    assert len(mixture.CollapsedGibbs(max_iter=1, random_state=0).fit(mixture_bars)._samples_z) == 1
    with pytest.raises(ValueError, match="n_samples=7 exceeds max_iter=6"):
        mixture.CollapsedGibbs(max_iter=6, n_samples=7).fit(mixture_bars)
    with pytest.raises(ValueError, match="n_samples must be 'auto'"):
        mixture.CollapsedGibbs(n_samples="all").fit(mixture_bars)
