"""Every registered builtin under its Warp name, so ``difftape`` re-exports exactly the registry.

The first record of each key stands for the key (``wp.sin(0.5)`` dispatches over all records of
the key by argument types, as kernels do). Importing this module imports the ``ops`` package
first, and that registers every builtin. Hidden helpers (the random state's step) are left out.
"""

from __future__ import annotations

from . import registry

__all__ = sorted({record.key for record in registry.all_builtins() if not record.hidden})
globals().update({key: registry.lookup(key)[0] for key in __all__})
