"""Debug-only checks in the IR: vector and matrix component indices known only at run time.

A component at a run-time index (``v[k]``, ``m[r, c] = s``) is a choice among all of them, so an
index out of range silently reads the last component, or writes none. The frontend wraps such
indices in ``ir.CheckedIndex``; debug programs spell it as a check that raises, and every
other program is built from the kernel's IR with the wrappers taken out, exactly the IR it
had before they existed.
"""

from __future__ import annotations

import dataclasses

from . import ir


def without_checks(kernel: ir.KernelIR) -> ir.KernelIR:
    """``kernel`` with every ``CheckedIndex`` replaced by its value (itself when it has none)."""
    if not any(isinstance(e, ir.CheckedIndex)
               for s in ir.walk_stmts(kernel.body) for root in _all_exprs(s)
               for e in ir.walk_expr(root)):
        return kernel
    return dataclasses.replace(kernel, body=_stripped(kernel.body))


def _all_exprs(s: ir.Stmt) -> list[ir.Expr]:
    exprs = ir.statement_exprs(s)
    for name in ("replay_body", "grad_body"):  # bodies walk_stmts does not enter
        for inner in ir.walk_stmts(getattr(s, name, None) or []):
            exprs.extend(_all_exprs(inner))
    return exprs


def _stripped(node, memo: dict | None = None):
    """A copy of ``node`` without checks; an expression used in several places stays one
    object (``memo``, by identity), as passes may count its uses."""
    memo = {} if memo is None else memo
    if isinstance(node, list):
        return [_stripped(item, memo) for item in node]
    if isinstance(node, tuple):
        return tuple(_stripped(item, memo) for item in node)
    if not isinstance(node, (ir.Stmt, ir.Expr, ir.ArrayRef)):
        return node
    done = memo.get(id(node))
    if done is None:
        if isinstance(node, ir.CheckedIndex):
            done = _stripped(node.value, memo)
        else:
            done = dataclasses.replace(node, **{
                name: _stripped(getattr(node, name), memo) for name in ir.field_names(node)
                if isinstance(getattr(node, name), (ir.Stmt, ir.Expr, ir.ArrayRef, list, tuple))})
        memo[id(node)] = done
    return done
