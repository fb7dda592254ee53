"""The trigonometric functions that builtin rules call: ``math``'s in Python scope, with C's
results where ``math`` raises (NaN for the sine, cosine and tangent of an infinity).

They are separate names (not ``math.sin``/``math.cos``) so that a backend can compile them its own
way: ``backends/cpu_trig.py`` (sin, cos, tan) and ``backends/cpu_inverse_trig.py`` (asin, acos,
atan, atan2) give float32 arguments branch-free implementations that LLVM vectorizes, where
libm's ``sinf`` is one opaque call per element.
"""

from __future__ import annotations

import math


def sin(x):
    """Sine of ``x`` (radians); NaN for an infinite ``x``."""
    return math.sin(x) if math.isfinite(x) else math.nan


def cos(x):
    """Cosine of ``x`` (radians); NaN for an infinite ``x``."""
    return math.cos(x) if math.isfinite(x) else math.nan


def tan(x):
    """Tangent of ``x`` (radians); NaN for an infinite ``x``."""
    return math.tan(x) if math.isfinite(x) else math.nan


def asin(x):
    """Arcsine of ``x`` in [-1, 1]."""
    return math.asin(x)


def acos(x):
    """Arccosine of ``x`` in [-1, 1]."""
    return math.acos(x)


def atan(x):
    """Arctangent of ``x``."""
    return math.atan(x)


def atan2(y, x):
    """The angle of the point ``(x, y)``, C's ``atan2``."""
    return math.atan2(y, x)
