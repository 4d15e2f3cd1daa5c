"""The partially collapsed LDA sampler (Magnusson et al. 2018): alias tables,
the Phi step against the Dirichlet, the chain against the exact posterior,
thread-count invariance, bars, bad input."""
import numpy as np
import pytest
from scipy.optimize import linear_sum_assignment
from scipy.special import gammaln
from scipy.stats import gamma, kstest

from bnpcore.base import load
from bnpcore.corpus import Corpus
from bnpcore.datasets import make_bars
from bnpcore.kernels import _pclda
from bnpcore.lda import PartiallyCollapsedGibbs
from bnpcore.models.lda_pc import PartiallyCollapsedState


def docs_of(corpus):
    words, ptr = corpus.tokens()
    return [list(words[ptr[j]:ptr[j + 1]]) for j in range(corpus.n_docs)]


def new_state(corpus, K, alpha, eta, seed, n_threads=1, ppu=False):
    rng = np.random.default_rng(seed)
    alpha = np.full(K, alpha) if np.ndim(alpha) == 0 else np.asarray(alpha, dtype=float)
    eta = np.full(corpus.n_words, eta) if np.ndim(eta) == 0 else np.asarray(eta, dtype=float)
    return PartiallyCollapsedState(corpus, K, alpha, eta, rng, n_threads, ppu=ppu)


@pytest.mark.parametrize("K", [1, 2, 7, 64])
def test_alias_tables_give_the_weights(K):
    """The distribution an alias table encodes, computed exactly from prob and
    alias, equals alpha_k phi_wk / mass_w; mass is the sum of the weights."""
    rng = np.random.default_rng(K)
    W = 9
    phi = rng.dirichlet(np.full(W, 0.3), size=K).T.copy()     # (W, K), columns sum to 1
    phi[3] = 0.0                                             # one tiny weight, the others 0
    phi[3, 0] = 1e-300
    alpha = rng.gamma(0.5, size=K)
    prob, alias, mass = np.empty((W, K)), np.empty((W, K), dtype=np.int32), np.empty(W)
    for threads in (1, 2):
        _pclda.build_alias(phi, alpha, prob, alias, mass, threads)
        np.testing.assert_allclose(mass, phi @ alpha, rtol=1e-13)
        for w in range(W):
            p = prob[w].copy()
            np.add.at(p, alias[w], 1.0 - prob[w])
            np.testing.assert_allclose(p / K, alpha * phi[w] / mass[w], rtol=1e-9, atol=1e-15)


def test_phi_step_matches_dirichlet_moments():
    """Columns of sample_phi against Dirichlet(eta + n_k): the mean and variance
    of every entry over 20000 sweeps within 4.5 Monte Carlo standard errors
    (the SE of the variance from the sample fourth moment)."""
    nwk = np.array([[0, 5, 1], [3, 0, 0], [0, 0, 0], [7, 2, 0]], dtype=np.int32)
    eta = np.array([0.05, 0.5, 2.0, 0.01])
    S = 20000
    draws = np.empty((S,) + nwk.shape)
    phi = np.empty(nwk.shape)
    for s in range(S):
        _pclda.sample_phi(nwk, eta, 11, s, phi, 1)
        draws[s] = phi
    np.testing.assert_allclose(draws.sum(axis=1), 1.0, rtol=1e-12)
    a = eta[:, None] + nwk
    A = a.sum(axis=0)
    mean = a / A
    var = a * (A - a) / (A ** 2 * (A + 1))
    dev = draws - draws.mean(axis=0)
    z_mean = (draws.mean(axis=0) - mean) / np.sqrt(var / S)
    m2 = (dev ** 2).mean(axis=0)
    z_var = (m2 - var) / np.sqrt(((dev ** 4).mean(axis=0) - m2 ** 2) / S)
    assert np.abs(z_mean).max() < 4.5, z_mean
    assert np.abs(z_var).max() < 4.5, z_var


def test_phi_step_is_the_same_on_any_thread_count():
    """The topics' blocks (8 topics each; 50 topics: 7 blocks, the last short)
    are handed to the threads as they come free: each draws from its topics'
    streams into its thread's buffer, so Phi does not depend on the threads."""
    rng = np.random.default_rng(4)
    nwk = (rng.integers(0, 5, size=(40, 50)) * (rng.random((40, 50)) < 0.3)).astype(np.int32)
    eta = np.full(40, 0.05)
    first = np.empty(nwk.shape)
    _pclda.sample_phi(nwk, eta, 3, 7, first, 1)
    np.testing.assert_allclose(first.sum(axis=0), 1.0, rtol=1e-12)
    for threads in (2, 3, 4):
        phi = np.empty(nwk.shape)
        _pclda.sample_phi(nwk, eta, 3, 7, phi, threads)
        np.testing.assert_array_equal(phi, first)


@pytest.mark.parametrize("a", [1e-3, 0.01, 0.3, 0.9])
def test_small_shape_gamma_sampler(a):
    """The Phi step's draws for zero counts with eta < 1 (Ahrens & Dieter's GS in
    log space) against the CDF of log Gamma(a): Kolmogorov-Smirnov on 20000
    draws, level 1e-3. Below t = -50, P(log G <= t) = e^(a t) / Gamma(a + 1)
    to relative 1e-22 (where exp(t) would underflow in scipy's CDF)."""
    x = _pclda.log_gamma_small(a, 5, 20000)
    assert np.all(np.isfinite(x))

    def cdf(t):
        return np.where(t < -50, np.exp(a * t - gammaln(a + 1)), gamma.cdf(np.exp(np.maximum(t, -50)), a))

    assert kstest(x, cdf).pvalue > 1e-3
    with pytest.raises(ValueError, match="a must"):
        _pclda.log_gamma_small(1.0, 0, 3)


def test_tiny_eta_gives_a_proper_distribution():
    """eta = 1e-80: every gamma draw of an empty topic underflows; the log-space
    normalisation still gives columns that sum to 1 (one word takes the mass)."""
    nwk = np.zeros((5, 9), dtype=np.int32)
    nwk[1, 2] = 4
    phi = np.empty(nwk.shape)
    _pclda.sample_phi(nwk, np.full(5, 1e-80), 3, 0, phi, 2)
    assert np.all(np.isfinite(phi))
    np.testing.assert_allclose(phi.sum(axis=0), 1.0, rtol=1e-12)
    assert phi[1, 2] == 1.0


def enumerated(ref, corpus, K, alpha, eta):
    states, post = ref.posterior_by_enumeration(docs_of(corpus), np.full(K, alpha), np.full(corpus.n_words, eta))
    powers = K ** np.arange(corpus.n_tokens)
    return np.array([s @ powers for s in states]), post, powers


@pytest.mark.parametrize("docs, K, alpha, eta", [
    ([[0, 1, 1], [2, 0]], 2, 0.5, 0.3),          # 5 tokens, V = 3, a repeated word
    ([[0, 2], [1, 2], [1]], 2, 0.2, 0.8),         # 3 documents
])
def test_chain_matches_the_enumerated_posterior(ref, docs, K, alpha, eta):
    """The z-marginal of the chain over (z, Phi) is the collapsed LDA posterior
    p(z | w): the histogram of the states every 10th of 150000 sweeps against
    the enumeration, Pearson chi-square at level 1e-3. The chain mixes more
    slowly than collapsed Gibbs (lag-5 autocorrelation of the state indicators
    up to 0.09 here, at lag 10 at most 0.035): thinning 10 makes the draws nearly
    independent."""
    corpus = Corpus(docs, n_words=3)
    index, post, powers = enumerated(ref, corpus, K, alpha, eta)
    state = new_state(corpus, K, alpha, eta, seed=1)
    thin, n = 10, 15000
    draws = np.empty(n, dtype=np.int64)
    for i in range(n * thin):
        state.sweep()
        if (i + 1) % thin == 0:
            draws[i // thin] = state.z @ powers
    observed = np.bincount(draws, minlength=K ** corpus.n_tokens)[index]
    assert ref.chi_square_pvalue(observed, post) > 1e-3


@pytest.mark.parametrize("phi", ["dirichlet", "ppu"])
def test_same_seed_bit_identical_for_any_thread_count(phi):
    """Thread-count invariance: state after 6 sweeps (z, counts, Phi, alias
    tables) and the fitted estimator are bit-identical at 1 and 2 threads; K = 20
    spans three topic blocks of the Phi step, 300 documents many z-step chunks."""
    corpus = make_bars("sm", side=5, n_docs=300, n_test=0, doc_length=40, random_state=0).corpus
    states = []
    for threads in (1, 2):
        st = new_state(corpus, 20, 0.1, 0.05, seed=7, n_threads=threads, ppu=phi == "ppu")
        for _ in range(6):
            st.sweep()
        states.append(st)
    for name in ("z", "nwk", "nk", "prob", "alias", "mass"):
        np.testing.assert_array_equal(getattr(states[0], name), getattr(states[1], name), err_msg=name)
    phis = [st.phi if phi == "ppu" else (st.phi,) for st in states]    # the urn: CSR (rows, topics, values)
    for a, b in zip(*phis):
        np.testing.assert_array_equal(a, b)
    assert states[0].z.tolist() != new_state(corpus, 20, 0.1, 0.05, seed=7).z.tolist()   # it moved
    fits = [PartiallyCollapsedGibbs(n_components=10, max_iter=8, burn_in=3, n_threads=t, random_state=3,
                                    phi=phi).fit(corpus) for t in (1, 2)]
    np.testing.assert_array_equal(fits[0].components_, fits[1].components_)
    np.testing.assert_array_equal(fits[0].doc_topic_, fits[1].doc_topic_)


@pytest.mark.parametrize("phi", ["dirichlet", "ppu"])
def test_checkpoint_resume_continues_the_same_chain(tmp_path, phi):
    """A fit stopped after 3 sweeps, saved, loaded and resumed ends bit-identical
    to an uninterrupted fit (the stream key and sweep number are saved)."""
    corpus = make_bars("sm", side=4, n_docs=60, n_test=0, doc_length=30, random_state=0).corpus
    make = lambda: PartiallyCollapsedGibbs(n_components=6, max_iter=7, burn_in=2, n_threads=2,  # noqa: E731
                                           random_state=4, phi=phi)
    full = make().fit(corpus)
    part = make()
    with part.reporting(lambda e, rec: rec["iteration"] == 3):
        part.fit(corpus)
    part.save(tmp_path / "m.npz")
    resumed = load(tmp_path / "m.npz").fit(corpus, resume=True)
    np.testing.assert_array_equal(resumed.components_, full.components_)
    np.testing.assert_array_equal(resumed.doc_topic_, full.doc_topic_)


def test_counts_stay_consistent_with_z():
    corpus = Corpus(np.random.default_rng(0).integers(0, 4, size=(30, 12)))
    st = new_state(corpus, 5, 0.3, 0.2, seed=2, n_threads=2)
    for _ in range(4):
        st.sweep()
    words, ptr = corpus.tokens()
    docs = np.repeat(np.arange(corpus.n_docs), np.diff(ptr))
    ndk, nwk = np.zeros((corpus.n_docs, 5), dtype=np.int32), np.zeros_like(st.nwk)
    np.add.at(ndk, (docs, st.z), 1)
    np.add.at(nwk, (words, st.z), 1)
    np.testing.assert_array_equal(st.counts()[0], ndk)
    np.testing.assert_array_equal(st.nwk, nwk)
    np.testing.assert_array_equal(st.nk, nwk.sum(axis=0))


@pytest.mark.parametrize("phi", ["dirichlet", "ppu"])
def test_recovers_the_bars(phi):
    """Griffiths & Steyvers bars (5 x 5 grid, 10 bars, 100000 tokens): every true
    bar is matched by a fitted topic within total variation 0.1 (measured: at
    most 0.05 over two seeds, the urn 0.06; CollapsedGibbs 0.04)."""
    bars = make_bars("sm", side=5, n_docs=1000, n_test=0, doc_length=100, random_state=1)
    est = PartiallyCollapsedGibbs(n_components=10, alpha=1.0, eta=0.05, max_iter=200, burn_in=150, n_threads=1,
                                  random_state=0, phi=phi).fit(bars.corpus)
    tv = 0.5 * np.abs(bars.topics[:, None, :] - est.topics_[None, :, :]).sum(axis=2)
    rows, cols = linear_sum_assignment(tv)
    assert tv[rows, cols].max() < 0.1, tv[rows, cols]


@pytest.mark.parametrize("params, match", [
    (dict(n_threads=0), "n_threads"),
    (dict(n_threads=-2), "n_threads"),
    (dict(n_threads=1.5), "n_threads"),
    (dict(max_iter=0), "max_iter"),
    (dict(burn_in=-1), "burn_in"),
    (dict(n_components=0), "n_components"),
    (dict(alpha=-1.0), "alpha"),
    (dict(eta=[0.1, 0.2]), "eta"),
    (dict(optimize_hyperparameters="yes"), "optimize_hyperparameters"),
    (dict(phi="poisson"), "phi"),
])
def test_bad_parameters(params, match):
    est = PartiallyCollapsedGibbs(max_iter=2, burn_in=1).set_params(**params)
    with pytest.raises((ValueError, TypeError), match=match):
        est.fit(np.ones((3, 4), dtype=int))


def test_bad_data_and_kernel_shapes():
    est = PartiallyCollapsedGibbs(max_iter=2, burn_in=1, n_threads=1)
    with pytest.raises(ValueError, match="no tokens"):
        est.fit(np.zeros((3, 4), dtype=int))
    with pytest.raises(ValueError):
        est.fit(np.array([[1, -2], [0, 1]]))
    with pytest.raises(ValueError, match="eta"):
        _pclda.sample_phi(np.zeros((4, 3), dtype=np.int32), np.ones(5), 0, 0, np.empty((4, 3)))
    with pytest.raises(ValueError, match="n_topics"):
        _pclda.sample_phi(np.zeros((4, 3), dtype=np.int32), np.ones(4), 0, 0, np.empty((4, 3)), n_topics=4)
    with pytest.raises(ValueError, match="alpha"):
        _pclda.build_alias(np.ones((4, 3)), np.ones(2), np.empty((4, 3)), np.empty((4, 3), dtype=np.int32),
                           np.empty(4))
    corpus = Corpus([[0, 1], [1]], n_words=2)
    st = new_state(corpus, 2, 0.5, 0.5, seed=0)
    with pytest.raises(ValueError, match="z"):
        _pclda.z_step(corpus.indptr, corpus.indices, corpus.counts, st.tok_ptr, st.phi, st.prob, st.alias, st.mass,
                      0, 0, st.z[:2], st.nwk, st.nk, 1)
    with pytest.raises(ValueError, match="label"):
        _pclda.count_topics(corpus.indptr, corpus.indices, corpus.counts, np.array([0, 1, 2], dtype=np.int32),
                            st.nwk, st.nk)
    with pytest.raises(TypeError, match="store_doc_topic"):
        PartiallyCollapsedGibbs(max_iter=2, burn_in=1, store_doc_topic="no").fit(corpus)


def test_labels_are_uint16_up_to_65536_topics_and_either_width_samples_alike():
    """The state's labels take 2 bytes up to 65536 topics, 4 above; the z-step on
    int32 labels and on the same labels as uint16 gives the same labels and counts."""
    corpus = make_bars("sm", side=4, n_docs=50, n_test=0, doc_length=20, random_state=0).corpus
    assert new_state(corpus, 7, 0.1, 0.1, seed=0).z.dtype == np.uint16
    tiny = Corpus([[0, 1]], n_words=2)
    assert new_state(tiny, 65536, 0.1, 0.1, seed=0).z.dtype == np.uint16
    assert new_state(tiny, 65537, 0.1, 0.1, seed=0).z.dtype == np.int32
    st = new_state(corpus, 7, 0.1, 0.1, seed=0)
    _pclda.sample_phi(st.nwk, st.eta, st.key, 0, st.phi, 1)
    _pclda.build_alias(st.phi, st.alpha, st.prob, st.alias, st.mass, 1)
    out = []
    for dtype in (np.uint16, np.int32):
        z, nwk, nk = st.z.astype(dtype), st.nwk.copy(), st.nk.copy()
        _pclda.z_step(corpus.indptr, corpus.indices, corpus.counts, st.tok_ptr, st.phi, st.prob, st.alias, st.mass,
                      st.key, 0, z, nwk, nk, 2)
        out.append((z.astype(np.int64), nwk, nk))
    assert out[0][0].tolist() != st.z.tolist()       # the labels moved
    for a, b in zip(*out):
        np.testing.assert_array_equal(a, b)


def test_blocks_of_the_corpus_change_nothing(monkeypatch):
    """A sweep runs the z-step block by block (about a million entries each); with
    blocks of 40 entries the fit is bit-identical to one block (the streams of
    block-local document j are those of document first_doc + j)."""
    import bnpcore.corpus
    corpus = make_bars("sm", side=4, n_docs=120, n_test=0, doc_length=25, random_state=2).corpus
    params = dict(n_components=6, max_iter=5, burn_in=2, n_threads=2, random_state=8)
    make = lambda: PartiallyCollapsedGibbs(**params)  # noqa: E731
    whole = make().fit(corpus)
    monkeypatch.setattr(bnpcore.corpus, "_BLOCK", 40)
    assert len(list(corpus.blocks())) > 10
    blocks = make().fit(corpus)
    np.testing.assert_array_equal(blocks.components_, whole.components_)
    np.testing.assert_array_equal(blocks.doc_topic_, whole.doc_topic_)


def test_store_doc_topic_false_keeps_the_topics_and_no_documents(tmp_path):
    """store_doc_topic=False: the same topics (bit for bit), no doc_topic_, no
    D x K sum in the state; transform still gives the proportions."""
    from bnpcore.corpus import write
    corpus = make_bars("sm", side=4, n_docs=80, n_test=0, doc_length=25, random_state=3).corpus
    params = dict(n_components=6, max_iter=6, burn_in=2, n_threads=2, random_state=1)
    full = PartiallyCollapsedGibbs(**params).fit(corpus)
    write(corpus, tmp_path / "c")
    light = PartiallyCollapsedGibbs(store_doc_topic=False, **params)
    states = []
    with light.reporting(lambda e, rec: states.append(e._batch_state)):
        light.fit(Corpus.open(tmp_path / "c"))
    np.testing.assert_array_equal(light.components_, full.components_)
    assert not hasattr(light, "doc_topic_") and hasattr(full, "doc_topic_")
    assert np.ndim(states[-1].sum_dk) == 0 and states[-1].n_collected == 4
    assert light.transform(corpus).shape == (80, 6)
    light.set_params(store_doc_topic=True).fit(corpus)       # refit: the attribute is back
    np.testing.assert_array_equal(light.doc_topic_, full.doc_topic_)


def test_count_kernels_match_numpy():
    rng = np.random.default_rng(4)
    corpus = Corpus(rng.integers(0, 3, size=(9, 6)))
    words, ptr = corpus.tokens()
    z = rng.integers(0, 5, size=corpus.n_tokens).astype(np.uint16)
    nwk, nk = np.ones((6, 5), dtype=np.int32), np.ones(5, dtype=np.int64)
    _pclda.count_topics(corpus.indptr, corpus.indices, corpus.counts, z, nwk, nk)
    expected = np.ones((6, 5), dtype=np.int32)
    np.add.at(expected, (words, z), 1)
    np.testing.assert_array_equal(nwk, expected)
    np.testing.assert_array_equal(nk, 1 + np.bincount(z, minlength=5))
    ndk = np.full((9, 5), 7, dtype=np.int32)
    _pclda.doc_counts(ptr, z, ndk, 2)
    np.testing.assert_array_equal(ndk, [np.bincount(z[ptr[j]:ptr[j + 1]], minlength=5) for j in range(9)])


# ---------------------------------------------------------------------------
# the Poisson Polya urn (phi="ppu"): sparse word-major Phi
# ---------------------------------------------------------------------------

def dense_urn(rows, topics, values, K):
    out = np.zeros((len(rows) - 1, K))
    for w in range(len(rows) - 1):
        out[w, topics[rows[w]:rows[w + 1]]] = values[rows[w]:rows[w + 1]]
    return out


def test_urn_draws_are_poisson(ref):
    """Unnormalised urn draws x_wk ~ Poisson(eta_w + n_wk), 20000 sweeps: for
    every entry the frequency of 0 and the mean within 4.5 standard errors, and
    the pooled zero-count entries of each small-eta row (geometric gaps, the
    positive Poisson) against the Poisson pmf by chi-square. Counts above 30
    take the rounded normal: mean only."""
    K = 37
    nwk = np.zeros((4, K), dtype=np.int32)
    nwk[0, [0, 5, 36]] = [1, 3, 40]
    nwk[1, [1, 2]] = [2, 7]
    nwk[3, 10] = 1
    eta = np.array([0.3, 0.05, 1.5, 35.0])        # row 3: every column positive, the normal branch
    S = 20000
    x = np.empty((S, 4, K))
    for s in range(S):
        x[s] = dense_urn(*_pclda.sample_phi_urn(nwk, eta, 5, s, 1, normalize=False), K)
    lam = eta[:, None] + nwk
    se = np.sqrt(lam / S)
    assert (np.abs(x.mean(axis=0) - lam) < 4.5 * se).all()
    exact = lam < 30
    p0 = np.exp(-lam)
    zero = (x == 0).mean(axis=0)
    assert (np.abs(zero - p0)[exact] < 4.5 * np.sqrt(p0 * (1 - p0) / S)[exact] + 1e-12).all()
    assert (x[:, 3] > 0).all()
    from scipy.stats import poisson
    for w in range(3):
        pooled = x[:, w, nwk[w] == 0].ravel().astype(np.int64)
        top = pooled.max() + 1
        probs = poisson.pmf(np.arange(top), eta[w])
        probs[-1] += poisson.sf(top - 1, eta[w])
        assert ref.chi_square_pvalue(np.bincount(pooled, minlength=top), probs) > 1e-3, w


def test_urn_rows_sum_to_one_per_topic_and_ignore_the_thread_count():
    """The normalised urn: columns sum to 1, topics increase within a row,
    the same arrays at 1, 2 and 3 threads; a topic whose draws are all 0 has no
    entries; ``n_topics`` draws the first columns only."""
    rng = np.random.default_rng(3)
    nwk = rng.integers(0, 3, size=(50, 30)).astype(np.int32) * (rng.random((50, 30)) < 0.2)
    nwk[:, 7] = 0
    eta = np.full(50, 1e-9)                                     # topic 7: all zero, almost surely
    outs = [_pclda.sample_phi_urn(nwk, eta, 9, 4, t) for t in (1, 2, 3)]
    for out in outs[1:]:
        for a, b in zip(outs[0], out):
            np.testing.assert_array_equal(a, b)
    rows, topics, values = outs[0]
    assert all((np.diff(topics[rows[w]:rows[w + 1]]) > 0).all() for w in range(50))
    phi = dense_urn(rows, topics, values, 30)
    used = phi.sum(axis=0) > 0
    np.testing.assert_allclose(phi.sum(axis=0)[used], 1.0, rtol=1e-12)
    assert not used[7] and used.sum() > 20
    with pytest.raises(ValueError, match="eta"):
        _pclda.sample_phi_urn(nwk, np.ones(3), 0, 0)
    # the first 20 columns of a wider array (the HDP's topic slots) = those columns alone
    first = _pclda.sample_phi_urn(nwk, eta, 9, 4, 2, n_topics=20)
    for a, b in zip(first, _pclda.sample_phi_urn(np.ascontiguousarray(nwk[:, :20]), eta, 9, 4, 2)):
        np.testing.assert_array_equal(a, b)
    assert first[1].max() < 20
    with pytest.raises(ValueError, match="n_topics"):
        _pclda.sample_phi_urn(nwk, eta, 9, 4, n_topics=31)


@pytest.mark.parametrize("sparse", [False, True])
def test_z_step_draws_the_conditional(ref, sparse):
    """One z-step over 20000 copies of the document (word 0, word 1), the second
    token in topic 2: the first token's new topic follows
    phi[0, k] (alpha_k + [k == 2]) exactly (chi-square), topic 4, of weight 0
    for word 0, never drawn; the dense and the sparse (urn) forms of Phi alike.
    A token whose word has no entry keeps its topic (sparse form). The
    counts n_kw follow the labels."""
    K, D = 5, 20000
    phi = np.array([[0.3, 0.1, 0.2, 0.4, 0.0], [0.2, 0.0, 0.5, 0.3, 0.1], [0.0] * 5])
    alpha = np.array([0.1, 0.5, 0.2, 0.05, 1.0])
    corpus = Corpus([[0, 1]] * D + ([[2, 0]] if sparse else []), n_words=3)
    tok_ptr = np.arange(0, 2 * corpus.n_docs + 1, 2, dtype=np.int64)
    z = np.tile(np.array([0, 2], dtype=np.uint16), corpus.n_docs)
    if sparse:
        z[-1] = 3                                   # the token of word 2, which has no entry
    nwk, nk = np.zeros((3, K), dtype=np.int32), np.zeros(K, dtype=np.int64)
    _pclda.count_topics(corpus.indptr, corpus.indices, corpus.counts, z, nwk, nk)
    if sparse:
        rows = np.concatenate([[0], np.cumsum((phi > 0).sum(axis=1))]).astype(np.int64)
        entries = (rows, np.nonzero(phi)[1].astype(np.int32), phi[phi > 0])
        _pclda.z_step_rows(corpus.indptr, corpus.indices, corpus.counts, tok_ptr, *entries, alpha, 3, 0, z, nwk,
                           nk, 2)
        assert z[-1] == 3
        with pytest.raises(ValueError, match="alpha"):
            _pclda.z_step_rows(corpus.indptr, corpus.indices, corpus.counts, tok_ptr, *entries, alpha[:4], 3, 0,
                               z, nwk, nk, 2)
        with pytest.raises(ValueError, match="rows"):
            _pclda.z_step_rows(corpus.indptr, corpus.indices, corpus.counts, tok_ptr, rows[:3], *entries[1:],
                               alpha, 3, 0, z, nwk, nk, 2)
    else:
        mass, prob, alias = np.empty(3), np.empty((3, K)), np.empty((3, K), dtype=np.int32)
        _pclda.build_alias(phi, alpha, prob, alias, mass, 2)
        _pclda.z_step(corpus.indptr, corpus.indices, corpus.counts, tok_ptr, phi, prob, alias, mass, 3, 0, z,
                      nwk, nk, 2)
    first = z[0:2 * D:2].astype(np.int64)
    p = phi[0] * (alpha + np.eye(K)[2])
    assert not (first == 4).any()
    assert ref.chi_square_pvalue(np.bincount(first, minlength=K)[:4], p[:4] / p.sum()) > 1e-3
    check = np.zeros_like(nwk)
    np.add.at(check, (np.repeat(corpus.indices, corpus.counts), z), 1)
    np.testing.assert_array_equal(nwk, check)
    np.testing.assert_array_equal(nk, check.sum(axis=0))
