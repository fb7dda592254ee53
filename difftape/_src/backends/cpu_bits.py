"""Reinterpreting a float's bits as an integer and back, in Numba code (one LLVM ``bitcast``,
no conversion): the branch-free float32 math of ``cpu_trig.py`` and ``cpu_exp.py`` reads and
builds exponent fields with them."""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.extending import intrinsic


def _bitcast(source, target, target_ir):
    @intrinsic
    def cast(typingctx, value):
        if value != source:
            return None

        def codegen(context, builder, signature, args):
            return builder.bitcast(args[0], target_ir)

        return target(source), codegen

    return cast


float32_bits = _bitcast(types.float32, types.uint32, ir.IntType(32))
float64_bits = _bitcast(types.float64, types.int64, ir.IntType(64))
bits_float64 = _bitcast(types.int64, types.float64, ir.DoubleType())
