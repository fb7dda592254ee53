"""The builtin registry: one record per builtin holding its types, forward, derivative rule and test domain.

Forward code, adjoint code, both backends, Python-scope calls and the finite-difference tests all
read these records. This module stores and resolves records; it defines no builtin itself.

Conventions every record follows:
* ``forward(*inputs)`` is plain Python that Numba can compile and Python can call.
* ``adjoint(*inputs, ret, adj_ret)`` returns a tuple with one entry per input: the contribution
  to that input's adjoint, or ``None`` where the input is not differentiable.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from .. import dtypes


@dataclass(frozen=True)
class TypeVar:
    """A type placeholder: every parameter spelled with the same TypeVar binds the same concrete type."""

    name: str
    allowed: tuple[type, ...]

    def __repr__(self) -> str:
        return self.name


Float = TypeVar("Float", dtypes.FLOAT_TYPES)
Int = TypeVar("Int", dtypes.INT_TYPES)
Numeric = TypeVar("Numeric", dtypes.FLOAT_TYPES + dtypes.INT_TYPES)
AnyScalar = TypeVar("AnyScalar", dtypes.SCALAR_TYPES)


@dataclass(frozen=True)
class Overload:
    """One accepted signature: parameter name → concrete type or TypeVar, and the result type rule."""

    inputs: tuple[tuple[str, object], ...]
    output: object  # concrete (scalar or composite) type, TypeVar (same as that binding), or
    # callable(bound: dict) -> type

    def bind(self, arg_types: tuple[type, ...]) -> type | None:
        """The result type if ``arg_types`` fit this overload, else None."""
        if len(arg_types) != len(self.inputs):
            return None
        bound: dict[TypeVar, type] = {}
        for (_, spec), actual in zip(self.inputs, arg_types):
            if isinstance(spec, TypeVar):
                if actual not in spec.allowed or bound.setdefault(spec, actual) is not actual:
                    return None
            elif spec is not actual:
                return None
        if isinstance(self.output, TypeVar):
            return bound[self.output]
        if callable(self.output) and not dtypes.is_scalar_type(self.output) and \
                not hasattr(self.output, "_wp_scalar_type_"):  # a rule, not a vector type
            return self.output(bound)
        return self.output  # type: ignore[return-value]

    def signature(self) -> str:
        def spell(t: object) -> str:
            if isinstance(t, TypeVar):
                return "/".join(dtypes.type_name(a) for a in t.allowed)
            return dtypes.type_name(t)
        return "(" + ", ".join(f"{n}: {spell(t)}" for n, t in self.inputs) + ")"


@dataclass(repr=False)
class Builtin:
    """A builtin function of the kernel language (``wp.sin``, ``+``, ``wp.atomic_add``…)."""

    key: str
    group: str
    forward: Callable
    overloads: tuple[Overload, ...]
    doc: str = ""
    adjoint: Callable | None = None
    differentiable: dict[str, bool] = field(default_factory=dict)
    reason: str = ""  # why some input is not differentiable (required when one is not)
    sample: dict[str, tuple[float, float]] = field(default_factory=dict)
    reference: Callable | None = None
    side_effect: bool = False  # atomics and writes: never replayed in adjoint kernels
    operator: str | None = None  # Python operator codegen may emit instead of a call ("+", "<", "not")
    impl: str | None = None  # name of a codegen special form (atomics, tid, casts); see codegen
    tolerance: float = 1e-6  # relative tolerance of the finite-difference check
    symbol: str = ""  # name of the forward in generated code (wp_sin); the adjoint is adj_ + symbol
    # Composite builtins (impl="composite") take component lists and are expanded by the frontend
    # into scalar builtin calls, so their derivative follows from the scalar rules.
    match: Callable | None = None  # arg types -> result type, or None when they do not fit
    examples: tuple = ()  # argument type tuples the tests instantiate
    # Random draws (impl="random", ``wp.randf(state)``): the frontend advances the caller's
    # state ``draws`` times and runs ``forward`` on traced scalars (the advanced states, then
    # the other arguments), as for composites.
    draws: int = 0
    hidden: bool = False  # a helper the frontend calls (the random state's step): not wp.<key>

    @property
    def param_names(self) -> tuple[str, ...]:
        if not self.overloads:
            return tuple(inspect.signature(self.forward).parameters)
        return tuple(n for n, _ in self.overloads[0].inputs)

    @property
    def is_differentiable(self) -> bool:
        return any(self.differentiable.get(n, False) for n in self.param_names)

    def set_adjoint(self, fn: Callable) -> Callable:
        """Decorator: attach ``fn(*inputs, ret, adj_ret) -> tuple`` as this builtin's derivative rule."""
        self.adjoint = fn
        return fn

    def __call__(self, *args):
        """Python-scope call (``wp.sin(0.5)``): the record of this key matching the argument types.

        Called with traced values (inside a composite builtin being expanded), it records the
        call in the tracer instead of computing.
        """
        for a in args:
            tracer = getattr(a, "_difftape_tracer", None)
            if tracer is not None:
                return tracer.call(self.key, args)
        if self.impl == "random":
            from .components import python_scope_draw

            return python_scope_draw(self.key, args)
        if self.impl == "composite" or any(hasattr(a, "_wp_scalar_type_") for a in args):
            from .components import python_scope_call

            return python_scope_call(self.key, args)
        types_ = tuple(_python_type(a) for a in args)
        found = resolve(self.key, types_) if None not in types_ else None
        if found is None:  # Python ints for int32 parameters (wp.rand_init(seed, i)): convert
            for record in _REGISTRY.get(self.key, []):
                inputs = record.overloads[0].inputs if record.overloads else ()
                if len(inputs) == len(args) and all(
                        dtypes.is_scalar_type(t) and (dtypes.is_int(t) or not isinstance(a, int))
                        for (_, t), a in zip(inputs, args)):
                    return record.forward(*(np.asarray(a).astype(t._np)[()]  # C's wrap
                                            for (_, t), a in zip(inputs, args)))
        return (found[0] if found else self).forward(*args)

    def __repr__(self) -> str:
        return f"<difftape builtin {self.key}>"

    def resolve(self, arg_types: tuple[type, ...]) -> type | None:
        if self.match is not None:
            return self.match(arg_types)
        for ov in self.overloads:
            result = ov.bind(arg_types)
            if result is not None:
                return result
        return None


def _python_type(value: object) -> type | None:
    """The kernel type a Python-scope argument would have (Python float → float64, int → int64)."""
    if isinstance(value, bool):
        return dtypes.bool_
    if isinstance(value, int):
        return dtypes.int64
    if isinstance(value, float):
        return dtypes.float64
    return dtypes.normalize_dtype(getattr(value, "dtype", None)) if hasattr(value, "dtype") else None


_REGISTRY: dict[str, list[Builtin]] = {}
_BY_SYMBOL: dict[str, Builtin] = {}


def builtin(
    key: str | None = None,
    *,
    group: str,
    inputs: dict[str, object] | None = None,
    output: object = None,
    overloads: list[tuple[dict[str, object], object]] | None = None,
    differentiable: dict[str, bool] | bool = True,
    reason: str = "",
    sample: dict[str, tuple[float, float]] | None = None,
    reference: Callable | None = None,
    side_effect: bool = False,
    operator: str | None = None,
    impl: str | None = None,
    tolerance: float = 1e-6,
    hidden: bool = False,
) -> Callable[[Callable], Builtin]:
    """Register the decorated plain-Python function as a builtin.

    Give either ``inputs``/``output`` (one overload) or ``overloads`` (a list of (inputs, output)).
    ``differentiable`` is a bool for all inputs or a dict per input name. Attach the derivative
    rule afterwards with ``@record.set_adjoint``.
    """

    def decorate(fn: Callable) -> Builtin:
        sigs = overloads if overloads is not None else [(inputs or {}, output)]
        ovs = tuple(Overload(tuple(ins.items()), out) for ins, out in sigs)
        names = [n for n, _ in ovs[0].inputs]
        diff = ({n: differentiable for n in names} if isinstance(differentiable, bool)
                else {n: differentiable.get(n, False) for n in names})
        record = Builtin(
            key=key or fn.__name__, group=group, forward=fn, overloads=ovs,
            doc=(fn.__doc__ or "").strip(), differentiable=diff, reason=reason,
            sample=dict(sample or {}), reference=reference, side_effect=side_effect,
            operator=operator, impl=impl, tolerance=tolerance, hidden=hidden,
        )
        return _register(record)

    return decorate


def _register(record: Builtin) -> Builtin:
    same_key = _REGISTRY.setdefault(record.key, [])
    record.symbol = f"wp_{record.key}" + (f"_{len(same_key)}" if same_key else "")
    same_key.append(record)
    _BY_SYMBOL[record.symbol] = record
    return record


def composite(
    key: str | None = None,
    *,
    group: str,
    match: Callable,
    examples: list[tuple],
    differentiable: dict[str, bool] | bool = True,
    reason: str = "",
    sample: dict[str, tuple[float, float]] | None = None,
    tolerance: float = 1e-6,
) -> Callable[[Callable], Builtin]:
    """Register a builtin on vectors/matrices/quaternions/transforms, written over components.

    The decorated function receives vectors as lists of components and matrices as lists of
    rows, and returns a scalar, a list or a list of rows. It must be branch-free (use ``where``):
    inside kernels it is run on traced scalars and becomes scalar builtin calls, so its
    derivative is exact by construction. ``match(arg_types)`` returns the result type or None.
    """

    def decorate(fn: Callable) -> Builtin:
        names = list(inspect.signature(fn).parameters)
        diff = ({n: differentiable for n in names} if isinstance(differentiable, bool)
                else {n: differentiable.get(n, False) for n in names})
        record = Builtin(
            key=key or fn.__name__.rstrip("_"), group=group, forward=fn, overloads=(),
            doc=(fn.__doc__ or "").strip(), differentiable=diff, reason=reason,
            sample=dict(sample or {n: (-2.0, 2.0) for n in names}), impl="composite",
            tolerance=tolerance, match=match, examples=tuple(examples),
        )
        return _register(record)

    return decorate


def random_draw(
    key: str,
    *,
    group: str,
    inputs: dict[str, object],
    output: object,
    draws: int,
    differentiable: dict[str, bool] | bool = False,
    reason: str = "",
) -> Callable[[Callable], Builtin]:
    """Register a function of a random state that advances it in place (``wp.randf(state)``).

    ``inputs`` starts with the state (a uint32 local of the caller). The decorated function
    receives the ``draws`` successive states, then the other inputs, as traced scalars, and
    returns a scalar or a component list: inside kernels it becomes scalar builtin calls, so
    the gradient to its float inputs (``low``/``high``) follows from their rules.
    """

    def decorate(fn: Callable) -> Builtin:
        names = list(inputs)
        diff = ({n: differentiable for n in names} if isinstance(differentiable, bool)
                else {n: differentiable.get(n, False) for n in names})
        record = Builtin(
            key=key, group=group, forward=fn, overloads=(Overload(tuple(inputs.items()), output),),
            doc=(fn.__doc__ or "").strip(), differentiable=diff, reason=reason,
            impl="random", draws=draws,
        )
        return _register(record)

    return decorate


def lookup(key: str) -> list[Builtin]:
    """All records registered under ``key`` (empty if none)."""
    return _REGISTRY.get(key, [])


def resolve(key: str, arg_types: tuple[type, ...]) -> tuple[Builtin, type] | None:
    """The first record of ``key`` accepting ``arg_types`` and its result type, or None."""
    for record in _REGISTRY.get(key, []):
        result = record.resolve(arg_types)
        if result is not None:
            return record, result
    return None


def candidates(key: str, limit: int = 5) -> list[str]:
    """Readable signatures of ``key``'s overloads, at most ``limit`` of them, for error messages."""
    sigs = []
    for rec in _REGISTRY.get(key, []):
        sigs += [f"{key}{ov.signature()}" for ov in rec.overloads]
        if rec.match is not None and rec.examples:
            sigs.append(f"{key}({', '.join(dtypes.type_name(t) for t in rec.examples[0])})")
    return sigs[:limit]


def all_builtins() -> Iterator[Builtin]:
    """Every registered record (for tests, docs and stubs)."""
    for records in _REGISTRY.values():
        yield from records


def by_symbol(symbol: str) -> Builtin | None:
    """The record whose generated-code symbol is ``symbol``."""
    return _BY_SYMBOL.get(symbol)
