"""Elementwise work by row blocks on threads (bnpcore._threads)."""
import multiprocessing

import numpy as np
import pytest
from scipy.special import digamma, gammaln

from bnpcore import _threads
from bnpcore._threads import map_rows, map_threads, row_blocks


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(_threads, "_MIN_ELEMENTS", 64)      # blocks of a few rows, as large arrays get


@pytest.mark.parametrize("n_rows", [0, 1, 9, 1000, 4099])
@pytest.mark.parametrize("n_threads", [1, 2, 3, 8])
def test_map_rows_is_the_whole_call_bit_for_bit(n_rows, n_threads, small_blocks):
    rng = np.random.default_rng(n_rows)
    x, e = rng.gamma(0.3, size=(n_rows, 7)), rng.random(n_rows) + 1e-3
    norm = digamma(x.sum(0) + 1.0)

    def fn(x, e):
        y = digamma(x + e[:, None]) - norm
        return y - y.max(axis=1, keepdims=True) + gammaln(x + 1e-300)

    np.testing.assert_array_equal(map_rows(fn, (x, e), n_threads), fn(x, e))


def test_row_blocks_cover_the_rows_once_in_parallel_blocks():
    seen = []
    row_blocks(seen.append, 1000, 3, row_size=1000)
    assert sorted((s.start, s.stop) for s in seen) == [(0, 333), (333, 666), (666, 1000)]
    seen.clear()
    row_blocks(seen.append, 300, 3, row_size=1000)      # blocks under _MIN_ELEMENTS numbers: not worth a thread
    assert [(s.start, s.stop) for s in seen] == [(0, 300)]


def test_row_blocks_raise_the_error_of_any_block_after_all_finished():
    done = []

    def fn(rows):
        if rows.start > 0:
            raise ValueError(f"block at {rows.start}")
        done.append(rows)

    with pytest.raises(ValueError, match="block at 500"):
        row_blocks(fn, 1000, 2, row_size=1000)
    assert done == [slice(0, 500)]


@pytest.mark.parametrize("n_threads", [1, 2, 3])
def test_map_threads_returns_the_calls_in_order_and_raises_after_all_ended(n_threads):
    assert map_threads(lambda i: i * i, range(5), n_threads) == [0, 1, 4, 9, 16]
    assert map_threads(str, [], n_threads) == []
    done = []

    def fn(i):
        if i == 1:
            raise ValueError("call 1")
        done.append(i)

    with pytest.raises(ValueError, match="call 1"):
        map_threads(fn, range(3), n_threads)
    assert sorted(done) == ([0] if n_threads == 1 else [0, 2])     # on threads, no call is still running


def _in_child(queue):
    queue.put(float(map_rows(np.exp, (np.zeros((1000, 2)),), 2).sum()))


def test_a_forked_child_gets_its_own_pool(small_blocks):
    map_rows(np.exp, (np.zeros((1000, 2)),), 2)          # the parent's pool exists
    assert _threads._pool is not None
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_in_child, args=(queue,))
    child.start()
    child.join(60)
    assert child.exitcode == 0 and queue.get(timeout=5) == 2000.0
