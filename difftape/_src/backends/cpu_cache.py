"""Loading compiled kernels from Numba's disk cache without rebuilding Numba's compiler state.

Before it loads a cached function, Numba's cache refreshes the target context. The first refresh
in a process imports about eighty of Numba's own lowering modules and installs their
registries: 0.3-0.45 s here, most of a warm process's first launch. Only compiling needs them,
and Numba's compiler refreshes the context itself before it compiles anything. Running cached
machine code needs the runtime (NRT) alone: the cached wrappers call its functions to unbox
arrays. So the dispatchers of difftape's generated modules and runtime helpers load through
:class:`LoadOnlyCache`, which initialises the runtime and loads, and a process that finds every
kernel in the cache never builds the compiler's tables.
"""

from __future__ import annotations

from numba.core.caching import FunctionCache
from numba.core.dispatcher import Dispatcher
from numba.core.runtime import nrt


class LoadOnlyCache(FunctionCache):
    """Numba's per-function disk cache, loading without the compiler's context refresh."""

    def load_overload(self, sig, target_context):
        nrt.rtsys.initialize(target_context)
        with self._guard_against_spurious_io_errors():
            return self._load_overload(sig, target_context)


# The Numba internals LoadOnlyCache relies on; another Numba keeps its own cache.
_SUPPORTED = all(hasattr(FunctionCache, name) for name in (
    "_load_overload", "_guard_against_spurious_io_errors")) and hasattr(nrt, "rtsys")


def load_only(dispatcher: Dispatcher) -> Dispatcher:
    """Make ``dispatcher`` (an ``@njit(cache=True)`` function) load through
    :class:`LoadOnlyCache`; anything else is returned unchanged."""
    cache = getattr(dispatcher, "_cache", None)
    if _SUPPORTED and type(cache) is FunctionCache:
        cache.__class__ = LoadOnlyCache  # same state, one method differs
    return dispatcher


def load_only_all(namespace: dict) -> None:
    """:func:`load_only` on every dispatcher among a module's globals."""
    for value in namespace.values():
        if isinstance(value, Dispatcher):
            load_only(value)
