"""bnpcore.plot draws what the estimator holds (matplotlib, Agg backend)."""
import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from bnpcore import plot  # noqa: E402


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_plot_history_draws_each_metric(tiny_corpus, toy_models):
    est = toy_models["toy-kmeans"].make(test=True, random_state=0).fit(tiny_corpus)
    axes = plot.plot_history(est)
    assert [a.get_ylabel() for a in axes] == ["n_documents", "fit_seconds", "n_components", "loglik"]
    x, y = axes[3].lines[0].get_data()
    assert list(x) == [r["iteration"] for r in est.history_]
    assert list(y) == [r["loglik"] for r in est.history_]
    _, ax = plt.subplots()
    assert plot.plot_history(est, ["n_components"], ax=ax) == [ax]
    with pytest.raises(ValueError, match="available"):
        plot.plot_history(est, ["nope"])
    with pytest.raises(ValueError, match="no history_"):
        plot.plot_history(toy_models["toy-kmeans"].make())


def test_plot_history_with_records_that_differ(tiny_corpus, toy_models):
    """Held-out scores at some iterations only, a bound as named terms: each metric at
    the iterations that have it, the bound as its total."""
    est = toy_models["toy-kmeans"].make(test=True, random_state=0).fit(tiny_corpus)
    est.history_ = [{"iteration": 1, "bound": {"a": 1.0, "b": 2.0}, "heldout_loglik": -7.0},
                    {"iteration": 2, "bound": {"a": 1.5, "b": 2.0}, "note": "text"},
                    {"iteration": 3, "bound": {"a": 2.0, "b": 2.5}, "heldout_loglik": -6.5, "flag": True}]
    axes = plot.plot_history(est)
    assert [a.get_ylabel() for a in axes] == ["bound", "heldout_loglik"]
    assert [list(v) for v in axes[0].lines[0].get_data()] == [[1, 2, 3], [3.0, 3.5, 4.5]]
    assert [list(v) for v in axes[1].lines[0].get_data()] == [[1, 3], [-7.0, -6.5]]


def test_plot_topic_images():
    topics = np.eye(6)                                # 6 one-pixel topics on a 2 x 3 grid
    axes = plot.plot_topic_images(topics, (2, 3), n_cols=4)
    assert len(axes) == 8
    np.testing.assert_array_equal(axes[4].images[0].get_array(), topics[4].reshape(2, 3))
    assert not axes[7].images
    with pytest.raises(ValueError, match="cannot be drawn"):
        plot.plot_topic_images(topics, (4, 4))
