"""G-HDP (direct-assignment Gibbs sampler): conditionals, exact posterior, concentration
updates, bars recovery, estimator contract."""
import numpy as np
import pytest
from scipy import stats
from scipy.special import gammaln

from bnpcore import base
from bnpcore import corpus as corpus_module
from bnpcore.corpus import Corpus
from bnpcore.hdp import DirectAssignmentGibbs
from bnpcore.kernels import _hdp_gibbs
from bnpcore.kernels.stirling import StirlingTable, antoniak_mean, antoniak_var
from bnpcore.models.hdp_gibbs import TrainingPredictive, _GibbsState, resample_alpha, resample_gamma

from hdp_reference import (assert_same_law, canonical, crp_tables, hdp_partition_posterior, make_bars, match_topics,
                           words_given_labels)


def _joint_log(njk, nkw, ab, eta):
    """log p(z, x | alpha beta) of the collapsed HDP with finitely many weighted topics."""
    eta_tot = eta * nkw.shape[1]
    out = (gammaln(ab + njk) - gammaln(ab)).sum()
    out += (gammaln(eta_tot) - gammaln(eta_tot + nkw.sum(1))).sum()
    return out + (gammaln(nkw + eta) - gammaln(eta)).sum()


def test_conditional_matches_collapsed_joint():
    rng = np.random.default_rng(1)
    n_docs, n_words, K = 3, 4, 3
    words = rng.integers(0, n_words, 12).astype(np.int32)
    tok_ptr = np.array([0, 4, 9, 12], dtype=np.int64)
    z = np.array([0, 0, 1, 2, 1, 1, 0, 2, 2, 0, 1, 2], dtype=np.int32)
    kcap = 5
    doc_of = np.repeat(np.arange(n_docs), np.diff(tok_ptr))
    n_jk = np.zeros((n_docs, kcap), np.int32)
    n_wk = np.zeros((n_words, kcap), np.int32)
    np.add.at(n_jk, (doc_of, z), 1)
    np.add.at(n_wk, (words, z), 1)
    n_k = n_jk.sum(0).astype(np.int64)
    beta = np.zeros(kcap)
    beta[:K] = [0.5, 0.2, 0.2]
    beta_new, alpha, eta = 0.1, 1.7, 0.3
    for t in range(len(words)):
        j = doc_of[t]
        got = _hdp_gibbs.token_conditional(words, tok_ptr, z, n_jk, n_wk, n_k, beta, beta_new, K, alpha, eta, j, t)
        # reference: joint with the token moved to each topic, new topic = a (K+1)-th topic of weight beta_new
        logs = []
        for k in range(K + 1):
            zz = z.copy()
            zz[t] = k
            njk = np.zeros((n_docs, K + 1))
            nkw = np.zeros((K + 1, n_words))
            np.add.at(njk, (doc_of, zz), 1)
            np.add.at(nkw, (zz, words), 1)
            logs.append(_joint_log(njk, nkw, alpha * np.append(beta[:K], beta_new), eta))
        ref = np.exp(np.array(logs) - np.logaddexp.reduce(logs))
        np.testing.assert_allclose(got, ref, rtol=1e-12)


def test_reference_partition_prior_sums_to_one():
    # one word type: the likelihood is 1, so the partition prior must sum to 1
    _, _, log_norm = hdp_partition_posterior([0, 0, 1, 1, 1], [0] * 5, 1, 0.7, 1.3, 0.5)
    assert abs(log_norm) < 1e-12


def _partition_chi2_pvalue(docs, n_words, alpha, gamma, eta_tot, n_sweeps, thin, seed):
    """Run the sampler with fixed concentrations and compare its token partitions (topics
    relabelled by first appearance) with the exact posterior by Pearson's chi-square."""
    corpus = Corpus(docs, n_words=n_words)
    words, tok_ptr = corpus.tokens()                  # the sampler's token order
    doc_of = np.repeat(np.arange(len(docs)), np.diff(tok_ptr)).tolist()
    parts, probs, _ = hdp_partition_posterior(doc_of, words.tolist(), n_words, alpha, gamma, eta_tot / n_words)
    index = {p: i for i, p in enumerate(parts)}
    counts = np.zeros(len(parts))

    def record(model, rec):
        if rec["iteration"] % thin == 0:           # thinning: successive sweeps are correlated
            counts[index[canonical(model._batch_state.z)]] += 1

    model = DirectAssignmentGibbs(n_components=2, max_iter=n_sweeps, burn_in=0, eta_tot=eta_tot, alpha=alpha,
                                  gamma=gamma, random_state=seed)
    with model.reporting(record):
        model.fit(corpus)
    expected = probs * counts.sum()
    big = expected >= 5
    obs, exp = counts[big], expected[big]
    if not big.all():
        obs, exp = np.append(obs, counts[~big].sum()), np.append(exp, expected[~big].sum())
    chi2 = ((obs - exp) ** 2 / exp).sum()
    return stats.chi2.sf(chi2, len(obs) - 1)


def test_exact_posterior_over_partitions():
    """Chi-square of the sampler's partitions against exact enumeration (ALGORITHMS.md 10.6):
    2 documents with (2, 3) tokens, W = 2, alpha = 0.7, gamma = 1.3 fixed (52 partitions)."""
    assert _partition_chi2_pvalue([[0, 1], [0, 0, 1]], 2, 0.7, 1.3, 1.0, 100000, 2, 3) > 1e-3


@pytest.mark.slow
def test_exact_posterior_over_partitions_larger():
    """3 documents with (3, 2, 2) tokens over 3 words (877 partitions), other concentrations."""
    assert _partition_chi2_pvalue([[2, 0, 1], [1, 1], [2, 0]], 3, 2.5, 0.4, 0.6, 400000, 2, 5) > 1e-3


def test_draw_tables_moments():
    rng = np.random.default_rng(5)
    n_jk = np.array([[3, 0, 7], [1, 12, 0]], dtype=np.int32)
    ab = np.array([0.4, 2.5, 0.01])
    table = StirlingTable(12)
    m_k = np.zeros(3, dtype=np.int64)
    z = np.concatenate([np.repeat(np.arange(3, dtype=np.int32), row) for row in n_jk])    # the labels of n_jk
    tok_ptr = np.concatenate([[0], np.cumsum(n_jk.sum(1))])
    draws = np.empty((20000, 3))
    for i in range(draws.shape[0]):
        _hdp_gibbs.draw_tables(tok_ptr, z, ab, 3, table, rng, m_k)
        draws[i] = m_k
    for k in range(3):
        mean = sum(antoniak_mean(int(n), ab[k]) for n in n_jk[:, k])
        var = sum(antoniak_var(int(n), ab[k]) for n in n_jk[:, k])
        assert abs(draws[:, k].mean() - mean) < 5 * np.sqrt(var / draws.shape[0])


def test_gamma_update_leaves_prior_invariant():
    rng = np.random.default_rng(7)
    prior = (2.0, 1.5)
    m_tot = 40
    out = np.empty(4000)
    for i in range(out.shape[0]):
        g = rng.gamma(prior[0], 1 / prior[1])
        K = crp_tables(m_tot, g, rng)          # topics given m.. tables: CRP over the tables
        out[i] = resample_gamma(g, K, m_tot, prior, rng, n_rounds=1)
    assert stats.kstest(out, stats.gamma(prior[0], scale=1 / prior[1]).cdf).pvalue > 1e-3


def test_alpha_update_leaves_prior_invariant():
    rng = np.random.default_rng(8)
    prior = (3.0, 2.0)
    lengths = np.array([5, 12, 0, 30, 2])
    out = np.empty(4000)
    for i in range(out.shape[0]):
        a = rng.gamma(prior[0], 1 / prior[1])
        m = sum(crp_tables(n, a, rng) for n in lengths)
        out[i] = resample_alpha(a, m, lengths, prior, rng, n_rounds=1)
    assert stats.kstest(out, stats.gamma(prior[0], scale=1 / prior[1]).cdf).pvalue > 1e-3


def test_bars_recovered_from_one_topic():
    # sparse document mixtures (Dir(0.1) over the bars), as in the CV-HDP test: from a single
    # topic the sampler needs thousands of sweeps to separate dense Dir(1) mixtures of 20
    # overlapping bars at this corpus size; here 600 sweeps suffice for every seed tried
    rng = np.random.default_rng(0)
    counts, truth = make_bars(300, 100, rng, alpha=0.1)
    model = DirectAssignmentGibbs(n_components=1, max_iter=600, burn_in=100, eta_tot=5.0, random_state=0)
    model.fit(Corpus(counts))
    assert model.history_[0]["n_components"] < 20
    # every bar has a topic within L1 distance 0.5 (a 50/50 mix of two bars is at 1.0)
    dist = match_topics(model.topics_[model.weights_ > 0.01], truth)
    assert np.all(dist < 0.5), dist


@pytest.fixture(scope="module")
def small_fit():
    rng = np.random.default_rng(2)
    counts, _ = make_bars(60, 50, rng)
    counts[3] = 0                                       # an empty document
    X = Corpus(counts)
    train, test = X.split_tokens(0.1, random_state=0)
    model = DirectAssignmentGibbs(n_components=10, max_iter=30, burn_in=10, eta_tot=5.0, random_state=4)
    return model.fit(train, heldout=test), train, test


def test_fitted_attributes(small_fit):
    model, train, test = small_fit
    K = model.n_components_
    assert model.topics_.shape == (K, 100) and np.allclose(model.topics_.sum(1), 1)
    assert np.all(np.diff(model.topic_sizes_) <= 0)          # largest first (bnpcore.results)
    assert np.isclose(model.weights_.sum() + model.beta_new_, 1)
    assert len(model.history_) == 30 and model.history_[-1]["n_components"] == K
    assert model.heldout_log_likelihood(train, test) == model.heldout_loglik_ == model.history_[-1]["heldout_loglik"]
    copy = Corpus(test.matrix.copy())                      # same counts: the fingerprint recognises them
    assert model.heldout_log_likelihood(train, copy) == model.heldout_loglik_
    theta = model.transform(train[:5])
    assert theta.shape == (5, K) and np.allclose(theta.sum(1), 1)


def test_reproducible_and_save_load(small_fit, tmp_path):
    model, train, test = small_fit
    again = DirectAssignmentGibbs(**model.get_params()).fit(train, heldout=test)
    np.testing.assert_array_equal(again.topics_, model.topics_)
    path = model.save(tmp_path / "g.npz")
    loaded = base.load(path)
    np.testing.assert_array_equal(loaded.topics_, model.topics_)
    np.testing.assert_array_equal(loaded._z, model._z)
    assert loaded.alpha_ == model.alpha_


@pytest.mark.parametrize("params, match", [
    ({"max_iter": 0}, "max_iter"), ({"burn_in": 500}, "burn_in"), ({"eta_tot": -1.0}, "eta_tot"),
    ({"alpha": 0.0}, "alpha"), ({"gamma_prior": (1.0, 0.0)}, "gamma_prior"), ({"n_components": 0}, "n_components"),
    ({"max_steps": 0}, "max_steps"),
])
def test_bad_parameters(params, match):
    with pytest.raises(ValueError, match=match):
        DirectAssignmentGibbs(**params).fit(Corpus([[0, 1]], n_words=2))


def test_paper_preset_parameters_are_the_documented_ones():
    documented = {"n_components": 1, "eta_tot": 100.0, "alpha_prior": (4.0, 4.0), "gamma_prior": (7.5, 7.5),
                  "max_steps": 17_500, "max_iter": 10_000, "burn_in": 50}
    params = DirectAssignmentGibbs.paper_preset().get_params()
    assert {k: params[k] for k in documented} == documented
    doc = " ".join(DirectAssignmentGibbs.paper_preset.__doc__.split())
    for name, value in documented.items():
        assert f"``{name}={value!r}``" in doc, name
    # the rest are the defaults, but n_components (the first argument, 1); keywords override
    defaults = DirectAssignmentGibbs().get_params()
    assert params["n_components"] == 1
    assert {k: v for k, v in params.items() if k not in documented and k != "n_components"} == {
        k: v for k, v in defaults.items() if k not in documented and k != "n_components"}
    g100 = DirectAssignmentGibbs.paper_preset(100, burn_in=10, random_state=3)
    assert (g100.n_components, g100.burn_in, g100.random_state, g100.max_steps) == (100, 10, 3, 17_500)


def test_paper_preset_stops_the_default_chain_at_its_step_budget():
    # same seed, same priors: the preset is the defaults' chain cut where the steps (topics summed
    # over the sweeps) first reach max_steps; from one topic it has fewer topics than the longer run
    rng = np.random.default_rng(0)
    counts, _ = make_bars(300, 100, rng, alpha=0.1)
    X = Corpus(counts)
    default = DirectAssignmentGibbs(n_components=1, max_iter=60, burn_in=0, random_state=0).fit(X)
    preset = DirectAssignmentGibbs.paper_preset(1, max_steps=60, burn_in=0, random_state=0).fit(X)
    topics = [h["n_components"] for h in default.history_]
    steps = np.cumsum(topics)
    assert [h["steps"] for h in default.history_] == steps.tolist()
    cut = int(np.searchsorted(steps, 60)) + 1                # sweeps until steps >= 60
    assert preset.n_iter_ == cut < 60
    drop = lambda h: {k: v for k, v in h.items() if k != "fit_seconds"}      # noqa: E731
    assert [drop(h) for h in preset.history_] == [drop(h) for h in default.history_[:cut]]
    assert preset.n_components_ == topics[cut - 1] < default.n_components_


def test_bad_input():
    with pytest.raises(ValueError, match="no tokens"):
        DirectAssignmentGibbs().fit(Corpus([[], []], n_words=3))
    with pytest.raises(ValueError, match="documents"):
        DirectAssignmentGibbs(max_iter=2, burn_in=0).fit(Corpus([[0, 1]], n_words=2),
                                                       heldout=Corpus([[0], [1]], n_words=2))


def test_slot_growth_beyond_capacity():
    # one long document of distinct words with a huge alpha * gamma opens many topics in one sweep
    X = Corpus([list(range(200))], n_words=200)
    model = DirectAssignmentGibbs(n_components=1, max_iter=2, burn_in=0, eta_tot=0.01, alpha=50.0, gamma=50.0,
                                  random_state=0).fit(X)
    assert model.n_components_ > 16
    assert np.array_equal(np.unique(model._z), np.arange(model.n_components_))   # every topic is used


def test_transform_with_disjoint_topics_is_exact():
    # topics on disjoint words: every token of a word of topic 1 must be assigned to topic 1
    model = DirectAssignmentGibbs(random_state=0)
    model.topics_ = np.array([[0.5, 0.5, 0.0, 0.0], [0.0, 0.0, 0.25, 0.75]])
    model.weights_ = np.array([0.6, 0.3])
    model.alpha_, model.n_components_, model.n_features_in_ = 2.0, 2, 4
    theta = model.transform(Corpus([[2, 3, 3], [0, 1, 0, 0, 1]], n_words=4), max_iter=5, burn_in=2)
    np.testing.assert_allclose(theta, [[1.2 / 4.8, 3.6 / 4.8], [6.2 / 6.8, 0.6 / 6.8]], rtol=1e-12)


def _prior_draw(lengths, prior_a, prior_g, rng):
    """(z per document, beta, beta_new, alpha, gamma) from the HDP prior, by the
    direct-assignment urn (tokens join topic k ∝ n_jk + alpha beta_k, a new one ∝ alpha beta_new)."""
    alpha, gamma = rng.gamma(prior_a[0], 1 / prior_a[1]), rng.gamma(prior_g[0], 1 / prior_g[1])
    beta, beta_new, z = [], 1.0, []
    for n in lengths:
        zj, njk = [], {}
        for _ in range(n):
            w = np.array([njk.get(k, 0) + alpha * b for k, b in enumerate(beta)] + [alpha * beta_new])
            k = rng.choice(len(w), p=w / w.sum())
            if k == len(beta):
                b = rng.beta(1.0, gamma)
                beta.append(b * beta_new)
                beta_new *= 1 - b
            njk[k] = njk.get(k, 0) + 1
            zj.append(k)
        z.append(zj)
    return z, np.array(beta), beta_new, alpha, gamma


@pytest.mark.slow
def test_geweke_joint_sampler_with_concentrations():
    """Successive-conditional (Geweke 2004) test of the whole sweep, concentrations resampled:
    alternating one sweep given x with a fresh x | z must leave the prior of (K, alpha, gamma)
    invariant."""
    rng = np.random.default_rng(11)
    lengths, W, eta, pa, pg = [4, 3, 5], 3, 0.5, (2.0, 2.0), (3.0, 2.0)
    n_prior, n_chain, thin = 3000, 30000, 10
    prior = np.array([[len(b), a, g] for z, b, _, a, g in (_prior_draw(lengths, pa, pg, rng)
                                                            for _ in range(n_prior))])
    z, beta, beta_new, alpha, gamma = _prior_draw(lengths, pa, pg, rng)
    settings = {"alpha_prior": pa, "gamma_prior": pg, "rounds": 1}
    state = None
    chain = []
    for it in range(n_chain):
        words = words_given_labels(z, W, eta, rng)
        # the corpus orders tokens by word within a document: carry z along
        order = [np.argsort(wj, kind="stable") for wj in words]
        X = Corpus([list(np.asarray(wj)[o]) for wj, o in zip(words, order)], n_words=W)
        flat = np.concatenate([np.asarray(zj)[o] for zj, o in zip(z, order)]).astype(np.int32)
        if state is None:
            state = _GibbsState(X, 1, W * eta, alpha, gamma, settings, np.random.default_rng(13))
        state.restore(X)
        state.alpha, state.gamma = alpha, gamma
        state.assign(flat, beta, beta_new)      # the prior draw leaves no empty topic: nothing moves
        state.sweep()
        K = state.n_components
        z = np.split(state.z, np.cumsum(lengths)[:-1])
        beta, beta_new = state.topics["beta"].copy(), state.beta_new
        alpha, gamma = state.alpha, state.gamma
        if it % thin == 0:
            chain.append([K, alpha, gamma])
    assert_same_law(prior, chain, ["alpha", "gamma"])


def test_heldout_log_likelihood_uses_the_sample_average(small_fit):
    model, train, test = small_fit
    assert model.heldout_log_likelihood(train, test) == model.heldout_loglik_
    assert np.isfinite(model.heldout_log_likelihood(train[:20], test[:20]))


def test_random_start_with_more_topics_than_tokens():
    model = DirectAssignmentGibbs(n_components=50, max_iter=3, burn_in=0, random_state=0).fit(Corpus([[0, 1, 2]]))
    assert 1 <= model.n_components_ <= 3
    assert np.isclose(model.weights_.sum() + model.beta_new_, 1.0)


def _check_topic_table(model, record):
    """The sampler's topic table after a sweep: n_components topics, none empty, sorted by
    size, counts equal to those recomputed from z, free slots zero, weights consistent."""
    state = model._batch_state
    comp, z = state.topics, state.z
    K, cap = comp.n, comp.capacity
    assert K == record["n_components"] == state.n_components
    n_k = comp["n_k"]
    assert np.all(n_k > 0) and np.all(np.diff(n_k) <= 0)
    assert z.min() >= 0 and z.max() < K
    words, tok_ptr = state.corpus.tokens()                # the labels' token order
    docs = np.repeat(np.arange(state.corpus.n_docs), np.diff(tok_ptr))
    n_jk = np.zeros((state.corpus.n_docs, K), np.int64)
    n_wk = np.zeros((state.corpus.n_words, cap), np.int64)
    np.add.at(n_jk, (docs, z), 1)
    np.add.at(n_wk, (words, z), 1)
    a = comp.arrays
    counted = state.doc_topic() * (np.diff(tok_ptr) + state.alpha)[:, None] - state.alpha * a["beta"][:K]
    np.testing.assert_array_equal(np.rint(counted), n_jk)             # theta counts n_jk from the labels
    np.testing.assert_array_equal(a["n_wk"], n_wk)                    # free columns included
    np.testing.assert_array_equal(a["n_k"], np.bincount(z, minlength=cap))
    assert not a["beta"][K:].any() and not a["m_k"][K:].any()
    assert np.all(a["beta"][:K] > 0) and np.isclose(a["beta"][:K].sum() + state.beta_new, 1)
    # every topic has at least one table, at most one per token
    assert np.all(a["m_k"][:K] >= 1) and np.all(a["m_k"][:K] <= n_k)


@pytest.mark.parametrize("X, params", [
    (Corpus(make_bars(40, 30, np.random.default_rng(3))[0]), dict(n_components=30, eta_tot=5.0)),
    (Corpus(make_bars(40, 30, np.random.default_rng(3))[0]), dict(n_components=1, eta_tot=5.0)),
    # a long document of distinct words and huge concentrations: the table outgrows its capacity
    (Corpus([list(range(200)), [0, 1, 2]], n_words=200), dict(n_components=1, eta_tot=0.01, alpha=50.0,
                                                                gamma=50.0)),
], ids=["from-30", "from-1", "growing"])
def test_topic_table_after_every_sweep(X, params):
    """moves.Components bookkeeping of the sampler, checked after every sweep."""
    model = DirectAssignmentGibbs(max_iter=12, burn_in=0, random_state=5, **params)
    capacities = []
    with model.reporting(lambda est, rec: capacities.append(_check_topic_table(est, rec)
                                                            or est._batch_state.topics.capacity)):
        model.fit(X)
    assert len(capacities) == 12
    np.testing.assert_array_equal(np.unique(model._z), np.arange(model.n_components_))
    if params.get("alpha") == 50.0:
        assert max(capacities) > 16 and model.n_components_ > 16


def _fit_in_blocks(monkeypatch, block, X, **params):
    """A fit whose sweeps run over the corpus in blocks of about ``block`` entries."""
    monkeypatch.setattr(corpus_module, "_BLOCK", block)
    return DirectAssignmentGibbs(**params).fit(X)


@pytest.mark.parametrize("params", [dict(n_components=1, eta_tot=5.0), dict(n_components=40, eta_tot=0.5)],
                         ids=["from-1", "from-40-growing"])
def test_sweeps_in_blocks_equal_one_block(monkeypatch, params):
    """The sweep runs block by block over the corpus (an on-disk corpus is not kept
    resident): the draws are those of one pass over the whole corpus, also when the
    topic table grows in the middle of a block."""
    X = Corpus(make_bars(60, 40, np.random.default_rng(6))[0])
    params = dict(params, max_iter=6, burn_in=3, random_state=2)
    whole = _fit_in_blocks(monkeypatch, 1 << 20, X, **params)
    blocks = _fit_in_blocks(monkeypatch, 37, X, **params)
    assert X.nnz > 20 * 37
    np.testing.assert_array_equal(blocks._z, whole._z)
    np.testing.assert_array_equal(blocks.topics_, whole.topics_)
    np.testing.assert_array_equal(blocks.doc_topic_, whole.doc_topic_)
    assert [h["n_components"] for h in blocks.history_] == [h["n_components"] for h in whole.history_]


def test_store_doc_topic_false_keeps_nothing_per_document(small_fit, tmp_path):
    model, train, test = small_fit
    lean = DirectAssignmentGibbs(**{**model.get_params(), "store_doc_topic": False}).fit(train, heldout=test)
    np.testing.assert_array_equal(lean.topics_, model.topics_)
    np.testing.assert_array_equal(lean.weights_, model.weights_)
    assert not hasattr(lean, "doc_topic_") and lean._z is None
    np.testing.assert_array_equal(lean._component_sizes(), model._component_sizes())
    loaded = base.load(lean.save(tmp_path / "lean.npz"))
    np.testing.assert_array_equal(loaded._component_sizes(), model._component_sizes())
    # held-out tokens of the training documents: proportions from transform instead of doc_topic_
    other = test.split_tokens(0.5, random_state=1)[0]
    assert lean.heldout_log_likelihood(train, other) == super(TrainingPredictive, lean).heldout_log_likelihood(
        train, other)
    with pytest.raises(TypeError, match="store_doc_topic"):
        DirectAssignmentGibbs(store_doc_topic=1).fit(train)
