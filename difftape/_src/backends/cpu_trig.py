"""Float32 sine, cosine and tangent for generated CPU code, with no branches and no calls, so
that LLVM vectorizes the loops that use them.

libm's ``sinf`` is one call per element with branches on the argument's size; a kernel loop that
calls it cannot be vectorized. Here the float32 argument ``x = M * 2**E`` (``M`` an integer of at
most 24 bits) is reduced modulo pi/2 in double precision with a table row per float32 exponent:
the row holds ``(2**E * 2/pi) mod 4`` split into three doubles, the first two with 29 significant
bits so that ``M`` times them is exact. The quotient's fractional part is then accurate to about
2**-86 absolutely, for every finite float32 however large (Payne–Hanek reduction without the
loop). The rows are stored divided by ``2**E``, so that ``|x|`` multiplies them directly: the
products are the same (exact, or rounded alike), without extracting ``M`` from the bits (one
core, 4M sines: 24 -> 18 ms). Sine and cosine of the remainder (``|r| <= pi/4``) come from
Taylor polynomials of degree 13 and 14 evaluated in double (Estrin's scheme), accurate to
~2**-45, so the float32 result is correctly rounded except within ~2**-45 of a rounding midpoint
(tests/ops/test_cpu_trig.py measures max 0.5 ulp). The tangent is their quotient, ``s/c`` or
``-c/s`` by the quadrant's parity.

float64 arguments keep libm's ``sin``/``cos``/``tan``. The helpers are ordinary cached Numba
functions: LLVM inlines them into kernel loops (numba's IR-level ``inline="always"`` did the same
job at three times the compile cost: 2.9 s against 1.7 s for the elementwise sine kernel, cold).
"""

from __future__ import annotations

import math

import numpy as np
from numba import float32, float64, njit

from ..ops import trig
from .cpu_bits import float32_bits, float64_bits
from .cpu_overload import float32_or_libm

_PRECISION = 320  # bits of 2/pi after the binary point: enough for exponents up to 2**104


def _pi_scaled(bits: int) -> int:
    """floor(pi * 2**bits), by Machin's formula in integer arithmetic (64 guard bits)."""
    one = 1 << (bits + 64)

    def arctan_inverse(n: int) -> int:
        total, power, k, sign = 0, one // n, 1, 1
        while power:
            total += sign * (power // k)
            power //= n * n
            k, sign = k + 2, -sign
        return total

    return (16 * arctan_inverse(5) - 4 * arctan_inverse(239)) >> 64


def _split(numerator: int, exponent: int) -> tuple[float, float, float]:
    """``numerator * 2**exponent`` as ``hi + mid + lo``: ``hi`` and ``mid`` truncated to 29
    significant bits (an integer below 2**24 times them is exact in double), ``lo`` the rest
    rounded to double."""
    parts = []
    for _ in range(2):
        drop = max(numerator.bit_length() - 29, 0)
        head = numerator >> drop
        parts.append(math.ldexp(head, drop + exponent))
        numerator -= head << drop
    parts.append(math.ldexp(float(numerator), exponent))
    return tuple(parts)


def _reduction_table() -> np.ndarray:
    """Rows ``((2**E * 2/pi) mod 4) / 2**E`` in three parts, indexed by a float32's exponent field
    (``E = max(field, 1) - 150``, the weight of the last bit of its 24-bit integer significand);
    NaN for the infinity/NaN field, so that those inputs give NaN."""
    two_over_pi = (1 << (2 * _PRECISION + 1)) // _pi_scaled(_PRECISION)  # 2/pi * 2**_PRECISION
    table = np.full((3, 256), np.nan)
    for field in range(255):
        weight = max(field, 1) - 150
        shift = _PRECISION - weight  # 2**E * 2/pi = two_over_pi / 2**shift
        parts = _split(two_over_pi % (1 << (shift + 2)), -shift)  # mod 4 = 2**2
        # exact: no part is subnormal
        table[:, field] = [math.ldexp(part, -weight) for part in parts]
    return table


_ROWS = _reduction_table()
_A0, _A1, _A2 = (np.ascontiguousarray(row) for row in _ROWS)
_HALF_PI = math.pi / 2
_ROUNDING_SHIFT = 1.5 * 2.0**52  # adding it rounds |y| < 2**51 to an integer, kept in the low bits
_SIN = tuple((-1) ** k / math.factorial(2 * k + 1) for k in range(7))  # x, x^3 ... x^13
_COS = tuple((-1) ** k / math.factorial(2 * k) for k in range(8))  # 1, x^2 ... x^14


@njit(cache=True)
def _reduce(x):
    """``(r, q, negative)``: ``|x| = r + q * pi/2`` with ``|r| <= pi/4`` (``r`` in double,
    only ``q mod 4`` meaningful, an int64) and the sign bit of ``x``."""
    bits = float32_bits(x)
    field = (bits >> 23) & 0xFF
    magnitude = float64(abs(x))
    s0 = magnitude * _A0[field]  # exact, as is every step up to `fraction`'s last addition
    s0 -= 4.0 * np.floor(s0 * 0.25)
    s1 = magnitude * _A1[field]
    # rint(s0 + s1) by the addition of 1.5 * 2**52, whose low bits then hold the quadrant: a
    # double-to-int64 conversion has no AVX2 instruction (the reduction took 3.5 ms at 1M, 2.7)
    shifted = (s0 + s1) + _ROUNDING_SHIFT
    quadrant = shifted - _ROUNDING_SHIFT
    fraction = ((s0 - quadrant) + s1) + magnitude * _A2[field]
    return fraction * _HALF_PI, float64_bits(shifted), bits >> 31


@njit(cache=True)
def _sine_cosine(r):
    # Estrin's scheme (pairs of terms, then pairs of pairs) rather than Horner's: the chain of
    # dependent operations is about half as long, and a thread whose next angle depends on
    # this sine waits on it (a loop of v = sin(v) * 0.9 + 0.3: 31.9 -> 26.6 ns a step, one
    # core; the same float32 results on 20M angles).
    z = r * r
    z2 = z * z
    z4 = z2 * z2
    s = r + (r * z) * ((_SIN[1] + _SIN[2] * z) + z2 * (_SIN[3] + _SIN[4] * z)
                       + z4 * (_SIN[5] + _SIN[6] * z))
    c = 1.0 + z * (((_COS[1] + _COS[2] * z) + z2 * (_COS[3] + _COS[4] * z))
                   + z4 * ((_COS[5] + _COS[6] * z) + z2 * _COS[7]))
    return s, c


@njit(cache=True)
def sin32(x):
    """Sine of a float32, correctly rounded but for rare ties (see the module docstring)."""
    r, quadrant, negative = _reduce(x)
    s, c = _sine_cosine(r)
    value = c if quadrant & 1 else s
    if (quadrant & 2) != (negative << 1):  # sin(-x) = -sin(x)
        value = -value
    return float32(value)


@njit(cache=True)
def cos32(x):
    """Cosine of a float32, correctly rounded but for rare ties (see the module docstring)."""
    r, quadrant, _ = _reduce(x)
    s, c = _sine_cosine(r)
    quadrant += 1  # cos(t) = sin(t + pi/2)
    value = c if quadrant & 1 else s
    if quadrant & 2:
        value = -value
    return float32(value)


@njit(cache=True, forceinline=True)
def sincos32(x):
    """``(sin32(x), cos32(x))``, bit for bit, from one reduction and one pair of polynomials.

    Generated code calls it for every float32 sine and cosine (the adjoint of each needs the
    other), forced inline: the copies LLVM inlines for one angle are identical and fold into one,
    where ``sin32`` and ``cos32`` inlined side by side are not (each was optimized alone first).
    A joint rotation ``quat_from_axis_angle`` and its adjoint reduced their angle four times."""
    r, quadrant, negative = _reduce(x)
    s, c = _sine_cosine(r)
    odd = quadrant & 1
    sine = c if odd else s
    cosine = -s if odd else c  # cos(t) = sin(t + pi/2)
    if (quadrant & 2) != (negative << 1):
        sine = -sine
    if quadrant & 2:
        cosine = -cosine
    return float32(sine), float32(cosine)


@njit(cache=True, error_model="numpy")  # no zero-divisor branch: the loop stays vectorizable
def tan32(x):
    """Tangent of a float32, correctly rounded but for rare ties (see the module docstring)."""
    r, quadrant, negative = _reduce(x)
    s, c = _sine_cosine(r)
    odd = quadrant & 1
    value = (-c if odd else s) / (s if odd else c)  # tan(t + pi/2) = -cos(t)/sin(t)
    return float32(-value if negative else value)


float32_or_libm(trig.sin, sin32, math.sin)
float32_or_libm(trig.cos, cos32, math.cos)
float32_or_libm(trig.tan, tan32, math.tan)
