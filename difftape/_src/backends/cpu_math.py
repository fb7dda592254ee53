"""Numba lowerings of plain-Python helpers of the builtins (``ops/``) where one instruction does
their job, for generated CPU code (imported by ``cpu_symbols.py`` before it compiles a rule).

``scalar.toward_zero``, ``toward_negative``, ``toward_positive`` and ``nearest_even`` (C's trunc,
floor, ceil and rint) compute with comparisons and integer conversions, which Python needs;
compiled, each is one rounding instruction that LLVM vectorizes. 1M float32 on one core, then
and now (warp-lang): trunc 1.20 -> 0.73 ms (1.68), floor 1.35 -> 0.67 (1.90), ceil 1.41 -> 0.71
(1.68), frac 1.38 -> 0.74 (1.57), round 1.68 -> 0.95 (2.23), rint 13.6 -> 0.75 (1.29-1.94; it
branched on every element). ``round`` and ``frac`` use ``toward_zero``.

``random.pcg_hash`` and ``as_int32`` (the random state's step and its bits as an int32) compile
as they are written.

``arithmetic.truncated_remainder`` and ``truncated_quotient`` (integer ``%`` and ``//``) are one
division instruction each: 1M threads of ``x[(i + 1) % n] + x[(i + 2) % n]`` 5.9 -> 2.2 ms
(warp-lang 3.6); three springs to ``x[(i + k) % n]`` per point 22.5 -> 5.7 ms (warp-lang 5.8).
"""

from __future__ import annotations

import numpy as np
from numba import types
from numba.extending import intrinsic, overload, register_jitable

from ..ops import arithmetic, random, scalar


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


# C's integer division (toward zero) of a divisor made safe: 0 and -1 become 1 (x86's division
# faults on 0, and on the most negative value over -1), the results for them chosen after.
def _division(remainder: bool):
    @intrinsic
    def divide(typingctx, a, b):
        if not isinstance(a, types.Integer) or a != b:
            return None

        def codegen(context, builder, signature, args):
            x, y = args
            zero, one = y.type(0), y.type(1)
            if signature.args[0].signed:
                by_zero = builder.icmp_signed("==", y, zero)
                by_minus_one = builder.icmp_signed("==", y, y.type(-1))
                safe = builder.select(builder.or_(by_zero, by_minus_one), one, y)
                if remainder:
                    return builder.srem(x, safe)  # x % 1 = 0 = x % -1
                quotient = builder.select(by_minus_one, builder.neg(x), builder.sdiv(x, safe))
                return builder.select(by_zero, zero, quotient)
            by_zero = builder.icmp_unsigned("==", y, zero)
            safe = builder.select(by_zero, one, y)
            if remainder:
                return builder.urem(x, safe)
            return builder.select(by_zero, zero, builder.udiv(x, safe))

        return a(a, b), codegen

    return divide


def _lowered_division(helper, divide):
    @overload(helper)
    def _overload(a, b):
        if isinstance(a, types.Integer) and a == b:
            return lambda a, b: divide(a, b)
        return None


_lowered_division(arithmetic.truncated_remainder, _division(remainder=True))
_lowered_division(arithmetic.truncated_quotient, _division(remainder=False))


register_jitable(random.pcg_hash)
register_jitable(random.as_int32)
