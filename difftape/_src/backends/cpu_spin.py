"""Compiled busy-waiting for the launch thread pool (``workers.py``): wait for a flag another
thread sets, without the GIL and without sleeping, for at most a given time.

A thread that sleeps in the kernel is woken by another core's interrupt; on a virtual machine
whose idle cores halt, that costs tens of microseconds each way, more than a small launch
itself. Nothing here is called from generated kernels; like the kernels, these functions load
from Numba's disk cache without its compiler (``cpu_cache.load_only``).
"""

from __future__ import annotations

import platform
import time

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from .cpu_cache import load_only


@intrinsic
def _cycles(typingctx):
    """The CPU's time-stamp counter (x86 ``rdtsc``; LLVM's cycle counter elsewhere)."""
    def codegen(context, builder, signature, args):
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.IntType(64), []), "llvm.readcyclecounter")
        return builder.call(fn, [])

    return types.int64(), codegen


@intrinsic
def _load_acquire(typingctx, flags, index):
    """``flags[index]`` read as an atomic acquire load: every loop iteration reads memory."""
    if not (isinstance(flags, types.Array) and flags.dtype == types.int64
            and isinstance(index, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        i = context.cast(builder, args[1], signature.args[1], types.intp)
        return builder.load_atomic(builder.gep(array.data, [i]), "acquire", 8)

    return types.int64(flags, index), codegen


@intrinsic
def _exchange(typingctx, flags, index, value):
    """Store ``value`` in ``flags[index]`` (an atomic exchange: a full memory barrier, so a
    load after it is not done before the store is visible); the old value."""
    if not (isinstance(flags, types.Array) and flags.dtype == types.int64
            and isinstance(index, types.Integer) and isinstance(value, types.Integer)):
        return None

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        i = context.cast(builder, args[1], signature.args[1], types.intp)
        v = context.cast(builder, args[2], signature.args[2], types.int64)
        return builder.atomic_rmw("xchg", builder.gep(array.data, [i]), v, "seq_cst")

    return types.int64(flags, index, value), codegen


@load_only
@njit(cache=True, nogil=True)
def spin_until(flags, index, value, budget, after) -> bool:
    """Whether ``flags[index] == value`` within ``budget`` time-stamp ticks, polling with the GIL
    released; once it is, poll on for ``after`` ticks more. (No ``pause`` instruction: a
    hypervisor may trap it, ~8 us each here.)"""
    start = _cycles()
    while _load_acquire(flags, index) != value:
        if _cycles() - start > budget:
            return False
    start = _cycles()
    while _cycles() - start < after:
        pass
    return True


@load_only
@njit(cache=True, nogil=True)
def set_then_spin(flags, index, check, waiting, value, budget, after) -> int:
    """``flags[index] = 1``; then -1 if ``flags[check]`` is set, else what :func:`spin_until`
    ``(flags, waiting, value, budget, after)`` says, as 1 or 0. ``flags[check]`` is read after
    the store is visible to other threads: of two threads that each set a flag and then check
    the other's, at least one sees the other's. One call, so the GIL stays released from the
    store through the wait."""
    _exchange(flags, index, 1)
    if _load_acquire(flags, check):
        return -1
    return 1 if spin_until(flags, waiting, value, budget, after) else 0


class Compiled:
    """The polling functions compiled for an int64 flag array and int arguments, called
    through their entry points: without the dispatcher, which types an array argument in
    Python the first time a process passes one (importing ``numpy.ma``, 15-20 ms)."""

    def __init__(self):
        flags, i = types.Array(types.int64, 1, "C"), types.int64
        self.spin_until = spin_until.compile((flags, i, i, i, i))
        self.set_then_spin = set_then_spin.compile((flags, i, i, i, i, i, i))

    def ticks_per_second(self, sample_ticks: int = 1 << 20) -> float:
        """The time-stamp counter's rate (x86's invariant TSC does not change with the clock
        speed), from how long polling a flag that never changes for ``sample_ticks`` takes."""
        never = np.zeros(1, np.int64)
        self.spin_until(never, 0, 1, 1 << 10, 0)  # the code paged in before the sample
        start = time.perf_counter()
        self.spin_until(never, 0, 1, sample_ticks, 0)
        return sample_ticks / max(time.perf_counter() - start, 1e-9)


class Unpolled:
    """:class:`Compiled`'s interface without polling, for CPUs other than x86-64 (where the
    cycle counter may not be readable from user code): every wait sleeps. Python under the GIL
    orders the flag accesses."""

    @staticmethod
    def spin_until(flags, index, value, budget, after) -> bool:
        return flags[index] == value

    @staticmethod
    def set_then_spin(flags, index, check, waiting, value, budget, after) -> int:
        flags[index] = 1
        if flags[check]:
            return -1
        return 1 if flags[waiting] == value else 0

    @staticmethod
    def ticks_per_second() -> float:
        return 0.0


def polling() -> Compiled | Unpolled:
    """The flag functions for this CPU."""
    return Compiled() if platform.machine().lower() in ("x86_64", "amd64") else Unpolled()
