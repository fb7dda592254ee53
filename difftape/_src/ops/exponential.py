"""The exponential, logarithmic, power and hyperbolic functions that builtin rules call:
``math``'s in Python scope, with C's IEEE results where ``math`` raises.

Like ``trig.py``, these are separate names so that a backend can compile them its own way:
``backends/cpu_exp.py`` gives float32 arguments a branch-free implementation that LLVM vectorizes,
where libm's ``expf``/``logf``/``powf``/``tanhf``/... are one opaque call per element.
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


def log(x):
    """Natural logarithm of ``x``: -inf at 0, NaN below."""
    if x < 0.0:
        return math.nan
    if x == 0.0:
        return -math.inf
    return math.log(x)


def log2(x):
    """Binary logarithm of ``x``: -inf at 0, NaN below."""
    if x < 0.0:
        return math.nan
    if x == 0.0:
        return -math.inf
    return math.log2(x)


def log10(x):
    """Common logarithm of ``x``: -inf at 0, NaN below."""
    if x < 0.0:
        return math.nan
    if x == 0.0:
        return -math.inf
    return math.log10(x)


def _is_odd_integer(b):
    return math.isfinite(b) and math.fmod(b, 2.0) in (1.0, -1.0)


def pow(a, b):  # noqa: A001 - the builtin's name
    """``a`` to the power ``b`` with C's ``pow`` results: NaN for a finite negative ``a`` and a
    finite non-integer ``b``, +-inf for 0 to a negative power and on overflow."""
    if a < 0.0 and math.isfinite(a) and math.isfinite(b) and math.fmod(b, 1.0) != 0.0:
        return math.nan
    negative = math.copysign(1.0, a) < 0.0 and _is_odd_integer(b)
    if a == 0.0 and b < 0.0:
        return -math.inf if negative else math.inf
    try:
        return math.pow(a, b)
    except OverflowError:
        return -math.inf if negative else math.inf
