"""Every registered builtin under its Warp name, so ``difftape`` re-exports exactly the registry.

The first record of each key stands for the key in Python scope (``wp.sin(0.5)``); inside
kernels the type checker resolves the call over all records of that key.
"""

from __future__ import annotations

from . import registry
from . import __name__ as _ops  # noqa: F401  (importing the package registers every builtin)

__all__ = sorted({record.key for record in registry.all_builtins()})
globals().update({key: registry.lookup(key)[0] for key in __all__})
