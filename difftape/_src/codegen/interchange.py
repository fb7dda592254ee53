"""Loop interchange across threads, for forward kernels built around one loop of fixed length.

A thread that runs ``for k in range(n)`` with a loop-carried value (``p = p * x``) waits on
that value's latency every iteration, and LLVM cannot vectorize across threads. When the trip
count is the same for every thread, the generated forward runs a strip of ``STRIP`` threads
at a time in three phases: every thread's code before the loop, then ``for k: for thread in
strip: body``, then every thread's code after the loop. Locals that live across the phases or
from one iteration to the next are kept in strip arrays. The loop over the strip's threads has
no dependence from one thread to the next, so it vectorizes: the benchmark's dynamic loop ran
94 -> 10 ms on normal data (and 333 -> 218 ms where it underflows into denormals).

Every thread computes exactly what it computed before; only the order in which threads
interleave changes. Warp's threads are unordered, so that is unobservable unless threads share
memory, which is excluded: no array the kernel writes may be read by it. The loop qualifies when

- it is a ``for`` at the top level of the body (under no branch), not reversed, without
  ``break`` or ``return`` inside (which end it early for some threads), and without loops
  inside (the loop over the strip's threads would then not vectorize, and the strip arrays only
  cost: 15% slower measured);
- its bounds are the same for every thread (constants, shapes, scalar parameters and locals
  computed from those only), and its variable is not read after it;
- the carried locals are plain scalars and fit in ``MAX_BUFFER_BYTES`` of stack.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import dtypes
from ..frontend import ir
from .offsets import definitions, independent
from .signs import assigned, bindings
from .strips import MAX_BUFFER_BYTES, STRIP



@dataclass
class Interchange:
    pre: list[ir.Stmt]
    loop: ir.For
    post: list[ir.Stmt]
    carried: dict[str, type]  # local → type, kept in a strip array between phases/iterations


def plan(kernel: ir.KernelIR, body: list[ir.Stmt], rank: int,
         single_assigned: set[str]) -> Interchange | None:
    """The interchange of ``body`` for one-dimensional launches, or None."""
    if rank != 1 or not (kernel.tid_flat or kernel.tid_vars):
        return None
    at = next((k for k, s in enumerate(body) if isinstance(s, ir.For)), None)
    if at is None:
        return None
    loop, pre, post = body[at], body[:at], body[at + 1:]
    if loop.reverse or loop.exit_flags or _shares_memory(body) or _has_opaque(body):
        return None
    if any(isinstance(s, (ir.For, ir.While)) for s in ir.walk_stmts(loop.body)):
        return None  # the loop over the strip would not vectorize: 15% slower measured
    defs = definitions(body, single_assigned)
    params = {p.symbol for p in kernel.flat_params() if not p.is_array}
    fixed = params - assigned(body)
    if not all(independent(e, defs, fixed) for e in (loop.start, loop.stop, loop.step)):
        return None
    if loop.var in _reads(post) or loop.var in _reads(pre):
        return None
    threads = {"tid0", "tidflat"}
    assigned_before = assigned(pre)
    carried_names = (assigned_before & (_reads(loop.body) | _reads(post))) \
        | (assigned(loop.body) & (_exposed(loop.body) | _reads(post)))
    carried_names -= threads | {loop.var}
    carried = {}
    for name in sorted(carried_names):
        t = kernel.locals.get(name)
        if t is None or not (dtypes.is_float(t) or dtypes.is_int(t) or t is dtypes.bool_):
            return None
        carried[name] = t
    size = sum(STRIP * np.dtype(t._np).itemsize for t in carried.values())
    if size > MAX_BUFFER_BYTES:
        return None
    return Interchange(pre, loop, post, carried)


def _shares_memory(body: list[ir.Stmt]) -> bool:
    """Whether an array the body writes is also read by it (threads could then see each
    other's writes, which a different interleaving would change)."""
    written, read = set(), set()
    locals_read = _reads(body)
    for s in ir.walk_stmts(body):
        if isinstance(s, (ir.Store, ir.Atomic)):
            written.add(s.array.param)
            if isinstance(s, ir.Atomic) and s.result in locals_read:  # the old value is used
                read.add(s.array.param)
        for root in ir.statement_exprs(s):
            for e in ir.walk_expr(root):
                if isinstance(e, ir.Load):
                    read.add(e.array.param)
    return bool(written & read)


def _has_opaque(body: list[ir.Stmt]) -> bool:
    """Statements whose locals this module does not follow (custom gradients, ``wp.grad``)."""
    return any(isinstance(s, (ir.CustomCall, ir.GradOf, ir.Print)) for s in ir.walk_stmts(body))


def _reads(stmts: list[ir.Stmt]) -> set[str]:
    names = set()
    for s in ir.walk_stmts(stmts):
        for root in ir.statement_exprs(s):
            for e in ir.walk_expr(root):
                if isinstance(e, ir.Var):
                    names.add(e.name)
    return names


def _exposed(stmts: list[ir.Stmt], defined: set[str] | None = None) -> set[str]:
    """Locals an iteration of ``stmts`` may read before assigning them (they carry a value in
    from the previous iteration). An assignment defines a local for what follows it in the same
    block; a loop defines its variable for its body."""
    defined = set() if defined is None else set(defined)
    exposed: set[str] = set()
    for s in stmts:
        exposed |= _expr_reads(s) - defined
        if isinstance(s, ir.If):
            exposed |= _exposed(s.body, defined) | _exposed(s.orelse, defined)
        elif isinstance(s, ir.For):
            exposed |= _exposed(s.body, defined | {s.var})
        elif isinstance(s, (ir.While, ir.Region)):
            exposed |= _exposed(s.body, defined)
        for name, _ in bindings(s):
            defined.add(name)
    return exposed


def _expr_reads(s: ir.Stmt) -> set[str]:
    """Locals read by ``s``'s own expressions (not those of statements inside it)."""
    return {e.name for root in ir.statement_exprs(s) for e in ir.walk_expr(root)
            if isinstance(e, ir.Var)}
