"""The estimator layer of ADF, EP and CollapsedGibbs: held-out scores against a
naive mixture of Dirichlet-multinomials, progress reports and early stopping."""
import numpy as np
import pytest
from scipy.special import gammaln, logsumexp

from bnpcore.base import load
from bnpcore.mixture import ADF, EP, CollapsedGibbs

from nrm_reference import dm_ref
from test_adf import small_corpus

KW = dict(a=2.0, sigma=0.5, tau=1.0, eta=0.3)


def mixture_ref(X, log_w, lam):
    """Per-document log p(token sequence) under sum_k w_k DM(. | lam_k)."""
    return np.array([logsumexp([lw + dm_ref(x, l) for lw, l in zip(log_w, lam)]) for x in X])


def log_multcoef(X):
    return gammaln(X.sum(axis=1) + 1) - gammaln(X + 1).sum(axis=1)


def predictive_ref(model, X):
    """Naive per-document token-sequence log predictive of a fitted model ([NRM] section 4)."""
    eta = np.full(X.shape[1], model.eta)
    if isinstance(model, CollapsedGibbs):
        train = model._train_matrix().toarray()
        per_sample = []
        for z, u in zip(model._samples_z, model._samples_u):
            labels = np.unique(z)
            sizes = np.array([np.sum(z == k) for k in labels])
            w = np.append(sizes - model.sigma, model.a * ((u + model.tau) ** model.sigma if model.sigma else 1.0))
            lam = [eta + train[z == k].sum(axis=0) for k in labels] + [eta]
            per_sample.append(mixture_ref(X, np.log(w / w.sum()), lam))
        return np.mean(per_sample, axis=0)
    w = np.append(model.weights_, model.weight_new_)
    keep = w > 0
    lam = list(model.components_) + [eta]
    return mixture_ref(X, np.log(w[keep]), [l for l, k in zip(lam, keep) if k])


FITS = {
    "ADF": lambda X: ADF(**KW).fit(X),
    "EP": lambda X: EP(max_iter=3, tol=0.0, **KW).fit(X),
    "Gibbs": lambda X: CollapsedGibbs(max_iter=6, n_samples=3, random_state=0, **KW).fit(X),
    "Gibbs-DP": lambda X: CollapsedGibbs(a=2.0, sigma=0.0, eta=0.3, max_iter=4, n_samples=2, random_state=1).fit(X),
}


@pytest.mark.parametrize("name", sorted(FITS))
def test_score_is_per_word_and_score_samples_the_papers_total(name):
    X = small_corpus(seed=13, n_docs=50)
    model = FITS[name](X[:40])
    test = X[40:]
    ref = predictive_ref(model, test)
    np.testing.assert_allclose(model.score_samples(test), ref + log_multcoef(test), rtol=1e-10)
    assert model.score(test) == pytest.approx(ref.sum() / test.sum(), rel=1e-10)
    assert model.score(test) == pytest.approx((model.score_samples(test).sum() - log_multcoef(test).sum())
                                              / test.sum(), rel=1e-12)


def test_ep_stopped_by_the_callback_keeps_that_epochs_model():
    X = small_corpus(seed=14, n_docs=60)
    two = EP(max_iter=2, tol=0.0, **KW).fit(X)
    stopped = EP(max_iter=6, tol=0.0, **KW)
    with stopped.reporting(lambda est, rec: rec["iteration"] == 2):
        stopped.fit(X)
    assert [h["iteration"] for h in stopped.history_] == [1, 2] and stopped.n_iter_ == 2
    for name in ("components_", "cluster_mass_", "weights_"):
        np.testing.assert_array_equal(getattr(stopped, name), getattr(two, name))
    assert stopped.score(X) == two.score(X)


def test_gibbs_stopped_before_the_kept_sweeps_uses_the_last_state(tmp_path):
    X = small_corpus(seed=15, n_docs=40)
    three = CollapsedGibbs(max_iter=3, n_samples=1, random_state=5, **KW).fit(X)
    stopped = CollapsedGibbs(max_iter=20, n_samples=5, random_state=5, **KW)
    with stopped.reporting(lambda est, rec: rec["iteration"] == 3):
        stopped.fit(X)
    assert len(stopped.history_) == 3 and stopped._samples_z.shape == (1, 40)
    np.testing.assert_array_equal(stopped.labels_, three.labels_)
    assert stopped.score(X) == three.score(X)
    # stopped inside the kept sweeps: the samples so far
    kept = CollapsedGibbs(max_iter=20, n_samples=5, random_state=5, **KW)
    with kept.reporting(lambda est, rec: rec["iteration"] == 17):
        kept.fit(X)
    assert kept._samples_z.shape == (2, 40)
    kept.save(tmp_path / "g.npz")
    assert load(tmp_path / "g.npz").score(X) == kept.score(X)


@pytest.mark.parametrize("name", ["ADF", "EP", "Gibbs"])
def test_refit_forgets_the_previous_fit(name):
    X = small_corpus(seed=16, n_docs=50)
    model = FITS[name](X)
    model.fit(X[:20, :10])
    assert model.n_features_in_ == 10 and model.topics_.shape[1] == 10
    assert model.transform(X[:3, :10]).shape == (3, model.n_components_)


@pytest.mark.parametrize("make", [
    lambda: EP(max_iter=5, tol=0.0, shuffle=True, random_state=3, **KW),
    lambda: CollapsedGibbs(max_iter=8, n_samples=3, random_state=5, **KW),
], ids=["EP", "Gibbs"])
def test_checkpoint_resume_continues_exactly(make, tmp_path):
    X = small_corpus(seed=4, n_docs=50)
    full = make().fit(X, heldout=X[:6])
    part = make()
    with part.reporting(lambda est, rec: rec["iteration"] == 3):
        part.fit(X, heldout=X[:6], checkpoint=tmp_path / "ck.npz")
    resumed = load(tmp_path / "ck.npz").fit(X, heldout=X[:6], resume=True)
    np.testing.assert_array_equal(resumed.components_, full.components_)
    assert resumed.score(X[:6]) == full.score(X[:6])
    drop = [{k: v for k, v in r.items() if k != "fit_seconds"} for r in full.history_]
    np.testing.assert_equal([{k: v for k, v in r.items() if k != "fit_seconds"} for r in resumed.history_], drop)
