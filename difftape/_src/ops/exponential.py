"""The exponential and hyperbolic tangent that builtin rules call: ``math``'s in Python scope.

Like ``trig.py``, these are separate names so that a backend can compile them its own way:
``backends/cpu_exp.py`` gives float32 arguments a branch-free implementation that LLVM vectorizes,
where libm's ``expf``/``tanhf`` are one opaque call per element.
"""

from __future__ import annotations

import math

_EXP_OVERFLOW = 709.782712893384  # above this math.exp raises OverflowError in Python


def exp(x):
    """e**x, inf where ``math.exp`` would raise OverflowError."""
    if x > _EXP_OVERFLOW:
        return math.inf
    return math.exp(x)


def tanh(x):
    """Hyperbolic tangent of ``x``."""
    return math.tanh(x)
