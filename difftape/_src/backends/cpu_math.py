"""Numba lowerings of plain-Python helpers of the builtins (``ops/``) where one instruction does
their job, for generated CPU code (imported by ``cpu_symbols.py`` before it compiles a rule).

``nearest_even`` (C ``rint``) computes with comparisons and integer conversions, which Python
needs; compiled, ``np.rint`` is one rounding instruction that LLVM vectorizes (1M float32:
0.79 ms, warp-lang 1.94; the comparisons vectorized took 2.6, and branching per element 13.6).
"""

from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import overload

from ..ops import scalar


@overload(scalar.nearest_even)
def _nearest_even(x):
    if isinstance(x, types.Float):
        return lambda x: np.rint(x)
    return None
