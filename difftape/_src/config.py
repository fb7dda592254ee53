"""Global flags read at compile and launch time (``wp.config.<flag> = value``), named as in Warp.

This module only holds values; the modules that read a flag decide what it means. Change flags by
assignment before compiling: kernels compiled earlier keep the options they were built with.
"""

from __future__ import annotations

import logging as _logging
import os as _os

# Levels for ``log_level``: the ``logging`` module's numbers (Warp exposes them as ``wp.LOG_*``).
LOG_DEBUG = _logging.DEBUG
LOG_INFO = _logging.INFO
LOG_WARNING = _logging.WARNING
LOG_ERROR = _logging.ERROR

# Warn when a launch writes an array an earlier recorded launch read (SPEC §3). Off, as in Warp.
verify_autograd_array_access: bool = False

# Arrays changed between a recorded launch that read them and backward() (beyond Warp, cheap):
# "warn" (default), "error" (raise ArrayOverwriteError before any adjoint runs) or "off".
overwrite_check: str = "warn"

# Generate adjoint kernels; False compiles forward code only (launch(adjoint=True) then raises).
enable_backward: bool = True

# Static loops with at most this many iterations are unrolled, as Warp does.
max_unroll: int = 16

# "release", or "debug" for array bounds checks and non-finite checks on adjoints.
mode: str = "release"

# Print compile steps and cache hits.
verbose: bool = False

# Print the generated forward/adjoint source of every kernel when it is compiled.
print_source: bool = False

# Messages below this level are dropped; above LOG_WARNING silences gradient warnings too.
log_level: int = LOG_INFO

# Copying semantics for repeated writes to one vector/matrix component (SPEC §5.2).
enable_vector_component_overwrites: bool = False

# Bit-identical gradients between runs: accumulate in a fixed order (serial CPU launches).
deterministic: bool = False

# How CPU launchers use threads (numba.get_num_threads() of them): "serial"; "parallel" (atomics
# where threads may add to one element); "replicate" (such additions go to a per-thread copy of
# the array, summed afterwards); or "auto": launches of at least parallel_threshold threads may
# run in parallel when they need no atomics or their copies are small next to the launch and its
# adds (launch.REPLICA_ELEMENTS_PER_THREAD), and
# otherwise with atomics on 4 threads or more (launch.ATOMICS_FROM_THREADS); the
# first launches of each kernel direction and size run both ways, and the faster is kept
# (thread_choice.py). Serially otherwise.
cpu_parallel: str = "auto"

# With cpu_parallel="auto", launches with fewer threads always run serially.
parallel_threshold: int = 10_000

# On a kernel's first launch on a Tape, compile its adjoint in a forked process while the forward
# compiles and runs, when a core is spare (Linux, one Python thread; compile_ahead.py).
# DIFFTAPE_COMPILE_AHEAD=0 in the environment turns it off.
compile_ahead: bool = _os.environ.get("DIFFTAPE_COMPILE_AHEAD", "1") != "0"

# Where compiled kernel modules are cached on disk.
cache_dir: str = _os.environ.get("DIFFTAPE_CACHE_DIR") or _os.path.join(
    _os.path.expanduser("~"), ".cache", "difftape"
)

# Let LLVM reassociate floating-point math (fastmath); changes results in the last bits.
fast_math: bool = False

# Run CPU kernels with denormal numbers flushed to zero (x86 FTZ/DAZ, set and restored around
# every launch, on every thread it uses). Arithmetic that produces or reads denormals (values
# below ~1.2e-38 in float32) is then as fast as any other instead of ~100x slower, but such
# values become 0. Taichi flushes them by default; Warp's CPU kernels and NumPy do not.
flush_denormals: bool = False
