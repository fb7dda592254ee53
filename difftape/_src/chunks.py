"""Running one launch's compiled function over chunks of its first dimension, on threads.

Generated functions take ``lo, hi`` (the rows of the first launch dimension they run) and release
the GIL, so a launch runs as one call per chunk: chunk 0 on the calling thread, the others on a
thread pool. Scatter sites of code without atomics add into per-chunk views passed as trailing
arguments: the array itself for a lone chunk (and for chunk 0 where nothing else in the kernel
touches the array), zeroed copies for the others, summed into the array afterwards; or the array
itself for every chunk, when the sites stay near the thread's row and chunks run in bands.

Unlike Numba's ``parallel=True`` (parfors), this compiles nothing beyond the serial function:
one compiled function per kernel direction serves serial and multi-threaded launches.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading

import numba
import numpy as np

_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _forget_pool() -> None:
    """In a forked child the pool's threads do not exist: start a new pool on first use."""
    global _pool
    _pool = None


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool)


def _thread_pool() -> concurrent.futures.ThreadPoolExecutor:
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = concurrent.futures.ThreadPoolExecutor(
                    max_workers=max(1, numba.config.NUMBA_NUM_THREADS - 1),
                    thread_name_prefix="difftape")
    return _pool


def pool_threads() -> set:
    """The pool's worker threads: idle whenever no launch runs in this process (a launch
    returns once its chunks have)."""
    pool = _pool
    return set(getattr(pool, "_threads", ())) if pool is not None else set()


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
    sums = []
    for array, live, direct, banded in views:
        if not live or banded:  # nobody writes it, or chunks write rows far enough apart
            for chunk_views in per_chunk:
                chunk_views.append(array)
            continue
        copies = np.zeros((chunks - 1 if direct else chunks,) + array.shape, array.dtype)
        for c, chunk_views in enumerate(per_chunk):
            chunk_views.append(array if direct and c == 0 else copies[c - 1 if direct else c])
        sums.append((array, copies))
    bounds = [(c * rows // chunks, (c + 1) * rows // chunks) for c in range(chunks)]
    held = [(max(lo, hi - margin), hi) for lo, hi in bounds] if margin else []
    if held:
        bounds = [(lo, held_lo) for (lo, _), (held_lo, _) in zip(bounds, held)]
    pool = _thread_pool()
    futures = [pool.submit(fn, lo, hi, *dims, *args, *per_chunk[c])
               for c, (lo, hi) in enumerate(bounds) if c > 0 and hi > lo]
    try:
        if bounds[0][1] > bounds[0][0]:
            fn(bounds[0][0], bounds[0][1], *dims, *args, *per_chunk[0])
    finally:
        errors = [f.exception() for f in futures]  # waits for every chunk
    for err in errors:
        if err is not None:
            raise err
    for c, (lo, hi) in enumerate(held):
        if hi > lo:
            fn(lo, hi, *dims, *args, *per_chunk[c])
    for array, copies in sums:
        _sum_into(array, copies, chunks, pool)


def _sum_into(array: np.ndarray, copies: np.ndarray, chunks: int, pool) -> None:
    """``array += copies.sum(0)``, split over row ranges on the pool (numpy releases the GIL)."""
    rows = array.shape[0]

    def add(lo: int, hi: int) -> None:
        part = array[lo:hi]
        for copy in copies:
            np.add(part, copy[lo:hi], out=part)

    bounds = [(c * rows // chunks, (c + 1) * rows // chunks) for c in range(chunks)]
    futures = [pool.submit(add, lo, hi) for lo, hi in bounds[1:]]
    add(*bounds[0])
    for f in futures:
        f.result()
