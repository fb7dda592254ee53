"""Numpy storage layout for arrays: dtype spellings, shapes, strides, allocation and conversion.

These helpers turn constructor arguments into a numpy ndarray and describe its layout; they know
nothing of gradients, views or the tape (``array.py`` owns those). Vector dtypes will extend
``storage_shape`` so that every layout computation picks up their component dimensions.
"""

from __future__ import annotations

import ctypes
import math
from typing import Any

import numpy as np

from difftape._src import dtypes
from difftape._src.errors import ArrayError

ARRAY_MAX_DIMS = 4

ALIGNMENT = 64
"""Bytes that every storage of ``ALIGNED_MIN_BYTES`` or more this module allocates starts on a
multiple of: a cache line, as Warp's host allocator. numpy's own allocations start 16-byte
aligned, and where a vector loop's loads and stores straddle cache lines a streaming kernel ran
up to 1.6x slower (vec4d, 96 MB: 10.2 against 6.2 ms), depending on where in a page the
allocator happened to place each array."""

ALIGNED_MIN_BYTES = 4096
"""Smaller storage is numpy's own: aligning costs ~3 us per allocation, more than a kernel
spends on a page of data that straddles lines."""


class AlignedBlock(np.ndarray):
    """The memory of one allocated storage: a uint8 array owning it, ``ALIGNMENT`` bytes longer
    than the storage, which starts at the block's first aligned byte. The storage's ``base`` is
    its block; a view of the storage has the storage as ``base`` (numpy stops collapsing a view's
    base at a different class), so a block base marks a whole allocation (``owns_memory``)."""


# The classes of an owning storage's ``base``: none (numpy's own allocations), or its block.
OWNING_BASES = (type(None), AlignedBlock)


def owns_memory(storage: np.ndarray) -> bool:
    """Whether ``storage`` is all of its memory: no other array made here starts inside it
    (numpy's own allocations, and this module's ``AlignedBlock`` storage)."""
    return storage.base.__class__ in OWNING_BASES


def aligned_empty(shape: tuple[int, ...], np_dtype: np.dtype, zero: bool = False) -> np.ndarray:
    """An uninitialized (or, with ``zero``, zero-filled) C-contiguous array, starting on an
    ``ALIGNMENT`` boundary from ``ALIGNED_MIN_BYTES`` up."""
    nbytes = math.prod(shape) * np.dtype(np_dtype).itemsize
    if nbytes < ALIGNED_MIN_BYTES:
        return (np.zeros if zero else np.empty)(shape, np_dtype)
    block = np.ndarray.__new__(AlignedBlock, (nbytes + ALIGNMENT,), np.uint8)
    if zero:
        block.fill(0)
    offset = -block.ctypes.data % ALIGNMENT
    return np.ndarray(shape, np_dtype, buffer=block, offset=offset)


def aligned_copy(values: np.ndarray) -> np.ndarray:
    """A C-contiguous, ``ALIGNMENT``-aligned copy of ``values``."""
    result = aligned_empty(values.shape, values.dtype)
    np.copyto(result, values)
    return result


class ArrayRuntimeError(ArrayError, RuntimeError):
    """An array operation Warp rejects with ``RuntimeError`` (bad reshape, copy overflow…)."""


def storage_shape(shape: tuple[int, ...], dtype: type) -> tuple[int, ...]:
    """The numpy shape that stores an array of ``shape`` elements of ``dtype``.

    Scalars store one numpy element each. Vector and matrix dtypes will append their component
    dimensions here (``vec3`` → ``(*shape, 3)``); every other helper goes through this one.
    """
    return tuple(shape) + tuple(getattr(dtype, "_shape", ()))


def inner_ndim(dtype: type) -> int:
    """How many trailing numpy dimensions one element of ``dtype`` takes (0 for scalars)."""
    return len(storage_shape((), dtype))


def is_plain(storage: np.ndarray) -> bool:
    """Whether compiled code may be handed ``storage`` without Numba's per-call argument
    typing (``backends/cpu_entry.py``): C-contiguous, aligned and writeable."""
    flags = storage.flags
    return flags.c_contiguous and flags.aligned and flags.writeable


def type_size(dtype: type) -> int:
    """Bytes per array element (Warp's ``type_size_in_bytes``)."""
    return dtypes.numpy_dtype(dtype).itemsize * math.prod(storage_shape((), dtype))


def contiguous_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """Row-major byte strides; an array is contiguous when its strides equal these (as in Warp)."""
    strides = []
    stride = itemsize
    for n in reversed(shape):
        strides.append(stride)
        stride *= n
    return tuple(reversed(strides))


def _extent(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int) -> int:
    """Bytes from the first to one past the last element of a strided layout."""
    return itemsize + sum((n - 1) * s for n, s in zip(shape, strides)) if all(shape) else 0


def resolve_dtype(dtype: object) -> type | None:
    """The scalar type for a dtype spelling, or None for ``Any``/``None`` (infer it)."""
    if dtype is None or dtype is Any:
        return None
    resolved = dtypes.normalize_dtype(dtype)
    if resolved is None:
        raise ArrayError(
            f"array dtype must be a difftape scalar type (float32, int32, ...) or float, int or "
            f"bool; got {dtype!r}"
        )
    return resolved


def check_shape(shape: object) -> tuple[int, ...]:
    """Normalize an int or a sequence of ints to a shape tuple with 1 to 4 non-negative dims."""
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        result = tuple(int(n) for n in shape)  # type: ignore[union-attr]
    except TypeError:
        raise ArrayError(f"array shape must be an int or a tuple of ints; got {shape!r}") from None
    if not 1 <= len(result) <= ARRAY_MAX_DIMS:
        raise ArrayRuntimeError(
            f"Failed to create array with shape {result}, the number of dimensions must be "
            f"between 1 and {ARRAY_MAX_DIMS}"
        )
    if any(n < 0 for n in result):
        raise ArrayError(f"array shape must not have negative dimensions; got {result}")
    return result


def allocate(
    shape: tuple[int, ...], dtype: type, strides: tuple[int, ...] | None = None
) -> np.ndarray:
    """A zero-filled, ``ALIGNMENT``-aligned numpy storage; given ``strides`` (bytes), it uses
    them, as Warp does."""
    np_dtype = dtypes.numpy_dtype(dtype)
    itemsize = type_size(dtype)
    if strides is None or tuple(strides) == contiguous_strides(shape, itemsize):
        return aligned_empty(storage_shape(shape, dtype), np_dtype, zero=True)
    strides = tuple(int(s) for s in strides)
    if len(strides) != len(shape) or any(s < 0 for s in strides):
        raise ArrayError(
            f"array strides must be {len(shape)} non-negative byte counts; got {strides}"
        )
    buffer = aligned_empty((_extent(shape, strides, itemsize),), np.uint8, zero=True)
    inner = contiguous_strides(storage_shape((), dtype), np_dtype.itemsize)
    return np.ndarray(storage_shape(shape, dtype), np_dtype, buffer, 0, strides + inner)


def storage_from_data(
    data: object, dtype: type | None, shape: object, copy: bool
) -> tuple[np.ndarray, type]:
    """Convert list/numpy/array ``data`` to numpy storage (with ``copy``, a new aligned one);
    returns (storage, dtype)."""
    if not hasattr(data, "__len__"):
        raise ArrayRuntimeError(f"Data must be a sequence or array, got scalar {data!r}")
    np_dtype = None if dtype is None else dtypes.numpy_dtype(dtype)
    try:
        arr = np.asarray(data, np_dtype)
    except (TypeError, ValueError, OverflowError) as err:
        target = "an array" if dtype is None else f"an array of {dtypes.type_name(dtype)}"
        raise ArrayRuntimeError(f"Failed to convert input data to {target}: {err}") from err
    if dtype is None:
        dtype = dtypes.normalize_dtype(arr.dtype) if arr.dtype.kind in "biuf" else None
        if dtype is None:
            raise ArrayRuntimeError(
                f"Unsupported input data dtype: {arr.dtype}; pass dtype= or numeric data"
            )
    if shape is not None:
        target_shape = check_shape(shape)
        try:
            arr = arr.reshape(storage_shape(target_shape, dtype))
        except ValueError as err:
            raise ArrayRuntimeError(
                f"Failed to reshape the input data to the given shape {target_shape} and type "
                f"{dtypes.type_name(dtype)}: {err}"
            ) from err
    if arr.ndim == inner_ndim(dtype):
        arr = arr.reshape(storage_shape((1,), dtype))
    check_shape(arr.shape[: arr.ndim - inner_ndim(dtype)])
    return (aligned_copy(arr) if copy else arr), dtype


def storage_from_pointer(
    ptr: int, dtype: type, shape: object, strides: object, capacity: int | None
) -> np.ndarray:
    """Alias host memory at ``ptr`` (Warp's ``array(ptr=...)``); the caller keeps it alive."""
    if shape is None:
        raise ArrayError("array(ptr=...) needs shape= to know how much memory to alias")
    shape = check_shape(shape)
    itemsize = type_size(dtype)
    strides = contiguous_strides(shape, itemsize) if strides is None else tuple(strides)
    nbytes = max(capacity or 0, _extent(shape, strides, itemsize))
    if nbytes == 0:
        return allocate(shape, dtype)
    if not ptr:
        raise ArrayError(f"array(ptr=...) got a null pointer for {nbytes} bytes of shape {shape}")
    buffer = (ctypes.c_byte * nbytes).from_address(int(ptr))
    np_dtype = dtypes.numpy_dtype(dtype)
    inner = contiguous_strides(storage_shape((), dtype), np_dtype.itemsize)
    return np.ndarray(storage_shape(shape, dtype), np_dtype, buffer, 0, strides + inner)


def flat_storage(storage: np.ndarray, dtype: type) -> np.ndarray:
    """The elements as one flat axis; a view when the storage is contiguous."""
    return storage.reshape((-1, *storage_shape((), dtype)))
