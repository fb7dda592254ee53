"""Numba-compiled forward functions and derivative rules of every builtin, for generated CPU code.

Generated modules write ``from difftape._src.backends.cpu_symbols import wp_sin, adj_wp_sin``;
each name is built on first use from the builtin's registry record (never from a second copy).
"""

from __future__ import annotations

from numba import njit

from ..ops import registry

_compiled: dict[str, object] = {}


def __getattr__(name: str):
    if name in _compiled:
        return _compiled[name]
    is_adjoint = name.startswith("adj_")
    record = registry.by_symbol(name[4:] if is_adjoint else name)
    fn = None if record is None else (record.adjoint if is_adjoint else record.forward)
    if fn is None:
        raise AttributeError(f"no builtin symbol {name!r}")
    # error_model="numpy": x/0 gives inf/nan as in Warp, instead of raising.
    _compiled[name] = njit(cache=True, error_model="numpy")(fn)
    return _compiled[name]
