"""Held-out metrics against naive token-by-token NumPy/Python references and the
oracles of ALGORITHMS.md section 10.9."""
import math

import numpy as np
import pytest
from scipy.special import digamma

from bnpcore.corpus import Corpus
from bnpcore.datasets import load_kos
from bnpcore.evaluation import (PredictiveAverage, document_completion, dp_heldout_log_likelihood,
                                infer_doc_topic, mixture_log_likelihood, mixture_log_predictive, perplexity,
                                token_log_likelihood)


def random_corpus(rng, n_docs=12, n_words=7, rate=0.8):
    m = rng.poisson(rate, size=(n_docs, n_words))
    m[[1, 5]] = 0      # empty documents
    return Corpus(m)


def token_lists(corpus):
    """Each document's tokens as a Python list of word ids."""
    words, ptr = corpus.tokens()
    return [list(words[ptr[j]:ptr[j + 1]]) for j in range(corpus.n_docs)]


# -- naive references (deliberately simple; never used by the library) -----------

def ref_token_loglik(doc_topic, topic_word, heldout):
    total, n = 0.0, 0
    for j, toks in enumerate(token_lists(heldout)):
        for w in toks:
            total += math.log(sum(doc_topic[j, k] * topic_word[k, w] for k in range(topic_word.shape[0])))
            n += 1
    return total / n


def ref_infer(topic_word, alpha, tokens, n_iter):
    """Mean-field VB with fixed topics, token by token, n_iter iterations."""
    K = topic_word.shape[0]
    gamma = alpha + len(tokens) / K
    for _ in range(n_iter if tokens else 0):
        e = np.exp(digamma(gamma))
        new = alpha.copy()
        for w in tokens:
            r = topic_word[:, w] * e
            new += r / r.sum()
        gamma = new
    return gamma / gamma.sum() if tokens else alpha / alpha.sum()


def ref_mixture_seq_prob(weights, topic_word, tokens):
    """sum_k w_k prod_i phi_{k x_i}: probability of the token sequence."""
    return sum(w * math.prod(topic_word[k, x] for x in tokens) for k, w in enumerate(weights))


def ref_polya_seq_prob(lam, tokens):
    """Dirichlet-multinomial probability of a token sequence by the Polya urn."""
    p, seen, total = 1.0, {}, lam.sum()
    for i, x in enumerate(tokens):
        p *= (lam[x] + seen.get(x, 0)) / (total + i)
        seen[x] = seen.get(x, 0) + 1
    return p


def log_mult_coef(tokens):
    return math.log(math.factorial(len(tokens))) - sum(
        math.log(math.factorial(tokens.count(w))) for w in set(tokens))


# -- token_log_likelihood, perplexity, PredictiveAverage -------------------------

def test_token_log_likelihood_matches_reference():
    rng = np.random.default_rng(0)
    heldout = random_corpus(rng)
    doc_topic = rng.dirichlet(np.ones(3), size=heldout.n_docs) * 0.9    # rows sum to 0.9 ([CVHDP])
    topic_word = rng.dirichlet(np.ones(7), size=3)
    got = token_log_likelihood(doc_topic, topic_word, heldout)
    assert got == pytest.approx(ref_token_loglik(doc_topic, topic_word, heldout), rel=1e-13)
    assert perplexity(doc_topic, topic_word, heldout) == pytest.approx(math.exp(-got), rel=1e-13)
    # float32 and list inputs are accepted
    assert token_log_likelihood(doc_topic.astype(np.float32), topic_word.tolist(), heldout) == \
        pytest.approx(got, rel=1e-6)


def test_token_log_likelihood_unigram_oracle():
    # (30) with K = 1 is the smoothed unigram (eta + n_w) / (W eta + N)
    rng = np.random.default_rng(1)
    corpus = random_corpus(rng, n_docs=30, n_words=9)
    train, heldout = corpus.split_tokens(0.3, random_state=2)
    eta = 0.1
    n_w = train.matrix.sum(axis=0).A1
    unigram = (eta + n_w) / (9 * eta + n_w.sum())
    alpha = 0.5
    n_j = train.doc_lengths
    doc_topic = ((alpha + n_j) / (alpha + n_j))[:, None]
    expected = np.dot(heldout.matrix.sum(axis=0).A1, np.log(unigram)) / heldout.n_tokens
    assert token_log_likelihood(doc_topic, unigram[None, :], heldout) == pytest.approx(expected, rel=1e-13)


def test_uniform_topics_have_perplexity_w():
    rng = np.random.default_rng(2)
    heldout = random_corpus(rng, n_words=11)
    doc_topic = rng.dirichlet(np.ones(4), size=heldout.n_docs)
    assert perplexity(doc_topic, np.full((4, 11), 1 / 11), heldout) == pytest.approx(11.0, rel=1e-13)


def test_zero_probability_token_gives_minus_inf():
    heldout = Corpus([[0, 1]], n_words=2)
    assert token_log_likelihood([[1.0]], [[1.0, 0.0]], heldout) == -np.inf


def test_predictive_average_matches_reference():
    rng = np.random.default_rng(3)
    heldout = random_corpus(rng)
    samples = [(rng.dirichlet(np.ones(3), size=heldout.n_docs), rng.dirichlet(np.ones(7), size=3))
               for _ in range(4)]
    avg = PredictiveAverage(heldout)
    with pytest.raises(ValueError, match="no samples"):
        avg.log_likelihood()
    avg.add(*samples[0])
    assert avg.log_likelihood() == pytest.approx(token_log_likelihood(*samples[0], heldout), rel=1e-13)
    for s in samples[1:]:
        avg.add(*s)
    total, n = 0.0, 0
    for j, toks in enumerate(token_lists(heldout)):
        for w in toks:
            p = np.mean([dt[j] @ tw[:, w] for dt, tw in samples])
            total += math.log(p)
            n += 1
    assert avg.n_samples == 4
    assert avg.log_likelihood() == pytest.approx(total / n, rel=1e-13)
    assert avg.perplexity() == pytest.approx(math.exp(-total / n), rel=1e-13)


# -- document completion -----------------------------------------------------------

def test_infer_doc_topic_matches_reference():
    rng = np.random.default_rng(4)
    docs = random_corpus(rng, rate=1.5)
    topic_word = rng.dirichlet(np.ones(7) * 0.5, size=3)
    alpha = np.array([0.2, 0.5, 1.0])
    got = infer_doc_topic(topic_word, alpha, docs, max_iter=7, tol=0.0)
    for j, toks in enumerate(token_lists(docs)):
        np.testing.assert_allclose(got[j], ref_infer(topic_word, alpha, toks, 7), rtol=1e-12)
    # empty documents: the prior mean
    np.testing.assert_allclose(got[1], alpha / alpha.sum(), rtol=1e-15)


def test_infer_doc_topic_converges_to_a_fixed_point():
    rng = np.random.default_rng(5)
    docs = random_corpus(rng, rate=2.0)
    topic_word = rng.dirichlet(np.ones(7), size=4)
    alpha = np.full(4, 0.3)
    pibar = infer_doc_topic(topic_word, 0.3, docs, max_iter=100000, tol=1e-13)
    for j, toks in enumerate(token_lists(docs)):
        gamma = pibar[j] * (alpha.sum() + len(toks))        # sum gamma = sum alpha + N_j
        e = np.exp(digamma(gamma))
        update = alpha + sum(topic_word[:, w] * e / (topic_word[:, w] @ e) for w in toks)
        np.testing.assert_allclose(update, gamma, rtol=1e-9)


def test_document_completion_matches_reference():
    rng = np.random.default_rng(6)
    docs = random_corpus(rng, n_docs=15, rate=2.0)
    observed, heldout = docs.split_tokens(0.2, random_state=1)
    topic_word = rng.dirichlet(np.ones(7), size=3)
    alpha = np.array([0.1, 0.4, 0.2])
    got = document_completion(topic_word, alpha, observed, heldout, max_iter=9, tol=0.0)
    pibar = np.array([ref_infer(topic_word, alpha, toks, 9) for toks in token_lists(observed)])
    assert got == pytest.approx(ref_token_loglik(pibar, topic_word, heldout), rel=1e-12)


def test_document_completion_with_one_topic_is_the_unigram_model():
    rng = np.random.default_rng(7)
    docs = random_corpus(rng, n_docs=20, rate=2.0)
    observed, heldout = docs.split_tokens(0.2, random_state=3)
    phi = rng.dirichlet(np.ones(7))
    expected = np.dot(heldout.matrix.sum(axis=0).A1, np.log(phi)) / heldout.n_tokens
    assert document_completion(phi[None, :], 0.7, observed, heldout) == pytest.approx(expected, rel=1e-13)


# -- whole-document likelihoods ----------------------------------------------------

@pytest.mark.parametrize("coef", [False, True])
def test_mixture_log_likelihood_brute_force(coef):
    # 3-word vocabulary, brute-force sum over components (ALGORITHMS 10.9)
    rng = np.random.default_rng(8)
    docs = random_corpus(rng, n_docs=10, n_words=3, rate=2.0)
    topic_word = rng.dirichlet(np.ones(3), size=4)
    topic_word[2, 1] = 0.0                      # a component that cannot emit word 1
    topic_word[2] /= topic_word[2].sum()
    weights = np.array([0.3, 0.0, 0.2, 0.25])   # zero weight, total 0.75 (not renormalised)
    with np.errstate(divide="ignore"):
        got = mixture_log_likelihood(np.log(weights), topic_word, docs, multinomial_coef=coef)
    for j, toks in enumerate(token_lists(docs)):
        expected = math.log(ref_mixture_seq_prob(weights, topic_word, toks))
        if coef:
            expected += log_mult_coef(toks)
        assert got[j] == pytest.approx(expected, rel=1e-12, abs=1e-12)
    assert got[1] == pytest.approx(math.log(0.75), rel=1e-14)      # empty document


def test_dp_heldout_per_word():
    rng = np.random.default_rng(9)
    docs = random_corpus(rng, n_docs=10, n_words=3, rate=2.0)
    topic_word = rng.dirichlet(np.ones(3), size=3)
    weights = np.array([0.5, 0.3, 0.15])        # leftover mass 0.05 dropped
    total = sum(math.log(ref_mixture_seq_prob(weights, topic_word, toks)) for toks in token_lists(docs))
    assert dp_heldout_log_likelihood(weights, topic_word, docs) == pytest.approx(total / docs.n_tokens,
                                                                                 rel=1e-12)
    with pytest.raises(ValueError, match="at most 1"):
        dp_heldout_log_likelihood([0.6, 0.6, 0.1], topic_word, docs)


@pytest.mark.parametrize("coef", [True, False])
def test_mixture_log_predictive_brute_force(coef):
    rng = np.random.default_rng(10)
    docs = random_corpus(rng, n_docs=10, n_words=4, rate=1.5)
    lam = rng.gamma(1.0, 1.0, size=(3, 4)) + 0.05
    log_weights = np.log([2.0, 1.0, 0.5])       # unnormalised weights are used as given
    got = mixture_log_predictive(log_weights, lam, docs, multinomial_coef=coef)
    for j, toks in enumerate(token_lists(docs)):
        p = sum(math.exp(lw) * ref_polya_seq_prob(lam[k], toks) for k, lw in enumerate(log_weights))
        expected = math.log(p) + (log_mult_coef(toks) if coef else 0.0)
        assert got[j] == pytest.approx(expected, rel=1e-12, abs=1e-12)


def test_single_cluster_predictive_by_hand():
    # one component: log MultCoef + log DM, here for the document (2, 0, 1) under lam = (0.5, 1, 2)
    docs = Corpus(np.array([[2, 0, 1]]))
    lam = np.array([[0.5, 1.0, 2.0]])
    dm = math.log((0.5 * 1.5 / (3.5 * 4.5)) * (2.0 / 5.5))      # sequence a a c by the urn
    coef = math.log(3)                                           # 3! / (2! 1!)
    assert mixture_log_predictive([0.0], lam, docs)[0] == pytest.approx(coef + dm, rel=1e-14)
    assert mixture_log_predictive([0.0], lam, docs, multinomial_coef=False)[0] == pytest.approx(dm, rel=1e-14)


def test_single_cluster_scale_on_kos():
    # ALGORITHMS 10.9: random 20% document split, single cluster with eta = 0.1:
    # about -7.886 (sd 0.016) per token without the coefficient, -3.725e5 (sd 7.6e3) total with it
    kos = load_kos()
    train, test = kos.split_documents(0.2, random_state=0)
    lam = 0.1 + train.matrix.sum(axis=0).A1[None, :]
    per_token = mixture_log_predictive([0.0], lam, test, multinomial_coef=False).sum() / test.n_tokens
    total = mixture_log_predictive([0.0], lam, test).sum()
    assert abs(per_token - (-7.886)) < 6 * 0.016
    assert abs(total - (-3.725e5)) < 6 * 7.6e3


def test_huge_counts_stay_finite():
    docs = Corpus(np.array([[10**8, 3, 0], [0, 0, 0]]))
    lam = np.array([[1e-3, 1.0, 5.0], [2.0, 2.0, 2.0]])
    assert np.all(np.isfinite(mixture_log_predictive([-0.5, -1.0], lam, docs)))
    tw = lam / lam.sum(axis=1, keepdims=True)
    assert np.all(np.isfinite(mixture_log_likelihood([-0.5, -1.0], tw, docs, multinomial_coef=True)))
    assert np.all(np.isfinite(infer_doc_topic(tw, 1e-3, docs)))


# -- threads -----------------------------------------------------------------------

def test_results_do_not_depend_on_threads():
    rng = np.random.default_rng(11)
    docs = random_corpus(rng, n_docs=300, n_words=50, rate=0.5)
    observed, heldout = docs.split_tokens(0.2, random_state=0)
    tw = rng.dirichlet(np.ones(50), size=6)
    dt = rng.dirichlet(np.ones(6), size=300)
    lam = tw * 20 + 0.1
    lw = np.log(rng.dirichlet(np.ones(6)))
    runs = []
    for threads in (1, 2, 3):
        avg = PredictiveAverage(heldout, n_threads=threads).add(dt, tw).add(dt[::-1].copy(), tw)
        runs.append((token_log_likelihood(dt, tw, heldout, n_threads=threads), avg.log_likelihood(),
                     infer_doc_topic(tw, 0.5, observed, n_threads=threads),
                     mixture_log_likelihood(lw, tw, docs, n_threads=threads),
                     mixture_log_predictive(lw, lam, docs, n_threads=threads)))
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            np.testing.assert_array_equal(a, b)


# -- bad input ---------------------------------------------------------------------

def test_bad_inputs():
    docs = Corpus(np.array([[1, 0, 2], [0, 1, 0]]))
    tw = np.full((2, 3), 1 / 3)
    dt = np.full((2, 2), 0.5)
    with pytest.raises(ValueError, match="doc_topic has shape"):
        token_log_likelihood(np.full((3, 2), 0.5), tw, docs)
    with pytest.raises(ValueError, match="topic_word has 4 words"):
        token_log_likelihood(dt, np.full((2, 4), 0.25), docs)
    with pytest.raises(ValueError, match="doc_topic has shape"):
        token_log_likelihood(np.full((2, 3), 0.3), tw, docs)
    with pytest.raises(ValueError, match="NaN"):
        token_log_likelihood(np.array([[np.nan, 0.5], [0.5, 0.5]]), tw, docs)
    with pytest.raises(ValueError, match="non-negative"):
        token_log_likelihood(dt, -tw, docs)
    with pytest.raises(ValueError, match="2-d"):
        token_log_likelihood(dt, tw[0], docs)
    with pytest.raises(ValueError, match="no tokens"):
        token_log_likelihood(dt, tw, Corpus([[], []], n_words=3))
    with pytest.raises(ValueError, match="n_threads"):
        token_log_likelihood(dt, tw, docs, n_threads=0)
    with pytest.raises(ValueError, match="alpha must be positive"):
        infer_doc_topic(tw, 0.0, docs)
    with pytest.raises(ValueError, match="shape \\(2,\\)"):
        infer_doc_topic(tw, [1.0, 1.0, 1.0], docs)
    with pytest.raises(ValueError, match="max_iter"):
        infer_doc_topic(tw, 1.0, docs, max_iter=-1)
    with pytest.raises(ValueError, match="same documents"):
        document_completion(tw, 1.0, docs, docs[[0]])
    with pytest.raises(ValueError, match="log_weights"):
        mixture_log_predictive([np.nan, 0.0], tw, docs)
    with pytest.raises(ValueError, match="weight 0"):
        mixture_log_likelihood([-np.inf, -np.inf], tw, docs)
    with pytest.raises(ValueError, match="lam must be"):
        mixture_log_predictive([0.0, 0.0], np.zeros((2, 3)), docs)
    with pytest.raises(ValueError, match="lam must be"):
        mixture_log_predictive([0.0], tw, docs)
    with pytest.raises(ValueError, match="2 components, log_weights 3"):
        mixture_log_likelihood([0.0, 0.0, 0.0], tw, docs)
    with pytest.raises(ValueError, match="non-negative"):
        dp_heldout_log_likelihood([-0.1, 0.5], tw, docs)
