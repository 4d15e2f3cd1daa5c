"""Sufficient statistics: named arrays along a component axis, closed under the
operations that learning algorithms and component moves need.

A local step (a kernel over a minibatch, a thread's share of a corpus, a Dask
worker's partition) returns a :class:`SuffStats`; a global step consumes one.
Because they are additive, statistics of disjoint pieces of data are reduced by
summing (``sum(parts)`` works), stochastic updates scale them
(``stats.scale(n / S)``), and the component moves of
:mod:`bnpcore.inference.moves` have their counterparts here: ``select``,
``permute``, ``merge`` and ``split`` (bnpy's ``SuffStatBag``; gensim's
``LdaState.merge``).

Each field is an array whose component axis is given by ``axes`` (default 0;
``None`` for a field without one, such as a document count). Word statistics of
a minibatch are usually kept over the minibatch's own vocabulary: pass
``vocab`` (the global word id of each column) and name the fields whose *last*
axis runs over it in ``word_fields``; adding two statistics with different
vocabularies aligns them on the union of their words.

Expected counts of collapsed variational methods (LDA's CVB and SVB, the
Bayes-net estimators) start from :func:`random_responsibilities` and, under
sequential sweeps, are recomputed every :data:`RECOUNT_EVERY` sweeps.
"""
import numbers

import numpy as np

__all__ = ["SuffStats", "RECOUNT_EVERY", "random_responsibilities"]

#: Sweeps between recomputations of incrementally updated expected counts.
#: Sequential sweeps update the expected counts incrementally; rounding drifts
#: them from sum c r, by a few units of rounding a sweep, and counts that
#: should be 0 go slightly negative (the kernels clamp them at 0, so nothing
#: breaks). Not needed for correctness, then, but the drift grows with the
#: sweeps: recomputing the counts from the responsibilities every few sweeps
#: (a pass over the nnz x K rows costing about half a CVB0 sweep, so ~5% of a
#: run) keeps it at the level of a few sweeps for runs of any length (the
#: drift on KOS: benchmarks/results/design_choices.txt).
RECOUNT_EVERY = 10


def random_responsibilities(rng, n, K):
    """``n`` random responsibility rows over ``K`` components, the start of a
    variational fit: uniform draws from ``rng`` plus 1e-3, normalised to sum
    to 1; an (n, K) float64 array."""
    r = rng.random((n, K))
    r += 1e-3
    r /= r.sum(axis=1, keepdims=True)
    return r


class SuffStats:
    """Additive sufficient statistics with named fields.

    Parameters
    ----------
    fields : dict of str -> array-like
        The statistics. Arrays are stored as float64 or int64 (integer fields
        stay integers under ``+``, ``select``, ``merge``, ``split``; ``scale``
        makes them float).
    axes : dict of str -> int or None, optional
        Component axis of each field; fields not listed use axis 0, or None
        when they are scalars.
    vocab : array-like of int, optional
        Global word ids of the last axis of the ``word_fields``.
    word_fields : iterable of str
        Fields whose last axis is indexed by ``vocab``.

    Examples
    --------
    >>> a = SuffStats({"words": [[1., 2.], [0., 3.]], "sizes": [1., 2.], "n_docs": 4})
    >>> b = a.scale(0.5)
    >>> (a + b).allclose(a.scale(1.5))
    True
    >>> a.permute([1, 0])["sizes"]
    array([2., 1.])
    >>> a.merge(0, 1)["words"]
    array([[1., 5.]])
    """

    __slots__ = ("_fields", "_axes", "vocab", "word_fields")

    def __init__(self, fields, axes=None, vocab=None, word_fields=()):
        axes = dict(axes or {})
        self._fields, self._axes = {}, {}
        for name, value in fields.items():
            arr = np.asarray(value)
            if arr.dtype.kind not in "biuf":
                raise TypeError(f"statistic {name!r} must be numeric, got dtype {arr.dtype}")
            arr = arr.astype(np.int64 if arr.dtype.kind in "biu" else np.float64, copy=False)
            axis = axes.pop(name, 0 if arr.ndim else None)
            if axis is not None and not 0 <= axis < arr.ndim:
                raise ValueError(f"statistic {name!r} of shape {arr.shape} has no axis {axis}")
            self._fields[name], self._axes[name] = arr, axis
        if axes:
            raise ValueError(f"axes given for unknown statistics {sorted(axes)}")
        self.word_fields = tuple(word_fields)
        unknown = set(self.word_fields) - set(self._fields)
        if unknown:
            raise ValueError(f"word_fields names unknown statistics {sorted(unknown)}")
        self.vocab = None if vocab is None else np.asarray(vocab, dtype=np.int64)
        if self.vocab is not None:
            for name in self.word_fields:
                if self._fields[name].shape[-1] != len(self.vocab):
                    raise ValueError(f"statistic {name!r} has {self._fields[name].shape[-1]} word columns, "
                                     f"vocab has {len(self.vocab)}")
        sizes = {arr.shape[self._axes[n]] for n, arr in self._fields.items() if self._axes[n] is not None}
        if len(sizes) > 1:
            raise ValueError(f"statistics disagree on the number of components: {sorted(sizes)}")

    # -- access ----------------------------------------------------------------
    def __getitem__(self, name):
        return self._fields[name]

    def __contains__(self, name):
        return name in self._fields

    def keys(self):
        return self._fields.keys()

    def items(self):
        return self._fields.items()

    def axis(self, name):
        """Component axis of field ``name`` (None: no component axis)."""
        return self._axes[name]

    @property
    def n_components(self):
        """Length of the component axis (0 when no field has one)."""
        for name, arr in self._fields.items():
            if self._axes[name] is not None:
                return arr.shape[self._axes[name]]
        return 0

    def __repr__(self):
        shapes = ", ".join(f"{k}{list(v.shape)}" for k, v in self._fields.items())
        return f"SuffStats({shapes}; {self.n_components} components)"

    # -- building ------------------------------------------------------------------
    def _new(self, fields, vocab=None):
        out = object.__new__(SuffStats)
        out._fields, out._axes = fields, self._axes
        out.vocab = self.vocab if vocab is None else vocab
        out.word_fields = self.word_fields
        return out

    def _map(self, fn):
        """Apply ``fn(array, axis)`` to every field (axis None for fields without one)."""
        return self._new({k: fn(v, self._axes[k]) for k, v in self._fields.items()})

    def copy(self):
        return self._map(lambda a, axis: a.copy())

    # -- algebra ---------------------------------------------------------------------
    def _aligned(self, other):
        if not isinstance(other, SuffStats):
            raise TypeError(f"cannot combine SuffStats with {type(other).__name__}")
        if self._fields.keys() != other._fields.keys() or self._axes != other._axes:
            raise ValueError(f"statistics with different fields: {sorted(self._fields)} vs {sorted(other._fields)}")
        if self.n_components != other.n_components:
            raise ValueError(f"statistics over {self.n_components} and {other.n_components} components; "
                             "pad or select first")
        a, b = self, other
        if self.vocab is not None and other.vocab is not None and not np.array_equal(self.vocab, other.vocab):
            union = np.union1d(self.vocab, other.vocab)
            a, b = self._on_vocab(union), other._on_vocab(union)
        return a, b

    def _on_vocab(self, vocab):
        """The same statistics over the word columns ``vocab`` (a superset of ``self.vocab``)."""
        cols = np.searchsorted(vocab, self.vocab)
        fields = dict(self._fields)
        for name in self.word_fields:
            arr = fields[name]
            wide = np.zeros(arr.shape[:-1] + (len(vocab),), dtype=arr.dtype)
            wide[..., cols] = arr
            fields[name] = wide
        return self._new(fields, vocab)

    def __add__(self, other):
        a, b = self._aligned(other)
        return a._new({k: v + b._fields[k] for k, v in a._fields.items()})

    def __radd__(self, other):
        if isinstance(other, numbers.Number) and other == 0:     # sum(parts)
            return self.copy()
        return NotImplemented

    def scale(self, c):
        """Every statistic times ``c`` (float)."""
        c = float(c)
        return self._map(lambda a, axis: a * c)

    def allclose(self, other, rtol=1e-12, atol=1e-12):
        """Same fields, equal within tolerance (word columns aligned first)."""
        a, b = self._aligned(other)
        return all(np.allclose(v, b._fields[k], rtol=rtol, atol=atol) for k, v in a._fields.items())

    # -- the component axis ------------------------------------------------------------
    def select(self, keep):
        """The components ``keep`` (a boolean mask or integer indices, in that order)."""
        keep = np.asarray(keep)
        if keep.dtype == bool:
            if keep.shape != (self.n_components,):
                raise ValueError(f"mask of shape {keep.shape} for {self.n_components} components")
            keep = np.flatnonzero(keep)
        return self._map(lambda a, axis: a if axis is None else np.take(a, keep, axis=axis))

    def permute(self, order):
        """Component ``order[i]`` moved to position i (``order`` a permutation)."""
        order = np.asarray(order, dtype=np.int64)
        if order.shape != (self.n_components,) or not np.array_equal(np.sort(order), np.arange(len(order))):
            raise ValueError(f"not a permutation of {self.n_components} components: {order}")
        return self.select(order)

    def merge(self, j, k):
        """Component ``k`` added into component ``j`` and removed; components after
        ``k`` move down by one."""
        K = self.n_components
        if not (0 <= j < K and 0 <= k < K) or j == k:
            raise ValueError(f"cannot merge components {j} and {k} of {K}")

        def fold(a, axis):
            if axis is None:
                return a
            a = a.copy()
            index = [slice(None)] * a.ndim
            index[axis] = j
            into = tuple(index)
            index[axis] = k
            a[into] += a[tuple(index)]
            return np.delete(a, k, axis=axis)
        return self._map(fold)

    def split(self, k, first, second):
        """Component ``k`` replaced by ``first`` and ``second`` appended last (dicts
        of field -> values of one component, for every field with a component axis)."""
        K = self.n_components
        if not 0 <= k < K:
            raise ValueError(f"cannot split component {k} of {K}")
        fields = {n for n, axis in self._axes.items() if axis is not None}
        if set(first) != fields or set(second) != fields:
            raise ValueError(f"a split gives every field with a component axis: {sorted(fields)}")
        out = {}
        for name, a in self._fields.items():
            axis = self._axes[name]
            if axis is None:
                out[name] = a
                continue
            a = np.insert(a, K, second[name], axis=axis)
            index = [slice(None)] * a.ndim
            index[axis] = k
            a[tuple(index)] = first[name]
            out[name] = a
        return self._new(out)
