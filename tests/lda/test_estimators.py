"""The LDA estimators' public behaviour: fit / transform / score, held-out
recording, priors, persistence and input errors."""
import math

import numpy as np
import pytest
from scipy.optimize import minimize_scalar
from scipy.special import gammaln, psi

from bnpcore.base import NotFittedError, load
from bnpcore.corpus import Corpus
from bnpcore.evaluation import token_log_likelihood
from bnpcore.kernels import _lda
from bnpcore.lda import CollapsedGibbs, CollapsedVB, Hybrid, StandardVB
from bnpcore.models.lda import minka_update

ESTIMATORS = {
    "cgs": lambda **kw: CollapsedGibbs(max_iter=8, burn_in=3, **kw),
    "svb": lambda **kw: StandardVB(max_iter=8, n_threads=1, **kw),
    "svb-seq": lambda **kw: StandardVB(max_iter=8, schedule="sequential", **kw),
    "cvb": lambda **kw: CollapsedVB(max_iter=8, **kw),
    "cvb0": lambda **kw: CollapsedVB(order=0, max_iter=8, **kw),
    "svb/cgs": lambda **kw: Hybrid(max_iter=8, burn_in=3, **kw),
    "cvb/cgs": lambda **kw: Hybrid(variational="collapsed", max_iter=8, burn_in=3, **kw),
}


@pytest.fixture(params=sorted(ESTIMATORS))
def make(request):
    return ESTIMATORS[request.param]


@pytest.fixture
def text(make_counts):
    C = make_counts(12, n_docs=30, n_words=20, max_count=5)
    C[4] = 0                                            # an empty document
    return Corpus(C, vocabulary=[f"w{i}" for i in range(20)])


def test_fit_transform_score(make, text):
    est = make(n_components=4, random_state=0).fit(text)
    assert est.topics_.shape == est.components_.shape == (4, text.n_words)
    np.testing.assert_allclose(est.topics_.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(est.doc_topic_.sum(axis=1), 1.0, rtol=1e-12)
    sizes = est.components_.sum(axis=1)
    assert np.all(np.diff(sizes) <= 0), "topics not ordered by size"
    np.testing.assert_allclose(sizes.sum() - 4 * est.eta_.sum(), text.n_tokens, rtol=1e-10)
    theta = est.transform(text)
    assert theta.shape == (text.n_docs, 4) and np.all(theta > 0)
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=1e-12)
    np.testing.assert_allclose(theta[4], est.alpha_ / est.alpha_.sum())   # empty document: prior mean
    np.testing.assert_array_equal(theta, est.transform(text))             # seeded by random_state
    assert np.isfinite(est.score(text)) and est.score(text) < 0
    assert est.n_components_ == 4 and est.n_features_in_ == text.n_words and est.vocabulary_ == text.vocabulary
    assert est.n_iter_ == len(est.history_) and est.history_[0]["iteration"] == 1


def test_transform_recovers_planted_topics(make):
    """Two disjoint vocabularies: documents of one topic get proportions near 1
    for the topic that owns their words."""
    rng = np.random.default_rng(0)
    C = np.zeros((40, 10), dtype=int)
    C[:20, :5] = rng.integers(1, 4, (20, 5))
    C[20:, 5:] = rng.integers(1, 4, (20, 5))
    est = make(n_components=2, alpha=0.1, eta=0.1, random_state=1).fit(C)
    theta = est.transform(C[[0, 30]])
    assert theta[0].max() > 0.9 and theta[1].max() > 0.9 and theta[0].argmax() != theta[1].argmax()


@pytest.mark.parametrize("make", [ESTIMATORS["svb"], ESTIMATORS["cvb0"], ESTIMATORS["cvb"]],
                         ids=["svb", "cvb0", "cvb"])
def test_transform_is_a_fixed_point_of_the_document_equations(make, text):
    """Run to convergence, ``transform`` solves the algorithm's per-document
    equations with the topics fixed, whatever schedule reaches them (standard VB
    sweeps all pairs from the previous sweep's counts; CVB0 and CVB pair by pair):
    N_jk = sum_w c_jw r_jwk with r_jw proportional to exp(vb_log_word[w]) times
    exp(psi(N_jk + alpha_k)) (standard VB), N_jk - r_jwk + alpha_k (CVB0, per
    token of the pair), or that times exp(-V^-_jk / (2 (N^-_jk + alpha_k)^2)),
    V^-_jk = sum_w c_jw r_jwk (1 - r_jwk) - r_jwk (1 - r_jwk) (CVB), and
    theta = (N_j + alpha) / (N_j + sum(alpha))."""
    est = make(n_components=3, alpha=0.3, eta=0.2, random_state=0).fit(text)
    mode, _, vb_log_word = est._fold_in_setup()
    ew = np.exp(vb_log_word - vb_log_word.max(axis=1, keepdims=True))
    theta = est.transform(text, max_iter=20000, tol=0.0)
    alpha = est.alpha_
    for j in range(text.n_docs):
        lo, hi = text.indptr[j], text.indptr[j + 1]
        words, c = text.indices[lo:hi], text.counts[lo:hi, None].astype(float)
        N = theta[j] * (c.sum() + alpha.sum()) - alpha
        if mode == _lda.MODE_SVB:
            r = ew[words] * np.exp(psi(N + alpha))
            r /= r.sum(axis=1, keepdims=True)
        else:       # each pair's row solves r = ew (N - r + alpha) [exp(...)] / norm, iterated to its fixed point
            r = np.full((hi - lo, 3), 1 / 3)
            for _ in range(200):
                e = N - r + alpha
                r_new = ew[words] * e
                if mode == _lda.MODE_CVB:
                    V = (c * r * (1 - r)).sum(axis=0)
                    r_new *= np.exp(-(V - r * (1 - r)) / (2 * e * e))
                r = r_new / r_new.sum(axis=1, keepdims=True)
        np.testing.assert_allclose((c * r).sum(axis=0), N, rtol=1e-9, atol=1e-9, err_msg=f"document {j}")


@pytest.mark.parametrize("mode", ["cvb0", "cvb"])
def test_fold_in_of_a_one_token_document_with_tiny_priors(mode):
    """One token: N^-_jk = 0 and V^-_jk = 0 (CVB: no correction), so its row
    is proportional to phi_kw alpha_k; with alpha ~1e-300 those products
    underflow and the row is normalised in log space."""
    alpha = np.array([1e-300, 3e-300, 2e-300])
    log_word = np.log(np.array([[0.2, 0.5, 0.3], [0.6, 0.1, 0.3]]))       # (W, K)
    doc = Corpus(np.array([[0, 1]]))
    theta = np.empty((1, 3))
    _lda.fold_in(doc.indptr, doc.indices, doc.counts, alpha, getattr(_lda, f"MODE_{mode.upper()}"), 0, log_word,
                 np.exp(log_word), 50, 0, 0.0, 1, np.zeros(1, dtype=np.uint64), theta)
    want = np.exp(log_word[1]) * alpha
    np.testing.assert_allclose(theta[0], want / want.sum(), rtol=1e-12)


def test_one_topic_is_the_smoothed_unigram(make, text):
    est = make(n_components=1, alpha=0.5, eta=0.3, random_state=0).fit(text)
    n_w = np.asarray(text.matrix.sum(axis=0)).ravel()
    np.testing.assert_allclose(est.topics_[0], (n_w + 0.3) / (text.n_tokens + 0.3 * text.n_words), rtol=1e-12)
    np.testing.assert_allclose(est.doc_topic_, 1.0)


def test_heldout_history_and_sample_average(text):
    observed, heldout = text.split_tokens(0.2, random_state=0, mode="corpus_tokens")
    est = CollapsedGibbs(n_components=3, max_iter=6, burn_in=2, random_state=0).fit(observed, heldout=heldout)
    for rec in est.history_:
        assert rec["perplexity"] == pytest.approx(math.exp(-rec["heldout_loglik"]))
    vb = StandardVB(n_components=3, max_iter=6, n_threads=1, random_state=0).fit(observed, heldout=heldout)
    assert vb.history_[-1]["heldout_loglik"] == pytest.approx(
        token_log_likelihood(vb.doc_topic_, vb.topics_, heldout), rel=1e-12)


def test_reporting_callback_can_stop_fit(text):
    est = CollapsedVB(n_components=3, max_iter=50, tol=None, random_state=0)
    with est.reporting(lambda e, rec: rec["iteration"] == 4):
        est.fit(text)
    assert est.n_iter_ == 4 and len(est.history_) == 4


def test_same_seed_same_fit_and_save_load(make, text, tmp_path):
    a = make(n_components=3, random_state=5).fit(text)
    b = make(n_components=3, random_state=5).fit(text)
    np.testing.assert_array_equal(a.components_, b.components_)
    drop = [{k: v for k, v in rec.items() if not k.endswith("seconds")} for rec in a.history_]
    assert drop == [{k: v for k, v in rec.items() if not k.endswith("seconds")} for rec in b.history_]
    path = tmp_path / "m.npz"
    a.save(path)
    c = load(path)
    np.testing.assert_array_equal(c.transform(text), a.transform(text))
    assert c.score(text) == a.score(text)


def test_asymmetric_priors_and_hyperparameter_optimisation(make, text):
    alpha = np.array([0.05, 0.2, 1.0])
    eta = np.linspace(0.01, 0.1, text.n_words)
    est = make(n_components=3, alpha=alpha, eta=eta, optimize_hyperparameters=True, random_state=0).fit(text)
    assert est.alpha_.shape == (3,) and np.all(est.alpha_ > 0) and np.all(np.isfinite(est.alpha_))
    assert not np.allclose(np.sort(est.alpha_), alpha)
    sym = make(n_components=3, alpha=0.3, eta=0.05, optimize_hyperparameters=True, random_state=0).fit(text)
    assert np.ptp(sym.alpha_) == 0 and np.ptp(sym.eta_) == 0 and sym.alpha_[0] != 0.3


def test_minka_fixed_point_maximises_the_polya_likelihood():
    rng = np.random.default_rng(0)
    true = np.array([0.3, 1.5, 0.7])
    counts = np.array([rng.multinomial(rng.integers(5, 40), rng.dirichlet(true)) for _ in range(300)])
    totals = counts.sum(axis=1)
    a = minka_update(np.ones(3), counts, totals, symmetric=False, n_iter=2000, rtol=1e-13)
    grad = (psi(counts + a) - psi(a)).sum(0) - (psi(totals + a.sum()) - psi(a.sum())).sum()
    np.testing.assert_allclose(grad, 0.0, atol=1e-8 * len(counts))

    def neg_loglik(s):
        return -((gammaln(counts + s) - gammaln(s)).sum() - (gammaln(totals + 3 * s) - gammaln(3 * s)).sum())

    best = minimize_scalar(neg_loglik, bounds=(1e-3, 50), method="bounded", options={"xatol": 1e-12}).x
    s = minka_update(np.ones(3), counts, totals, symmetric=True, n_iter=2000, rtol=1e-13)
    np.testing.assert_allclose(s, best, rtol=1e-6)


@pytest.mark.parametrize("params, match", [
    (dict(n_components=0), "n_components"),
    (dict(n_components=2.5), "n_components"),
    (dict(alpha=-1.0), "alpha"),
    (dict(alpha=float("nan")), "alpha"),
    (dict(alpha=[0.1, 0.2]), "alpha"),
    (dict(eta=[0.1, 0.2]), "eta"),
    (dict(eta=np.full(20, -0.1)), "eta"),
    (dict(optimize_hyperparameters="yes"), "optimize_hyperparameters"),
])
def test_bad_common_parameters(make, text, params, match):
    est = make(random_state=0).set_params(**params)
    with pytest.raises((ValueError, TypeError), match=match):
        est.fit(text)


@pytest.mark.parametrize("est, match", [
    (CollapsedGibbs(max_iter=0), "max_iter"),
    (CollapsedGibbs(burn_in=-1), "burn_in"),
    (StandardVB(schedule="random"), "schedule"),
    (StandardVB(tol=-1.0), "tol"),
    (StandardVB(n_threads=0), "n_threads"),
    (StandardVB(max_iter=0), "max_iter"),
    (CollapsedVB(order=1), "order"),
    (Hybrid(variational="exact"), "variational"),
    (Hybrid(threshold=-1), "threshold"),
    (Hybrid(n_samples=0), "n_samples"),
])
def test_bad_algorithm_parameters(text, est, match):
    with pytest.raises((ValueError, TypeError), match=match):
        est.fit(text)


def test_bad_data(text):
    est = CollapsedGibbs(max_iter=2, burn_in=1)
    with pytest.raises(ValueError, match="no tokens"):
        est.fit(np.zeros((3, 4), dtype=int))
    with pytest.raises(ValueError):
        est.fit(np.array([[1, -2], [0, 1]]))
    with pytest.raises(ValueError, match="heldout"):
        est.fit(text, heldout=text[:5])
    with pytest.raises(NotFittedError):
        est.transform(text)
    est.fit(text)
    with pytest.raises(ValueError):
        est.transform(Corpus(text.matrix, n_words=text.n_words + 1))
    with pytest.raises(ValueError, match="max_iter"):
        est.transform(text, max_iter=0)
