"""Kernel-language names that are not registry builtins: ``tid``, ``constant``, ``select``,
``static``, ``printf``.

Inside kernels the frontend recognises these objects (``_difftape_special``); from Python scope
they behave as Warp's do (``constant`` returns its value, ``tid`` raises).
"""

from __future__ import annotations


def _special(fn):
    fn._difftape_special = True
    return fn


@_special
def tid():
    """The index of the current thread (``i = wp.tid()`` or ``i, j = wp.tid()``), inside kernels."""
    raise RuntimeError("wp.tid() can only be called inside kernels")


@_special
def select(*args):
    """Removed in Warp 1.10: use ``wp.where(cond, value_if_true, value_if_false)``."""
    raise RuntimeError("wp.select() has been removed. Use wp.where(...)")


def constant(x):
    """Mark a module-level value as a compile-time constant for kernels (returns ``x``)."""
    return x


@_special
def identity(n: int, dtype=float):
    """The ``n``×``n`` identity matrix of ``dtype`` (``wp.identity(n=3, dtype=float)``)."""
    from .composite import matrix_type
    from .dtypes import normalize_dtype

    return matrix_type((n, n), normalize_dtype(dtype))([1.0 if r == c else 0.0 for r in range(n)
                                                          for c in range(n)])


@_special
def static(expr):
    """``expr`` evaluated when the kernel compiles, from the names around the kernel (module
    globals, a factory function's variables): ``if wp.static(mode == "fast"):`` keeps only the
    branch taken. In Python scope, ``expr`` itself."""
    return expr


@_special
def printf(fmt: str, *args):
    """Print ``args`` with C's ``printf`` format ``fmt`` (``wp.printf("i = %d\\n", i)``), the
    output flushed at once; in Python scope, ``fmt % args``."""
    print(fmt % args, end="")
