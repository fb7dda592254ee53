"""Compiling a builtin rule's plain-Python helper (``ops/trig.py``, ``ops/exponential.py``) as a
branch-free float32 implementation for float32 arguments and as libm's function otherwise."""

from __future__ import annotations

import inspect

from numba import types
from numba.extending import overload


def float32_or_libm(helper, float32_version, libm) -> None:
    """Compile calls to ``helper`` (one or two arguments) in Numba code as ``float32_version``
    when every argument is a float32, as ``libm`` (``math.exp``, ``math.atan2``) otherwise."""
    if len(inspect.signature(helper).parameters) == 1:
        @overload(helper)
        def _unary(x):
            if x == types.float32:
                return lambda x: float32_version(x)
            return lambda x: libm(x)
    else:
        @overload(helper)
        def _binary(a, b):
            if a == types.float32 and b == types.float32:
                return lambda a, b: float32_version(a, b)
            return lambda a, b: libm(a, b)
