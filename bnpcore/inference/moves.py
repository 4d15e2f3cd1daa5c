"""Component moves: grow capacity, prune, reorder by size, merge, split.

Every model whose number of components changes keeps its per-component state
in a :class:`Components` table (named arrays sharing one component axis, with
spare capacity so that kernels can instantiate components in place) and edits
it only through the moves below: truncation-free SVI and its truncated
baselines (pruning and reordering of sticks), the direct-assignment HDP Gibbs
sampler (dropping empty topics, sorting by size), ADF/EP for NGGP mixtures
(capacity, dead clusters, merges) and split-merge variational HDPs.

Two layouts:

* **direct** (default): component k is at position k of every array, so a
  kernel can index it; removing or permuting moves the data.
* **indirect** (``indirect=True``): ``slots[k]`` is the physical position of
  component k; removing or permuting edits ``slots`` only and freed positions
  are reused, so a large (K, W) array is never copied to reorder it.

Fields may hold a prior ``offset`` on top of their statistics (e.g. a Dirichlet
parameter ``eta + counts``): a merge then counts the prior once.

Every move that renumbers components returns ``mapping``, an int64 array from
old to new indices (-1 for a removed component); ``mapping[labels]`` renumbers
assignments (topic indicators of tokens, cluster labels of documents).
"""
import numpy as np

__all__ = ["Components", "prune", "reorder", "compact", "merge_pairs"]


class Components:
    """Named per-component arrays with spare capacity along a component axis.

    Parameters
    ----------
    fields : dict of str -> (shape, dtype) or ndarray
        Either the shape of the *other* axes and the dtype (a zero array with
        ``capacity`` components is allocated), or an existing array whose
        component axis holds the capacity.
    axes : dict of str -> int, optional
        Component axis of each field (default 0).
    n : int, default 0
        Components in use (positions 0..n-1 of the given arrays).
    capacity : int, default 8
        Initial capacity for fields given as (shape, dtype).
    offsets : dict of str -> float, optional
        Prior value a field holds for a component with no statistics.
    indirect : bool, default False
        Indirect layout (see the module docstring).
    flags : iterable of str
        Fields that are not statistics (e.g. an "alive" flag): a merge keeps
        the surviving component's value and a split copies it.
    """

    def __init__(self, fields, axes=None, n=0, capacity=8, offsets=None, indirect=False, flags=()):
        axes = dict(axes or {})
        self.axes = {name: axes.get(name, 0) for name in fields}
        self.offsets = dict(offsets or {})
        self.flags = frozenset(flags)
        self.indirect = bool(indirect)
        self.arrays = {}
        for name, spec in fields.items():
            if isinstance(spec, np.ndarray):
                self.arrays[name] = spec
            else:
                shape, dtype = spec
                shape = list(shape)
                shape.insert(self.axes[name], max(int(capacity), 1))
                self.arrays[name] = _filled(shape, self.offsets.get(name, 0), dtype)
        caps = {a.shape[self.axes[k]] for k, a in self.arrays.items()}
        if len(caps) != 1:
            raise ValueError(f"fields disagree on the capacity: {sorted(caps)}")
        cap = caps.pop()
        if not 0 <= n <= cap:
            raise ValueError(f"n={n} components do not fit a capacity of {cap}")
        self.slots = np.arange(n, dtype=np.int64)
        self._free = list(range(cap - 1, n - 1, -1))     # indirect layout: unused positions, next last

    # -- sizes -----------------------------------------------------------------
    @property
    def n(self):
        """Components in use."""
        return len(self.slots)

    @n.setter
    def n(self, value):
        """Direct layout: a kernel instantiated components n..value-1 in place."""
        if self.indirect:
            raise ValueError("set n only in the direct layout; use add() in the indirect one")
        if not 0 <= value <= self.capacity:
            raise ValueError(f"n={value} exceeds the capacity {self.capacity}")
        self.slots = np.arange(value, dtype=np.int64)

    @property
    def capacity(self):
        name = next(iter(self.arrays))
        return self.arrays[name].shape[self.axes[name]]

    def __getitem__(self, name):
        """Field ``name`` over the components in use, in component order (a view
        in the direct layout, a copy in the indirect one)."""
        arr, axis = self.arrays[name], self.axes[name]
        if self.indirect:
            return np.take(arr, self.slots, axis=axis)
        index = [slice(None)] * arr.ndim
        index[axis] = slice(0, self.n)
        return arr[tuple(index)]

    def _slice(self, name, pos):
        """Index tuple selecting physical position(s) ``pos`` of field ``name``."""
        index = [slice(None)] * self.arrays[name].ndim
        index[self.axes[name]] = pos
        return tuple(index)

    def _reset(self, pos):
        for name, arr in self.arrays.items():
            arr[self._slice(name, pos)] = self.offsets.get(name, 0)

    # -- moves ---------------------------------------------------------------------
    def reserve(self, capacity):
        """Grow capacity to at least ``capacity`` by doubling; new positions hold the offsets."""
        old = self.capacity
        if capacity <= old:
            return
        new = old
        while new < capacity:     # powers of two times the start: an exact-size table ran slower than
            new *= 2              # a power of two (benchmarks/results/design_choices.txt)
        for name, arr in self.arrays.items():
            shape = list(arr.shape)
            shape[self.axes[name]] = new
            grown = _filled(shape, self.offsets.get(name, 0), arr.dtype)
            grown[self._slice(name, slice(0, old))] = arr
            self.arrays[name] = grown
        self._free[:0] = range(new - 1, old - 1, -1)

    def add(self, m=1):
        """Append ``m`` components at their prior; returns their physical positions."""
        m = int(m)
        if self.indirect:
            if len(self._free) < m:
                self.reserve(self.capacity + m - len(self._free))
            new = np.array([self._free.pop() for _ in range(m)], dtype=np.int64)
        else:
            self.reserve(self.n + m)
            new = np.arange(self.n, self.n + m, dtype=np.int64)
        self._reset(new)
        self.slots = np.concatenate([self.slots, new])
        return new

    def permute(self, order):
        """Component ``order[i]`` moves to position i."""
        order = np.asarray(order, dtype=np.int64)
        if order.shape != (self.n,) or not np.array_equal(np.sort(order), np.arange(self.n)):
            raise ValueError(f"not a permutation of {self.n} components")
        self._keep(order)

    def remove(self, keep):
        """Delete the components where the boolean mask ``keep`` is False; returns the mapping."""
        keep = np.asarray(keep, dtype=bool)
        if keep.shape != (self.n,):
            raise ValueError(f"mask of shape {keep.shape} for {self.n} components")
        mapping = np.full(self.n, -1, dtype=np.int64)
        mapping[keep] = np.arange(int(keep.sum()))
        self._keep(np.flatnonzero(keep))
        return mapping

    def _keep(self, order):
        """Keep components ``order`` (distinct indices), in that order."""
        n = self.n
        if self.indirect:
            dropped = np.setdiff1d(np.arange(n), order)
            self._free.extend(int(p) for p in self.slots[dropped][::-1])
            self.slots = self.slots[order]
            return
        m = len(order)
        if m == n and np.array_equal(order, np.arange(n)):
            return
        for name, arr in self.arrays.items():
            # np.take without its bounds check (order holds valid positions): a sampler's (W, K)
            # counts are reordered every sweep, and fancy indexing along axis 1 is several times slower
            arr[self._slice(name, slice(0, m))] = np.take(arr, order, axis=self.axes[name], mode="clip")
        self._reset(np.arange(m, n))
        self.slots = np.arange(m, dtype=np.int64)

    def merge(self, j, k):
        """Add component ``k`` into ``j`` (the prior counted once) and remove ``k``;
        returns the mapping (``k`` maps to the new index of ``j``)."""
        return merge_pairs(self, [(j, k)])

    def split(self, k, first, second):
        """Component ``k`` becomes two: ``first`` (dict of field -> values of one
        component) replaces its values and ``second`` is appended as a new last
        component; returns the new component's index. Flags are copied; other
        fields not given keep their value in ``k`` and start at their offset in
        the new component. (To move a part of ``k`` out, pass ``k - part`` and
        ``offset + part``.)"""
        if not 0 <= k < self.n:
            raise IndexError(f"component {k} out of range for {self.n}")
        unknown = (set(first) | set(second)) - set(self.arrays)
        if unknown:
            raise ValueError(f"unknown fields {sorted(unknown)}")
        src = self.slots[k]
        new = self.add(1)[0]
        for name in self.flags:
            arr = self.arrays[name]
            arr[self._slice(name, new)] = arr[self._slice(name, src)]
        for pos, values in ((src, first), (new, second)):
            for name, value in values.items():
                self.arrays[name][self._slice(name, pos)] = value
        return self.n - 1


def _filled(shape, value, dtype):
    # np.zeros for zero: pages of unused spare capacity are never touched
    return np.zeros(shape, dtype) if value == 0 else np.full(shape, value, dtype)


def reorder(comp, key):
    """Sort the components by ``key`` (length n), largest first, ties in their
    current order. Returns the permutation applied, or None when already sorted."""
    key = np.asarray(key)
    if key.shape != (comp.n,):
        raise ValueError(f"key of shape {key.shape} for {comp.n} components")
    if key.size < 2 or np.all(key[:-1] >= key[1:]):
        return None
    order = np.argsort(-key, kind="stable")
    comp.permute(order)
    return order


def prune(comp, size, threshold, keep_largest=False):
    """Remove the components whose ``size`` is below ``threshold``; with
    ``keep_largest`` the largest one survives even then (a truncated model keeps
    one component). Returns the mapping, or None when nothing was removed."""
    size = np.asarray(size)
    keep = size >= threshold
    if keep_largest and comp.n and not keep.any():
        keep[np.argmax(size)] = True
    if keep.all():
        return None
    return comp.remove(keep)


def compact(comp, size):
    """Drop the components of zero ``size`` and sort the others by size, largest
    first (ties in their current order). Returns the combined mapping."""
    size = np.asarray(size)
    order = np.argsort(-size, kind="stable")
    order = order[size[order] > 0]
    mapping = np.full(comp.n, -1, dtype=np.int64)
    mapping[order] = np.arange(len(order))
    comp._keep(order)
    return mapping


def merge_pairs(comp, pairs):
    """Merge each pair (j, k): k's statistics are added into j (offsets counted
    once) and k is removed. A component may appear in at most one pair. Returns
    the mapping (each k maps to the new index of its j)."""
    pairs = [(int(j), int(k)) for j, k in pairs]
    flat = [c for pair in pairs for c in pair]
    if len(set(flat)) != len(flat) or any(not 0 <= c < comp.n for c in flat) or any(j == k for j, k in pairs):
        raise ValueError(f"merge pairs must be distinct components in [0, {comp.n}): {pairs}")
    target = np.arange(comp.n, dtype=np.int64)
    for j, k in pairs:
        sj, sk = comp.slots[j], comp.slots[k]
        for name, arr in comp.arrays.items():
            if name not in comp.flags:
                arr[comp._slice(name, sj)] += arr[comp._slice(name, sk)] - comp.offsets.get(name, 0)
        target[k] = j
    keep = np.ones(comp.n, dtype=bool)
    keep[[k for _, k in pairs]] = False
    mapping = comp.remove(keep)
    return mapping[target]
