"""``@wp.func`` functions: overloads, custom gradients (``@wp.func_grad``) and replays.

A Function holds one or more overloads (same name, different parameter annotations). Each
overload may carry a custom gradient and a custom replay. Kernels inline the overload chosen by
the argument types (``frontend/lower.py``); this module only stores and validates them.
"""

from __future__ import annotations

import functools
import inspect
import typing
from dataclasses import dataclass

from . import dtypes
from .frontend.source import ParsedSource, parse_function


@dataclass
class Overload:
    func: typing.Callable
    grad: typing.Callable | None = None
    replay: typing.Callable | None = None
    _parsed: ParsedSource | None = None

    def parsed(self) -> ParsedSource:
        if self._parsed is None:
            self._parsed = parse_function(self.func)
        return self._parsed

    @property
    def annotations(self) -> list[tuple[str, object]]:
        hints = inspect.get_annotations(self.func, eval_str=True)
        return [(name, hints.get(name)) for name in inspect.signature(self.func).parameters]

    @property
    def is_generic(self) -> bool:
        return any(t is typing.Any or getattr(t, "generic_dtype", False)
                   for _, t in self.annotations)


def _spell(t: object) -> str:
    if t is typing.Any:
        return "Any"
    name = getattr(t, "type_name", None)
    return name() if callable(name) else dtypes.type_name(dtypes.normalize_dtype(t) or t)


def _signature(pairs: list[tuple[str, object]]) -> str:
    return "{" + ", ".join(f"{n}: {_spell(t)}" for n, t in pairs) + "}"


def _same_type(a: object, b: object) -> bool:
    if getattr(a, "is_annotation", False) and getattr(b, "is_annotation", False):
        return a.ndim == b.ndim and a.dtype is b.dtype
    return (dtypes.normalize_dtype(a) or a) is (dtypes.normalize_dtype(b) or b)


class Function:
    """A ``@wp.func``: inlined into the kernels that call it; callable from Python too."""

    _difftape_function = True

    def __init__(self, fn, key: str | None = None):
        self.func = fn
        self.key = key or fn.__name__
        self.module = fn.__module__
        self.overloads: list[Overload] = [Overload(fn)]
        functools.update_wrapper(self, fn)

    def parsed(self) -> ParsedSource:
        return self.overloads[0].parsed()

    def add_overload(self, fn) -> None:
        new = Overload(fn)
        for k, existing in enumerate(self.overloads):
            if len(existing.annotations) == len(new.annotations) and all(
                    _same_type(a, b) for (_, a), (_, b) in zip(existing.annotations,
                                                               new.annotations)):
                self.overloads[k] = new  # a redefinition (e.g. a re-run notebook cell)
                return
        self.overloads.append(new)

    def attach_grad(self, grad_fn) -> None:
        """Attach ``grad_fn`` to the overload whose parameters it starts with (SPEC §4.1)."""
        qualname = grad_fn.__qualname__
        grad_params = list(inspect.get_annotations(grad_fn, eval_str=True).items())
        names = list(inspect.signature(grad_fn).parameters)
        hints = dict(grad_params)
        grad_pairs = [(n, hints.get(n)) for n in names]
        if any(t is typing.Any or getattr(t, "generic_dtype", False) for _, t in grad_pairs):
            raise RuntimeError(f"Cannot define custom grad definition for {self.key} since the "
                               "provided grad function has generic input arguments.")
        matches = []
        for ov in self.overloads:
            fwd = ov.annotations
            if len(grad_pairs) >= len(fwd) and all(
                    _same_type(a, b) for (_, a), (_, b) in zip(fwd, grad_pairs)):
                matches.append(ov)
        if not matches:
            if len(self.overloads) == 1:
                ov = self.overloads[0]
                if ov.is_generic:
                    raise RuntimeError(f"Cannot define custom grad definition for {self.key} "
                                       "since functions with generic input arguments are not "
                                       "yet supported.")
                raise RuntimeError(
                    f"Gradient function {qualname} for function {self.key} has an incorrect "
                    "signature. The arguments must match the forward function arguments plus "
                    "the adjoint variables corresponding to the return variables:\n"
                    f"{_signature(ov.annotations)}")
            raise RuntimeError(f"No function overload found for gradient function {qualname} "
                               f"for function {self.key}")
        matches[0].grad = grad_fn

    def attach_replay(self, replay_fn) -> None:
        """Attach ``replay_fn`` to the overload with exactly its parameter types (SPEC §4.2)."""
        hints = inspect.get_annotations(replay_fn, eval_str=True)
        pairs = [(n, hints.get(n)) for n in inspect.signature(replay_fn).parameters]
        for ov in self.overloads:
            if ov.is_generic:
                continue
            if len(ov.annotations) == len(pairs) and all(
                    _same_type(a, b) for (_, a), (_, b) in zip(ov.annotations, pairs)):
                ov.replay = replay_fn
                return
        if all(ov.is_generic for ov in self.overloads):
            raise RuntimeError(f"Cannot define custom replay definition for {self.key} since "
                               "functions with generic input arguments are not yet supported.")
        raise RuntimeError(f"Could not find forward definition of function {self.key} that "
                           f"matches custom replay definition with arguments:\n"
                           f"{_signature(pairs)}")

    def __call__(self, *args, **kwargs):
        return self.func(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<difftape function {self.key}>"


_FUNCTIONS: dict[tuple[str, str], Function] = {}


def func(f=None, *, name: str | None = None):
    """Decorator for functions callable from kernels (inlined at each call site).

    Defining another function with the same name in the same module adds an overload, chosen at
    each call by the argument types. ``typing.Any`` parameters make a generic function.
    """

    def wrap(fn):
        key = (fn.__module__, fn.__qualname__ if name is None else name)
        existing = _FUNCTIONS.get(key)
        if existing is not None and "<locals>" not in fn.__qualname__:
            existing.add_overload(fn)
            return existing
        function = Function(fn, key=name)
        _FUNCTIONS[key] = function
        return function

    return wrap(f) if f is not None else wrap


def func_grad(forward: Function):
    """Decorator: a custom gradient for ``forward`` (``wp.adjoint[x] += ...`` in its body).

    Its parameters are the forward parameters followed by one adjoint per return value. It
    replaces the generated adjoint wherever ``forward`` is called from differentiated code.
    """

    def wrap(grad_fn):
        forward.attach_grad(grad_fn)
        return grad_fn

    return wrap


def func_replay(forward: Function):
    """Decorator: a body that replaces ``forward``'s during the adjoint's replay (SPEC §4.2)."""

    def wrap(replay_fn):
        forward.attach_replay(replay_fn)
        return replay_fn

    return wrap


class _AdjointAccess:
    """``wp.adjoint[x]`` inside ``@wp.func_grad`` bodies: the adjoint of parameter ``x``."""

    _difftape_adjoint_access = True

    def __getitem__(self, item):
        raise RuntimeError("wp.adjoint[...] can only be used inside @wp.func_grad functions")


adjoint = _AdjointAccess()


def grad(function):
    """``wp.grad(f)(args)``: partial derivatives of single-output ``f`` (inside kernels only)."""
    raise RuntimeError("grad() wrapper can only be called inside Warp kernels and functions.")


grad._difftape_special = True
