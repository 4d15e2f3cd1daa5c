"""Synthetic corpora with known truth, as the papers' experiments describe them."""
from dataclasses import dataclass
from typing import Optional

import numpy as np
import scipy.sparse as sp

from bnpcore._validation import check_int, check_positive, check_random_state
from bnpcore.corpus import Corpus
from bnpcore.corpus_io import CorpusWriter

__all__ = ["SyntheticData", "make_bars", "make_pitman_yor_mixture", "write_synthetic"]


@dataclass(frozen=True)
class SyntheticData:
    """A generated corpus and the parameters that generated it.

    Attributes
    ----------
    corpus : Corpus
        All documents (for data with a test part: the training documents first).
    topics : ndarray of shape (n_components, n_words)
        True word distributions of the topics (LDA data) or clusters (mixture
        data); rows sum to 1.
    assignments : ndarray of int64 or None
        Mixture data: the cluster of every document, shape (n_docs,). LDA data:
        the topic of every token, shape (n_tokens,), aligned with
        ``corpus.tokens()[0]`` (documents in order, words sorted within each).
        None for corpora written to disk (:func:`write_synthetic`).
    weights : ndarray of shape (n_components,) or None
        Mixture data: the mixing weights (uniform for the bars; for the
        Pitman-Yor data, which has no finite weight vector, the empirical
        cluster frequencies n_k / n_docs). :func:`write_synthetic`: the
        global topic weights. None for the other LDA data.
    doc_topic : ndarray of shape (n_docs, n_components) or None
        LDA data: each document's topic proportions pi_j. None for mixture data.
    train, test : Corpus or None
        The first ``n_docs`` and the last ``n_test`` documents of ``corpus``
        when a test part was requested, else None.
    """

    corpus: Corpus
    topics: np.ndarray
    assignments: Optional[np.ndarray]
    weights: Optional[np.ndarray] = None
    doc_topic: Optional[np.ndarray] = None
    train: Optional[Corpus] = None
    test: Optional[Corpus] = None


_BARS = {
    # [NRM] section 4.1: one bar per image, additive baseline
    "nrm": dict(side=8, n_docs=200, n_test=0, doc_length=50, baseline=0.1),
    # [SM] section 4: LDA over the 20 bars of a 10 x 10 grid
    "sm": dict(side=10, n_docs=2000, n_test=200, doc_length=250, baseline=0.0, alpha=1.0),
}


def make_bars(kind="sm", *, side=None, n_docs=None, n_test=None, doc_length=None, baseline=None,
              alpha=None, random_state=None):
    """Bars data: words are the pixels of a square grid, topics are its rows and columns.

    The ``2 * side`` components are the horizontal bars (rows, first) and the
    vertical bars (columns); component k puts weight proportional to
    ``1[pixel in bar k] + baseline`` on every pixel.

    ``kind="nrm"`` ([NRM] section 4.1; the number of bars, baseline and cluster
    weights are not given there: bnpcore's choices below): a mixture. Each
    image picks one bar uniformly at random and draws
    ``x_d ~ Multinomial(doc_length, phi_{z_d})``. Defaults: 8 x 8 grid (64
    words, 16 bars), baseline 0.1, 200 images of 50 draws, no test part.

    ``kind="sm"`` ([SM] section 4; its topic proportions are not given: bnpcore's
    choices below): LDA after Griffiths &
    Steyvers (2004). Document j draws ``pi_j ~ Dirichlet(alpha, ..., alpha)`` over
    the bars, then each token a bar from ``pi_j`` and a pixel from that bar.
    Defaults: 10 x 10 grid (100 words, 20 bars), no baseline, alpha = 1,
    2000 training and 200 test documents of 250 tokens.

    Parameters
    ----------
    kind : {"sm", "nrm"}
    side : int, optional
        Grid side; the vocabulary has ``side**2`` pixels named ``"r{row}c{col}"``.
    n_docs, n_test : int, optional
        Training and test documents (``corpus`` holds both, training first).
    doc_length : int, optional
        Tokens per document.
    baseline : float >= 0, optional
        Additive baseline of every pixel in every bar.
    alpha : float > 0, optional
        Dirichlet parameter of the document proportions (``kind="sm"`` only).
    random_state : int, Generator or None

    Returns
    -------
    SyntheticData
        ``topics`` (2*side, side**2); ``kind="nrm"``: ``assignments`` per
        document and uniform ``weights``; ``kind="sm"``: ``assignments`` per
        token and ``doc_topic``. ``train``/``test`` when ``n_test > 0``.

    Examples
    --------
    >>> from bnpcore.datasets import make_bars
    >>> bars = make_bars("sm", random_state=0)
    >>> bars.train.n_docs, bars.test.n_docs, bars.topics.shape
    (2000, 200, (20, 100))
    """
    if kind not in _BARS:
        raise ValueError(f"kind must be 'sm' or 'nrm', got {kind!r}")
    if kind == "nrm" and alpha is not None:
        raise ValueError("alpha (document proportions) applies to kind='sm' only")
    given = dict(side=side, n_docs=n_docs, n_test=n_test, doc_length=doc_length, baseline=baseline, alpha=alpha)
    opts = {**_BARS[kind], **{k: v for k, v in given.items() if v is not None}}
    side = check_int(opts["side"], "side", minimum=1)
    n_docs = check_int(opts["n_docs"], "n_docs", minimum=1)
    n_test = check_int(opts["n_test"], "n_test", minimum=0)
    doc_length = check_int(opts["doc_length"], "doc_length", minimum=0)
    baseline = check_positive(opts["baseline"], "baseline", allow_zero=True)
    rng = check_random_state(random_state)

    grid = np.arange(side * side).reshape(side, side)
    topics = np.full((2 * side, side * side), baseline)
    for r in range(side):
        topics[r, grid[r]] += 1.0              # horizontal bar: row r
        topics[side + r, grid[:, r]] += 1.0    # vertical bar: column r
    topics /= topics.sum(axis=1, keepdims=True)
    vocabulary = [f"r{r}c{c}" for r in range(side) for c in range(side)]
    total = n_docs + n_test

    if kind == "nrm":
        n_bars = 2 * side
        assignments = rng.integers(0, n_bars, size=total)
        corpus = Corpus(_draw_documents(rng, topics, assignments, doc_length), vocabulary=vocabulary)
        extra = dict(weights=np.full(n_bars, 1.0 / n_bars))
    else:
        alpha = check_positive(opts["alpha"], "alpha")
        doc_topic = rng.dirichlet(np.full(2 * side, alpha), size=total)
        corpus, assignments = _draw_lda(rng, topics, doc_topic, doc_length, vocabulary)
        extra = dict(doc_topic=doc_topic)
    if n_test:
        extra.update(train=corpus[:n_docs], test=corpus[n_docs:])
    return SyntheticData(corpus=corpus, topics=topics, assignments=assignments, **extra)


def make_pitman_yor_mixture(n_docs=10000, *, n_words=500, doc_length=100, discount=0.75, concentration=1.0,
                            centre_concentration=0.75, random_state=None):
    """Mixture of multinomials with Pitman-Yor distributed cluster sizes.

    [NRM] section 4.2 (vocabulary size and document lengths unstated there:
    the defaults are bnpcore's): labels from the two-parameter
    Chinese restaurant process, sequentially — document i joins existing
    cluster k with probability proportional to ``n_k - discount`` and opens a
    new one with probability proportional to ``concentration + discount * K``;
    centres ``phi_k ~ Dirichlet(centre_concentration, ..., centre_concentration)``
    over ``n_words`` words; ``x_d ~ Multinomial(doc_length, phi_{z_d})``.
    The vocabulary size and document length are not given in the paper; the
    defaults are bnpcore's.

    Parameters
    ----------
    n_docs : int, default 10000
    n_words : int, default 500
    doc_length : int, default 100
    discount : float in [0, 1), default 0.75
    concentration : float > -discount, default 1.0
    centre_concentration : float > 0, default 0.75
    random_state : int, Generator or None

    Returns
    -------
    SyntheticData
        ``assignments`` (n_docs,) with clusters numbered in order of
        appearance, ``topics`` (K, n_words) the centres, ``weights`` the
        cluster frequencies n_k / n_docs.
    """
    n_docs = check_int(n_docs, "n_docs", minimum=1)
    n_words = check_int(n_words, "n_words", minimum=1)
    doc_length = check_int(doc_length, "doc_length", minimum=0)
    discount = check_positive(discount, "discount", allow_zero=True)
    if discount >= 1:
        raise ValueError(f"discount must be in [0, 1), got {discount}")
    if isinstance(concentration, bool) or not np.isfinite(float(concentration)) or concentration <= -discount:
        raise ValueError(f"concentration must be a finite number > -discount = {-discount}, got {concentration}")
    concentration = float(concentration)
    centre_concentration = check_positive(centre_concentration, "centre_concentration")
    rng = check_random_state(random_state)

    assignments = _pitman_yor_labels(rng, n_docs, discount, concentration)
    sizes = np.bincount(assignments)
    topics = rng.dirichlet(np.full(n_words, centre_concentration), size=len(sizes))
    corpus = Corpus(_draw_documents(rng, topics, assignments, doc_length))
    return SyntheticData(corpus=corpus, topics=topics, assignments=assignments, weights=sizes / n_docs)


def write_synthetic(path, n_docs, *, n_words=10000, n_topics=100, model="hdp", mean_length=100.0, length_sigma=1.0,
                    alpha=1.0, gamma=5.0, eta=0.05, word_exponent=1.0, random_state=None):
    """Generate a topic-model corpus with known truth into an on-disk corpus directory.

    Documents are drawn in blocks of 5000 (memory bounded by a block and the
    K x W topics, whatever ``n_docs``) and streamed into the directory format of
    :func:`bnpcore.corpus.write`; the truth is saved beside them as
    ``truth.npz`` (``topics``, ``weights``).

    The generative model:

    * word frequencies follow Zipf's law: topic k is ``phi_k ~ Dirichlet(eta *
      W * z)`` with ``z_w`` proportional to ``(w + 1) ** -word_exponent``, so
      every topic shares the frequent words and picks its own rare ones
      (``eta`` is the mean Dirichlet parameter per word: small = sparse topics);
    * ``model="hdp"``: global weights from the stick-breaking GEM(``gamma``)
      truncated at ``n_topics`` (the last stick takes the rest of the mass), and
      document proportions ``pi_j ~ Dirichlet(alpha * beta)`` (Teh, Jordan,
      Beal and Blei, "Hierarchical Dirichlet processes", JASA 2006, section 4);
      ``model="lda"``: uniform weights and ``pi_j ~ Dirichlet(alpha / K, ...)``;
    * document lengths are log-normal (a heavy right tail): ``N_j = max(1,
      round(exp(mu + length_sigma * e)))``, e standard normal and mu chosen so
      that the mean length is ``mean_length``;
    * tokens: a topic from ``pi_j``, then a word from that topic.

    Parameters
    ----------
    path : path-like
        Directory to create (it must not exist); written atomically.
    n_docs : int >= 1
    n_words : int >= 1, default 10000
    n_topics : int >= 1, default 100
    model : {"hdp", "lda"}
    mean_length : float > 0, default 100
    length_sigma : float >= 0, default 1.0
    alpha, gamma, eta, word_exponent : float > 0 (word_exponent >= 0)
    random_state : int, Generator or None
        The same seed writes the same corpus.

    Returns
    -------
    SyntheticData
        ``corpus`` (``Corpus.open(path)``, vocabulary ``w0, w1, ...``), ``topics``
        (n_topics, n_words) and ``weights`` (n_topics,); no per-token
        assignments or document proportions (they would be as large as the corpus).

    Examples
    --------
    >>> from bnpcore.datasets import write_synthetic
    >>> data = write_synthetic("synthetic", 1000000, random_state=0)  # doctest: +SKIP
    """
    if model not in ("hdp", "lda"):
        raise ValueError(f"model must be 'hdp' or 'lda', got {model!r}")
    n_docs = check_int(n_docs, "n_docs", minimum=1)
    n_words = check_int(n_words, "n_words", minimum=1)
    n_topics = check_int(n_topics, "n_topics", minimum=1)
    mean_length = check_positive(mean_length, "mean_length")
    length_sigma = check_positive(length_sigma, "length_sigma", allow_zero=True)
    alpha, gamma, eta = (check_positive(v, name) for v, name in ((alpha, "alpha"), (gamma, "gamma"), (eta, "eta")))
    word_exponent = check_positive(word_exponent, "word_exponent", allow_zero=True)
    rng = check_random_state(random_state)

    zipf = np.arange(1, n_words + 1, dtype=np.float64) ** -word_exponent
    topics = rng.gamma(eta * n_words * zipf / zipf.sum(), size=(n_topics, n_words))
    topics /= topics.sum(axis=1, keepdims=True)
    if model == "hdp":
        sticks = rng.beta(1.0, gamma, size=n_topics)
        sticks[-1] = 1.0
        weights = sticks * np.concatenate([[1.0], np.cumprod(1.0 - sticks[:-1])])
    else:
        weights = np.full(n_topics, 1.0 / n_topics)
    mu = np.log(mean_length) - length_sigma ** 2 / 2
    with CorpusWriter(path) as writer:
        for start in range(0, n_docs, _WRITE_BLOCK):
            size = min(_WRITE_BLOCK, n_docs - start)
            lengths = np.maximum(1, np.rint(np.exp(mu + length_sigma * rng.standard_normal(size)))).astype(np.int64)
            doc_topic = rng.dirichlet(alpha * weights, size=size)
            block, _ = _draw_lda(rng, topics, doc_topic, lengths, None)
            writer.add(block.indptr, block.indices, block.counts)
        np.savez(f"{writer.tmp}/truth.npz", topics=topics, weights=weights)
        writer.finish(n_words, [f"w{w}" for w in range(n_words)])
    return SyntheticData(corpus=Corpus.open(path), topics=topics, assignments=None, weights=weights)


_WRITE_BLOCK = 5000     # documents per block of write_synthetic


def _pitman_yor_labels(rng, n, discount, concentration):
    """Sequential two-parameter CRP seating of n customers (labels 0, 1, ... in order of appearance)."""
    labels = np.empty(n, dtype=np.int64)
    sizes = np.zeros(n)
    n_clusters = 0
    u = rng.random(n)
    for i in range(n):
        new = concentration + discount * n_clusters
        target = u[i] * (i + concentration)   # total mass: sum_k (n_k - d) + new = i + concentration
        if i == 0 or target < new:
            k = n_clusters
            n_clusters += 1
        else:
            mass = np.cumsum(sizes[:n_clusters] - discount)
            k = min(int(np.searchsorted(mass, target - new, side="right")), n_clusters - 1)
        labels[i] = k
        sizes[k] += 1
    return labels


def _draw_documents(rng, topics, assignments, doc_length, chunk=2048):
    """Sparse counts of ``x_d ~ Multinomial(doc_length, topics[assignments[d]])``."""
    blocks = [sp.csr_matrix(rng.multinomial(doc_length, topics[assignments[s:s + chunk]]))
              for s in range(0, len(assignments), chunk)]
    return sp.vstack(blocks, format="csr")


def _draw_lda(rng, topics, doc_topic, doc_length, vocabulary):
    """LDA documents of ``doc_length`` tokens (one number, or one per document);
    returns the corpus and the topic of every token in the corpus's token order
    (documents, then word ids)."""
    n_docs, n_topics = doc_topic.shape
    per_topic = rng.multinomial(doc_length, doc_topic)                  # (n_docs, n_topics)
    tok_doc = np.repeat(np.arange(n_docs), doc_length)
    tok_topic = np.repeat(np.tile(np.arange(n_topics), n_docs), per_topic.ravel())
    tok_word = np.empty(len(tok_topic), dtype=np.int64)
    for k in range(n_topics):
        mine = tok_topic == k
        tok_word[mine] = rng.choice(topics.shape[1], size=int(mine.sum()), p=topics[k])
    order = np.lexsort((tok_word, tok_doc))
    counts = sp.csr_matrix((np.ones(len(order), dtype=np.int32), (tok_doc, tok_word)),
                           shape=(n_docs, topics.shape[1]))
    return Corpus(counts, vocabulary=vocabulary), tok_topic[order]
