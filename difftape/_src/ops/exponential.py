"""The exponential and hyperbolic functions that builtin rules call: ``math``'s in Python scope.

Like ``trig.py``, these are separate names so that a backend can compile them its own way:
``backends/cpu_exp.py`` gives float32 arguments a branch-free implementation that LLVM vectorizes,
where libm's ``expf``/``sinhf``/``coshf``/``tanhf`` are one opaque call per element.
"""

from __future__ import annotations

import math

_EXP_OVERFLOW = 709.782712893384  # above this math.exp raises OverflowError in Python
_HYPERBOLIC_OVERFLOW = 710.4758600739439  # above this |x|, math.sinh and math.cosh raise


def exp(x):
    """e**x, inf where ``math.exp`` would raise OverflowError."""
    if x > _EXP_OVERFLOW:
        return math.inf
    return math.exp(x)


def sinh(x):
    """Hyperbolic sine of ``x``, +-inf where ``math.sinh`` would raise OverflowError."""
    if math.fabs(x) > _HYPERBOLIC_OVERFLOW:
        return math.copysign(math.inf, x)
    return math.sinh(x)


def cosh(x):
    """Hyperbolic cosine of ``x``, inf where ``math.cosh`` would raise OverflowError."""
    if math.fabs(x) > _HYPERBOLIC_OVERFLOW:
        return math.inf
    return math.cosh(x)


def tanh(x):
    """Hyperbolic tangent of ``x``."""
    return math.tanh(x)
