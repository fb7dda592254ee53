"""Type expressions of a kernel body and pick builtin overloads: Python ``ast`` expressions → typed IR.

Literals are *weak*: ``x * 0.5`` takes ``x``'s float type, as Warp does. Two different strong types
never mix silently: the user is told to cast. This module types expressions; statements are
translated by ``lower.py``, which calls into it.
"""

from __future__ import annotations

import ast
import builtins
import math
import types as pytypes

import numpy as np

from .. import composite, dtypes
from ..errors import KernelNameError, KernelSyntaxError, KernelTypeError
from ..ops import registry
from . import ir
from .resolve import MISSING
from .values import CompLocal, CompValue, Traced, Tracer

_BINOPS = {
    ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Mod: "mod",
    ast.FloorDiv: "floordiv", ast.Pow: "pow", ast.BitAnd: "bit_and", ast.BitOr: "bit_or",
    ast.BitXor: "bit_xor", ast.LShift: "lshift", ast.RShift: "rshift", ast.MatMult: "matmul",
}
_CMPOPS = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
_UNARY = {ast.USub: "neg", ast.UAdd: "pos", ast.Invert: "invert"}
# Python builtins that mean a kernel builtin of the same (or another) name.
_PYTHON_BUILTINS = {"min": "min", "max": "max", "abs": "abs", "round": "round", "pow": "pow"}
_CASTS = {builtins.float: dtypes.float32, builtins.int: dtypes.int32, builtins.bool: dtypes.bool_}


def compute_type(dtype: type) -> type:
    """The type an array element has once loaded: float16 is storage-only and computes as float32."""
    return dtypes.float32 if dtype is dtypes.float16 else dtype


def is_array_spec(obj: object) -> bool:
    return bool(getattr(obj, "is_annotation", False)) and hasattr(obj, "ndim")


def is_user_function(obj: object) -> bool:
    return bool(getattr(obj, "_difftape_function", False))


class ExpressionTyper:
    """Mixin of the statement lowerer: turns ``ast`` expressions into typed ``ir.Expr`` trees.

    Expects from its host: ``fail``, ``scope`` (name → binding), ``globals_``, ``emit``,
    ``new_temp``, ``inline_call`` and ``kernel`` (name for messages).
    """

    # ------------------------------------------------------------ entry points

    def value(self, node: ast.AST) -> ir.Expr:
        """A scalar-valued expression (not an array, module, tuple or composite)."""
        result = self.operand(node)
        if isinstance(result, CompValue):
            self.fail(node, f"a {dtypes.type_name(result.type)} value cannot be used here; a "
                      "scalar is needed (index a component, e.g. v[0])", KernelTypeError)
        return result

    def operand(self, node: ast.AST):
        """A scalar expression or a composite value (vec3, mat33, quat…)."""
        result = self.evaluate(node)
        if isinstance(result, (ir.Expr, CompValue)):
            return result
        if isinstance(result, ir.ArrayRef):
            self.fail(node, "an array cannot be used as a value here; index it, e.g. x[i]",
                      KernelTypeError)
        if isinstance(result, tuple):
            self.fail(node, "a tuple of values cannot be used here; unpack it first: a, b = ...",
                      KernelTypeError)
        self.fail(node, f"'{ast.unparse(node)}' is not a value usable in a kernel "
                  f"(it is {type(result).__name__})", KernelTypeError)

    def evaluate(self, node: ast.AST):
        """Any expression: ``ir.Expr``, ``ir.ArrayRef``, a tuple of Exprs, or a Python object."""
        method = getattr(self, "eval_" + type(node).__name__, None)
        if method is None:
            self.fail(node, f"{type(node).__name__} expressions are not supported in kernels",
                      KernelSyntaxError)
        return method(node)

    # ------------------------------------------------------------ leaves

    def eval_Constant(self, node: ast.Constant):
        return self.constant(node, node.value)

    def constant(self, node: ast.AST, value: object) -> ir.Const:
        if isinstance(value, bool):
            return ir.Const(dtypes.bool_, value)
        if isinstance(value, int):
            return ir.Const(dtypes.int32, value, weak=True)
        if isinstance(value, float):
            return ir.Const(dtypes.float32, value, weak=True)
        scalar = dtypes.normalize_dtype(type(value)) if hasattr(value, "dtype") else None
        if scalar is not None and getattr(value, "shape", ()) == ():
            return ir.Const(scalar, value.item())
        self.fail(node, f"constant {value!r} of type {type(value).__name__} cannot be used in a "
                  "kernel; only numbers and booleans can", KernelTypeError)

    def eval_Name(self, node: ast.Name):
        binding = self.scope.get(node.id)
        if binding is not None:
            if isinstance(binding, ir.ArrayRef):
                return binding
            if isinstance(binding, CompLocal):
                return binding.value()
            if not isinstance(binding, tuple):
                return binding  # struct values
            if node.id in self.random_states:  # a draw may change it later in the statement
                return self.stage(ir.Var(binding[0], binding[1]))
            return ir.Var(binding[0], binding[1])
        obj = self.globals_.lookup(node.id)
        if obj is MISSING:
            self.fail(node, f"name '{node.id}' is not defined: it is neither a local variable, "
                      "a parameter, a module-level constant nor a builtin", KernelNameError)
        return self.from_python(node, obj)

    def from_python(self, node: ast.AST, obj: object):
        """What a global or closure object means inside a kernel."""
        if isinstance(obj, (bool, int, float)) or (hasattr(obj, "dtype") and
                                                   getattr(obj, "shape", None) == ()):
            return self.constant(node, obj)
        return obj  # modules, builtins, types, user functions: interpreted by the caller

    def eval_Attribute(self, node: ast.Attribute):
        base = self.evaluate(node.value)
        if hasattr(base, "first_leaf") and node.attr == "shape":
            return ("shape", base.first_leaf())
        if hasattr(base, "field_ref"):
            return base.field_ref(self, node)  # ps.mass: the per-field array of a struct array
        if isinstance(base, ir.ArrayRef):
            if node.attr == "shape":
                return ("shape", base)
            self.fail(node, f"arrays have no attribute '{node.attr}' inside kernels "
                      "(use x.shape[k] or len(x))", KernelTypeError)
        if isinstance(base, CompValue):
            return self.component_attribute(node, base)
        if hasattr(base, "field_value"):
            return base.field_value(self, node)
        if isinstance(base, ir.Expr):
            self.fail(node, f"values of type {dtypes.type_name(base.type)} have no attribute "
                      f"'{node.attr}'", KernelTypeError)
        if isinstance(base, pytypes.ModuleType) or isinstance(base, type):
            obj = getattr(base, node.attr, MISSING)
            if obj is MISSING:
                self.fail(node, f"module '{getattr(base, '__name__', base)}' has no attribute "
                          f"'{node.attr}'", KernelNameError)
            return self.from_python(node, obj)
        self.fail(node, f"'{ast.unparse(node)}' cannot be used in a kernel", KernelTypeError)

    # ------------------------------------------------------------ subscripts

    def eval_Subscript(self, node: ast.Subscript):
        base = self.evaluate(node.value)
        if getattr(base, "_difftape_adjoint_access", False):
            binding = self.adjoint_target(node.slice)
            if isinstance(binding, tuple):
                return ir.Var(binding[0], binding[1])
            return binding.value() if isinstance(binding, CompLocal) else binding
        if isinstance(base, tuple) and base and base[0] == "shape":
            axis = self.static_int(node.slice, "a shape index")
            ref = base[1]
            if not 0 <= axis < ref.view_ndim:
                self.fail(node, f"shape index {axis} is out of range for an array with "
                          f"{ref.view_ndim} dimension(s)", KernelTypeError)
            return ir.Shape(dtypes.int32, ref, len(ref.prefix) + axis)
        if isinstance(base, ir.ArrayRef):
            return self.index_array(node, base, self.index_list(node.slice))
        if hasattr(base, "field_ref"):  # ps[i] of an array of structs
            from .struct_values import StructElem

            indices = tuple(self.index_list(node.slice))
            if len(indices) != base.ndim:
                self.fail(node, f"an array of structs needs {base.ndim} index(es)",
                          KernelTypeError)
            return StructElem(base, indices)
        if isinstance(base, CompValue):
            return self.component(node, base, self.index_list(node.slice))
        if isinstance(base, ir.Expr):
            self.fail(node, f"'{ast.unparse(node.value)}' is a {dtypes.type_name(base.type)} "
                      "scalar; only arrays can be indexed", KernelTypeError)
        self.fail(node, f"'{ast.unparse(node.value)}' cannot be indexed in a kernel",
                  KernelTypeError)

    def index_list(self, node: ast.AST) -> list[ir.Expr]:
        elts = node.elts if isinstance(node, ast.Tuple) else [node]
        indices = []
        for e in elts:
            idx = self.value(e)
            if idx.type is dtypes.bool_ or not dtypes.is_int(idx.type):
                self.fail(e, f"array indices must be integers, got {dtypes.type_name(idx.type)}",
                          KernelTypeError)
            indices.append(idx)
        return indices

    def index_array(self, node: ast.AST, ref: ir.ArrayRef, indices: list[ir.Expr]):
        """``x[i]`` → a Load when all dimensions are indexed, else a view (ArrayRef)."""
        if len(indices) > ref.view_ndim:
            self.fail(node, f"too many indices: array '{ast.unparse(node.value)}' has "
                      f"{ref.view_ndim} dimension(s), {len(indices)} given", KernelTypeError)
        full = ref.prefix + tuple(indices)
        if len(full) == ref.ndim:
            self.note_read(ref)
            if composite.is_composite(ref.dtype):
                scalar = compute_type(dtypes.scalar_of(ref.dtype))
                return CompValue(ref.dtype, [ir.Load(scalar, ref, full + tuple(
                    ir.Const(dtypes.int32, k) for k in position))
                    for position in slot_positions(ref.dtype)])
            return ir.Load(compute_type(ref.dtype), ref, full)
        return ir.ArrayRef(ref.param, ref.dtype, ref.ndim, tuple(self.freeze(e) for e in full))

    def freeze(self, e: ir.Expr) -> ir.Expr:
        """A view's prefix index, bound to a temporary so later reassignments cannot change it."""
        if isinstance(e, ir.Const):
            return e
        sym = self.new_temp(e.type)
        self.emit(ir.Assign(target=sym, value=e))
        return ir.Var(e.type, sym)

    def static_int(self, node: ast.AST, what: str) -> int:
        e = self.value(node)
        if not isinstance(e, ir.Const) or not isinstance(e.value, int):
            self.fail(node, f"{what} must be an integer constant", KernelTypeError)
        return int(e.value)

    # ------------------------------------------------------------ operators

    def eval_BinOp(self, node: ast.BinOp):
        key = _BINOPS.get(type(node.op))
        if key is None:
            self.fail(node, f"operator {type(node.op).__name__} is not supported", KernelSyntaxError)
        return self.call_builtin(node, key, [self.operand(node.left), self.operand(node.right)])

    def eval_UnaryOp(self, node: ast.UnaryOp):
        operand = self.operand(node.operand)
        if isinstance(node.op, ast.Not):
            return self.call_builtin(node, "logical_not", [self.truth(node.operand, operand)])
        if isinstance(operand, CompValue):
            return self.call_builtin(node, _UNARY[type(node.op)], [operand])
        if isinstance(operand, ir.Const) and isinstance(node.op, ast.USub) and \
                operand.type is not dtypes.bool_:
            return ir.Const(operand.type, -operand.value, weak=operand.weak)
        return self.call_builtin(node, _UNARY[type(node.op)], [operand])

    def truth(self, node: ast.AST, e: ir.Expr) -> ir.Expr:
        """``e`` as a bool: numbers compare against zero, as in Python and Warp."""
        if e.type is dtypes.bool_:
            return e
        return self.call_builtin(node, "ne", [e, ir.Const(dtypes.int32, 0, weak=True)])

    def eval_Compare(self, node: ast.Compare):
        parts = []
        left = self.value(node.left)
        for op, comp in zip(node.ops, node.comparators):
            key = _CMPOPS.get(type(op))
            if key is None:
                self.fail(node, f"comparison {type(op).__name__} is not supported in kernels "
                          "(only < <= > >= == !=)", KernelSyntaxError)
            right = self.value(comp)
            parts.append(self.call_builtin(node, key, [left, right]))
            left = right
        if len(parts) == 1:
            return parts[0]
        return ir.BoolOp(dtypes.bool_, "and", tuple(parts))

    def eval_BoolOp(self, node: ast.BoolOp):
        op = "and" if isinstance(node.op, ast.And) else "or"
        return self.short_circuit(node, op, node.values)

    def eval_IfExp(self, node: ast.IfExp):
        return self.conditional_value(node)

    def eval_Tuple(self, node: ast.Tuple):
        return tuple(self.operand(e) for e in node.elts)

    # ------------------------------------------------------------ calls

    def eval_Call(self, node: ast.Call):
        func = self.evaluate(node.func)
        if isinstance(func, GradMarker):
            return self.lower_grad(node, func.function)
        if isinstance(func, registry.Builtin):
            return self.call_named_builtin(node, func.key)
        if hasattr(func, "_difftape_draw"):  # wp.sample_cdf, wp.poisson (kernel_library.py)
            return self.library_draw(node, func)
        if is_user_function(func):
            if node.keywords:
                self.fail(node, "keyword arguments are not supported in function calls yet",
                          KernelSyntaxError)
            return self.inline_call(node, func, [self.evaluate(a) for a in node.args])
        if composite.is_composite(func):
            return self.construct(node, func)
        if hasattr(func, "_difftape_struct"):
            return self.construct_struct(node, func)
        if func in _CASTS or dtypes.is_scalar_type(func):
            target = _CASTS.get(func) or func
            if len(node.args) != 1 or node.keywords:
                self.fail(node, f"{dtypes.type_name(target)}() takes exactly one argument",
                          KernelTypeError)
            value = self.value(node.args[0])
            if target is dtypes.float16:  # computes as float32, as float16 array elements do
                if isinstance(value, ir.Const) and not isinstance(value.value, bool):
                    with np.errstate(over="ignore"):  # out of half range: inf, as in Warp
                        half = float(np.float16(value.value))
                    value = ir.Const(value.type, half, weak=value.weak)
                target = compute_type(target)
            return self.cast(node, value, target)
        special = getattr(self, "call_" + getattr(func, "__name__", ""), None)
        if special is not None and getattr(func, "_difftape_special", False):
            return special(node)
        if func is builtins.len:
            return self.call_len(node)
        if func is builtins.print:
            return self.call_print(node)
        if isinstance(func, pytypes.BuiltinFunctionType) and func.__name__ in _PYTHON_BUILTINS:
            return self.call_named_builtin(node, _PYTHON_BUILTINS[func.__name__])
        if func is builtins.range:
            self.fail(node, "range() can only be used as the iterable of a for loop",
                      KernelSyntaxError)
        self.fail(node, f"'{ast.unparse(node.func)}' is not a kernel builtin, a @wp.func or a "
                  "type; only those can be called inside kernels. To call your own Python "
                  "function, decorate it with @wp.func", KernelNameError)

    def call_named_builtin(self, node: ast.Call, key: str):
        if key.endswith("_identity") and [k.arg for k in node.keywords] == ["dtype"] and \
                not node.args:
            value = self.call_builtin(node, key, [])
            dtype = dtypes.normalize_dtype(self.evaluate(node.keywords[0].value))
            target = composite.with_scalar(value.type, dtype)
            return CompValue(target, [ir.Const(dtype, c.value) for c in value.comps])
        if node.keywords:
            self.fail(node, f"{key}() does not take keyword arguments in kernels", KernelSyntaxError)
        records = registry.lookup(key)
        if records and records[0].impl == "atomic":
            return self.atomic_call(node, key)
        if records and records[0].impl == "random":
            return self.random_draw(node, key)
        if key == "tid":
            self.fail(node, "wp.tid() must be assigned directly: i = wp.tid() or i, j = wp.tid()",
                      KernelSyntaxError)
        return self.call_builtin(node, key, [self.operand(a) for a in node.args])

    def random_state(self, node: ast.Call, key: str) -> str:
        """The local symbol of a draw's state argument: a uint32 local variable."""
        state = node.args[0] if node.args else None
        binding = self.scope.get(state.id) if isinstance(state, ast.Name) else None
        if not (isinstance(binding, tuple) and binding[0] is dtypes.uint32):
            self.fail(state or node, f"{key}() advances the random state it is given: pass a "
                      "uint32 local variable, e.g. state = wp.rand_init(seed, tid) then "
                      f"wp.{key}(state)", KernelTypeError)
        return binding[1]

    def library_draw(self, node: ast.Call, draw):
        """``wp.poisson(state, lam)``: its kernel-language function inlined on the state's
        value and the other arguments; the state it returns assigned back."""
        if node.keywords:
            self.fail(node, f"{draw.__name__}() does not take keyword arguments",
                      KernelSyntaxError)
        symbol = self.random_state(node, draw.__name__)
        args = [ir.Var(dtypes.uint32, symbol)] + [self.evaluate(a) for a in node.args[1:]]
        value, state = self.inline_call(node, draw._difftape_draw, args)
        self.emit(ir.Assign(target=symbol, value=state))
        return value

    def random_draw(self, node: ast.Call, key: str):
        """``wp.randf(state, ...)``: the other arguments, then ``state = _rand_next(state)`` as
        many times as the draw takes, then its value from the successive states."""
        symbol = self.random_state(node, key)
        current = ir.Var(dtypes.uint32, symbol)
        record, result, args = self.resolve_args(
            node, key, [current] + [self.operand(a) for a in node.args[1:]])
        rest = [self.atomic_expr(a) for a in args[1:]]
        states = []
        for _ in range(record.draws):
            current = self.stage(self.call_builtin(node, "_rand_next", [current]))
            states.append(current)
        self.emit(ir.Assign(target=symbol, value=current))
        tracer = Tracer(self, node)
        out = record.forward(*(tracer.wrap(e) for e in states + rest))
        return self.from_components(node, out, result)

    def call_len(self, node: ast.Call):
        if len(node.args) != 1:
            self.fail(node, "len() takes exactly one argument", KernelTypeError)
        ref = self.evaluate(node.args[0])
        if hasattr(ref, "first_leaf"):
            ref = ref.first_leaf()
        if not isinstance(ref, ir.ArrayRef):
            self.fail(node, "len() is only defined for arrays in kernels", KernelTypeError)
        return ir.Shape(dtypes.int32, ref, len(ref.prefix))

    def cast(self, node: ast.AST, e: ir.Expr, target: type) -> ir.Expr:
        """``e`` as ``target``; an explicit cast of a literal gives a fixed (non-weak) type."""
        if isinstance(e, CompValue):
            self.fail(node, f"a {dtypes.type_name(e.type)} cannot be cast to "
                      f"{dtypes.type_name(target)}", KernelTypeError)
        if e.type is target:
            return ir.Const(target, e.value) if isinstance(e, ir.Const) and e.weak else e
        if isinstance(e, ir.Const):
            value = e.value
            if dtypes.is_float(target):
                value = float(value)
            elif target is dtypes.bool_:
                value = bool(value)
            else:
                value = int(math.trunc(value)) if isinstance(value, float) else int(value)
            return ir.Const(target, value)
        return ir.Cast(target, e)

    def call_builtin(self, node: ast.AST, key: str, args: list[ir.Expr]) -> ir.Expr:
        """Resolve ``key`` for ``args`` (coercing weak literals) and build the Call."""
        record, result, args = self.resolve_args(node, key, args)
        if record.impl == "composite":
            return self.expand_composite(node, record, result, args)
        if all(isinstance(a, ir.Const) for a in args) and record.operator and \
                all(a.weak for a in args):
            folded = self.fold(record, args)
            if folded is not None:
                return folded
        return ir.Call(result, record, tuple(args))

    def resolve_args(self, node: ast.AST, key: str, args: list[ir.Expr]):
        """The record of ``key`` accepting ``args``, its result type and the arguments with weak
        literals converted; a type error listing the accepted signatures if none does."""
        records = registry.lookup(key)
        if not records:
            self.fail(node, f"'{key}' is not a known builtin", KernelNameError)
        for attempt in self.literal_coercions(args):
            found = registry.resolve(key, tuple(a.type for a in attempt))
            if found is not None:
                return found[0], found[1], list(attempt)
        given = ", ".join(dtypes.type_name(a.type) for a in args)
        options = "; ".join(registry.candidates(key))
        strong = [a.type for a in args if not (isinstance(a, ir.Const) and a.weak)]
        name = f"operator {records[0].operator} ({key})" if records[0].operator else f"{key}()"
        hint = ""
        if len(set(strong)) > 1 and all(dtypes.is_float(t) or dtypes.is_int(t) for t in strong):
            widest = max(strong, key=lambda t: (dtypes.is_float(t), t.bits))
            hint = (" Types are never mixed implicitly: cast one side, e.g. "
                    f"wp.{dtypes.type_name(widest)}(...).")
        elif len(set(strong)) > 1 and all(composite.is_composite(t) for t in strong) and len(
                {(t._shape, dtypes.scalar_of(t)) for t in strong}) == 1:
            hint = (" Composites of one shape but different kinds (a spatial_vector and a vec6) "
                    f"are not mixed implicitly: convert one, e.g. "
                    f"wp.{dtypes.type_name(strong[0])}(...).")
        elif strong and all(dtypes.is_int(t) or t is dtypes.bool_ for t in strong):
            hint = " Cast integers to a float type first, e.g. wp.float32(i) or float(i)."
        self.fail(node, f"{name} does not accept ({given}). It accepts: {options}.{hint}",
                  KernelTypeError)

    def fold(self, record, args: list[ir.Const]) -> ir.Const | None:
        """Fold an operator on two weak literals (``2 * 3``) so the result stays weak."""
        try:
            value = record.forward(*(a.value for a in args))
        except (ArithmeticError, ValueError):
            return None
        if isinstance(value, bool):
            return ir.Const(dtypes.bool_, value)
        if isinstance(value, (int, float)):
            return self.constant(None, value)
        return None

    def literal_coercions(self, args: list[ir.Expr]):
        """Candidate argument lists: weak literals converted to each strong type present, then defaults."""
        weak = [isinstance(a, ir.Const) and a.weak for a in args]
        if not any(weak):
            yield args
            return
        targets = []
        for a, w in zip(args, weak):
            t = dtypes.scalar_of(a.type)
            if not w and t is not dtypes.bool_ and t not in targets:
                targets.append(t)
        if any(w and dtypes.is_float(a.type) for a, w in zip(args, weak)):
            targets.append(dtypes.float32)
        targets.append(dtypes.int32)
        yield args
        for t in targets:
            converted = []
            for a, w in zip(args, weak):
                if w:
                    if dtypes.is_float(a.type) and not dtypes.is_float(t):
                        break
                    converted.append(self.cast(None, a, t))
                else:
                    converted.append(a)
            else:
                yield converted

    def coerce_to(self, node: ast.AST, e: ir.Expr, target: type, what: str) -> ir.Expr:
        """``e`` converted to ``target`` if it is a compatible weak literal; else a type error."""
        if e.type is target:
            return e
        if isinstance(e, CompValue) and composite.is_composite(target) and \
                e.type._shape == target._shape and e.type._kind == target._kind:
            self.fail(node, f"{what} has type {dtypes.type_name(target)} but the value has type "
                      f"{dtypes.type_name(e.type)}; convert it, e.g. "
                      f"wp.{dtypes.type_name(target)}(...)", KernelTypeError)
        if isinstance(e, ir.Const) and e.weak and (dtypes.is_float(target) or
                                                    not dtypes.is_float(e.type)):
            return self.cast(node, e, target)
        self.fail(node, f"{what} has type {dtypes.type_name(target)} but the value has type "
                  f"{dtypes.type_name(e.type)}; cast explicitly, e.g. "
                  f"wp.{dtypes.type_name(target)}(...)", KernelTypeError)

    # ------------------------------------------------------------ composites

    def expand_composite(self, node, record, result: type, args: list):
        """Run a composite builtin on traced components: its scalar operations become IR."""
        tracer = Tracer(self, node)
        lists = [self.traced_components(a, tracer) for a in args]
        return self.from_components(node, record.forward(*lists), result)

    def traced_components(self, value, tracer: Tracer):
        if not isinstance(value, CompValue):
            return tracer.wrap(value)
        comps = [tracer.wrap(self.atomic_expr(c)) for c in value.comps]
        if composite.is_matrix(value.type):
            cols = value.type._shape[1]
            return [comps[r * cols:(r + 1) * cols] for r in range(value.type._shape[0])]
        return comps

    def atomic_expr(self, e: ir.Expr) -> ir.Expr:
        """``e`` itself if cheap to repeat (variable, constant, load), else a temporary holding it."""
        if isinstance(e, (ir.Var, ir.Const, ir.Load)):
            return e
        sym = self.new_temp(e.type)
        self.emit(ir.Assign(target=sym, value=e))
        return ir.Var(e.type, sym)

    def from_components(self, node, out, t: type):
        """A composite builtin's result (component list, rows, or scalar) as a typed value.

        Sub-expressions the builtin used more than once (``l`` in ``normalize``) are computed
        once into temporaries, so neither the forward nor the adjoint code repeats them.
        """
        if not composite.is_composite(t):
            return self.share_subexpressions([self.component_expr(node, out, t)])[0]
        flat = [c for row in out for c in row] if composite.is_matrix(t) else list(out)
        scalar = dtypes.scalar_of(t)
        comps = [self.component_expr(node, c, scalar) for c in flat]
        return CompValue(t, self.share_subexpressions(comps))

    def share_subexpressions(self, roots: list[ir.Expr]) -> list[ir.Expr]:
        uses: dict[int, int] = {}

        def count(e: ir.Expr) -> None:
            uses[id(e)] = uses.get(id(e), 0) + 1
            if uses[id(e)] == 1:
                for child in _children(e):
                    count(child)

        for root in roots:
            count(root)
        memo: dict[int, ir.Expr] = {}

        def rebuild(e: ir.Expr) -> ir.Expr:
            if id(e) in memo:
                return memo[id(e)]
            new = _with_children(e, [rebuild(c) for c in _children(e)])
            # An array element read more than once too (``transform_point`` reads the
            # rotation's w five times): each read costs Numba typing and lowering time, and in
            # the adjoint one more add into the array's gradient.
            if uses[id(e)] > 1 and isinstance(e, (ir.Call, ir.Cast, ir.BoolOp, ir.Load)):
                sym = self.new_temp(e.type)
                self.emit(ir.Assign(target=sym, value=new))
                new = ir.Var(e.type, sym)
            memo[id(e)] = new
            return new

        return [rebuild(r) for r in roots]

    def component_expr(self, node, c, t: type) -> ir.Expr:
        if isinstance(c, Traced):
            c = c.expr
        elif isinstance(c, (bool, int, float)):
            c = ir.Const(t, c)
        if isinstance(c, ir.Const) and c.weak:
            return self.cast(node, c, t)
        return c

    def construct(self, node: ast.Call, t: type) -> CompValue:
        """``wp.vec3(x, y, z)``, ``wp.vec3(s)``, ``wp.vec3()``, ``wp.vec3d(v)``, ``wp.mat22(a, b, c, d)``,
        ``wp.mat33(c0, c1, c2)`` (columns, as Warp), ``wp.transform(p, q)``."""
        if node.keywords:
            self.fail(node, f"{dtypes.type_name(t)}() takes positional arguments only in kernels",
                      KernelSyntaxError)
        scalar = dtypes.scalar_of(t)
        args = [self.operand(a) for a in node.args]
        comps: list = []
        if not args:
            comps = [ir.Const(scalar, 0)] * t._length
        elif len(args) == 1 and isinstance(args[0], CompValue):
            if args[0].type._length != t._length:
                self.fail(node, f"cannot build a {dtypes.type_name(t)} from a "
                          f"{dtypes.type_name(args[0].type)}", KernelTypeError)
            comps = [self.cast(node, c, scalar) for c in args[0].comps]
        elif len(args) == 1:
            comps = [self.coerce_scalar(node, args[0], scalar)] * t._length
        elif all(isinstance(a, CompValue) for a in args):
            parts = [a.comps for a in args]
            if composite.is_matrix(t):  # columns
                parts = [[col[r] for col in parts] for r in range(t._shape[0])]
            comps = [c for part in parts for c in part]
        else:
            comps = [self.coerce_scalar(n, a, scalar) for n, a in zip(node.args, args)]
        if len(comps) != t._length:
            self.fail(node, f"{dtypes.type_name(t)}() needs {t._length} components (or one "
                      f"scalar to broadcast), got {len(comps)}", KernelTypeError)
        for c in comps:
            if c.type is not scalar:
                self.fail(node, f"{dtypes.type_name(t)}() components must be "
                          f"{dtypes.type_name(scalar)}, got {dtypes.type_name(c.type)}",
                          KernelTypeError)
        return CompValue(t, comps)

    def coerce_scalar(self, node, e, scalar: type) -> ir.Expr:
        if isinstance(e, CompValue):
            self.fail(node, f"expected a {dtypes.type_name(scalar)} scalar, got a "
                      f"{dtypes.type_name(e.type)}", KernelTypeError)
        return self.coerce_to(node, e, scalar, "the component")

    def component(self, node: ast.AST, value: CompValue, indices: list[ir.Expr]):
        t = value.type
        name = dtypes.type_name(t)
        if composite.is_matrix(t):
            rows = value.rows()
            if len(indices) == 2:
                return self.select(node, [self.select(node, row, indices[1], f"columns of a {name}")
                                          for row in rows], indices[0], f"rows of a {name}")
            if len(indices) == 1:
                return CompValue(composite.row_type(t), [
                    self.select(node, [row[c] for row in rows], indices[0], f"rows of a {name}")
                    for c in range(t._shape[1])])
        elif len(indices) == 1:
            return self.select(node, value.comps, indices[0], f"components of a {name}")
        self.fail(node, f"a {name} takes {len(t._shape)} index(es), "
                  f"{len(indices)} given", KernelTypeError)

    def select(self, node: ast.AST, options: list, index: ir.Expr, what: str):
        """``options[index]``: direct for constant indices, a ``where`` chain otherwise."""
        if isinstance(index, ir.Const):
            return options[self.constant_component(node, index, len(options))]
        index = self.runtime_component(node, index, len(options), what)
        result = options[-1]
        for k in range(len(options) - 2, -1, -1):
            test = self.call_builtin(node, "eq", [index, ir.Const(dtypes.int32, k, weak=True)])
            result = self.call_builtin(node, "where", [test, options[k], result])
        return result

    def constant_component(self, node: ast.AST, index: ir.Const, size: int) -> int:
        """A constant component index, negative ones counting from the end (as in Warp)."""
        k = int(index.value)
        if not -size <= k < size:
            self.fail(node, f"component index {k} is out of range for {size} components",
                      KernelTypeError)
        return k % size

    def runtime_component(self, node: ast.AST, index: ir.Expr, size: int,
                          what: str) -> ir.Expr:
        """A component index known at run time, as the position it picks: ``index`` or, when
        negative, ``index + size`` (Warp's rule), checked in debug mode to lie in
        [-size, size)."""
        checked = ir.CheckedIndex(index.type, index, size=size, what=f"the {size} {what}",
                                  line=self.parsed.file_line(node),
                                  text=self.parsed.line_text(node), file=self.parsed.filename)
        negative = self.call_builtin(node, "lt", [checked, ir.Const(index.type, 0, weak=True)])
        wrapped = self.call_builtin(node, "add", [checked, ir.Const(index.type, size, weak=True)])
        return self.call_builtin(node, "where", [negative, wrapped, checked])

    def component_attribute(self, node: ast.Attribute, value: CompValue):
        position = component_position(value.type, node.attr)
        if position is None:
            self.fail(node, f"{dtypes.type_name(value.type)} has no component '{node.attr}'",
                      KernelTypeError)
        if isinstance(position, slice):
            part = (composite.quaternion_type(dtypes.scalar_of(value.type)) if node.attr == "q"
                    else composite.vector_type(3, dtypes.scalar_of(value.type)))
            return CompValue(part, value.comps[position])
        return value.comps[position]


    def construct_struct(self, node: ast.Call, stype: type):
        """``MyStruct()`` in a kernel: a zero-initialised struct local (keyword fields allowed)."""
        from .struct_values import new_struct_local

        names = [name for name, _, _ in stype._difftape_struct.fields]
        if len(node.args) > len(names):
            self.fail(node, f"{stype.__qualname__}() takes at most {len(names)} field values",
                      KernelTypeError)
        local = new_struct_local(self, stype, f"s{self.ctx.next('struct')}")
        given = list(zip(names, node.args)) + [(k.arg, k.value) for k in node.keywords]
        for field, value_node in given:
            attr = ast.Attribute(value=ast.Name(id="_"), attr=field)
            ast.copy_location(attr, value_node)
            value = self.evaluate(value_node)
            if not hasattr(value, "new_like") and not isinstance(value, ir.ArrayRef):
                value = self.operand(value_node)
            local.assign_field(self, attr, value)
        return local


class GradMarker:
    """``wp.grad(f)``: waits for its call, ``wp.grad(f)(args)``."""

    def __init__(self, function):
        self.function = function


def component_position(t: type, name: str):
    """Index (or slice) of a named component: x/y/z/w of vectors and quaternions, p/q of transforms."""
    named = {"x": 0, "y": 1, "z": 2, "w": 3}
    if t._kind in ("vector", "quaternion") and name in named and named[name] < t._length:
        return named[name]
    if t._kind == "transform" and name in ("p", "q"):
        return slice(0, 3) if name == "p" else slice(3, 7)
    return None


def slot_positions(t: type) -> list[tuple[int, ...]]:
    """Storage index tuples of a composite's components, row-major."""
    if len(t._shape) == 1:
        return [(k,) for k in range(t._shape[0])]
    return [(r, c) for r in range(t._shape[0]) for c in range(t._shape[1])]


def _size(e) -> int:
    return sum(1 for _ in ir.walk_expr(e)) if isinstance(e, ir.Expr) else 1


def _children(e: ir.Expr) -> list[ir.Expr]:
    if isinstance(e, ir.Call):
        return list(e.args)
    if isinstance(e, ir.Cast):
        return [e.value]
    if isinstance(e, ir.BoolOp):
        return list(e.values)
    return []


def _with_children(e: ir.Expr, children: list[ir.Expr]) -> ir.Expr:
    if isinstance(e, ir.Call):
        return ir.Call(e.type, e.builtin, tuple(children))
    if isinstance(e, ir.Cast):
        return ir.Cast(e.type, children[0])
    if isinstance(e, ir.BoolOp):
        return ir.BoolOp(e.type, e.op, tuple(children))
    return e
