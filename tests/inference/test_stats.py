"""SuffStats algebra against plain NumPy."""
import numpy as np
import pytest

from bnpcore.inference.stats import SuffStats


def make(rng, K=4, V=5, vocab=None):
    """Word statistics (K, V), sizes (K,), a word-major block (V, K) and a scalar."""
    return SuffStats({"words": rng.random((K, V)), "sizes": rng.random(K), "word_topic": rng.random((V, K)),
                      "n_docs": 7.0}, axes={"word_topic": 1})


@pytest.fixture
def rng():
    return np.random.default_rng(0)


def test_add_is_fieldwise(rng):
    a, b = make(rng), make(rng)
    assert (a + b).allclose(b + a) and not (a + b).allclose(a)
    for name in a.keys():
        np.testing.assert_allclose((a + b)[name], a[name] + b[name], rtol=1e-15)
    assert (a + b)["n_docs"] == 14.0


def test_sum_of_parts_and_scale(rng):
    parts = [make(rng) for _ in range(3)]
    total = sum(parts)
    np.testing.assert_allclose(total["words"], sum(p["words"] for p in parts))
    half = total.scale(0.5)
    np.testing.assert_allclose(half["sizes"], 0.5 * total["sizes"])
    assert half["n_docs"] == 10.5


def test_select_permute_merge_against_numpy(rng):
    a = make(rng)
    keep = np.array([True, False, True, True])
    sel = a.select(keep)
    np.testing.assert_array_equal(sel["words"], a["words"][keep])
    np.testing.assert_array_equal(sel["word_topic"], a["word_topic"][:, keep])
    assert sel["n_docs"] == a["n_docs"] and sel.n_components == 3
    order = [2, 0, 3, 1]
    perm = a.permute(order)
    np.testing.assert_array_equal(perm["sizes"], a["sizes"][order])
    np.testing.assert_array_equal(perm["word_topic"], a["word_topic"][:, order])
    merged = a.merge(1, 3)
    want = a["words"].copy()
    want[1] += want[3]
    np.testing.assert_array_equal(merged["words"], np.delete(want, 3, axis=0))
    wt = a["word_topic"].copy()
    wt[:, 1] += wt[:, 3]
    np.testing.assert_array_equal(merged["word_topic"], np.delete(wt, 3, axis=1))
    assert merged.n_components == 3 and a.n_components == 4       # a is unchanged
    assert merged["word_topic"].flags.c_contiguous


def test_split_sets_both_halves(rng):
    a = make(rng)
    first = {"words": np.arange(5.0), "sizes": 1.0, "word_topic": np.ones(5)}
    second = {"words": -np.arange(5.0), "sizes": 2.0, "word_topic": np.zeros(5)}
    b = a.split(1, first, second)
    assert b.n_components == 5 and a.n_components == 4 and b["n_docs"] == 7.0
    np.testing.assert_array_equal(b["words"][[1, 4]], [first["words"], second["words"]])
    np.testing.assert_array_equal(b["sizes"], [a["sizes"][0], 1.0, a["sizes"][2], a["sizes"][3], 2.0])
    np.testing.assert_array_equal(b["word_topic"][:, [1, 4]], np.column_stack([np.ones(5), np.zeros(5)]))
    np.testing.assert_array_equal(b["word_topic"][:, [0, 2, 3]], a["word_topic"][:, [0, 2, 3]])
    again = b.merge(1, 4)                 # merge after a split adds the halves
    np.testing.assert_array_equal(again["words"][1], np.zeros(5))
    with pytest.raises(ValueError, match="every field"):
        a.split(0, {"words": np.ones(5)}, second)
    with pytest.raises(ValueError, match="cannot split"):
        a.split(4, first, second)


def test_integer_fields_stay_integers():
    a = SuffStats({"counts": np.array([[1, 2], [3, 4]], dtype=np.int32)})
    assert (a + a)["counts"].dtype == np.int64 and a.merge(0, 1)["counts"].tolist() == [[4, 6]]
    assert a.scale(0.5)["counts"].dtype == np.float64


def test_word_columns_are_aligned_on_the_union():
    a = SuffStats({"block": [[1.0, 2.0]], "sizes": [3.0]}, vocab=[5, 1], word_fields=("block",))
    b = SuffStats({"block": [[10.0, 20.0]], "sizes": [1.0]}, vocab=[1, 7], word_fields=("block",))
    c = a + b
    np.testing.assert_array_equal(c.vocab, [1, 5, 7])
    np.testing.assert_array_equal(c["block"], [[2.0 + 10.0, 1.0, 20.0]])
    np.testing.assert_array_equal(c["sizes"], [4.0])
    assert c.allclose(b + a) and not c.allclose(a + a)


@pytest.mark.parametrize("bad", [
    lambda: SuffStats({"a": np.ones((2, 3)), "b": np.ones(4)}),            # different numbers of components
    lambda: SuffStats({"a": np.ones(3)}, axes={"a": 1}),                   # no such axis
    lambda: SuffStats({"a": np.ones(3)}, axes={"b": 0}),                   # unknown field
    lambda: SuffStats({"a": ["x"]}),                                       # not numeric
    lambda: SuffStats({"a": np.ones((1, 2))}, vocab=[1, 2, 3], word_fields=("a",)),
    lambda: SuffStats({"a": np.ones(3)}) + SuffStats({"b": np.ones(3)}),
    lambda: SuffStats({"a": np.ones(3)}) + SuffStats({"a": np.ones(2)}),
    lambda: SuffStats({"a": np.ones(3)}).permute([0, 0, 1]),
    lambda: SuffStats({"a": np.ones(3)}).merge(1, 1),
    lambda: SuffStats({"a": np.ones(3)}).select(np.array([True, False])),
])
def test_mismatches_are_errors(bad):
    with pytest.raises((ValueError, TypeError)):
        bad()
