"""Array constructors: zeros, ones, full, empty, the *_like family, clone and from_numpy.

Each builds a new ``array`` from a shape or another array; none writes an existing array except
through ``copy`` (so ``clone`` is recorded like any copy). The array class is in ``array.py``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from difftape._src import dtypes
from difftape._src.array import array, copy
from difftape._src.device import Device
from difftape._src.errors import ArrayError

DeviceLike = Device | str | None


def _infer_dtype(value: object) -> type:
    """Warp's dtype for a fill value: bool → bool, int → int32, float → float32."""
    if isinstance(value, np.generic) and dtypes.normalize_dtype(value.dtype) is not None:
        return dtypes.from_numpy_dtype(value.dtype)  # before float: np.float64 is a float
    if isinstance(value, bool):
        return dtypes.bool_
    if isinstance(value, int):
        return dtypes.int32
    if isinstance(value, float):
        return dtypes.float32
    raise ArrayError(
        f"full() cannot infer a dtype from the value {value!r} ({type(value).__name__}); "
        "pass dtype=, e.g. wp.full(n, value, dtype=wp.float32)"
    )


def empty(shape=0, dtype=float, device: DeviceLike = None, requires_grad: bool = False,
          pinned: bool = False, retain_grad: bool = False) -> array:
    """A new array of ``shape``. Its values are zero here, but code should not rely on that.

    Args:
        shape: An int or a tuple of 1 to 4 ints.
        dtype: Element type; ``float`` means float32.
        device: ``None`` or ``"cpu"``.
        requires_grad: Allocate a zero ``.grad`` now.
        pinned: Recorded for Warp compatibility.
        retain_grad: Keep ``.grad`` through consuming stores (needs requires_grad).

    Returns:
        The new array.
    """
    return array(shape=shape, dtype=dtype, device=device, requires_grad=requires_grad,
                 pinned=pinned, retain_grad=retain_grad)


def zeros(shape=0, dtype=float, device: DeviceLike = None, requires_grad: bool = False,
          pinned: bool = False, retain_grad: bool = False) -> array:
    """A new zero-filled array; arguments as for ``empty``.

    Example:
        >>> wp.zeros(3, dtype=wp.float32, requires_grad=True).grad.numpy()
        array([0., 0., 0.], dtype=float32)
    """
    return empty(shape, dtype, device, requires_grad, pinned, retain_grad)


def full(shape=0, value=0, dtype=Any, device: DeviceLike = None, requires_grad: bool = False,
         pinned: bool = False, retain_grad: bool = False) -> array:
    """A new array with every element set to ``value``.

    Args:
        shape: An int or a tuple of 1 to 4 ints.
        value: The fill value.
        dtype: Element type; inferred from ``value`` when omitted (float → float32,
            int → int32, bool → bool, numpy scalars keep their type).
        device, requires_grad, pinned, retain_grad: as for ``empty``.

    Returns:
        The new array.

    Raises:
        ArrayError: if the dtype cannot be inferred or ``value`` does not convert to it.
    """
    if dtype is Any or dtype is None:
        dtype = _infer_dtype(value)
    result = empty(shape, dtype, device, requires_grad, pinned, retain_grad)
    result._fill_storage(value)
    return result


def ones(shape=0, dtype=float, device: DeviceLike = None, requires_grad: bool = False,
         pinned: bool = False, retain_grad: bool = False) -> array:
    """A new array of ones; arguments as for ``empty``."""
    return full(shape, 1, dtype, device, requires_grad, pinned, retain_grad)


def empty_like(src: array, device: DeviceLike = None, requires_grad: bool | None = None,
               pinned: bool | None = None, retain_grad: bool | None = None) -> array:
    """A new contiguous array with the shape and dtype of ``src``.

    Args:
        src: The array to imitate.
        device: Defaults to ``src.device``.
        requires_grad: Defaults to ``src.requires_grad`` (SPEC §2.5).
        pinned: Defaults to ``src.pinned``.
        retain_grad: Defaults to ``src.retain_grad`` when the new array requires grad.

    Returns:
        The new array (zero-filled here).
    """
    if not isinstance(src, array) or src.is_annotation:
        raise ArrayError(f"*_like() expects a difftape array with memory; got {src!r}")
    if requires_grad is None:
        requires_grad = src.requires_grad
    if retain_grad is None:
        retain_grad = bool(requires_grad) and src.retain_grad
    return array(
        shape=src.shape, dtype=src.dtype, device=src.device if device is None else device,
        requires_grad=requires_grad, pinned=src.pinned if pinned is None else pinned,
        retain_grad=retain_grad,
    )


def zeros_like(src: array, device: DeviceLike = None, requires_grad: bool | None = None,
               pinned: bool | None = None, retain_grad: bool | None = None) -> array:
    """A new zero-filled array shaped like ``src``; arguments as for ``empty_like``."""
    return empty_like(src, device, requires_grad, pinned, retain_grad)


def full_like(src: array, value, device: DeviceLike = None, requires_grad: bool | None = None,
              pinned: bool | None = None, retain_grad: bool | None = None) -> array:
    """A new array shaped like ``src`` with every element ``value``; see ``empty_like``."""
    result = empty_like(src, device, requires_grad, pinned, retain_grad)
    result._fill_storage(value)
    return result


def ones_like(src: array, device: DeviceLike = None, requires_grad: bool | None = None,
              pinned: bool | None = None, retain_grad: bool | None = None) -> array:
    """A new array of ones shaped like ``src``; arguments as for ``empty_like``."""
    return full_like(src, 1, device, requires_grad, pinned, retain_grad)


def clone(src: array, device: DeviceLike = None, requires_grad: bool | None = None,
          pinned: bool | None = None, retain_grad: bool | None = None) -> array:
    """A contiguous copy of ``src`` made with ``copy`` (so its grad is copied and taped too).

    ``requires_grad`` defaults to ``src.requires_grad``; ``clone(x, requires_grad=False)`` is the
    detach idiom: same values, no gradient buffer, not recorded as a differentiable copy.

    Args:
        src: The array to copy.
        device, requires_grad, pinned, retain_grad: as for ``empty_like``.

    Returns:
        The new array.
    """
    result = empty_like(src, device, requires_grad, pinned, retain_grad)
    copy(result, src)
    return result


def from_numpy(arr: np.ndarray, dtype: object = None, shape: object = None,
               device: DeviceLike = None, requires_grad: bool = False) -> array:
    """A new array holding a copy of the numpy array ``arr``.

    Args:
        arr: The values.
        dtype: Element type; inferred from ``arr.dtype`` when None.
        shape: Optional new shape for the values.
        device: ``None`` or ``"cpu"``.
        requires_grad: Allocate a zero ``.grad``.

    Returns:
        The new array.
    """
    return array(data=arr, dtype=Any if dtype is None else dtype, shape=shape, device=device,
                 requires_grad=requires_grad)
