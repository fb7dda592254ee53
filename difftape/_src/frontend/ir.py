"""The typed intermediate representation that the frontend produces and codegen consumes.

Expressions are trees of typed nodes; statements are structured (if/for/while, no goto).
Codegen never looks at Python ``ast`` nodes, only at this IR. Nodes carry a ``line`` (user file
line number) and ``text`` (the user's source line) for ``# L12:`` comments.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

# ---------------------------------------------------------------- expressions


@dataclass(eq=False)
class Expr:
    type: type


@dataclass(eq=False)
class Const(Expr):
    value: object
    weak: bool = False  # a Python literal: takes the type of the value it is combined with


@dataclass(eq=False)
class Var(Expr):
    name: str  # generated-code name of a local, scalar parameter or temporary


@dataclass(eq=False)
class ArrayRef:
    """An array parameter, possibly viewed with leading indices already applied (``row = x[k]``)."""

    param: str
    dtype: type
    ndim: int  # of the underlying parameter
    prefix: tuple[Expr, ...] = ()
    adjoint: bool = False  # the adjoint buffer of array ``param[4:]`` (in custom gradients)

    @property
    def view_ndim(self) -> int:
        return self.ndim - len(self.prefix)


@dataclass(eq=False)
class Load(Expr):
    array: ArrayRef
    indices: tuple[Expr, ...]  # full indices into the parameter (prefix included)


@dataclass(eq=False)
class Shape(Expr):
    array: ArrayRef
    axis: int  # axis of the underlying parameter


@dataclass(eq=False)
class Call(Expr):
    builtin: object  # registry.Builtin
    args: tuple[Expr, ...]


@dataclass(eq=False)
class Cast(Expr):
    value: Expr


@dataclass(eq=False)
class CheckedIndex(Cast):
    """A vector or matrix component index known only at run time, ``value`` itself, that debug
    mode checks against ``size`` (the components it picks from). Release programs are built
    from IR without these nodes (``frontend/checks.py``); to any pass that meets one it is the
    identity cast of its value."""

    size: int = 0
    what: str = ""  # the composite's type name, for the error
    line: int = 0
    text: str = ""
    file: str = ""


@dataclass(eq=False)
class BoolOp(Expr):
    op: str  # "and" | "or"
    values: tuple[Expr, ...]


# ---------------------------------------------------------------- statements


@dataclass(eq=False)
class Stmt:
    line: int = 0
    text: str = ""
    file: str = ""


@dataclass(eq=False)
class Assign(Stmt):
    target: str = ""
    value: Expr | None = None


@dataclass(eq=False)
class Store(Stmt):
    array: ArrayRef | None = None
    indices: tuple[Expr, ...] = ()
    value: Expr | None = None


@dataclass(eq=False)
class Atomic(Stmt):
    op: str = "add"  # add | sub | min | max | exch | cas
    array: ArrayRef | None = None
    indices: tuple[Expr, ...] = ()
    value: Expr | None = None
    result: str | None = None  # local receiving the old value, if used
    compare: Expr | None = None  # cas: the element is replaced only where it equals this


@dataclass(eq=False)
class If(Stmt):
    cond: Expr | None = None
    body: list[Stmt] = field(default_factory=list)
    orelse: list[Stmt] = field(default_factory=list)


@dataclass(eq=False)
class For(Stmt):
    var: str = ""
    start: Expr | None = None
    stop: Expr | None = None
    step: Expr | None = None
    body: list[Stmt] = field(default_factory=list)
    loop_id: int = 0
    exit_flags: tuple[str, ...] = ()  # flags that end the loop early (set by break/return lowering)
    reverse: bool = False  # ``reversed(range(...))``: same values, last first


@dataclass(eq=False)
class While(Stmt):
    cond: Expr | None = None
    body: list[Stmt] = field(default_factory=list)
    loop_id: int = 0
    exit_flags: tuple[str, ...] = ()


@dataclass(eq=False)
class Break(Stmt):
    loop_id: int = 0


@dataclass(eq=False)
class Continue(Stmt):
    loop_id: int = 0


@dataclass(eq=False)
class Return(Stmt):
    region: int = 0  # 0 = the kernel itself, else an inlined function call


@dataclass(eq=False)
class Region(Stmt):
    """The inlined body of a ``@wp.func`` call; ``Return`` inside it leaves only this region."""

    region: int = 0
    body: list[Stmt] = field(default_factory=list)


@dataclass(eq=False)
class CustomCall(Stmt):
    """A call of a ``@wp.func`` that has a ``@wp.func_grad``: the body runs as written in the forward
    (``replay_body`` replaces it in the adjoint's replay when given) and the reverse sweep runs
    ``grad_body`` instead of differentiating the body. Inputs are locals assigned just before."""

    inputs: list[str] = field(default_factory=list)
    results: list[str] = field(default_factory=list)
    forward_body: list[Stmt] = field(default_factory=list)
    replay_body: list[Stmt] | None = None
    grad_body: list[Stmt] = field(default_factory=list)


@dataclass(eq=False)
class GradOf(Stmt):
    """``wp.grad(f)(args)``: runs ``body`` (which computes ``result`` from the ``inputs`` locals)
    and its adjoint in place, leaving d result / d input in ``grads``. A constant for the
    surrounding reverse sweep, as in Warp."""

    inputs: list[str] = field(default_factory=list)
    result: str = ""
    grads: list[str] = field(default_factory=list)
    body: list[Stmt] = field(default_factory=list)


@dataclass(eq=False)
class Print(Stmt):
    values: tuple[Expr, ...] = ()
    c_format: str | None = None  # wp.printf: C's format string for the values


@dataclass(eq=False)
class Param:
    """A kernel parameter: an array (``dtype``/``ndim``) or a scalar of ``dtype``."""

    name: str  # user's name
    symbol: str  # generated-code name
    dtype: type
    is_array: bool
    ndim: int = 0
    components: tuple[str, ...] = ()  # composite scalars: one generated parameter per component
    flat: list | None = None  # structs: the generated parameters of every leaf field


@dataclass(eq=False)
class KernelIR:
    name: str
    params: list[Param]
    body: list[Stmt]
    locals: dict[str, type]  # every local and temporary the body assigns → its type
    tid_vars: tuple[str, ...]  # locals bound by ``wp.tid()``, in dimension order (empty: no tid)
    tid_flat: str | None = None  # local bound to the flat index when ``wp.tid()`` has one target
    written_arrays: frozenset[str] = frozenset()  # params stored to (plain store)
    read_arrays: frozenset[str] = frozenset()  # params loaded from
    stored_arrays: frozenset[str] = frozenset()  # params written by plain (non-atomic) stores
    added_arrays: frozenset[str] = frozenset()  # params updated by atomic adds and subtracts

    def flat_params(self) -> list[Param]:
        """Generated-code parameters: composites split into one scalar parameter per component
        (structs contribute their flattened fields through ``Param.components`` likewise)."""
        flat = []
        for p in self.params:
            if p.flat is not None:
                flat.extend(p.flat)
            elif p.components:
                scalar = getattr(p.dtype, "_wp_scalar_type_", p.dtype)
                flat.extend(Param(f"{p.name}[{k}]", sym, scalar, False)
                            for k, sym in enumerate(p.components))
            else:
                flat.append(p)
        return flat

    @property
    def inplace_arrays(self) -> frozenset[str]:
        """Params both read and stored or added to: the adjoint needs their contents from before
        the launch, and replays the writes on them (a read after ``e[i] += x`` sees the add)."""
        return self.read_arrays & (self.stored_arrays | self.added_arrays)


def walk_stmts(stmts: list[Stmt]):
    """Yield every statement in ``stmts``, recursively, parents before children."""
    for s in stmts:
        yield s
        if isinstance(s, If):
            yield from walk_stmts(s.body)
            yield from walk_stmts(s.orelse)
        elif isinstance(s, (For, While, Region)):
            yield from walk_stmts(s.body)
        elif isinstance(s, CustomCall):  # the forward body only: the others are not user flow
            yield from walk_stmts(s.forward_body)
        elif isinstance(s, GradOf):
            yield from walk_stmts(s.body)


def walk_expr(e: Expr):
    """Yield ``e`` and every sub-expression (array-reference prefixes included)."""
    yield e
    if isinstance(e, Load):
        for sub in (*e.indices,):
            yield from walk_expr(sub)
    elif isinstance(e, Call):
        for a in e.args:
            yield from walk_expr(a)
    elif isinstance(e, Cast):
        yield from walk_expr(e.value)
    elif isinstance(e, BoolOp):
        for v in e.values:
            yield from walk_expr(v)
    elif isinstance(e, Shape):
        for p in e.array.prefix:
            yield from walk_expr(p)


_FIELD_NAMES: dict[type, tuple[str, ...]] = {}


def field_names(node: object) -> tuple[str, ...]:
    """The dataclass field names of an IR node's class (``dataclasses.fields`` builds them
    anew on every call; the passes that walk the IR ask for them thousands of times)."""
    cls = node.__class__
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = tuple(f.name for f in dataclasses.fields(cls))
    return names


def statement_exprs(s: Stmt) -> list[Expr]:
    """The expressions a statement evaluates itself (not those of nested blocks), array-view
    prefixes included."""
    out = []
    for name in field_names(s):
        value = getattr(s, name)
        values = value if isinstance(value, (list, tuple)) else (value,)
        out.extend(v for v in values if isinstance(v, Expr))
    if isinstance(getattr(s, "array", None), ArrayRef):
        out.extend(s.array.prefix)
    return out
