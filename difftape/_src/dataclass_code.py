"""Compiled code of the methods ``@dataclass`` writes, kept across processes.

``@dataclass`` writes a class's ``__init__``, ``__repr__`` (and ``__eq__``, ``__hash__``, ...) as
Python source text and compiles it with ``exec``. ``import difftape`` creates some fifty
dataclasses, and those ``exec`` calls compiled for 25 ms of a 0.13 s import (Python 3.11).
While difftape imports, :func:`begin` routes the ``exec`` that the ``dataclasses`` module calls
through :func:`_exec`, which compiles each text once per machine and bytecode version and keeps
the code object, by its exact text, in a file in the cache directory; later imports execute the
kept code. The text determines the code, so a class whose definition changed writes new text
and is compiled again. :func:`end` puts ``exec`` back and rewrites the file only when something
was compiled, keeping just the texts this import used.
"""

from __future__ import annotations

import builtins
import dataclasses
import importlib.util
import marshal
import os

from .cache_files import cache_dir, write_atomically

_FILE = f"dataclass_code_{importlib.util.MAGIC_NUMBER.hex()}.marshal"

_known: dict[str, object] = {}  # source text → code object, from the file
_used: dict[str, object] = {}  # the texts this import executed
compiled = 0  # texts this process compiled (tests read it)


def _exec(source, globals=None, locals=None):
    """``exec`` for the ``dataclasses`` module: a source text runs as its kept code object."""
    global compiled
    if source.__class__ is str:
        code = _known.get(source)
        if code is None:
            # As ``exec`` would compile it from ``dataclasses``, which has no future imports.
            code = _known[source] = compile(source, "<string>", "exec", dont_inherit=True)
            compiled += 1
        _used[source] = code
        source = code
    return builtins.exec(source, globals, locals)


def begin() -> None:
    """Load the kept code and route ``dataclasses``' ``exec`` through it."""
    if "exec" in vars(dataclasses):  # already routed (an import that failed), or not ours
        return
    try:
        with open(os.path.join(cache_dir(), _FILE), "rb") as f:
            known = marshal.loads(f.read())  # 3x faster than marshal.load(f)
        if isinstance(known, dict):
            _known.update(known)
    except (OSError, EOFError, ValueError, TypeError):  # none yet, or unreadable: compile
        pass
    dataclasses.exec = _exec


def end() -> None:
    """Put ``exec`` back; keep what this import compiled."""
    if vars(dataclasses).get("exec") is _exec:
        del dataclasses.exec
    if compiled and _used:
        try:
            write_atomically(os.path.join(cache_dir(), _FILE), marshal.dumps(_used))
        except OSError:  # a read-only cache: compile again next time
            pass
    _known.clear()
    _used.clear()
