"""The numerical policy for extreme priors (docs/numerics.md): a prior outside
the range an algorithm computes in is refused with a ValueError naming it, the
range and the reason; at the ends of the range the results are finite and
normalised. The refused cases gave NaN or non-normalised results before."""
import numpy as np
import pytest

from bnpcore import hdp, lda, mixture, registry
from bnpcore.kernels import rng
from bnpcore.models.hdp_gibbs import check_gamma_prior


def assert_finite_normalised(model, X):
    theta = model.transform(X)
    assert np.all(np.isfinite(theta)) and theta.min() >= 0
    np.testing.assert_allclose(theta.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    topics = model.get_topics()
    assert np.all(np.isfinite(topics)) and topics.min() >= 0
    np.testing.assert_allclose(topics.sum(axis=1), 1.0, rtol=0, atol=1e-12)
    assert np.isfinite(model.score(X))


# the table (#18): NaN topics, rows summing to 5e-302, NaN scores
REFUSED = [
    (lambda: lda.CollapsedVB(eta=1e-200), "eta=1e-200 is outside \\[1e-100, 1e\\+100\\]"),
    (lambda: lda.CollapsedVB(order=0, alpha=1e300, eta=1e300), "alpha=1e\\+300 is outside"),
    (lambda: lda.StandardVB(alpha=1e-300, eta=1e-300), "alpha=1e-300 is outside"),
    (lambda: lda.Hybrid(alpha=1e-320), "alpha=.*e-32. is outside"),
    (lambda: lda.CollapsedGibbs(eta=np.full(24, 1e101)), "eta \\(an entry\\)=1e\\+101 is outside"),
    (lambda: hdp.CollapsedVB(alpha=1e-300), "alpha=1e-300 is outside \\[1e-100, 1e\\+100\\]: the updates divide"),
    (lambda: hdp.CollapsedVB(gamma=1e200), "gamma=1e\\+200 is outside"),
    (lambda: hdp.CollapsedVB(alpha_prior=(1e-300, 1e300)), "the mean of alpha_prior"),
    (lambda: hdp.DirectAssignmentGibbs(alpha=1e-320), "alpha=.*e-32. is outside \\[1e-300, 1e\\+300\\]"),
    (lambda: hdp.TruncationFreeSVI(alpha=1e-320), "alpha=.*e-32. is outside"),
    (lambda: hdp.OnlineVB(eta=1e-320), "eta=.*e-32. is outside"),
    (lambda: hdp.OnlineVB(alpha=1e-150), "alpha=1e-150 is outside \\[1e-100, 1e\\+100\\]: the document sticks"),
    (lambda: mixture.StochasticVB(eta=1e-320), "eta=.*e-32. is outside"),
    (lambda: mixture.ADF(tau=1e301), "tau=1e\\+301 is outside"),
]


@pytest.mark.parametrize("make, match", REFUSED)
def test_priors_outside_the_documented_range_are_refused(make, match, tiny_corpus):
    with pytest.raises(ValueError, match=match):
        make().fit(tiny_corpus)


@pytest.mark.parametrize("name", ["lda-cgs", "lda-svb", "lda-cvb", "lda-cvb0", "lda-svb-cgs", "lda-cvb-cgs"])
@pytest.mark.parametrize("prior", [1e-100, 1e-20, 1e100])
def test_lda_at_the_ends_of_the_range(name, prior, tiny_corpus):
    """Counts that rounding leaves at -1e-16 gave negative proportions (CVB, CVB0,
    CVB/CGS) and psi on its pole, NaN topics (SVB/CGS), once alpha was below them."""
    model = registry.get(name).make(test=True, alpha=prior, eta=prior, random_state=0).fit(tiny_corpus)
    assert_finite_normalised(model, tiny_corpus)


@pytest.mark.parametrize("params", [{"alpha": 1e-100, "gamma": 1e100}, {"alpha": 1e-100, "eta_tot": 1e-100},
                                    {"alpha": 1e100, "gamma": 1e-100}])
def test_cvhdp_at_the_ends_of_the_range(params, tiny_corpus):
    """alpha E[beta_k] ~ 1e-200: transform's correction was 0 / 0 (rows summing to 5e-200)."""
    model = hdp.CollapsedVB(n_components=5, max_iter=5, random_state=0, **params).fit(tiny_corpus)
    assert_finite_normalised(model, tiny_corpus)


def test_gamma_hyperprior_mean_in_range():
    assert check_gamma_prior((1e-300, 1e-300), "alpha_prior") == (1e-300, 1e-300)
    with pytest.raises(ValueError, match="the mean of gamma_prior .* got inf"):
        check_gamma_prior((1e300, 1e-300), "gamma_prior")


def test_rng_shapes_below_the_range_are_refused():
    for call in (lambda: rng.dirichlet([1e-320, 1.0], 3, random_state=0),
                 lambda: rng.beta(1e-320, 1.0, 3, random_state=0),
                 lambda: rng.gamma(1e-320, 3, random_state=0, log=True)):
        with pytest.raises(ValueError, match="outside \\[1e-300, 1e\\+300\\]: a draw below shape 1"):
            call()


def test_rng_draws_finite_at_the_end_of_the_range():
    """The docstrings promise finite logs for tiny shapes: at 1e-300 log(U) / shape ~ -1e301."""
    logs = rng.dirichlet([1e-300, 1e-300, 1.0], 50, random_state=0, log=True)
    assert np.all(np.isfinite(logs))
    np.testing.assert_allclose(np.logaddexp.reduce(logs, axis=1), 0.0, atol=1e-12)
    probs = rng.dirichlet([1e-300, 1e-300, 1.0], 50, random_state=0)
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-12)
    assert np.all(np.isfinite(rng.beta(1e-300, 1e-300, 50, random_state=0, log=True)))
