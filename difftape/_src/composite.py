"""Value types made of scalars: vectors, matrices, quaternions, transforms, spatial vectors/matrices.

Each type is a class (``vec3f``, ``mat33d``…) made once per (kind, shape, scalar type) and cached;
its instances are Python-scope values with Warp's behaviour (indexing, ``.x``, arithmetic). Inside
kernels these types never exist as objects: the code generator keeps one scalar local per
component. This module knows the types and Python-scope values; builtins live in ``ops/``.
"""

from __future__ import annotations

import math

import numpy as np

from . import dtypes

_KIND_PREFIX = {"vector": "vec", "matrix": "mat", "quaternion": "quat", "transform": "transform",
                "spatial_vector": "spatial_vector", "spatial_matrix": "spatial_matrix"}
_SUFFIX = {dtypes.float16: "h", dtypes.float32: "f", dtypes.float64: "d", dtypes.int8: "b",
           dtypes.uint8: "ub", dtypes.int16: "s", dtypes.uint16: "us", dtypes.int32: "i",
           dtypes.uint32: "ui", dtypes.int64: "l", dtypes.uint64: "ul"}


class CompositeMeta(type):
    def __repr__(cls) -> str:
        return f"<class 'difftape.{cls.__name__}'>"


class Composite(metaclass=CompositeMeta):
    """Base of composite value types; instances hold their components in a small numpy array."""

    _kind = "vector"
    _shape: tuple[int, ...] = (0,)
    _length = 0
    _wp_scalar_type_: type = dtypes.float32
    __slots__ = ("_values",)

    def __init__(self, *args):
        np_type = dtypes.numpy_dtype(self._wp_scalar_type_)
        values = np.zeros(self._length, np_type)
        flat = _flatten_args(args, type(self))
        if len(flat) == 1 and self._length != 1:
            values[:] = flat[0]  # broadcast a scalar
        elif flat:
            if len(flat) != self._length:
                raise TypeError(f"{type(self).__name__}() takes {self._length} components, "
                                f"got {len(flat)}")
            values[:] = flat
        self._values = values

    # -------------------------------------------------------- container protocol

    def _view(self) -> np.ndarray:
        return self._values.reshape(self._shape)

    def __len__(self) -> int:
        return self._shape[0]

    def __iter__(self):
        view = self._view()
        if len(self._shape) == 1:
            return iter(view.tolist())
        return (row_type(type(self))(row) for row in view)

    def __getitem__(self, key):
        view = self._view()
        if len(self._shape) == 2 and isinstance(key, (int, np.integer)):
            return row_type(type(self))(view[key])
        item = view[key]
        return item if np.ndim(item) == 0 else np.array(item)

    def __setitem__(self, key, value) -> None:
        self._view()[key] = value

    def __array__(self, dtype=None, copy=None) -> np.ndarray:
        view = self._view()
        return view.astype(dtype) if dtype is not None else view.copy()

    def __eq__(self, other) -> bool:
        try:
            return bool(np.array_equal(self._view(), np.asarray(other).reshape(self._shape)))
        except ValueError:
            return False

    __hash__ = None  # mutable, like Warp's ctypes values

    def __repr__(self) -> str:
        return str(self._view().tolist())

    def __getattr__(self, name: str):
        index = _component_index(type(self), name)
        if index is None:
            raise AttributeError(f"{type(self).__name__} has no attribute '{name}'")
        if isinstance(index, slice):
            part = vector_type(index.stop - index.start, self._wp_scalar_type_)
            if name == "q":
                part = quaternion_type(self._wp_scalar_type_)
            return part(self._values[index])
        return self._values[index].item()

    def __setattr__(self, name: str, value) -> None:
        if name == "_values":
            object.__setattr__(self, name, value)
            return
        index = _component_index(type(self), name)
        if index is None:
            raise AttributeError(f"{type(self).__name__} has no attribute '{name}'")
        self._values[index] = value

    # -------------------------------------------------------- arithmetic (Python scope)

    def _binary(self, other, key: str, reverse: bool = False):
        from .ops import registry

        args = (other, self) if reverse else (self, other)
        records = registry.lookup(key)
        if not records:
            return NotImplemented
        return records[0](*args)

    def __add__(self, other):
        return self._binary(other, "add")

    def __radd__(self, other):
        return self._binary(other, "add", reverse=True)

    def __sub__(self, other):
        return self._binary(other, "sub")

    def __rsub__(self, other):
        return self._binary(other, "sub", reverse=True)

    def __mul__(self, other):
        return self._binary(other, "mul")

    def __rmul__(self, other):
        return self._binary(other, "mul", reverse=True)

    def __truediv__(self, other):
        return self._binary(other, "div")

    def __rtruediv__(self, other):
        return self._binary(other, "div", reverse=True)

    def __matmul__(self, other):
        return self._binary(other, "mul")

    def __rmatmul__(self, other):
        return self._binary(other, "mul", reverse=True)

    def __neg__(self):
        from .ops import registry

        return registry.lookup("neg")[0](self)

    def __pos__(self):
        return self


def _flatten_args(args: tuple, cls: type) -> list:
    flat: list = []
    if len(args) == 1 and isinstance(args[0], (list, tuple, np.ndarray, Composite)):
        arr = np.asarray(args[0], dtype=np.float64 if cls._wp_scalar_type_.kind == "float"
                         else np.int64)
        if cls._kind == "matrix" and isinstance(args[0], Composite) is False and arr.ndim == 2:
            return arr.reshape(-1).tolist()
        return arr.reshape(-1).tolist()
    if cls._kind == "matrix" and args and all(isinstance(a, Composite) for a in args):
        # Warp builds a matrix from vectors as its columns.
        columns = np.stack([np.asarray(a, np.float64) for a in args], axis=1)
        return columns.reshape(-1).tolist()
    if cls._kind == "transform" and len(args) == 2:
        return list(np.asarray(args[0], np.float64)) + list(np.asarray(args[1], np.float64))
    for a in args:
        if isinstance(a, (Composite, list, tuple, np.ndarray)):
            flat.extend(np.asarray(a, np.float64).reshape(-1).tolist())
        else:
            flat.append(a)
    return flat


_NAMED = {"x": 0, "y": 1, "z": 2, "w": 3}


def _component_index(cls: type, name: str):
    if cls._kind in ("vector", "quaternion") and name in _NAMED and _NAMED[name] < cls._length:
        return _NAMED[name]
    if cls._kind == "transform":
        if name == "p":
            return slice(0, 3)
        if name == "q":
            return slice(3, 7)
    return None


_TYPES: dict[tuple, type] = {}


def _make(kind: str, shape: tuple[int, ...], scalar: type, name: str | None = None) -> type:
    scalar = dtypes.normalize_dtype(scalar) or scalar
    key = (kind, shape, scalar)
    if key not in _TYPES:
        if name is None:
            dims = "".join(str(n) for n in shape)
            base = _KIND_PREFIX[kind] + (dims if kind in ("vector", "matrix") else "")
            name = base + _SUFFIX.get(scalar, scalar.__name__)
        _TYPES[key] = CompositeMeta(name, (Composite,), {
            "_kind": kind, "_shape": shape, "_length": math.prod(shape),
            "_wp_scalar_type_": scalar, "__slots__": ()})
    return _TYPES[key]


def vector_type(length: int, dtype: object = dtypes.float32) -> type:
    """``wp.vector(length, dtype)``: the vector type with ``length`` components of ``dtype``."""
    return _make("vector", (int(length),), dtype)


def matrix_type(shape: tuple[int, int], dtype: object = dtypes.float32) -> type:
    """``wp.matrix(shape, dtype)``: the matrix type of ``shape`` (rows, cols)."""
    return _make("matrix", (int(shape[0]), int(shape[1])), dtype)


def quaternion_type(dtype: object = dtypes.float32) -> type:
    return _make("quaternion", (4,), dtype)


def transform_type(dtype: object = dtypes.float32) -> type:
    return _make("transform", (7,), dtype)


def spatial_vector_type(dtype: object = dtypes.float32) -> type:
    return _make("spatial_vector", (6,), dtype)


def spatial_matrix_type(dtype: object = dtypes.float32) -> type:
    return _make("spatial_matrix", (6, 6), dtype)


def row_type(cls: type) -> type:
    """The vector type of one row of matrix type ``cls``."""
    return vector_type(cls._shape[1], cls._wp_scalar_type_)


def is_composite(t: object) -> bool:
    return isinstance(t, type) and issubclass(t, Composite) and t is not Composite


def is_vector(t: object) -> bool:
    return is_composite(t) and t._kind in ("vector", "spatial_vector")


def is_matrix(t: object) -> bool:
    return is_composite(t) and t._kind in ("matrix", "spatial_matrix")


def is_quaternion(t: object) -> bool:
    return is_composite(t) and t._kind == "quaternion"


def is_transform(t: object) -> bool:
    return is_composite(t) and t._kind == "transform"


def with_scalar(t: type, scalar: type) -> type:
    """The composite of the same kind and shape as ``t`` with another scalar type."""
    return _make(t._kind, t._shape, scalar)


# ------------------------------------------------------------------ Warp's named types

vec2 = vec2f = vector_type(2, dtypes.float32)
vec3 = vec3f = vector_type(3, dtypes.float32)
vec4 = vec4f = vector_type(4, dtypes.float32)
vec2d, vec3d, vec4d = (vector_type(n, dtypes.float64) for n in (2, 3, 4))
vec2h, vec3h, vec4h = (vector_type(n, dtypes.float16) for n in (2, 3, 4))
vec2i, vec3i, vec4i = (vector_type(n, dtypes.int32) for n in (2, 3, 4))
mat22 = mat22f = matrix_type((2, 2), dtypes.float32)
mat33 = mat33f = matrix_type((3, 3), dtypes.float32)
mat44 = mat44f = matrix_type((4, 4), dtypes.float32)
mat22d, mat33d, mat44d = (matrix_type((n, n), dtypes.float64) for n in (2, 3, 4))
quat = quatf = quaternion_type(dtypes.float32)
quatd = quaternion_type(dtypes.float64)
quath = quaternion_type(dtypes.float16)
transform = transformf = transform_type(dtypes.float32)
transformd = transform_type(dtypes.float64)
spatial_vector = spatial_vectorf = spatial_vector_type(dtypes.float32)
spatial_vectord = spatial_vector_type(dtypes.float64)
spatial_matrix = spatial_matrixf = spatial_matrix_type(dtypes.float32)
spatial_matrixd = spatial_matrix_type(dtypes.float64)


def vector(length: int, dtype: object = dtypes.float32) -> type:
    """``wp.vector(length, dtype)`` (also ``wp.vec``)."""
    return vector_type(length, dtype)


def matrix(shape: tuple[int, int], dtype: object = dtypes.float32) -> type:
    """``wp.matrix(shape, dtype)`` (also ``wp.mat``)."""
    return matrix_type(shape, dtype)
