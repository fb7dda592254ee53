"""Translate a kernel's statements into the typed IR, inlining ``@wp.func`` calls.

It keeps the structure of the user's code (if/for/while, break/continue/return are kept as IR
nodes; ``codegen/structure.py`` turns them into flags). Expression typing is in ``typecheck.py``.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass, field

from .. import composite, dtypes
from ..codegen import naming
from ..errors import KernelError, KernelNameError, KernelSyntaxError, KernelTypeError
from ..ops import registry
from . import ir
from .calls import CallLowering, RegionInfo
from .fence import check_syntax
from .resolve import MISSING, GlobalScope
from .source import ParsedSource
from .struct_values import (
    is_struct_type,
    struct_array_param,
    struct_param,
)
from .targets import TargetLowering, part_type
from .typecheck import (
    ExpressionTyper,
    compute_type,
    is_array_spec,
    slot_positions,
)
from .values import CompLocal, CompValue

_AUG_LOCAL = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Mod: "mod",
              ast.FloorDiv: "floordiv", ast.Pow: "pow", ast.BitAnd: "bit_and",
              ast.BitOr: "bit_or", ast.BitXor: "bit_xor", ast.LShift: "lshift",
              ast.RShift: "rshift"}


@dataclass
class KernelContext:
    """State shared by a kernel and every function inlined into it."""

    kernel: str
    locals: dict[str, type] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    read_arrays: set[str] = field(default_factory=set)
    written_arrays: set[str] = field(default_factory=set)
    stored_arrays: set[str] = field(default_factory=set)
    tid_vars: tuple[str, ...] = ()
    tid_flat: str | None = None
    call_stack: list[str] = field(default_factory=list)

    def next(self, kind: str) -> int:
        self.counters[kind] = self.counters.get(kind, 0) + 1
        return self.counters[kind]




class Lowerer(CallLowering, TargetLowering, ExpressionTyper):
    """Lowers one function body (the kernel's, or an inlined ``@wp.func``'s) into IR statements."""

    def __init__(self, ctx: KernelContext, parsed: ParsedSource, globals_: GlobalScope,
                 scope: dict, region: RegionInfo, suffix: str = ""):
        self.ctx = ctx
        self.parsed = parsed
        self.globals_ = globals_
        self.scope = scope
        self.region = region
        self.suffix = suffix
        self.block: list[ir.Stmt] = []
        self.loops: list[int] = []
        self.current: ast.AST | None = None
        self.part_scalar: type = dtypes.float32  # scalar type of the last component target
        self.random_states = _random_states(parsed.tree)

    # ------------------------------------------------------------ plumbing

    def fail(self, node: ast.AST | None, message: str, cls: type[KernelError] = KernelTypeError):
        if self.region.function:
            message = f"in function '{self.region.function}': {message}"
        raise cls(message, kernel=self.ctx.kernel, location=self.parsed.locate(node or self.current),
                  callers=self.region.callers)

    def emit(self, stmt: ir.Stmt) -> None:
        node = self.current
        if node is not None and not stmt.line:
            stmt.line = self.parsed.file_line(node)
            stmt.text = self.parsed.line_text(node)
            stmt.file = self.parsed.filename
        self.block.append(stmt)

    def new_temp(self, t: type) -> str:
        sym = naming.frontend_temp_name(self.ctx.next("tmp"))
        self.ctx.locals[sym] = t
        return sym

    def declare(self, name: str, t: type):
        """A new local for ``name``: a symbol, or a ``CompLocal`` (one symbol per component)."""
        if composite.is_composite(t):
            scalar = compute_type(dtypes.scalar_of(t))
            syms = [self.unique_symbol(f"{name}_{k}", scalar) for k in range(t._length)]
            self.scope[name] = CompLocal(t, syms)
            return self.scope[name]
        sym = self.unique_symbol(name, t)
        self.scope[name] = (t, sym)
        return sym

    def unique_symbol(self, name: str, t: type) -> str:
        sym = naming.local_name(name, self.suffix)
        while sym in self.ctx.locals and self.ctx.locals[sym] is not t:
            sym += "_"
        self.ctx.locals[sym] = t
        return sym

    def assign_binding(self, node: ast.AST, binding, value) -> None:
        """Assign ``value`` to a scalar or composite binding (used for ``wp.adjoint[x]``)."""
        if isinstance(binding, tuple):
            self.emit(ir.Assign(target=binding[1], value=self.coerce_scalar(node, value,
                                                                            binding[0])))
        elif isinstance(binding, CompLocal) and isinstance(value, CompValue) and \
                value.type is binding.type:
            self.assign_components(binding, value)
        else:
            self.fail(node, "this adjoint cannot be assigned that value", KernelTypeError)

    def stage(self, e: ir.Expr) -> ir.Expr:
        """A copy of ``e`` in a fresh temporary (constants need none)."""
        if isinstance(e, ir.Const):
            return e
        sym = self.new_temp(e.type)
        self.emit(ir.Assign(target=sym, value=e))
        return ir.Var(e.type, sym)

    def assign_components(self, local: CompLocal, value: CompValue) -> None:
        comps = value.comps
        written = {sym: k for k, sym in enumerate(local.syms)}
        if any(isinstance(x, ir.Var) and written.get(x.name, len(comps)) < j
               for j, c in enumerate(comps) for x in ir.walk_expr(c)):
            # ``v = m * v``: a component reads one assigned before it; compute all of them first.
            comps = [self.stage(c) for c in comps]
        for sym, c in zip(local.syms, comps):
            self.emit(ir.Assign(target=sym, value=c))

    def lower_block(self, stmts: list[ast.stmt]) -> list[ir.Stmt]:
        saved, self.block = self.block, []
        for node in stmts:
            self.lower_stmt(node)
        result, self.block = self.block, saved
        return result

    def capture(self, fn, *args):
        """Run ``fn`` collecting the statements it emits; returns (result, statements)."""
        saved, self.block = self.block, []
        result = fn(*args)
        emitted, self.block = self.block, saved
        return result, emitted

    def lower_stmt(self, node: ast.stmt) -> None:
        saved, self.current = self.current, node
        method = getattr(self, "visit_" + type(node).__name__, None)
        if method is None:
            self.fail(node, f"{type(node).__name__} statements are not supported in kernels",
                      KernelSyntaxError)
        method(node)
        self.current = saved

    def note_read(self, ref: ir.ArrayRef) -> None:
        self.ctx.read_arrays.add(ref.param)

    # ------------------------------------------------------------ assignments

    def visit_Assign(self, node: ast.Assign) -> None:
        if len(node.targets) != 1:
            self.fail(node, "chained assignment (a = b = v) is not supported; assign separately",
                      KernelSyntaxError)
        target = node.targets[0]
        if self.is_tid_call(node.value):
            return self.assign_tid(node, target)
        if isinstance(target, ast.Tuple):
            return self.assign_tuple(node, target, self.evaluate(node.value))
        if isinstance(target, ast.Name):
            value = self.evaluate(node.value)
            if isinstance(value, ir.ArrayRef):
                if target.id in self.scope and not isinstance(self.scope[target.id], ir.ArrayRef):
                    self.fail(target, f"'{target.id}' is a scalar; it cannot become an array view")
                self.scope[target.id] = value
                return None
            if not hasattr(value, "new_like"):
                value = self.as_value(node.value, value)
            return self.assign_name(target, target.id, value)
        if isinstance(target, (ast.Subscript, ast.Attribute)):
            value = self.evaluate(node.value)
            if not hasattr(value, "new_like"):
                value = self.as_value(node.value, value)
            return self.assign_part(target, value)
        self.fail(target, f"cannot assign to {type(target).__name__} in kernels",
                  KernelSyntaxError)

    def as_value(self, node: ast.AST, value):
        if isinstance(value, (ir.Expr, CompValue)) or hasattr(value, "new_like"):
            return value
        if value is None:
            self.fail(node, "this function returns no value", KernelTypeError)
        return self.value(node)

    def assign_name(self, node: ast.AST, name: str, value, declared: type | None = None):
        binding = self.scope.get(name)
        if isinstance(binding, ir.ArrayRef):
            self.fail(node, f"'{name}' is an array; arrays cannot be reassigned inside kernels")
        if isinstance(value, CompValue) or isinstance(binding, CompLocal):
            if binding is None:
                binding = self.declare(name, value.type)
            if not isinstance(binding, CompLocal) or not isinstance(value, CompValue) or \
                    binding.type is not value.type:
                old = binding.type if isinstance(binding, CompLocal) else binding[0]
                self.fail(node, f"variable '{name}' has type {dtypes.type_name(old)} but the "
                          f"value has type {dtypes.type_name(value.type)}", KernelTypeError)
            return self.assign_components(binding, value)
        if binding is not None and not isinstance(binding, tuple):
            return binding.assign(self, node, value)  # struct locals
        if hasattr(value, "new_like"):  # a struct value: copy it into a new struct local
            local = value.new_like(self, name)
            self.scope[name] = local
            return local.assign(self, node, value)
        if binding is None:
            t = declared or value.type
            if isinstance(value, ir.Const) and value.weak and declared is None:
                t = dtypes.float32 if dtypes.is_float(value.type) else dtypes.int32
            value = self.coerce_to(node, value, t, f"variable '{name}'")
            sym = self.declare(name, t)
        else:
            t, sym = binding
            value = self.coerce_to(node, value, t, f"variable '{name}'")
        self.emit(ir.Assign(target=sym, value=value))

    def assign_tuple(self, node: ast.Assign, target: ast.Tuple, values) -> None:
        if not isinstance(values, tuple):
            self.fail(node.value, "the right-hand side does not produce several values",
                      KernelTypeError)
        if len(values) != len(target.elts):
            self.fail(node, f"cannot unpack {len(values)} values into {len(target.elts)} names",
                      KernelTypeError)
        # Copy first so that swaps like ``a, b = b, a`` read the old values.
        staged = []
        for v in values:
            if isinstance(v, ir.Const):
                staged.append(v)
            elif isinstance(v, CompValue):
                staged.append(CompValue(v.type, [self.stage(c) for c in v.comps]))
            elif not isinstance(v, ir.Expr):
                staged.append(v)
            else:
                sym = self.new_temp(v.type)
                self.emit(ir.Assign(target=sym, value=v))
                staged.append(ir.Var(v.type, sym))
        for elt, v in zip(target.elts, staged):
            if not isinstance(elt, ast.Name):
                self.fail(elt, "only names can be unpacked into", KernelSyntaxError)
            self.assign_name(elt, elt.id, v)

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        if not isinstance(node.target, ast.Name) or node.value is None:
            self.fail(node, "annotated assignments need a name and a value: x: float = 0.0",
                      KernelSyntaxError)
        ann = self.evaluate(node.annotation)
        declared = dtypes.normalize_dtype(ann)
        if declared is None:
            self.fail(node.annotation, f"'{ast.unparse(node.annotation)}' is not a scalar type",
                      KernelTypeError)
        value = self.value(node.value)
        if not (isinstance(value, ir.Const) and value.weak) and value.type is not declared:
            value = self.cast(node, value, declared)
        self.assign_name(node.target, node.target.id, value, declared)

    def visit_AugAssign(self, node: ast.AugAssign) -> None:
        key = _AUG_LOCAL.get(type(node.op))
        if key is None:
            self.fail(node, f"augmented operator {type(node.op).__name__} is not supported",
                      KernelSyntaxError)
        rhs = self.operand(node.value)
        target = node.target
        if isinstance(target, ast.Name):
            current = self.operand(target)
            return self.assign_name(target, target.id, self.call_builtin(node, key, [current, rhs]))
        if not isinstance(target, (ast.Subscript, ast.Attribute)):
            self.fail(target, "augmented assignment needs a name, an array element or a "
                      "component", KernelSyntaxError)
        base = self.evaluate(target.value)
        if getattr(base, "_difftape_adjoint_access", False):  # wp.adjoint[x] += v
            binding = self.adjoint_target(target.slice)
            current = self.operand(target)
            new = self.call_builtin(node, key, [current, rhs])
            return self.assign_binding(target, binding, new)
        if key in ("add", "sub"):  # Warp: x[i] += v on array memory is an atomic add
            if isinstance(target, ast.Subscript) and isinstance(base, ir.ArrayRef):
                ref, indices = self.store_target(target)
                return self.emit_atomics(target, key, ref, [indices], rhs, ref.dtype)
            if not hasattr(base, "assign_field"):
                ref, choices = self.component_target(target)
                if ref is not None:
                    t = part_type(ref.dtype, len(choices[0][1]))
                    if len(choices) > 1:  # one component (or row), picked by the index
                        rhs = self.stage(rhs) if not isinstance(rhs, CompValue) else CompValue(
                            rhs.type, [self.stage(c) for c in rhs.comps])
                    for cond, indices in choices:
                        if cond is None:
                            self.emit_atomics(target, key, ref, indices, rhs, t)
                            continue
                        _, atomics = self.capture(self.emit_atomics, target, key, ref,
                                                  indices, rhs, t)
                        self.emit(ir.If(cond=cond, body=atomics, orelse=[]))
                    return None
        current = self.operand(target)
        if isinstance(current, ir.Load):
            self.note_read(current.array)
        return self.assign_part(target, self.call_builtin(node, key, [current, rhs]))

    def emit_atomics(self, node: ast.AST, op: str, ref: ir.ArrayRef, indices: list, value,
                     t: type, result: bool = False, compare: ir.Expr | None = None):
        """One atomic per component slot (``indices`` are full index tuples, one per slot)."""
        scalar = compute_type(dtypes.scalar_of(ref.dtype))
        if composite.is_composite(t) and len(indices) == 1:
            indices = [indices[0] + tuple(ir.Const(dtypes.int32, k) for k in pos)
                       for pos in slot_positions(t)]
        if len(indices) == 1:
            comps = [self.coerce_scalar(node, value, scalar)]
        elif not isinstance(value, CompValue) or value.type is not t:
            self.fail(node, f"the value must be a {dtypes.type_name(t)}", KernelTypeError)
        else:
            comps = self.computed_first(value.comps, ref, [])
        self.ctx.written_arrays.add(ref.param)
        results = []
        for idx, c in zip(indices, comps):
            sym = self.new_temp(scalar) if result else None
            self.emit(ir.Atomic(op=op, array=ref, indices=idx, value=c, result=sym,
                                compare=compare))
            results.append(ir.Var(scalar, sym) if sym else None)
        if not result:
            return None
        return CompValue(t, results) if composite.is_composite(t) else results[0]

    def store_target(self, target: ast.Subscript) -> tuple[ir.ArrayRef, tuple[ir.Expr, ...]]:
        base = self.evaluate(target.value)
        if not isinstance(base, ir.ArrayRef):
            self.fail(target, f"'{ast.unparse(target.value)}' is not an array; only array "
                      "elements can be assigned by index", KernelTypeError)
        indices = self.index_list(target.slice)
        full = base.prefix + tuple(indices)
        if len(full) != base.ndim:
            self.fail(target, f"an element store needs {base.view_ndim} index(es), "
                      f"{len(indices)} given", KernelTypeError)
        return base, full

    def store(self, target: ast.Subscript, value) -> None:
        ref, indices = self.store_target(target)
        self.store_into(target, ref, indices, value)

    def store_into(self, target: ast.AST, ref: ir.ArrayRef, indices: tuple, value) -> None:
        """``ref[indices] = value`` for a full element index (composites store per component)."""
        self.ctx.written_arrays.add(ref.param)
        self.ctx.stored_arrays.add(ref.param)
        if composite.is_composite(ref.dtype):
            if not isinstance(value, CompValue) or value.type is not ref.dtype:
                got = dtypes.type_name(value.type)
                self.fail(target, f"the array element has type {dtypes.type_name(ref.dtype)} "
                          f"but the value has type {got}", KernelTypeError)
            comps = self.computed_first(value.comps, ref, [])
            for pos, c in zip(slot_positions(ref.dtype), comps):
                self.emit(ir.Store(array=ref, indices=indices + tuple(
                    ir.Const(dtypes.int32, k) for k in pos), value=c))
            return
        value = self.coerce_scalar(target, value, compute_type(ref.dtype))
        self.emit(ir.Store(array=ref, indices=indices, value=value))

    # ------------------------------------------------------------ thread index

    def is_tid_call(self, node: ast.AST) -> bool:
        if not isinstance(node, ast.Call):
            return False
        try:
            func = self.evaluate(node.func)
        except KernelError:
            return False
        return getattr(func, "__name__", "") == "tid" and getattr(func, "_difftape_special", False)

    def assign_tid(self, node: ast.Assign, target: ast.AST) -> None:
        if self.region.function:
            self.fail(node, "wp.tid() cannot be called inside a @wp.func; pass the index as a "
                      "parameter", KernelSyntaxError)
        names = target.elts if isinstance(target, ast.Tuple) else [target]
        if not all(isinstance(n, ast.Name) for n in names) or len(names) > 4:
            self.fail(target, "wp.tid() is assigned to one to four names: i, j = wp.tid()",
                      KernelSyntaxError)
        if isinstance(target, ast.Tuple):
            syms = tuple(self.declare(n.id, dtypes.int32) for n in names)
            if self.ctx.tid_vars and len(self.ctx.tid_vars) != len(syms):
                self.fail(node, "wp.tid() is unpacked into a different number of names than "
                          "before in this kernel", KernelTypeError)
            self.ctx.tid_vars = syms
            for k, sym in enumerate(syms):
                self.emit(ir.Assign(target=sym, value=ir.Var(dtypes.int32, f"tid{k}")))
        else:
            sym = self.declare(names[0].id, dtypes.int32)
            self.ctx.tid_flat = sym
            self.emit(ir.Assign(target=sym, value=ir.Var(dtypes.int32, "tidflat")))

    # ------------------------------------------------------------ control flow

    def visit_Expr(self, node: ast.Expr) -> None:
        if isinstance(node.value, ast.Constant):
            return  # docstrings and bare constants do nothing
        if not isinstance(node.value, ast.Call):
            self.fail(node, "this expression statement has no effect", KernelSyntaxError)
        self.evaluate(node.value)

    def visit_Pass(self, node: ast.Pass) -> None:
        pass

    def visit_If(self, node: ast.If) -> None:
        if self.is_static_call(node.test):  # ``if wp.static(...)``: the branch taken only
            for stmt in node.body if self.static_value(node.test) else node.orelse:
                self.lower_stmt(stmt)
            return
        cond = self.truth(node.test, self.value(node.test))
        body = self.lower_block(node.body)
        orelse = self.lower_block(node.orelse)
        self.emit(ir.If(cond=cond, body=body, orelse=orelse))

    def visit_For(self, node: ast.For) -> None:
        if not isinstance(node.target, ast.Name):
            self.fail(node.target, "for-loop targets must be a single name", KernelSyntaxError)
        it = node.iter
        func = self.evaluate(it.func) if isinstance(it, ast.Call) else None
        reverse = func is reversed and len(it.args) == 1 and not it.keywords
        if reverse:
            it = it.args[0]
            func = self.evaluate(it.func) if isinstance(it, ast.Call) else None
        if func is not range or not 1 <= len(it.args) <= 3 or it.keywords:
            self.fail(it, "kernels can only loop over range(stop), range(start, stop) or "
                      "range(start, stop, step), or reversed() of one", KernelSyntaxError)
        bounds = [self.coerce_int(a) for a in it.args]
        start, stop, step = (
            (ir.Const(dtypes.int32, 0), bounds[0], ir.Const(dtypes.int32, 1)) if len(bounds) == 1
            else (bounds[0], bounds[1], ir.Const(dtypes.int32, 1)) if len(bounds) == 2
            else tuple(bounds))
        if isinstance(step, ir.Const) and step.value == 0:
            self.fail(it, "range() step must not be zero", KernelTypeError)
        name = node.target.id
        binding = self.scope.get(name)
        if binding is not None and binding[0] is not dtypes.int32:
            self.fail(node.target, f"loop variable '{name}' was a {dtypes.type_name(binding[0])}"
                      " before; loop variables are int32", KernelTypeError)
        var = binding[1] if binding is not None else self.declare(name, dtypes.int32)
        loop_id = self.ctx.next("loop")
        self.loops.append(loop_id)
        body = self.lower_block(node.body)
        self.loops.pop()
        for s in ir.walk_stmts(body):
            if isinstance(s, ir.Assign) and s.target == var:
                self.fail(node, f"the loop variable '{name}' is assigned inside its loop; use "
                          "another name", KernelSyntaxError)
        self.emit(ir.For(var=var, start=start, stop=stop, step=step, body=body, loop_id=loop_id,
                         reverse=reverse))

    def coerce_int(self, node: ast.AST) -> ir.Expr:
        e = self.value(node)
        if not dtypes.is_int(e.type):
            self.fail(node, f"range() bounds must be integers, got {dtypes.type_name(e.type)}",
                      KernelTypeError)
        return self.cast(node, e, dtypes.int32)

    def visit_While(self, node: ast.While) -> None:
        cond, pre = self.capture(lambda: self.truth(node.test, self.value(node.test)))
        loop_id = self.ctx.next("loop")
        self.loops.append(loop_id)
        body = self.lower_block(node.body)
        self.loops.pop()
        if pre:
            # A condition with statements of its own (a random draw, a @wp.func call): each
            # iteration runs them at its top and leaves when the condition is false.
            def leave_unless_true():
                stop = self.call_builtin(node.test, "logical_not", [cond])
                self.emit(ir.If(cond=stop, body=[ir.Break(loop_id=loop_id)]))

            body = pre + self.capture(leave_unless_true)[1] + body
            cond = ir.Const(dtypes.bool_, True)
        self.emit(ir.While(cond=cond, body=body, loop_id=loop_id))

    def visit_Break(self, node: ast.Break) -> None:
        if not self.loops:
            self.fail(node, "'break' outside a loop", KernelSyntaxError)
        self.emit(ir.Break(loop_id=self.loops[-1]))

    def visit_Continue(self, node: ast.Continue) -> None:
        if not self.loops:
            self.fail(node, "'continue' outside a loop", KernelSyntaxError)
        self.emit(ir.Continue(loop_id=self.loops[-1]))

    def visit_Return(self, node: ast.Return) -> None:
        if not self.region.function:
            if node.value is not None:
                self.fail(node, "kernels cannot return a value; write results into an array",
                          KernelSyntaxError)
            return self.emit(ir.Return(region=self.region.region))
        values = self.evaluate(node.value) if node.value is not None else ()
        values = values if isinstance(values, tuple) else (self.as_value(node.value, values),)
        if self.region.results is None:
            self.region.results = []
            for k, v in enumerate(values):
                t = v.type
                if isinstance(v, ir.Const) and v.weak:
                    t = dtypes.float32 if dtypes.is_float(t) else dtypes.int32
                if hasattr(v, "new_like"):  # struct values
                    self.region.results.append(v.new_like(self, f"ret{k}"))
                elif composite.is_composite(t):
                    syms = [self.new_temp(c.type) for c in v.comps]
                    self.region.results.append(CompLocal(t, syms))
                else:
                    self.region.results.append((t, self.new_temp(t)))
        if len(values) != len(self.region.results):
            self.fail(node, f"this return gives {len(values)} value(s) but an earlier return "
                      f"gave {len(self.region.results)}", KernelTypeError)
        for v, slot in zip(values, self.region.results):
            if isinstance(slot, tuple):
                t, sym = slot
                self.emit(ir.Assign(target=sym, value=self.coerce_to(node, v, t,
                                                                     "the return value")))
            elif isinstance(slot, CompLocal):
                if not isinstance(v, CompValue) or v.type is not slot.type:
                    self.fail(node, f"this return value must be a {dtypes.type_name(slot.type)}",
                              KernelTypeError)
                self.assign_components(slot, v)
            else:
                slot.assign(self, node, v)
        self.emit(ir.Return(region=self.region.region))

    # ------------------------------------------------------------ expression forms needing statements

    def short_circuit(self, node: ast.BoolOp, op: str, operands: list[ast.expr]) -> ir.Expr:
        parts = [self.capture(lambda n=n: self.truth(n, self.value(n))) for n in operands]
        for _, pre in parts[:1]:
            self.block.extend(pre)
        if all(not pre for _, pre in parts[1:]):
            return ir.BoolOp(dtypes.bool_, op, tuple(e for e, _ in parts))
        # An operand needs statements (an inlined call): keep Python's evaluation order with ifs.
        result = self.new_temp(dtypes.bool_)
        self.emit(ir.Assign(target=result, value=parts[0][0]))
        nest = self.block
        for e, pre in parts[1:]:
            inner = [*pre, ir.Assign(target=result, value=e)]
            test = ir.Var(dtypes.bool_, result)
            if op == "or":
                test = ir.Call(dtypes.bool_, self.builtin_record("logical_not"), (test,))
            branch = ir.If(cond=test, body=inner, orelse=[])
            nest.append(branch)
            nest = inner
        return ir.Var(dtypes.bool_, result)

    def builtin_record(self, key: str):
        return registry.lookup(key)[0]

    def conditional_value(self, node: ast.IfExp):
        cond = self.truth(node.test, self.value(node.test))
        a, pre_a = self.capture(self.operand, node.body)
        b, pre_b = self.capture(self.operand, node.orelse)
        if isinstance(a, CompValue) or isinstance(b, CompValue):
            if not (isinstance(a, CompValue) and isinstance(b, CompValue) and a.type is b.type):
                self.fail(node, "both branches of a conditional expression must have the same "
                          "type", KernelTypeError)
            syms = [self.new_temp(c.type) for c in a.comps]
            self.emit(ir.If(cond=cond,
                            body=[*pre_a, *(ir.Assign(target=t, value=c)
                                            for t, c in zip(syms, a.comps))],
                            orelse=[*pre_b, *(ir.Assign(target=t, value=c)
                                              for t, c in zip(syms, b.comps))]))
            return CompValue(a.type, [ir.Var(c.type, t) for c, t in zip(a.comps, syms)])
        if a.type is not b.type:
            if isinstance(a, ir.Const) and a.weak:
                a = self.coerce_to(node.body, a, b.type, "the other branch")
            else:
                b = self.coerce_to(node.orelse, b, a.type, "the other branch")
        result = self.new_temp(a.type)
        self.emit(ir.If(cond=cond, body=[*pre_a, ir.Assign(target=result, value=a)],
                        orelse=[*pre_b, ir.Assign(target=result, value=b)]))
        return ir.Var(a.type, result)

    def atomic_call(self, node: ast.Call, key: str) -> ir.Expr:
        operands = 2 if key == "atomic_cas" else 1  # (compare,) value
        if len(node.args) < 2 + operands:
            what = "a compare value and a value" if operands == 2 else "a value"
            self.fail(node, f"{key}(array, index..., {'compare, ' if operands == 2 else ''}"
                      f"value) needs an array, at least one index and {what}", KernelTypeError)
        ref = self.evaluate(node.args[0])
        if not isinstance(ref, ir.ArrayRef):
            self.fail(node.args[0], f"the first argument of {key}() must be an array",
                      KernelTypeError)
        indices = [self.coerce_int(a) for a in node.args[1:-operands]]
        full = ref.prefix + tuple(indices)
        if len(full) != ref.ndim:
            self.fail(node, f"{key}() needs {ref.view_ndim} index(es) for this array, "
                      f"{len(indices)} given", KernelTypeError)
        compare = None
        if operands == 2:
            if composite.is_composite(ref.dtype):
                self.fail(node, "atomic_cas() works on arrays of scalars", KernelTypeError)
            compare = self.coerce_scalar(node.args[-2], self.operand(node.args[-2]),
                                         compute_type(ref.dtype))
        value = self.operand(node.args[-1])
        return self.emit_atomics(node.args[-1], key.removeprefix("atomic_"), ref, [full], value,
                                 ref.dtype, result=True, compare=compare)

    def call_print(self, node: ast.Call) -> None:
        values = []
        for a in node.args:
            if isinstance(a, ast.Constant) and isinstance(a.value, str):
                values.append(ir.Const(str, a.value))
            else:
                values.append(self.value(a))
        self.emit(ir.Print(values=tuple(values)))

    def call_printf(self, node: ast.Call) -> None:
        """``wp.printf("x = %f\\n", x)``: C's printf, with a format string written in the call."""
        if not node.args or not (isinstance(node.args[0], ast.Constant) and
                                 isinstance(node.args[0].value, str)):
            self.fail(node, "printf() takes a format string literal first", KernelTypeError)
        if node.keywords:
            self.fail(node, "printf() does not take keyword arguments", KernelSyntaxError)
        values = []
        for a in node.args[1:]:
            value = self.value(a)
            if isinstance(value, CompValue) or not dtypes.is_scalar_type(value.type):
                self.fail(a, "printf() prints scalars; pass a vector's components one by one",
                          KernelTypeError)
            values.append(value)
        self.emit(ir.Print(values=tuple(values), c_format=node.args[0].value))

    def call_tid(self, node: ast.Call):
        self.fail(node, "wp.tid() must be assigned directly: i = wp.tid() or i, j = wp.tid()",
                  KernelSyntaxError)

    def call_identity(self, node: ast.Call) -> CompValue:
        """``wp.identity(n=3, dtype=float)``: both must be compile-time constants."""
        options = dict(zip(("n", "dtype"), node.args))
        options.update({k.arg: k.value for k in node.keywords})
        if "n" not in options or set(options) - {"n", "dtype"}:
            self.fail(node, "identity() takes n= and optionally dtype=", KernelTypeError)
        n = self.static_int(options["n"], "identity()'s n")
        dtype = dtypes.normalize_dtype(self.evaluate(options["dtype"])) if "dtype" in options \
            else dtypes.float32
        if dtype is None or not dtypes.is_float(dtype):
            self.fail(node, "identity()'s dtype must be a float type", KernelTypeError)
        t = composite.matrix_type((n, n), dtype)
        return CompValue(t, [ir.Const(dtype, 1.0 if r == c else 0.0) for r in range(n)
                             for c in range(n)])

    def is_static_call(self, node: ast.AST) -> bool:
        from ..language import static

        return isinstance(node, ast.Call) and self.evaluate_quietly(node.func) is static

    def evaluate_quietly(self, node: ast.AST):
        """What ``node`` (a name or attribute chain) stands for, or None if it is not one."""
        if isinstance(node, ast.Name):
            if node.id in self.scope:
                return None
            found = self.globals_.lookup(node.id)
            return None if found is MISSING else found
        if isinstance(node, ast.Attribute):
            base = self.evaluate_quietly(node.value)
            return getattr(base, node.attr, None) if base is not None else None
        return None

    def static_value(self, node: ast.Call):
        """``wp.static(expr)``'s value: ``expr`` evaluated in Python, in the kernel's globals
        and the closure around it."""
        if len(node.args) != 1 or node.keywords:
            self.fail(node, "wp.static() takes one expression", KernelTypeError)
        env = dict(self.globals_.globals)
        env.update(self.globals_.closure)
        code = compile(ast.Expression(node.args[0]), self.parsed.filename, "eval")
        try:
            return eval(code, env)  # noqa: S307 - the user's own expression, as Warp does
        except NameError as err:
            self.fail(node, f"wp.static() evaluates its expression when the kernel compiles, "
                      f"from module globals and closure variables: {err}", KernelNameError)
        except Exception as err:
            self.fail(node, f"wp.static() could not evaluate its expression: "
                      f"{type(err).__name__}: {err}", KernelTypeError)

    def call_static(self, node: ast.Call):
        return self.from_python(node, self.static_value(node))

    def call_select(self, node: ast.Call):
        self.fail(node, "wp.select() has been removed. Use wp.where(cond, value_if_true, "
                  "value_if_false) instead.", KernelNameError)


def lower_kernel(fn, key: str, concrete: dict | None = None) -> ir.KernelIR:
    """Parse, fence, type and lower the Python function ``fn`` into a kernel's IR.

    ``concrete`` maps generic parameters (``typing.Any``, ``wp.array(dtype=Any)``) to the
    annotations of one specialisation."""
    from .source import parse_function

    parsed = parse_function(fn)
    check_syntax(parsed, key)
    args = parsed.tree.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
        raise KernelSyntaxError("kernel parameters must be plain named parameters with type "
                                "annotations (no defaults, *args or **kwargs)", kernel=key,
                                location=parsed.locate(parsed.tree))
    globals_ = GlobalScope(fn)
    annotations = {**globals_.annotations(), **(concrete or {})}
    ctx = KernelContext(key)
    scope: dict = {}
    params: list[ir.Param] = []
    for arg in args.args:
        ann = annotations.get(arg.arg)
        sym = naming.local_name(arg.arg)
        if is_array_spec(ann):
            dtype = dtypes.normalize_dtype(ann.dtype)
            if is_struct_type(dtype):
                flat, scope[arg.arg] = struct_array_param(arg.arg, sym, dtype, ann.ndim)
                params.append(ir.Param(arg.arg, sym, dtype, True, ann.ndim, flat=flat))
                continue
            params.append(ir.Param(arg.arg, sym, dtype, True, ann.ndim))
            scope[arg.arg] = ir.ArrayRef(sym, dtype, ann.ndim)
            continue
        dtype = dtypes.normalize_dtype(ann) if ann is not None else None
        if dtype is None:
            what = "has no type annotation" if ann is None else f"has an unsupported type {ann!r}"
            raise KernelTypeError(
                f"parameter '{arg.arg}' {what}; annotate it, e.g. x: wp.array(dtype=float) or "
                "scale: float", kernel=key, location=parsed.locate(arg))
        if composite.is_composite(dtype):
            comps = tuple(naming.local_name(f"{arg.arg}_{k}") for k in range(dtype._length))
            params.append(ir.Param(arg.arg, sym, dtype, False, components=comps))
            scope[arg.arg] = CompLocal(dtype, list(comps))
            continue
        if is_struct_type(dtype):
            flat, scope[arg.arg] = struct_param(arg.arg, sym, dtype)
            params.append(ir.Param(arg.arg, sym, dtype, False, flat=flat))
            continue
        params.append(ir.Param(arg.arg, sym, dtype, False))
        scope[arg.arg] = (compute_type(dtype), sym)
    lowerer = Lowerer(ctx, parsed, globals_, scope, RegionInfo(0))
    body = lowerer.lower_block(parsed.tree.body)
    return ir.KernelIR(
        name=key, params=params, body=body, locals=ctx.locals, tid_vars=ctx.tid_vars,
        tid_flat=ctx.tid_flat, written_arrays=frozenset(ctx.written_arrays),
        read_arrays=_loaded_arrays(body), stored_arrays=frozenset(ctx.stored_arrays),
        added_arrays=frozenset(s.array.param for s in ir.walk_stmts(body)
                               if isinstance(s, ir.Atomic) and s.op in ("add", "sub")),
    )


def _loaded_arrays(body: list[ir.Stmt]) -> frozenset[str]:
    """Array parameters some statement of the final IR loads from (values that were looked at
    while translating but never used do not count)."""
    loaded = set()
    for s in ir.walk_stmts(body):
        for e in ir.statement_exprs(s):
            loaded.update(x.array.param for x in ir.walk_expr(e) if isinstance(x, ir.Load))
    return frozenset(loaded)


@functools.cache
def _draws() -> frozenset[str]:
    """Names of the functions that advance the random state passed first: the registry's draws
    (``ops/random.py``) and ``kernel_library.py``'s."""
    from .. import kernel_library

    return frozenset(r.key for r in registry.all_builtins() if r.impl == "random") | frozenset(
        name for name, obj in vars(kernel_library).items() if isinstance(obj, kernel_library.Draw))


def _random_states(tree: ast.AST) -> frozenset[str]:
    """Names a draw advances in ``tree`` (``wp.randf(state)``): their reads are copied where
    they happen, so that a read left of a draw in one expression sees the state before it, as
    in Warp (``float(state) + wp.randf(state)``)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name):
            callee = node.func
            name = callee.attr if isinstance(callee, ast.Attribute) else getattr(callee, "id", "")
            if name in _draws():
                names.add(node.args[0].id)
    return frozenset(names)
