"""The ``difftape.array`` class: numpy storage, ``.grad`` buffers, views, and ``copy``.

An array owns a numpy ndarray (``_data``) plus its gradient buffer, and knows how views share
both. It never launches kernels and never imports the tape: the tape learns about copies through
``_copy_observers``. Storage layout is in ``array_storage.py``; ``zeros``, ``clone``… in
``array_ops.py``.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np

from difftape._src import dtypes
from difftape._src.array_storage import (
    ARRAY_MAX_DIMS,
    ArrayRuntimeError,
    allocate,
    check_shape,
    contiguous_strides,
    flat_storage,
    inner_ndim,
    is_plain,
    resolve_dtype,
    storage_from_data,
    storage_from_pointer,
    storage_shape,
    type_size,
)
from difftape._src.device import Device, get_device
from difftape._src.errors import ArrayError

# Called as observer(dest, src, dest_offset, src_offset, count) after every copy() that moved
# data; the Tape appends one here to record copies without this module importing it.
_copy_observers: list[Callable[[array, array, int, int, int], None]] = []


class array:
    """A typed, up-to-4-D array with an optional gradient buffer, as ``warp.array``.

    With ``data``, ``shape`` or ``ptr`` it holds memory; with none of them it is a type
    annotation for a kernel parameter (``wp.array(dtype=float, ndim=2)``, also spelled
    ``wp.array2d[float]``).

    Args:
        data: A list, numpy array or difftape array to copy (or alias with ``copy=False``).
        dtype: Element type (``wp.float32``, ``float``, ``np.int32``…); inferred from ``data``
            when omitted (Python floats give float64, as in Warp). Annotations default to float32.
        shape: An int or a tuple of 1 to 4 ints.
        strides: Byte strides for a new allocation or a ``ptr`` alias.
        alignment: Accepted for Warp compatibility; ignored.
        ptr: Address of host memory to alias (with ``shape``); the caller keeps it alive.
        capacity: Size in bytes of the ``ptr`` allocation.
        device: ``None`` or ``"cpu"``.
        pinned: Recorded for Warp compatibility.
        copy: False aliases a numpy array of the matching dtype instead of copying it.
        deleter: Accepted for Warp compatibility; never called.
        ndim: Number of dimensions of an annotation (default 1).
        grad: A gradient buffer to use; it must match dtype, shape, strides and device.
        requires_grad: Allocate a zero gradient buffer now.
        retain_grad: Keep ``.grad`` when a kernel store would consume it (needs requires_grad).

    Example:
        >>> x = wp.array([1.0, 2.0], dtype=wp.float32, requires_grad=True)
        >>> x.grad.numpy()
        array([0., 0.], dtype=float32)
    """

    _annotation_ndim = 1  # array2d/3d/4d override this for their subscript spellings

    def __init__(
        self, data=None, dtype=Any, shape=None, strides=None, alignment=None, ptr=None,
        capacity=None, device=None, pinned=False, copy=True, deleter=None, ndim=None,
        grad=None, requires_grad=False, retain_grad=False,
    ):  # fmt: skip
        self._init_fields(pinned)
        self.deleter = deleter
        resolved = resolve_dtype(dtype)
        if data is not None:
            if ptr is not None:
                raise ArrayRuntimeError(
                    "Can only construct arrays with either `data` or `ptr` arguments, not both"
                )
            storage, resolved = storage_from_data(data, resolved, shape, copy)
        elif ptr is not None:
            resolved = resolved or dtypes.float32
            storage = storage_from_pointer(ptr, resolved, shape, strides, capacity)
        elif shape is not None:
            resolved = resolved or dtypes.float32
            storage = allocate(check_shape(shape), resolved, strides)
        else:
            ndim = self._annotation_ndim if ndim is None else ndim
            self._init_annotation(resolved or dtypes.float32, ndim)
            # wp.array(dtype=Any) in a @wp.func: the element type comes from the argument.
            self.generic_dtype = resolved is None
            return
        self._set_storage(storage, resolved, get_device(device))
        if grad is not None:
            self.grad = grad
        elif requires_grad:
            self.requires_grad = True
        if retain_grad:
            self.retain_grad = True

    def __class_getitem__(cls, dtype: object) -> array:
        """``wp.array[float]`` / ``wp.array2d[float]``: the annotation for that dtype and ndim."""
        return array(dtype=dtype, ndim=cls._annotation_ndim)

    # -- construction internals ------------------------------------------------------------

    def _init_fields(self, pinned: bool = False) -> None:
        self._grad: array | None = None
        self._requires_grad = False
        self._retain_grad = False
        self._ref: array | None = None  # the array this one is a view of
        self._is_read = False
        self._write_count = 0
        self._last_writer: object = None  # kernel or operation name of the last write
        self.pinned = bool(pinned)
        self.deleter = None
        self.is_transposed = False

    def _init_annotation(self, dtype: type, ndim: int) -> None:
        if not 1 <= ndim <= ARRAY_MAX_DIMS:
            raise ArrayError(f"array ndim must be between 1 and {ARRAY_MAX_DIMS}; got {ndim}")
        self._data = None
        self._plain_data = None
        self.dtype = dtype
        self.ndim = ndim
        self.shape = (0,) * ndim
        self.size = 0
        self.strides = (0,) * ndim
        self.device: Device | None = None
        self.is_contiguous = False

    def _set_storage(self, storage: np.ndarray, dtype: type, device: Device) -> None:
        ndim = storage.ndim - inner_ndim(dtype)
        self._data = storage
        self._plain_data = storage if is_plain(storage) else None  # as wrapped (launch.py)
        self.dtype = dtype
        self.ndim = ndim
        self.shape = tuple(storage.shape[:ndim])
        self.size = math.prod(self.shape)
        self.strides = tuple(storage.strides[:ndim])
        self.device = device
        self.is_contiguous = self.strides == contiguous_strides(self.shape, type_size(dtype))

    @staticmethod
    def _wrap(storage: np.ndarray, dtype: type, device: Device, pinned: bool = False) -> array:
        """An array around existing numpy storage, skipping argument parsing (views, grads)."""
        a = object.__new__(array)
        a._init_fields(pinned)
        a._set_storage(storage, dtype, device)
        return a

    def _derive(self, op: Callable[[np.ndarray], np.ndarray], dtype: type | None = None,
                inherit_read: bool = False) -> array:
        """A view made by ``op`` on the storage; its grad is ``op`` on this array's grad."""
        dtype = dtype or self.dtype
        view = array._wrap(op(self._data), dtype, self.device, self.pinned)
        view._ref = self
        if self._grad is not None:
            grad = array._wrap(op(self._grad._data), dtype, self.device, self.pinned)
            grad._ref = self._grad
            view._grad = grad
            view._requires_grad = True
            view._retain_grad = self._retain_grad
        if inherit_read:
            view._is_read = self._is_read
        return view

    def _require_storage(self, operation: str) -> None:
        if self._data is None:
            raise ArrayError(
                f"{operation} needs an array with memory; {self.type_name()} is a type annotation. "
                "Create one with wp.array(data), wp.zeros(shape) or similar."
            )

    # -- properties --------------------------------------------------------------------------

    @property
    def is_annotation(self) -> bool:
        """True for a kernel parameter annotation (no memory), False for a real array."""
        return self._data is None

    @property
    def ptr(self) -> int | None:
        """Address of the first element, or None for annotations and empty arrays."""
        if self._data is None or self.size == 0:
            return None
        return int(self._data.ctypes.data)

    @property
    def grad(self) -> array | None:
        """The gradient buffer, or None. Setting validates dtype/shape/device/strides."""
        return self._grad

    @grad.setter
    def grad(self, grad: array | None) -> None:
        if grad is None:
            self._grad = None
            self._requires_grad = False
            self._retain_grad = False
            return
        self._require_storage("setting .grad")
        if not isinstance(grad, array) or grad.is_annotation:
            raise ArrayError(
                "The given gradient array is incompatible: expected a difftape array, got "
                f"{type(grad).__name__}"
            )
        checks = (
            ("dtype", dtypes.type_name(self.dtype), dtypes.type_name(grad.dtype)),
            ("shape", self.shape, grad.shape),
            ("device", self.device, grad.device),
            ("strides", self.strides, grad.strides),
        )
        for what, expected, given in checks:
            if expected != given:
                raise ArrayError(
                    f"The given gradient array is incompatible: expected {what} {expected}, "
                    f"got {given}"
                )
        self._grad = grad
        self._requires_grad = True

    @property
    def requires_grad(self) -> bool:
        """Whether this array has a gradient buffer; True allocates a zero one, False drops it."""
        return self._requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        if value and self._grad is None:
            self._require_storage("requires_grad=True")
            strides = self.strides if all(s >= 0 for s in self.strides) else None
            storage = allocate(self.shape, self.dtype, strides)
            self._grad = array._wrap(storage, self.dtype, self.device, self.pinned)
        elif not value:
            self._grad = None
            self._retain_grad = False
        self._requires_grad = bool(value)

    @property
    def retain_grad(self) -> bool:
        """Keep ``.grad`` when the backward pass of a store would zero it (SPEC §2.5)."""
        return self._retain_grad

    @retain_grad.setter
    def retain_grad(self, value: bool) -> None:
        if value and not self._requires_grad:
            raise ArrayError("retain_grad=True requires requires_grad=True")
        self._retain_grad = bool(value)

    def type_name(self) -> str:
        """Warp's spelling of this array's type, e.g. ``array(dtype=float32, ndim=1)``."""
        return f"array(dtype={dtypes.type_name(self.dtype)}, ndim={self.ndim})"

    # -- Python protocols --------------------------------------------------------------------

    def __len__(self) -> int:
        return self.shape[0]

    def __str__(self) -> str:
        return self.type_name() if self._data is None else str(self._data)

    def __repr__(self) -> str:
        if self._data is None:
            return self.type_name()
        values = np.array2string(self._data, separator=", ", prefix="array(")
        return f"array({values}, dtype={dtypes.type_name(self.dtype)})"

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        data = self.numpy()
        if dtype is not None and np.dtype(dtype) != data.dtype:
            if copy is False:
                raise ValueError(f"converting {self.type_name()} to {np.dtype(dtype)} needs a copy")
            return data.astype(dtype)
        return data.copy() if copy else data

    def __dlpack__(self, **kwargs) -> object:
        """A DLPack capsule sharing this array's memory (``torch.from_dlpack(a)`` works)."""
        from difftape._src.interop.dlpack import array_dlpack

        return array_dlpack(self, **kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        """``(1, 0)``: DLPack's CPU device."""
        return (1, 0)

    def __getitem__(self, key):
        """An element (all dims indexed by ints) or a view sharing memory and gradient."""
        self._require_storage("indexing")
        keys = key if isinstance(key, tuple) else (key,)
        for k in keys:
            is_int = isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_))
            if not (is_int or isinstance(k, slice) or k is Ellipsis):
                raise ArrayError(
                    f"array indices must be ints or slices; got {type(k).__name__}. Index "
                    "arrays (Warp's indexedarray) are not supported."
                )
        view = self._data[keys]
        if not isinstance(view, np.ndarray) or view.ndim == inner_ndim(self.dtype):
            return view[()] if isinstance(view, np.ndarray) else view
        return self._derive(lambda d: d[keys])

    def __setitem__(self, key, value) -> None:
        self._require_storage("item assignment")
        if isinstance(value, array):
            value = value.numpy()
        self._data[key] = value
        self._mark_written("item assignment")

    # -- views -------------------------------------------------------------------------------

    def flatten(self) -> array:
        """A 1-D view of a contiguous array (its grad flattened the same way)."""
        self._require_storage("flatten()")
        if self.ndim == 1:
            return self
        if not self.is_contiguous:
            raise ArrayRuntimeError("Flattening non-contiguous arrays is unsupported.")
        shape = storage_shape((self.size,), self.dtype)
        return self._derive(lambda d: d.reshape(shape), inherit_read=True)

    def reshape(self, shape: int | tuple[int, ...]) -> array:
        """A view of a contiguous array with a new shape; one dimension may be -1.

        Raises:
            ArrayRuntimeError: for non-contiguous arrays or a shape of a different size.
        """
        self._require_storage("reshape()")
        if not self.is_contiguous:
            raise ArrayRuntimeError("Reshaping non-contiguous arrays is unsupported.")
        if shape is None:
            raise ArrayRuntimeError("shape parameter is required.")
        if isinstance(shape, (int, np.integer)):
            shape = (shape,)
        shape = tuple(int(n) for n in shape)
        if not 1 <= len(shape) <= ARRAY_MAX_DIMS:
            raise ArrayRuntimeError(
                f"Arrays may only have 1 to {ARRAY_MAX_DIMS} dimensions, trying to create array "
                f"with {len(shape)} dims."
            )
        if shape.count(-1) > 1:
            raise ArrayRuntimeError("Cannot infer shape if more than one index is -1.")
        if -1 in shape:
            known = math.prod(n for n in shape if n != -1)
            if known and self.size % known == 0:
                shape = tuple(self.size // known if n == -1 else n for n in shape)
        if math.prod(shape) != self.size or any(n < 0 for n in shape):
            raise ArrayRuntimeError(
                "Reshaped array must have the same total size as the original: cannot reshape "
                f"{self.shape} (size {self.size}) into {shape}"
            )
        new_shape = storage_shape(shape, self.dtype)
        return self._derive(lambda d: d.reshape(new_shape), inherit_read=True)

    def transpose(self, axes: tuple[int, ...] | None = None) -> array:
        """A view with permuted axes (reversed when ``axes`` is None); 1-D arrays return self."""
        self._require_storage("transpose()")
        if self.ndim == 1:
            return self
        axes = tuple(range(self.ndim))[::-1] if axes is None else tuple(axes)
        if not all(isinstance(a, int) for a in axes) or sorted(axes) != list(range(self.ndim)):
            raise ArrayRuntimeError(
                f"transpose() axes must be a permutation of {tuple(range(self.ndim))}; got {axes}"
            )
        inner = tuple(range(self.ndim, self._data.ndim))
        view = self._derive(lambda d: d.transpose(axes + inner), inherit_read=True)
        view.is_transposed = not self.is_transposed
        return view

    def view(self, dtype: object) -> array:
        """The same memory read as another dtype of the same byte size (grad viewed too)."""
        self._require_storage("view()")
        target = resolve_dtype(dtype)
        if target is None or type_size(target) != type_size(self.dtype):
            name = dtypes.type_name(target) if target is not None else repr(dtype)
            raise ArrayRuntimeError(
                f"Cannot cast dtypes of unequal byte size: {dtypes.type_name(self.dtype)} "
                f"({type_size(self.dtype)} bytes) to {name}"
            )
        np_dtype = dtypes.numpy_dtype(target)
        return self._derive(lambda d: d.view(np_dtype), dtype=target, inherit_read=True)

    def contiguous(self) -> array:
        """This array if contiguous, else a contiguous copy made with ``copy`` (grad included)."""
        self._require_storage("contiguous()")
        if self.is_contiguous:
            return self
        from difftape._src.array_ops import empty_like  # array_ops imports this module

        result = empty_like(self)
        copy(result, self)
        return result

    # -- values ------------------------------------------------------------------------------

    def numpy(self) -> np.ndarray:
        """The storage itself (zero-copy): writes to the result change the array."""
        if self._data is None:
            return np.empty(storage_shape(self.shape, self.dtype), dtypes.numpy_dtype(self.dtype))
        return self._data

    def list(self) -> list:
        """The elements, flattened, as a Python list of numpy scalars."""
        return list(self.numpy().reshape((-1, *storage_shape((), self.dtype))))

    def zero_(self) -> None:
        """Set every element to zero (not recorded on a tape); clears the read flag."""
        self._require_storage("zero_()")
        self._data[...] = 0
        self._mark_written("zero_()")
        self.mark_init()

    def fill_(self, value: object) -> None:
        """Set every element to ``value`` (not recorded on a tape); clears the read flag.

        Raises:
            ArrayError: if ``value`` cannot be converted to the array's dtype.
        """
        self._require_storage("fill_()")
        if self.size == 0:
            return
        self._fill_storage(value)
        self._mark_written("fill_()")
        self.mark_init()

    def _fill_storage(self, value: object) -> None:
        """Write ``value`` into every element, converting it as Warp does; no bookkeeping."""
        name = dtypes.type_name(self.dtype)
        if hasattr(self.dtype, "_wp_scalar_type_"):  # vectors, matrices…: a scalar or one element
            try:
                element = np.asarray(value, dtype=dtypes.numpy_dtype(self.dtype))
                if element.size == self.dtype._length:
                    element = element.reshape(self.dtype._shape)
                self._data[...] = element
            except (TypeError, ValueError) as err:
                raise ArrayError(f"Failed to fill an array of {name} with {value!r}: {err}") \
                    from err
            return
        if isinstance(value, (str, bytes)) or not isinstance(value, (numbers.Number, np.generic)):
            raise ArrayError(
                f"Failed to convert the value to the array data type: an array of {name} "
                f"expects a scalar, got {type(value).__name__} {value!r}"
            )
        if dtypes.is_int(self.dtype) and isinstance(value, (float, np.floating)):
            raise ArrayError(
                f"Failed to convert the value to the array data type: an array of {name} "
                f"expects an integer, got float {value!r}"
            )
        try:
            converted = self.dtype._np(value)
        except (TypeError, ValueError, OverflowError) as err:
            raise ArrayError(f"Failed to convert the value to the array data type: {err}") from err
        self._data[...] = converted

    def assign(self, src: object) -> None:
        """Copy ``src`` (array, numpy array or nested list) into this array through ``copy``.

        Shapes must match; a contiguous source with the same number of elements is also
        accepted, as Warp's flat copy accepts it.

        Raises:
            ArrayError: if the shapes differ.
        """
        self._require_storage("assign()")
        source = src if isinstance(src, array) else array(data=src, dtype=self.dtype, copy=False)
        flat_ok = source.size == self.size and source.is_contiguous and self.is_contiguous
        if source.shape != self.shape and not flat_ok:
            raise ArrayError(
                f"assign() expects data of shape {self.shape} (or {self.size} elements when both "
                f"arrays are contiguous); got shape {source.shape}"
            )
        copy(self, source)

    def clone(self, requires_grad: bool | None = None) -> array:
        """A copy with its own memory; ``requires_grad`` defaults to this array's."""
        from difftape._src.array_ops import clone  # array_ops imports this module

        return clone(self, requires_grad=requires_grad)

    def to(self, device: Device | str | None, requires_grad: bool | None = None) -> array:
        """This array, once ``device`` is checked: the CPU is the only device, and it is on it."""
        get_device(device)
        return self

    # -- read/write tracking (SPEC §3 read flags; write counts for overwrite.py) ------------

    def _mark_written(self, writer: object = None) -> None:
        """Count a write on this array and every array it is a view of (``overwrite.py``).

        ``writer`` (a kernel, or an operation name) is kept to name it in overwrite warnings.
        """
        a: array | None = self
        while a is not None:
            a._write_count += 1
            a._last_writer = writer
            a = a._ref

    def mark_read(self) -> None:
        """Mark this array, and every array it is a view of, as read by a recorded launch."""
        a: array | None = self
        while a is not None:
            a._is_read = True
            a = a._ref

    def mark_write(self, **kwargs: object) -> None:
        """Warn if this array is written after a recorded launch read it (SPEC §3, Warp's texts).

        Attribute the write with ``arg_name``/``kernel_name``/``filename``/``lineno`` (a launch)
        or ``operation``/``filename``/``lineno`` (a copy).
        """
        if not self._is_read:
            return
        tail = "This may corrupt gradient computation in the backward pass."
        read = "has already been read from in a previous launch."
        if all(k in kwargs for k in ("arg_name", "kernel_name", "filename", "lineno")):
            message = (f"Array {self} passed to argument {kwargs['arg_name']} in kernel "
                       f"{kwargs['kernel_name']} at {kwargs['filename']}:{kwargs['lineno']} is "
                       f"being written to but {read} {tail}")
        elif all(k in kwargs for k in ("operation", "filename", "lineno")):
            message = (f"Array {self} is being written to by {kwargs['operation']} at "
                       f"{kwargs['filename']}:{kwargs['lineno']} but {read} {tail}")
        else:
            message = f"Array {self} is being written to but {read} {tail}"
        from difftape._src import read_flags  # read_flags imports this module

        read_flags.warn(message, stacklevel=4)

    def mark_init(self) -> None:
        """Clear the read flag (new values, so earlier reads no longer matter)."""
        self._is_read = False


class array1d(array):
    """``array(..., ndim=1)``; ``array1d[float]`` is a 1-D annotation."""

    _annotation_ndim = 1

    def __new__(cls, *args, **kwargs):
        kwargs["ndim"] = cls._annotation_ndim
        return array(*args, **kwargs)


class array2d(array1d):
    """``array(..., ndim=2)``: a 2-D annotation, or a real array when data or shape is given."""

    _annotation_ndim = 2


class array3d(array1d):
    """``array(..., ndim=3)``: a 3-D annotation, or a real array when data or shape is given."""

    _annotation_ndim = 3


class array4d(array1d):
    """``array(..., ndim=4)``: a 4-D annotation, or a real array when data or shape is given."""

    _annotation_ndim = 4



def _copy_window(dest: array, src: array, dest_offset: int, src_offset: int, count: int) -> None:
    """Copy ``count`` elements between storages with Warp's checks; bytes are copied as is."""
    size = type_size(src.dtype)
    if size != type_size(dest.dtype):
        raise ArrayRuntimeError(
            f"Incompatible array data types: cannot copy {dtypes.type_name(src.dtype)} "
            f"({size} bytes) into {dtypes.type_name(dest.dtype)} ({type_size(dest.dtype)} bytes)"
        )
    values = src._data
    if src.dtype is not dest.dtype:
        values = values.view(dtypes.numpy_dtype(dest.dtype))  # a byte copy, like Warp's memcpy
    if src.is_contiguous and dest.is_contiguous:
        nbytes, src_at, dest_at = count * size, src_offset * size, dest_offset * size
        if src_at + nbytes > src.size * size:
            raise ArrayRuntimeError(
                f"Trying to copy source buffer with size ({nbytes}) from offset ({src_at}) is "
                f"larger than source size ({src.size * size})"
            )
        if dest_at + nbytes > dest.size * size:
            raise ArrayRuntimeError(
                f"Trying to copy source buffer with size ({nbytes}) to offset ({dest_at}) is "
                f"larger than destination size ({dest.size * size})"
            )
        window = flat_storage(values, dest.dtype)[src_offset : src_offset + count]
        flat_storage(dest._data, dest.dtype)[dest_offset : dest_offset + count] = window
    elif src.ndim == 1 and dest.ndim == 1:  # strided 1-D views: logical element offsets (Warp)
        for name, offset, size in (("from source", src_offset, src.size),
                                   ("to destination", dest_offset, dest.size)):
            if offset + count > size:
                raise ArrayRuntimeError(
                    f"Trying to copy a range of {count} element(s) {name} offset ({offset}) "
                    f"exceeds the {name.split()[1]} size ({size})"
                )
        dest._data[dest_offset : dest_offset + count] = values[src_offset : src_offset + count]
    else:
        if src.shape != dest.shape:
            raise ArrayRuntimeError(
                f"Incompatible array shapes: copying non-contiguous arrays needs equal shapes; "
                f"got source {src.shape} and destination {dest.shape}"
            )
        if dest_offset or src_offset or count != src.size:
            raise ArrayRuntimeError(
                "copy() with offsets or a partial count needs contiguous arrays; got "
                f"dest_offset={dest_offset}, src_offset={src_offset}, count={count} with a "
                "non-contiguous source or destination. Copy whole arrays, or .contiguous() first."
            )
        dest._data[...] = values
    dest._mark_written("a copy (wp.copy / clone / assign)")


def copy(dest: array, src: array, dest_offset: int = 0, src_offset: int = 0, count: int = 0,
         stream: object = None) -> None:
    """Copy ``count`` elements of ``src`` into ``dest`` (all of ``src`` when count is 0).

    Offsets count elements of the flattened arrays. If both arrays have ``.grad``, the same
    window of ``src.grad`` is copied into ``dest.grad`` too, as Warp does (SPEC §2.7). Observers
    in ``_copy_observers`` are then told about the copy (the Tape records it there).

    Args:
        dest: Destination array.
        src: Source array.
        dest_offset: First element written in ``dest``.
        src_offset: First element read in ``src``.
        count: Number of elements; 0 copies all of ``src``.
        stream: Accepted for Warp compatibility; ignored.

    Raises:
        ArrayRuntimeError: non-arrays, a window past either end, or incompatible layouts.
    """
    for name, a in (("destination", dest), ("source", src)):
        if not isinstance(a, array) or a.is_annotation:
            raise ArrayRuntimeError(
                f"Copy source and destination must be arrays; the {name} is {type(a).__name__}"
            )
    if dest_offset < 0 or src_offset < 0:
        raise ArrayRuntimeError(
            f"copy() offsets must be non-negative; got dest_offset={dest_offset}, "
            f"src_offset={src_offset}"
        )
    if count <= 0:
        count = src.size
    if count == 0:
        return
    _copy_window(dest, src, dest_offset, src_offset, count)
    if src._grad is not None and dest._grad is not None:
        _copy_window(dest._grad, src._grad, dest_offset, src_offset, count)
    for observer in tuple(_copy_observers):
        observer(dest, src, dest_offset, src_offset, count)
