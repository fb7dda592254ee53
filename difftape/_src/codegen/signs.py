"""Which integer values in a kernel can never be negative.

Numba wraps a negative signed index around (``a[-1]`` is the last element), a select that hides
from LLVM that ``a[i]`` and ``a[i + 1]`` are neighbours: loops then use gathers and scatters, and
a loop that reads and adds into the same array is not vectorized at all. Warp has no negative
indices (they are out of bounds, caught by debug mode), so an index proved non-negative here is
written unsigned, which Numba does not wrap.

So is an index that depends on values read from arrays (``x[si[s]]``, a gather or a scatter,
or a grid cell computed from a particle's position): it is no affine function of the thread
index, so a signed spelling tells LLVM nothing, and the wraparound costs three instructions per
access (with strips.py's split flush loop, mass-spring's force forward went from 3.5 to 3.2 ms;
the particle-to-grid workload, whose particles add into 27 cells each, 9.9 -> 8.8 ms on an
Intel Xeon core, warp-lang 9.6). A negative one is out of bounds, as in Warp; debug mode raises
IndexError. Rows at such indices are read in pairs of components only where the index is an
integer read from an array (``gathered_locals``, ``ExprCoder.paired_lane``): in that workload's
scalar adjoint, pair reads of the cells' rows were 50% slower (6.1 -> 9.0 ms).

The proof is a greatest fixed point over the kernel's assignments: a local is non-negative when
every value ever assigned to it is, assuming the same of the locals those values read. Overflow
is not considered: an index that overflows is out of bounds either way.
"""

from __future__ import annotations

from .. import dtypes
from ..frontend import ir

# Builtins whose integer result is >= 0 when the listed arguments are (None: all of them).
_ALL = None
_NONNEGATIVE_WHEN = {
    "add": _ALL, "mul": _ALL, "div": _ALL, "floordiv": _ALL, "min": _ALL, "bit_or": _ALL,
    "mod": (0,),  # C remainder: the sign of the dividend
    "rshift": (0,),
    "clamp": (1, 2),  # clamp(x, lo, hi) lies in [lo, hi] (Warp: lo when hi < lo)
}
_EITHER = {"max", "bit_and"}  # >= 0 when any argument is
_THREAD_INDICES = frozenset({"tid0", "tid1", "tid2", "tid3", "tidflat"})  # generated names


def nonnegative_locals(kernel: ir.KernelIR, body: list[ir.Stmt] | None = None) -> frozenset[str]:
    """Integer locals of ``kernel`` that are >= 0 wherever they are read (in ``body``, default
    the kernel's own)."""
    candidates = {name for name, t in kernel.locals.items() if dtypes.is_int(t)}
    values: dict[str, list[ir.Expr | None]] = {name: [] for name in candidates}
    for s in _all_statements(kernel.body if body is None else body):
        for name, value in bindings(s):
            if name in values:
                values[name].append(value)
    candidates = {name for name in candidates if values[name]}
    changed = True
    while changed:
        changed = False
        for name in sorted(candidates):
            if not all(v is not None and is_nonnegative(v, candidates) for v in values[name]):
                candidates.discard(name)
                changed = True
    return frozenset(candidates)


def gathered_locals(kernel: ir.KernelIR) -> frozenset[str]:
    """Integer locals of ``kernel`` that some assignment gives a value read from an array (an
    atomic's old value included), or computed from such a local."""
    return _reading_arrays(kernel, integers_only=True)


def data_locals(kernel: ir.KernelIR) -> frozenset[str]:
    """Locals of ``kernel`` of any type whose value depends on an array element: an integer
    index computed from them (``int(floor(x[p][0] * res))``, a grid cell) varies with the data,
    not with the thread index, like one read from an index array."""
    return _reading_arrays(kernel, integers_only=False)


def _reading_arrays(kernel: ir.KernelIR, integers_only: bool) -> frozenset[str]:
    values: dict[str, list[ir.Expr | None]] = {}
    found: set[str] = set()
    for s in _all_statements(kernel.body):
        for name, value in bindings(s):
            if not integers_only or dtypes.is_int(kernel.locals.get(name)):
                values.setdefault(name, []).append(value)
                if isinstance(s, ir.Atomic):
                    found.add(name)
    changed = True
    while changed:
        changed = False
        for name in sorted(set(values) - found):
            if any(v is not None and reads_arrays(v, found) for v in values[name]):
                found.add(name)
                changed = True
    return frozenset(found)


def reads_arrays(e: ir.Expr, gathered: frozenset[str] | set[str]) -> bool:
    """Whether ``e``'s value depends on an array element, given the locals in ``gathered`` do."""
    return any(isinstance(n, ir.Load) or (isinstance(n, ir.Var) and n.name in gathered)
               for n in ir.walk_expr(e))


def is_nonnegative(e: ir.Expr, nonnegative: frozenset[str] | set[str]) -> bool:
    """``e`` (an integer expression) is >= 0, given the locals in ``nonnegative`` are."""
    if not dtypes.is_int(e.type):
        return False
    if e.type.kind == "uint":  # type: ignore[attr-defined]
        return True
    if isinstance(e, ir.Const):
        return isinstance(e.value, (int, bool)) and e.value >= 0
    if isinstance(e, ir.Var):
        return e.name in nonnegative or e.name in _THREAD_INDICES
    if isinstance(e, ir.Shape):
        return True
    if isinstance(e, ir.Cast):
        source, target = e.value.type, e.type
        if not dtypes.is_int(source) or not is_nonnegative(e.value, nonnegative):
            return False
        width = source._np(0).itemsize  # type: ignore[attr-defined]
        target_width = target._np(0).itemsize  # type: ignore[attr-defined]
        return target_width > width or (target_width == width and source.kind == "int")
    if isinstance(e, ir.Call):
        key = e.builtin.key
        if key in _EITHER:
            return any(is_nonnegative(a, nonnegative) for a in e.args)
        if key in _NONNEGATIVE_WHEN:
            positions = _NONNEGATIVE_WHEN[key] or range(len(e.args))
            return all(is_nonnegative(e.args[k], nonnegative) for k in positions)
    return False


def _all_statements(stmts: list[ir.Stmt]):
    """Every statement, custom gradients' replay and gradient bodies included."""
    for s in ir.walk_stmts(stmts):
        yield s
        if isinstance(s, ir.CustomCall):
            yield from _all_statements(s.replay_body or [])
            yield from _all_statements(s.grad_body)


def assigned(stmts: list[ir.Stmt]) -> set[str]:
    """Every local that ``stmts`` (or statements inside them) assign."""
    return {name for s in ir.walk_stmts(stmts) for name, _ in bindings(s)}


def bindings(s: ir.Stmt):
    """(local, value or None for 'unknown') for every local that statement ``s`` itself sets."""
    if isinstance(s, ir.Assign):
        yield s.target, s.value
    elif isinstance(s, ir.For):
        step = s.step
        increasing = isinstance(step, ir.Const) and isinstance(step.value, int) and step.value > 0
        yield s.var, s.start if increasing else None
    elif isinstance(s, ir.Atomic) and s.result is not None:
        yield s.result, None
    elif isinstance(s, ir.CustomCall):
        for name in s.results:
            yield name, None
    elif isinstance(s, ir.GradOf):
        for name in (s.result, *s.grads):
            yield name, None
