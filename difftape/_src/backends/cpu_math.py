"""Numba lowerings of plain-Python helpers of the builtins (``ops/``) where one instruction does
their job, for generated CPU code (imported by ``cpu_symbols.py`` before it compiles a rule).

``scalar.toward_zero``, ``toward_negative``, ``toward_positive`` and ``nearest_even`` (C's trunc,
floor, ceil and rint) compute with comparisons and integer conversions, which Python needs;
compiled, each is one rounding instruction that LLVM vectorizes. 1M float32 on one core, then
and now (warp-lang): trunc 1.20 -> 0.73 ms (1.68), floor 1.35 -> 0.67 (1.90), ceil 1.41 -> 0.71
(1.68), frac 1.38 -> 0.74 (1.57), round 1.68 -> 0.95 (2.23), rint 13.6 -> 0.75 (1.29-1.94; it
branched on every element). ``round`` and ``frac`` use ``toward_zero``.
"""

from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import overload

from ..ops import scalar


def _lowered(helper, instruction):
    @overload(helper)
    def _overload(x):
        if isinstance(x, types.Float):
            return lambda x: instruction(x)
        return None


_lowered(scalar.toward_zero, np.trunc)
_lowered(scalar.toward_negative, np.floor)
_lowered(scalar.toward_positive, np.ceil)
_lowered(scalar.nearest_even, np.rint)
