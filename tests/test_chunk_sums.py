"""Per-chunk copies (``chunks.py``, ``backends/cpu_reduce.py``): each zeroed by its chunk, then
summed into their array: the compiled path for C-contiguous arrays of every dtype Numba types,
numpy's for the rest, in copy order."""

import numpy as np
import pytest

from difftape._src import chunks
from difftape._src.backends import cpu_reduce


def _run(calls):
    for fn, args in calls:
        fn(*args)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint32])
@pytest.mark.parametrize("shape", [(1000,), (1000, 3), (101, 3, 3)])
def test_every_row_range_adds_every_copy(dtype, shape):
    rng = np.random.default_rng(0)
    array = rng.integers(0, 50, shape).astype(dtype)
    copies = rng.integers(0, 50, (3,) + shape).astype(dtype)
    expected = array + copies[0] + copies[1] + copies[2]
    rows = shape[0]
    calls = cpu_reduce.add_copies_calls(array, copies, [(0, rows // 3), (rows // 3, rows)])
    assert calls[0][0] is not cpu_reduce._add_with_numpy  # compiled
    _run(calls)
    np.testing.assert_array_equal(array, expected)


def test_floats_are_added_in_copy_order():
    """(a + c0) + c1, as ``a += c0; a += c1`` gives: 1 + 1e8 - 1e8 loses the 1 in float32."""
    array = np.ones(64, np.float32)
    copies = np.stack([np.full(64, 1e8, np.float32), np.full(64, -1e8, np.float32)])
    _run(cpu_reduce.add_copies_calls(array, copies, [(0, 64)]))
    np.testing.assert_array_equal(array, np.zeros(64, np.float32))


def test_a_strided_array_is_summed_in_place_by_numpy():
    base = np.zeros((200, 4), np.float32)
    array = base[::2, 1:]  # neither contiguous nor reshapeable without a copy
    copies = np.ones((2,) + array.shape, np.float32)
    calls = cpu_reduce.add_copies_calls(array, copies, [(0, 50), (50, 100)])
    assert calls[0][0] is cpu_reduce._add_with_numpy
    _run(calls)
    assert (base[::2, 1:] == 2).all() and (base[1::2] == 0).all() and (base[:, 0] == 0).all()


def test_an_empty_array_adds_nothing():
    array = np.zeros((0, 3), np.float32)
    _run(cpu_reduce.add_copies_calls(array, np.zeros((1, 0, 3), np.float32), [(0, 0)]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int16,
                                   np.dtype([("a", np.float32), ("b", np.int8)])])
def test_a_copy_of_any_dtype_is_zeroed(dtype):
    copy = np.frombuffer(np.full(5 * 3 * np.dtype(dtype).itemsize, 0xAB, np.uint8),
                         dtype).reshape(5, 3).copy()
    _run([chunks._zero_call(copy)])
    assert not copy.view(np.uint8).any()


def _garbage_empty(shape, dtype):
    """Memory as np.empty may hand back: what an earlier array left there."""
    return np.full(shape, 7, dtype)


def _add_row_ones(lo, hi, rows, out):
    for r in range(lo, hi):
        out[r] += 1.0


@pytest.mark.parametrize("direct", [False, True])
@pytest.mark.parametrize("rows, count, margin", [(12, 2, 0), (12, 3, 0), (2, 2, 1), (5, 3, 2)])
def test_every_chunk_adds_into_a_zeroed_copy(monkeypatch, direct, rows, count, margin):
    """A copy may come from reused memory: each chunk zeroes its own, including a chunk whose
    rows all wait for the serial pass of a banded launch (2 rows, 2 chunks, margin 1)."""
    monkeypatch.setattr(chunks.np, "empty", _garbage_empty)
    out = np.full(rows, 10.0)
    chunks.run(_add_row_ones, [rows], [], [(out, True, direct, False)], count, margin)
    np.testing.assert_array_equal(out, np.full(rows, 11.0))


@pytest.mark.parametrize("size, ranges", [(1000, 1), (chunks.SUM_HERE_ELEMENTS, 2)])
def test_small_copies_are_summed_without_a_hand_off(monkeypatch, size, ranges):
    bounds = []
    calls = cpu_reduce.add_copies_calls
    monkeypatch.setattr(cpu_reduce, "add_copies_calls",
                        lambda array, copies, b: bounds.append(b) or calls(array, copies, b))
    out = np.zeros(size)
    chunks.run(_add_row_ones, [size], [], [(out, True, True, False)], 2)
    assert len(bounds) == 1 and len(bounds[0]) == ranges
    np.testing.assert_array_equal(out, np.ones(size))
