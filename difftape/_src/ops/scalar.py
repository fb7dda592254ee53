"""Scalar math builtins: min/max/clamp, rounding, roots, exp/log, trigonometry, interpolation.

Derivative rules follow Warp's conventions exactly, including ties and values at singular points
(SPEC §5.5 items 6–17): ``min``/``max`` send ties to the second argument, ``abs'(0) = 1``,
``sqrt'(0) = inf``, ``asin``/``acos``/``atan2``/``tan`` give 0 where their derivative is singular,
and ``frac`` and the rounding functions give 0.

Forwards return C's IEEE results where Python's ``math`` would raise (``sqrt(-1)`` is NaN,
``log(0)`` is -inf, ``exp(1000)`` is inf), so Python-scope calls and compiled kernels agree. Numba's
``math.floor``/``trunc`` return integers, so rounding is written with ``int()`` on the range where
it is exact.

This module defines ``min``, ``max``, ``abs`` and ``round`` under Warp's names, shadowing Python's
builtins here: the rules below use ``math.fabs`` and comparisons instead.

These rules use NaN tests (``b != b``, ``math.isnan``). A backend compiling them with ``fastmath``
must leave out the ``nnan``/``ninf`` flags, or those tests fold to False.
"""

from __future__ import annotations

import builtins
import math

import numpy as np

from .. import dtypes
from . import exponential, trig
from .registry import Float, Int, builtin

_TWO_52 = 4503599627370496.0  # every float with |x| >= 2**52 is an integer
_RAD_TO_DEG = 57.29577951308232087679
_DEG_TO_RAD = 0.01745329251994329577
_LN_2 = 0.6931471805599453
_LN_10 = 2.302585092994046

_magnitude = builtins.abs  # compiled: one fabs for floats (LLVM cannot fold a compare-and-select
# spelling into it: the sign of a NaN would differ), a negate-and-select for integers

_UNARY_FLOAT_INT = [({"x": Float}, Float), ({"x": Int}, Int)]
_BINARY_FLOAT_INT = [({"a": Float, "b": Float}, Float), ({"a": Int, "b": Int}, Int)]
_PIECEWISE_CONSTANT = "piecewise constant: Warp's gradient is 0 (SPEC §5.5 item 7)"
_INTEGER_ONLY = "integer results have no gradient"
_PREDICATE = "predicates have no gradient"


# --- min, max, clamp, abs -------------------------------------------------------------------------


@builtin(group="Scalar Math", overloads=_BINARY_FLOAT_INT,
         sample={"a": (-3.0, -0.2), "b": (0.2, 3.0)}, reference=np.fmin)
def min(a, b):  # noqa: A001 - Warp's name
    """Return the minimum of ``a`` and ``b``; a NaN operand yields the other one."""
    if a < b or b != b:
        return a
    return b


@min.set_adjoint
def adj_min(a, b, ret, adj_ret):
    # Ties go to the second argument; if one operand is NaN the other gets the gradient.
    if a < b or b != b:
        return (adj_ret, 0.0)
    return (0.0, adj_ret)


@builtin(group="Scalar Math", overloads=_BINARY_FLOAT_INT,
         sample={"a": (0.2, 3.0), "b": (-3.0, -0.2)}, reference=np.fmax)
def max(a, b):  # noqa: A001 - Warp's name
    """Return the maximum of ``a`` and ``b``; a NaN operand yields the other one."""
    if a > b or b != b:
        return a
    return b


@max.set_adjoint
def adj_max(a, b, ret, adj_ret):
    if a > b or b != b:
        return (adj_ret, 0.0)
    return (0.0, adj_ret)


@builtin(group="Scalar Math",
         overloads=[({"x": Float, "lo": Float, "hi": Float}, Float),
                    ({"x": Int, "lo": Int, "hi": Int}, Int)],
         sample={"x": (0.2, 0.8), "lo": (-2.0, -1.0), "hi": (1.0, 2.0)})
def clamp(x, lo, hi):
    """Clamp ``x`` to the range [``lo``, ``hi``]: ``min(max(lo, x), hi)``."""
    m = lo if (lo > x or x != x) else x
    if m < hi or hi != hi:
        return m
    return hi


@clamp.set_adjoint
def adj_clamp(x, lo, hi, ret, adj_ret):
    # The min/max composition: x == lo gives the gradient to x, x == hi gives it to hi.
    lo_wins = lo > x or x != x
    m = lo if lo_wins else x
    if m < hi or hi != hi:
        if lo_wins:
            return (0.0, adj_ret, 0.0)
        return (adj_ret, 0.0, 0.0)
    return (0.0, 0.0, adj_ret)


@builtin(group="Scalar Math", overloads=_UNARY_FLOAT_INT, sample={"x": (0.3, 3.0)},
         reference=np.abs)
def abs(x):  # noqa: A001 - Warp's name
    """Return the absolute value of ``x``."""
    return _magnitude(x)  # +0.0 for -0.0, as C's fabs


@abs.set_adjoint
def adj_abs(x, ret, adj_ret):
    # -1 for x < 0, +1 otherwise, including at 0.
    if x < 0.0:
        return (-adj_ret,)
    return (adj_ret,)


# --- sign, step, nonzero --------------------------------------------------------------------------


@builtin(group="Scalar Math", inputs={"x": Float}, output=Float,
         differentiable=False, reason=_PIECEWISE_CONSTANT)
def sign(x):
    """Return -1 if ``x`` < 0, return 1 otherwise."""
    return -1.0 if x < 0.0 else 1.0


@builtin("sign", group="Scalar Math", inputs={"x": Int}, output=Int,
         differentiable=False, reason=_INTEGER_ONLY)
def sign_int(x):
    """Return -1 if ``x`` < 0, return 1 otherwise."""
    return -1 if x < 0 else 1


@builtin(group="Scalar Math", inputs={"x": Float}, output=Float,
         differentiable=False, reason=_PIECEWISE_CONSTANT)
def step(x):
    """Return 1.0 if ``x`` < 0.0, return 0.0 otherwise."""
    return 1.0 if x < 0.0 else 0.0


@builtin("step", group="Scalar Math", inputs={"x": Int}, output=Int,
         differentiable=False, reason=_INTEGER_ONLY)
def step_int(x):
    """Return 1 if ``x`` < 0, return 0 otherwise."""
    return 1 if x < 0 else 0


@builtin(group="Scalar Math", inputs={"x": Float}, output=Float,
         differentiable=False, reason=_PIECEWISE_CONSTANT)
def nonzero(x):
    """Return 1.0 if ``x`` is not equal to zero, return 0.0 otherwise."""
    return 0.0 if x == 0.0 else 1.0


@builtin("nonzero", group="Scalar Math", inputs={"x": Int}, output=Int,
         differentiable=False, reason=_INTEGER_ONLY)
def nonzero_int(x):
    """Return 1 if ``x`` is not equal to zero, return 0 otherwise."""
    return 0 if x == 0 else 1


# --- Rounding (int() truncates exactly below 2**52; larger floats, inf and NaN pass through) ------


@builtin(group="Scalar Math", inputs={"x": Float}, output=Float,
         differentiable=False, reason=_PIECEWISE_CONSTANT, reference=np.trunc)
def trunc(x):
    """Return the nearest integer to ``x`` whose magnitude is not greater than ``x``'s."""
    return toward_zero(x)


@builtin(group="Scalar Math", inputs={"x": Float}, output=Float,
         differentiable=False, reason=_PIECEWISE_CONSTANT, reference=np.floor)
def floor(x):
    """Return the largest integer that is less than or equal to ``x``."""
    return toward_negative(x)


@builtin(group="Scalar Math", inputs={"x": Float}, output=Float,
         differentiable=False, reason=_PIECEWISE_CONSTANT, reference=np.ceil)
def ceil(x):
    """Return the smallest integer that is greater than or equal to ``x``."""
    return toward_positive(x)


@builtin(group="Scalar Math", inputs={"x": Float}, output=Float,
         differentiable=False, reason=_PIECEWISE_CONSTANT)
def round(x):  # noqa: A001 - Warp's name
    """Return the integer nearest to ``x``, rounding halfway cases away from zero (C ``round``)."""
    t = toward_zero(x)  # large x, inf and NaN: x - t is 0 or NaN, and t is kept
    return t + math.copysign(1.0, x) if math.fabs(x - t) >= 0.5 else t


@builtin(group="Scalar Math", inputs={"x": Float}, output=Float,
         differentiable=False, reason=_PIECEWISE_CONSTANT, reference=np.rint)
def rint(x):
    """Return the integer nearest to ``x``, rounding halfway cases to even (C ``rint``)."""
    return nearest_even(x)


# C's trunc, floor, ceil and rint of a float, in plain Python. Compiled CPU code uses the
# rounding instruction instead (``backends/cpu_math.py``).


def toward_zero(x):
    if not math.fabs(x) < _TWO_52:
        return x
    return math.copysign(float(int(x)), x)


def toward_negative(x):
    if not math.fabs(x) < _TWO_52:
        return x
    t = math.copysign(float(int(x)), x)
    return t - 1.0 if t > x else t


def toward_positive(x):
    if not math.fabs(x) < _TWO_52:
        return x
    t = math.copysign(float(int(x)), x)
    return t + 1.0 if t < x else t


def nearest_even(x):
    f = toward_negative(x)  # large x, inf and NaN: d is 0 or NaN, and f is kept
    d = x - f
    if d > 0.5 or (d == 0.5 and math.fabs(f) % 2.0 == 1.0):
        f += 1.0
    return math.copysign(f, x)  # keeps -0.0 for -0.5 <= x <= -0.0


@builtin(group="Scalar Math", inputs={"x": Float}, output=Float,
         differentiable=False, reason="Warp defines no adjoint for frac: its gradient is 0 "
                                      "although the true derivative is 1 (SPEC §5.5 item 7)")
def frac(x):
    """Return the fractional part of ``x``: ``x - trunc(x)``."""
    return x - toward_zero(x)  # 0 for large x, NaN for inf and NaN


# --- Roots, exponentials and logarithms -----------------------------------------------------------


@builtin(group="Scalar Math", inputs={"x": Float}, output=Float, sample={"x": (0.1, 4.0)},
         reference=np.sqrt)
def sqrt(x):
    """Return the square root of ``x``, where ``x`` is positive (NaN for negative ``x``)."""
    if x < 0.0:
        return math.nan
    return math.sqrt(x)


@sqrt.set_adjoint
def adj_sqrt(x, ret, adj_ret):
    # Warp: 0.5/ret · g, so the gradient at 0 is inf.
    if ret == 0.0:
        return (math.copysign(math.inf, ret) * adj_ret,)
    return (0.5 / ret * adj_ret,)


@builtin(group="Scalar Math", inputs={"x": Float}, output=Float, sample={"x": (0.1, 8.0)},
         reference=np.cbrt)
def cbrt(x):
    """Return the cube root of ``x``."""
    if x == 0.0 or not math.isfinite(x):
        return x
    y = math.copysign(math.pow(math.fabs(x), 1.0 / 3.0), x)
    return y - (y * y * y - x) / (3.0 * y * y)  # one Newton step to full precision


@cbrt.set_adjoint
def adj_cbrt(x, ret, adj_ret):
    # Warp: 1/(3 ret²) · g, inf at 0.
    if ret == 0.0:
        return (math.inf * adj_ret,)
    return (adj_ret / (3.0 * ret * ret),)


@builtin(group="Scalar Math", inputs={"x": Float}, output=Float, sample={"x": (-3.0, 3.0)},
         reference=np.exp)
def exp(x):
    """Return the value of the exponential function e^``x``."""
    return exponential.exp(x)


@exp.set_adjoint
def adj_exp(x, ret, adj_ret):
    return (ret * adj_ret,)


@builtin(group="Scalar Math", inputs={"x": Float}, output=Float, sample={"x": (0.1, 5.0)},
         reference=np.log)
def log(x):
    """Return the natural logarithm (base-e) of ``x``, where ``x`` is positive."""
    return exponential.log(x)


@log.set_adjoint
def adj_log(x, ret, adj_ret):
    # Warp: (1/x)·g, so +inf at +0.
    if x == 0.0:
        return (math.copysign(math.inf, x) * adj_ret,)
    return (adj_ret / x,)


@builtin(group="Scalar Math", inputs={"x": Float}, output=Float, sample={"x": (0.1, 5.0)},
         reference=np.log2)
def log2(x):
    """Return the binary logarithm (base-2) of ``x``, where ``x`` is positive."""
    return exponential.log2(x)


@log2.set_adjoint
def adj_log2(x, ret, adj_ret):
    if x == 0.0:
        return (math.copysign(math.inf, x) * adj_ret,)
    return (adj_ret / (x * _LN_2),)


@builtin(group="Scalar Math", inputs={"x": Float}, output=Float, sample={"x": (0.1, 5.0)},
         reference=np.log10)
def log10(x):
    """Return the common logarithm (base-10) of ``x``, where ``x`` is positive."""
    return exponential.log10(x)


@log10.set_adjoint
def adj_log10(x, ret, adj_ret):
    if x == 0.0:
        return (math.copysign(math.inf, x) * adj_ret,)
    return (adj_ret / (x * _LN_10),)


# --- Trigonometric and hyperbolic functions -------------------------------------------------------


@builtin(group="Scalar Math", inputs={"x": Float}, output=Float, sample={"x": (-3.0, 3.0)},
         reference=np.sin)
def sin(x):
    """Return the sine of ``x`` in radians."""
    return trig.sin(x)


@sin.set_adjoint
def adj_sin(x, ret, adj_ret):
    return (trig.cos(x) * adj_ret,)


@builtin(group="Scalar Math", inputs={"x": Float}, output=Float, sample={"x": (-3.0, 3.0)},
         reference=np.cos)
def cos(x):
    """Return the cosine of ``x`` in radians."""
    return trig.cos(x)


@cos.set_adjoint
def adj_cos(x, ret, adj_ret):
    return (-trig.sin(x) * adj_ret,)


@builtin(group="Scalar Math", inputs={"x": Float}, output=Float, sample={"x": (-1.2, 1.2)},
         reference=np.tan)
def tan(x):
    """Return the tangent of ``x`` in radians."""
    return trig.tan(x)


@tan.set_adjoint
def adj_tan(x, ret, adj_ret):
    # Warp: g / cos²(x), and 0 where cos(x) == 0.
    c = trig.cos(x)
    if c == 0.0:
        return (0.0,)
    return (adj_ret / (c * c),)


@builtin(group="Scalar Math", inputs={"x": Float}, output=Float, sample={"x": (-0.9, 0.9)},
         reference=np.arcsin)
def asin(x):
    """Return the arcsine of ``x`` in radians; ``x`` is clamped to [-1, 1] first."""
    return trig.asin(-1.0 if x < -1.0 else 1.0 if x > 1.0 else x)


@asin.set_adjoint
def adj_asin(x, ret, adj_ret):
    # Warp: g / sqrt(1 - x²), and 0 where that root is not positive (|x| >= 1, NaN).
    d2 = 1.0 - x * x
    if d2 > 0.0:
        return (adj_ret / math.sqrt(d2),)
    return (0.0,)


@builtin(group="Scalar Math", inputs={"x": Float}, output=Float, sample={"x": (-0.9, 0.9)},
         reference=np.arccos)
def acos(x):
    """Return the arccosine of ``x`` in radians; ``x`` is clamped to [-1, 1] first."""
    return trig.acos(-1.0 if x < -1.0 else 1.0 if x > 1.0 else x)


@acos.set_adjoint
def adj_acos(x, ret, adj_ret):
    d2 = 1.0 - x * x
    if d2 > 0.0:
        return (-adj_ret / math.sqrt(d2),)
    return (0.0,)


@builtin(group="Scalar Math", inputs={"x": Float}, output=Float, sample={"x": (-3.0, 3.0)},
         reference=np.arctan)
def atan(x):
    """Return the arctangent of ``x`` in radians."""
    return trig.atan(x)


@atan.set_adjoint
def adj_atan(x, ret, adj_ret):
    return (adj_ret / (x * x + 1.0),)


@builtin(group="Scalar Math", inputs={"y": Float, "x": Float}, output=Float,
         sample={"y": (-3.0, 3.0), "x": (0.3, 3.0)}, reference=np.arctan2)
def atan2(y, x):
    """Return the 2-argument arctangent, atan2, of the point ``(x, y)`` in radians."""
    return trig.atan2(y, x)


@atan2.set_adjoint
def adj_atan2(y, x, ret, adj_ret):
    # Warp: (x/d, -y/d)·g with d = x² + y², and 0 at the origin.
    d = x * x + y * y
    if d > 0.0:
        return (x / d * adj_ret, -y / d * adj_ret)
    return (0.0, 0.0)


@builtin(group="Scalar Math", inputs={"x": Float}, output=Float, sample={"x": (-3.0, 3.0)},
         reference=np.sinh)
def sinh(x):
    """Return the sinh of ``x``."""
    return exponential.sinh(x)


@sinh.set_adjoint
def adj_sinh(x, ret, adj_ret):
    return (exponential.cosh(x) * adj_ret,)


@builtin(group="Scalar Math", inputs={"x": Float}, output=Float, sample={"x": (-3.0, 3.0)},
         reference=np.cosh)
def cosh(x):
    """Return the cosh of ``x``."""
    return exponential.cosh(x)


@cosh.set_adjoint
def adj_cosh(x, ret, adj_ret):
    return (exponential.sinh(x) * adj_ret,)


@builtin(group="Scalar Math", inputs={"x": Float}, output=Float, sample={"x": (-3.0, 3.0)},
         reference=np.tanh)
def tanh(x):
    """Return the tanh of ``x``."""
    return exponential.tanh(x)


@tanh.set_adjoint
def adj_tanh(x, ret, adj_ret):
    return ((1.0 - ret * ret) * adj_ret,)


@builtin(group="Scalar Math", inputs={"x": Float}, output=Float, sample={"x": (-3.0, 3.0)},
         reference=np.degrees)
def degrees(x):
    """Convert ``x`` from radians into degrees."""
    return x * _RAD_TO_DEG


@degrees.set_adjoint
def adj_degrees(x, ret, adj_ret):
    return (_RAD_TO_DEG * adj_ret,)


@builtin(group="Scalar Math", inputs={"x": Float}, output=Float, sample={"x": (-3.0, 3.0)},
         reference=np.radians)
def radians(x):
    """Convert ``x`` from degrees into radians."""
    return x * _DEG_TO_RAD


@radians.set_adjoint
def adj_radians(x, ret, adj_ret):
    return (_DEG_TO_RAD * adj_ret,)


# --- Interpolation and sign transfer --------------------------------------------------------------


@builtin(group="Scalar Math", inputs={"a": Float, "b": Float, "t": Float}, output=Float,
         sample={"a": (-3.0, 3.0), "b": (-3.0, 3.0), "t": (0.0, 1.0)})
def lerp(a, b, t):
    """Linearly interpolate two values ``a`` and ``b`` using factor ``t``: ``a*(1-t) + b*t``."""
    return a * (1.0 - t) + b * t


@lerp.set_adjoint
def adj_lerp(a, b, t, ret, adj_ret):
    return (adj_ret * (1.0 - t), adj_ret * t, adj_ret * (b - a))


@builtin(group="Scalar Math", inputs={"a": Float, "b": Float, "x": Float}, output=Float,
         sample={"a": (-1.0, -0.5), "b": (0.5, 1.0), "x": (-0.4, 0.4)})
def smoothstep(a, b, x):
    """Smoothly interpolate between 0 and 1 as ``x`` goes from edge ``a`` to edge ``b``."""
    if a == b:  # (x - a)/0 is ±inf, clamped to 0 or 1
        return 0.0 if x < a else 1.0
    t = (x - a) / (b - a)
    t = 0.0 if t < 0.0 else 1.0 if t > 1.0 else t
    return t * t * (3.0 - 2.0 * t)


@smoothstep.set_adjoint
def adj_smoothstep(a, b, x, ret, adj_ret):
    # Warp's rule: zero outside the open interval between the edges (and, here, for equal edges).
    ab = a - b
    ax = a - x
    bx = b - x
    if ab == 0.0 or bx / ab >= 0.0 or ax / ab <= 0.0:
        return (0.0, 0.0, 0.0)
    ab3 = ab * ab * ab
    ab4 = ab3 * ab
    return (adj_ret * 6.0 * ax * bx * bx / ab4,
            adj_ret * 6.0 * ax * ax * (x - b) / ab4,
            adj_ret * 6.0 * ax * bx / ab3)


@builtin(group="Scalar Math", inputs={"x": Float, "y": Float}, output=Float,
         sample={"x": (0.3, 3.0), "y": (-3.0, -0.3)}, reference=np.copysign)
def copysign(x, y):
    """Return ``x`` with the sign of ``y``."""
    return math.copysign(x, y)


@copysign.set_adjoint
def adj_copysign(x, y, ret, adj_ret):
    # dx = ±1 (abs'(x) = +1 at 0, times the sign of y), dy = 0.
    s = math.copysign(1.0, y)
    if x < 0.0:
        s = -s
    return (s * adj_ret, 0.0)


# --- Selection and floating-point predicates ------------------------------------------------------


@builtin(group="Utility",
         overloads=[({"cond": dtypes.bool_, "a": Float, "b": Float}, Float),
                    ({"cond": dtypes.bool_, "a": Int, "b": Int}, Int)],
         differentiable={"a": True, "b": True}, reason="the condition selects; it has no gradient",
         sample={"a": (-3.0, 3.0), "b": (-3.0, 3.0)})
def where(cond, a, b):
    """Select between two arguments: return ``a`` if ``cond`` is True, otherwise ``b``."""
    return a if cond else b


@where.set_adjoint
def adj_where(cond, a, b, ret, adj_ret):
    if cond:
        return (None, adj_ret, 0.0)
    return (None, 0.0, adj_ret)


@builtin(group="Scalar Math", overloads=[({"x": Float}, dtypes.bool_), ({"x": Int}, dtypes.bool_)],
         differentiable=False, reason=_PREDICATE, reference=np.isnan)
def isnan(x):
    """Return True if ``x`` is NaN, False otherwise."""
    return math.isnan(x)


@builtin(group="Scalar Math", overloads=[({"x": Float}, dtypes.bool_), ({"x": Int}, dtypes.bool_)],
         differentiable=False, reason=_PREDICATE, reference=np.isinf)
def isinf(x):
    """Return True if ``x`` is positive or negative infinity, False otherwise."""
    return math.isinf(x)


@builtin(group="Scalar Math", overloads=[({"x": Float}, dtypes.bool_), ({"x": Int}, dtypes.bool_)],
         differentiable=False, reason=_PREDICATE, reference=np.isfinite)
def isfinite(x):
    """Return True if ``x`` is a finite number (not NaN or infinity), False otherwise."""
    return math.isfinite(x)
