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
        ref, choices = self.component_target(target)
        comps = self.part_components(target, value, len(choices[0][1]))
        if len(choices) > 1:  # values computed once, whichever slots the index picks
            comps = [self.stage(c) for c in comps]
        else:
            comps = self.computed_first(comps, ref, choices)
        if ref is not None:
            self.ctx.written_arrays.add(ref.param)
            self.ctx.stored_arrays.add(ref.param)
        for cond, slots in choices:
            if ref is None:  # a local's components keep their value where not chosen
                for sym, c in zip(slots, comps):
                    chosen = c if cond is None else self.call_builtin(
                        target, "where", [cond, c, ir.Var(c.type, sym)])
                    self.emit(ir.Assign(target=sym, value=chosen))
                continue
            stores = [ir.Store(array=ref, indices=idx, value=c) for idx, c in zip(slots, comps)]
            if cond is None:
                self.block.extend(stores)
            else:
                self.emit(ir.If(cond=cond, body=stores, orelse=[]))
        return None

    def computed_first(self, comps: list[ir.Expr], ref: ir.ArrayRef | None,
                       choices: list) -> list[ir.Expr]:
        """``comps``, written one slot after the other, each in a temporary when a later one
        reads what writing the earlier ones changes (slots of ``ref``, or of a local): values
        are computed before any slot changes (``m[0] = wp.vec2(m[0][1], m[0][0])``)."""
        if any(_reads_target(c, ref, choices) for c in comps[1:]):
            return [self.stage(c) for c in comps]
        return list(comps)

    def part_components(self, target: ast.AST, value, count: int) -> list[ir.Expr]:
        """The scalar components assigned to ``count`` slots (a scalar for one, a vector for a row)."""
        scalar = self.part_scalar
        if count == 1:
            return [self.coerce_scalar(target, value, scalar)]
        if not isinstance(value, CompValue) or len(value.comps) != count:
            self.fail(target, f"this assignment needs {count} components", KernelTypeError)
        return [self.coerce_to(target, c, scalar, "the component") for c in value.comps]

    def component_target(self, target: ast.AST):
        """Resolve an assignment target inside a composite: ``(array ref, choices)`` for an array
        element's components, ``(None, choices)`` for a composite local's. ``choices``: one
        ``(condition, slots)`` per component (or row) a non-constant index may pick, ``slots``
        index tuples into the array or the local's symbols; a single choice, whose condition is
        None, when every index is a constant."""
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
        choices = self.part_choices(t, parts)
        self.part_scalar = compute_type(dtypes.scalar_of(t))
        if ref is None:
            return None, [(cond, [local.syms[p] for p in positions])
                          for cond, positions in choices]
        return ref, [(cond, [full + tuple(ir.Const(dtypes.int32, k)
                                          for k in _storage_position(t, p))
                             for p in positions]) for cond, positions in choices]

    def part_choices(self, t: type, parts: list) -> list[tuple[ir.Expr | None, list[int]]]:
        """The flat component positions a chain of ``[k]``/``.x`` on type ``t`` selects: one
        ``(condition, positions)`` per value its non-constant indices may take (a
        ``wp.where``-style chain, as reading ``v[k]`` is), one with condition None if none."""
        choices: list[tuple[list[ir.Expr], list[int], list[int]]] = [
            ([], list(range(t._length)), list(t._shape))]
        for part in parts:
            if isinstance(part, ast.Attribute):
                pos = component_position(t, part.attr) if len(t._shape) == 1 else None
                if pos is None or len(choices[0][2]) != 1:
                    self.fail(part, f"{dtypes.type_name(t)} has no component '{part.attr}'",
                              KernelTypeError)
                choices = [(conds, positions[pos] if isinstance(pos, slice) else [positions[pos]],
                            [len(positions[pos])] if isinstance(pos, slice) else [])
                           for conds, positions, _ in choices]
                continue
            for idx in self.index_list(part.slice):
                if not choices[0][2]:
                    self.fail(part, f"too many indices for a {dtypes.type_name(t)}",
                              KernelTypeError)
                size = choices[0][2][0]
                if isinstance(idx, ir.Const):
                    picks = [(None, self.constant_component(part, idx, size))]
                else:
                    if not isinstance(idx, ir.Var):  # computed once, not once per choice
                        idx = self.stage(idx)
                    what = _index_meaning(t, len(t._shape) - len(choices[0][2]))
                    idx = self.runtime_component(part, idx, size, what)
                    picks = [(self.call_builtin(part, "eq", [idx, ir.Const(
                        dtypes.int32, k, weak=True)]), k) for k in range(size)]
                choices = [(conds + ([test] if test is not None else []),
                            positions[k * (len(positions) // size):
                                      (k + 1) * (len(positions) // size)], shape[1:])
                           for conds, positions, shape in choices for test, k in picks]
        return [(None if not conds else conds[0] if len(conds) == 1 else ir.BoolOp(
            dtypes.bool_, "and", tuple(conds)), positions) for conds, positions, _ in choices]


def _reads_target(e: ir.Expr, ref: ir.ArrayRef | None, choices: list) -> bool:
    """Whether ``e`` reads what an assignment to ``choices`` (slots of ``ref``, or of a local)
    changes."""
    if ref is not None:
        return any(isinstance(x, ir.Load) and x.array.param == ref.param for x in ir.walk_expr(e))
    slots = {sym for _, syms in choices for sym in syms}
    return any(isinstance(x, ir.Var) and x.name in slots for x in ir.walk_expr(e))


def _index_meaning(t: type, axis: int) -> str:
    """What index ``axis`` of composite ``t`` picks, for errors: "components of a vec3"."""
    kind = "components" if len(t._shape) == 1 else ("rows", "columns")[axis]
    return f"{kind} of a {dtypes.type_name(t)}"


def _storage_position(t: type, flat: int) -> tuple[int, ...]:
    return slot_positions(t)[flat]


def part_type(t: type, count: int) -> type:
    """The type of ``count`` components of composite ``t`` assigned together (scalar or row)."""
    if count == 1:
        return dtypes.scalar_of(t)
    return composite.vector_type(count, dtypes.scalar_of(t))
