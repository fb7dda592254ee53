"""Compiled code calls the C library's math functions directly, not through Numba's bridges.

Numba binds each C math name its generated code calls (``exp``, ``sin``, ``tanh``, ``atan2``,
their ``f`` forms: ``numba.core.intrinsics.INTR_MATH``) to a bridge in its own helper library,
``numba_exp(a) { return exp(a); }``, so that on Windows the C runtime CPython uses is the one
called. Every call then pays a second call and return: 1M float64 ``exp`` took 4.9 ms against
3.7 ms calling glibc's ``exp`` itself (warp-lang, whose clang-compiled kernels call glibc
directly: 3.95 ms). On Linux the bridges call the ``libm`` this process has loaded, so
:func:`apply` binds each name to that library's own function: the same function, one call less.
Elsewhere nothing changes.

The binding is process-wide, like the LLVM options (``cpu_llvm.py``): the user's own Numba
functions call the C library directly too, with the same results. Numba installs its bridges
when its CPU target is first set up; :func:`apply` binds after that, whichever comes first.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys

import llvmlite.binding as llvm
from numba.core import externals, intrinsics


def _c_library_math() -> dict[str, int]:
    """Address of each of Numba's C math names in this process's libm (Linux only)."""
    if not sys.platform.startswith("linux"):
        return {}
    try:
        libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
    except OSError:
        return {}
    addresses = {}
    for name in sorted(intrinsics.INTR_MATH):
        function = getattr(libm, name, None)
        if function is not None:
            addresses[name] = ctypes.cast(function, ctypes.c_void_p).value
    return addresses


def _bind() -> None:
    for name, address in _c_library_math().items():
        llvm.add_symbol(name, address)


def apply() -> None:
    """Bind Numba's C math names to libm's functions now if Numba has installed its bridges,
    else right after it does (once: a re-imported difftape changes nothing)."""
    installer = externals.c_math_functions
    if getattr(installer, "_difftape_bound", False):
        return
    installer._difftape_bound = True
    if installer._installed:
        _bind()
        return
    install_bridges = installer._do_install

    def install_bridges_then_bind(context):
        install_bridges(context)
        _bind()

    installer._do_install = install_bridges_then_bind
