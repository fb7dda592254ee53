"""How a kernel uses its array parameters, read from its typed IR (computed once per kernel).

* ``is_read`` / ``is_write``: Warp's per-parameter flags for ``verify_autograd_array_access``
  (SPEC §3): element loads read; stores, atomics and ``x[i] += v`` write (that last one is not a read).
* ``write_after_read``: stores to a parameter that an earlier statement of the kernel loaded, for
  Warp's build-time warning.
* ``value_reads``: the parameters whose *values* the adjoint kernel needs. An overwrite of any
  other array between the launch and ``backward()`` cannot change the gradients.

The adjoint needs a loaded value when it feeds a derivative rule input that the rule's used
contributions read, a branch or loop condition, a loop bound, an index, or an atomic min/max
comparison. Rule inputs are found by reading each rule's Python source once. Anything this module
does not recognise counts as needed, so new IR nodes can only add warnings, never hide one.
This module only reads the IR; it never changes it and never touches arrays.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

from .backends import cpu_index
from .codegen.activity import Analysis, analyze
from .codegen.structure import structure
from .frontend import ir
from .frontend.source import source_block


@dataclass(frozen=True)
class KernelAccess:
    """Per-parameter access facts of one kernel (indexed like ``kernel.ir.params``)."""

    is_read: tuple[bool, ...]
    is_write: tuple[bool, ...]
    inplace: tuple[int, ...]  # read and plainly stored: launches snapshot them for the adjoint
    value_reads: tuple[int, ...]  # array parameters whose values the adjoint needs
    write_after_read: tuple[tuple[int, str, int], ...]  # (parameter, file, line) per first write


def access_of(kernel) -> KernelAccess:
    """The access facts of ``kernel`` (a ``Kernel``), computed on first use and cached on it."""
    facts = kernel.__dict__.get("_access")
    if facts is None:  # read back from the cache directory where a process computed it before
        facts = kernel._access = cpu_index.remembered(kernel.ir, "access", analyze_access)
    return facts


def analyze_access(kernel_ir: ir.KernelIR) -> KernelAccess:
    """Compute the access facts of a lowered kernel."""
    params = kernel_ir.params
    symbols = [p.symbol for p in params]
    body = structure(kernel_ir)
    needs = _Needs(analyze(body, kernel_ir))
    needs.visit(body)
    needed = needs.close()
    return KernelAccess(
        is_read=tuple(p.is_array and p.symbol in kernel_ir.read_arrays for p in params),
        is_write=tuple(p.is_array and p.symbol in kernel_ir.written_arrays for p in params),
        inplace=tuple(k for k, s in enumerate(symbols) if s in kernel_ir.inplace_arrays),
        value_reads=tuple(k for k, p in enumerate(params) if p.is_array and p.symbol in needed),
        write_after_read=tuple(_writes_after_reads(kernel_ir.body, symbols)),
    )


# ------------------------------------------------------------ write after read (Warp's warning)


def _writes_after_reads(body: list[ir.Stmt], symbols: list[str]):
    """First write to each parameter loaded earlier, in program order (loops walked once)."""
    read: set[str] = set()
    reported: set[str] = set()

    def walk(stmts: list[ir.Stmt], call_site: ir.Stmt | None):
        for s in stmts:
            site = call_site or s
            if isinstance(s, ir.Region):
                yield from walk(s.body, site)
                continue
            for e in ir.statement_exprs(s):
                read.update(x.array.param for x in _walk(e) if isinstance(x, ir.Load))
            target = getattr(s, "array", None)
            if isinstance(s, (ir.Store, ir.Atomic)) and target.param in read \
                    and target.param not in reported:
                reported.add(target.param)
                yield symbols.index(target.param), site.file, site.line
            for child in _blocks_of(s):
                yield from walk(child, call_site)

    yield from walk(body, None)


# ------------------------------------------------------------ generic IR traversal


def _fields(node: object):
    for name in ir.field_names(node):
        value = getattr(node, name)
        if isinstance(value, (list, tuple)):
            yield from value
        else:
            yield value


def _blocks_of(s: ir.Stmt) -> list[list[ir.Stmt]]:
    return [getattr(s, name) for name in ir.field_names(s)
            if isinstance(getattr(s, name), list)
            and all(isinstance(x, ir.Stmt) for x in getattr(s, name))]


def _walk(e: object):
    """``e`` and every expression below it, for any node type (array prefixes included)."""
    if isinstance(e, ir.ArrayRef):
        for p in e.prefix:
            yield from _walk(p)
        return
    if not isinstance(e, ir.Expr):
        return
    yield e
    for child in _fields(e):
        if isinstance(child, (ir.Expr, ir.ArrayRef)):
            yield from _walk(child)


# ------------------------------------------------------------ values the adjoint needs


class _Needs:
    """Collects the locals and array parameters whose values the adjoint kernel reads."""

    def __init__(self, analysis: Analysis):
        self.analysis = analysis
        self.arrays: set[str] = set()
        self.vars: set[str] = set()
        self.defs: dict[str, list[object]] = {}  # local → expressions (or ArrayRefs) defining it

    def visit(self, stmts: list[ir.Stmt]) -> None:
        for s in stmts:
            self.statement(s)
            for child in _blocks_of(s):
                self.visit(child)

    def statement(self, s: ir.Stmt) -> None:
        if isinstance(s, ir.Assign):
            self.defs.setdefault(s.target, []).append(s.value)
            if s.target in self.analysis.active:
                self.backprop(s.value)
        elif isinstance(s, (ir.Store, ir.Atomic)):
            self.need_all(s.indices)
            self.need_all(s.array.prefix)
            if isinstance(s, ir.Atomic) and s.result:
                self.defs.setdefault(s.result, []).append(s.array)
            if isinstance(s, ir.Atomic) and s.op in ("min", "max"):
                self.need(s.value)  # the adjoint compares the value with the final element
                self.arrays.add(s.array.param)
            else:
                self.backprop(s.value)
        elif isinstance(s, ir.For):
            self.defs.setdefault(s.var, []).extend([s.start, s.stop, s.step])
            self.need_all([s.start, s.stop, s.step])
            self.vars.update(s.exit_flags)
        elif isinstance(s, ir.While):
            self.need(s.cond)
            self.vars.update(s.exit_flags)
        elif isinstance(s, ir.If):
            self.need(s.cond)
        elif not isinstance(s, (ir.Print, ir.Region, ir.Break, ir.Continue, ir.Return)):
            self.need_all(ir.statement_exprs(s))  # unknown statement: everything it evaluates
        for e in ir.statement_exprs(s):  # every index is needed: gradients accumulate at it
            for x in _walk(e):
                if isinstance(x, ir.Load):
                    self.need_all(x.indices)

    def need_all(self, exprs) -> None:
        for e in exprs:
            self.need(e)

    def need(self, e: object) -> None:
        """The value of ``e`` is needed: so is every load and local it is computed from."""
        if isinstance(e, ir.ArrayRef):
            self.arrays.add(e.param)
            return
        for x in _walk(e):
            if isinstance(x, ir.Load):
                self.arrays.add(x.array.param)
            elif isinstance(x, ir.Var):
                self.vars.add(x.name)

    def backprop(self, e: ir.Expr | None) -> None:
        """Walk ``e`` as the reverse sweep does, noting the values each rule call reads."""
        if e is None or not self.analysis.expr_active(e):
            return
        if isinstance(e, (ir.Var, ir.Load, ir.Const)):
            return
        if isinstance(e, ir.Cast):
            return self.backprop(e.value)
        if not isinstance(e, ir.Call):
            return self.need(e)  # an active node this module does not know: all of it
        record = e.builtin
        names = record.param_names
        wanted = [k for k, (n, a) in enumerate(zip(names, e.args))
                  if record.differentiable.get(n, False) and self.analysis.expr_active(a)]
        if not wanted:
            return
        for k in rule_reads(record.adjoint, len(e.args), tuple(wanted)):
            self.need(e.args[k])
        for k in wanted:
            self.backprop(e.args[k])

    def close(self) -> set[str]:
        """Follow needed locals to their definitions until nothing new is needed."""
        done: set[str] = set()
        while self.vars - done:
            name = (self.vars - done).pop()
            done.add(name)
            for definition in self.defs.get(name, ()):
                self.need(definition)
        return self.arrays


# ------------------------------------------------------------ derivative rules


def rule_reads(rule, n_inputs: int, wanted: tuple[int, ...]) -> tuple[int, ...]:
    """Indices of the inputs whose values ``rule`` reads to compute the ``wanted`` contributions.

    Rules follow ``adj(*inputs, ret, adj_ret) -> tuple``; reading ``ret`` reads every input (the
    replay recomputes it from them). Unreadable rules read everything.
    """
    deps = _contribution_deps(rule)
    everything = tuple(range(n_inputs))
    if deps is None or len(deps) != n_inputs:
        return everything
    used: set[int] = set()
    for k in wanted:
        used |= deps[k]
    if n_inputs in used:  # ret
        return everything
    return tuple(sorted(k for k in used if k < n_inputs))


@functools.lru_cache(maxsize=None)
def _contribution_deps(rule) -> tuple[frozenset[int], ...] | None:
    """Per returned tuple element, the parameter positions it depends on (data and control)."""
    fn = getattr(rule, "py_func", rule)
    try:
        tree = source_block(fn)[2]
    except (OSError, TypeError):
        return None
    if tree is None:
        return None
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef) or fdef.args.vararg or fdef.args.kwonlyargs:
        return None
    params = {a.arg: i for i, a in enumerate(fdef.args.args)}
    local: dict[str, set[int]] = {}

    def deps_of(node: ast.AST | None, guards: frozenset[int]) -> set[int]:
        found = set(guards)
        for n in ast.walk(node) if node is not None else ():
            if isinstance(n, ast.Name):
                if n.id in params:
                    found.add(params[n.id])
                found |= local.get(n.id, set())
        return found

    returns: list[tuple[ast.AST, frozenset[int]]] = []

    def visit(stmts: list[ast.stmt], guards: frozenset[int]) -> bool:
        changed = False
        for s in stmts:
            if isinstance(s, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                targets = s.targets if isinstance(s, ast.Assign) else [s.target]
                d = deps_of(s.value, guards)
                for t in targets:
                    for n in ast.walk(t):
                        if isinstance(n, ast.Name) and not d <= local.get(n.id, set()):
                            local.setdefault(n.id, set()).update(d)
                            changed = True
            elif isinstance(s, ast.Return):
                returns.append((s.value, guards))
            elif isinstance(s, (ast.If, ast.While)):
                inner = guards | frozenset(deps_of(s.test, guards))
                changed |= visit(s.body, inner) | visit(s.orelse, inner)
            elif isinstance(s, ast.For):
                inner = guards | frozenset(deps_of(s.iter, guards))
                for n in ast.walk(s.target):
                    if isinstance(n, ast.Name) and not inner <= local.get(n.id, set()):
                        local.setdefault(n.id, set()).update(inner)
                        changed = True
                changed |= visit(s.body, inner) | visit(s.orelse, inner)
            elif isinstance(s, (ast.Expr, ast.Pass)):
                continue
            else:
                raise _Unreadable
        return changed

    try:
        while True:
            returns.clear()
            if not visit(fdef.body, frozenset()):
                break
    except _Unreadable:
        return None
    n_inputs = len(params) - 2
    per_element: list[set[int]] = [set() for _ in range(n_inputs)]
    for value, guards in returns:
        if isinstance(value, ast.Tuple) and len(value.elts) == n_inputs:
            for k, elt in enumerate(value.elts):
                per_element[k] |= deps_of(elt, guards)
        else:
            whole = deps_of(value, guards)
            for k in range(n_inputs):
                per_element[k] |= whole
    return tuple(frozenset(d) for d in per_element)


class _Unreadable(Exception):
    """A rule statement this reader does not model; the rule then reads every input."""
