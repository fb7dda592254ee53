"""What ``import difftape`` does around itself: pause and freeze Python's cyclic garbage
collector, and reuse the compiled code of its dataclasses' methods (``dataclass_code.py``).

Importing difftape imports Numba, LLVM's bindings and difftape's own tables: some 90,000
objects the collector tracks, which live as long as the process. While they are created, the
collector runs collections that traverse them and find nothing to free (0.1 s of a 0.45 s
import here), and every full collection the program runs later traverses them again. So the
import runs with the collector paused and ends with :func:`gc.freeze`, which moves every object
that exists at that point into the collector's permanent generation: later collections skip
them. ``gc.unfreeze()`` undoes it. Objects are still freed by reference counting as before;
only a reference cycle that was already unreachable when difftape was imported is never
collected. An import that fails part-way leaves the collector paused until one succeeds.
"""

from __future__ import annotations

import gc

from . import dataclass_code

# Whether the collector was enabled when an import of difftape began; None outside one. An
# import that fails leaves this set (and the collector paused), so the next attempt restores it.
_enabled_before: bool | None = None


def begin_import() -> None:
    """Pause the collector and route dataclasses' ``exec`` through the kept code (the first
    thing ``difftape/__init__.py`` does)."""
    global _enabled_before
    if _enabled_before is None:
        _enabled_before = gc.isenabled()
    gc.disable()
    dataclass_code.begin()


def end_import() -> None:
    """Restore dataclasses' ``exec``, freeze what the import created and restore the
    collector's enabled state."""
    global _enabled_before
    dataclass_code.end()
    gc.freeze()
    if _enabled_before:
        gc.enable()
    _enabled_before = None
