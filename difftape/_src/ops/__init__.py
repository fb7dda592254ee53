"""The kernel language's builtins, one record each (see ``registry``).

Importing this package imports every ops module, and that registers all builtins: after
``import difftape._src.ops``, ``registry.all_builtins()`` lists them all.
"""

from . import arithmetic, atomic, quat, random, registry, scalar, vector

__all__ = ["arithmetic", "atomic", "quat", "random", "registry", "scalar", "vector"]
