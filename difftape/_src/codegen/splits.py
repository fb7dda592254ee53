"""Index-set splitting of the innermost thread loop, for clamped neighbour indices.

``u[i, max(j - 1, 0)]`` and ``u[i, min(j + 1, m - 1)]`` are not affine in the thread index, so
LLVM reads them with gathers and cannot tell that iteration ``j``'s adds and iteration ``j + 1``'s
land next to each other. Away from the edges the clamps do nothing. When the innermost launch
dimension's thread index ``j`` appears in such clamps, the generated function runs that
dimension's interior range, where every clamp is known to pass its first operand through, with
a copy of the body in which the clamps are replaced by that operand; the few edge threads run the
original body. Each thread computes exactly what it computed before (only the order in which
threads run changes, which kernels cannot observe).

A clamp qualifies when one operand is ``j + c`` (through single-assigned locals) and the other
is a constant (``max``, or ``clamp``'s lower bound) or ``a.shape[k] + c`` / a constant (``min``,
or ``clamp``'s upper bound).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .. import dtypes
from ..frontend import ir
from .offsets import Guard as Bound
from .offsets import constant, definitions, invariant, thread_offset


@dataclass
class Split:
    """The innermost loop's interior: ``lower <= j <= upper`` for every lower and upper bound
    (``j`` the thread index ``var``), and the body to run there."""

    var: str  # the generated thread index of the innermost dimension (tid1, tidflat…)
    lower: list[int]
    upper: list[Bound]
    body: list[ir.Stmt]
    in_loop: set[int]  # id() of the new body's statements that are inside kernel loops


def interior_split(body: list[ir.Stmt], kernel: ir.KernelIR, rank: int,
                   single_assigned: set[str], in_loop: set[int]) -> Split | None:
    """The split of ``body`` for launches of ``rank`` dimensions, or None (no clamp found)."""
    var = innermost_thread_index(kernel, rank)
    if var is None:
        return None
    defs = definitions(body, single_assigned)
    finder = _ClampFinder(var, defs)
    for s in ir.walk_stmts(body):
        for root in ir.statement_exprs(s):
            for e in ir.walk_expr(root):
                finder.visit(e)
    if not finder.replace:
        return None
    copier = _Copier(finder.replace, in_loop)
    new_body = copier.copy(body)
    return Split(var, finder.lower, finder.upper, new_body, copier.in_loop)


def innermost_thread_index(kernel: ir.KernelIR, rank: int) -> str | None:
    """The generated local holding the innermost launch dimension's thread index, or None when
    the kernel has none (no ``wp.tid()``, or a flat one in a multi-dimensional launch)."""
    if rank == 1:
        return "tidflat" if kernel.tid_flat else "tid0" if kernel.tid_vars else None
    return f"tid{rank - 1}" if len(kernel.tid_vars) == rank else None


class _ClampFinder:
    def __init__(self, var: str, defs: dict[str, ir.Expr]):
        self.var, self.defs = var, defs
        self.replace: dict[int, ir.Expr] = {}  # id(call) → its pass-through operand
        self.lower: list[int] = []
        self.upper: list[Bound] = []

    def visit(self, e: ir.Expr) -> None:
        if not isinstance(e, ir.Call) or id(e) in self.replace or not dtypes.is_int(e.type):
            return
        key, args = e.builtin.key, e.args
        if key == "max" or key == "min":
            for x, other in ((args[0], args[1]), (args[1], args[0])):
                c = self.offset(x)
                if c is None:
                    continue
                if key == "max":
                    k = constant(other)
                    if k is not None:  # max(j + c, k) = j + c when j >= k - c
                        self.lower.append(k - c)
                        self.replace[id(e)] = x
                        return
                else:
                    m = self.invariant(other)
                    if m is not None:  # min(j + c, m) = j + c when j <= m - c
                        self.upper.append((m[0], m[1], m[2] - c))
                        self.replace[id(e)] = x
                        return
        elif key == "clamp":  # min(max(lo, x), hi)
            x, lo, hi = args
            c, k, m = self.offset(x), constant(lo), self.invariant(hi)
            if c is not None and k is not None and m is not None:
                self.lower.append(k - c)
                self.upper.append((m[0], m[1], m[2] - c))
                self.replace[id(e)] = x

    def offset(self, e: ir.Expr) -> int | None:
        return thread_offset(e, self.defs, self.var)

    def invariant(self, e: ir.Expr) -> Bound | None:
        return invariant(e, self.defs)


class _Copier:
    """A deep copy of a body with some expressions replaced; new statements keep the in-loop
    marks of the ones they copy."""

    def __init__(self, replace: dict[int, ir.Expr], in_loop: set[int]):
        self.replace = replace
        self.old_in_loop = in_loop
        self.in_loop: set[int] = set()

    def copy(self, value):
        if isinstance(value, list):
            return [self.copy(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self.copy(v) for v in value)
        if isinstance(value, ir.Expr) and id(value) in self.replace:
            return self.copy(self.replace[id(value)])
        if dataclasses.is_dataclass(value) and isinstance(value, (ir.Expr, ir.Stmt)):
            fields = {f.name: self.copy(getattr(value, f.name))
                      for f in dataclasses.fields(value) if f.init}
            new = dataclasses.replace(value, **fields)
            if isinstance(value, ir.Stmt) and id(value) in self.old_in_loop:
                self.in_loop.add(id(new))
            return new
        return value
