"""Calls of ``@wp.func`` functions inside kernels: overloads, inlining, custom gradients.

A call is inlined as a ``Region`` of the caller's IR, or becomes a ``CustomCall`` when the chosen
overload has ``@wp.func_grad``/``@wp.func_replay``; ``wp.grad(f)(x)`` becomes a ``GradOf``.
This mixin of the statement lowerer owns those translations and nothing else.
"""

from __future__ import annotations

import ast
import inspect
import typing
from dataclasses import dataclass

from .. import dtypes
from ..codegen import naming
from ..errors import KernelSyntaxError, KernelTypeError
from ..ops import registry
from . import ir
from .fence import check_syntax
from .resolve import GlobalScope
from .struct_values import StructArrayRef, StructLocal
from .typecheck import compute_type, is_array_spec, is_user_function
from .values import CompLocal, CompValue


@dataclass
class RegionInfo:
    region: int
    function: str = ""
    results: list[tuple[type, str]] | None = None
    callers: tuple = ()  # SourceLocations of the calls that inlined this function, innermost first


class CallLowering:
    """Mixin of ``Lowerer``: translating calls of user functions."""

    def call_grad(self, node: ast.Call):
        from .typecheck import GradMarker

        if len(node.args) != 1 or node.keywords:
            self.fail(node, "wp.grad() takes one function: wp.grad(f)(x)", KernelTypeError)
        function = self.evaluate(node.args[0])
        if not (is_user_function(function) or isinstance(function, registry.Builtin)):
            self.fail(node, "wp.grad() takes a @wp.func or a builtin", KernelTypeError)
        return GradMarker(function)

    def lower_grad(self, node: ast.Call, function):
        """``wp.grad(f)(x, y)``: the partial derivatives of scalar ``f`` at (x, y), computed in
        place by differentiating ``f``'s inlined body (constant for the outer reverse sweep)."""
        args = []
        for arg_node in node.args:
            value = self.value(arg_node)
            if isinstance(value, ir.Const) and value.weak:
                value = self.cast(arg_node, value, dtypes.float32)
            if not dtypes.is_float(value.type):
                self.fail(arg_node, "wp.grad() differentiates with respect to float arguments",
                          KernelTypeError)
            sym = self.new_temp(value.type)
            self.emit(ir.Assign(target=sym, value=value))
            args.append(ir.Var(value.type, sym))
        if isinstance(function, registry.Builtin):
            result, body = self.capture(lambda: self.call_builtin(node, function.key, args))
        else:
            result, body = self.capture(lambda: self.inline_call(node, function, args))
        if not isinstance(result, ir.Expr) or not dtypes.is_float(result.type):
            self.fail(node, "wp.grad() needs a function with one float result", KernelTypeError)
        if not isinstance(result, ir.Var):
            sym = self.new_temp(result.type)
            body.append(ir.Assign(target=sym, value=result))
            result = ir.Var(result.type, sym)
        grads = [self.new_temp(a.type) for a in args]
        self.emit(ir.GradOf(inputs=[a.name for a in args], result=result.name, grads=grads,
                            body=body))
        values = tuple(ir.Var(a.type, g) for a, g in zip(args, grads))
        return values[0] if len(values) == 1 else values

    def inline_call(self, node: ast.Call, func, args: list) -> object:
        if func.key in self.ctx.call_stack:
            self.fail(node, f"recursive call of function '{func.key}' is not supported",
                      KernelSyntaxError)
        overload = self.choose_overload(node, func, args)
        if overload.grad is not None or overload.replay is not None:
            return self.inline_custom(node, func, overload, args)
        child, params = self.enter_function(node, func, overload, args)
        region, parsed = child.region, child.parsed
        self.ctx.call_stack.append(func.key)
        child.current = parsed.tree
        child.block = list(child.block)
        body = child.lower_block(parsed.tree.body)
        self.ctx.call_stack.pop()
        self.emit(ir.Region(region=region.region, body=child.block + body))
        return _result_values(region)

    def enter_function(self, node: ast.Call, func, overload, args: list):
        """A lowerer for ``overload``'s body with its parameters bound to ``args`` (the binding
        statements are in its block); returns it and the parameter names."""
        parsed = overload.parsed()
        check_syntax(parsed, self.ctx.kernel)
        globals_ = GlobalScope(overload.func)
        annotations = globals_.annotations()
        params = [a.arg for a in parsed.tree.args.args]
        if len(args) != len(params):
            self.fail(node, f"function '{func.key}' takes {len(params)} argument(s), "
                      f"{len(args)} given", KernelTypeError)
        region = RegionInfo(self.ctx.next("region"), function=func.key,
                            callers=(self.parsed.locate(node), *self.region.callers))
        child = type(self)(self.ctx, parsed, globals_, {}, region,
                        suffix=f"_{func.key}{region.region}")
        for name, arg, arg_node in zip(params, args, node.args):
            self.bind_parameter(child, func, name, annotations.get(name), arg, arg_node)
        return child, params

    def choose_overload(self, node: ast.Call, func, args: list):
        """The overload of ``func`` whose annotations fit ``args`` (exact types first)."""
        if len(func.overloads) == 1:
            return func.overloads[0]
        fits = []
        for ov in func.overloads:
            pairs = ov.annotations
            if len(pairs) != len(args):
                continue
            score = [_fit(ann, arg) for (_, ann), arg in zip(pairs, args)]
            if all(score):
                fits.append((sum(score), ov))
        if not fits:
            given = ", ".join(dtypes.type_name(getattr(a, "type", getattr(a, "dtype", type(a))))
                              for a in args)
            self.fail(node, f"no overload of function '{func.key}' accepts ({given})",
                      KernelTypeError)
        return max(fits, key=lambda f: f[0])[1]

    def inline_custom(self, node: ast.Call, func, overload, args: list):
        """A call of a function with a custom gradient and/or replay: a ``CustomCall`` unit."""
        forward, params = self.enter_function(node, func, overload, args)
        region, parsed, callers = forward.region, forward.parsed, forward.region.callers
        self.block.extend(forward.block)  # the arguments: ordinary, differentiated statements
        forward.block = []
        inputs = [sym for name in params for sym in _symbols(forward.scope.get(name))]
        param_scope = dict(forward.scope)
        self.ctx.call_stack.append(func.key)
        forward.current = parsed.tree
        body = [ir.Region(region=region.region, body=forward.lower_block(parsed.tree.body))]
        replay_body = None
        if overload.replay is not None:
            replay_body = self.lower_companion(overload.replay, param_scope, func.key, callers,
                                               results=region)
        grad_body = []
        if overload.grad is not None:
            grad_scope = self.grad_scope(node, overload.grad, params, param_scope, region)
            grad_body = self.lower_companion(overload.grad, grad_scope, func.key, callers,
                                             adjoint=True)
        self.ctx.call_stack.pop()
        results = [sym for slot in region.results or [] for sym in _symbols(slot)]
        self.emit(ir.CustomCall(inputs=inputs, results=results, forward_body=body,
                                replay_body=replay_body, grad_body=grad_body))
        return _result_values(region)

    def lower_companion(self, fn, scope: dict, key: str, callers: tuple, results=None,
                        adjoint: bool = False) -> list[ir.Stmt]:
        """Lower a ``func_replay``/``func_grad`` body against the call's parameter bindings."""
        from .source import parse_function

        parsed = parse_function(fn)
        check_syntax(parsed, self.ctx.kernel)
        region = RegionInfo(self.ctx.next("region"), function=key, callers=callers,
                            results=results.results if results is not None else None)
        child = type(self)(self.ctx, parsed, GlobalScope(fn), dict(scope), region,
                        suffix=f"_{fn.__name__}{region.region}")
        child.adjoint_allowed = adjoint
        child.current = parsed.tree
        body = child.lower_block(parsed.tree.body)
        if results is not None and results.results is None:
            results.results = region.results
        return [ir.Region(region=region.region, body=body)]

    def grad_scope(self, node, grad_fn, params: list[str], param_scope: dict, region) -> dict:
        """Names a custom gradient sees: the forward parameters, then one adjoint per result."""
        names = list(inspect.signature(grad_fn).parameters)
        results = region.results or []
        if len(names) != len(params) + len(results):
            self.fail(node, f"gradient function {grad_fn.__qualname__} takes {len(names)} "
                      f"arguments; it needs the {len(params)} forward arguments and one adjoint "
                      f"per return value ({len(results)})", KernelTypeError)
        scope = {new: param_scope[old] for new, old in zip(names, params)}
        for name, slot in zip(names[len(params):], results):
            scope[name] = self.adjoint_binding(node, slot)
        return scope

    def adjoint_binding(self, node, binding):
        """The adjoint counterpart of a binding: ``adj_`` locals, or the adjoint buffer of an array."""
        if isinstance(binding, tuple):
            sym = naming.adjoint_name(binding[1])
            self.ctx.locals[sym] = binding[0]
            return (binding[0], sym)
        if isinstance(binding, CompLocal):
            syms = [naming.adjoint_name(s) for s in binding.syms]
            for s in syms:
                self.ctx.locals[s] = compute_type(dtypes.scalar_of(binding.type))
            return CompLocal(binding.type, syms)
        if isinstance(binding, ir.ArrayRef):
            return ir.ArrayRef(naming.adjoint_array(binding.param), binding.dtype, binding.ndim,
                               binding.prefix, adjoint=True)
        if isinstance(binding, StructLocal):
            return StructLocal(binding.type, {k: self.adjoint_binding(node, v) if v is not None
                                              else None for k, v in binding.fields.items()})
        self.fail(node, "wp.adjoint[] takes a parameter of the forward function",
                  KernelTypeError)

    def adjoint_target(self, node: ast.AST):
        """``wp.adjoint[x]`` / ``wp.adjoint[x.field]``: the adjoint binding of that parameter."""
        if not getattr(self, "adjoint_allowed", False):
            self.fail(node, "wp.adjoint[...] can only be used inside @wp.func_grad functions",
                      KernelSyntaxError)
        path = []
        while isinstance(node, ast.Attribute):
            path.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.scope:
            self.fail(node, "wp.adjoint[] takes a parameter of the forward function",
                      KernelTypeError)
        binding = self.scope[node.id]
        for name in reversed(path):
            binding = binding.fields[name] if isinstance(binding, StructLocal) else None
        return self.adjoint_binding(node, binding)

    def bind_parameter(self, child, func, name: str, ann, arg, arg_node: ast.AST) -> None:
        if ann is None:
            self.fail(arg_node, f"parameter '{name}' of function '{func.key}' has no type "
                      "annotation", KernelTypeError)
        if is_array_spec(ann) and getattr(ann, "generic_dtype", False) and \
                isinstance(arg, ir.ArrayRef) and arg.view_ndim == ann.ndim:
            child.scope[name] = arg
            return
        if (ann is typing.Any or is_array_spec(ann)) and isinstance(arg, StructArrayRef):
            child.scope[name] = arg
            return
        if ann is typing.Any and isinstance(arg, ir.ArrayRef):
            child.scope[name] = arg
            return
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
        value = self.as_value(arg_node, arg) if not hasattr(arg, "new_like") else arg
        declared = value.type if ann is typing.Any else dtypes.normalize_dtype(ann)
        if declared is None:
            self.fail(arg_node, f"parameter '{name}' of function '{func.key}' has an unsupported "
                      f"annotation {ann!r}", KernelTypeError)
        if hasattr(value, "new_like"):  # struct argument: copy into the function's own local
            local = value.new_like(child, name)
            child.scope[name] = local
            saved, child.block = child.block, []
            local.assign(child, arg_node, value)
            child.block = saved + child.block
            return
        if isinstance(value, CompValue):
            if value.type is not declared:
                self.fail(arg_node, f"argument '{name}' of function '{func.key}' expects "
                          f"{dtypes.type_name(declared)}, got {dtypes.type_name(value.type)}",
                          KernelTypeError)
            local = child.declare(name, declared)
            for sym, c in zip(local.syms, value.comps):
                child.block.append(ir.Assign(target=sym, value=c, line=self.parsed.file_line(
                    arg_node), text=self.parsed.line_text(arg_node), file=self.parsed.filename))
            return
        value = self.coerce_to(arg_node, value, declared,
                               f"parameter '{name}' of function '{func.key}'")
        sym = child.declare(name, declared)
        child.block.append(ir.Assign(target=sym, value=value, line=self.parsed.file_line(arg_node),
                                     text=self.parsed.line_text(arg_node)))


def _result_values(region: RegionInfo):
    """What a function call evaluates to: None, one value, or a tuple of values."""
    if not region.results:
        return None
    values = tuple(ir.Var(slot[0], slot[1]) if isinstance(slot, tuple) else slot.value()
                   for slot in region.results)
    return values[0] if len(values) == 1 else values


def _symbols(binding) -> list[str]:
    """The scalar locals behind a binding (parameters and results of custom-gradient calls)."""
    if isinstance(binding, tuple):
        return [binding[1]]
    if isinstance(binding, CompLocal):
        return list(binding.syms)
    if isinstance(binding, StructLocal):
        return [s for v in binding.fields.values() for s in _symbols(v)]
    return []


def _fit(ann, arg) -> int:
    """How well ``arg`` fits annotation ``ann``: 0 no, 1 generic or converted literal, 2 exact."""
    if ann is typing.Any:
        return 1
    if is_array_spec(ann):
        if not isinstance(arg, ir.ArrayRef) or arg.view_ndim != ann.ndim:
            return 0
        if getattr(ann, "generic_dtype", False):
            return 1
        return 2 if arg.dtype is dtypes.normalize_dtype(ann.dtype) else 0
    t = dtypes.normalize_dtype(ann)
    arg_type = getattr(arg, "type", None)
    if arg_type is t:
        return 2
    if isinstance(arg, ir.Const) and arg.weak and t is not None and dtypes.is_scalar_type(t) \
            and (dtypes.is_float(t) or not dtypes.is_float(arg.type)):
        return 1
    return 0
