"""The sine and cosine that builtin rules call: ``math``'s in Python scope.

They are separate names (not ``math.sin``/``math.cos``) so that a backend can compile them its own
way: ``backends/cpu_trig.py`` gives float32 arguments a branch-free implementation that LLVM
vectorizes, where libm's ``sinf`` is one opaque call per element.
"""

from __future__ import annotations

import math


def sin(x):
    """Sine of ``x`` (radians)."""
    return math.sin(x)


def cos(x):
    """Cosine of ``x`` (radians)."""
    return math.cos(x)
