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


def test_compare_estimators_scores_each_model_under_one_budget(capsys):
    """Two LDA fits of 150 iterations each, well within the time budget (so the check
    does not depend on the machine's speed), scored by the example's protocol."""
    main = _load_example("compare_estimators").main
    rows = main(["--data", "bars", "--models", "lda-cvb0", "lda-cgs", "--seconds", "120", "--iterations", "150"])
    assert [r[0] for r in rows] == ["lda-cvb0", "lda-cgs"]
    uniform = -np.log(100)          # the bars have 100 words
    for name, used, heldout, umass, seconds in rows:
        assert used == 10 and np.isfinite(umass) and seconds < 30
        assert heldout > uniform + 0.05, (name, heldout)       # the topics predict better than no model
    out = capsys.readouterr().out
    assert "held-out" in out and "lda-cvb0" in out
