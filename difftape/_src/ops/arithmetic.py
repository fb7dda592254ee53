"""Operator builtins: ``+ - * / % // **``, unary ``- + ~ not``, comparisons and bitwise operators.

Each record's ``operator`` is the Python operator text the code generator may emit instead of a
call. It is set only where Numba's operator has Warp's meaning for every accepted type. Warp follows
C where Python does not, so these records leave ``operator`` unset and must be called:

* ``/``, ``%`` and ``//`` on integers truncate toward zero (C), where Python floors;
* ``%`` on floats is C's ``fmod`` (the sign of the dividend), where Python's ``%`` takes the sign of
  the divisor;
* ``//`` on floats is ``floor(a / b)``, where Python's ``1.0 // 0.1`` gives 9.0 instead of 10.0.

Float ``/`` and ``**`` keep their operator, but an inline ``a / b`` only gives IEEE results
(``1/0 = inf``) when Numba compiles with ``error_model="numpy"``. The forwards below give those
results under either error model and in Python scope.

Integer division or remainder by zero is undefined in C. Here it returns 0, so no kernel crashes.
"""

from __future__ import annotations

import math
import operator

import numpy as np

from .. import dtypes
from . import exponential
from .registry import Float, Int, builtin

_FLOAT_INT = [({"a": Float, "b": Float}, Float), ({"a": Int, "b": Int}, Int)]
_UNARY_FLOAT_INT = [({"x": Float}, Float), ({"x": Int}, Int)]
_COMPARE = [({"a": Float, "b": Float}, dtypes.bool_), ({"a": Int, "b": Int}, dtypes.bool_)]
_EQUALITY = _COMPARE + [({"a": dtypes.bool_, "b": dtypes.bool_}, dtypes.bool_)]
_INT_PAIR = [({"a": Int, "b": Int}, Int)]
_SAMPLE_AB = {"a": (-3.0, 3.0), "b": (-3.0, 3.0)}
_INTEGER_ONLY = "integer results have no gradient"


# --- Addition, subtraction, multiplication, negation ----------------------------------------------


@builtin(group="Operators", overloads=_FLOAT_INT, sample=_SAMPLE_AB, reference=operator.add,
         operator="+")
def add(a, b):
    """Return ``a + b``."""
    return a + b


@add.set_adjoint
def adj_add(a, b, ret, adj_ret):
    return (adj_ret, adj_ret)


@builtin(group="Operators", overloads=_FLOAT_INT, sample=_SAMPLE_AB, reference=operator.sub,
         operator="-")
def sub(a, b):
    """Return ``a - b``."""
    return a - b


@sub.set_adjoint
def adj_sub(a, b, ret, adj_ret):
    return (adj_ret, -adj_ret)


@builtin(group="Operators", overloads=_FLOAT_INT, sample=_SAMPLE_AB, reference=operator.mul,
         operator="*")
def mul(a, b):
    """Return ``a * b``."""
    return a * b


@mul.set_adjoint
def adj_mul(a, b, ret, adj_ret):
    return (b * adj_ret, a * adj_ret)


@builtin(group="Operators", overloads=_UNARY_FLOAT_INT, sample={"x": (-3.0, 3.0)},
         reference=operator.neg, operator="-")
def neg(x):
    """Return ``-x``."""
    return -x


@neg.set_adjoint
def adj_neg(x, ret, adj_ret):
    return (-adj_ret,)


@builtin(group="Operators", overloads=_UNARY_FLOAT_INT, sample={"x": (-3.0, 3.0)},
         reference=operator.pos, operator="+")
def pos(x):
    """Return ``+x`` (``x`` unchanged)."""
    return x


@pos.set_adjoint
def adj_pos(x, ret, adj_ret):
    return (adj_ret,)


# --- Division -------------------------------------------------------------------------------------


@builtin(group="Operators", inputs={"a": Float, "b": Float}, output=Float,
         sample={"a": (-3.0, 3.0), "b": (0.5, 3.0)}, reference=operator.truediv, operator="/")
def div(a, b):
    """Return ``a / b``; dividing by zero gives ±inf, or NaN for ``0 / 0``."""
    if b == 0.0:  # IEEE a/±0 (Python would raise ZeroDivisionError)
        return a * math.copysign(math.inf, b)
    return a / b


@div.set_adjoint
def adj_div(a, b, ret, adj_ret):
    # da = g/b, db = -(g/b)·ret: one division for both (Warp's db = -g·ret/b divides twice;
    # both round twice), so 1/x at 0 gives -inf. In IEEE arithmetic g/±0 = g·(±inf).
    if b == 0.0:
        quotient = adj_ret * math.copysign(math.inf, b)
    else:
        quotient = adj_ret / b
    return (quotient, -quotient * ret)


@builtin("div", group="Operators", inputs={"a": Int, "b": Int}, output=Int,
         differentiable=False, reason=_INTEGER_ONLY,
         sample={"a": (-9, 10), "b": (1, 5)}, reference=lambda a, b: int(np.trunc(a / b)))
def div_int(a, b):
    """Return ``a / b`` rounded toward zero (C integer division); 0 when ``b`` is 0."""
    return truncated_quotient(a, b)


# --- Remainder and floor division -----------------------------------------------------------------


@builtin(group="Operators", inputs={"a": Float, "b": Float}, output=Float,
         differentiable={"a": True, "b": False},
         reason="Warp's mod passes no gradient to the divisor (SPEC §5.5 item 3)",
         sample={"a": (1.05, 1.35), "b": (0.75, 1.0)}, reference=np.fmod)
def mod(a, b):
    """Return the remainder of ``a / b`` with the sign of ``a`` (C ``fmod``)."""
    if b == 0.0:
        return math.nan
    r = abs(a) % abs(b)  # Python's % on non-negative operands is exactly fmod
    return -r if a < 0.0 else r


@mod.set_adjoint
def adj_mod(a, b, ret, adj_ret):
    return (adj_ret, None)


@builtin("mod", group="Operators", inputs={"a": Int, "b": Int}, output=Int,
         differentiable=False, reason=_INTEGER_ONLY,
         sample={"a": (-9, 10), "b": (1, 5)}, reference=np.fmod)
def mod_int(a, b):
    """Return the remainder of ``a / b`` with the sign of ``a`` (C ``%``); 0 when ``b`` is 0."""
    return truncated_remainder(a, b)


@builtin(group="Operators", inputs={"a": Float, "b": Float}, output=Float,
         differentiable=False,
         reason="piecewise constant: Warp's gradient is 0 (SPEC §5.5 item 4)",
         sample={"a": (-3.0, 3.0), "b": (0.5, 3.0)}, reference=lambda a, b: np.floor(a / b))
def floordiv(a, b):
    """Return ``floor(a / b)``."""
    if b == 0.0:
        q = a * math.copysign(math.inf, b)
    else:
        q = a / b
    if not abs(q) < 4503599627370496.0:  # |q| >= 2**52, inf or NaN: already integral
        return q
    t = math.copysign(float(int(q)), q)
    return t - 1.0 if t > q else t


@builtin("floordiv", group="Operators", inputs={"a": Int, "b": Int}, output=Int,
         differentiable=False, reason=_INTEGER_ONLY,
         sample={"a": (-9, 10), "b": (1, 5)}, reference=lambda a, b: int(np.trunc(a / b)))
def floordiv_int(a, b):
    """Return ``a / b`` rounded toward zero, as Warp's integer ``//``; 0 when ``b`` is 0."""
    return truncated_quotient(a, b)


# Integer division as C rounds it (toward zero), 0 for a divisor of 0: in Python, from the
# quotient and remainder of the magnitudes; compiled, one division instruction of a divisor made
# safe (``backends/cpu_math.py``: Python's % and // on Numba integers round toward negative
# infinity, fixed up with compares and branches, and kept a 1M-thread ``x[(i + 1) % n]`` 4x
# slower than warp-lang's).


def truncated_remainder(a, b):
    if b == 0:
        return a - a  # zero of a's type (a literal 0 would make Numba widen uint64 to float64)
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def truncated_quotient(a, b):
    if b == 0:
        return a - a
    q = abs(a) // abs(b)
    return -q if (a < 0) != (b < 0) else q


# --- Power ----------------------------------------------------------------------------------------


@builtin(group="Operators", inputs={"a": Float, "b": Float}, output=Float,
         sample={"a": (0.5, 2.5), "b": (-2.0, 2.0)}, reference=np.power, operator="**")
def pow(a, b):  # noqa: A001 - Warp's name
    """Return ``a`` raised to the power ``b``."""
    return exponential.pow(a, b)  # C's pow results where Python's math.pow raises


@pow.set_adjoint
def adj_pow(a, b, ret, adj_ret):
    # Warp: da = g·b·a^(b-1), db = g·log(a)·ret. So pow(0, 2) gives db = -inf·0 = NaN and a < 0
    # gives db = NaN, while x**2.0 at 0 gives da = 0.
    return (adj_ret * b * exponential.pow(a, b - 1.0), adj_ret * exponential.log(a) * ret)


# --- Comparisons and logic ------------------------------------------------------------------------

_COMPARISON = "comparisons have no gradient"


@builtin(group="Operators", overloads=_COMPARE, differentiable=False, reason=_COMPARISON,
         reference=operator.lt, operator="<")
def lt(a, b):
    """Return ``a < b``."""
    return a < b


@builtin(group="Operators", overloads=_COMPARE, differentiable=False, reason=_COMPARISON,
         reference=operator.le, operator="<=")
def le(a, b):
    """Return ``a <= b``."""
    return a <= b


@builtin(group="Operators", overloads=_COMPARE, differentiable=False, reason=_COMPARISON,
         reference=operator.gt, operator=">")
def gt(a, b):
    """Return ``a > b``."""
    return a > b


@builtin(group="Operators", overloads=_COMPARE, differentiable=False, reason=_COMPARISON,
         reference=operator.ge, operator=">=")
def ge(a, b):
    """Return ``a >= b``."""
    return a >= b


@builtin(group="Operators", overloads=_EQUALITY, differentiable=False, reason=_COMPARISON,
         reference=operator.eq, operator="==")
def eq(a, b):
    """Return ``a == b``."""
    return a == b


@builtin(group="Operators", overloads=_EQUALITY, differentiable=False, reason=_COMPARISON,
         reference=operator.ne, operator="!=")
def ne(a, b):
    """Return ``a != b``."""
    return a != b


@builtin(group="Operators", inputs={"x": dtypes.bool_}, output=dtypes.bool_,
         differentiable=False, reason="boolean logic has no gradient",
         reference=operator.not_, operator="not")
def logical_not(x):
    """Return ``not x``."""
    return not x


# --- Bitwise operators (integers only) ------------------------------------------------------------

_BITWISE = "bitwise operators act on integers, which have no gradient"


@builtin(group="Operators", overloads=_INT_PAIR, differentiable=False, reason=_BITWISE,
         reference=operator.and_, operator="&")
def bit_and(a, b):
    """Return the bitwise AND of ``a`` and ``b``."""
    return a & b


@builtin(group="Operators", overloads=_INT_PAIR, differentiable=False, reason=_BITWISE,
         reference=operator.or_, operator="|")
def bit_or(a, b):
    """Return the bitwise OR of ``a`` and ``b``."""
    return a | b


@builtin(group="Operators", overloads=_INT_PAIR, differentiable=False, reason=_BITWISE,
         reference=operator.xor, operator="^")
def bit_xor(a, b):
    """Return the bitwise XOR of ``a`` and ``b``."""
    return a ^ b


@builtin(group="Operators", overloads=_INT_PAIR, differentiable=False, reason=_BITWISE,
         sample={"a": (-9, 10), "b": (0, 8)}, reference=operator.lshift, operator="<<")
def lshift(a, b):
    """Return ``a`` shifted left by ``b`` bits."""
    return a << b


@builtin(group="Operators", overloads=_INT_PAIR, differentiable=False, reason=_BITWISE,
         sample={"a": (-9, 10), "b": (0, 8)}, reference=operator.rshift, operator=">>")
def rshift(a, b):
    """Return ``a`` shifted right by ``b`` bits (arithmetic shift for signed types)."""
    return a >> b


@builtin(group="Operators", inputs={"x": Int}, output=Int, differentiable=False, reason=_BITWISE,
         reference=operator.invert, operator="~")
def invert(x):
    """Return the bitwise NOT of ``x``."""
    return ~x
