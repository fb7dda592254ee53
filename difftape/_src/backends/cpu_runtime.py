"""Helpers that generated CPU kernels call: stack growth and atomic read-modify-write.

Atomics are LLVM ``atomicrmw`` instructions (x86 lowers float ones to compare-exchange loops);
they are used only by parallel kernel variants at accumulation sites that threads can share.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic


@njit(cache=True)
def rt_reserve(stack, size):
    """``stack`` with room for ``size`` values (grown to at least twice its length, data kept).

    Generated adjoints call it before each loop with the room the loop's iterations need, so
    no push inside a loop ever checks or grows the stack."""
    bigger = np.empty(max(size, stack.shape[0] * 2), stack.dtype)
    bigger[: stack.shape[0]] = stack
    return bigger


@njit(cache=True)
def rt_check_index(i, size, axis, where):
    """Debug-mode bounds check: ``i`` if ``0 <= i < size``, else IndexError(where, i, axis, size)."""
    if i < 0 or i >= size:
        raise IndexError(where, i, axis, size)
    return i


def _atomic(float_op: str, int_op: str):
    @intrinsic
    def atomic(typingctx, arr, idx, val):
        if not isinstance(arr, types.Array) or not isinstance(idx, types.BaseTuple):
            return None
        nidx = len(idx)
        sig = arr.dtype(arr, types.UniTuple(types.intp, nidx), arr.dtype)

        def codegen(context, builder, signature, args):
            array = context.make_array(signature.args[0])(context, builder, args[0])
            indices = cgutils.unpack_tuple(builder, args[1], nidx)
            ptr = cgutils.get_item_pointer(context, builder, signature.args[0], array, indices,
                                           wraparound=True)
            op = float_op if isinstance(signature.args[0].dtype, types.Float) else int_op
            return builder.atomic_rmw(op, ptr, args[2], "monotonic")

        return sig, codegen

    return atomic


rt_atomic_add = _atomic("fadd", "add")
rt_atomic_sub = _atomic("fsub", "sub")
rt_atomic_min = _atomic("fmin", "min")
rt_atomic_max = _atomic("fmax", "max")
