"""The kernel corpus: small float64 kernels, each named by the language feature it exercises.

Every kernel is registered in ``CORPUS`` with a ``Case``: how to build its inputs (a fixed seed
per case), which array parameters are differentiable inputs, which are outputs, the launch dim,
and optionally a numpy reference of the forward. ``test_corpus.py`` checks each one against
central differences (tangent's ``functions.py`` idea, STYLE §7.8). This module only defines
kernels and data; it launches nothing.

Data is drawn away from kinks (branch thresholds, integer boundaries, ties), so that central
differences with eps = 1e-6 stay on one smooth piece of each function.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

import difftape as wp

F64 = wp.float64
N = 7


@dataclass(frozen=True)
class Case:
    """One corpus entry. Tolerances are data on the record, never ``if`` patches in tests."""

    kernel: wp.Kernel
    make: Callable[[np.random.Generator], dict[str, object]]
    inputs: tuple[str, ...]  # differentiable array parameters
    outputs: tuple[str, ...]  # array parameters whose final values are the function's result
    dim: int | tuple[int, ...]
    reference: Callable[[dict[str, object]], dict[str, np.ndarray]] | None = None
    scatter: bool = False  # several threads accumulate into one element (forward or adjoint)
    eps: float = 1e-6
    rtol: float = 1e-6
    atol: float = 1e-9

    @property
    def name(self) -> str:
        return self.kernel.key

    def rng(self) -> np.random.Generator:
        return np.random.default_rng(zlib.crc32(self.name.encode()))


CORPUS: list[Case] = []


def case(*, make, inputs, outputs, dim=N, reference=None, scatter=False, eps=1e-6, rtol=1e-6,
         atol=1e-9):
    """Register the decorated kernel in ``CORPUS`` and return it unchanged."""

    def register(kernel: wp.Kernel) -> wp.Kernel:
        CORPUS.append(Case(kernel, make, tuple(inputs), tuple(outputs), dim, reference,
                           scatter, eps, rtol, atol))
        return kernel

    return register


def uniform(rng: np.random.Generator, lo: float, hi: float, shape=N) -> np.ndarray:
    return rng.uniform(lo, hi, size=shape).astype(np.float64)


def away_from(rng: np.random.Generator, lo: float, hi: float, kinks, shape=N, gap=1e-2):
    """Uniform samples in [lo, hi] at least ``gap`` away from each value in ``kinks``."""
    out = uniform(rng, lo, hi, shape)
    for _ in range(100):
        bad = np.zeros(out.shape, bool)
        for k in kinks:
            bad |= np.abs(out - k) < gap
        if not bad.any():
            return out
        out[bad] = rng.uniform(lo, hi, size=int(bad.sum()))
    raise AssertionError("could not draw samples away from the kinks")


def zeros(shape=N) -> np.ndarray:
    return np.zeros(shape, np.float64)


# =============================================================================================
# Arithmetic and scalar builtins
# =============================================================================================


def _ref_arith_basic(a):
    x, w = a["x"], a["w"]
    return {"y": (x * x - 3.0 * x) / (1.0 + x * x) + 2.0 * x * w - -w}


@case(make=lambda r: {"x": uniform(r, -2, 2), "w": uniform(r, -1, 1), "y": zeros()},
      inputs=("x", "w"), outputs=("y",), reference=_ref_arith_basic)
@wp.kernel
def arith_basic(x: wp.array(dtype=wp.float64), w: wp.array(dtype=wp.float64),
                y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    a = x[i]
    y[i] = (a * a - 3.0 * a) / (1.0 + a * a) + 2.0 * a * w[i] - -w[i]


MOD_KINKS = [0.5 * k for k in range(7)] + [0.7 * k for k in range(5)]


@case(make=lambda r: {"x": away_from(r, 0.1, 3.0, MOD_KINKS), "y": zeros()},
      inputs=("x",), outputs=("y",))
@wp.kernel
def arith_mod_floordiv(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    # % passes the gradient to its first operand; // is piecewise constant (gradient 0).
    y[i] = x[i] % 0.7 + (x[i] // 0.5) * x[i]


def _ref_trig(a):
    x = a["x"]
    return {"y": np.sin(x) * np.cos(2.0 * x) + np.tan(x) + np.arctan(x) + np.sinh(x)
            - np.cosh(x) + np.tanh(3.0 * x)}


@case(make=lambda r: {"x": uniform(r, -1.2, 1.2), "y": zeros()},
      inputs=("x",), outputs=("y",), reference=_ref_trig)
@wp.kernel
def builtin_trig(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    v = x[i]
    y[i] = (wp.sin(v) * wp.cos(2.0 * v) + wp.tan(v) + wp.atan(v) + wp.sinh(v) - wp.cosh(v)
            + wp.tanh(3.0 * v))


@case(make=lambda r: {"x": uniform(r, -0.9, 0.9), "z": away_from(r, -2, 2, [0.0]),
                      "y": zeros()},
      inputs=("x", "z"), outputs=("y",))
@wp.kernel
def builtin_inverse_trig(x: wp.array(dtype=wp.float64), z: wp.array(dtype=wp.float64),
                         y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    y[i] = wp.asin(x[i]) * wp.acos(x[i]) + wp.atan2(x[i], z[i]) + wp.atan2(z[i], x[i] + 2.0)


def _ref_exp_log(a):
    x = a["x"]
    return {"y": np.exp(0.5 * x) + np.log(x) * np.log2(x + 1.0) - np.log10(3.0 * x)}


@case(make=lambda r: {"x": uniform(r, 0.2, 3.0), "y": zeros()},
      inputs=("x",), outputs=("y",), reference=_ref_exp_log)
@wp.kernel
def builtin_exp_log(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    y[i] = wp.exp(0.5 * x[i]) + wp.log(x[i]) * wp.log2(x[i] + 1.0) - wp.log10(3.0 * x[i])


@case(make=lambda r: {"x": uniform(r, 0.3, 2.0), "w": uniform(r, -1.5, 1.5), "y": zeros()},
      inputs=("x", "w"), outputs=("y",))
@wp.kernel
def builtin_pow_sqrt(x: wp.array(dtype=wp.float64), w: wp.array(dtype=wp.float64),
                     y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    a = x[i]
    y[i] = wp.pow(a, 2.5) + a ** 3.0 + a ** w[i] + a ** 2 + wp.sqrt(a) * wp.cbrt(w[i] + 2.0)


def _min_max_clamp_data(r):
    for _ in range(1000):
        x, w = uniform(r, -2, 2), uniform(r, -2, 2)
        margins = [x - w, x * x - w, w - 0.25 * x, x - 0.5, x + 0.5]
        if all(np.abs(m).min() > 1e-2 for m in margins):
            return {"x": x, "w": w, "y": zeros()}
    raise AssertionError("no data away from ties")


@case(make=_min_max_clamp_data, inputs=("x", "w"), outputs=("y",))
@wp.kernel
def builtin_min_max_clamp(x: wp.array(dtype=wp.float64), w: wp.array(dtype=wp.float64),
                          y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    a = x[i]
    b = w[i]
    # Python's min/max mean the kernel builtins; x and w never tie in this data.
    y[i] = (wp.min(a, b) + 2.0 * wp.max(a, b) + 3.0 * min(a * a, b) - max(b, 0.25 * a)
            + wp.clamp(a, -0.5, 0.5) * 5.0)


@case(make=lambda r: {"x": away_from(r, -2, 2, [-1.0, 0.0, 1.0]), "y": zeros()},
      inputs=("x",), outputs=("y",))
@wp.kernel
def builtin_abs_sign(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    a = x[i]
    y[i] = abs(a) * a + wp.abs(a - 3.0) + wp.sign(a) * a * a + wp.floor(a) * a


@case(make=lambda r: {"x": away_from(r, -2, 2, [0.0, 0.5]), "y": zeros(), "z": zeros()},
      inputs=("x",), outputs=("y", "z"))
@wp.kernel
def builtin_where_ternary(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64),
                          z: wp.array(dtype=wp.float64)):
    i = wp.tid()
    a = x[i]
    y[i] = wp.where(a > 0.0, a * a, a * a * a)
    z[i] = wp.sin(a) if a < 0.5 else 2.0 * a


@case(make=lambda r: {"x": uniform(r, 0.1, 0.9), "w": away_from(r, -2, 2, [0.0]),
                      "t": uniform(r, 0.0, 1.0), "y": zeros()},
      inputs=("x", "w", "t"), outputs=("y",))
@wp.kernel
def builtin_interp_angles(x: wp.array(dtype=wp.float64), w: wp.array(dtype=wp.float64),
                          t: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    y[i] = (wp.lerp(x[i], w[i], t[i]) + wp.smoothstep(0.0, 1.0, x[i]) + wp.degrees(t[i])
            * wp.radians(x[i]) + wp.copysign(t[i], w[i]))


# =============================================================================================
# Branches and boolean operators
# =============================================================================================


def _ref_if_elif_else(a):
    x = a["x"]
    return {"y": np.where(x < -0.5, x * x, np.where(x < 0.5, np.sin(x), 3.0 * x - 1.0))}


@case(make=lambda r: {"x": away_from(r, -2, 2, [-0.5, 0.5]), "y": zeros()},
      inputs=("x",), outputs=("y",), reference=_ref_if_elif_else)
@wp.kernel
def branch_if_elif_else(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    a = x[i]
    if a < -0.5:
        b = a * a
    elif a < 0.5:
        b = wp.sin(a)
    else:
        b = 3.0 * a - 1.0
    y[i] = b


@case(make=lambda r: {"x": away_from(r, -2, 2, [0.0, 1.0, -1.0]),
                      "w": away_from(r, -2, 2, [0.0]), "y": zeros()},
      inputs=("x", "w"), outputs=("y",))
@wp.kernel
def branch_nested_if(x: wp.array(dtype=wp.float64), w: wp.array(dtype=wp.float64),
                     y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    a = x[i]
    s = a
    if a > 0.0:
        if w[i] > 0.0:
            s = a * w[i]
            if a > 1.0:
                s = s * s
        else:
            s = a - w[i] * w[i]
    else:
        if a < -1.0:
            s = wp.exp(a) * w[i]
    y[i] = s


@case(make=lambda r: {"x": away_from(r, -2, 2, [0.0, 1.0]), "n": N, "y": zeros(N + 3)},
      inputs=("x",), outputs=("y",), dim=N + 3)
@wp.kernel(mode="debug")  # bounds-checked: a read of x[i] with i >= n raises IndexError
def branch_bool_ops_guard(x: wp.array(dtype=wp.float64), n: int, y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    v = wp.float64(0.0)
    if i < n and x[i] > 0.0:
        v = x[i] * x[i]
    if i >= n or x[i] > 1.0:
        v = v + 1.0
    elif not x[i] < 0.0:
        v = v * 3.0
    if i < n and (x[i] < 0.0 or not x[i] < 1.0):
        v = v + wp.sin(x[i])
    y[i] = v


# =============================================================================================
# Loops
# =============================================================================================


@case(make=lambda r: {"x": uniform(r, -1, 1), "y": zeros()},
      inputs=("x",), outputs=("y",))
@wp.kernel
def loop_static_literal(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s = x[i]
    for k in range(4):
        s = s * x[i] + wp.float64(k)
    y[i] = s


@case(make=lambda r: {"x": uniform(r, -1, 1), "w": uniform(r, -1, 1), "n": N, "y": zeros()},
      inputs=("x", "w"), outputs=("y",), scatter=True)
@wp.kernel
def loop_dynamic_runtime_bounds(x: wp.array(dtype=wp.float64), w: wp.array(dtype=wp.float64),
                                n: int, y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s = wp.float64(0.0)
    for j in range(i, n):
        s += x[j] * w[i] * wp.float64(j + 1)
    y[i] = s


def _ref_negative_step(a):
    x, n = a["x"], a["n"]
    out = np.zeros(N)
    for i in range(N):
        s = 0.0
        for j in range(n - 1, -1, -1):
            s = s * 0.5 + x[j] * (i + 1)
        out[i] = s
    return {"y": out}


@case(make=lambda r: {"x": uniform(r, -1, 1), "n": N, "y": zeros()},
      inputs=("x",), outputs=("y",), scatter=True, reference=_ref_negative_step)
@wp.kernel
def loop_negative_step(x: wp.array(dtype=wp.float64), n: int, y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s = wp.float64(0.0)
    for j in range(n - 1, -1, -1):  # order matters: s is a nonlinear function of the order
        s = s * 0.5 + x[j] * wp.float64(i + 1)
    y[i] = s


@case(make=lambda r: {"x": uniform(r, 0.5, 1.5), "a": 1, "b": N, "y": zeros()},
      inputs=("x",), outputs=("y",), scatter=True)
@wp.kernel
def loop_strided(x: wp.array(dtype=wp.float64), a: int, b: int, y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s = x[i]
    for j in range(a, b, 2):
        s = s * x[j] + wp.cos(x[j])
    y[i] = s


@case(make=lambda r: {"x": uniform(r, -1, 1), "w": uniform(r, -1, 1, 4), "y": zeros()},
      inputs=("x", "w"), outputs=("y",), scatter=True)
@wp.kernel
def loop_shape_len(x: wp.array(dtype=wp.float64), w: wp.array(dtype=wp.float64),
                   y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s = wp.float64(0.0)
    for j in range(x.shape[0]):
        s += x[j] * x[i]
    for k in range(len(w)):
        s = s + w[k] * wp.float64(k)
    y[i] = s


@case(make=lambda r: {"x": uniform(r, -1, 1), "n": N, "y": zeros()},
      inputs=("x",), outputs=("y",), scatter=True)
@wp.kernel
def loop_while(x: wp.array(dtype=wp.float64), n: int, y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s = wp.float64(0.0)
    j = int(0)
    while j < n:
        s = s + 2.0 * x[j] * x[i]
        j += 1
    y[i] = s


def _while_data(r):
    # s doubles-ish each step until it passes 10; keep the last value away from the threshold.
    for _ in range(100):
        x = uniform(r, 1.2, 2.0)
        ok = True
        for v in x:
            s = 1.0
            while s < 10.0:
                s = s * v + 0.5
            prev = (s - 0.5) / v
            ok &= abs(s - 10.0) > 1e-2 and abs(prev - 10.0) > 1e-2
        if ok:
            return {"x": x, "y": zeros(), "steps": np.zeros(N, np.int32)}
    raise AssertionError("no data away from the while threshold")


@case(make=_while_data, inputs=("x",), outputs=("y",))
@wp.kernel
def loop_while_data_dependent(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64),
                              steps: wp.array(dtype=wp.int32)):
    i = wp.tid()
    s = wp.float64(1.0)
    k = int(0)
    while s < 10.0:
        s = s * x[i] + 0.5
        k += 1
    y[i] = s
    steps[i] = k


@case(make=lambda r: {"x": away_from(r, -1, 2, [1.2]), "n": N, "y": zeros()},
      inputs=("x",), outputs=("y",), scatter=True)
@wp.kernel
def loop_break(x: wp.array(dtype=wp.float64), n: int, y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s = wp.float64(0.0)
    for j in range(n):
        if x[j] > 1.2:
            break
        s = s * x[i] + x[j] * wp.float64(j + 1)
    y[i] = s


@case(make=lambda r: {"x": away_from(r, -1, 1, [0.0]), "n": N, "y": zeros()},
      inputs=("x",), outputs=("y",), scatter=True)
@wp.kernel
def loop_continue(x: wp.array(dtype=wp.float64), n: int, y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s = wp.float64(1.0)
    for j in range(n):
        if x[j] < 0.0:
            continue
        s = s * (1.0 + x[j]) + x[i]
    y[i] = s


@case(make=lambda r: {"x": uniform(r, -1, 1), "w": uniform(r, -1, 1, 3), "n": N, "m": 3,
                      "y": zeros()},
      inputs=("x", "w"), outputs=("y",), scatter=True)
@wp.kernel
def loop_nested_carried(x: wp.array(dtype=wp.float64), w: wp.array(dtype=wp.float64), n: int,
                        m: int, y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s = x[i]
    for a in range(n):
        t = x[a]
        for b in range(m):
            s = s * 0.5 + t * w[b]
            t = t * w[b]
        s = s + wp.sin(t)
    y[i] = s


@case(make=lambda r: {"x": uniform(r, 0.5, 1.5), "n": N, "y": zeros()},
      inputs=("x",), outputs=("y",), scatter=True)
@wp.kernel
def loop_carried_product(x: wp.array(dtype=wp.float64), n: int, y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    p = x[i]
    for j in range(n):
        p = p * x[j]
    y[i] = p


@case(make=lambda r: {"x": uniform(r, -1, 1), "n": 5, "y": zeros()},
      inputs=("x",), outputs=("y",))
@wp.kernel
def loop_carried_nonlinear(x: wp.array(dtype=wp.float64), n: int, y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s = x[i]
    for j in range(n):
        s = s * x[i] + wp.sin(s)
    y[i] = s


@case(make=lambda r: {"x": uniform(r, 0.2, 1.0), "w": uniform(r, 0.5, 1.5), "n": N,
                      "y": zeros()},
      inputs=("x", "w"), outputs=("y",), scatter=True)
@wp.kernel
def loop_var_before_after(x: wp.array(dtype=wp.float64), w: wp.array(dtype=wp.float64), n: int,
                          y: wp.array(dtype=wp.float64)):
    # Warp #1694: values defined before a dynamic loop and used after it.
    i = wp.tid()
    total = wp.float64(0.0)
    norm = wp.float64(0.0)
    scale = w[i] * w[i]
    for j in range(n):
        total += x[j] * scale
        norm += w[j]
    y[i] = total / norm + scale * wp.log(norm)


# =============================================================================================
# User functions
# =============================================================================================


@wp.func
def poly(a: wp.float64, b: wp.float64):
    return a * a * b + 3.0 * a - wp.sin(b)


@wp.func
def poly_of_poly(a: wp.float64):
    return poly(a, a * 0.5) * poly(0.25, a)


@wp.func
def polar(a: wp.float64, b: wp.float64):
    r = wp.sqrt(a * a + b * b)
    return r, wp.atan2(b, a)


@wp.func
def soft_relu(a: wp.float64):
    if a < 0.0:
        return 0.1 * a
    if a > 1.0:
        return 1.0 + wp.log(a)
    return a * a


@wp.func
def power_series(a: wp.float64, terms: int):
    s = wp.float64(0.0)
    t = wp.float64(1.0)
    for k in range(terms):
        s += t
        t = t * a / wp.float64(k + 1)
    return s


@case(make=lambda r: {"x": uniform(r, -1, 1), "w": uniform(r, -1, 1), "y": zeros()},
      inputs=("x", "w"), outputs=("y",))
@wp.kernel
def func_call(x: wp.array(dtype=wp.float64), w: wp.array(dtype=wp.float64),
              y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    y[i] = poly(x[i], w[i]) + poly(w[i], 2.0)


@case(make=lambda r: {"x": uniform(r, -1, 1), "y": zeros()},
      inputs=("x",), outputs=("y",))
@wp.kernel
def func_nested(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    y[i] = poly_of_poly(x[i])


def _ref_multi_return(a):
    x, w = a["x"], a["w"]
    return {"r": np.hypot(x, w), "phi": np.arctan2(w, x) * np.hypot(x, w)}


@case(make=lambda r: {"x": away_from(r, -2, 2, [0.0]), "w": away_from(r, -2, 2, [0.0]),
                      "r": zeros(), "phi": zeros()},
      inputs=("x", "w"), outputs=("r", "phi"), reference=_ref_multi_return)
@wp.kernel
def func_multi_return(x: wp.array(dtype=wp.float64), w: wp.array(dtype=wp.float64),
                      r: wp.array(dtype=wp.float64), phi: wp.array(dtype=wp.float64)):
    i = wp.tid()
    a, b = polar(x[i], w[i])
    r[i] = a
    phi[i] = b * a


@case(make=lambda r: {"x": away_from(r, -1, 2, [0.0, 1.0]), "y": zeros()},
      inputs=("x",), outputs=("y",))
@wp.kernel
def func_early_return(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    y[i] = soft_relu(x[i]) * x[i]


@case(make=lambda r: {"x": uniform(r, -1, 1), "terms": 6, "y": zeros()},
      inputs=("x",), outputs=("y",))
@wp.kernel
def func_with_loop(x: wp.array(dtype=wp.float64), terms: int, y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    y[i] = power_series(x[i], terms) * x[i]


# =============================================================================================
# Atomics and accumulation
# =============================================================================================


def _ref_atomic_add_sub(a):
    x = a["x"]
    y = np.zeros(3)
    np.add.at(y, np.arange(N) % 3, x * x)
    return {"y": y, "z": np.array([-np.sin(x).sum()])}


@case(make=lambda r: {"x": uniform(r, -1, 1), "y": zeros(3), "z": zeros(1)},
      inputs=("x",), outputs=("y", "z"), scatter=True, reference=_ref_atomic_add_sub)
@wp.kernel
def atomic_add_sub(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64),
                   z: wp.array(dtype=wp.float64)):
    i = wp.tid()
    wp.atomic_add(y, i % 3, x[i] * x[i])
    wp.atomic_sub(z, 0, wp.sin(x[i]))


def _min_max_data(r):
    i = np.arange(12)
    for _ in range(1000):
        x = uniform(r, -2, 2, 12)
        gaps = [np.abs(np.diff(np.sort(v[i % 3 == g]))).min() for v in [2 * x] for g in range(3)]
        gaps += [np.abs(np.diff(np.sort(v[i // 4 == g]))).min() for v in [np.sin(x)]
                 for g in range(3)]
        if min(gaps) > 1e-2:  # no ties inside one atomic target
            return {"x": x, "lo": np.full(3, 10.0), "hi": np.full(3, -10.0)}
    raise AssertionError("no data without ties")


@case(make=_min_max_data, inputs=("x",), outputs=("lo", "hi"), dim=12, scatter=True)
@wp.kernel
def atomic_min_max(x: wp.array(dtype=wp.float64), lo: wp.array(dtype=wp.float64),
                   hi: wp.array(dtype=wp.float64)):
    i = wp.tid()
    wp.atomic_min(lo, i % 3, x[i] * 2.0)
    wp.atomic_max(hi, i // 4, wp.sin(x[i]))


@case(make=lambda r: {"x": uniform(r, -1, 1), "w": uniform(r, -1, 1),
                      "idx": np.array([2, 0, 1, 2, 2, 0, 1], np.int32),
                      "y": uniform(r, -1, 1, 3), "z": zeros(3)},
      inputs=("x", "w"), outputs=("y", "z"), scatter=True)
@wp.kernel
def atomic_augassign(x: wp.array(dtype=wp.float64), w: wp.array(dtype=wp.float64),
                     idx: wp.array(dtype=wp.int32), y: wp.array(dtype=wp.float64),
                     z: wp.array(dtype=wp.float64)):
    i = wp.tid()
    y[i % 3] += x[i] * w[i]
    z[idx[i]] -= wp.exp(x[i])


# =============================================================================================
# Multi-dimensional launches and arrays
# =============================================================================================


def _ref_2d(a):
    m = a["a"]
    return {"out": m * m[::-1, :] + 2.0 * m}


@case(make=lambda r: {"a": uniform(r, -1, 1, (3, 4)), "out": zeros((3, 4))},
      inputs=("a",), outputs=("out",), dim=(3, 4), scatter=True, reference=_ref_2d)
@wp.kernel
def launch_2d(a: wp.array2d(dtype=wp.float64), out: wp.array2d(dtype=wp.float64)):
    i, j = wp.tid()
    n = a.shape[0]
    out[i, j] = a[i, j] * a[n - 1 - i][j] + 2.0 * a[i][j]


@case(make=lambda r: {"a": uniform(r, -1, 1, (3, 4)), "s": zeros(3)},
      inputs=("a",), outputs=("s",), dim=(3, 4), scatter=True)
@wp.kernel
def launch_2d_row_view(a: wp.array2d(dtype=wp.float64), s: wp.array(dtype=wp.float64)):
    i, j = wp.tid()
    row = a[i]
    wp.atomic_add(s, i, row[j] * row[j] * wp.float64(j + 1))


@case(make=lambda r: {"a": uniform(r, -1, 1, (2, 3, 4)), "w": uniform(r, -1, 1, 4),
                      "out": zeros((2, 3, 4))},
      inputs=("a", "w"), outputs=("out",), dim=(2, 3, 4), scatter=True)
@wp.kernel
def launch_3d(a: wp.array3d(dtype=wp.float64), w: wp.array(dtype=wp.float64),
              out: wp.array3d(dtype=wp.float64)):
    i, j, k = wp.tid()
    out[i, j, k] = wp.sin(a[i, j, k]) * w[k] + a[i][j][k] * wp.float64(i + j)


@case(make=lambda r: {"a": uniform(r, -1, 1, (2, 2, 3, 2)), "out": zeros((2, 2))},
      inputs=("a",), outputs=("out",), dim=(2, 2, 3, 2), scatter=True)
@wp.kernel
def launch_4d(a: wp.array(dtype=wp.float64, ndim=4), out: wp.array2d(dtype=wp.float64)):
    i, j, k, l = wp.tid()
    plane = a[i, j]
    wp.atomic_add(out, i, j, plane[k, l] * a[i, j, k, l] + wp.float64(l) * a[i][j][k][l])


@case(make=lambda r: {"x": uniform(r, -1, 1, 12), "y": zeros(12)},
      inputs=("x",), outputs=("y",), dim=(3, 4))
@wp.kernel
def launch_2d_flat_tid(x: wp.array[wp.float64], y: wp.array[wp.float64]):
    i = wp.tid()  # a 2-D launch with one tid name gives the flat index
    y[i] = x[i] * x[i] * wp.float64(i)


# =============================================================================================
# Casts, constants, closures, integer index math, scalar parameters
# =============================================================================================


@case(make=lambda r: {"x": away_from(r, 0.1, 2.0, [k / 4.0 for k in range(10)]), "y": zeros()},
      inputs=("x",), outputs=("y",))
@wp.kernel
def cast_int_float(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    k = int(x[i] * 4.0)  # zero gradient: piecewise constant
    f = float(i)  # float32
    c = wp.float32(i) * wp.float32(0.5) + f
    y[i] = x[i] * wp.float64(k) + wp.float64(c) * x[i] + wp.float64(int(3.7))


@case(make=lambda r: {"x": uniform(r, 0.5, 1.5), "y": zeros()},
      inputs=("x",), outputs=("y",), eps=1e-3, rtol=1e-3, atol=1e-6)
@wp.kernel
def cast_float32_roundtrip(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64)):
    # The gradient passes through the float32 cast; the forward is rounded to float32, so this
    # case carries a looser tolerance (data on the record).
    i = wp.tid()
    a = wp.float32(x[i])
    y[i] = wp.float64(a * a) + x[i]


GAIN = 1.75
OFFSET = wp.constant(0.25)
HALF = wp.constant(wp.float64(0.5))
REPEAT = 3


@case(make=lambda r: {"x": uniform(r, -1, 1), "y": zeros()},
      inputs=("x",), outputs=("y",))
@wp.kernel
def constants_module(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s = x[i]
    for k in range(REPEAT):
        s = s * GAIN * HALF + OFFSET
    y[i] = s


def make_closure_kernel(alpha):
    @wp.kernel
    def closure_constant(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64)):
        i = wp.tid()
        y[i] = alpha * x[i] * x[i] + beta * x[i]

    beta = 2 * alpha
    return closure_constant


closure_constant = case(make=lambda r: {"x": uniform(r, -1, 1), "y": zeros()},
                        inputs=("x",), outputs=("y",),
                        reference=lambda a: {"y": 1.5 * a["x"] ** 2 + 3.0 * a["x"]},
                        )(make_closure_kernel(1.5))
closure_other_value = make_closure_kernel(-0.5)  # same source, other closure: tested apart


def _ref_int_index(a):
    x = a["x"]
    i = np.arange(2 * N)
    return {"y": x[i // 2] * (i % 3) + x[(i + 1) % N]}


@case(make=lambda r: {"x": uniform(r, -1, 1), "y": zeros(2 * N)},
      inputs=("x",), outputs=("y",), dim=2 * N, scatter=True, reference=_ref_int_index)
@wp.kernel
def int_index_math(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    y[i] = x[i // 2] * wp.float64(i % 3) + x[(i + 1) % x.shape[0]]


def _ref_scalar_params(a):
    x = a["x"]
    return {"y": x * a["scale"] * a["scale64"] + a["n"]}


@case(make=lambda r: {"x": uniform(r, -1, 1), "scale": 1.5, "scale64": -0.75, "n": 4,
                      "y": zeros()},
      inputs=("x",), outputs=("y",), reference=_ref_scalar_params)
@wp.kernel
def scalar_params(x: wp.array(dtype=wp.float64), scale: float, scale64: wp.float64, n: int,
                  y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    y[i] = x[i] * wp.float64(scale) * scale64 + wp.float64(n)


# =============================================================================================
# In-place updates, several outputs, locals
# =============================================================================================


def _ref_inplace_mul(args):
    return {"a": args["a"] * args["b"]}


@case(make=lambda r: {"a": uniform(r, -1, 1), "b": uniform(r, -1, 1)},
      inputs=("a", "b"), outputs=("a",), reference=_ref_inplace_mul)
@wp.kernel
def inplace_mul(a: wp.array(dtype=wp.float64), b: wp.array(dtype=wp.float64)):
    i = wp.tid()
    a[i] *= b[i]


@case(make=lambda r: {"a": uniform(r, -1, 1)},
      inputs=("a",), outputs=("a",))
@wp.kernel
def inplace_square(a: wp.array(dtype=wp.float64)):
    i = wp.tid()
    a[i] = a[i] * a[i]


@case(make=lambda r: {"x": uniform(r, 0.2, 1), "y": zeros(), "z": zeros(), "w": zeros()},
      inputs=("x",), outputs=("y", "z", "w"))
@wp.kernel
def stores_several_outputs(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64),
                           z: wp.array(dtype=wp.float64), w: wp.array(dtype=wp.float64)):
    i = wp.tid()
    a = x[i]
    y[i] = a * a
    z[i] = -a
    w[i] = wp.sqrt(a) + y[i]


@case(make=lambda r: {"x": uniform(r, 0.5, 1.5), "y": zeros()},
      inputs=("x",), outputs=("y",))
@wp.kernel
def local_augassign_unary(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s = x[i]
    s += 2.0
    s -= x[i] * 0.5
    s *= x[i]
    s /= 1.0 + x[i]
    t = -s
    t = +t * -x[i]
    y[i] = -t


@case(make=lambda r: {"x": uniform(r, -1, 1), "y": zeros()},
      inputs=("x",), outputs=("y",))
@wp.kernel
def local_reassigned_in_branch(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64)):
    # SPEC test_aliasing: y = x*x if x > 0 else x*x*x, written with a reassigned local
    i = wp.tid()
    v = x[i]
    if v > 0.0:
        v = v * v
    else:
        v = v * v * v
    y[i] = v


CASES = {c.name: c for c in CORPUS}
assert len(CASES) == len(CORPUS), "corpus kernel names must be unique"
