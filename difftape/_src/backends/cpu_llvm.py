"""The LLVM options generated CPU code is compiled with (set once per process, before compiling).

LLVM's loop vectorizer gives up on a loop whose vectorized form needs more than 16 run-time
checks that an address computation does not wrap around (``-vectorize-scev-check-threshold``).
Numba computes array element addresses with plain arithmetic (no ``inbounds``), so every array
element a thread stores costs one check: a thread loop that adds into a mat33, a quat and three
vec3 adjoints (22 checks) stayed scalar, 4.5x slower than vectorized. The checks run once each
time the loop is entered (once per row of a launch), never per thread, and only a loop that
needs them has them.

LLVM's loop-idiom pass turns a loop that copies array elements into calls of ``memcpy``: a 2-D
kernel ``u1[i, j] = u[i, j]`` became one call per row. glibc's memcpy copies such rows with
``rep movsb``, which on AMD Zen 3 is slow when the destination lies just below the source modulo
4096 bytes, the case of any two large numpy arrays (page-aligned plus the same header): the copy
of 1024x1024 float32 took 2.6 ms against 0.2 for the vectorized loop that
``-disable-loop-idiom-memcpy`` leaves in its place.

LLVM options are process-wide: other Numba code compiled in the same process is vectorized under
the same limit and keeps its copy loops too (``docs/architecture.md``).
"""

from __future__ import annotations

import llvmlite.binding as llvm

SCEV_CHECK_THRESHOLD = 128

OPTIONS = (f"-vectorize-scev-check-threshold={SCEV_CHECK_THRESHOLD}",
           "-disable-loop-idiom-memcpy")


def apply() -> None:
    """Set ``OPTIONS`` in this process's LLVM (once: a re-imported difftape sets nothing)."""
    if getattr(llvm, "_difftape_options", None) == OPTIONS:
        return
    for option in OPTIONS:
        llvm.set_option("difftape", option)
    llvm._difftape_options = OPTIONS


def stamp() -> str:
    """What names cached generated modules after these options (code compiled under others
    is compiled again)."""
    return " ".join(OPTIONS)
