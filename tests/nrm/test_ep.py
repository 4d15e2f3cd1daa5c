"""EP-NRM (supp Alg. 2; ALGORITHMS.md 6.4, 10.7)."""
import numpy as np
import pytest

from bnpcore.corpus import Corpus
from bnpcore.mixture import ADF, EP
from bnpcore.models.nrm import _recompute_from_sites

from nrm_reference import ep_epoch_ref, make_py_mixture
from test_adf import separated_corpus, small_corpus

KW = dict(a=2.0, sigma=0.5, tau=1.0, eta=0.3)


def site_matrix(model):
    return model._sites.matrix(model._state.n_slots).toarray()


@pytest.mark.parametrize("kw", [dict(KW, merge=False), dict(KW, merge=True, merge_every=15, merge_threshold=0.9),
                                dict(a=3.0, sigma=0.0, eta=0.3, merge=False)])
def test_ep_after_adf_pass_equals_adf(kw):
    X = small_corpus(seed=3, n_docs=70)
    adf = ADF(**kw).fit(X)
    ep = EP(max_iter=1, **kw).fit(X)
    for name in ("components_", "topics_", "cluster_mass_", "weights_", "expected_n_components_"):
        np.testing.assert_array_equal(getattr(ep, name), getattr(adf, name))
    assert ep.weight_new_ == adf.weight_new_ and (ep.u_ == adf.u_ or np.isnan(adf.u_))
    for name in ("lam", "lam_tot", "S", "logP"):
        n = adf._state.n_slots
        np.testing.assert_array_equal(getattr(ep._state, name)[:n], getattr(adf._state, name)[:n])
    # the stored sites are exactly what was added
    Q = site_matrix(ep)
    np.testing.assert_allclose(Q.sum(axis=0), ep._state.S[:ep._state.n_slots], rtol=1e-12)


@pytest.mark.parametrize("sigma,eps,exact", [(0.5, 0.5, True), (0.0, 0.5, True), (0.25, 0.6, False)])
def test_ep_epoch_matches_naive_reference(sigma, eps, exact):
    X = small_corpus(seed=8, n_docs=50)
    kw = dict(a=2.0, sigma=sigma, tau=1.0, eta=0.3, epsilon=eps, merge=False, min_responsibility=0.0,
              expected_k="exact" if exact else "K")
    one = EP(max_iter=1, **kw).fit(X)
    two = EP(max_iter=2, tol=0.0, **kw).fit(X)
    st = one._state
    K = st.n_slots
    lam, S, logP, Q, alive = ep_epoch_ref(X, st.lam[:K], st.S[:K], st.logP[:K], site_matrix(one), 2.0, sigma, 1.0,
                                          0.3, eps, exact_k=exact)
    assert alive.sum() == two.n_components_
    order = np.argsort(-S[alive], kind="stable")
    np.testing.assert_allclose(two.cluster_mass_, S[alive][order], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(two.components_, lam[alive][order], rtol=1e-9)
    np.testing.assert_allclose(site_matrix(two)[:, np.argsort(-two._state.S[:two._state.n_slots])],
                               Q[:, alive][:, order], rtol=1e-9, atol=1e-12)
    change = 0.5 * np.abs(np.hstack([site_matrix(one), np.zeros((50, Q.shape[1] - K))]) - Q).sum() / 50
    assert two.history_[1]["delta"] == pytest.approx(change, rel=1e-9)


def test_ep_invariants_hold_after_every_epoch():
    X = small_corpus(seed=9, n_docs=80)
    docs = Corpus(X)
    for passes in (2, 3, 4):
        ep = EP(max_iter=passes, tol=0.0, merge=True, merge_every=20, **KW).fit(docs)
        st = ep._state
        K = st.n_slots
        Q = site_matrix(ep)
        assert np.all(st.alive[:K] == 1)
        np.testing.assert_allclose(st.lam[:K], 0.3 + Q.T @ X, rtol=1e-9)
        np.testing.assert_allclose(st.lam_tot[:K], st.lam[:K].sum(axis=1), rtol=1e-9)
        np.testing.assert_allclose(st.S[:K], Q.sum(axis=0), rtol=1e-9, atol=1e-12)
        assert np.all(st.S[:K] >= ep._prior()["epsilon"])
        logP = np.log1p(-np.minimum(Q, 1 - 1e-15)).sum(axis=0)
        np.testing.assert_allclose(st.logP[:K], logP, rtol=1e-9, atol=1e-9)
        lam_before = st.lam[:K].copy()
        _recompute_from_sites(st, ep._sites, docs, ep._prior())
        np.testing.assert_allclose(st.lam[:K], 0.3 + Q.T @ X, rtol=1e-14)
        np.testing.assert_allclose(st.lam[:K], lam_before, rtol=1e-12)


def test_single_document_epoch_is_idempotent():
    X = np.array([[3, 0, 2, 1, 0]])
    adf = ADF(**KW).fit(X)
    ep = EP(max_iter=5, tol=0.0, **KW).fit(X)
    assert ep.n_iter_ == 5 and ep.n_components_ == 1
    np.testing.assert_array_equal(ep.components_, adf.components_)
    np.testing.assert_array_equal(ep.cluster_mass_, adf.cluster_mass_)


def test_unchanged_sites_restore_the_state():
    """Removing and re-adding a site with the same responsibilities restores the state."""
    X = separated_corpus([5, 3, 6], length=80)
    one = EP(max_iter=1, merge=False, **KW).fit(X)
    two = EP(max_iter=2, tol=0.0, merge=False, **KW).fit(X)
    assert two.history_[1]["delta"] < 1e-12
    np.testing.assert_allclose(two.components_, one.components_, rtol=1e-12)
    np.testing.assert_allclose(two.cluster_mass_, one.cluster_mass_, rtol=1e-12)


def test_ep_stops_at_tolerance_and_reports():
    X = small_corpus(seed=10, n_docs=60)
    ep = EP(max_iter=30, tol=1e-3, **KW).fit(X, heldout=X[:10])
    assert ep.n_iter_ == len(ep.history_) <= 30
    assert ep.n_iter_ == 30 or ep.history_[-1]["delta"] < 1e-3
    assert all("heldout_total" in h for h in ep.history_)
    ep = EP(max_iter=4, tol=0.0, **KW).fit(X, heldout=X[:10], eval_every={1, 3})
    assert ["heldout_total" in h for h in ep.history_] == [True, False, True, False]
    assert ep.history_[-2]["heldout_total"] == pytest.approx(
        EP(max_iter=3, tol=0.0, **KW).fit(X).score_samples(X[:10]).sum(), rel=1e-12)
    assert [h["iteration"] for h in ep.history_] == [1, 2, 3, 4]
    assert ep.sites_nbytes_ == ep._sites.ptr.nbytes + 12 * ep._sites.nnz
    r = ep.transform(X)
    assert np.allclose(r.sum(axis=1), 1)


@pytest.mark.slow
def test_ep_passes_improve_on_adf_on_pitman_yor_data():
    """[NRM] Figure 2: EP epochs after the ADF pass improve the held-out predictive likelihood."""
    X, _, _ = make_py_mixture(2500, seed=3)
    train, test = X[:2000], X[2000:]
    for kw in (dict(a=100.0, sigma=0.0), dict(a=1.0, sigma=0.5, tau=1000.0)):
        ep = EP(eta=0.75, max_iter=4, tol=0.0, **kw).fit(train, heldout=test)
        scores = [h["heldout_total"] for h in ep.history_]
        assert scores[-1] > scores[0] + 50, scores


def test_save_load_and_pickle(tmp_path):
    import pickle
    from bnpcore.base import load
    X = small_corpus(seed=12, n_docs=40)
    ep = EP(max_iter=3, **KW).fit(X)
    ep.save(tmp_path / "ep.npz")
    for m in (load(tmp_path / "ep.npz"), pickle.loads(pickle.dumps(ep))):
        assert m.score(X[:5]) == ep.score(X[:5])
        np.testing.assert_array_equal(m.transform(X[:5]), ep.transform(X[:5]))


@pytest.mark.parametrize("cls", ["ADF", "EP", "CollapsedGibbs"])
def test_degenerate_corpora_give_finite_answers(cls):
    from bnpcore import mixture
    est = getattr(mixture, cls)
    kw = {"max_iter": 3, "n_samples": 2, "random_state": 0} if cls == "CollapsedGibbs" else {}
    empty = np.zeros((6, 4), dtype=int)
    m = est(a=1.0, sigma=0.5, tau=1.0, **kw).fit(empty)
    np.testing.assert_allclose(m.score_samples(empty), 0.0, atol=1e-12)    # log p(empty document) = 0
    with pytest.raises(ValueError, match="no tokens"):
        m.score(empty)
    huge = np.array([[10 ** 6, 0, 3], [0, 2 * 10 ** 5, 0], [10 ** 6, 1, 0]])
    for eta in (1e-8, 0.1, 1e3):
        m = est(a=1.0, sigma=0.5, tau=1.0, eta=eta, **kw).fit(huge)
        assert np.isfinite(m.score(huge)) and np.all(np.isfinite(m.transform(huge)))
        assert np.all(np.isfinite(m.topics_))
