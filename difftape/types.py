"""``warp.types`` as Warp programs use it: building vector and matrix types
(``wp.types.vector(length=3, dtype=float)``) and asking about types (``type_size_in_bytes``,
``type_is_matrix``...). The types themselves are difftape's (``difftape._src.composite``)."""

from __future__ import annotations

from ._src import composite as _composite
from ._src import dtypes as _dtypes
from ._src.array import array as array
from ._src.composite import matrix as matrix
from ._src.composite import quaternion_type as _quaternion_type
from ._src.composite import transform_type as _transform_type
from ._src.composite import vector as vector
from ._src.dtypes import float16 as float16
from ._src.dtypes import float32 as float32
from ._src.dtypes import float64 as float64
from ._src.dtypes import int8 as int8
from ._src.dtypes import int16 as int16
from ._src.dtypes import int32 as int32
from ._src.dtypes import int64 as int64
from ._src.dtypes import uint8 as uint8
from ._src.dtypes import uint16 as uint16
from ._src.dtypes import uint32 as uint32
from ._src.dtypes import uint64 as uint64


def quaternion(dtype=float32) -> type:
    """The quaternion type of ``dtype``."""
    return _quaternion_type(_dtypes.normalize_dtype(dtype))


def transformation(dtype=float32) -> type:
    """The transform type of ``dtype``."""
    return _transform_type(_dtypes.normalize_dtype(dtype))


def type_scalar_type(dtype) -> type:
    """The scalar type of ``dtype``'s components (``dtype`` itself for a scalar)."""
    return _dtypes.scalar_of(_dtypes.normalize_dtype(dtype) or dtype)


def type_length(dtype) -> int:
    """The number of scalars in one ``dtype`` value (1 for a scalar)."""
    t = _dtypes.normalize_dtype(dtype) or dtype
    return t._length if _composite.is_composite(t) else 1


def type_size_in_bytes(dtype) -> int:
    """The bytes one ``dtype`` value takes in an array (scalars, composites and structs)."""
    t = _dtypes.normalize_dtype(dtype) or dtype
    return _dtypes.numpy_dtype(t).itemsize * type_length(t)


def type_is_vector(t) -> bool:
    """Whether ``t`` is a vector type (``vec3``, ``spatial_vector``...)."""
    return _composite.is_vector(t)


def type_is_matrix(t) -> bool:
    """Whether ``t`` is a matrix type (``mat33``, ``spatial_matrix``...)."""
    return _composite.is_matrix(t)


def type_is_quaternion(t) -> bool:
    """Whether ``t`` is a quaternion type."""
    return _composite.is_quaternion(t)


def type_is_transformation(t) -> bool:
    """Whether ``t`` is a transform type."""
    return _composite.is_transform(t)


def types_equal(a, b, match_generic: bool = False) -> bool:
    """Whether ``a`` and ``b`` are the same type (``float`` and ``wp.float32`` are)."""
    return (_dtypes.normalize_dtype(a) or a) is (_dtypes.normalize_dtype(b) or b)
