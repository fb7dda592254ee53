"""Index-set splitting of the innermost thread loop, for clamped neighbour indices and for
conditions on the thread index.

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
or ``clamp``'s upper bound). So does a wrap, ``(j + c) % m`` with such an ``m`` (periodic
neighbours, ``x[(i + 1) % n]``): it is ``j + c`` wherever ``0 <= j + c < m``.

Guards are split the same way: ``if i < n - 1:`` (a rope's segments), ``if i + k < x.shape[0]:``,
``if i > 0 and i < n - 1:`` (a stencil's interior), ``if tid >= n: return``. A comparison of
``j + c`` with a constant has one value for every ``j`` from some constant on, and a comparison
with ``a.shape[k] + c`` or a scalar int parameter ``n + c`` (one the body never assigns) has one
value for every ``j`` up to that bound; the interior copy has the comparison's value there, and
branches whose condition that decides are replaced by the branch taken (``return``'s flags
included). Under a branch LLVM vectorizes loads of rows only with masked interleaved groups,
which AVX2 lacks: on an AMD Zen 3 core the loops stayed scalar.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .. import dtypes
from ..frontend import ir
from ..frontend.unroll import folded_bool
from .offsets import constant, definitions, invariant, thread_offset
from .signs import assigned

# An upper bound of the interior: ``(param, axis, offset)``, ``param.shape[axis] + offset``;
# ``(None, 0, value)``, a constant; ``(name, None, offset)``, scalar parameter ``name + offset``.
Bound = tuple[str | None, int | None, int]

_FLIPPED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}


@dataclass
class Split:
    """The innermost loop's interior: ``lower <= j <= upper`` for every lower and upper bound
    (``j`` the thread index ``var``), and the body to run there."""

    var: str  # the generated thread index of the innermost dimension (tid1, tidflat…)
    lower: list[int]
    upper: list[Bound]
    body: list[ir.Stmt]
    in_loop: set[int]  # id() of the new body's statements that are inside kernel loops
    guards_only: bool = False  # no clamp was found, only comparisons


def interior_split(body: list[ir.Stmt], kernel: ir.KernelIR, rank: int,
                   single_assigned: set[str], in_loop: set[int]) -> Split | None:
    """The split of ``body`` for launches of ``rank`` dimensions, or None (no clamp found)."""
    var = innermost_thread_index(kernel, rank)
    if var is None:
        return None
    defs = definitions(body, single_assigned)
    finder = _EdgeFinder(var, defs, _unassigned_int_scalars(kernel, body))
    for s in ir.walk_stmts(body):
        for root in ir.statement_exprs(s):
            for e in ir.walk_expr(root):
                finder.visit(e)
    if not finder.replace:
        return None
    copier = _Copier(finder.replace, in_loop)
    new_body = copier.decided(copier.copy(body), {})
    return Split(var, list(dict.fromkeys(finder.lower)), list(dict.fromkeys(finder.upper)),
                 new_body, copier.in_loop, guards_only=not finder.clamps)


def innermost_thread_index(kernel: ir.KernelIR, rank: int) -> str | None:
    """The generated local holding the innermost launch dimension's thread index, or None when
    the kernel has none (no ``wp.tid()``, or a flat one in a multi-dimensional launch)."""
    if rank == 1:
        return "tidflat" if kernel.tid_flat else "tid0" if kernel.tid_vars else None
    return f"tid{rank - 1}" if len(kernel.tid_vars) == rank else None


def _unassigned_int_scalars(kernel: ir.KernelIR, body: list[ir.Stmt]) -> frozenset[str]:
    """Signed integer scalar parameters that ``body`` never assigns: the same in every thread."""
    scalars = {p.symbol for p in kernel.flat_params()
               if not p.is_array and dtypes.is_int(p.dtype) and p.dtype.kind == "int"}
    return frozenset(scalars - {s.target for s in ir.walk_stmts(body) if isinstance(s, ir.Assign)})


class _EdgeFinder:
    def __init__(self, var: str, defs: dict[str, ir.Expr], scalars: frozenset[str]):
        self.var, self.defs, self.scalars = var, defs, scalars
        self.replace: dict[int, ir.Expr] = {}  # id(call) → its pass-through operand or value
        self.lower: list[int] = []
        self.upper: list[Bound] = []
        self.clamps = False

    def visit(self, e: ir.Expr) -> None:
        if not isinstance(e, ir.Call) or id(e) in self.replace:
            return
        if e.builtin.key in _FLIPPED and e.type is dtypes.bool_:
            self.comparison(e)
            return
        if not dtypes.is_int(e.type):
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
                        self.clamps = True
                        return
                else:
                    m = self.invariant(other)
                    if m is not None:  # min(j + c, m) = j + c when j <= m - c
                        self.upper.append((m[0], m[1], m[2] - c))
                        self.replace[id(e)] = x
                        self.clamps = True
                        return
        elif key == "mod":  # (j + c) % m = j + c when 0 <= j + c < m (a ring's neighbours)
            c, m = self.offset(args[0]), self.invariant(args[1])
            if c is not None and m is not None:
                self.lower.append(-c)
                self.upper.append((m[0], m[1], m[2] - c - 1))
                self.replace[id(e)] = args[0]
                self.clamps = True
        elif key == "clamp":  # min(max(lo, x), hi)
            x, lo, hi = args
            c, k, m = self.offset(x), constant(lo), self.invariant(hi)
            if c is not None and k is not None and m is not None:
                self.lower.append(k - c)
                self.upper.append((m[0], m[1], m[2] - c))
                self.replace[id(e)] = x
                self.clamps = True

    def comparison(self, e: ir.Call) -> None:
        """``j + c OP b``: with a constant ``b`` its value for every ``j >= lower``, with an
        invariant non-constant ``b`` its value for every ``j <= upper``."""
        key, (left, right) = e.builtin.key, e.args
        if not (dtypes.is_int(left.type) and dtypes.is_int(right.type)):
            return
        c, other = self.offset(left), right
        if c is None:
            key, c, other = _FLIPPED[key], self.offset(right), left
        b = None if c is None else self.invariant(other)
        if b is None:
            return
        if b[0] is None:  # j + c OP k: j + c > k from j = k - c + 1 on, j + c < k false from k - c
            k = b[2]
            first = k - c + (0 if key in ("ge", "lt") else 1)
            value = key in ("gt", "ge", "ne")
            self.lower.append(first)
        else:  # j + c OP m: j + c < m up to j = m - c - 1
            last = b[2] - c - (0 if key in ("le", "gt") else 1)
            value = key in ("lt", "le", "ne")
            self.upper.append((b[0], b[1], last))
        self.replace[id(e)] = ir.Const(dtypes.bool_, value)

    def offset(self, e: ir.Expr) -> int | None:
        return thread_offset(e, self.defs, self.var)

    def invariant(self, e: ir.Expr) -> Bound | None:
        return invariant(e, self.defs, self.scalars)


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

    def decided(self, stmts: list[ir.Stmt], known: dict[str, bool]) -> list[ir.Stmt]:
        """``stmts`` with each ``If`` whose condition the constants decide (comparisons replaced
        by their interior value, flags assigned a constant earlier in the block) replaced by the
        branch taken. ``known``: bool locals' values at the block's start (updated as it goes)."""
        out: list[ir.Stmt] = []
        pending = list(stmts)
        while pending:
            s = pending.pop(0)
            new = s
            if isinstance(s, ir.If):
                cond = _folded(s.cond, known)
                if isinstance(cond, ir.Const):
                    pending[:0] = s.body if cond.value else s.orelse
                    continue
                new = dataclasses.replace(s, cond=cond, body=self.decided(s.body, dict(known)),
                                          orelse=self.decided(s.orelse, dict(known)))
            elif isinstance(s, (ir.For, ir.While)):  # flags may change from one iteration on
                new = dataclasses.replace(s, body=self.decided(s.body, {}))
            if new is not s and id(s) in self.in_loop:
                self.in_loop.add(id(new))
            for name in assigned([new]):
                known.pop(name, None)
            if isinstance(new, ir.Assign) and isinstance(new.value, ir.Const) and \
                    new.value.type is dtypes.bool_:
                known[new.target] = bool(new.value.value)
            out.append(new)
        return out


def _folded(e: ir.Expr, known: dict[str, bool]) -> ir.Expr:
    """``e`` with known bool locals, negations and ``and``/``or`` of constants folded."""
    if isinstance(e, ir.Var) and e.name in known:
        return ir.Const(dtypes.bool_, known[e.name])
    if isinstance(e, ir.Call) and e.builtin.key == "logical_not":
        inner = _folded(e.args[0], known)
        if isinstance(inner, ir.Const):
            return ir.Const(dtypes.bool_, not inner.value)
        return e if inner is e.args[0] else dataclasses.replace(e, args=(inner,))
    if isinstance(e, ir.BoolOp):
        return folded_bool(dataclasses.replace(e, values=tuple(_folded(v, known)
                                                               for v in e.values)))
    return e
