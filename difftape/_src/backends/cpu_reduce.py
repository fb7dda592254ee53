"""Adding a launch's per-chunk copies into the array they stand for, compiled, without the GIL.

``chunks.py`` splits the rows over its threads; each calls :func:`add_copies` for its rows.
NumPy's ``np.add`` held the GIL for much of the sum here, so a worker waiting to start its
rows waited for the launching thread's (33-220 us on the 2-core test VM).
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.core.errors import NumbaNotImplementedError
from numba.np.numpy_support import from_dtype

from .cpu_cache import load_only


@load_only
@njit(cache=True, nogil=True)
def _add_copies(target, copies, lo, hi):
    """``target[lo:hi] += copies[0, lo:hi]``, then ``+= copies[1, lo:hi]``, and so on."""
    part = target[lo:hi]
    for k in range(copies.shape[0]):
        copy = copies[k, lo:hi]
        for i in range(part.shape[0]):  # indices from 0: no negative-index wrap, vectorized
            part[i] += copy[i]


_entries: dict = {}


def add_copies_calls(array: np.ndarray, copies: np.ndarray, bounds: list[tuple[int, int]]
                     ) -> list[tuple]:
    """Calls ``(fn, args)``, one per row range ``(lo, hi)`` of ``bounds``, that together make
    ``array += copies[0]``, then ``+= copies[1]``, and so on; ``copies`` C-contiguous, of shape
    ``(n,) + array.shape``. Everything but the adding is done here, before the calls."""
    entry = _entry(array.dtype) if array.flags.c_contiguous else None
    if entry is None:  # a strided array (a reshape would copy it), or a dtype Numba has no type for
        return [(_add_with_numpy, (array[lo:hi], copies[:, lo:hi])) for lo, hi in bounds]
    row = array.size // array.shape[0] if array.shape[0] else 0
    flat, flat_copies = array.reshape(-1), copies.reshape(copies.shape[0], -1)
    return [(entry, (flat, flat_copies, lo * row, hi * row)) for lo, hi in bounds]


def _add_with_numpy(part: np.ndarray, copies: np.ndarray) -> None:
    for copy in copies:
        np.add(part, copy, out=part)


def _entry(dtype: np.dtype):
    """:func:`_add_copies` compiled for C-contiguous ``dtype`` arrays; None if Numba has no
    type for ``dtype``."""
    if dtype not in _entries:
        try:
            element = from_dtype(dtype)
        except NumbaNotImplementedError:
            _entries[dtype] = None
        else:
            _entries[dtype] = _add_copies.compile((
                types.Array(element, 1, "C"), types.Array(element, 2, "C"), types.int64,
                types.int64))
    return _entries[dtype]
