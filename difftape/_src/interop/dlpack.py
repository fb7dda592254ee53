"""DLPack exchange (``array.__dlpack__``, ``wp.from_dlpack``, ``wp.to_dlpack``) through numpy.

Arrays are numpy storage on the CPU, so exporting hands numpy's capsule out and importing wraps
what ``numpy.from_dlpack`` returns; memory is always shared, never copied. Vector and matrix
elements travel as trailing dimensions, as in Warp.
"""

from __future__ import annotations

import ctypes

import numpy as np

from difftape._src import dtypes
from difftape._src.array import array
from difftape._src.array_storage import check_shape, contiguous_strides, inner_ndim
from difftape._src.device import get_device
from difftape._src.errors import ArrayError

_DLPACK_CPU = 1  # kDLCPU in DLPack's DLDeviceType


class _Capsule:
    """Gives a bare (legacy) DLPack capsule the ``__dlpack__`` protocol numpy asks for."""

    def __init__(self, capsule: object):
        self.capsule = capsule

    def __dlpack__(self, **kwargs) -> object:
        return self.capsule

    def __dlpack_device__(self) -> tuple[int, int]:
        return (_DLPACK_CPU, 0)


def array_dlpack(a: array, **kwargs) -> object:
    """``a.__dlpack__(...)``: a DLPack capsule sharing ``a``'s memory."""
    a._require_storage("__dlpack__")
    return a._data.__dlpack__(**kwargs)


def array_dlpack_device(a: array) -> tuple[int, int]:
    """``a.__dlpack_device__()``: ``(1, 0)``, the CPU."""
    return (_DLPACK_CPU, 0)


def to_dlpack(a: array) -> object:
    """A DLPack capsule sharing ``a``'s memory (Warp's ``wp.to_dlpack``).

    Example:
        >>> t = torch.utils.dlpack.from_dlpack(wp.to_dlpack(x))
    """
    if not isinstance(a, array):
        raise TypeError(f"to_dlpack expects a difftape array, got {type(a).__name__}")
    return array_dlpack(a)


def _writable(data: np.ndarray) -> np.ndarray:
    """``data`` itself, or a writable alias of its memory that keeps ``data`` alive.

    numpy marks arrays made from legacy capsules read-only, although the producer's memory is
    writable; difftape arrays must be writable for kernels to store into them.
    """
    if data.flags.writeable or data.size == 0:
        return data
    start = data.__array_interface__["data"][0]
    below = sum((n - 1) * s for n, s in zip(data.shape, data.strides) if s < 0)
    above = sum((n - 1) * s for n, s in zip(data.shape, data.strides) if s > 0)
    buffer = (ctypes.c_byte * (above - below + data.itemsize)).from_address(start + below)
    buffer._owner = data  # type: ignore[attr-defined]  (keeps the producer's capsule alive)
    return np.ndarray(data.shape, data.dtype, buffer, -below, data.strides)


def from_dlpack(source: object, dtype: object = None) -> array:
    """A difftape array sharing the memory of a DLPack producer (Warp's ``wp.from_dlpack``).

    Args:
        source: An object with ``__dlpack__`` (a torch tensor, a numpy array, a difftape array…)
            or a DLPack capsule.
        dtype: Element type; inferred when None. A vector or matrix type consumes the trailing
            dimensions (shape (4, 3) with ``wp.vec3`` gives 4 elements).

    Returns:
        The array, without a gradient buffer.

    Example:
        >>> a = wp.from_dlpack(torch.ones(4, 3), dtype=wp.vec3)
    """
    if not hasattr(source, "__dlpack__"):
        source = _Capsule(source)
    device = source.__dlpack_device__()
    if device[0] != _DLPACK_CPU:
        raise ArrayError(f"from_dlpack: difftape arrays live on the CPU, but the source is on "
                         f"DLPack device {device}; move it to the CPU first")
    data = _writable(np.from_dlpack(source))
    natural = dtypes.normalize_dtype(data.dtype)
    if natural is None:
        raise TypeError(f"from_dlpack: unsupported data type {data.dtype}")
    resolved = natural if dtype is None else dtypes.normalize_dtype(dtype)
    if resolved is None or dtypes.numpy_dtype(resolved) != data.dtype:
        raise RuntimeError(f"Incompatible data types: {data.dtype} and {dtype!r}")
    inner = tuple(getattr(resolved, "_shape", ()))
    if inner and (data.shape[-len(inner):] != inner or data.strides[-len(inner):] !=
                  contiguous_strides(inner, data.itemsize)):
        raise RuntimeError(f"from_dlpack: shape {data.shape} does not end in a contiguous "
                           f"{inner} block for dtype {dtypes.type_name(resolved)}")
    if data.ndim == len(inner):
        data = data.reshape((1, *inner))
    check_shape(data.shape[: data.ndim - inner_ndim(resolved)])
    return array._wrap(data, resolved, get_device("cpu"))
