"""Resolve names a kernel body uses that are not its own locals: globals, closures, Python builtins.

It returns the Python object a name stands for; deciding what that object means inside a kernel
(a builtin, a constant, a user function) is the type checker's job.
"""

from __future__ import annotations

import builtins
import inspect

_MISSING = object()


class GlobalScope:
    """The names visible to a function body from outside it: closure cells, module globals, builtins."""

    def __init__(self, fn):
        self.fn = fn
        self.closure: dict[str, object] = {}
        code = getattr(fn, "__code__", None)
        if code is not None and fn.__closure__:
            for name, cell in zip(code.co_freevars, fn.__closure__):
                try:
                    self.closure[name] = cell.cell_contents
                except ValueError:  # cell not yet filled (recursive definitions)
                    pass
        self.globals = getattr(fn, "__globals__", {})

    def lookup(self, name: str) -> object:
        """The object bound to ``name``, or ``MISSING``."""
        if name in self.closure:
            return self.closure[name]
        if name in self.globals:
            return self.globals[name]
        return getattr(builtins, name, _MISSING)

    def annotations(self) -> dict[str, object]:
        """The function's parameter annotations, with string annotations evaluated in its globals."""
        result = {}
        for name, ann in inspect.get_annotations(self.fn).items():
            if isinstance(ann, str):
                env = dict(self.globals)
                env.update(self.closure)
                try:
                    ann = eval(ann, env)  # noqa: S307 - the user's own annotation text
                except Exception:
                    pass
            result[name] = ann
        return result


MISSING = _MISSING
