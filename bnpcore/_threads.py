"""Elementwise array work, and independent calls, on several threads.

NumPy's and SciPy's ufuncs and the array functions of
``bnpcore.kernels.special`` release the GIL, so an elementwise expression
evaluated block of rows by block of rows on a thread pool runs in parallel and
gives the values of one call over all rows, bit for bit. The training loops use
this for their O((documents + words) x topics) steps between two parallel
kernels (digammas and log-gammas of the counts, bound terms), which on one
thread capped the speed-up of a whole iteration. Arrays too small to gain are
evaluated in one call. ``map_threads``
runs independent calls whose heavy part releases the GIL (the split
proposals of ``hdp.DirectAssignmentVB``).
"""
import os
from concurrent.futures import ThreadPoolExecutor, wait

import numpy as np

# the smallest block worth a thread: an OpenMP worker still spins for a while after a parallel
# kernel returns, and a pool thread started then shares its core, so small blocks made an
# iteration slower and large ones faster; 2^18 lies between the two sizes measured
# (benchmarks/results/design_choices.txt)
_MIN_ELEMENTS = 1 << 18
_pool = None            # (size, ThreadPoolExecutor), kept between calls: an iteration makes several


def _executor(n_threads):
    global _pool
    if _pool is None or _pool[0] < n_threads:
        if _pool is not None:
            _pool[1].shutdown(wait=False)
        _pool = (n_threads, ThreadPoolExecutor(n_threads, thread_name_prefix="bnpcore-rows"))
    return _pool[1]


def _forget_pool():         # a forked child has none of the parent's threads
    global _pool
    _pool = None


os.register_at_fork(after_in_child=_forget_pool)


def row_blocks(fn, n_rows, n_threads, row_size=1):
    """Call ``fn(rows)`` once for each of up to ``n_threads`` contiguous slices
    ``rows`` covering ``range(n_rows)``, in parallel threads, and wait for all;
    rows of ``row_size`` numbers each, at least ``_MIN_ELEMENTS`` numbers a
    block (so small arrays take one call on this thread). ``fn`` writes its
    results into rows ``rows`` of arrays the caller owns (each call its own
    rows); exceptions propagate."""
    n = min(int(n_threads), max(1, n_rows * row_size // _MIN_ELEMENTS))
    if n <= 1:
        fn(slice(0, n_rows))
        return
    bounds = [n_rows * i // n for i in range(n + 1)]
    pool = _executor(n - 1)
    futures = [pool.submit(fn, slice(a, b)) for a, b in zip(bounds[1:-1], bounds[2:])]
    try:
        fn(slice(0, bounds[1]))         # the first block on this thread
    finally:                            # no block still writing after an exception
        results = [future.exception() for future in futures]
    for error in results:
        if error is not None:
            raise error


def map_rows(fn, arrays, n_threads):
    """``fn(*arrays)`` for an elementwise ``fn`` of arrays with the same number
    of rows (first axis; operands without rows are bound in ``fn``), evaluated
    by row blocks on ``n_threads`` threads: a new array equal, bit for bit, to
    ``fn(*arrays)``."""
    n_rows = len(arrays[0])
    first = fn(*(a[:1] for a in arrays))        # the shape of a row and the dtype
    out = np.empty((n_rows,) + first.shape[1:], dtype=first.dtype)

    def block(rows):
        out[rows] = fn(*(a[rows] for a in arrays))

    row_blocks(block, n_rows, n_threads, first[:1].size)
    return out


def map_threads(fn, items, n_threads):
    """``[fn(item) for item in items]``, the items on up to ``n_threads``
    threads (the first on this thread), for calls whose heavy part releases
    the GIL; results in the order of ``items``; exceptions propagate once
    every call has ended."""
    items = list(items)
    if min(int(n_threads), len(items)) <= 1:
        return [fn(item) for item in items]
    futures = [_executor(int(n_threads) - 1).submit(fn, item) for item in items[1:]]
    try:
        first = fn(items[0])
    finally:
        wait(futures)
    return [first] + [future.result() for future in futures]
