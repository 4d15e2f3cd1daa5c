"""Count-matrix helpers (bnpcore.kernels.sparse) against NumPy and scipy.sparse."""
import numpy as np
import pytest
import scipy.sparse

from bnpcore.kernels.sparse import expand_tokens


def random_csr(seed, n_docs=40, n_words=30):
    rng = np.random.default_rng(seed)
    dense = rng.poisson(0.4, size=(n_docs, n_words)) * (rng.random((n_docs, n_words)) < 0.5)
    dense[::7] = 0  # empty documents
    m = scipy.sparse.csr_matrix(dense)
    m.sort_indices()
    return m.indptr.astype(np.int64), m.indices.astype(np.int32), m.data.astype(np.int32), dense


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_expand_tokens_matches_numpy(seed):
    indptr, indices, counts, dense = random_csr(seed)
    word_ids, token_ptr = expand_tokens(indptr, indices, counts)
    assert word_ids.dtype == np.int32 and token_ptr.dtype == np.int64
    np.testing.assert_array_equal(word_ids, np.repeat(indices, counts))
    np.testing.assert_array_equal(token_ptr, np.concatenate([[0], np.cumsum(dense.sum(axis=1))]))
    for j in range(dense.shape[0]):  # each document's tokens are its counts, word by word
        doc = word_ids[token_ptr[j]:token_ptr[j + 1]]
        np.testing.assert_array_equal(np.bincount(doc, minlength=dense.shape[1]), dense[j])


def test_expand_tokens_edge_cases():
    w, t = expand_tokens(np.zeros(1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32))
    assert w.shape == (0,) and t.tolist() == [0]
    w, t = expand_tokens(np.array([0, 0, 0], np.int64), np.zeros(0, np.int32), np.zeros(0, np.int32))
    assert w.shape == (0,) and t.tolist() == [0, 0, 0]
    # zero counts are allowed and give no tokens; read-only and non-contiguous input works
    indptr = np.array([0, 2, 3], np.int64)
    indices = np.array([4, 1, 2], np.int32)
    counts = np.array([0, 3, 1], np.int32)
    for a in (indptr, indices, counts):
        a.flags.writeable = False
    w, t = expand_tokens(indptr, indices, counts)
    assert w.tolist() == [1, 1, 1, 2] and t.tolist() == [0, 3, 4]
    strided = np.array([0, 9, 2, 9, 3], np.int64)[::2]
    w, t = expand_tokens(strided, indices, counts)
    assert w.tolist() == [1, 1, 1, 2]


GOOD = (np.array([0, 2, 3], np.int64), np.array([0, 1, 1], np.int32), np.array([2, 1, 4], np.int32))


@pytest.mark.parametrize(
    "args, exc, match",
    [
        ((GOOD[0].astype(np.int32), GOOD[1], GOOD[2]), TypeError, "indptr"),
        ((GOOD[0], GOOD[1].astype(np.int64), GOOD[2]), TypeError, "indices"),
        ((GOOD[0], GOOD[1], GOOD[2].astype(np.float64)), TypeError, "counts"),
        ((GOOD[0], GOOD[1], GOOD[2].astype(bool)), TypeError, "counts"),
        ((GOOD[0], GOOD[1], [2, 1, 4]), TypeError, "counts"),
        ((np.zeros(0, np.int64), GOOD[1][:0], GOOD[2][:0]), ValueError, "indptr"),
        ((GOOD[0][None, :], GOOD[1], GOOD[2]), ValueError, "one-dimensional"),
        ((GOOD[0], GOOD[1][:2], GOOD[2]), ValueError, "differ in length"),
        ((np.array([1, 2, 3], np.int64), GOOD[1], GOOD[2]), ValueError, "indptr"),
        ((np.array([0, 2, 4], np.int64), GOOD[1], GOOD[2]), ValueError, "indptr"),
        ((np.array([0, 3, 2, 3], np.int64), GOOD[1], GOOD[2]), ValueError, "indptr"),
        ((GOOD[0], GOOD[1], np.array([2, -1, 4], np.int32)), ValueError, "non-negative"),
    ],
)
def test_expand_tokens_bad_input(args, exc, match):
    with pytest.raises(exc, match=match):
        expand_tokens(*args)
