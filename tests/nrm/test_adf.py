"""ADF-NRM ([NRM] Alg. 1; ALGORITHMS.md 6.3, 10.7)."""
import numpy as np
import pytest

from bnpcore.base import load
from bnpcore.corpus import Corpus
from bnpcore.mixture import ADF
from bnpcore.models.nrm import _Clusters, _Sites, _adf_pass

from nrm_reference import adf_ref, log_kappa_ref, make_bars, mode_ref


def small_corpus(seed=0, n_docs=40, n_words=25):
    """Documents from three overlapping word distributions, some empty."""
    rng = np.random.default_rng(seed)
    phi = rng.dirichlet(np.full(n_words, 0.3), size=3)
    z = rng.integers(0, 3, size=n_docs)
    X = np.array([rng.multinomial(rng.integers(0, 30), phi[k]) for k in z])
    X[5] = 0
    return X


def run_kernel(X, params, sites=False):
    """ADF state of the kernel (via the model layer's pass, in blocks of 7
    documents) without merges."""
    docs = Corpus(X)
    p = dict(params, n_words=docs.n_words, merge=False, merge_every=7)
    st = _Clusters(docs.n_words, params["eta"], cap=2)
    s = _Sites(docs.n_docs, 4) if sites else None
    _adf_pass(st, docs, p, sites=s)
    return st, s


BASE = {"eta": 0.3, "min_responsibility": 0.0, "expected_k": "exact", "u_posterior": "corrected"}


@pytest.mark.parametrize("sigma,tau,a,eps,expected_k,post", [
    (0.0, 1.0, 2.0, 0.5, "exact", "corrected"),
    (0.5, 1.0, 1.0, 0.5, "exact", "corrected"),
    (0.5, 10.0, 5.0, 0.6, "K", "corrected"),
    (0.3, 0.0, 2.0, 0.3, "exact", "corrected"),
    (0.5, 1.0, 1.0, 0.5, "exact", "paper"),
])
def test_kernel_matches_naive_adf(sigma, tau, a, eps, expected_k, post):
    X = small_corpus()
    params = dict(BASE, a=a, sigma=sigma, tau=tau, epsilon=eps, expected_k=expected_k, u_posterior=post)
    st, _ = run_kernel(X, params)
    lam, S, logP, _ = adf_ref(X, a, sigma, tau, 0.3, eps, exact_k=expected_k == "exact", printed=post == "paper")
    K = st.n_slots
    assert K == len(S) and K > 1
    np.testing.assert_allclose(st.lam[:K], lam, rtol=1e-9)
    np.testing.assert_allclose(st.S[:K], S, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(st.logP[:K], logP, rtol=1e-9, atol=1e-12)
    assert st.m == len(X)


def test_one_cluster_after_first_document_and_second_prior_weights():
    X = np.array([[3, 0, 1, 2], [0, 0, 0, 0]])       # the second document is empty: q = prior weights
    a, sigma, tau = 2.0, 0.5, 3.0
    params = dict(BASE, a=a, sigma=sigma, tau=tau, epsilon=0.99)
    st, _ = run_kernel(X[:1], params)
    assert st.n_slots == 1 and st.S[0] == 1.0
    np.testing.assert_array_equal(st.lam[0], 0.3 + X[0])
    st, sites = run_kernel(X, params, sites=True)
    u = mode_ref(1, 1 - 1e-15, a, sigma, tau)          # E[K] = 1 - P_1 with q_1 = 1 clamped
    w = np.array([1 - sigma, a * (u + tau) ** sigma])
    q = sites.q[sites.ptr[1]:sites.ptr[2]]
    # epsilon = 0.99: no birth, so the empty document's responsibility is renormalised onto cluster 1
    assert w[1] / w.sum() < 0.99 and np.allclose(q, [1.0])
    params["epsilon"] = 0.5                          # now the new cluster is born: all K + 1 weights
    assert w[1] / w.sum() > 0.5
    st, sites = run_kernel(X, params, sites=True)
    np.testing.assert_allclose(sites.q[sites.ptr[1]:sites.ptr[2]], w / w.sum(), rtol=1e-12)


def separated_corpus(sizes, n_words_each=6, length=60, seed=1):
    """Long documents on disjoint vocabularies: responsibilities are 0/1 up to rounding."""
    rng = np.random.default_rng(seed)
    W = n_words_each * len(sizes)
    rows = []
    for k, n in enumerate(sizes):
        for _ in range(n):
            x = np.zeros(W, dtype=int)
            x[k * n_words_each:(k + 1) * n_words_each] = rng.multinomial(length, np.full(n_words_each, 1 / n_words_each))
            rows.append(x)
    return np.array(rows)


@pytest.mark.parametrize("sigma,tau,a", [(0.0, 1.0, 3.0), (0.5, 2.0, 1.5), (0.25, 0.0, 4.0)])
def test_prior_weights_are_the_urn_with_hard_assignments(sigma, tau, a):
    """sigma = 0: (S_1, ..., S_K, a) (Lin 2013, the CRP); sigma > 0: the NGGP urn (5)
    (n_k - sigma, a (U + tau)^sigma) at U = Uhat, i.e. kappa ratios (supp (16))."""
    X = separated_corpus([3, 2, 4])
    X = np.vstack([X, np.zeros(X.shape[1], dtype=int)])      # an empty document reads the weights
    params = dict(BASE, a=a, sigma=sigma, tau=tau, epsilon=max(sigma, 0.5), expected_k="K",
                  min_responsibility=1e-10)
    st, sites = run_kernel(X, params, sites=True)
    n = len(X) - 1
    assert np.array_equal(np.diff(sites.ptr[:n + 1]), np.ones(n))     # one responsibility (= 1) each
    sizes = np.bincount(sites.k[:n])
    assert list(sizes) == [3, 2, 4] and np.all(sites.q[:n] == 1.0)
    lo, hi = sites.ptr[n], sites.ptr[n + 1]
    q = np.zeros(st.n_slots)
    q[sites.k[lo:hi]] = sites.q[lo:hi]
    if sigma == 0:
        w = np.append(sizes, a)
    else:
        u = mode_ref(n, 3, a, sigma, tau)
        w = np.append(np.exp(log_kappa_ref(sizes + 1, u, a, sigma, tau) - log_kappa_ref(sizes, u, a, sigma, tau))
                      * (u + tau), np.exp(log_kappa_ref(1, u, a, sigma, tau)) * (u + tau))
        np.testing.assert_allclose(w, np.append(sizes - sigma, a * (u + tau) ** sigma), rtol=1e-12)
    w = w / w.sum()
    if st.n_slots == 4:                      # the empty document opened a cluster: all K + 1 weights
        np.testing.assert_allclose(q, w, rtol=1e-12)
    else:
        np.testing.assert_allclose(q, w[:3] / w[:3].sum(), rtol=1e-12)


@pytest.mark.parametrize("sigma,eps", [(0.5, 0.5), (0.3, 0.7), (0.0, 0.2)])
def test_no_cluster_born_below_sigma_and_expected_k_recursion(sigma, eps):
    X = small_corpus(seed=4, n_docs=80)
    params = dict(BASE, a=5.0, sigma=sigma, tau=1.0, epsilon=eps, min_responsibility=1e-10)
    st, sites = run_kernel(X, params, sites=True)
    Q = sites.matrix(st.n_slots).toarray()
    born = {}
    for i in range(len(X)):
        for k in sites.k[sites.ptr[i]:sites.ptr[i + 1]]:
            born.setdefault(k, Q[i, k])
    assert len(born) == st.n_slots > 2
    assert min(born.values()) > eps >= sigma
    np.testing.assert_allclose(Q.sum(axis=0), st.S[:st.n_slots], rtol=1e-12)
    ek = st.n_slots - np.prod(1 - np.minimum(Q, 1 - 1e-15), axis=0).sum()
    assert st.expected_k(dict(params)) == pytest.approx(ek, abs=1e-12)


def test_epsilon_below_sigma_is_rejected():
    with pytest.raises(ValueError, match="epsilon"):
        ADF(sigma=0.5, epsilon=0.4).fit(small_corpus())
    for bad in (dict(sigma=1.0), dict(a=0.0), dict(tau=-1.0), dict(eta=0.0), dict(expected_k="approx"),
                dict(u_posterior="derived"), dict(merge_every=0), dict(merge_threshold=1.5)):
        with pytest.raises((ValueError, TypeError)):
            ADF(**bad).fit(small_corpus())


def test_partial_fit_in_chunks_equals_fit_and_resumes_after_save(tmp_path):
    X = small_corpus(seed=2, n_docs=90)
    docs = Corpus(X)
    full = ADF(a=2.0, sigma=0.5, tau=1.0, merge_every=25).fit(docs)
    part = ADF(a=2.0, sigma=0.5, tau=1.0, merge_every=25)
    part.partial_fit(docs[np.arange(0, 37)])
    part.save(tmp_path / "m.npz")
    part = load(tmp_path / "m.npz")
    part.partial_fit(docs[np.arange(37, 61)]).partial_fit(docs[np.arange(61, 90)])
    for name in ("components_", "cluster_mass_", "weights_"):
        np.testing.assert_array_equal(getattr(part, name), getattr(full, name))
    assert part.u_ == full.u_
    # one report per block of 25 documents, cut also where a partial_fit call ends
    assert [h["n_documents"] for h in full.history_] == [25, 50, 75, 90]
    assert [h["n_documents"] for h in part.history_] == [25, 37, 50, 61, 75, 90]
    assert [h["iteration"] for h in part.history_] == list(range(1, 7))
    assert sum(h["merged"] for h in part.history_) == sum(h["merged"] for h in full.history_)


def test_reporting_callback_stops_after_a_block():
    """Stopping after the second block leaves the model of the first 40 documents."""
    docs = Corpus(small_corpus(seed=2, n_docs=90))
    first = ADF(a=2.0, sigma=0.5, tau=1.0, merge_every=20).fit(docs[np.arange(40)])
    stopped = ADF(a=2.0, sigma=0.5, tau=1.0, merge_every=20)
    seen = []
    with stopped.reporting(lambda est, rec: seen.append(rec["n_documents"]) or len(seen) == 2):
        stopped.fit(docs)
    assert seen == [20, 40] and len(stopped.history_) == 2
    for name in ("components_", "cluster_mass_", "weights_", "topics_"):
        np.testing.assert_array_equal(getattr(stopped, name), getattr(first, name))
    assert stopped.score(docs) == first.score(docs)
    stopped.partial_fit(docs[np.arange(40, 90)])          # the stream continues where it stopped
    assert [h["n_documents"] for h in stopped.history_] == [20, 40, 60, 80, 90]


def test_shuffle_uses_random_state():
    docs = Corpus(small_corpus(seed=5, n_docs=60))
    a = ADF(shuffle=True, random_state=3).fit(docs)
    b = ADF(shuffle=True, random_state=3).fit(docs)
    c = ADF(shuffle=False).fit(docs)
    np.testing.assert_array_equal(a.components_, b.components_)
    assert a.components_.shape != c.components_.shape or not np.array_equal(a.components_, c.components_)


def test_merge_step_combines_duplicates():
    st = _Clusters(4, 0.5, cap=4)
    p = {"eta": 0.5, "merge_threshold": 0.95}
    st.lam[:3] = [[10.5, 0.5, 0.5, 0.5], [0.5, 8.5, 0.5, 0.5], [20.5, 0.5, 0.5, 1.5]]
    st.lam_tot[:3] = st.lam[:3].sum(axis=1)
    st.S[:3] = [2.0, 1.5, 4.0]
    st.logP[:3] = [-3.0, -2.0, -5.0]
    st.alive[:3] = 1
    st.scalars["n_slots"] = st.scalars["n_alive"] = 3
    mapping = st.merge(p)
    assert st.n_slots == 2 and list(mapping) == [0, 1, 0]
    np.testing.assert_allclose(st.lam[0], [30.5, 0.5, 0.5, 1.5])
    assert st.lam_tot[0] == pytest.approx(st.lam[0].sum())
    assert st.S[0] == 6.0 and st.logP[0] == -8.0 and st.S[1] == 1.5


def test_estimator_outputs():
    X = small_corpus(seed=7, n_docs=60)
    m = ADF(a=1.0, sigma=0.5, tau=1.0).fit(X)
    K = m.n_components_
    assert m.topics_.shape == (K, X.shape[1]) and np.allclose(m.topics_.sum(axis=1), 1)
    assert np.all(np.diff(m.cluster_mass_) <= 0)
    assert m.weights_.sum() + m.weight_new_ == pytest.approx(1.0)
    np.testing.assert_allclose(m.weights_, np.maximum(m.cluster_mass_ - 0.5, 0) / (
        np.maximum(m.cluster_mass_ - 0.5, 0).sum() + 1.0 * (m.u_ + 1.0) ** 0.5), rtol=1e-12)
    r = m.transform(X)
    assert r.shape == (60, K) and np.allclose(r.sum(axis=1), 1)
    s = m.score_samples(X)
    assert s.shape == (60,) and np.all(np.isfinite(s))
    assert m.get_topics().shape == (K, X.shape[1]) and len(m.show_topic(0, 3)) == 3
    with pytest.raises(ValueError):
        m.transform(np.ones((2, X.shape[1] + 1), dtype=int))


def test_bars_recovered():
    """[NRM] Figure 1: the IG prior (eta = 0.5) recovers the 16 bars as posterior means."""
    X, _, phi = make_bars(seed=0)
    m = ADF(a=1.0, sigma=0.5, tau=1.0, eta=0.5, merge_every=20).fit(X)
    big = m.topics_[m.cluster_mass_ >= 3]
    cos = (phi / np.linalg.norm(phi, axis=1)[:, None]) @ (big / np.linalg.norm(big, axis=1)[:, None]).T
    assert cos.max(axis=1).min() > 0.95             # every bar has a cluster
    assert len(big) == 16                           # and every large cluster is a bar
    assert np.all(cos.max(axis=0) > 0.95)


def test_merging_combines_the_clusters_short_documents_split():
    """Ten-token bars under a small eta start many clusters per bar; the merge
    step (cosine above merge_threshold) combines them: fewer clusters, the same
    total mass (one per document), and no bar left split between two large clusters."""
    X, _, phi = make_bars(seed=0, n_tokens=10, n_docs=400)
    fits = {merge: ADF(a=10.0, sigma=0.5, tau=1.0, eta=0.1, merge=merge, merge_every=20,
                       merge_threshold=0.8).fit(X) for merge in (False, True)}
    merged = sum(h["merged"] for h in fits[True].history_)
    assert sum(h["merged"] for h in fits[False].history_) == 0 and merged > 0
    assert fits[True].n_components_ < fits[False].n_components_
    unit = phi / np.linalg.norm(phi, axis=1)[:, None]
    per_bar = {}
    for merge, m in fits.items():
        assert m.cluster_mass_.sum() == pytest.approx(X.shape[0])
        big = m.topics_[m.cluster_mass_ >= 3]
        per_bar[merge] = ((unit @ (big / np.linalg.norm(big, axis=1)[:, None]).T) > 0.9).sum(axis=1).max()
    assert per_bar == {False: 2, True: 1}       # a bar split in two without merging, whole with it


def test_grid_search_scores_every_point_on_a_held_out_part_of_the_subset():
    from bnpcore.mixture import grid_search
    from nrm_reference import make_py_mixture
    X, _, _ = make_py_mixture(600, n_words=100, n_tokens=50, seed=1)
    docs = Corpus(X)
    best, results = grid_search(docs, sigma=0.5, a_grid=(1.0, 100.0), tau_grid=(1.0, 1000.0), eta=0.75,
                                subset_fraction=0.5, random_state=0)
    assert len(results) == 4 and best == {k: max(results, key=lambda r: r["score"])[k] for k in ("a", "tau")}
    split = results[0]["subset"]
    assert len(split["train"]) == 240 and len(split["test"]) == 60
    assert not set(split["train"]) & set(split["test"])
    r = results[3]
    m = ADF(a=r["a"], sigma=0.5, tau=r["tau"], eta=0.75).fit(docs[split["train"]])
    assert m.score_samples(docs[split["test"]]).sum() == r["score"]
    best_dp, results_dp = grid_search(docs, sigma=0.0, a_grid=(1.0, 10.0, 100.0), eta=0.75, random_state=0)
    assert set(best_dp) == {"a"} and len(results_dp) == 3


@pytest.mark.slow
def test_ig_overtakes_dp_as_the_stream_grows():
    """[NRM] Figure 2: on Pitman-Yor(0.75, 1) data the IG prior (a = 1, tau = 1000) and the DP
    (a = 100) predict alike early in the stream, the IG increasingly better later, with a
    cluster count closer to the truth."""
    from nrm_reference import make_py_mixture
    X, z, _ = make_py_mixture(5000, seed=0)
    docs = Corpus(X)
    test = docs[np.arange(4000, 5000)]
    gap, k = [], {}
    for kw in (dict(a=100.0, sigma=0.0), dict(a=1.0, sigma=0.5, tau=1000.0)):
        m = ADF(eta=0.75, **kw).partial_fit(docs[np.arange(0, 300)])
        early = m.score_samples(test).sum()
        m.partial_fit(docs[np.arange(300, 4000)])
        gap.append((early, m.score_samples(test).sum()))
        k[kw["sigma"]] = m.n_components_
    (dp_early, dp_late), (ig_early, ig_late) = gap
    assert ig_late - dp_late > 2 * abs(ig_early - dp_early) and ig_late - dp_late > 300
    truth = len(set(z[:4000]))
    assert abs(k[0.5] - truth) < abs(k[0.0] - truth)
