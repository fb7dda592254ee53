"""Atomic array builtins: ``atomic_add``, ``atomic_sub``, ``atomic_min``, ``atomic_max``,
``atomic_exch``, ``atomic_cas``.

These records only declare names, docs and types. The code generator lowers them (``impl="atomic"``)
to an indexed read-modify-write on the array, never replays them in adjoint kernels
(``side_effect=True``), and emits their adjoints from SPEC §2.4: ``atomic_add``/``atomic_sub`` pass
``±arr.grad[i]`` to ``value``; ``atomic_min``/``atomic_max`` pass ``arr.grad[i]`` only where
``value`` equals the final stored value (or both are NaN); ``atomic_exch`` and ``atomic_cas``
(locks, flags) have no gradient, as in Warp. ``arr`` is typed with a placeholder because the
records hold scalar types only.
"""

from __future__ import annotations

from .registry import AnyScalar, Int, builtin

_ATOMIC = dict(
    group="Utility",
    inputs={"arr": AnyScalar, "i": Int, "value": AnyScalar},
    output=AnyScalar,
    differentiable=False,
    reason="array side effect: lowered by the code generator; adjoints per SPEC §2.4, "
           "checked by kernel tests",
    side_effect=True,
    impl="atomic",
)


@builtin(**_ATOMIC)
def atomic_add(arr, i, value):
    """Atomically add ``value`` onto ``arr[i]`` and return the old value."""
    raise RuntimeError("atomic_add() can only be called inside kernels")


@builtin(**_ATOMIC)
def atomic_sub(arr, i, value):
    """Atomically subtract ``value`` from ``arr[i]`` and return the old value."""
    raise RuntimeError("atomic_sub() can only be called inside kernels")


@builtin(**_ATOMIC)
def atomic_min(arr, i, value):
    """Atomically set ``arr[i]`` to ``min(arr[i], value)`` and return the old value."""
    raise RuntimeError("atomic_min() can only be called inside kernels")


@builtin(**_ATOMIC)
def atomic_max(arr, i, value):
    """Atomically set ``arr[i]`` to ``max(arr[i], value)`` and return the old value."""
    raise RuntimeError("atomic_max() can only be called inside kernels")


@builtin(**_ATOMIC)
def atomic_exch(arr, i, value):
    """Atomically replace ``arr[i]`` by ``value`` and return the old value (no gradient)."""
    raise RuntimeError("atomic_exch() can only be called inside kernels")


@builtin(**{**_ATOMIC, "inputs": {"arr": AnyScalar, "i": Int, "compare": AnyScalar,
                                  "value": AnyScalar}})
def atomic_cas(arr, i, compare, value):
    """Atomically replace ``arr[i]`` by ``value`` where it equals ``compare``; return the old."""
    raise RuntimeError("atomic_cas() can only be called inside kernels")
