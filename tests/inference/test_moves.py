"""Every component move against a hand-built state, in both layouts."""
import numpy as np
import pytest

from bnpcore.inference import moves
from bnpcore.inference.moves import Components


def build(indirect, K=4, W=3, capacity=4):
    """Components 0..K-1 with rows k * 10 + (0, 1, 2) (offset 0.5 included) and sizes k + 1."""
    comp = Components({"words": ((W,), np.float64), "sizes": ((), np.float64), "alive": ((), np.uint8)},
                      capacity=capacity, offsets={"words": 0.5}, indirect=indirect, flags=("alive",))
    slots = comp.add(K)
    for k, s in enumerate(slots):
        comp.arrays["words"][s] += k * 10 + np.arange(W)
        comp.arrays["sizes"][s] = k + 1
        comp.arrays["alive"][s] = 1
    return comp


def rows(comp):
    return comp["words"] - 0.5


@pytest.fixture(params=[False, True], ids=["direct", "indirect"])
def indirect(request):
    return request.param


def test_add_grows_capacity_and_starts_at_the_prior(indirect):
    comp = build(indirect, capacity=2)
    assert comp.n == 4 and comp.capacity >= 4
    np.testing.assert_array_equal(rows(comp), [[0, 1, 2], [10, 11, 12], [20, 21, 22], [30, 31, 32]])
    comp.add(1)
    np.testing.assert_array_equal(comp["words"][4], [0.5, 0.5, 0.5])
    assert comp["sizes"][4] == 0


def test_reorder_by_size(indirect):
    comp = build(indirect)
    order = moves.reorder(comp, comp["sizes"])
    np.testing.assert_array_equal(order, [3, 2, 1, 0])
    np.testing.assert_array_equal(comp["sizes"], [4, 3, 2, 1])
    np.testing.assert_array_equal(rows(comp)[:, 0], [30, 20, 10, 0])
    assert moves.reorder(comp, comp["sizes"]) is None          # already sorted
    ties = build(indirect)
    assert moves.reorder(ties, np.array([1.0, 2.0, 2.0, 0.0])).tolist() == [1, 2, 0, 3]   # stable
    many = build(indirect, K=40, capacity=64)             # long enough for an unstable sort to show
    order = moves.reorder(many, np.repeat([1.0, 2.0], 20))
    assert order.tolist() == list(range(20, 40)) + list(range(20))


def test_prune_and_renumber(indirect):
    comp = build(indirect)
    mapping = moves.prune(comp, comp["sizes"], threshold=2.5)
    np.testing.assert_array_equal(mapping, [-1, -1, 0, 1])
    np.testing.assert_array_equal(comp["sizes"], [3, 4])
    np.testing.assert_array_equal(mapping[np.array([2, 3, 3])], [0, 1, 1])       # assignments renumbered
    assert moves.prune(comp, comp["sizes"], threshold=0.0) is None
    kept = moves.prune(comp, comp["sizes"], threshold=10.0, keep_largest=True)
    assert comp.n == 1 and comp["sizes"][0] == 4 and kept.tolist() == [-1, 0]


def test_freed_positions_are_reused_in_the_indirect_layout():
    comp = build(True)
    moves.prune(comp, comp["sizes"], threshold=2.5)
    cap = comp.capacity
    comp.add(2)
    assert comp.capacity == cap and comp.n == 4
    np.testing.assert_array_equal(comp["words"][2:], 0.5)        # reused rows are reset to the prior


def test_compact_drops_empty_components_and_sorts(indirect):
    comp = build(indirect)
    size = np.array([2.0, 0.0, 5.0, 1.0])
    mapping = moves.compact(comp, size)
    np.testing.assert_array_equal(mapping, [1, -1, 0, 2])
    np.testing.assert_array_equal(rows(comp)[:, 0], [20, 0, 30])
    if not indirect:      # freed positions are back at the prior
        np.testing.assert_array_equal(comp.arrays["words"][3], 0.5)


def test_merge_counts_the_prior_once_and_keeps_flags(indirect):
    comp = build(indirect)
    mapping = comp.merge(0, 2)
    np.testing.assert_array_equal(mapping, [0, 1, 0, 2])
    np.testing.assert_array_equal(rows(comp), [[20, 22, 24], [10, 11, 12], [30, 31, 32]])
    np.testing.assert_array_equal(comp["sizes"], [4, 2, 4])
    np.testing.assert_array_equal(comp["alive"], [1, 1, 1])
    comp = build(indirect)
    mapping = moves.merge_pairs(comp, [(3, 0), (1, 2)])
    np.testing.assert_array_equal(mapping, [1, 0, 0, 1])
    np.testing.assert_array_equal(rows(comp), [[30, 32, 34], [30, 32, 34]])
    with pytest.raises(ValueError):
        moves.merge_pairs(comp, [(0, 1), (1, 0)])


def test_split_sets_both_halves(indirect):
    comp = build(indirect)
    k = comp.split(1, {"words": np.array([6.5, 6.5, 6.5]), "sizes": 1.5}, {"words": np.array([4.5, 5.5, 6.5])})
    assert k == 4 and comp.n == 5
    np.testing.assert_array_equal(rows(comp)[1], [6, 6, 6])
    np.testing.assert_array_equal(rows(comp)[4], [4, 5, 6])
    np.testing.assert_array_equal(comp["sizes"][[1, 4]], [1.5, 0.0])     # not given: the offset
    assert comp["alive"][4] == 1
    merged = comp.merge(1, 4)                      # split then merge (offset counted once) is the identity
    assert merged[4] == 1 and comp.n == 4
    np.testing.assert_allclose(rows(comp)[1], [10, 11, 12])
    with pytest.raises(ValueError, match="unknown fields"):
        comp.split(0, {"nope": 1.0}, {})
    with pytest.raises(IndexError):
        comp.split(4, {}, {})


def test_direct_kernel_growth():
    comp = build(False)
    comp.reserve(8)
    comp.arrays["sizes"][4] = 9.0                  # a kernel instantiated component 4 in place
    comp.n = 5
    assert comp["sizes"][4] == 9.0
    with pytest.raises(ValueError):
        comp.n = 100
    with pytest.raises(ValueError):
        build(True).n = 2


def test_component_axis_other_than_zero():
    comp = Components({"ndk": np.zeros((3, 4), dtype=np.int32), "nk": np.zeros(4, dtype=np.int64)},
                      axes={"ndk": 1}, n=3)
    comp.arrays["ndk"][:, :3] = [[1, 0, 2], [0, 0, 1], [3, 0, 0]]
    comp.arrays["nk"][:3] = [4, 0, 3]
    mapping = moves.compact(comp, comp["nk"])
    np.testing.assert_array_equal(mapping, [0, -1, 1])
    np.testing.assert_array_equal(comp["ndk"], [[1, 2], [0, 1], [3, 0]])
    np.testing.assert_array_equal(comp.arrays["ndk"][:, 2:], 0)
