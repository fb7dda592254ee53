"""Tape-recorded copies: ``wp.copy``, ``wp.clone`` and ``array.assign`` with Warp's gradients (SPEC §2.7).

``array.copy`` already copies the gradient window forward; this module registers the observer
that, while a tape is active and both arrays have ``.grad``, records the copy's adjoint:
``src.grad[window] += dest.grad[window]``, then ``dest.grad[window] = 0`` unless
``dest.retain_grad`` (final write wins, read at backward time). Patterns it cannot accumulate
(overlapping or reinterpreting copies) fall back to Warp's old overwrite, with Warp's once-only
warning. It never launches kernels; the adjoint works on the gradient storage directly.
"""

from __future__ import annotations

import warnings

import numpy as np

from . import config
from . import tape as tape_module
from .array import _copy_observers, _copy_window, array
from .array_storage import flat_storage
from .caller import user_location

_warned: set[str] = set()


def record_copy(dest: array, src: array, dest_offset: int, src_offset: int, count: int) -> None:
    """Copy observer: record the adjoint of a copy between two arrays that have gradients."""
    if src._grad is None or dest._grad is None:
        return
    tape = tape_module.active_tape()
    if tape is None:
        return

    def backward() -> None:
        adj_copy(dest.grad, src.grad, dest_offset, src_offset, count,
                 dest_retain_grad=dest.retain_grad)

    filename, lineno = user_location()
    backward._difftape_copy = (dest, f"{filename}:{lineno}")  # overwrite.py names it
    tape.record_func(backward, arrays=[dest, src])
    if config.verify_autograd_array_access:
        if dest._is_read:
            dest.mark_write(operation="an array copy", filename=filename, lineno=lineno)
        src.mark_read()


def _windows(adj_src: array, adj_dest: array, dest_offset: int, src_offset: int, count: int):
    """The copied window of each gradient as numpy views ``(src, dest)``, or None."""
    if adj_src.is_contiguous and adj_dest.is_contiguous:
        return (flat_storage(adj_src._data, adj_src.dtype)[src_offset:src_offset + count],
                flat_storage(adj_dest._data, adj_dest.dtype)[dest_offset:dest_offset + count])
    if adj_src.ndim == 1 and adj_dest.ndim == 1:
        return (adj_src._data[src_offset:src_offset + count],
                adj_dest._data[dest_offset:dest_offset + count])
    if adj_src.shape == adj_dest.shape:
        return adj_src._data, adj_dest._data
    return None


def _addable(adj_src: array, adj_dest: array) -> bool:
    """Matching numeric dtypes (not bool, not structs): the windows can be added elementwise."""
    return adj_src.dtype is adj_dest.dtype and adj_src._data.dtype.kind in "fiuc"


def _overlap(a: np.ndarray, b: np.ndarray) -> bool:
    """Conservative, as Warp: interleaved views and non-positive strides count as overlapping."""
    if any(s <= 0 for s in a.strides + b.strides):
        return True
    return bool(np.may_share_memory(a, b))


def adj_copy(adj_dest: array, adj_src: array, dest_offset: int, src_offset: int, count: int,
             dest_retain_grad: bool = False) -> None:
    """Accumulate the destination window's gradient into the source window's, then consume it.

    Args:
        adj_dest: The destination array's gradient.
        adj_src: The source array's gradient (accumulated into).
        dest_offset, src_offset, count: The forward copy's window, in elements.
        dest_retain_grad: Keep ``adj_dest`` (``retain_grad=True`` on the destination).
    """
    if adj_src.size == 0 or count == 0:
        return
    windows = _windows(adj_src, adj_dest, dest_offset, src_offset, count)
    if _addable(adj_src, adj_dest) and windows is not None and not _overlap(*windows):
        src_window, dest_window = windows
        src_window += dest_window
        if not dest_retain_grad:
            dest_window[...] = 0
        return
    if not _addable(adj_src, adj_dest):
        reason = "copy between unsupported gradient dtypes"
    elif windows is None:
        reason = "copy with unsupported view or offset layout"
    else:
        reason = "overlapping copy"
    _warn_fallback(reason)
    _copy_window(adj_src, adj_dest, src_offset, dest_offset, count)


def _warn_fallback(reason: str) -> None:
    message = (
        "A tape-recorded wp.copy() encountered a copy pattern whose gradients cannot yet be fully "
        f"tracked ({reason}). The backward pass may overwrite existing source gradients or fail "
        "to clear gradients from overwritten destination values.")
    if message in _warned or config.log_level > config.LOG_WARNING:
        return
    _warned.add(message)
    warnings.warn(message, UserWarning, stacklevel=5)  # the user's backward() call


_copy_observers.append(record_copy)
