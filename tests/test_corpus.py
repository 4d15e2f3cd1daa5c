"""Corpus: constructors, validation, UCI files, save/load, splits, minibatches."""
import gzip
import itertools
import math
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.stats import chisquare

from bnpcore.corpus import Corpus, as_corpus

KOS = Path("/work/shared/data/kos")

DENSE = np.array([[2, 0, 1, 0],
                  [0, 0, 0, 0],
                  [1, 3, 0, 1]])


def dense(c):
    return c.matrix.toarray()


# -- constructors -------------------------------------------------------------

def test_constructors_agree():
    from_dense = Corpus(DENSE)
    from_sparse = Corpus(sp.csc_matrix(DENSE))
    from_ids = Corpus([[0, 2, 0], [], [1, 0, 3, 1, 1]], n_words=4)
    vocab = ["a", "b", "c", "d"]
    from_words = Corpus([["a", "c", "a"], [], ["b", "a", "d", "b", "b"]], vocabulary=vocab)
    from_arrays = Corpus([np.array([0, 2, 0]), np.array([], dtype=np.int64), np.array([1, 0, 3, 1, 1])],
                         n_words=4)
    for c in (from_dense, from_sparse, from_ids, from_words, from_arrays):
        assert c == from_dense
        np.testing.assert_array_equal(dense(c), DENSE)
        assert c.indptr.dtype == np.int64 and c.indices.dtype == np.int32 and c.counts.dtype == np.int32
        assert (c.n_docs, c.n_words, c.n_tokens, c.nnz) == (3, 4, 8, 5)
        np.testing.assert_array_equal(c.doc_lengths, [3, 0, 5])
    assert from_words.vocabulary == vocab and from_words.word(3) == "d" and from_ids.word(3) == "3"


def test_float_and_bool_counts_accepted_when_whole():
    np.testing.assert_array_equal(dense(Corpus(DENSE.astype(np.float32))), DENSE)
    np.testing.assert_array_equal(dense(Corpus(DENSE > 0)), (DENSE > 0).astype(int))


def test_sparse_duplicates_and_explicit_zeros_are_canonicalised():
    m = sp.coo_matrix((np.array([1, 2, 0]), (np.array([0, 0, 1]), np.array([3, 3, 1]))), shape=(2, 4))
    c = Corpus(m)
    np.testing.assert_array_equal(dense(c), [[0, 0, 0, 3], [0, 0, 0, 0]])
    assert c.nnz == 1


def test_n_words_widens_and_vocabulary_sets_width():
    c = Corpus([[0, 1]], n_words=5)
    assert c.n_words == 5
    assert Corpus(np.ones((2, 3)), vocabulary=list("abcde")).n_words == 5
    assert as_corpus(c, n_words=5) is c


@pytest.mark.parametrize("data, n_words, exc, match", [
    (np.array([[1, -1]]), None, ValueError, "non-negative"),
    (sp.csr_matrix(np.array([[1, -1]])), None, ValueError, "non-negative"),
    (np.array([[1.5, 0]]), None, ValueError, "whole numbers"),
    (np.array([[np.nan, 0]]), None, ValueError, "NaN"),
    (sp.csr_matrix(np.array([[np.inf, 1.0]])), None, ValueError, "NaN or infinite"),
    (np.array([["1", "2"]]), None, TypeError, "numeric"),
    (np.array([[1 + 1j]]), None, TypeError, "numeric"),
    (np.array([[2**40]]), None, ValueError, "int32"),
    (np.array([1, 2, 3]), None, ValueError, "2-d"),
    (np.zeros((2, 2, 2)), None, ValueError, "2-d"),
    (np.array([[1, 2], [3]], dtype=object), None, ValueError, "ragged"),
    (np.zeros((0, 4)), None, ValueError, "no documents"),
    (np.zeros((3, 0)), None, ValueError, "empty vocabulary"),
    ([], 4, ValueError, "no documents"),
    ([[0, 1], [4]], 4, ValueError, "document 1: word id 4 is outside"),
    ([[0, -2]], 4, ValueError, "document 0: negative word id -2"),
    ([[0, 1.0]], 4, TypeError, "document 0: tokens must be"),
    ([[True]], 4, TypeError, "tokens must be"),
    (["abc"], 4, TypeError, "document 0 is a string"),
    ([["a"]], 4, ValueError, "no vocabulary"),
    (np.ones((2, 5)), 4, ValueError, "outside a vocabulary of 4"),
])
def test_bad_input(data, n_words, exc, match):
    with pytest.raises(exc, match=match):
        Corpus(data, n_words=n_words)


def test_bad_vocabulary():
    with pytest.raises(ValueError, match="not in the vocabulary"):
        Corpus([["a", "z"]], vocabulary=["a", "b"])
    with pytest.raises(ValueError, match="disagrees"):
        Corpus([[0]], vocabulary=["a", "b"], n_words=3)
    with pytest.raises(ValueError, match="X has 3 features, but it is expecting 7"):
        as_corpus(Corpus([[0]], n_words=3), n_words=7)
    with pytest.raises(ValueError, match="X has 2 features, but it is expecting 3"):
        as_corpus(np.ones((4, 2)), n_words=3)      # a narrower matrix is not widened


def test_selection_and_token_view():
    c = Corpus(DENSE)
    np.testing.assert_array_equal(dense(c[[2, 0]]), DENSE[[2, 0]])
    np.testing.assert_array_equal(dense(c[1:]), DENSE[1:])
    with pytest.raises(IndexError):
        c[[]]
    words, ptr = c.tokens()
    np.testing.assert_array_equal(ptr, [0, 3, 3, 8])
    np.testing.assert_array_equal(words, np.repeat(c.indices, c.counts))
    for j in range(c.n_docs):
        np.testing.assert_array_equal(np.bincount(words[ptr[j]:ptr[j + 1]], minlength=4), DENSE[j])


# -- UCI files ----------------------------------------------------------------

def write_uci(tmp_path, lines, header=None, gz=False, name="docword.t.txt"):
    header = header if header is not None else ["3", "4", str(len(lines))]
    text = "\n".join(header + lines) + "\n"
    path = tmp_path / (name + (".gz" if gz else ""))
    path.write_bytes(gzip.compress(text.encode()) if gz else text.encode())
    return path


UCI_BODY = ["1 1 2", "1 3 1", "3 4 1", "3 2 3", "3 1 1"]   # unsorted on purpose; document 2 empty


@pytest.mark.parametrize("gz", [False, True])
def test_from_uci(tmp_path, gz):
    path = write_uci(tmp_path, UCI_BODY + [""], header=["3", "4", "5"], gz=gz)
    vocab = tmp_path / "vocab.t.txt"
    vocab.write_text("a\nb\nc\nd\n")
    c = Corpus.from_uci(path, vocab)
    assert c == Corpus(DENSE)
    assert c.vocabulary == ["a", "b", "c", "d"]
    assert Corpus.from_uci(str(path)).vocabulary is None
    # every row canonical: sorted word ids
    for j in range(c.n_docs):
        row = c.indices[c.indptr[j]:c.indptr[j + 1]]
        assert np.all(np.diff(row) > 0)


def test_from_uci_without_entries(tmp_path):
    c = Corpus.from_uci(write_uci(tmp_path, [], header=["2", "5", "0"]))
    assert (c.n_docs, c.n_words, c.n_tokens) == (2, 5, 0)


@pytest.mark.parametrize("lines, header, match", [
    (UCI_BODY[:4], ["3", "4", "5"], "NNZ=5 but the body has 4"),
    (UCI_BODY, ["3", "4", "4"], "NNZ=4 but the body has 5"),
    (UCI_BODY[:2] + ["3 4"] + UCI_BODY[3:], None, "line 6: expected 'docID wordID count'"),
    (UCI_BODY[:3] + ["3 2 3.5"] + UCI_BODY[4:], None, "line 7: expected"),
    (UCI_BODY[:4] + ["3 x 1"], None, "line 8: expected"),
    (UCI_BODY[:4] + ["3 1 1 1"], None, "line 8: expected"),
    (["0 1 1"] + UCI_BODY[1:], None, "line 4: docID 0 is outside 1..3"),
    (UCI_BODY[:1] + ["4 1 1"] + UCI_BODY[2:], None, "line 5: docID 4 is outside"),
    (UCI_BODY[:2] + ["3 5 1"] + UCI_BODY[3:], None, "line 6: wordID 5 is outside 1..4"),
    (UCI_BODY[:3] + ["3 2 0"] + UCI_BODY[4:], None, "line 7: count 0 is not positive"),
    (UCI_BODY[:3] + ["3 2 -2"] + UCI_BODY[4:], None, "line 7: count -2"),
    (UCI_BODY[:4] + ["1 1 5"], None, "lines 4 and 8: .* = \\(1, 1\\) is listed twice"),
    (UCI_BODY, ["3", "four", "5"], "line 2: header W must be one integer"),
    (UCI_BODY, ["0", "4", "5"], "D >= 1"),
])
def test_from_uci_errors(tmp_path, lines, header, match):
    with pytest.raises(ValueError, match=match):
        Corpus.from_uci(write_uci(tmp_path, lines, header=header))


def test_from_uci_error_line_counts_blank_lines(tmp_path):
    path = write_uci(tmp_path, ["1 1 1", "", "1 2 1", "9 1 1"], header=["3", "4", "3"])
    with pytest.raises(ValueError, match="line 7: docID 9"):
        Corpus.from_uci(path)


def test_from_uci_short_file_and_bad_vocabulary(tmp_path):
    short = tmp_path / "short.txt"
    short.write_text("3\n4\n")
    with pytest.raises(ValueError, match="three header lines"):
        Corpus.from_uci(short)
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("a\nb\nc\n")
    with pytest.raises(ValueError, match="vocabulary has 3 words but .* W=4"):
        Corpus.from_uci(write_uci(tmp_path, UCI_BODY), vocab)


@pytest.mark.skipif(not (KOS / "docword.kos.txt.gz").exists(), reason="shared KOS data not present")
def test_from_uci_kos():
    c = Corpus.from_uci(KOS / "docword.kos.txt.gz", KOS / "vocab.kos.txt")
    assert (c.n_docs, c.n_words, c.nnz, c.n_tokens) == (3430, 6906, 353160, 467714)
    assert len(c.vocabulary) == 6906


# -- save / load --------------------------------------------------------------

@pytest.mark.parametrize("vocabulary", [None, ["a", "b", "ü", "d d"]])
def test_save_load_round_trip(tmp_path, vocabulary):
    c = Corpus(DENSE, vocabulary=vocabulary)
    c.save(tmp_path / "c")
    back = Corpus.load(tmp_path / "c.npz")
    assert back == c and back.vocabulary == vocabulary
    assert back.indptr.dtype == np.int64 and back.indices.dtype == np.int32


def test_load_rejects_foreign_or_corrupt_files(tmp_path):
    np.savez(tmp_path / "other.npz", x=np.arange(3))
    with pytest.raises(ValueError, match="not a saved bnpcore Corpus"):
        Corpus.load(tmp_path / "other.npz")
    np.savez(tmp_path / "bad.npz", format_version=1, indptr=np.array([0, 1]), indices=np.array([7]),
             counts=np.array([1]), n_words=4)
    with pytest.raises(ValueError, match="corrupt count matrix"):
        Corpus.load(tmp_path / "bad.npz")
    np.savez(tmp_path / "neg.npz", format_version=1, indptr=np.array([0, 1]), indices=np.array([0]),
             counts=np.array([-1]), n_words=4)
    with pytest.raises(ValueError, match="non-negative"):
        Corpus.load(tmp_path / "neg.npz")
    np.savez(tmp_path / "new.npz", format_version=99, indptr=np.array([0, 1]), indices=np.array([0]),
             counts=np.array([1]), n_words=4)
    with pytest.raises(ValueError, match="format 99"):
        Corpus.load(tmp_path / "new.npz")


# -- splits -------------------------------------------------------------------

def random_corpus(seed=0, n_docs=60, n_words=30):
    rng = np.random.default_rng(seed)
    m = rng.poisson(0.6, size=(n_docs, n_words))
    m[::7] = 0    # some empty documents
    return Corpus(m)


def test_split_documents():
    c = random_corpus()
    train, test = c.split_documents(0.25, random_state=3)
    assert (train.n_docs, test.n_docs) == (45, 15)
    rows = {tuple(r) for r in dense(c)}
    assert {tuple(r) for r in dense(train)} | {tuple(r) for r in dense(test)} <= rows
    assert train.n_tokens + test.n_tokens == c.n_tokens
    again = c.split_documents(0.25, random_state=3)
    assert again[0] == train and again[1] == test
    for bad in (0, 1, 1.5, -0.1, "0.2"):
        with pytest.raises(ValueError, match="test_fraction"):
            c.split_documents(bad)
    with pytest.raises(ValueError, match="empty"):
        Corpus(DENSE).split_documents(0.01)


@pytest.mark.parametrize("mode", ["doc_tokens", "corpus_tokens"])
@pytest.mark.parametrize("fraction", [0.1, 0.2, 0.5])
def test_split_tokens_partition(mode, fraction):
    c = random_corpus()
    observed, heldout = c.split_tokens(fraction, random_state=11, mode=mode)
    assert observed.shape == heldout.shape == c.shape
    np.testing.assert_array_equal(dense(observed) + dense(heldout), dense(c))
    assert np.all(observed.counts > 0) and np.all(heldout.counts > 0)
    for part in (observed, heldout):   # canonical CSR
        assert part == Corpus(part.matrix)
    if mode == "doc_tokens":
        np.testing.assert_array_equal(heldout.doc_lengths, np.rint(fraction * c.doc_lengths))
    again = c.split_tokens(fraction, random_state=11, mode=mode)
    assert again[0] == observed and again[1] == heldout
    assert c.split_tokens(fraction, random_state=12, mode=mode)[1] != heldout


def test_split_tokens_bad_arguments():
    c = random_corpus()
    with pytest.raises(ValueError, match="mode"):
        c.split_tokens(0.1, mode="tokens")
    with pytest.raises(ValueError, match="test_fraction"):
        c.split_tokens(1.0)


def test_split_doc_tokens_is_uniform_over_subsets():
    # document with tokens a a b c: holding out 2 tokens uniformly gives the
    # held-out count vector a multivariate hypergeometric law.
    c = Corpus([[0, 0, 1, 2], [1, 2, 2]], n_words=3)
    rng = np.random.default_rng(2024)
    draws = 3000
    seen = {}
    for _ in range(draws):
        _, held = c.split_tokens(0.5, random_state=rng)
        key = tuple(dense(held)[0])
        seen[key] = seen.get(key, 0) + 1
    tokens = [0, 0, 1, 2]
    exact = {}
    for pair in itertools.combinations(range(4), 2):
        key = tuple(np.bincount([tokens[i] for i in pair], minlength=3))
        exact[key] = exact.get(key, 0) + 1 / math.comb(4, 2)
    assert set(seen) == set(exact)
    keys = sorted(exact)
    assert chisquare([seen[k] for k in keys], [draws * exact[k] for k in keys]).pvalue > 1e-3


def test_split_corpus_tokens_rate():
    c = random_corpus(n_docs=400)
    _, held = c.split_tokens(0.3, random_state=5, mode="corpus_tokens")
    n, p = c.n_tokens, 0.3
    assert abs(held.n_tokens - n * p) < 6 * math.sqrt(n * p * (1 - p))


def test_split_tokens_with_empty_documents_only():
    c = Corpus([[], []], n_words=3)
    observed, heldout = c.split_tokens(0.2, random_state=0)
    assert observed.n_tokens == heldout.n_tokens == 0 and observed.n_docs == 2


@pytest.mark.skipif(not (KOS / "docword.kos.txt.gz").exists(), reason="shared KOS data not present")
def test_split_tokens_kos_exact_fraction():
    c = Corpus.from_uci(KOS / "docword.kos.txt.gz")
    observed, heldout = c.split_tokens(0.1, random_state=0)
    np.testing.assert_array_equal(heldout.doc_lengths, np.rint(0.1 * c.doc_lengths))
    assert (observed.matrix + heldout.matrix != c.matrix).nnz == 0


# -- minibatches --------------------------------------------------------------

def test_minibatches():
    c = random_corpus(n_docs=23)
    stream = list(c.minibatches(5, shuffle=False))
    assert [b.n_docs for b in stream] == [5, 5, 5, 5, 3]
    np.testing.assert_array_equal(np.vstack([dense(b) for b in stream]), dense(c))
    shuffled = list(c.minibatches(5, random_state=1))
    stacked = np.vstack([dense(b) for b in shuffled])
    assert sorted(map(tuple, stacked)) == sorted(map(tuple, dense(c)))
    assert not np.array_equal(stacked, dense(c))
    again = np.vstack([dense(b) for b in c.minibatches(5, random_state=1)])
    np.testing.assert_array_equal(again, stacked)
    for bad in (0, -1, 2.5, "3"):
        with pytest.raises((ValueError, TypeError)):
            list(c.minibatches(bad))


@pytest.mark.parametrize("n_words, exc", [(-1, ValueError), (0, ValueError), (2.5, TypeError), ("3", TypeError),
                                          (True, TypeError)])
def test_n_words_must_be_a_positive_integer(n_words, exc):
    with pytest.raises(exc, match="n_words"):
        Corpus([[0, 1]], n_words=n_words)


def test_word_ids_beyond_32_bits_are_refused(tmp_path):
    (tmp_path / "docword.txt").write_text("1\n3000000000\n1\n1 2999999999 4\n")
    with pytest.raises(ValueError, match="3000000000 words exceeds"):
        Corpus.from_uci(tmp_path / "docword.txt")
    with pytest.raises(ValueError, match="exceeds"):
        Corpus(sp.csr_matrix((1, 2 ** 31)))


def test_vocabulary_lines_split_on_newlines_only(tmp_path):
    (tmp_path / "docword.txt").write_text("1\n4\n2\n1 3 1\n1 4 2\n")
    words = ["a\u0085b", "c\u2028d", "e\x0cf", "last"]
    (tmp_path / "vocab.txt").write_bytes(("\r\n".join(words) + "\n").encode("utf-8"))
    corpus = Corpus.from_uci(tmp_path / "docword.txt", tmp_path / "vocab.txt")
    assert corpus.vocabulary == words


def test_unreadable_files_name_the_file(tmp_path):
    (tmp_path / "docword.txt.gz").write_bytes(b"\x1f\x8b" + b"not gzip data")
    with pytest.raises(ValueError, match=r"docword\.txt\.gz: not a valid gzip file"):
        Corpus.from_uci(tmp_path / "docword.txt.gz")
    (tmp_path / "docword.txt").write_text("1\n2\n1\n1 2 1\n")
    (tmp_path / "vocab.txt").write_bytes(b"ok\nbad\xff\n")
    with pytest.raises(ValueError, match=r"vocab\.txt, line 2: not valid UTF-8"):
        Corpus.from_uci(tmp_path / "docword.txt", tmp_path / "vocab.txt")


def test_split_tokens_of_very_long_documents_in_bounded_memory():
    """Documents beyond the expansion limit are split by a multivariate hypergeometric
    draw of their counts (a count of 2**31 - 1 used to expand to 2**31 entries)."""
    X = sp.csr_matrix(np.array([[3 * 10 ** 8, 7, 2 * 10 ** 6], [3, 4, 1]]))
    observed, heldout = Corpus(X).split_tokens(0.2, random_state=0)
    held = heldout.matrix.toarray()
    assert held[0].sum() == round(0.2 * X[0].sum()) and held[1].sum() == round(0.2 * 8)
    np.testing.assert_array_equal(observed.matrix.toarray() + held, X.toarray())
    assert abs(held[0, 0] / held[0].sum() - 3e8 / X[0].sum()) < 1e-3          # proportional, as expected
    np.testing.assert_array_equal(Corpus(X).split_tokens(0.2, random_state=0)[1].matrix.toarray(), held)


def test_split_tokens_of_documents_beyond_numpys_hypergeometric_limit():
    """Documents of 10**9 tokens or more (NumPy's exact sampler stops there) were
    refused; they are split exactly, by reducing the population (_hypergeometric)."""
    X = sp.csr_matrix(np.array([[2 ** 31 - 1, 5, 10 ** 9, 3], [2 ** 31 - 1, 2 ** 31 - 1, 0, 1]]))
    observed, heldout = Corpus(X).split_tokens(0.2, random_state=0)
    held = heldout.matrix.toarray()
    np.testing.assert_array_equal(held.sum(axis=1), np.rint(0.2 * X.sum(axis=1).A1))
    np.testing.assert_array_equal(observed.matrix.toarray() + held, X.toarray())
    assert abs(held[0, 0] / held[0].sum() - (2 ** 31 - 1) / X[0].sum()) < 1e-3
    np.testing.assert_array_equal(Corpus(X).split_tokens(0.2, random_state=0)[1].matrix.toarray(), held)


@pytest.mark.parametrize("counts, k", [([3, 2, 4], 4), ([5, 1, 3, 6], 11), ([4, 4], 1)])
def test_hypergeometric_reduction_is_exact(counts, k):
    """With the sampler's limit lowered to 3 items every draw goes through the
    reductions; the draws follow prod C(c_i, x_i) / C(N, k) (chi-square, p > 1e-6)."""
    from scipy.special import comb

    from bnpcore.corpus import _hypergeometric
    counts = np.array(counts, dtype=np.int64)
    rng = np.random.default_rng(1)
    n = 8000
    draws = np.array([_hypergeometric(counts, k, rng, limit=3) for _ in range(n)])
    assert np.all(draws.sum(axis=1) == k) and np.all((draws >= 0) & (draws <= counts))
    outcomes = [x for x in itertools.product(*(range(c + 1) for c in counts)) if sum(x) == k]
    pmf = np.array([np.prod([comb(c, xi) for c, xi in zip(counts, x)]) for x in outcomes]) / comb(counts.sum(), k)
    index = {x: i for i, x in enumerate(outcomes)}
    observed = np.bincount([index[tuple(d)] for d in draws], minlength=len(outcomes))
    assert chisquare(observed, n * pmf).pvalue > 1e-6


def test_from_csr_validates_unless_told_the_arrays_are_a_corpus():
    c = Corpus.from_csr([0, 3, 5], [0, 2, 2, 1, 3], [1, 2, 1, 2, 1], 4, vocabulary=["a", "b", "c", "d"])
    assert c == Corpus([[0, 2, 2, 2], [1, 1, 3]], n_words=4) and c.vocabulary == ["a", "b", "c", "d"]
    trusted = Corpus.from_csr(c.indptr, c.indices, c.counts, 4, check=False)
    assert trusted == c and np.shares_memory(trusted.indices, c.indices)
    for args, message in [(([0, 5], [0], [1], 4), "not a CSR count matrix"),
                          (([1, 1], [0], [1], 4), "not a CSR count matrix"),
                          (([0, 1], [4], [1], 4), "not a CSR count matrix"),
                          (([0, 1], [0], [-1], 4), "non-negative")]:
        with pytest.raises(ValueError, match=message):
            Corpus.from_csr(*args)


def test_blocks_of_a_small_corpus_in_memory():
    c = Corpus([[0, 1, 1], [], [2], [3, 3, 0]], n_words=4)
    blocks = list(c.blocks(n_entries=2))        # 4 documents over 6 entries: one document per block
    assert [(start, chunk.matrix.toarray().tolist(), tokens) for start, chunk, tokens in blocks] == [
        (0, [[1, 2, 0, 0]], slice(0, 3)), (1, [[0, 0, 0, 0]], slice(3, 3)), (2, [[0, 0, 1, 0]], slice(3, 4)),
        (3, [[1, 0, 0, 2]], slice(4, 7))]
    words, _ = c.tokens()
    assert np.concatenate([words[tokens] for _, _, tokens in c.blocks(n_entries=3)]).tolist() == words.tolist()
