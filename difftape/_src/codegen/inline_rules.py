"""Derivative rules of ``+ - * /``, unary ``-``/``+``, ``sqrt``, ``where`` and float32 ``sin`` and
``cos``, spelled inline in generated adjoints.

These are the registry records' rules (``ops/arithmetic.py``) written as expressions, so that the
commonest operations cost no function call, no tuple and no Numba typing work in adjoint code
(vector and matrix code is mostly these). ``tests/ops/test_inline_rules.py`` evaluates every
entry against its registry rule, so the two cannot drift apart.
"""

from __future__ import annotations

# key -> function(argument codes..., result code, adjoint code, typed zero code) -> contribution
# code per argument (None for a non-differentiable argument).
INLINE_RULES = {
    "add": lambda a, b, ret, g, zero: (g, g),
    "sub": lambda a, b, ret, g, zero: (g, f"(-{g})"),
    "mul": lambda a, b, ret, g, zero: (f"({g} * {b})", f"({g} * {a})"),
    # -(g / b) * ret: LLVM computes g / b once for both contributions.
    "div": lambda a, b, ret, g, zero: (f"({g} / {b})", f"(-({g} / {b}) * {ret})"),
    "neg": lambda a, ret, g, zero: (f"(-{g})",),
    "pos": lambda a, ret, g, zero: (g,),
    # g / (2 ret) equals the rule's 0.5 / ret * g (also ±inf, nan at ret = 0) with no float64
    # literal, which would promote float32 code.
    "sqrt": lambda x, ret, g, zero: (f"({g} / ({ret} + {ret}))",),
    "where": lambda c, a, b, ret, g, zero: (None, f"({g} if {c} else {zero})",
                                            f"({zero} if {c} else {g})"),
    # rt_sincos(x) = (sin(x), cos(x)) from one argument reduction, which LLVM computes once for
    # every sine, cosine and derivative of one angle (backends/cpu_trig.py sincos32).
    "sin": lambda x, ret, g, zero: (f"({g} * rt_sincos({x})[1])",),
    "cos": lambda x, ret, g, zero: (f"(-{g} * rt_sincos({x})[0])",),
}

# Which values each rule reads (argument positions, or "ret"): only those are computed.
INLINE_NEEDS = {"add": (), "sub": (), "neg": (), "pos": (), "mul": (0, 1), "div": (1, "ret"),
                "sqrt": ("ret",), "where": (0,), "sin": (0,), "cos": (0,)}

# Rules spelled with a float32 helper: used only where every float the call takes is a float32
# (others call the registry's rule), and the runtime helper the module must then import.
FLOAT32_ONLY = {"sin": "rt_sincos", "cos": "rt_sincos"}
