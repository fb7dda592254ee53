"""Scalar value types (``float32``, ``int32``…) and their numpy/numba mappings.

Each Warp scalar type is a class whose constructor returns the matching numpy scalar, so
``wp.float32(1.5)`` works in Python scope and ``wp.float32`` works as a kernel annotation. This
module knows types only; arrays live in ``array.py`` and builtins in ``ops/``.
"""

from __future__ import annotations

import builtins

import numpy as np


class ScalarMeta(type):
    """Metaclass of the scalar types: gives them a readable repr and ordering helpers."""

    def __repr__(cls) -> str:
        return f"<class 'difftape.{cls.__name__}'>"


class Scalar(metaclass=ScalarMeta):
    """Base of all scalar types; ``T(v)`` converts a Python or numpy value to ``T``'s numpy scalar."""

    _np: type = np.float32
    kind: str = "float"  # "float", "int", "uint" or "bool"
    bits: int = 32

    def __new__(cls, value=0):  # type: ignore[misc]
        if isinstance(value, np.ndarray) and value.size == 1:
            value = value.reshape(()).item()
        return cls._np(value)


def _scalar(name: str, np_type: type, kind: str, bits: int) -> type:
    return ScalarMeta(name, (Scalar,), {"_np": np_type, "kind": kind, "bits": bits})


float16 = _scalar("float16", np.float16, "float", 16)
float32 = _scalar("float32", np.float32, "float", 32)
float64 = _scalar("float64", np.float64, "float", 64)
int8 = _scalar("int8", np.int8, "int", 8)
int16 = _scalar("int16", np.int16, "int", 16)
int32 = _scalar("int32", np.int32, "int", 32)
int64 = _scalar("int64", np.int64, "int", 64)
uint8 = _scalar("uint8", np.uint8, "uint", 8)
uint16 = _scalar("uint16", np.uint16, "uint", 16)
uint32 = _scalar("uint32", np.uint32, "uint", 32)
uint64 = _scalar("uint64", np.uint64, "uint", 64)
bool_ = _scalar("bool", np.bool_, "bool", 8)

# Warp-compatible aliases.
float_ = float32
int_ = int32

SCALAR_TYPES: tuple[type, ...] = (
    float16, float32, float64, int8, int16, int32, int64, uint8, uint16, uint32, uint64, bool_,
)
FLOAT_TYPES: tuple[type, ...] = (float16, float32, float64)
INT_TYPES: tuple[type, ...] = (int8, int16, int32, int64, uint8, uint16, uint32, uint64)

_BY_NUMPY = {np.dtype(t._np): t for t in SCALAR_TYPES}
_PYTHON_ALIASES = {builtins.float: float32, builtins.int: int32, builtins.bool: bool_}


def is_scalar_type(t: object) -> bool:
    """True for difftape scalar type classes (not for Python's ``float``: normalize first)."""
    return isinstance(t, type) and issubclass(t, Scalar) and t is not Scalar


def is_float(t: object) -> bool:
    return is_scalar_type(t) and t.kind == "float"  # type: ignore[union-attr]


def is_int(t: object) -> bool:
    return is_scalar_type(t) and t.kind in ("int", "uint")  # type: ignore[union-attr]


def is_bool(t: object) -> bool:
    return t is bool_


def normalize_dtype(t: object) -> type | None:
    """Map an annotation or dtype spelling (``float``, ``np.float64``, ``wp.int32``…) to a scalar type.

    Returns None when ``t`` is not a scalar type spelling (vectors and structs are handled elsewhere).
    """
    if is_scalar_type(t) or hasattr(t, "_wp_scalar_type_") or hasattr(t, "_difftape_struct"):
        return t  # type: ignore[return-value]  (composites and structs are their own dtype)
    if t in _PYTHON_ALIASES:
        return _PYTHON_ALIASES[t]  # type: ignore[index]
    try:
        return _BY_NUMPY.get(np.dtype(t))  # type: ignore[arg-type]
    except TypeError:
        return None


def numpy_dtype(t: type) -> np.dtype:
    """The numpy dtype that stores one scalar of type ``t`` (a composite's component type)."""
    if hasattr(t, "_numpy_dtype"):
        return t._numpy_dtype()  # structs: a structured dtype
    return np.dtype(scalar_of(t)._np)  # type: ignore[attr-defined]


def scalar_of(t: type) -> type:
    """The scalar type of ``t``'s components (``t`` itself for scalars)."""
    return getattr(t, "_wp_scalar_type_", t)


def from_numpy_dtype(dt: np.dtype) -> type:
    """The scalar type for a numpy dtype; raises TypeError for dtypes kernels cannot use."""
    t = _BY_NUMPY.get(np.dtype(dt))
    if t is None:
        raise TypeError(f"numpy dtype {np.dtype(dt)} has no difftape scalar type")
    return t


def type_name(t: object) -> str:
    """Warp's spelling of a type for messages (``float32``, ``array(dtype=float32, ndim=1)``)."""
    if is_scalar_type(t):
        return t.__name__  # type: ignore[union-attr]
    name = getattr(t, "type_name", None)
    if callable(name):
        return name()
    return getattr(t, "__name__", repr(t))
