"""Struct values inside kernels: locals/parameters, elements of struct arrays, struct arrays.

A ``StructLocal`` binds each field to a scalar local, a ``CompLocal``, an array reference or a
nested ``StructLocal``; a ``StructElem`` is ``ps[i]`` of an array of structs (its fields are loads
and stores on per-field arrays). The lowerer calls ``field_value``/``assign_field``/``assign``;
these emit ordinary scalar IR, so codegen never sees a struct.
"""

from __future__ import annotations

import ast

from .. import dtypes
from ..codegen import naming
from ..errors import KernelTypeError
from . import ir
from .typecheck import compute_type
from .values import CompLocal, CompValue


class StructLocal:
    """A struct-typed local or parameter: one binding per field."""

    def __init__(self, stype: type, fields: dict):
        self.type = stype
        self.fields = fields  # name -> (type, sym) | CompLocal | ArrayRef | StructLocal | None

    def value(self) -> StructLocal:
        return self

    def field_value(self, typer, node: ast.Attribute):
        binding = self._binding(typer, node)
        if isinstance(binding, tuple):
            return ir.Var(binding[0], binding[1])
        if isinstance(binding, CompLocal):
            return binding.value()
        if binding is None:
            typer.fail(node, f"array field '{node.attr}' of struct {self.type.__qualname__} is "
                       "not set here", KernelTypeError)
        return binding

    def _binding(self, typer, node: ast.Attribute):
        if node.attr not in self.fields:
            typer.fail(node, f"struct {self.type.__qualname__} has no field '{node.attr}'",
                       KernelTypeError)
        return self.fields[node.attr]

    def assign_field(self, lowerer, target: ast.Attribute, value) -> None:
        binding = self._binding(lowerer, target)
        name = target.attr
        if isinstance(binding, tuple):
            t, sym = binding
            value = lowerer.coerce_scalar(target, value, t)
            lowerer.emit(ir.Assign(target=sym, value=value))
        elif isinstance(binding, CompLocal):
            if not isinstance(value, CompValue) or value.type is not binding.type:
                lowerer.fail(target, f"field '{name}' has type {dtypes.type_name(binding.type)}",
                             KernelTypeError)
            lowerer.assign_components(binding, value)
        elif isinstance(binding, StructLocal):
            binding.assign(lowerer, target, value)
        else:  # array field: rebind to another array reference
            spec = self.type._difftape_struct.field(name)[2]
            if not isinstance(value, ir.ArrayRef) or value.view_ndim != spec.ndim or \
                    value.dtype is not dtypes.normalize_dtype(spec.dtype):
                lowerer.fail(target, f"field '{name}' holds an array of "
                             f"{dtypes.type_name(dtypes.normalize_dtype(spec.dtype))}",
                             KernelTypeError)
            self.fields[name] = value

    def assign(self, lowerer, node: ast.AST, value) -> None:
        """Copy every field of struct ``value`` (a StructLocal or StructElem) into this one."""
        if getattr(value, "type", None) is not self.type:
            lowerer.fail(node, f"expected a {self.type.__qualname__}, got "
                         f"{dtypes.type_name(getattr(value, 'type', type(value)))}",
                         KernelTypeError)
        for name in self.fields:
            attr = ast.Attribute(value=ast.Name(id="_"), attr=name)
            ast.copy_location(attr, node)
            self.assign_field(lowerer, attr, value.field_value(lowerer, attr))

    def new_like(self, lowerer, name: str) -> StructLocal:
        return new_struct_local(lowerer, self.type, name)


def new_struct_local(lowerer, stype: type, name: str) -> StructLocal:
    """A struct local with fresh, zero-initialised field locals (array fields unset)."""
    fields = {}
    for field, kind, t in stype._difftape_struct.fields:
        label = f"{name}_{field}"
        if kind == "array":
            fields[field] = None
        elif kind == "struct":
            fields[field] = new_struct_local(lowerer, t, label)
        elif kind == "composite":
            scalar = compute_type(dtypes.scalar_of(t))
            syms = [lowerer.unique_symbol(f"{label}_{k}", scalar) for k in range(t._length)]
            for sym in syms:
                lowerer.emit(ir.Assign(target=sym, value=ir.Const(scalar, 0)))
            fields[field] = CompLocal(t, syms)
        else:
            sym = lowerer.unique_symbol(label, compute_type(t))
            lowerer.emit(ir.Assign(target=sym, value=ir.Const(compute_type(t), 0)))
            fields[field] = (compute_type(t), sym)
    return StructLocal(stype, fields)


class StructElem:
    """``ps[i]`` for an array of structs: field reads are loads, field writes are stores."""

    def __init__(self, array: StructArrayRef, indices: tuple):
        self.array = array
        self.indices = indices
        self.type = array.type

    def field_value(self, typer, node: ast.Attribute):
        ref = self.array.field_ref(typer, node)
        if isinstance(ref, StructArrayRef):
            return StructElem(ref, self.indices)
        return typer.index_array(node, ref, list(self.indices))

    def assign_field(self, lowerer, target: ast.Attribute, value) -> None:
        ref = self.array.field_ref(lowerer, target)
        if isinstance(ref, StructArrayRef):
            StructElem(ref, self.indices).assign(lowerer, target, value)
            return
        lowerer.store_into(target, ref, self.indices, value)

    def assign(self, lowerer, node: ast.AST, value) -> None:
        if getattr(value, "type", None) is not self.type:
            lowerer.fail(node, f"expected a {self.type.__qualname__}", KernelTypeError)
        for name in self.array.fields:
            attr = ast.Attribute(value=ast.Name(id="_"), attr=name)
            ast.copy_location(attr, node)
            self.assign_field(lowerer, attr, value.field_value(lowerer, attr))

    def new_like(self, lowerer, name: str) -> StructLocal:
        return new_struct_local(lowerer, self.type, name)


class StructArrayRef:
    """An array of structs: one strided array reference per leaf field."""

    def __init__(self, stype: type, fields: dict, ndim: int):
        self.type = stype
        self.fields = fields  # name -> ArrayRef | StructArrayRef
        self.ndim = ndim

    def field_ref(self, typer, node: ast.Attribute):
        if node.attr not in self.fields:
            typer.fail(node, f"struct {self.type.__qualname__} has no field '{node.attr}'",
                       KernelTypeError)
        return self.fields[node.attr]

    def first_leaf(self) -> ir.ArrayRef:
        leaf = next(iter(self.fields.values()))
        return leaf.first_leaf() if isinstance(leaf, StructArrayRef) else leaf


# ------------------------------------------------------------------ kernel parameters


def struct_param(name: str, sym: str, stype: type) -> tuple[list[ir.Param], StructLocal]:
    """A struct kernel parameter: its generated leaf parameters and the binding kernels see."""
    params: list[ir.Param] = []
    fields = {}
    for field, kind, t in stype._difftape_struct.fields:
        label, leaf = f"{name}.{field}", naming.local_name(f"{sym}_{field}")
        if kind == "struct":
            sub_params, fields[field] = struct_param(label, leaf, t)
            params.extend(sub_params)
        elif kind == "array":
            dtype = dtypes.normalize_dtype(t.dtype)
            params.append(ir.Param(label, leaf, dtype, True, t.ndim))
            fields[field] = ir.ArrayRef(leaf, dtype, t.ndim)
        elif kind == "composite":
            scalar = compute_type(dtypes.scalar_of(t))
            syms = [f"{leaf}_{k}" for k in range(t._length)]
            params.extend(ir.Param(f"{label}[{k}]", s, scalar, False) for k, s in enumerate(syms))
            fields[field] = CompLocal(t, syms)
        else:
            params.append(ir.Param(label, leaf, t, False))
            fields[field] = (compute_type(t), leaf)
    return params, StructLocal(stype, fields)


def struct_array_param(name: str, sym: str, stype: type, ndim: int):
    """An array-of-structs kernel parameter: one generated array parameter per leaf field."""
    params: list[ir.Param] = []
    fields = {}
    for field, kind, t in stype._difftape_struct.fields:
        label, leaf = f"{name}.{field}", naming.local_name(f"{sym}_{field}")
        if kind == "struct":
            sub_params, fields[field] = struct_array_param(label, leaf, t, ndim)
            params.extend(sub_params)
        else:
            params.append(ir.Param(label, leaf, t, True, ndim))
            fields[field] = ir.ArrayRef(leaf, t, ndim)
    return params, StructArrayRef(stype, fields, ndim)


def is_struct_type(t: object) -> bool:
    return hasattr(t, "_difftape_struct")

