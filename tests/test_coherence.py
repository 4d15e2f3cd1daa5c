"""bnpcore.evaluation.coherence: window counts against brute force, the
measures against their formulas, and against gensim's CoherenceModel on KOS."""
import itertools

import numpy as np
import pytest

from bnpcore.corpus import Corpus
from bnpcore.datasets import load_kos
from bnpcore.evaluation import _cooccurrence, coherence

MEASURES = ["u_mass", "c_npmi", "c_v"]


def random_docs(seed, n_relevant=4, lengths=(0, 1, 3, 5, 12, 30, 70)):
    """Documents as relevant-word indices (-1: another word), many repeats."""
    rng = np.random.default_rng(seed)
    return [rng.integers(-3, n_relevant, size=n) for n in lengths]


def naive_counts(docs, n_relevant, window, rule):
    """Enumerate every window; 'exact': a word is in a window if a copy is;
    'gensim': replay the incremental update token by token with a set."""
    joint, n_windows = np.zeros((n_relevant, n_relevant)), 0
    for doc in docs:
        doc = [int(x) for x in doc]
        width = len(doc) if window is None else min(window, len(doc))
        current = set(doc[:width])
        for t in range(max(len(doc) - width + 1, 1)):
            if rule == "gensim" and t > 0:
                current.discard(doc[t - 1])
                current.add(doc[t + width - 1])
            inside = set(doc[t:t + width]) if rule == "exact" else current
            present = np.zeros(n_relevant)
            present[[w for w in inside if w >= 0]] = 1
            joint += np.outer(present, present)
            n_windows += 1
    return np.diag(joint), joint, n_windows


@pytest.mark.parametrize("window", [None, 1, 2, 4, 10, 100])
@pytest.mark.parametrize("rule", ["exact", "gensim"])
def test_window_counts_against_enumeration(window, rule, monkeypatch):
    docs = random_docs(window or 0)
    expected = naive_counts(docs, 4, window, rule)
    tokens = np.concatenate(docs).astype(np.int64)
    token_ptr = np.concatenate([[0], np.cumsum([len(d) for d in docs])])
    for chunk in (1 << 22, 3, 1):      # the presence matrix is built in blocks of windows
        monkeypatch.setattr("bnpcore.evaluation._WINDOW_CHUNK", chunk)
        occurrences, joint, n_windows = _cooccurrence(tokens, token_ptr, 4, window, exact_windows=rule == "exact")
        np.testing.assert_array_equal(joint, expected[1])
        np.testing.assert_array_equal(occurrences, expected[0])
        assert n_windows == expected[2]


def test_measures_against_their_formulas():
    """Four documents over words a, b, c (whole-document windows for u_mass;
    windows longer than every document make c_npmi and c_v order-free)."""
    texts = [["a", "b"], ["a", "c"], ["a", "b", "c"], ["b"]]
    eps, n = 1e-12, 4
    p = {"a": 3 / n, "b": 3 / n, "c": 2 / n}
    pj = {("a", "b"): 2 / n, ("a", "c"): 2 / n, ("b", "c"): 1 / n}
    pj.update({(y, x): v for (x, y), v in list(pj.items())})
    pj.update({(x, x): p[x] for x in p})
    topic = ["a", "b", "c"]
    u_mass = np.mean([np.log((pj[topic[i], topic[j]] + eps) / p[topic[j]]) for i in range(3) for j in range(i)])

    def npmi(x, y):
        return np.log((pj[x, y] + eps) / (p[x] * p[y])) / -np.log(pj[x, y] + eps)
    c_npmi = np.mean([npmi(x, y) for x, y in itertools.permutations(topic, 2)])
    vectors = np.array([[npmi(x, y) for y in topic] for x in topic])
    whole = vectors.sum(axis=0)
    c_v = np.mean([v @ whole / np.linalg.norm(v) / np.linalg.norm(whole) for v in vectors])
    for measure, expected in (("u_mass", u_mass), ("c_npmi", c_npmi), ("c_v", c_v)):
        got = coherence([topic], texts, measure=measure, window_size=50)
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-15), measure


def test_corpus_and_texts_agree_and_order_matters_only_below_document_length():
    rng = np.random.default_rng(3)
    vocab = [f"w{i}" for i in range(12)]
    texts = [list(rng.choice(vocab, size=rng.integers(5, 40))) for _ in range(30)]
    corpus = Corpus.from_token_lists(texts)
    topics = [["w0", "w1", "w2", "w3"], ["w4", "w5", "w6"]]
    in_id_order = [[corpus.vocabulary[w] for w in np.repeat(corpus.indices[a:b], corpus.counts[a:b])]
                   for a, b in zip(corpus.indptr[:-1], corpus.indptr[1:])]
    for measure in MEASURES:
        # a Corpus is read in word-id order
        assert coherence(topics, corpus, measure) == coherence(topics, in_id_order, measure)
        # windows longer than every document see whole documents: order is irrelevant
        long = dict(measure=measure, window_size=100)
        assert coherence(topics, corpus, **long) == pytest.approx(coherence(topics, texts, **long), abs=1e-14)
    assert coherence(topics, corpus, "c_v", window_size=5) != coherence(topics, texts, "c_v", window_size=5)
    per_topic = coherence(topics, texts, "c_npmi", per_topic=True)
    assert per_topic.shape == (2,) and coherence(topics, texts, "c_npmi") == pytest.approx(per_topic.mean())


def test_model_topics_and_word_ids():
    corpus = load_kos()[:200]
    occurs = np.bincount(corpus.indices, minlength=corpus.n_words) > 0
    topic_word = np.random.default_rng(0).dirichlet(np.full(corpus.n_words, 0.1), size=3) * occurs

    class Fitted:        # anything with get_topics() and vocabulary_
        vocabulary_ = corpus.vocabulary

        def get_topics(self):
            return topic_word
    ids = [list(np.argsort(-row, kind="stable")[:10]) for row in topic_word]
    words = [[corpus.vocabulary[w] for w in topic] for topic in ids]
    by_model = coherence(Fitted(), corpus, "u_mass", topn=10, per_topic=True)
    np.testing.assert_array_equal(by_model, coherence(ids, corpus, "u_mass", per_topic=True))
    np.testing.assert_array_equal(by_model, coherence(words, corpus, "u_mass", per_topic=True))
    assert coherence(Fitted(), corpus, "u_mass", topn=3) != coherence(Fitted(), corpus, "u_mass", topn=10)


@pytest.mark.parametrize("topics, corpus, kwargs, error, match", [
    ([["a", "b"]], [["a", "b"]], {"measure": "c_uci"}, ValueError, "measure must be one of"),
    ([["a", "zzz"]], [["a", "b"]], {}, ValueError, "'zzz' does not occur"),
    ([["a", "zzz"]], Corpus([["a", "b"]], vocabulary=["a", "b"]), {}, ValueError, "not in the corpus's vocab"),
    ([["a", "b"]], Corpus([[0, 1]]), {}, ValueError, "no vocabulary"),
    ([[0, 1]], [["a", "b"]], {}, ValueError, "word ids need a Corpus"),
    ([[0, 5]], Corpus([[0, 1]]), {}, ValueError, "outside the corpus's 2 words"),
    ([["a"]], [["a", "b"]], {}, ValueError, "at least 2"),
    (["ab"], [["a", "b"]], {}, TypeError, "topic 0 is a string"),
    ([[0.5, 1]], Corpus([[0, 1]]), {}, TypeError, "words must be str or word ids"),
    ([], [["a", "b"]], {}, ValueError, "no topics"),
    ([["a", "b"]], [["a", "b"]], {"window_size": 0}, ValueError, "window_size"),
])
def test_bad_input(topics, corpus, kwargs, error, match):
    with pytest.raises(error, match=match):
        coherence(topics, corpus, **kwargs)


# -- gensim's CoherenceModel --------------------------------------------------------

def gensim_coherence(topics, corpus, measure, texts=None):
    models = pytest.importorskip("gensim.models")
    bow, dictionary = corpus.to_gensim()
    if texts is None:        # bags as texts, in word-id order (see coherence's docstring)
        texts = [[corpus.vocabulary[w] for w in np.repeat(corpus.indices[a:b], corpus.counts[a:b])]
                 for a, b in zip(corpus.indptr[:-1], corpus.indptr[1:])]
    cm = models.CoherenceModel(topics=topics, texts=texts, corpus=bow, dictionary=dictionary, coherence=measure,
                               processes=1)
    return np.array(cm.get_coherence_per_topic())


@pytest.fixture(scope="module")
def kos_topics():
    """Topics of a short LDA fit on the first 600 KOS documents."""
    from bnpcore.lda import CollapsedVB
    kos = load_kos()[:600]
    model = CollapsedVB(n_components=6, max_iter=15, random_state=0).fit(kos)
    return kos, model


@pytest.mark.parametrize("measure", MEASURES)
def test_kos_subset_equals_gensim(kos_topics, measure):
    kos, model = kos_topics
    topics = [model.top_words(k, 10) for k in range(model.get_topics().shape[0])]
    expected = gensim_coherence(topics, kos, measure)
    np.testing.assert_allclose(coherence(model, kos, measure, per_topic=True), expected, rtol=0, atol=1e-9)
    # texts in a reading order of their own (here: shuffled bags) through both libraries
    rng = np.random.default_rng(1)
    texts = [list(rng.permutation([kos.vocabulary[w] for w in np.repeat(kos.indices[a:b], kos.counts[a:b])]))
             for a, b in zip(kos.indptr[:-1], kos.indptr[1:])]
    np.testing.assert_allclose(coherence(topics, texts, measure, per_topic=True),
                               gensim_coherence(topics, kos, measure, texts=texts), rtol=0, atol=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("measure", MEASURES)
def test_full_kos_equals_gensim(measure):
    """The bundled KOS (3,430 documents), topics of a 10-topic LDA."""
    from bnpcore.lda import CollapsedVB
    kos = load_kos()
    model = CollapsedVB(n_components=10, max_iter=30, random_state=0).fit(kos)
    topics = [model.top_words(k, 10) for k in range(10)]
    ours = coherence(model, kos, measure, per_topic=True)
    np.testing.assert_allclose(ours, gensim_coherence(topics, kos, measure), rtol=0, atol=1e-6)
