"""Float32 atan, atan2, asin and acos for generated CPU code, with no branches and no calls, so
that LLVM vectorizes the loops that use them (libm's ``atanf`` and kin are one call per element).

All four are ``atan(num / den)`` of two non-negative doubles (``_angle``): the argument is
reduced to [0, 1] by swapping ``num`` and ``den`` (``atan t = pi/2 - atan(1/t)``), then to
``|t| <= tan(pi/12)`` by ``atan t = pi/6 + atan((t - c) / (1 + t c))`` with ``c = tan(pi/6)``;
both steps rewrite the numerator and denominator, so one division remains. The arctangent of
the reduced argument is its Taylor series to ``t**23`` (error below 2**-50), so the float32
results are correctly rounded but within ~2**-45 of a rounding midpoint
(tests/ops/test_cpu_inverse_trig.py measures max 0.5 ulp). asin and acos take
``sqrt(1 - x**2)``, exact to rounding in double for a float32 ``x``, as the other leg.
float64 arguments keep libm's functions.
"""

from __future__ import annotations

import math

from numba import float32, float64, njit

from ..ops import trig
from .cpu_overload import float32_or_libm

_TAN_PI_12 = 2.0 - math.sqrt(3.0)
_TAN_PI_6 = 1.0 / math.sqrt(3.0)
_ATAN = tuple((-1.0) ** j / (2 * j + 1) for j in range(12))  # t - t**3/3 + ... - t**23/23


@njit(cache=True, error_model="numpy")
def _angle(num, den):
    """``atan(num / den)`` in [0, pi/2] for ``num, den >= 0``: pi/2 for ``den = 0``, NaN for
    0/0 and inf/inf (callers that give those select their own value)."""
    swap = num > den
    low = den if swap else num
    high = num if swap else den
    reduce = low > _TAN_PI_12 * high
    top = low - _TAN_PI_6 * high if reduce else low
    bottom = high + _TAN_PI_6 * low if reduce else high
    t = top / bottom
    z = t * t
    z2 = z * z
    z4 = z2 * z2
    z8 = z4 * z4
    c = _ATAN
    series = t * ((c[0] + z * c[1]) + z2 * (c[2] + z * c[3])
                  + z4 * ((c[4] + z * c[5]) + z2 * (c[6] + z * c[7]))
                  + z8 * ((c[8] + z * c[9]) + z2 * (c[10] + z * c[11])))
    angle = series + math.pi / 6.0 if reduce else series
    return math.pi / 2.0 - angle if swap else angle


@njit(cache=True, error_model="numpy")
def atan32(x):
    """Arctangent of a float32, correctly rounded but for rare ties (see the module docstring)."""
    d = float64(x)
    return float32(math.copysign(_angle(abs(d), 1.0), d))


@njit(cache=True, error_model="numpy")
def atan2_32(y, x):
    """C's ``atan2f`` of two float32s: the angle of ``(x, y)`` in [-pi, pi], signed zeros and
    infinities included."""
    ordinate = abs(float64(y))
    abscissa = abs(float64(x))
    angle = _angle(ordinate, abscissa)
    angle = 0.0 if (ordinate == 0.0) & (abscissa == 0.0) else angle
    angle = math.pi / 4.0 if (ordinate == math.inf) & (abscissa == math.inf) else angle
    angle = math.pi - angle if math.copysign(1.0, float64(x)) < 0.0 else angle  # x = -0 too
    return float32(math.copysign(angle, float64(y)))


@njit(cache=True, error_model="numpy")
def asin32(x):
    """Arcsine of a float32 in [-1, 1] (NaN outside), as ``atan(x / sqrt(1 - x**2))``."""
    d = float64(x)
    return float32(math.copysign(_angle(abs(d), math.sqrt(1.0 - d * d)), d))


@njit(cache=True, error_model="numpy")
def acos32(x):
    """Arccosine of a float32 in [-1, 1] (NaN outside), as ``atan(sqrt(1 - x**2) / x)``."""
    d = float64(x)
    angle = _angle(math.sqrt(1.0 - d * d), abs(d))
    return float32(math.pi - angle if d < 0.0 else angle)


float32_or_libm(trig.atan, atan32, math.atan)
float32_or_libm(trig.atan2, atan2_32, math.atan2)
float32_or_libm(trig.asin, asin32, math.asin)
float32_or_libm(trig.acos, acos32, math.acos)
