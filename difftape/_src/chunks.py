"""Running one launch's compiled function over chunks of its first dimension, on threads.

Generated functions take ``lo, hi`` (the rows of the first launch dimension they run) and release
the GIL, so a launch runs as one call per chunk: chunk 0 on the calling thread, the others on a
thread pool. Scatter sites of code without atomics add into per-chunk views passed as trailing
arguments: the array itself for a lone chunk (and for chunk 0 where nothing else in the kernel
touches the array), copies for the others (each zeroed by its chunk), summed into the array
afterwards; or the array itself for every chunk, when the sites stay near the thread's row and
chunks run in bands.

Unlike Numba's ``parallel=True`` (parfors), this compiles nothing beyond the serial function:
one compiled function per kernel direction serves serial and multi-threaded launches.
"""

from __future__ import annotations

import os
import threading

import numba
import numpy as np

from .backends import cpu_reduce
from .workers import Workers

_workers: Workers | None = None
_workers_lock = threading.Lock()


def _forget_workers() -> None:
    """In a forked child the workers' threads do not exist: start new ones on first use."""
    global _workers, _workers_lock
    _workers, _workers_lock = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_workers)


def _thread_workers() -> Workers:
    global _workers
    if _workers is None or _workers.broken:
        with _workers_lock:
            if _workers is None or _workers.broken:
                _workers = Workers(max(1, numba.config.NUMBA_NUM_THREADS - 1))
    return _workers


def pool_threads() -> set:
    """The workers' threads: idle whenever no launch runs in this process (a launch returns
    once its chunks have)."""
    workers = _workers
    return set(workers.threads) if workers is not None else set()


def run(fn, dims: list[int], args: list, views: list[tuple[np.ndarray, bool, bool, bool]],
        chunks: int, margin: int = 0) -> None:
    """Call ``fn(lo, hi, *dims, *args, *chunk_views)`` over ``chunks`` (at least 2) row ranges
    of ``dims[0]``. ``views``: per trailing view argument, (the array receiving the adds,
    whether it receives anything at all, whether chunk 0 may add into it directly, whether
    every chunk may: banded, its adds landing within ``margin`` rows of the thread's row).

    With banded views, the last ``margin`` rows of each chunk run after the others, serially:
    the concurrent parts are then more than ``margin`` rows apart, so their adds never meet."""
    rows = dims[0]
    per_chunk: list[list[np.ndarray]] = [[] for _ in range(chunks)]
    zeroing: list[list[tuple]] = [[] for _ in range(chunks)]  # each chunk's copies' zeroing
    sums = []
    for array, live, direct, banded in views:
        if not live or banded:  # nobody writes it, or chunks write rows far enough apart
            for chunk_views in per_chunk:
                chunk_views.append(array)
            continue
        copies = np.empty((chunks - 1 if direct else chunks,) + array.shape, array.dtype)
        for c, chunk_views in enumerate(per_chunk):
            if direct and c == 0:
                chunk_views.append(array)
            else:
                chunk_views.append(copies[c - 1 if direct else c])
                zeroing[c].append(_zero_call(chunk_views[-1]))
        sums.append((array, copies))
    bounds = [(c * rows // chunks, (c + 1) * rows // chunks) for c in range(chunks)]
    held = [(max(lo, hi - margin), hi) for lo, hi in bounds] if margin else []
    if held:
        bounds = [(lo, held_lo) for (lo, _), (held_lo, _) in zip(bounds, held)]
    calls = []
    for c, (lo, hi) in enumerate(bounds):
        call = (fn, (lo, hi, *dims, *args, *per_chunk[c]))
        if c == 0 or hi > lo:
            calls.append((_calls, (*zeroing[c], call)) if zeroing[c] else call)
        else:  # no rows run concurrently; its held rows may still add into its copies
            _calls(*zeroing[c])
    workers = _thread_workers()
    workers.run(calls)
    for c, (lo, hi) in enumerate(held):
        if hi > lo:
            fn(lo, hi, *dims, *args, *per_chunk[c])
    for array, copies in sums:
        _sum_into(array, copies, chunks, workers)


def _zero_call(copy: np.ndarray) -> tuple:
    """The call ``(fn, args)`` that zeroes ``copy`` (C-contiguous, of any dtype; NumPy's fill
    runs without the GIL)."""
    return np.ndarray.fill, (copy.reshape(-1).view(np.uint8), 0)


def _calls(*calls: tuple) -> None:
    """Make the calls ``(fn, args)`` one after the other: a chunk zeroes its copies on its own
    thread, in its own cache, just before it adds into them (zeroed on the launching thread,
    every copy was written by one core and then pulled over to another)."""
    for fn, args in calls:
        fn(*args)


# Copies holding fewer elements than this in all are summed on the launching thread: a hand-off
# to the workers (~7 us on the 2-core test VM) costs more than summing them there.
SUM_HERE_ELEMENTS = 32_768


def _sum_into(array: np.ndarray, copies: np.ndarray, chunks: int, workers: Workers) -> None:
    """``array += copies.sum(0)``, split over row ranges on the workers."""
    rows = array.shape[0]
    if copies.size < SUM_HERE_ELEMENTS:
        chunks = 1
    workers.run(cpu_reduce.add_copies_calls(
        array, copies, [(c * rows // chunks, (c + 1) * rows // chunks) for c in range(chunks)]))
