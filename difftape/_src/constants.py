"""Warp's named mathematical constants (``wp.pi``, ``wp.tau``, ``wp.inf``...): Python floats,
which kernels read as literals (float32 beside float32 values, float64 beside float64)."""

from __future__ import annotations

import math

E = e = 2.71828182845904523536
LOG2E = log2e = 1.44269504088896340736
LOG10E = log10e = 0.43429448190325182765
LN2 = ln2 = 0.69314718055994530942
LN10 = ln10 = 2.30258509299404568402
PHI = phi = 1.61803398874989484820  # the golden ratio
PI = pi = math.pi
HALF_PI = half_pi = math.pi / 2.0
TAU = tau = 2.0 * math.pi
INF = inf = math.inf
NAN = nan = math.nan
