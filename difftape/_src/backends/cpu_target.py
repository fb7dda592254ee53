"""The CPU that generated code is compiled for, where what the code generator writes depends on
it (rather than only how LLVM compiles it).

An interchanged adjoint (``codegen/interchange.py``) of a loop that calls compiled builtins
(transcendentals, not the few-instruction ones: ``cpu_interchange._INSTRUCTION_BUILTINS``) measured slower
than the plain per-thread loop on an AMD EPYC core: a loop of float32 ``sin`` terms, backward 250
ms plain and 380 interchanged, one core. On an Intel Xeon (LLVM's ``rocketlake``, AVX-512) every
kind of builtin measured faster interchanged (262k threads, 16 iterations of ``s = s +
f(x * c[j] + 0.1 s)``, one core, backward plain -> interchanged): float32 sin 174 -> 61 ms, exp
128 -> 11, log 115 -> 7.9, tanh 154 -> 13, pow 247 -> 26, atan2 116 -> 8.5; float64 sin (libm)
78 -> 47, exp 77 -> 37; and the AMD host's sin kernel 949 -> 311. Such loops therefore stay plain
on AMD's Zen cores only (LLVM's ``znver*``), whose gathers (the float32 sine's table rows, a mat33
row: ``cpu_llvm.py``) are slow.
"""

from __future__ import annotations

import llvmlite.binding as llvm
import numba

# The CPU Numba compiles for: NUMBA_CPU_NAME where set, else the host's.
TARGET_CPU = numba.config.CPU_NAME or llvm.get_host_cpu_name()

# Whether loops that call compiled builtins keep plain adjoints (``cpu_interchange._calls_builtins``).
BUILTIN_LOOPS_STAY_PLAIN = TARGET_CPU.startswith("znver")


def stamp() -> tuple:
    """What of the target shapes generated text, for the keys of cached modules."""
    return (BUILTIN_LOOPS_STAY_PLAIN,)
