"""Derivative rules of ``+ - * /`` and unary ``-``/``+``, spelled inline in generated adjoints.

These are the registry records' rules (``ops/arithmetic.py``) written as expressions, so that the
commonest operations cost no function call, no tuple and no Numba typing work in adjoint code
(vector and matrix code is mostly these). ``tests/ops/test_inline_rules.py`` evaluates every
entry against its registry rule, so the two cannot drift apart.
"""

from __future__ import annotations

# key -> function(argument codes..., result code, adjoint code) -> contribution code per argument
INLINE_RULES = {
    "add": lambda a, b, ret, g: (g, g),
    "sub": lambda a, b, ret, g: (g, f"(-{g})"),
    "mul": lambda a, b, ret, g: (f"({g} * {b})", f"({g} * {a})"),
    "div": lambda a, b, ret, g: (f"({g} / {b})", f"(-{g} * {ret} / {b})"),
    "neg": lambda a, ret, g: (f"(-{g})",),
    "pos": lambda a, ret, g: (g,),
}

# Which values each rule reads (argument positions, or "ret"): only those are computed.
INLINE_NEEDS = {"add": (), "sub": (), "neg": (), "pos": (), "mul": (0, 1), "div": (1, "ret")}
