"""Translate a kernel's statements into the typed IR, inlining ``@wp.func`` calls.

It keeps the structure of the user's code (if/for/while, break/continue/return are kept as IR
nodes; ``codegen/structure.py`` turns them into flags). Expression typing is in ``typecheck.py``.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .. import dtypes
from ..codegen import naming
from ..errors import KernelError, KernelNameError, KernelSyntaxError, KernelTypeError
from . import ir
from .fence import check_syntax
from .resolve import GlobalScope
from .source import ParsedSource
from .typecheck import ExpressionTyper, compute_type, is_array_spec

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


@dataclass
class RegionInfo:
    region: int
    function: str = ""
    results: list[tuple[type, str]] | None = None
    callers: tuple = ()  # SourceLocations of the calls that inlined this function, innermost first


class Lowerer(ExpressionTyper):
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

    def declare(self, name: str, t: type) -> str:
        sym = naming.local_name(name, self.suffix)
        while sym in self.ctx.locals and self.ctx.locals[sym] is not t:
            sym += "_"
        self.ctx.locals[sym] = t
        self.scope[name] = (t, sym)
        return sym

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
            return self.assign_name(target, target.id, self.as_value(node.value, value))
        if isinstance(target, ast.Subscript):
            return self.store(target, self.value(node.value))
        self.fail(target, f"cannot assign to {type(target).__name__} in kernels "
                  "(component writes arrive with vector types)", KernelSyntaxError)

    def as_value(self, node: ast.AST, value) -> ir.Expr:
        if isinstance(value, ir.Expr):
            return value
        if value is None:
            self.fail(node, "this function returns no value", KernelTypeError)
        return self.value(node)

    def assign_name(self, node: ast.AST, name: str, value: ir.Expr, declared: type | None = None):
        binding = self.scope.get(name)
        if isinstance(binding, ir.ArrayRef):
            self.fail(node, f"'{name}' is an array; arrays cannot be reassigned inside kernels")
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
        rhs = self.value(node.value)
        target = node.target
        if isinstance(target, ast.Name):
            current = self.value(target)
            return self.assign_name(target, target.id, self.call_builtin(node, key, [current, rhs]))
        if isinstance(target, ast.Subscript):
            ref, indices = self.store_target(target)
            value = self.coerce_to(node, rhs, compute_type(ref.dtype), "the array element")
            if key in ("add", "sub"):  # Warp: x[i] += v is an atomic add
                self.ctx.written_arrays.add(ref.param)
                return self.emit(ir.Atomic(op=key, array=ref, indices=indices, value=value))
            self.note_read(ref)
            loaded = ir.Load(compute_type(ref.dtype), ref, indices)
            return self.store(target, self.call_builtin(node, key, [loaded, value]))
        self.fail(target, "augmented assignment needs a name or an array element",
                  KernelSyntaxError)

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

    def store(self, target: ast.Subscript, value: ir.Expr) -> None:
        ref, indices = self.store_target(target)
        value = self.coerce_to(target, value, compute_type(ref.dtype), "the array element")
        self.ctx.written_arrays.add(ref.param)
        self.ctx.stored_arrays.add(ref.param)
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
        if pre:
            self.fail(node.test, "while-conditions cannot call @wp.func functions or use "
                      "conditional expressions; compute the condition into a variable",
                      KernelSyntaxError)
        loop_id = self.ctx.next("loop")
        self.loops.append(loop_id)
        body = self.lower_block(node.body)
        self.loops.pop()
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
            for v in values:
                t = v.type
                if isinstance(v, ir.Const) and v.weak:
                    t = dtypes.float32 if dtypes.is_float(t) else dtypes.int32
                self.region.results.append((t, self.new_temp(t)))
        if len(values) != len(self.region.results):
            self.fail(node, f"this return gives {len(values)} value(s) but an earlier return "
                      f"gave {len(self.region.results)}", KernelTypeError)
        for v, (t, sym) in zip(values, self.region.results):
            self.emit(ir.Assign(target=sym, value=self.coerce_to(node, v, t, "the return value")))
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
        from ..ops import registry
        return registry.lookup(key)[0]

    def conditional_value(self, node: ast.IfExp) -> ir.Expr:
        cond = self.truth(node.test, self.value(node.test))
        a, pre_a = self.capture(self.value, node.body)
        b, pre_b = self.capture(self.value, node.orelse)
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
        if len(node.args) < 3:
            self.fail(node, f"{key}(array, index..., value) needs an array, at least one index "
                      "and a value", KernelTypeError)
        ref = self.evaluate(node.args[0])
        if not isinstance(ref, ir.ArrayRef):
            self.fail(node.args[0], f"the first argument of {key}() must be an array",
                      KernelTypeError)
        indices = [self.coerce_int(a) for a in node.args[1:-1]]
        full = ref.prefix + tuple(indices)
        if len(full) != ref.ndim:
            self.fail(node, f"{key}() needs {ref.view_ndim} index(es) for this array, "
                      f"{len(indices)} given", KernelTypeError)
        value = self.coerce_to(node.args[-1], self.value(node.args[-1]), compute_type(ref.dtype),
                               f"the value passed to {key}()")
        self.ctx.written_arrays.add(ref.param)
        result = self.new_temp(compute_type(ref.dtype))
        self.emit(ir.Atomic(op=key.removeprefix("atomic_"), array=ref, indices=full,
                            value=value, result=result))
        return ir.Var(compute_type(ref.dtype), result)

    def call_print(self, node: ast.Call) -> None:
        values = []
        for a in node.args:
            if isinstance(a, ast.Constant) and isinstance(a.value, str):
                values.append(ir.Const(str, a.value))
            else:
                values.append(self.value(a))
        self.emit(ir.Print(values=tuple(values)))

    def call_tid(self, node: ast.Call):
        self.fail(node, "wp.tid() must be assigned directly: i = wp.tid() or i, j = wp.tid()",
                  KernelSyntaxError)

    def call_select(self, node: ast.Call):
        self.fail(node, "wp.select() has been removed. Use wp.where(cond, value_if_true, "
                  "value_if_false) instead.", KernelNameError)

    # ------------------------------------------------------------ user functions

    def inline_call(self, node: ast.Call, func, args: list) -> object:
        if func.key in self.ctx.call_stack:
            self.fail(node, f"recursive call of function '{func.key}' is not supported",
                      KernelSyntaxError)
        parsed = func.parsed()
        check_syntax(parsed, self.ctx.kernel)
        globals_ = GlobalScope(func.func)
        annotations = globals_.annotations()
        params = [a.arg for a in parsed.tree.args.args]
        if len(args) != len(params):
            self.fail(node, f"function '{func.key}' takes {len(params)} argument(s), "
                      f"{len(args)} given", KernelTypeError)
        region = RegionInfo(self.ctx.next("region"), function=func.key,
                            callers=(self.parsed.locate(node), *self.region.callers))
        child = Lowerer(self.ctx, parsed, globals_, {}, region, suffix=f"_{func.key}{region.region}")
        for name, arg, arg_node in zip(params, args, node.args):
            self.bind_parameter(child, func, name, annotations.get(name), arg, arg_node)
        self.ctx.call_stack.append(func.key)
        child.current = parsed.tree
        child.block = list(child.block)
        body = child.lower_block(parsed.tree.body)
        self.ctx.call_stack.pop()
        self.emit(ir.Region(region=region.region, body=child.block + body))
        if not region.results:
            return None
        results = tuple(ir.Var(t, sym) for t, sym in region.results)
        return results[0] if len(results) == 1 else results

    def bind_parameter(self, child: Lowerer, func, name: str, ann, arg, arg_node: ast.AST) -> None:
        if ann is None:
            self.fail(arg_node, f"parameter '{name}' of function '{func.key}' has no type "
                      "annotation", KernelTypeError)
        if is_array_spec(ann):
            expected_dtype = dtypes.normalize_dtype(ann.dtype)
            if not isinstance(arg, ir.ArrayRef) or arg.view_ndim != ann.ndim or \
                    arg.dtype is not expected_dtype:
                got = (f"array(dtype={dtypes.type_name(arg.dtype)}, ndim={arg.view_ndim})"
                       if isinstance(arg, ir.ArrayRef) else
                       dtypes.type_name(getattr(arg, "type", type(arg))))
                self.fail(arg_node, f"argument '{name}' of function '{func.key}' expects "
                          f"array(dtype={dtypes.type_name(expected_dtype)}, ndim={ann.ndim}), "
                          f"got {got}", KernelTypeError)
            child.scope[name] = arg
            return
        declared = dtypes.normalize_dtype(ann)
        if declared is None:
            self.fail(arg_node, f"parameter '{name}' of function '{func.key}' has an unsupported "
                      f"annotation {ann!r}", KernelTypeError)
        value = self.as_value(arg_node, arg)
        value = self.coerce_to(arg_node, value, declared,
                               f"parameter '{name}' of function '{func.key}'")
        sym = child.declare(name, declared)
        child.block.append(ir.Assign(target=sym, value=value, line=self.parsed.file_line(arg_node),
                                     text=self.parsed.line_text(arg_node)))


def lower_kernel(fn, key: str) -> ir.KernelIR:
    """Parse, fence, type and lower the Python function ``fn`` into a kernel's IR."""
    from .source import parse_function

    parsed = parse_function(fn)
    check_syntax(parsed, key)
    args = parsed.tree.args
    if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs or args.defaults:
        raise KernelSyntaxError("kernel parameters must be plain named parameters with type "
                                "annotations (no defaults, *args or **kwargs)", kernel=key,
                                location=parsed.locate(parsed.tree))
    globals_ = GlobalScope(fn)
    annotations = globals_.annotations()
    ctx = KernelContext(key)
    scope: dict = {}
    params: list[ir.Param] = []
    for arg in args.args:
        ann = annotations.get(arg.arg)
        sym = naming.local_name(arg.arg)
        if is_array_spec(ann):
            dtype = dtypes.normalize_dtype(ann.dtype)
            params.append(ir.Param(arg.arg, sym, dtype, True, ann.ndim))
            scope[arg.arg] = ir.ArrayRef(sym, dtype, ann.ndim)
            continue
        dtype = dtypes.normalize_dtype(ann) if ann is not None else None
        if dtype is None:
            what = "has no type annotation" if ann is None else f"has an unsupported type {ann!r}"
            raise KernelTypeError(
                f"parameter '{arg.arg}' {what}; annotate it, e.g. x: wp.array(dtype=float) or "
                "scale: float", kernel=key, location=parsed.locate(arg))
        params.append(ir.Param(arg.arg, sym, dtype, False))
        scope[arg.arg] = (compute_type(dtype), sym)
    lowerer = Lowerer(ctx, parsed, globals_, scope, RegionInfo(0))
    body = lowerer.lower_block(parsed.tree.body)
    return ir.KernelIR(
        name=key, params=params, body=body, locals=ctx.locals, tid_vars=ctx.tid_vars,
        tid_flat=ctx.tid_flat, written_arrays=frozenset(ctx.written_arrays),
        read_arrays=frozenset(ctx.read_arrays), stored_arrays=frozenset(ctx.stored_arrays),
    )
