"""Results of the nonparametric estimators (bnpcore.results.ResultsMixin):
component sizes against independent recomputations, summaries, to_lda (also
its held-out score on KOS against the HDP's), document_topics, the pyLDAvis
export, and ``bnpcore --version``."""
import importlib.util

import numpy as np
import pytest

import bnpcore
from bnpcore import cli, hdp, mixture, registry
from bnpcore.base import NotFittedError
from bnpcore.corpus import Corpus
from bnpcore.evaluation import coherence
from bnpcore.lda import StandardVB
from bnpcore.results import ResultsMixin

NONPARAMETRIC = sorted(name for name in registry.names()
                       if registry.get(name).path.startswith(("bnpcore.hdp:", "bnpcore.mixture:")))

_FITTED = {}


def fitted(name, corpus):
    """The registry's model ``name`` fitted on the tiny corpus (cached: the tests only read it)."""
    if name not in _FITTED:
        _FITTED[name] = registry.get(name).make(test=True, random_state=0).fit(corpus)
    return _FITTED[name]


@pytest.fixture(params=NONPARAMETRIC)
def model(request, tiny_corpus):
    return fitted(request.param, tiny_corpus)


def test_every_nonparametric_estimator_has_the_results():
    classes = {registry.get(name).load_class() for name in NONPARAMETRIC}
    exported = {getattr(hdp, n) for n in hdp.__all__} | {mixture.TruncationFreeSVI, mixture.StochasticVB,
                                                         mixture.ADF, mixture.EP, mixture.CollapsedGibbs}
    assert exported <= classes
    assert all(issubclass(cls, ResultsMixin) for cls in classes)


def test_sizes_are_nonnegative_per_component(model):
    sizes = model.topic_sizes_
    assert sizes.shape == (model.n_components_,)
    assert np.all(np.isfinite(sizes)) and np.all(sizes >= -1e-9)


def test_sizes_of_the_collapsed_hdps_match_their_document_proportions(tiny_corpus):
    """E[n_k] = sum_j (theta_jk (alpha + N_j) - alpha beta_k) from doc_topic_ (eq 16 of
    Teh, Kurihara & Welling 2007, the same form for the sampler's final sample)."""
    lengths = tiny_corpus.doc_lengths[:, None]
    for name in ("hdp-gibbs", "hdp-cvb"):
        est = fitted(name, tiny_corpus)
        counts = est.doc_topic_ * (est.alpha_ + lengths) - est.alpha_ * est.weights_
        np.testing.assert_allclose(est.topic_sizes_, counts.sum(axis=0), atol=1e-8)
        assert est.topic_sizes_.sum() == pytest.approx(tiny_corpus.n_tokens)


def test_sizes_of_the_gibbs_mixture_are_its_cluster_sizes(tiny_corpus):
    est = fitted("gibbs-nrm", tiny_corpus)
    np.testing.assert_array_equal(est.topic_sizes_, np.bincount(est.labels_, minlength=est.n_components_))


def test_sizes_of_the_variational_hdps_are_their_word_statistics(tiny_corpus):
    """sum_w (lambda_kw - eta): batch DA-VB without moves counts every token once."""
    est = hdp.DirectAssignmentVB(n_components=3, mode="batch", split_merge=False, max_iter=3, random_state=0)
    est.fit(tiny_corpus)
    assert est.topic_sizes_.sum() == pytest.approx(tiny_corpus.n_tokens)
    for name in ("hdp-tf-svi", "hdp-online-vb"):
        est = fitted(name, tiny_corpus)
        np.testing.assert_allclose(est.topic_sizes_, est.components_.sum(axis=1) - est.n_features_in_ * est.eta)


def test_sizes_survive_save_and_load(tiny_corpus, tmp_path):
    for name in ("hdp-gibbs", "hdp-tf-svi", "dp-tf-svi", "adf-nrm"):
        est = fitted(name, tiny_corpus)
        path = est.save(tmp_path / f"{name}.npz")
        np.testing.assert_array_equal(bnpcore.load(path).topic_sizes_, est.topic_sizes_)


def test_summary_lists_the_used_components_largest_first(model, tiny_corpus):
    rows = model.summary(n=None, n_words=5)
    sizes = model.topic_sizes_
    assert [r["component"] for r in rows] == list(model.used_components())
    assert [r["rank"] for r in rows] == list(range(len(rows)))
    assert all(a["size"] >= b["size"] >= 1.0 for a, b in zip(rows, rows[1:]))
    assert {r["component"] for r in rows} == set(np.flatnonzero(sizes >= 1.0))
    for r in rows:
        assert r["size"] == sizes[r["component"]]
        assert r["share"] == pytest.approx(sizes[r["component"]] / sizes.sum())
        assert r["top_words"] == [w for w, _ in model.show_topic(r["component"], 5)]
        assert "coherence" not in r
    assert len(model.summary(n=1)) == 1
    text = str(rows)
    assert len(text.splitlines()) == len(rows) + 1 and " ".join(rows[0]["top_words"]) in text


def test_summary_coherence_is_the_per_topic_coherence(tiny_corpus):
    est = fitted("hdp-gibbs", tiny_corpus)
    rows = est.summary(n=3, corpus=tiny_corpus)
    expected = coherence([r["top_words"] for r in rows], tiny_corpus, measure="u_mass", per_topic=True)
    np.testing.assert_allclose([r["coherence"] for r in rows], expected)
    rows = est.summary(n=3, corpus=tiny_corpus, measure="c_npmi")
    expected = coherence([r["top_words"] for r in rows], tiny_corpus, measure="c_npmi", per_topic=True)
    np.testing.assert_allclose([r["coherence"] for r in rows], expected)
    assert "coher." in str(rows)


def test_summary_coherence_is_nan_for_a_topic_with_an_absent_word(tiny_corpus):
    est = fitted("hdp-gibbs", tiny_corpus)
    first = est.summary(n=1)[0]["top_words"]
    # a reference corpus of token lists without the first topic's top word
    reference = [[w for w in row["top_words"] if w != first[0]] for row in est.summary(n=None)]
    rows = est.summary(n=None, corpus=reference, measure="c_v")
    assert np.isnan(rows[0]["coherence"])
    assert any(np.isfinite(r["coherence"]) for r in rows[1:])
    # the same with a Corpus whose column of that word is empty
    matrix = tiny_corpus.matrix.tolil()
    matrix[:, tiny_corpus.vocabulary.index(first[0])] = 0
    reference = Corpus(matrix.tocsr(), vocabulary=tiny_corpus.vocabulary)
    rows = est.summary(n=None, corpus=reference)
    assert np.isnan(rows[0]["coherence"])
    assert all(np.isfinite(r["coherence"]) for r in rows if first[0] not in r["top_words"])


def test_summary_and_used_components_reject_bad_input(tiny_corpus):
    est = fitted("hdp-gibbs", tiny_corpus)
    for bad in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="n must be"):
            est.summary(n=bad)
    with pytest.raises(ValueError, match="n_words"):
        est.summary(n_words=0)
    with pytest.raises(ValueError, match="min_size"):
        est.used_components(min_size=-1)
    with pytest.raises(ValueError, match="no component of size"):
        est.to_lda(min_size=1e9)
    with pytest.raises(NotFittedError):
        hdp.DirectAssignmentGibbs().topic_sizes_


def test_document_topics_restricts_transform_to_the_used_components(model, tiny_corpus):
    used = model.used_components()
    theta = model.document_topics(tiny_corpus)
    assert theta.shape == (tiny_corpus.n_docs, len(used))
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)
    full = model.transform(tiny_corpus)[:, used]
    keep = full.sum(axis=1) > 0
    np.testing.assert_allclose(theta[keep], full[keep] / full[keep].sum(axis=1, keepdims=True))


def test_document_topics_without_mass_on_the_used_components_get_their_weights(tiny_corpus, monkeypatch):
    est = fitted("gibbs-nrm", tiny_corpus)
    used = est.used_components(min_size=3)
    unused = np.setdiff1d(np.arange(est.n_components_), used)
    theta = est.transform(tiny_corpus)
    theta[:5] = 0.0
    theta[:5, unused[0]] = 1.0        # all the mass of these documents on a component below min_size
    monkeypatch.setattr(est, "transform", lambda X: theta.copy())
    out = est.document_topics(tiny_corpus, min_size=3)
    np.testing.assert_allclose(out[:5], np.tile(est.weights_[used] / est.weights_[used].sum(), (5, 1)))
    np.testing.assert_allclose(out[5:], theta[5:, used] / theta[5:, used].sum(axis=1, keepdims=True))


def test_export_pyldavis_gives_normalised_distributions(model, tiny_corpus):
    data = model.export_pyldavis(tiny_corpus)
    n_used = len(model.used_components())
    assert data["topic_term_dists"].shape == (n_used, tiny_corpus.n_words)
    assert data["doc_topic_dists"].shape == (tiny_corpus.n_docs, n_used)
    np.testing.assert_allclose(data["topic_term_dists"].sum(axis=1), 1.0)
    np.testing.assert_allclose(data["doc_topic_dists"].sum(axis=1), 1.0)
    np.testing.assert_array_equal(data["doc_lengths"], tiny_corpus.doc_lengths)
    np.testing.assert_array_equal(data["term_frequency"], np.asarray(tiny_corpus.matrix.sum(axis=0)).ravel())
    assert data["vocab"] == list(tiny_corpus.vocabulary)


@pytest.mark.parametrize("name", ["hdp-cvb", "hdp-gibbs"])
def test_export_pyldavis_of_the_training_corpus_uses_the_fitted_proportions(name, tiny_corpus):
    """On the corpus it was fitted on, the fitted doc_topic_ (used columns,
    renormalised) instead of a fold-in; on other documents, document_topics."""
    est = fitted(name, tiny_corpus)
    used = est.used_components()
    theta = est.doc_topic_[:, used]
    np.testing.assert_allclose(est.export_pyldavis(tiny_corpus)["doc_topic_dists"],
                               theta / theta.sum(axis=1, keepdims=True), rtol=1e-12)
    other = tiny_corpus[:15]
    np.testing.assert_array_equal(est.export_pyldavis(other)["doc_topic_dists"], est.document_topics(other))
    assert not np.allclose(est.document_topics(tiny_corpus), est.export_pyldavis(tiny_corpus)["doc_topic_dists"])


@pytest.mark.parametrize("name", ["hdp-tf-svi", "hdp-online-vb", "hdp-da-sm"])
def test_export_pyldavis_of_an_online_fit_folds_in_its_training_corpus(name, tiny_corpus):
    """The online estimators keep no proportions of their training stream: on
    the training corpus too the export is their transform on the used
    components, document_topics, for the HDP SVIs with the tolerance 1e-3."""
    est = fitted(name, tiny_corpus)
    assert getattr(est, "doc_topic_", None) is None
    data = est.export_pyldavis(tiny_corpus)
    if name == "hdp-da-sm":
        np.testing.assert_array_equal(data["doc_topic_dists"], est.document_topics(tiny_corpus))
    else:
        theta = est.transform(tiny_corpus, tol=1e-3)[:, est.used_components()]
        np.testing.assert_array_equal(data["doc_topic_dists"], theta / theta.sum(axis=1, keepdims=True))
        assert not np.allclose(data["doc_topic_dists"], est.document_topics(tiny_corpus), rtol=0, atol=1e-12)


def test_export_pyldavis_is_accepted_by_pyldavis(tiny_corpus):
    pyLDAvis = pytest.importorskip("pyLDAvis")
    est = fitted("hdp-gibbs", tiny_corpus)
    data = est.export_pyldavis(tiny_corpus)
    vis = pyLDAvis.prepare(**data, sort_topics=False, n_jobs=1)
    assert len(vis.topic_coordinates) == len(est.used_components())
    assert set(vis.topic_info["Term"]) <= set(tiny_corpus.vocabulary)


def test_to_lda_holds_the_used_topics_and_their_prior(model, tiny_corpus):
    used = model.used_components()
    lda = model.to_lda()
    assert isinstance(lda, StandardVB) and lda.n_components_ == len(used)
    np.testing.assert_allclose(lda.topics_, np.asarray(model.topics_)[used])
    np.testing.assert_allclose(lda.topics_.sum(axis=1), 1.0)
    weights = np.asarray(model.weights_)[used]
    if model._size_unit == "tokens":
        np.testing.assert_allclose(lda.alpha_, model._document_concentration() * weights)
    else:
        np.testing.assert_allclose(lda.alpha_, weights / weights.sum())
    np.testing.assert_allclose(model.to_lda(concentration=2.0).alpha_.sum(),
                               2.0 * (weights.sum() if model._size_unit == "tokens" else 1.0))
    theta = lda.transform(tiny_corpus)
    assert theta.shape == (tiny_corpus.n_docs, len(used))
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)
    assert np.isfinite(lda.score(tiny_corpus))
    assert lda.show_topic(0, 3)[0][0] == model.show_topic(int(used[0]), 3)[0][0]


def test_to_lda_of_the_sampler_holds_its_counts_plus_the_prior(tiny_corpus):
    """lambda_kw = n_kw + eta_tot / W, n_kw counted from the final sample's assignments."""
    est = fitted("hdp-gibbs", tiny_corpus)
    words, _ = tiny_corpus.tokens()
    counts = np.zeros((est.n_components_, tiny_corpus.n_words))
    np.add.at(counts, (est._z, words), 1.0)
    lda = est.to_lda(min_size=0)
    used = est.used_components(min_size=0)
    np.testing.assert_allclose(lda.components_, counts[used] + est.eta_tot / tiny_corpus.n_words)
    np.testing.assert_allclose(lda.eta_, est.eta_tot / tiny_corpus.n_words)


def test_to_lda_saves_and_loads(tiny_corpus, tmp_path):
    lda = fitted("hdp-tf-svi", tiny_corpus).to_lda()
    again = bnpcore.load(lda.save(tmp_path / "lda.npz"))
    np.testing.assert_array_equal(again.transform(tiny_corpus), lda.transform(tiny_corpus))
    assert again.score(tiny_corpus) == lda.score(tiny_corpus)


KOS_CHECKS = [
    pytest.param(lambda: hdp.DirectAssignmentGibbs(n_components=20, max_iter=20, burn_in=10, random_state=0),
                 id="hdp-gibbs"),
    # the [TF] settings (few topics: a quick fit)
    pytest.param(lambda: hdp.TruncationFreeSVI(eta=0.01, gamma=1.0, alpha=1.0, n_samples=1, batch_size=100,
                                               n_epochs=1, random_state=0), id="hdp-tf-svi"),
    pytest.param(lambda: hdp.CollapsedVB(n_components=40, max_iter=10, random_state=0), id="hdp-cvb",
                 marks=pytest.mark.slow),
]


@pytest.mark.parametrize("make", KOS_CHECKS)
def test_to_lda_scores_new_kos_documents_like_the_hdp(make):
    """Issue 16's check: the LDA from to_lda() scores held-out documents (document
    completion) within 0.05 nats per word of the HDP itself."""
    kos = bnpcore.datasets.load_kos()
    train, test = kos[:3000], kos[3000:]
    est = make().fit(train)
    lda = est.to_lda()
    assert abs(lda.score(test) - est.score(test)) < 0.05


def test_version_option(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"bnpcore {bnpcore.__version__}"


def test_example_hdp_to_pyldavis(tmp_path, capsys):
    """examples/hdp_to_pyldavis.py on three themes: the three largest topics are the themes."""
    from .conftest import _load_example, write_theme_texts
    themes = write_theme_texts(tmp_path)
    html = tmp_path / "topics.html"
    argv = [str(tmp_path), "--min-df", "1"] + (["--html", str(html)] if _has_pyldavis() else [])
    model, summary = _load_example("hdp_to_pyldavis").main(argv)
    assert sorted(sorted(row["top_words"][:6]) for row in summary[:3]) == sorted(map(sorted, themes))
    assert sum(row["share"] for row in summary[:3]) > 0.9
    assert all(np.isfinite(row["coherence"]) for row in summary)
    out = capsys.readouterr().out
    assert f"{len(summary)} topics used" in out and f"as LDA: {len(summary)} topics" in out
    assert not _has_pyldavis() or "LDAvis" in html.read_text()


def _has_pyldavis():
    return importlib.util.find_spec("pyLDAvis") is not None


# -- prune -------------------------------------------------------------------------------

def _pruned(name, corpus):
    """A fresh fit of ``name`` (prune changes it), its sizes and topics before, the
    threshold keeping the components at least as large as the second largest,
    and the kept mask."""
    est = registry.get(name).make(test=True, random_state=0).fit(corpus)
    sizes, topics, weights = est.topic_sizes_.copy(), np.array(est.topics_), np.array(est.weights_)
    threshold = np.sort(sizes)[-2] if len(sizes) > 1 else sizes[0]
    keep = sizes >= threshold
    return est, sizes, topics, weights, threshold, keep


@pytest.mark.parametrize("name", NONPARAMETRIC)
def test_prune_keeps_exactly_the_large_components(name, tiny_corpus, tmp_path):
    est, sizes, topics, weights, threshold, keep = _pruned(name, tiny_corpus)
    assert not keep.all(), "the tiny fit should leave components of different sizes"
    rest = getattr(est, est._remainder) if est._remainder is not None else None
    assert est.prune(threshold) is est
    assert est.n_components_ == keep.sum() == len(est.topics_) == len(est.weights_)
    np.testing.assert_allclose(est.topic_sizes_, sizes[keep], rtol=1e-12)
    np.testing.assert_allclose(est.topics_, topics[keep], rtol=1e-12)
    if rest is not None:      # the removed weight moved to the uninstantiated mass
        np.testing.assert_array_equal(est.weights_, weights[keep])
        assert getattr(est, est._remainder) == pytest.approx(rest + weights[~keep].sum())
    theta = est.transform(tiny_corpus)
    assert theta.shape == (tiny_corpus.n_docs, keep.sum())
    np.testing.assert_allclose(theta.sum(axis=1), 1.0)
    if getattr(est, "doc_topic_", None) is not None:
        assert est.doc_topic_.shape == (tiny_corpus.n_docs, keep.sum())
    assert np.isfinite(est.score(tiny_corpus))
    loaded = bnpcore.load(est.save(tmp_path / "pruned.npz"))
    np.testing.assert_array_equal(loaded.topic_sizes_, est.topic_sizes_)
    np.testing.assert_array_equal(loaded.transform(tiny_corpus), theta)
    assert est.prune(threshold).n_components_ == keep.sum()       # nothing left to remove


def test_prune_moves_the_removed_weight_to_the_new_topic_mass(tiny_corpus):
    est, sizes, topics, weights, threshold, keep = _pruned("hdp-gibbs", tiny_corpus)
    before = est.beta_new_
    est.prune(threshold)
    assert est.beta_new_ == pytest.approx(before + weights[~keep].sum())
    np.testing.assert_array_equal(est.weights_, weights[keep])
    assert est.heldout_loglik_ is None
    with pytest.raises(ValueError, match="pruned"):
        hdp.CollapsedVB(n_components=5, max_iter=2).fit(tiny_corpus, init_from=est)


@pytest.mark.parametrize("name", ["hdp-tf-svi", "dp-tf-svi", "hdp-da-sm", "adf-nrm"])
def test_training_continues_from_a_pruned_model(name, tiny_corpus):
    """The removed components stay removed: the next partial_fit starts from the
    pruned state (a component it creates again starts empty, not from the old one)."""
    est, sizes, topics, weights, threshold, keep = _pruned(name, tiny_corpus)
    est.prune(threshold)
    kept = est.n_components_
    state = {"hdp-tf-svi": lambda: est._state.n_components, "dp-tf-svi": lambda: est._state.n_components,
             "adf-nrm": lambda: int(est._state.scalars["n_alive"][0]), "hdp-da-sm": lambda: len(est.components_)}[name]
    assert state() == kept          # the training state itself is pruned
    seen = len(est.history_)
    est.partial_fit(tiny_corpus[:10])
    assert len(est.history_) > seen
    assert np.isfinite(est.score(tiny_corpus))


def test_prune_rejects_a_threshold_above_every_component(tiny_corpus):
    est = fitted("hdp-gibbs", tiny_corpus)
    with pytest.raises(ValueError, match="min_size"):
        est.prune(est.topic_sizes_.max() + 1)
    with pytest.raises(ValueError, match="min_size"):
        est.prune(-1.0)
    with pytest.raises(NotFittedError):
        hdp.DirectAssignmentGibbs().prune()
