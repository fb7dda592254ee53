"""How far from its own row a thread's scattered adds can land.

A scatter site's first index ``e`` has the *row window* ``[lo, hi]`` when every thread of launch
row ``t`` (``tid0``; the thread index itself in a 1-D launch) has ``t + lo <= e <= t + hi``. Rows
more than ``hi - lo`` apart then never add into the same element, so the launcher can run bands
of rows concurrently, adding straight into the array: no per-chunk copies, no atomics
(``chunks.py``). Stencils are the common case: ``a[i - 1, j]`` has the window ``[-1, -1]``.

Clamped indices keep a window when the clamp cannot pull them far from the row: ``max(i - 1, 0)``
lies in ``[t - 1, t]`` for every ``t >= 0``, and ``min(i + 1, n - 1)`` with ``n = a.shape[0]`` in
``[t, t + 1]`` as long as the launch has no more rows than ``a``. Conditions of that second kind
are *guards* ``(param, axis, k)``: ``param.shape[axis] >= rows + k`` (``param`` None: ``0 >= rows
+ k``), checked for each launch. Integer overflow is not considered: it leaves the array anyway.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import dtypes
from ..frontend import ir

Guard = tuple[str | None, int, int]


@dataclass(frozen=True)
class RowWindow:
    lo: int
    hi: int
    guards: frozenset[Guard] = frozenset()

    def join(self, other: RowWindow) -> RowWindow:
        return RowWindow(min(self.lo, other.lo), max(self.hi, other.hi),
                         self.guards | other.guards)

    def holds(self, rows: int, shape_of) -> bool:
        """Whether the guards hold for a launch of ``rows`` rows; ``shape_of(param, axis)``."""
        return all((shape_of(param, axis) if param is not None else 0) >= rows + k
                   for param, axis, k in self.guards)


def definitions(body: list[ir.Stmt], single_assigned: set[str]) -> dict[str, ir.Expr]:
    """The value of every local assigned exactly once (one expression holds all it ever has)."""
    return {s.target: s.value for s in ir.walk_stmts(body)
            if isinstance(s, ir.Assign) and s.target in single_assigned}


def row_window(e: ir.Expr, defs: dict[str, ir.Expr], rank: int) -> RowWindow | None:
    """The row window of integer expression ``e`` in a launch of ``rank`` dimensions, or None."""
    rows = ("tid0", "tidflat") if rank == 1 else ("tid0",)
    return _window(e, defs, rows, 0)


def thread_offset(e: ir.Expr, defs: dict[str, ir.Expr], var: str) -> int | None:
    """``c`` when ``e`` is exactly the thread index ``var`` plus the constant ``c``."""
    w = _window(e, defs, (var,), 0)
    return w.lo if w is not None and w.lo == w.hi and not w.guards else None


def invariant(e: ir.Expr, defs: dict[str, ir.Expr],
              scalars: frozenset[str] = frozenset()) -> Guard | None:
    """``e`` as ``(param, axis, offset)``, ``param.shape[axis] + offset``, or ``(None, 0, value)``
    for a constant, or ``(name, None, offset)``, ``name + offset`` for a scalar parameter listed
    in ``scalars`` (one the body never assigns); None for anything else."""
    return _invariant(e, defs, 0, scalars)


_MAX_DEPTH = 32  # definitions chain through locals; this bounds the walk


def _window(e: ir.Expr, defs, rows, depth: int) -> RowWindow | None:
    if depth > _MAX_DEPTH or not dtypes.is_int(e.type):
        return None
    if isinstance(e, ir.Var):
        if e.name in rows:
            return RowWindow(0, 0)
        value = defs.get(e.name)
        return None if value is None else _window(value, defs, rows, depth + 1)
    if isinstance(e, ir.Cast):
        return _window(e.value, defs, rows, depth + 1) if _widening(e) else None
    if not isinstance(e, ir.Call):
        return None
    key, args = e.builtin.key, e.args
    if key in ("add", "sub"):
        shift = constant(args[1])
        if shift is not None:
            w = _window(args[0], defs, rows, depth + 1)
            return None if w is None else _shifted(w, shift if key == "add" else -shift)
        shift = constant(args[0])
        if key == "add" and shift is not None:
            w = _window(args[1], defs, rows, depth + 1)
            return None if w is None else _shifted(w, shift)
        return None
    if key == "max":
        return _max(*(_operand(a, defs, rows, depth) for a in args))
    if key == "min":
        return _min(*(_operand(a, defs, rows, depth) for a in args))
    if key == "clamp":  # min(max(lo, x), hi)
        x, lo, hi = (_operand(a, defs, rows, depth) for a in args)
        inner = _max(lo, x)
        return None if not isinstance(inner, RowWindow) else _min(inner, hi)
    return None


def _operand(e: ir.Expr, defs, rows, depth: int):
    """A RowWindow, an invariant ``(param or None, axis, offset)`` (``shape + offset``, or the
    constant ``offset``), or None."""
    w = _window(e, defs, rows, depth + 1)
    return w if w is not None else _invariant(e, defs, depth + 1)


def _max(a, b) -> RowWindow | None:
    if isinstance(a, RowWindow) and isinstance(b, RowWindow):
        return RowWindow(max(a.lo, b.lo), max(a.hi, b.hi), a.guards | b.guards)
    w, c = (a, b) if isinstance(a, RowWindow) else (b, a)
    # max(e, c) with a constant c <= 0 <= t lies in [e, max(t + hi, t)].
    if isinstance(w, RowWindow) and c is not None and c[0] is None and c[2] <= 0:
        return RowWindow(w.lo, max(w.hi, 0), w.guards)
    return None


def _min(a, b) -> RowWindow | None:
    if isinstance(a, RowWindow) and isinstance(b, RowWindow):
        return RowWindow(min(a.lo, b.lo), min(a.hi, b.hi), a.guards | b.guards)
    w, m = (a, b) if isinstance(a, RowWindow) else (b, a)
    if not isinstance(w, RowWindow) or m is None:
        return None
    # min(e, m) <= e <= t + hi; it is >= t + lo' for every row t < rows when m >= rows - 1 + lo'
    # (lo' = min(lo, 0), so that the guard holds for the usual launch of exactly m + 1 rows).
    lo = min(w.lo, 0)
    param, axis, offset = m
    return RowWindow(lo, w.hi, w.guards | {(param, axis, lo - 1 - offset)})


def _invariant(e: ir.Expr, defs, depth: int,
               scalars: frozenset[str] = frozenset()) -> tuple[str | None, int | None, int] | None:
    if depth > _MAX_DEPTH or not dtypes.is_int(e.type):
        return None
    c = constant(e)
    if c is not None:
        return (None, 0, c)
    if isinstance(e, ir.Shape):
        return None if e.array.prefix else (e.array.param, e.axis, 0)
    if isinstance(e, ir.Var):
        if e.name in scalars:
            return (e.name, None, 0)
        value = defs.get(e.name)
        return None if value is None else _invariant(value, defs, depth + 1, scalars)
    if isinstance(e, ir.Cast):
        return _invariant(e.value, defs, depth + 1, scalars) if _widening(e) else None
    if isinstance(e, ir.Call) and e.builtin.key in ("add", "sub"):
        shift = constant(e.args[1])
        base = _invariant(e.args[0], defs, depth + 1, scalars)
        if shift is not None and base is not None and base[0] is not None:
            return (base[0], base[1], base[2] + (shift if e.builtin.key == "add" else -shift))
    return None


# Builtins that compute their result from their arguments alone.
PURE = frozenset({"add", "sub", "mul", "div", "floordiv", "mod", "min", "max", "clamp", "abs",
                  "neg", "pos", "sign", "bit_and", "bit_or", "bit_xor", "lshift", "rshift",
                  "where"})


def independent(e: ir.Expr, defs: dict[str, ir.Expr], allowed: set[str], depth: int = 0) -> bool:
    """Whether ``e`` is computed by pure builtins from constants, shapes, the names in
    ``allowed`` and locals assigned once (``defs``) from those: then it has the same value
    wherever the names in ``allowed`` do."""
    if depth > _MAX_DEPTH:
        return False
    if isinstance(e, (ir.Const, ir.Shape)):
        return True
    if isinstance(e, ir.Var):
        if e.name in defs:
            return independent(defs[e.name], defs, allowed, depth + 1)
        return e.name in allowed
    if isinstance(e, ir.Cast):
        return independent(e.value, defs, allowed, depth + 1)
    if isinstance(e, ir.Call) and e.builtin.key in PURE:
        return all(independent(a, defs, allowed, depth + 1) for a in e.args)
    return False


def constant(e: ir.Expr) -> int | None:
    """The value of an integer literal, else None."""
    if isinstance(e, ir.Const) and isinstance(e.value, int) and not isinstance(e.value, bool):
        return e.value
    return None


def _shifted(w: RowWindow, shift: int) -> RowWindow:
    return RowWindow(w.lo + shift, w.hi + shift, w.guards)


def _widening(e: ir.Cast) -> bool:
    """An integer cast that keeps every value of its (signed) source."""
    source, target = e.value.type, e.type
    return (dtypes.is_int(source) and dtypes.is_int(target) and source.kind == "int"
            and target.kind == "int" and target._np(0).itemsize >= source._np(0).itemsize)
