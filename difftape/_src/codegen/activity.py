"""Facts about a structured kernel body that code generation needs.

* activity: which locals carry derivatives (float values that depend on a float array read);
* restore sets: which locals the adjoint must save before overwriting (assigned more than once,
  or inside a loop), so the reverse sweep sees every value exactly as the forward did;
* accumulation sites: whether an array index is private to the thread, uniform across threads,
  or a scatter — the one decision that picks plain adds, reductions or atomics.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from .. import dtypes
from ..frontend import ir

PRIVATE, UNIFORM, SCATTER = "private", "uniform", "scatter"


@dataclass
class Analysis:
    active: set[str] = field(default_factory=set)
    restored: set[str] = field(default_factory=set)
    # Saved values (restored locals, branch conditions, trip counts) that the reverse sweep never
    # reads, found by a first generation: they are neither pushed nor popped.
    unsaved: set[str] = field(default_factory=set)
    in_loop: set[int] = field(default_factory=set)  # id() of statements inside a loop body
    single_assigned: set[str] = field(default_factory=set)
    read: set[str] = field(default_factory=set)  # locals some expression reads
    atomic_ops: dict[str, set[str]] = field(default_factory=dict)  # array → the kernel's ops on it
    params: dict[str, ir.Param] = field(default_factory=dict)

    def is_in_loop(self, stmt: ir.Stmt) -> bool:
        return id(stmt) in self.in_loop

    def expr_active(self, e: ir.Expr) -> bool:
        if not dtypes.is_float(e.type):
            return False
        if isinstance(e, ir.Load):
            return True
        if isinstance(e, ir.Var):
            return e.name in self.active
        if isinstance(e, ir.Cast):
            return self.expr_active(e.value)
        if isinstance(e, ir.Call):
            names = e.builtin.param_names
            return any(e.builtin.differentiable.get(n, False) and self.expr_active(a)
                       for n, a in zip(names, e.args))
        return False


def analyze(body: list[ir.Stmt], kernel: ir.KernelIR, sources: tuple[str, ...] = ()) -> Analysis:
    flat = kernel.flat_params()
    result = Analysis(params={p.symbol: p for p in flat})
    sites: Counter[str] = Counter()
    for p in flat:
        if not p.is_array:
            sites[p.symbol] += 1

    def visit(stmts: list[ir.Stmt], looped: bool) -> None:
        for s in stmts:
            if looped:
                result.in_loop.add(id(s))
            targets = _targets(s)
            for t in targets:
                sites[t] += 1
                if looped:
                    result.restored.add(t)
            if isinstance(s, ir.If):
                visit(s.body, looped)
                visit(s.orelse, looped)
            elif isinstance(s, (ir.For, ir.While)):
                visit(s.body, True)

    visit(body, False)
    result.restored |= {name for name, n in sites.items() if n > 1}
    result.single_assigned = {name for name, n in sites.items() if n == 1}
    result.active.update(sources)  # extra differentiation inputs (wp.grad)
    for s in ir.walk_stmts(body):
        for e in ir.statement_exprs(s):
            result.read.update(x.name for x in ir.walk_expr(e) if isinstance(x, ir.Var))
    for s in ir.walk_stmts(kernel.body):  # the whole kernel's, whatever part ``body`` is
        if isinstance(s, ir.Atomic):
            result.atomic_ops.setdefault(s.array.param, set()).add(s.op)
    _propagate_activity(body, result)
    return result


def _targets(s: ir.Stmt) -> list[str]:
    if isinstance(s, ir.Assign):
        return [s.target]
    if isinstance(s, ir.For):
        return [s.var]
    if isinstance(s, ir.Atomic) and s.result:
        return [s.result]
    if isinstance(s, ir.CustomCall):
        return list(s.results)
    if isinstance(s, ir.GradOf):
        return list(s.grads)
    return []


def _propagate_activity(body: list[ir.Stmt], result: Analysis) -> None:
    assigns = [s for s in _flow(body) if isinstance(s, ir.Assign)]
    customs = [s for s in _flow(body) if isinstance(s, ir.CustomCall)]
    changed = True
    while changed:
        changed = False
        for s in assigns:
            if s.target not in result.active and result.expr_active(s.value):
                result.active.add(s.target)
                changed = True
        for c in customs:
            if any(i in result.active for i in c.inputs) and not set(c.results) <= result.active:
                result.active.update(c.results)  # expr_active still requires a float type
                changed = True


def _flow(body: list[ir.Stmt]):
    """Statements of the kernel's own flow (custom-gradient bodies are opaque units)."""
    for s in body:
        yield s
        if isinstance(s, ir.If):
            yield from _flow(s.body)
            yield from _flow(s.orelse)
        elif isinstance(s, (ir.For, ir.While, ir.Region)):
            yield from _flow(s.body)


def classify_index(ref: ir.ArrayRef, indices: tuple[ir.Expr, ...], kernel: ir.KernelIR,
                   analysis: Analysis) -> str:
    """How threads can collide on ``array[indices]``: PRIVATE, UNIFORM or SCATTER.

    Only the element indices count: trailing component indices of vector arrays are constants.
    """
    if own_element(ref, indices, kernel, analysis.single_assigned):
        return PRIVATE
    if all(thread_invariant(e, analysis) for e in indices[:ref.ndim]):
        return UNIFORM
    return SCATTER


def own_element(ref: ir.ArrayRef, indices: tuple[ir.Expr, ...], kernel: ir.KernelIR,
                single_assigned: set[str]) -> bool:
    """Whether ``array[indices]`` is the thread's own element: indexed by the thread index
    (``i = wp.tid()``, or ``i, j = wp.tid()`` in order), never reassigned."""
    names = [e.name if isinstance(e, ir.Var) else None for e in indices[:ref.ndim]]
    if kernel.tid_flat and names == [kernel.tid_flat] and kernel.tid_flat in single_assigned:
        return True
    return bool(kernel.tid_vars) and names == list(kernel.tid_vars) and \
        all(n in single_assigned for n in names)


def thread_invariant(e: ir.Expr, analysis: Analysis, same: frozenset[str] = frozenset()) -> bool:
    """Whether ``e`` has one value in every thread: built from constants, scalar parameters
    the kernel never assigns, shapes, and the locals ``same`` (known to be equal everywhere)."""
    if isinstance(e, ir.Const):
        return True
    if isinstance(e, ir.Var):
        if e.name in same:
            return True
        p = analysis.params.get(e.name)
        return p is not None and not p.is_array and e.name in analysis.single_assigned
    if isinstance(e, ir.Shape):
        return all(thread_invariant(x, analysis, same) for x in e.array.prefix)
    if isinstance(e, ir.Call):
        return all(thread_invariant(a, analysis, same) for a in e.args)
    if isinstance(e, ir.Cast):
        return thread_invariant(e.value, analysis, same)
    return False


def plain_add(s: ir.Atomic, kernel: ir.KernelIR, analysis: Analysis) -> bool:
    """Whether atomic ``s`` may add into a per-chunk copy or local summed in afterwards: an add
    or subtract whose result is unused, into an array the kernel neither reads nor stores to
    (a thread must read back its own adds, ``a = x[j]; x[j] += 1.0; b = x[j]``, and its stores
    must land after them, ``x[j] += 1.0; x[i] = 5.0``) nor takes a min or max of (``x[0] +=
    1.0; atomic_max(x, 0, v)``: the adds summed in afterwards would land after every max)."""
    param = s.array.param
    return s.op in ("add", "sub") and s.result not in analysis.read \
        and param not in kernel.read_arrays and param not in kernel.stored_arrays \
        and analysis.atomic_ops.get(param, set()) <= {"add", "sub"}


def plain_extremum(s: ir.Atomic, kernel: ir.KernelIR, analysis: Analysis) -> bool:
    """Whether atomic min/max ``s`` may go to a per-chunk local taking the extremum, flushed
    into the array afterwards: into a float array the kernel neither reads nor stores to and
    updates with this op alone (an add and a max of one element do not commute), its result
    unused. The extremum of the same values, in another order: only the sign of a zero maximum
    (or minimum) met with both signs may differ."""
    param = s.array.param
    return s.op in ("min", "max") and s.result not in analysis.read \
        and dtypes.scalar_of(s.array.dtype) in (dtypes.float32, dtypes.float64) \
        and analysis.atomic_ops.get(param) == {s.op} \
        and param not in kernel.read_arrays and param not in kernel.stored_arrays


def _scatter_accesses(body: list[ir.Stmt], kernel: ir.KernelIR, analysis: Analysis):
    """Yield (adjoint, array parameter, replicable) for each scalar access of ``body`` that is a
    scatter site (see ``scatter_sites``), once per statement, however often a loop runs it."""
    for s in ir.walk_stmts(body):
        if isinstance(s, ir.Atomic):
            mode = classify_index(s.array, s.indices, kernel, analysis)
            plain = plain_add(s, kernel, analysis)
            if mode == SCATTER or (mode == UNIFORM and not plain
                                   and not plain_extremum(s, kernel, analysis)):
                yield False, s.array.param, plain and mode == SCATTER
        for root in ir.statement_exprs(s):
            for e in ir.walk_expr(root):
                if not isinstance(e, ir.Load) or \
                        not dtypes.is_float(dtypes.scalar_of(e.array.dtype)):
                    continue
                # the adjoint of a store or an atomic reads the array's adjoint, which must hold
                # the thread's own adds (``x[i] = a[i]; b[i] = x[j]`` with j == i): no replica,
                # nor a per-chunk local for a thread-invariant index
                written = e.array.param in kernel.written_arrays
                where = classify_index(e.array, e.indices, kernel, analysis)
                if where == SCATTER or (where == UNIFORM and written):
                    yield True, e.array.param, where == SCATTER and not written


def scatter_sites(body: list[ir.Stmt], kernel: ir.KernelIR,
                  analysis: Analysis) -> tuple[dict[str, bool], dict[str, bool]]:
    """Array parameters that threads may update concurrently: the forward's atomics at SCATTER
    indices (and at UNIFORM ones other than plain adds, which per-chunk locals cannot take),
    the adjoint's accumulations at SCATTER indices (and at UNIFORM ones into the adjoint of an
    array the kernel writes, which it reads back). Each maps to whether all of its sites can
    add into a per-chunk replica (the forward's: ``plain_add``; the adjoint's: into the adjoint
    of an array the kernel never writes); without replicas they need atomics in parallel code."""
    sites: tuple[dict[str, bool], dict[str, bool]] = ({}, {})
    for adjoint, param, replicable in _scatter_accesses(body, kernel, analysis):
        found = sites[adjoint]
        found[param] = found.get(param, True) and replicable
    return sites


def scatter_adds(body: list[ir.Stmt], kernel: ir.KernelIR,
                 analysis: Analysis) -> tuple[int, int]:
    """Scalar adds a thread of the forward / the adjoint makes at its scatter sites, counting
    each site once however often a loop runs it (static loops are unrolled by then)."""
    counts = [0, 0]
    for adjoint, _, _ in _scatter_accesses(body, kernel, analysis):
        counts[adjoint] += 1
    return counts[0], counts[1]
