"""Assignments into parts of values: array elements, vector/matrix components, struct fields.

``x[i] = v``, ``v[0] = s``, ``v.x = s``, ``m[i, j] = s``, ``x[i].y = s``, ``s.f = v`` and
``wp.adjoint[x][0] = ...`` all resolve here to scalar ``Assign``/``Store`` statements. This mixin
of the statement lowerer owns only the resolution of such targets.
"""

from __future__ import annotations

import ast

from .. import composite, dtypes
from ..errors import KernelTypeError
from . import ir
from .struct_values import StructArrayRef, StructElem, StructLocal
from .typecheck import component_position, compute_type, slot_positions
from .values import CompLocal, CompValue


class TargetLowering:
    """Mixin of ``Lowerer``: assignment targets inside composites, arrays and structs."""

    def assign_part(self, target: ast.Subscript | ast.Attribute, value) -> None:
        """``x[i] = v``, ``v[0] = s``, ``v.x = s``, ``m[i, j] = s``, ``x[i].y = s``, ``s.f = v``."""
        base = self.evaluate(target.value)
        if getattr(base, "_difftape_adjoint_access", False):  # wp.adjoint[x] = v
            return self.assign_binding(target, self.adjoint_target(target.slice), value)
        if isinstance(target, ast.Subscript) and isinstance(base, ir.ArrayRef):
            return self.store(target, value)
        if isinstance(target, ast.Subscript) and isinstance(base, StructArrayRef):
            indices = tuple(self.index_list(target.slice))
            return StructElem(base, indices).assign(self, target, value)
        if isinstance(target, ast.Attribute) and hasattr(base, "assign_field"):
            return base.assign_field(self, target, value)
        ref, indices, local = self.component_target(target)
        if local is not None:
            for sym, c in zip(local, self.part_components(target, value, len(local))):
                self.emit(ir.Assign(target=sym, value=c))
            return None
        comps = self.part_components(target, value, len(indices))
        self.ctx.written_arrays.add(ref.param)
        self.ctx.stored_arrays.add(ref.param)
        for idx, c in zip(indices, comps):
            self.emit(ir.Store(array=ref, indices=idx, value=c))
        return None

    def part_components(self, target: ast.AST, value, count: int) -> list[ir.Expr]:
        """The scalar components assigned to ``count`` slots (a scalar for one, a vector for a row)."""
        scalar = self.part_scalar
        if count == 1:
            return [self.coerce_scalar(target, value, scalar)]
        if not isinstance(value, CompValue) or len(value.comps) != count:
            self.fail(target, f"this assignment needs {count} components", KernelTypeError)
        return [self.coerce_to(target, c, scalar, "the component") for c in value.comps]

    def component_target(self, target: ast.AST):
        """Resolve an assignment target inside a composite: (array ref, index tuples, None) for an
        array element's components, or (None, None, symbols) for a composite local's."""
        chain = []
        node = target
        while isinstance(node, (ast.Subscript, ast.Attribute)):
            chain.append(node)
            node = node.value
        chain.reverse()
        binding = self.scope.get(node.id) if isinstance(node, ast.Name) else None
        for k, part in enumerate(chain):  # wp.adjoint[x.v][0] = ...: start from the adjoint
            if isinstance(part, ast.Subscript) and getattr(
                    self.evaluate(part.value), "_difftape_adjoint_access", False):
                binding, chain = self.adjoint_target(part.slice), chain[k + 1:]
                break
        while chain and isinstance(binding, StructLocal) and isinstance(chain[0], ast.Attribute):
            binding = binding.fields.get(chain[0].attr)  # descend through struct fields
            chain = chain[1:]
        root = binding if binding is not None else self.evaluate(node)
        if isinstance(root, ir.ArrayRef) and chain and isinstance(chain[0], ast.Subscript):
            element = chain[0]
            ref, full = self.store_target(element)
            t, parts = ref.dtype, chain[1:]
        elif isinstance(root, CompLocal):
            local = root
            ref, full, t, parts = None, (), local.type, chain
        else:
            self.fail(target, f"'{ast.unparse(target)}' cannot be assigned to", KernelTypeError)
        if not composite.is_composite(t):
            self.fail(target, f"'{ast.unparse(target)}' is not a component of a vector, matrix, "
                      "quaternion or transform", KernelTypeError)
        positions = self.part_positions(target, t, parts)
        self.part_scalar = compute_type(dtypes.scalar_of(t))
        if ref is None:
            return None, None, [local.syms[p] for p in positions]
        shape_positions = [_storage_position(t, p) for p in positions]
        return ref, [full + tuple(ir.Const(dtypes.int32, k) for k in sp)
                     for sp in shape_positions], None

    def part_positions(self, target: ast.AST, t: type, parts: list) -> list[int]:
        """Flat component positions selected by a chain of ``[k]``/``.x`` on type ``t``."""
        positions = list(range(t._length))
        shape = list(t._shape)
        for part in parts:
            if isinstance(part, ast.Attribute):
                pos = component_position(t, part.attr) if len(shape) == 1 else None
                if pos is None:
                    self.fail(part, f"{dtypes.type_name(t)} has no component '{part.attr}'",
                              KernelTypeError)
                positions = positions[pos] if isinstance(pos, slice) else [positions[pos]]
                shape = [len(positions)] if isinstance(pos, slice) else []
                continue
            for idx in self.index_list(part.slice):
                if not isinstance(idx, ir.Const) or not shape:
                    self.fail(part, "components are assigned with constant indices",
                              KernelTypeError)
                k = int(idx.value)
                stride = len(positions) // shape[0]
                positions = positions[k * stride:(k + 1) * stride]
                shape = shape[1:]
        return positions


def _storage_position(t: type, flat: int) -> tuple[int, ...]:
    return slot_positions(t)[flat]


def part_type(t: type, count: int) -> type:
    """The type of ``count`` components of composite ``t`` assigned together (scalar or row)."""
    if count == 1:
        return dtypes.scalar_of(t)
    return composite.vector_type(count, dtypes.scalar_of(t))
