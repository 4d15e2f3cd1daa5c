"""The worked example of docs/architecture.md (examples/unigram_mixture.py):
besides the contract suite it runs in, its EM iterations must never decrease
the MAP objective, and pruning must keep the statistics consistent."""
import numpy as np

from .conftest import _load_example, make_tiny_corpus


def test_em_objective_never_decreases_and_pruning_removes_components():
    UnigramMixture = _load_example("unigram_mixture").UnigramMixture
    corpus = make_tiny_corpus(seed=2, n_docs=60)
    est = UnigramMixture(n_components=12, max_iter=40, tol=1e-12, random_state=0).fit(corpus)
    totals = np.array([sum(rec["bound"].values()) for rec in est.history_])
    assert np.all(np.diff(totals) >= -1e-9 * np.abs(totals[1:])), np.diff(totals).min()
    sizes = [rec["n_components"] for rec in est.history_]
    assert sizes == sorted(sizes, reverse=True) and sizes[-1] < 12      # components were pruned
    np.testing.assert_allclose(est.weights_.sum(), 1.0, rtol=1e-12)
    np.testing.assert_allclose(est.topics_.sum(axis=1), 1.0, rtol=1e-12)
