"""Calling a compiled kernel function without Numba's dispatcher.

Numba's dispatcher types every argument of every call (in C: ~70 ns an argument), and the first
time a process sees an array type it types it in Python, importing ``numpy.ma`` (15-20 ms of a
warm process's first launch). The launcher already knows each argument's type: it checked every
array's dtype and dimension count, and passes scalars as Python floats, ints and bools or as
numpy scalars of the parameter's type. For a launch whose arrays are all plain storage
(``array._plain_data``: C-contiguous, aligned, writeable), every call of one program direction
has the same Numba signature. :func:`entry_point` builds it once from the first call's values,
asks the dispatcher for that signature (compiling it, or loading it from the disk cache), and
returns its compiled entry point, which later calls use directly.

The entry point unboxes its arguments as the signature says without checking them, so the
launcher takes this path only when those checks passed.
"""

from __future__ import annotations

import numpy as np
from numba.core import types
from numba.core.errors import NumbaNotImplementedError
from numba.np.numpy_support import from_dtype

_INT64 = (-(1 << 63), 1 << 63)


def numba_type(value):
    """The type ``numba.typeof`` gives one launcher-packed argument, or None for a value the
    launcher does not pack (the dispatcher then types the call itself)."""
    cls = value.__class__
    if cls is np.ndarray:
        return types.Array(from_dtype(value.dtype), value.ndim, "C")
    if cls is float:
        return types.float64
    if cls is bool:
        return types.boolean
    if cls is int:
        return types.int64 if _INT64[0] <= value < _INT64[1] else None
    if isinstance(value, np.generic):
        return from_dtype(value.dtype)
    return None


def signature(call_args: list) -> tuple:
    """The Numba signature of a call with ``call_args`` (plain arrays only); None in it where a
    value has no type here."""
    try:
        return tuple(numba_type(value) for value in call_args)
    except NumbaNotImplementedError:  # a dtype Numba has no type for
        return (None,)


def entry_point(program, adjoint: bool, call_args: list):
    """The compiled function of ``program``'s forward or adjoint for calls like ``call_args``
    (plain arrays only), remembered in ``program.entries``; the dispatcher itself when a value
    has no type here."""
    dispatcher = program.adjoint if adjoint else program.forward
    types_of_call = signature(call_args)
    entry = dispatcher if None in types_of_call else dispatcher.compile(types_of_call)
    program.entries[adjoint] = entry
    return entry
