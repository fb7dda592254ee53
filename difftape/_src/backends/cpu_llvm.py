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

LLVM's vectorizer loads the components of consecutive threads' rows as one interleaved group
(wide loads and shuffles) only for rows of at most 8 elements (``-max-interleave-group-factor``);
a mat33 row (9) took AVX-512 gathers and, in the adjoint, scatters, which AMD Zen 4 runs slowly:
over 1M threads of ``sum m[r, c] * v[c] * v[r]`` on one core, forward 11.4 -> 2.6 ms and backward
24 -> 6-8 ms with groups of up to 16 (mat44). The benchmark's kernels compile to the same code.

Rows read or written under an ``if`` (``if i < n - 1: d = x[i + 1] - x[i]``, a rope segment)
need masked interleaved groups, which LLVM leaves off by default on x86; the rows took gathers:
1M rope segments forward 3.8 ms against warp-lang's 2.3, 0.66 ms with
``-enable-masked-interleaved-mem-accesses``; three guarded neighbours of each of 1M points 7.9 ->
1.5 ms (warp-lang 5.6). The benchmark's kernels compile to the same code.

``compile_under`` sets an option for one generated module's compilation only:
``NO_STRIDE_VERSIONING`` where ``codegen/strides.py`` finds that gathers pay, ``NARROW_VECTORS``
where it finds elements too wide to interleave, ``STORED_ROWS`` for the forward of a kernel that
stores float32 mat33 rows.

LLVM options are process-wide: other Numba code compiled in the same process is vectorized under
the same limit and keeps its copy loops too (``docs/architecture.md``).
"""

from __future__ import annotations

import llvmlite.binding as llvm
from numba.core.compiler_lock import global_compiler_lock

SCEV_CHECK_THRESHOLD = 128

MAX_INTERLEAVE_FACTOR = 16

OPTIONS = (f"-vectorize-scev-check-threshold={SCEV_CHECK_THRESHOLD}",
           "-disable-loop-idiom-memcpy",
           f"-max-interleave-group-factor={MAX_INTERLEAVE_FACTOR}",
           "-enable-masked-interleaved-mem-accesses")


def apply() -> None:
    """Set ``OPTIONS`` in this process's LLVM (once: a re-imported difftape sets nothing)."""
    if getattr(llvm, "_difftape_options", None) == OPTIONS:
        return
    for option in OPTIONS:
        llvm.set_option("difftape", option)
    llvm._difftape_options = OPTIONS


# Vectorize loops whose accesses step by a run-time row length with gathers, instead of versioning
# them on that length being 1 (codegen/strides.py).
NO_STRIDE_VERSIONING = "-enable-mem-access-versioning=false"
# Vectorize 2 threads at a time where threads access vector or matrix elements too wide to load as
# one interleaved group: plain loads, not gathers (codegen/strides.py).
NARROW_VECTORS = "-force-vector-width=2"
# The forward of a kernel that stores float32 mat33 rows: 4 threads at a time (codegen/strides.py).
STORED_ROWS = "-force-vector-width=4"
_RESETS = {NO_STRIDE_VERSIONING: "-enable-mem-access-versioning=true",  # LLVM's defaults
           NARROW_VECTORS: "-force-vector-width=0", STORED_ROWS: "-force-vector-width=0"}


def compile_under(dispatcher, options: tuple[str, ...]) -> None:
    """Make ``dispatcher`` compile with ``options`` set, and LLVM's defaults back afterwards.

    Every compilation of a Numba dispatcher goes through its ``compile`` method (calls of
    unseen argument types too) under Numba's compiler lock, which no other thread's compilation
    can hold meanwhile; loading from the disk cache passes through as well, harmlessly."""
    if not options:
        return
    original = dispatcher.compile

    def compile(signature):
        with global_compiler_lock:
            for option in options:
                llvm.set_option("difftape", option)
            try:
                return original(signature)
            finally:
                for option in options:
                    llvm.set_option("difftape", _RESETS[option])

    dispatcher.compile = compile


def stamp() -> str:
    """What names cached generated modules after these options (code compiled under others
    is compiled again)."""
    return " ".join(OPTIONS)
