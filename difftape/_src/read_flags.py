"""Warp's ``wp.config.verify_autograd_array_access``: per-array read flags and their warnings (SPEC §3).

With the flag on, each recorded launch marks the arrays it writes (warning when an earlier launch
read them) and then the arrays it reads; the first launch of a kernel also warns about stores
that follow a load of the same parameter inside the kernel (Warp does this at build time).
``Tape.backward()`` and ``Tape.reset()`` clear the flags. The texts are Warp's. This module only
sets flags and warns; difftape's own, always-on check is ``overwrite.py``.
"""

from __future__ import annotations

import inspect
import warnings

from . import config
from .access import access_of
from .array import array
from .errors import DiffTapeWarning


def _kernel_origin(kernel) -> tuple[str, int]:
    """Warp's ``file:lineno`` of a kernel: its source file and first (decorator) line."""
    origin = kernel.__dict__.get("_origin")
    if origin is None:
        try:
            filename = inspect.getsourcefile(kernel.func) or kernel.func.__code__.co_filename
        except TypeError:
            filename = kernel.func.__code__.co_filename
        origin = kernel._origin = (filename, kernel.func.__code__.co_firstlineno)
    return origin


def warn(message: str, stacklevel: int = 3) -> None:
    """A Warp-style warning, dropped when ``config.log_level`` is above LOG_WARNING."""
    if config.log_level <= config.LOG_WARNING:
        warnings.warn(message, DiffTapeWarning, stacklevel=stacklevel)


def check_build(kernel) -> None:
    """Warn once per kernel about parameters written after being read in the same kernel."""
    if kernel.__dict__.get("_write_after_read_checked"):
        return
    kernel._write_after_read_checked = True
    params = kernel.ir.params
    for k, filename, lineno in access_of(kernel).write_after_read:
        warn(f"Array passed to argument {params[k].name} in kernel {kernel.key} at "
             f"{filename}:{lineno} is being written to after it has been read from within the "
             "same kernel. This may corrupt gradient computation in the backward pass.",
             stacklevel=4)


def check_kernel_array_access(kernel, args: list) -> None:
    """Mark written arrays (warning if already read), then read arrays (Warp's launch-time check).

    Writes are marked first, so a kernel that reads and writes an array does not warn against
    itself. Arrays inside structs are not checked, as in Warp.
    """
    facts = access_of(kernel)
    filename, lineno = _kernel_origin(kernel)
    params = kernel.ir.params
    for k, arg in enumerate(args):
        if not isinstance(arg, array) or k >= len(params):
            continue
        if facts.is_write[k]:
            arg.mark_write(arg_name=params[k].name, kernel_name=kernel.key, filename=filename,
                           lineno=lineno)
        if facts.is_read[k]:
            arg.mark_read()


def reset_tape(tape) -> None:
    """Clear the read flags of every array a tape recorded, of their view parents, and of
    every array key of ``tape.gradients`` (after backward, or on reset)."""

    def clear(a: array) -> None:
        while a is not None:
            a._is_read = False
            a = a._ref

    for record in tape.launches:
        if callable(record):
            continue
        for group in (record[3], record[4]):
            for a in group:
                if isinstance(a, array):
                    clear(a)
    for a in tape.gradients:
        if isinstance(a, array):
            clear(a)
