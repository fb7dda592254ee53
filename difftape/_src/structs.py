"""``@wp.struct``: struct types, their Python-scope instances, and how they flatten for kernels.

A struct is flattened into its leaf fields everywhere below the frontend: a struct parameter
becomes one generated parameter per scalar/component/array leaf, and an array of structs (stored
as a numpy structured array) becomes one strided array per leaf field. This module owns the
field layout and the Python-scope objects; kernels see structs through ``frontend/struct_values``.
"""

from __future__ import annotations

import inspect

import numpy as np

from . import composite, dtypes


def _is_array_annotation(t: object) -> bool:
    return bool(getattr(t, "is_annotation", False)) and hasattr(t, "ndim")


class StructInfo:
    """The fields of one struct type, in declaration order: (name, kind, type) with kind one of
    "scalar", "composite", "array" (type is the array annotation) or "struct"."""

    def __init__(self, cls: type):
        self.name = cls.__qualname__
        self.fields: list[tuple[str, str, object]] = []
        for name, ann in inspect.get_annotations(cls, eval_str=True).items():
            if _is_array_annotation(ann):
                self.fields.append((name, "array", ann))
            elif hasattr(ann, "_difftape_struct"):
                self.fields.append((name, "struct", ann))
            elif composite.is_composite(ann):
                self.fields.append((name, "composite", ann))
            else:
                scalar = dtypes.normalize_dtype(ann)
                if scalar is None or not dtypes.is_scalar_type(scalar):
                    raise TypeError(f"struct {self.name}: field '{name}' has unsupported type "
                                    f"{ann!r}")
                self.fields.append((name, "scalar", scalar))
        self.cls: type | None = None

    def field(self, name: str) -> tuple[str, str, object] | None:
        return next((f for f in self.fields if f[0] == name), None)

    def default(self, kind: str, t: object):
        if kind == "array":
            return None
        if kind == "struct":
            return t()
        if kind == "composite":
            return t()
        return 0.0 if dtypes.is_float(t) else False if t is dtypes.bool_ else 0

    # -------------------------------------------------------- arrays of structs

    def numpy_dtype(self) -> np.dtype:
        """Structured dtype storing one struct per element (arrays fields are not allowed)."""
        parts = []
        for name, kind, t in self.fields:
            if kind == "array":
                raise TypeError(f"struct {self.name} has an array field '{name}', so it cannot be "
                                "the dtype of an array")
            if kind == "struct":
                parts.append((name, t._difftape_struct.numpy_dtype()))
            elif kind == "composite":
                parts.append((name, dtypes.numpy_dtype(t), t._shape))
            else:
                parts.append((name, dtypes.numpy_dtype(t)))
        return np.dtype(parts)

    def leaves(self, prefix: tuple = ()) -> list[tuple[tuple[str, ...], str, object]]:
        """Every leaf field as (path, kind, type), nested structs expanded, in order."""
        out = []
        for name, kind, t in self.fields:
            if kind == "struct":
                out.extend(t._difftape_struct.leaves(prefix + (name,)))
            else:
                out.append((prefix + (name,), kind, t))
        return out


class StructInstance:
    """Base class of Python-scope struct values (``s = MyStruct(); s.x = wp.zeros(...)``)."""

    _difftape_struct: StructInfo

    def __init__(self, *args, **values):
        info = type(self)._difftape_struct
        if len(args) > len(info.fields):
            raise TypeError(f"{info.name}() takes at most {len(info.fields)} field values")
        for name, kind, t in info.fields:
            object.__setattr__(self, name, info.default(kind, t))
        for (name, _, _), value in zip(info.fields, args):
            setattr(self, name, value)
        for name, value in values.items():
            setattr(self, name, value)

    def __setattr__(self, name: str, value) -> None:
        info = type(self)._difftape_struct
        field = info.field(name)
        if field is None:
            raise AttributeError(f"struct {info.name} has no field '{name}'")
        _, kind, t = field
        if kind == "scalar":
            value = float(value) if dtypes.is_float(t) else bool(value) \
                if t is dtypes.bool_ else int(value)
        elif kind == "composite" and not isinstance(value, t):
            value = t(value)
        elif kind == "struct" and not isinstance(value, t):
            raise TypeError(f"field '{name}' of struct {info.name} expects a {t.__qualname__}")
        object.__setattr__(self, name, value)

    def _difftape_struct_fields(self) -> list[tuple[str, object]]:
        return [(name, getattr(self, name)) for name, _, _ in type(self)._difftape_struct.fields]

    def _difftape_adjoint(self, tape):
        """The mirrored adjoint struct for ``Tape.get_adjoint`` (SPEC §1.7): array fields become
        their grads (or None), nested structs are mirrored, value fields copy the primal."""
        adjoint = type(self).__new__(type(self))
        for name, kind, t in type(self)._difftape_struct.fields:
            value = getattr(self, name)
            if kind == "array":
                grad = None
                if value is not None and value.grad:
                    grad = value.grad
                    tape.gradients[value] = grad
                object.__setattr__(adjoint, name, grad)
            elif kind == "struct":
                object.__setattr__(adjoint, name, value._difftape_adjoint(tape))
            elif kind == "composite":
                object.__setattr__(adjoint, name, t(value))
            else:
                object.__setattr__(adjoint, name, value)
        tape.gradients[self] = adjoint
        return adjoint

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={v!r}" for n, v in self._difftape_struct_fields())
        return f"{type(self).__qualname__}({fields})"


def struct(cls: type) -> type:
    """Decorator: a struct type from a class with annotated fields (``@wp.struct``).

    Fields may be scalars, vectors/matrices, arrays (``wp.array(dtype=float)``) and other
    structs. Instances are built in Python (``s = S(); s.a = wp.zeros(3)``) and passed to
    kernels; kernels read and write fields, build struct values and return them from funcs.
    """
    info = StructInfo(cls)
    new = type(cls.__name__, (StructInstance,), {
        "_difftape_struct": info, "__module__": cls.__module__, "__qualname__": cls.__qualname__,
        "__doc__": cls.__doc__, "_numpy_dtype": classmethod(lambda c: info.numpy_dtype())})
    info.cls = new
    return new


def resolve_path(value, path: tuple[str, ...]):
    """Follow field names from a struct instance (None along the way stays None)."""
    for name in path:
        if value is None:
            return None
        value = getattr(value, name)
    return value


def field_view(data: np.ndarray, path: tuple[str, ...]) -> np.ndarray:
    """The strided numpy view of one leaf field of a structured array."""
    for name in path:
        data = data[name]
    return data
