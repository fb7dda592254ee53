"""A source builder for generated Python: indentation, ``# L12:`` comments, typed literals and casts.

It knows how to spell things in generated code; it does not decide what to generate.
"""

from __future__ import annotations

import math
from contextlib import contextmanager

from .. import dtypes


class SourceBuilder:
    """Accumulates indented lines of Python source."""

    def __init__(self, indent: int = 0):
        self.lines: list[str] = []
        self.level = indent

    def line(self, text: str) -> None:
        self.lines.append("    " * self.level + text)

    def comment(self, line: int, text: str, prefix: str = "") -> None:
        if line:
            self.line(f"# {prefix}L{line}: {text}")

    @contextmanager
    def block(self, header: str):
        self.line(header)
        self.level += 1
        mark = len(self.lines)
        yield
        if all(line.lstrip().startswith("#") for line in self.lines[mark:]):
            self.line("pass")
        self.level -= 1

    def extend(self, other: SourceBuilder) -> None:
        self.lines.extend(other.lines)

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def plus(offset: int) -> str:
    """`` + offset`` / `` - |offset|`` to append to an expression; empty for 0."""
    return f" + {offset}" if offset > 0 else f" - {-offset}" if offset < 0 else ""


def type_symbol(t: type) -> str:
    """The name generated code uses to build or cast to ``t``."""
    if t is dtypes.bool_:
        return "bool"
    return t.__name__


def literal(value: object, t: type) -> str:
    """A typed literal: ``float32(0.5)``, ``int32(3)``, ``True`` — never a bare float."""
    if t is dtypes.bool_:
        return "True" if value else "False"
    if t is str:
        return repr(value)
    if dtypes.is_float(t):
        v = float(value)
        if math.isnan(v):
            text = "np.nan"
        elif math.isinf(v):
            text = "np.inf" if v > 0 else "-np.inf"
        else:
            text = repr(v)
        return f"{type_symbol(t)}({text})"
    return f"{type_symbol(t)}({int(value)})"


class ConstantPool:
    """Typed constants of a generated module, bound once at module level (``f32_0p5 =
    np.float32(0.5)``). Numba freezes such globals as typed constants, so kernels get typed
    literals without a cast call per use (each call costs Numba typing time)."""

    def __init__(self):
        self.values: dict[str, str] = {}

    def name(self, value: object, t: type) -> str:
        if t is dtypes.bool_:
            return "True" if value else "False"
        if t is str:
            return repr(value)
        text = literal(value, t)
        prefix = {"float": "f", "int": "i", "uint": "u"}[t.kind] + str(t.bits)
        v = float(value) if dtypes.is_float(t) else int(value)
        spelled = (repr(v).replace("-", "m").replace(".", "p").replace("+", "")
                   if not (isinstance(v, float) and (math.isnan(v) or math.isinf(v)))
                   else ("nan" if math.isnan(v) else "inf" if v > 0 else "minf"))
        name = f"{prefix}_{spelled}"
        inner = text[text.index("(") + 1:-1]
        self.values[name] = f"np.{t._np.__name__}({inner})"
        return name

    def definitions(self) -> str:
        return "".join(f"{n} = {v}\n" for n, v in sorted(self.values.items()))


def cast(code: str, t: type) -> str:
    return f"{type_symbol(t)}({code})"


def zero(t: type) -> str:
    return literal(False if t is dtypes.bool_ else 0, t)
