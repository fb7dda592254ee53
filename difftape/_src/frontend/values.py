"""Frontend-only values made of scalars: composites (vec3, mat33…) and traced scalars.

The IR holds scalars only. A composite value in a kernel is a ``CompValue`` (its type and one
scalar expression per component, row-major); a composite local is a ``CompLocal`` (one scalar
local per component). Composite builtins run on ``Traced`` scalars, which turn arithmetic and
builtin calls into IR through the type checker. Nothing here reaches codegen.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes
from ..errors import InternalError
from . import ir


@dataclass(eq=False)
class CompValue:
    type: type
    comps: list  # ir.Expr per component, row-major for matrices

    def rows(self) -> list[list]:
        cols = self.type._shape[1]
        return [self.comps[r * cols:(r + 1) * cols] for r in range(self.type._shape[0])]


@dataclass(eq=False)
class CompLocal:
    type: type
    syms: list[str]

    def value(self) -> CompValue:
        scalar = dtypes.scalar_of(self.type)
        return CompValue(self.type, [ir.Var(scalar, s) for s in self.syms])


class Tracer:
    """Routes operations on traced scalars to the type checker (``call(key, args)``)."""

    def __init__(self, typer, node):
        self.typer = typer
        self.node = node

    def wrap(self, e: ir.Expr) -> Traced:
        return Traced(self, e)

    def expr(self, value) -> ir.Expr:
        if isinstance(value, Traced):
            return value.expr
        if isinstance(value, (bool, int, float)):
            return self.typer.constant(self.node, value)
        raise InternalError(f"composite builtin produced a {type(value).__name__} component")

    def call(self, key: str, args) -> Traced:
        exprs = [self.expr(a) for a in args]
        return self.wrap(self.typer.call_builtin(self.node, key, exprs))


def _binary(key: str, reverse: bool = False):
    def method(self, other):
        args = (other, self) if reverse else (self, other)
        return self._difftape_tracer.call(key, args)
    return method


class Traced:
    """A scalar inside a composite builtin being expanded: operators build IR calls."""

    __slots__ = ("_difftape_tracer", "expr")

    def __init__(self, tracer: Tracer, expr: ir.Expr):
        self._difftape_tracer = tracer
        self.expr = expr

    __add__, __radd__ = _binary("add"), _binary("add", True)
    __sub__, __rsub__ = _binary("sub"), _binary("sub", True)
    __mul__, __rmul__ = _binary("mul"), _binary("mul", True)
    __truediv__, __rtruediv__ = _binary("div"), _binary("div", True)
    __lt__, __le__ = _binary("lt"), _binary("le")
    __gt__, __ge__ = _binary("gt"), _binary("ge")

    def __neg__(self):
        return self._difftape_tracer.call("neg", (self,))

    def __bool__(self):
        raise InternalError("a composite builtin branched on a traced value; composite "
                            "builtins must be branch-free (use where)")
