"""Bundled KOS corpus and the synthetic generators against their definitions."""
import itertools
from pathlib import Path

import numpy as np
import pytest
from scipy.stats import chi2, chisquare

from bnpcore.corpus import Corpus
from bnpcore.datasets import SyntheticData, load_kos, make_bars, make_pitman_yor_mixture

KOS = Path("/work/shared/data/kos")


def test_load_kos():
    kos = load_kos()
    assert (kos.n_docs, kos.n_words, kos.nnz, kos.n_tokens) == (3430, 6906, 353160, 467714)
    assert len(kos.vocabulary) == 6906 and len(set(kos.vocabulary)) == 6906
    assert kos.indptr.dtype == np.int64 and kos.indices.dtype == np.int32 and kos.counts.dtype == np.int32


@pytest.mark.skipif(not (KOS / "docword.kos.txt.gz").exists(), reason="shared KOS data not present")
def test_bundled_kos_equals_uci_files():
    uci = Corpus.from_uci(KOS / "docword.kos.txt.gz", KOS / "vocab.kos.txt")
    kos = load_kos()
    assert kos == uci and kos.vocabulary == uci.vocabulary


def test_bundled_data_has_attribution():
    from bnpcore.datasets import _bundled
    readme = (_bundled.DATA_DIR / "README.md").read_text()
    assert "CC BY 4.0" in readme and "UCI" in readme
    assert "CC BY 4.0" in load_kos.__doc__


# -- bars ---------------------------------------------------------------------

def bar_pixels(side):
    grid = np.arange(side * side).reshape(side, side)
    return [set(grid[r]) for r in range(side)] + [set(grid[:, c]) for c in range(side)]


def test_bars_nrm_definition():
    data = make_bars("nrm", random_state=0)
    assert isinstance(data, SyntheticData)
    c = data.corpus
    assert (c.n_docs, c.n_words) == (200, 64) and data.train is None and data.test is None
    assert np.all(c.doc_lengths == 50)
    assert c.vocabulary[0] == "r0c0" and c.vocabulary[9] == "r1c1"
    assert data.topics.shape == (16, 64) and data.doc_topic is None
    np.testing.assert_allclose(data.weights, np.full(16, 1 / 16))
    # phi_k proportional to 1[pixel in bar k] + 0.1
    for k, pixels in enumerate(bar_pixels(8)):
        expected = np.array([(1.0 if p in pixels else 0.0) + 0.1 for p in range(64)])
        np.testing.assert_allclose(data.topics[k], expected / expected.sum(), rtol=1e-14)
    assert data.assignments.shape == (200,) and set(np.unique(data.assignments)) <= set(range(16))


def test_bars_nrm_draws_follow_their_cluster():
    data = make_bars("nrm", n_docs=400, random_state=1)
    x = data.corpus.matrix.toarray()
    # pool the pixel counts of every cluster's documents: Multinomial(n_k * 50, phi_k)
    observed, expected = [], []
    for k in range(16):
        mine = data.assignments == k
        if mine.any():
            observed.append(x[mine].sum(axis=0))
            expected.append(mine.sum() * 50 * data.topics[k])
    observed, expected = np.concatenate(observed), np.concatenate(expected)
    stat = ((observed - expected) ** 2 / expected).sum()
    assert chi2.sf(stat, len(observed) - len(expected) // 64) > 1e-3
    # cluster choice uniform
    counts = np.bincount(data.assignments, minlength=16)
    assert chisquare(counts).pvalue > 1e-3


def test_bars_sm_definition():
    data = make_bars("sm", random_state=0)
    c = data.corpus
    assert (c.n_docs, c.n_words, c.n_tokens) == (2200, 100, 550000)
    assert (data.train.n_docs, data.test.n_docs) == (2000, 200)
    np.testing.assert_array_equal(data.train.matrix.toarray(), c.matrix.toarray()[:2000])
    np.testing.assert_array_equal(data.test.matrix.toarray(), c.matrix.toarray()[2000:])
    assert np.all(c.doc_lengths == 250)
    pixels = bar_pixels(10)
    for k in range(20):     # uniform over its 10 pixels, no baseline
        expected = np.array([0.1 if p in pixels[k] else 0.0 for p in range(100)])
        np.testing.assert_allclose(data.topics[k], expected, rtol=1e-14)
    assert data.doc_topic.shape == (2200, 20) and data.weights is None
    np.testing.assert_allclose(data.doc_topic.sum(axis=1), 1.0)
    # token assignments aligned with corpus.tokens(): every token lies in its bar
    words, ptr = c.tokens()
    assert data.assignments.shape == words.shape
    in_bar = np.zeros((20, 100), dtype=bool)
    for k in range(20):
        in_bar[k, list(pixels[k])] = True
    assert np.all(in_bar[data.assignments, words])


def test_bars_sm_topic_counts_follow_proportions():
    data = make_bars("sm", n_docs=300, n_test=0, doc_length=40, alpha=0.5, random_state=3)
    assert data.train is None
    words, ptr = data.corpus.tokens()
    doc = np.repeat(np.arange(300), np.diff(ptr))
    nk = np.zeros((300, 20))
    np.add.at(nk, (doc, data.assignments), 1)
    # pooled over documents: sum_j n_jk vs sum_j 40 pi_jk (conditionally on pi)
    assert chisquare(nk.sum(axis=0), 40 * data.doc_topic.sum(axis=0)).pvalue > 1e-3


def test_bars_options_and_reproducibility():
    a = make_bars("nrm", side=5, n_docs=30, n_test=10, doc_length=7, baseline=0.0, random_state=4)
    assert (a.corpus.n_docs, a.corpus.n_words, a.topics.shape) == (40, 25, (10, 25))
    assert a.test.n_docs == 10 and np.all(a.corpus.doc_lengths == 7)
    b = make_bars("nrm", side=5, n_docs=30, n_test=10, doc_length=7, baseline=0.0, random_state=4)
    assert a.corpus == b.corpus and np.array_equal(a.assignments, b.assignments)
    assert make_bars("sm", n_docs=20, n_test=0, random_state=4).corpus == \
        make_bars("sm", n_docs=20, n_test=0, random_state=np.random.default_rng(4)).corpus
    assert make_bars("sm", n_docs=20, random_state=5).corpus != make_bars("sm", n_docs=20, random_state=6).corpus


@pytest.mark.parametrize("kwargs, exc, match", [
    (dict(kind="lda"), ValueError, "kind"),
    (dict(kind="nrm", alpha=1.0), ValueError, "alpha"),
    (dict(kind="sm", alpha=0.0), ValueError, "alpha"),
    (dict(kind="sm", n_docs=0), ValueError, "n_docs"),
    (dict(kind="sm", side=2.5), TypeError, "side"),
    (dict(kind="nrm", baseline=-0.1), ValueError, "baseline"),
    (dict(kind="nrm", doc_length=-1), ValueError, "doc_length"),
])
def test_bars_bad_arguments(kwargs, exc, match):
    with pytest.raises(exc, match=match):
        make_bars(**kwargs)


# -- Pitman-Yor mixture ---------------------------------------------------------

def test_pitman_yor_definition():
    data = make_pitman_yor_mixture(2000, n_words=50, doc_length=30, random_state=0)
    c = data.corpus
    assert (c.n_docs, c.n_words) == (2000, 50) and np.all(c.doc_lengths == 30)
    k = data.topics.shape[0]
    sizes = np.bincount(data.assignments)
    assert len(sizes) == k and np.all(sizes > 0)
    # labels in order of appearance
    first = [int(np.argmax(data.assignments == i)) for i in range(k)]
    assert first == sorted(first)
    np.testing.assert_allclose(data.weights, sizes / 2000)
    np.testing.assert_allclose(data.topics.sum(axis=1), 1.0)
    assert data.doc_topic is None and data.train is None


def pool_small(observed, expected, minimum=5):
    """Cells with expected count < minimum pooled into one (dropped if it is empty)."""
    keep = expected >= minimum
    if keep.all():
        return observed, expected
    return (np.append(observed[keep], observed[~keep].sum()), np.append(expected[keep], expected[~keep].sum()))


def crp_partition_probability(labels, d, theta):
    """Probability of a label sequence under the sequential two-parameter CRP."""
    p, sizes = 1.0, []
    for i, z in enumerate(labels):
        if z == len(sizes):
            p *= (theta + d * len(sizes)) / (i + theta)
            sizes.append(1)
        else:
            p *= (sizes[z] - d) / (i + theta)
            sizes[z] += 1
    return p


def canonical_sequences(n):
    """All label sequences in order-of-appearance form (one per set partition)."""
    out = [[0]]
    for _ in range(n - 1):
        out = [s + [z] for s in out for z in range(max(s) + 2)]
    return [tuple(s) for s in out]


@pytest.mark.parametrize("discount, concentration", [(0.75, 1.0), (0.0, 2.0), (0.5, -0.3)])
def test_pitman_yor_partition_law(discount, concentration):
    # exact law of the partition of 4 documents (15 set partitions), chi-square
    seqs = canonical_sequences(4)
    exact = np.array([crp_partition_probability(s, discount, concentration) for s in seqs])
    assert abs(exact.sum() - 1) < 1e-12
    rng = np.random.default_rng(7)
    draws = 2000
    index = {s: i for i, s in enumerate(seqs)}
    counts = np.zeros(len(seqs))
    for _ in range(draws):
        data = make_pitman_yor_mixture(4, n_words=2, doc_length=1, discount=discount,
                                       concentration=concentration, random_state=rng)
        counts[index[tuple(data.assignments)]] += 1
    assert chisquare(*pool_small(counts, exact * draws)).pvalue > 1e-3


def test_pitman_yor_documents_follow_their_centre():
    data = make_pitman_yor_mixture(500, n_words=20, doc_length=50, random_state=2)
    x = data.corpus.matrix.toarray()
    big = np.argsort(np.bincount(data.assignments))[-3:]
    for k in big:
        mine = data.assignments == k
        observed = x[mine].sum(axis=0)
        expected = mine.sum() * 50 * data.topics[k]
        obs, exp = pool_small(observed, expected)
        assert chisquare(obs, exp).pvalue > 1e-3


def test_pitman_yor_reproducible_and_bad_arguments():
    a = make_pitman_yor_mixture(100, n_words=10, random_state=3)
    b = make_pitman_yor_mixture(100, n_words=10, random_state=3)
    assert a.corpus == b.corpus and np.array_equal(a.topics, b.topics)
    for kwargs, match in [(dict(discount=1.0), "discount"), (dict(discount=-0.1), "discount"),
                          (dict(concentration=-0.8), "concentration"), (dict(centre_concentration=0), "centre"),
                          (dict(n_words=0), "n_words")]:
        with pytest.raises(ValueError, match=match):
            make_pitman_yor_mixture(10, **kwargs)


def test_canonical_sequences_count_set_partitions():
    # Bell numbers: a check of the test helper itself
    assert [len(canonical_sequences(n)) for n in range(1, 6)] == [1, 2, 5, 15, 52]
    assert all(s[0] == 0 for s in canonical_sequences(4))
    assert len(set(itertools.chain(canonical_sequences(3)))) == 5
