"""Numba answers the same questions about a generated kernel once, not once per operation.

A kernel's generated code is mostly scalar arithmetic and array element access, and Numba's
compile time grows with the number of operations: a transform-heavy adjoint of 3,000 lines makes
about 18,000 calls of ``Function.get_call_type``. Each tries the operator's typing templates in
order and formats an error message for every template that does not match before it finds the
one that does; type inference asks once per operation and lowering asks again. Yet such a
kernel has only some thirty distinct (operator, argument types) pairs. :func:`apply` installs
three shortcuts, process-wide like the LLVM options (``cpu_llvm.py``), so other Numba code
compiled in the same process gets the same answers sooner:

* ``get_call_type`` remembers its signature for a function of the ``operator`` module (``mul``,
  ``add``, ``getitem``, ``iadd``, ...) called without keywords on plain numbers, booleans,
  arrays and tuples of them. Numba's templates for these depend on the argument types alone;
  every other call (literals, user functions, overloads, classes) goes to Numba unchanged, and
  a call that matches no template is never remembered, so it raises each time.
* Lowering a binary operator first tries its operands as compile-time constants, and for an
  operand that is not one (``ir.UNDEFINED``: almost always) builds and discards a
  ``LiteralTypingError`` four times per operation. The shortcut returns the same
  ``Omitted(UNDEFINED)`` that Numba's ``_lit_or_omitted`` returns after that exception.
* ``resolve_value_type(operator.mul)`` (once per operation in typing and again in lowering)
  first asks ``typeof``, which has no answer for a builtin function and raises a ValueError
  whose message it colours, then looks the operator up among the typing context's globals. The
  shortcut looks it up first, while ``typeof`` has no rule of its own for builtin functions.

Cold compile of a transform-heavy kernel, forward and adjoint: 25% less time with the memo
alone, 6-8% more with the lowering shortcut (``docs/architecture.md`` has the whole change's
numbers). Each shortcut is skipped when this Numba lacks what it wraps.
"""

from __future__ import annotations

import operator
from types import BuiltinFunctionType

from numba.core import types

_OPERATORS = frozenset(f for f in (getattr(operator, name) for name in dir(operator))
                       if type(f) is BuiltinFunctionType)
_PLAIN = (types.Number, types.Boolean, types.Array)


def _plain(t) -> bool:
    if isinstance(t, types.Literal):
        return False
    if isinstance(t, _PLAIN):
        return True
    if isinstance(t, types.BaseTuple):
        return all(_plain(u) for u in t.types)
    return False


def memoizable(function, args, kws) -> bool:
    """Whether Numba's answer for calling ``function`` (a function type) with ``args`` depends
    on the argument types alone, so it may be remembered."""
    return (not kws and getattr(function, "typing_key", None) in _OPERATORS
            and all(_plain(t) for t in args))


def _memoize_call_types() -> None:
    try:
        from numba.core.types.functions import BaseFunction
    except ImportError:
        return
    original = getattr(BaseFunction, "get_call_type", None)
    if original is None or getattr(original, "original", None) is not None:
        return
    memo: dict = {}

    def get_call_type(self, context, args, kws):
        if not memoizable(self, args, kws):
            return original(self, context, args, kws)
        key = (self, context, tuple(args))
        signature = memo.get(key)
        if signature is None:
            signature = original(self, context, args, kws)  # raises where nothing matches
            memo[key] = signature
        return signature

    get_call_type.memo = memo
    get_call_type.original = original
    BaseFunction.get_call_type = get_call_type


def _skip_undefined_literals() -> None:
    try:
        from numba.core import ir, lowering
    except ImportError:
        return
    original = getattr(lowering, "_lit_or_omitted", None)
    if original is None or getattr(original, "original", None) is not None:
        return
    undefined = original(ir.UNDEFINED)

    def lit_or_omitted(value):
        return undefined if value is ir.UNDEFINED else original(value)

    lit_or_omitted.original = original
    lowering._lit_or_omitted = lit_or_omitted


def _operators_as_globals() -> None:
    try:
        from numba.core.typing.context import BaseContext
        from numba.core.typing.typeof import typeof_impl
    except ImportError:
        return
    original = getattr(BaseContext, "resolve_value_type", None)
    if original is None or getattr(original, "original", None) is not None or \
            not hasattr(BaseContext, "_get_global_type"):
        return
    generic = typeof_impl.dispatch(object)

    def resolve_value_type(self, val):
        if type(val) is BuiltinFunctionType and val in _OPERATORS and \
                typeof_impl.dispatch(BuiltinFunctionType) is generic:
            found = self._get_global_type(val)
            if found is not None:
                return found
        return original(self, val)

    resolve_value_type.original = original
    BaseContext.resolve_value_type = resolve_value_type


def apply() -> None:
    """Install the shortcuts (once per process: a re-imported difftape installs nothing)."""
    _memoize_call_types()
    _skip_undefined_literals()
    _operators_as_globals()
