"""One numbering of the components, after every ``fit`` and ``partial_fit``
(bnpcore.results): component k is row k of ``topics_``, ``weights_`` and
``topic_sizes_``, column k of ``transform`` and ``document_topics``, topic k of
``top_words``/``print_topics``, row k of ``summary``, topic k of ``to_lda`` and
``export_pyldavis``; components are listed largest first, so the used ones are
the first ``n_used``. Checked on every registered estimator."""
import numpy as np
import pytest

from bnpcore import hdp, registry
from bnpcore.results import ResultsMixin

from .conftest import make_tiny_corpus
from .test_contract import make

NONPARAMETRIC = sorted(name for name in registry.names()
                       if registry.get(name).path.startswith(("bnpcore.hdp:", "bnpcore.mixture:")))


def distinctive_document(topics, k, length=4000):
    """A document whose word counts follow topic k (``length`` tokens), or None
    when another topic is too close to k (KL below 0.05 nats) for the document to
    tell them apart. Its likelihood under proportions theta is largest at
    theta = e_k (Gibbs' inequality), so every estimator puts it in column k."""
    logs = np.log(np.maximum(topics, 1e-300))
    kl = topics[k] @ (logs[k] - logs).T
    if np.delete(kl, k).min(initial=np.inf) < 0.05:
        return None
    return np.round(length * topics[k]).astype(np.int64)


def assert_one_numbering(est, corpus):
    topics = np.asarray(est.topics_)
    theta = est.transform(corpus)
    assert theta.shape[1] == topics.shape[0] == est.n_components_
    checked = 0
    for k in range(min(3, topics.shape[0])):
        doc = distinctive_document(topics, k)
        if doc is None:
            continue
        row = est.transform(doc[None, :])[0]
        assert row.argmax() == k, f"a document of topic {k}'s words is put in column {row.argmax()}"
        checked += 1
    assert checked, "no topic has distinctive words on the test corpus"
    if not isinstance(est, ResultsMixin):
        return
    sizes = est.topic_sizes_
    assert np.all(np.diff(sizes) <= 1e-9 * max(1.0, sizes.max(initial=0.0))), f"not largest first: {sizes}"
    n_used = len(est.used_components())
    np.testing.assert_array_equal(est.used_components(), np.arange(n_used))
    restricted = theta[:, :n_used]
    total = restricted.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(est.document_topics(corpus), restricted / total, rtol=1e-12, atol=1e-15)
    assert [row["component"] for row in est.summary(None)] == list(range(n_used))
    lda = est.to_lda()
    np.testing.assert_allclose(lda.topics_, topics[:n_used], rtol=1e-10, atol=1e-15)
    export = est.export_pyldavis(corpus)
    np.testing.assert_array_equal(export["topic_term_dists"], topics[:n_used])


def test_every_estimator_numbers_its_components_one_way(model_spec, tiny_corpus):
    est = make(model_spec).fit(tiny_corpus)
    assert_one_numbering(est, tiny_corpus)


@pytest.mark.parametrize("name", [n for n in NONPARAMETRIC if hasattr(registry.get(n).load_class(), "partial_fit")])
def test_partial_fit_keeps_one_numbering(name, tiny_corpus):
    est = make(registry.get(name))
    for start in range(0, tiny_corpus.n_docs, 20):
        est.partial_fit(tiny_corpus[start:start + 20])
        if isinstance(est, ResultsMixin):
            sizes = est.topic_sizes_
            assert np.all(np.diff(sizes) <= 1e-9 * max(1.0, sizes.max(initial=0.0))), sizes
    assert_one_numbering(est, tiny_corpus)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_document_topics_names_the_topic_that_top_words_prints(seed):
    """The newcomer's silent wrong topic: DirectAssignmentGibbs listed its topics
    by stick weight, document_topics by size, so ``top_words(theta.argmax())``
    printed another topic."""
    corpus = make_tiny_corpus(seed=seed, n_docs=60, n_topics=4)
    est = hdp.DirectAssignmentGibbs(n_components=6, max_iter=30, burn_in=10, random_state=seed).fit(corpus)
    theta = est.document_topics(corpus)
    topics = np.asarray(est.topics_)
    checked = 0
    for k in range(min(3, theta.shape[1])):
        doc = distinctive_document(topics, k)
        if doc is not None:
            assert est.document_topics(doc[None, :])[0].argmax() == k
            checked += 1
    assert checked
    for j in range(corpus.n_docs):       # the words printed for a document's topic are its words
        k = theta[j].argmax()
        words = set(np.flatnonzero(corpus.matrix[j].toarray().ravel()))
        assert not words or words & set(np.argsort(-topics[k])[:10])
