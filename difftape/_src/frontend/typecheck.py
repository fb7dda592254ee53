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

from .. import dtypes
from ..errors import KernelNameError, KernelSyntaxError, KernelTypeError
from ..ops import registry
from . import ir
from .resolve import MISSING

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
        """A scalar-valued expression (not an array, module or tuple)."""
        result = self.evaluate(node)
        if isinstance(result, ir.Expr):
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
        if isinstance(base, ir.ArrayRef):
            if node.attr == "shape":
                return ("shape", base)
            self.fail(node, f"arrays have no attribute '{node.attr}' inside kernels "
                      "(use x.shape[k] or len(x))", KernelTypeError)
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
        if isinstance(base, tuple) and base and base[0] == "shape":
            axis = self.static_int(node.slice, "a shape index")
            ref = base[1]
            if not 0 <= axis < ref.view_ndim:
                self.fail(node, f"shape index {axis} is out of range for an array with "
                          f"{ref.view_ndim} dimension(s)", KernelTypeError)
            return ir.Shape(dtypes.int32, ref, len(ref.prefix) + axis)
        if isinstance(base, ir.ArrayRef):
            return self.index_array(node, base, self.index_list(node.slice))
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
        return self.call_builtin(node, key, [self.value(node.left), self.value(node.right)])

    def eval_UnaryOp(self, node: ast.UnaryOp):
        operand = self.value(node.operand)
        if isinstance(node.op, ast.Not):
            return self.call_builtin(node, "logical_not", [self.truth(node.operand, operand)])
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
        return tuple(self.value(e) for e in node.elts)

    # ------------------------------------------------------------ calls

    def eval_Call(self, node: ast.Call):
        func = self.evaluate(node.func)
        if isinstance(func, registry.Builtin):
            return self.call_named_builtin(node, func.key)
        if is_user_function(func):
            if node.keywords:
                self.fail(node, "keyword arguments are not supported in function calls yet",
                          KernelSyntaxError)
            return self.inline_call(node, func, [self.evaluate(a) for a in node.args])
        if func in _CASTS or dtypes.is_scalar_type(func):
            target = _CASTS.get(func) or func
            if len(node.args) != 1 or node.keywords:
                self.fail(node, f"{dtypes.type_name(target)}() takes exactly one argument",
                          KernelTypeError)
            return self.cast(node, self.value(node.args[0]), target)
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
        if node.keywords:
            self.fail(node, f"{key}() does not take keyword arguments in kernels", KernelSyntaxError)
        records = registry.lookup(key)
        if records and records[0].impl == "atomic":
            return self.atomic_call(node, key)
        if key == "tid":
            self.fail(node, "wp.tid() must be assigned directly: i = wp.tid() or i, j = wp.tid()",
                      KernelSyntaxError)
        return self.call_builtin(node, key, [self.value(a) for a in node.args])

    def call_len(self, node: ast.Call):
        if len(node.args) != 1:
            self.fail(node, "len() takes exactly one argument", KernelTypeError)
        ref = self.evaluate(node.args[0])
        if not isinstance(ref, ir.ArrayRef):
            self.fail(node, "len() is only defined for arrays in kernels", KernelTypeError)
        return ir.Shape(dtypes.int32, ref, len(ref.prefix))

    def cast(self, node: ast.AST, e: ir.Expr, target: type) -> ir.Expr:
        """``e`` as ``target``; an explicit cast of a literal gives a fixed (non-weak) type."""
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
        records = registry.lookup(key)
        if not records:
            self.fail(node, f"'{key}' is not a known builtin", KernelNameError)
        for attempt in self.literal_coercions(args):
            found = registry.resolve(key, tuple(a.type for a in attempt))
            if found is not None:
                record, result = found
                if all(isinstance(a, ir.Const) for a in attempt) and record.operator and \
                        all(a.weak for a in attempt):
                    folded = self.fold(record, attempt)
                    if folded is not None:
                        return folded
                return ir.Call(result, record, tuple(attempt))
        given = ", ".join(dtypes.type_name(a.type) for a in args)
        options = "; ".join(registry.candidates(key))
        strong = [a.type for a in args if not (isinstance(a, ir.Const) and a.weak)]
        name = f"operator {records[0].operator} ({key})" if records[0].operator else f"{key}()"
        hint = ""
        if len(set(strong)) > 1:
            widest = max(strong, key=lambda t: (dtypes.is_float(t), t.bits))
            hint = (" Types are never mixed implicitly: cast one side, e.g. "
                    f"wp.{dtypes.type_name(widest)}(...).")
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
            if not w and a.type is not dtypes.bool_ and a.type not in targets:
                targets.append(a.type)
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
        if isinstance(e, ir.Const) and e.weak and (dtypes.is_float(target) or
                                                    not dtypes.is_float(e.type)):
            return self.cast(node, e, target)
        self.fail(node, f"{what} has type {dtypes.type_name(target)} but the value has type "
                  f"{dtypes.type_name(e.type)}; cast explicitly, e.g. "
                  f"wp.{dtypes.type_name(target)}(...)", KernelTypeError)
