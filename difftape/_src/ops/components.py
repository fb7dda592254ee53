"""Calling composite builtins: values ↔ component lists, Python-scope calls, signature matching.

Composite builtins (``dot``, ``quat_rotate``…) are written over component lists; this module
converts Python-scope values (``wp.vec3`` instances) to and from those lists, and provides the
small vocabulary their ``match`` functions use. It defines no builtin itself.
"""

from __future__ import annotations

from .. import dtypes
from ..composite import (
    is_composite,
    is_matrix,
    is_quaternion,
    is_transform,
    is_vector,
    matrix_type,
    quaternion_type,
    spatial_matrix_type,
    spatial_vector_type,
    transform_type,
    vector_type,
)
from . import registry

FLOATS = (dtypes.float32, dtypes.float64, dtypes.float16)


# ------------------------------------------------------------------ match vocabulary


def scalar(t: type) -> type | None:
    return getattr(t, "_wp_scalar_type_", None)


def float_composite(t: object, check=is_composite) -> bool:
    return check(t) and scalar(t) in FLOATS


def vec(t: object, n: int | None = None) -> bool:
    return float_composite(t, is_vector) and (n is None or t._length == n)


def mat(t: object, square: bool = False) -> bool:
    return float_composite(t, is_matrix) and (not square or t._shape[0] == t._shape[1])


def quat(t: object) -> bool:
    return float_composite(t, is_quaternion)


def xform(t: object) -> bool:
    return float_composite(t, is_transform)


def vec3_of(t: type) -> type:
    return vector_type(3, scalar(t))


def quat_of(t: type) -> type:
    return quaternion_type(scalar(t))


def mat_of(t: type, rows: int, cols: int) -> type:
    """The matrix type of ``t``'s scalar: a spatial one for 6 x 6 results of spatial ``t``."""
    if (rows, cols) == (6, 6) and _spatial(t):
        return spatial_matrix_type(scalar(t))
    return matrix_type((rows, cols), scalar(t))


def vec_of(t: type, length: int) -> type:
    """The vector type of ``t``'s scalar: a spatial one for 6-vector results of spatial ``t``."""
    if length == 6 and _spatial(t):
        return spatial_vector_type(scalar(t))
    return vector_type(length, scalar(t))


def _spatial(t: type) -> bool:
    # Warp's spatial types are plain 6-vectors and 6 x 6 matrices to its builtins; here they
    # are types of their own, so results computed from them keep them (I * v stays spatial).
    return getattr(t, "_kind", None) in ("spatial_vector", "spatial_matrix")


def transform_of(t: type) -> type:
    return transform_type(scalar(t))


def examples(*kinds: str) -> list[tuple]:
    """float64 argument-type tuples for tests, spelled 'v3', 'm33', 'q', 't', 's' (scalar)."""
    d = dtypes.float64
    table = {"v2": vector_type(2, d), "v3": vector_type(3, d), "v4": vector_type(4, d),
             "m22": matrix_type((2, 2), d), "m33": matrix_type((3, 3), d),
             "m44": matrix_type((4, 4), d), "m23": matrix_type((2, 3), d),
             "q": quaternion_type(d), "t": transform_type(d), "s": d}
    return [tuple(table[k] for k in kind.split(",")) for kind in kinds]


# ------------------------------------------------------------------ values ↔ components


def to_components(value, t: type):
    """A composite value as a component list (matrices: list of rows); scalars unchanged."""
    if not is_composite(t):
        return value
    flat = [float(c) if scalar(t) in FLOATS else int(c) for c in
            _flat_values(value, t)]
    if is_matrix(t):
        cols = t._shape[1]
        return [flat[r * cols:(r + 1) * cols] for r in range(t._shape[0])]
    return flat


def _flat_values(value, t: type) -> list:
    import numpy as np

    return np.asarray(value, dtype=np.float64).reshape(-1).tolist()


def from_components(out, t: type):
    """The Python-scope value of type ``t`` for a builtin result (component list or scalar)."""
    if is_composite(t):
        flat = [c for row in out for c in row] if is_matrix(t) else list(out)
        return t(flat)
    if dtypes.is_float(t):
        return float(out)
    if t is dtypes.bool_:
        return bool(out)
    return int(out)


def python_scope_call(key: str, args: tuple):
    """``wp.dot(wp.vec3(...), ...)`` from Python: resolve by the composite argument types."""
    types = [type(a) if is_composite(type(a)) else None for a in args]
    base = next((t for t in types if t is not None), vector_type(1, dtypes.float32))
    filled = []
    for a, t in zip(args, types):
        if t is not None:
            filled.append(t)
        elif isinstance(a, bool):
            filled.append(dtypes.bool_)
        else:
            filled.append(dtypes.normalize_dtype(getattr(a, "dtype", None)) or scalar(base)
                          if hasattr(a, "dtype") else scalar(base))
    found = registry.resolve(key, tuple(filled))
    if found is None:
        given = ", ".join(dtypes.type_name(t) for t in filled)
        raise TypeError(f"{key}() does not accept ({given})")
    record, result = found
    comps = [to_components(a, t) for a, t in zip(args, filled)]
    return from_components(record.forward(*comps), result)


def python_scope_draw(key: str, args: tuple):
    """``wp.randf(state)`` from Python: the value a kernel would draw, ``state`` left as it is
    (as in Warp: a Python integer cannot be changed in place)."""
    import numpy as np

    fitting = [r for r in registry.lookup(key) if len(r.overloads[0].inputs) == len(args)]
    if not fitting:
        accepted = "; ".join(registry.candidates(key))
        raise TypeError(f"{key}() does not take {len(args)} arguments. It accepts: {accepted}")
    record, overload = fitting[0], fitting[0].overloads[0]
    state = np.uint32(int(args[0]) & 0xFFFFFFFF)
    states = []
    for _ in range(record.draws):
        state = registry.lookup("_rand_next")[0].forward(state)
        states.append(state)
    rest = [t._np(a) for (_, t), a in zip(overload.inputs[1:], args[1:])]
    out = record.forward(*states, *rest)
    if dtypes.is_float(overload.output):  # computed in float64 from float32 draws: round
        out = overload.output._np(out)
    return from_components(out, overload.output)
