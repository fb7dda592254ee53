"""Float32 sin/cos/tan of the CPU backend (``backends/cpu_trig.py``): correctly rounded over the
whole float32 range, IEEE special values, the same in kernels as in Python scope, and
vectorized."""

import math
import textwrap

import numpy as np
import pytest
from numba import njit

import difftape as wp
from difftape._src.backends.cpu_trig import cos32, sin32, sincos32, tan32
from tests.fresh_process import IR_OF, run_fresh
from tests.ops.float32_accuracy import ulp_errors


@njit(cache=False)
def _sines(x, out):
    for i in range(x.shape[0]):
        out[i] = sin32(x[i])


@njit(cache=False)
def _cosines(x, out):
    for i in range(x.shape[0]):
        out[i] = cos32(x[i])


@njit(cache=False)
def _tangents(x, out):
    for i in range(x.shape[0]):
        out[i] = tan32(x[i])


@njit(cache=False)
def _sines_and_cosines(x, s, c):
    for i in range(x.shape[0]):
        s[i], c[i] = sincos32(x[i])


_LOOPS = {"sin": _sines, "cos": _cosines, "tan": _tangents}


def _hard_reductions() -> np.ndarray:
    """Float32 values nearest to multiples of pi/2, where the reduced argument cancels most."""
    k = np.unique(np.concatenate([np.arange(1, 4000), np.geomspace(4000, 1e30, 4000).round()]))
    return (k * (math.pi / 2)).astype(np.float32)


def _sample() -> np.ndarray:
    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2**32, 1_000_000, dtype=np.uint64).astype(np.uint32)
    every_exponent = bits.view(np.float32)
    moderate = rng.uniform(-20.0, 20.0, 300_000).astype(np.float32)
    x = np.concatenate([every_exponent, moderate, _hard_reductions(), -_hard_reductions()])
    return x[np.isfinite(x)]


@pytest.mark.parametrize("name", ["sin", "cos", "tan"])
def test_correctly_rounded_over_the_float32_range(name):
    x = _sample()
    got = np.empty_like(x)
    _LOOPS[name](x, got)
    exact = getattr(np, name)(x.astype(np.float64))
    errors = ulp_errors(got, exact)
    worst = int(np.argmax(errors))
    # Correct rounding is 0.5 ulp; the float64 reference itself is off by up to 2**-53.
    assert errors[worst] <= 0.5 + 1e-6, (name, x[worst], got[worst], exact[worst])


def test_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1e-38, 3.4028235e38,
                  -3.4028235e38], np.float32)
    s, c = np.empty_like(x), np.empty_like(x)
    _sines(x, s)
    _cosines(x, c)
    assert s[0] == 0.0 and not np.signbit(s[0]) and s[1] == 0.0 and np.signbit(s[1])
    assert np.isnan(s[2:5]).all() and np.isnan(c[2:5]).all()
    assert s[5] == x[5] and s[6] == x[6] and s[7] == x[7]  # sin(x) = x below 2**-12
    assert (c[[0, 1, 5, 6, 7]] == 1.0).all()
    big = x[8:].astype(np.float64)
    np.testing.assert_array_equal(s[8:], np.sin(big).astype(np.float32))
    np.testing.assert_array_equal(c[8:], np.cos(big).astype(np.float32))
    t = np.empty_like(x)
    _tangents(x, t)
    assert t[0] == 0.0 and not np.signbit(t[0]) and t[1] == 0.0 and np.signbit(t[1])
    assert np.isnan(t[2:5]).all() and t[5] == x[5] and t[6] == x[6] and t[7] == x[7]
    np.testing.assert_array_equal(t[8:], np.tan(big).astype(np.float32))


def test_sincos_is_sine_and_cosine_bit_for_bit():
    """Generated code takes every float32 sine and cosine from sincos32: it must not differ from
    sin32/cos32 in any bit (signed zeros, NaNs, every exponent)."""
    specials = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 3.4028235e38,
                         -3.4028235e38], np.float32)
    x = np.concatenate([_sample(), specials])
    s, c, s_pair, c_pair = (np.empty_like(x) for _ in range(4))
    _sines(x, s)
    _cosines(x, c)
    _sines_and_cosines(x, s_pair, c_pair)
    np.testing.assert_array_equal(s_pair.view(np.uint32), s.view(np.uint32))
    np.testing.assert_array_equal(c_pair.view(np.uint32), c.view(np.uint32))


def test_python_scope_gives_nan_for_infinite_angles():
    """``math.sin(inf)`` raises ValueError; C's sinf, and so Warp, give NaN."""
    for name in ("sin", "cos", "tan"):
        for v in (math.inf, -math.inf, math.nan):
            assert math.isnan(getattr(wp, name)(v)), name


@wp.kernel
def _trig_kernel(x: wp.array(dtype=float), s: wp.array(dtype=float), c: wp.array(dtype=float),
                 t: wp.array(dtype=float)):
    i = wp.tid()
    s[i] = wp.sin(x[i])
    c[i] = wp.cos(x[i])
    t[i] = wp.tan(x[i])


@wp.kernel
def _trig_kernel64(x: wp.array(dtype=wp.float64), s: wp.array(dtype=wp.float64),
                   c: wp.array(dtype=wp.float64), t: wp.array(dtype=wp.float64)):
    i = wp.tid()
    s[i] = wp.sin(x[i])
    c[i] = wp.cos(x[i])
    t[i] = wp.tan(x[i])


def test_kernels_agree_with_python_scope_and_float64_keeps_libm():
    values = np.concatenate([np.linspace(-7.0, 7.0, 101), [1e6, -3e9, 1e30, np.inf, np.nan]])
    x = wp.array(values.astype(np.float32), dtype=float)
    s, c, t = wp.zeros_like(x), wp.zeros_like(x), wp.zeros_like(x)
    wp.launch(_trig_kernel, dim=len(values), inputs=[x], outputs=[s, c, t])
    for name, out in (("sin", s), ("cos", c), ("tan", t)):
        python_scope = [np.float32(getattr(wp, name)(wp.float32(v))) for v in x.numpy()]
        np.testing.assert_array_equal(out.numpy(), python_scope, err_msg=name)
    x64 = wp.array(values, dtype=wp.float64)
    s64, c64, t64 = wp.zeros_like(x64), wp.zeros_like(x64), wp.zeros_like(x64)
    wp.launch(_trig_kernel64, dim=len(values), inputs=[x64], outputs=[s64, c64, t64])
    finite = values[:-2]  # Python's math calls libm's double functions (and raises for inf)
    for name, out in (("sin", s64), ("cos", c64), ("tan", t64)):
        np.testing.assert_array_equal(out.numpy()[:-2], [getattr(math, name)(v) for v in finite])
        assert np.isnan(out.numpy()[-2:]).all()


_VECTORIZED = IR_OF + textwrap.dedent("""
    import re
    import difftape as wp

    @wp.kernel
    def scaled_sine(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = wp.sin(x[i]) * x[i]

    @wp.kernel
    def scaled_tangent(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = wp.tan(x[i]) * x[i]

    for kernel in (scaled_sine, scaled_tangent):
        x = wp.array(list(range(64)), dtype=float, requires_grad=True)
        y = wp.zeros_like(x)
        tape = wp.Tape()
        with tape:
            wp.launch(kernel, dim=64, inputs=[x], outputs=[y])
        tape.backward(grads={y: wp.ones_like(y)})
        for adjoint in (False, True):  # the adjoint ran on its flags' own program
            body = ir_of(kernel, adjoint)
            print(bool(re.search(r"llvm\\.floor\\.v\\d+f64", body)),
                  bool(re.search(r"sinf|tanf|cosf|llvm\\.(sin|cos|tan)", body)))
""")


def test_float32_sine_and_tangent_loops_vectorize(tmp_path):
    """Forward and adjoint loops over wp.sin and wp.tan of a float32 array use SIMD rounding (the
    argument reduction), with no libm call left: a fresh cache, since Numba cannot inspect cached
    code."""
    out = run_fresh(tmp_path, _VECTORIZED)
    assert out == ["True", "False"] * 4, out


_ONE_REDUCTION = IR_OF + textwrap.dedent("""
    import difftape as wp

    @wp.kernel
    def sine(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = wp.sin(x[i]) * x[i]

    @wp.kernel
    def rotation(x: wp.array(dtype=float), y: wp.array(dtype=wp.quat)):
        i = wp.tid()
        y[i] = wp.quat_from_axis_angle(wp.vec3(0.0, 0.6, 0.8), x[i])

    for kernel, out in ((sine, float), (rotation, wp.quat)):
        x = wp.array(list(range(64)), dtype=float, requires_grad=True)
        y = wp.zeros(64, dtype=out, requires_grad=True)
        tape = wp.Tape()
        with tape:
            wp.launch(kernel, dim=64, inputs=[x], outputs=[y])
        tape.backward(grads={y: wp.ones_like(y)})
        print(*(ir_of(kernel, adjoint).count("@llvm.floor.") for adjoint in (False, True)))
""")


def test_sine_and_cosine_of_one_angle_share_one_reduction(tmp_path):
    """quat_from_axis_angle takes sin and cos of the half angle, and its adjoint needs both again:
    four argument reductions, which generated code spells so that LLVM folds them into one (no
    more floor calls than a kernel with a single sine). A fresh cache: Numba cannot inspect cached
    code."""
    sine_forward, sine_adjoint, rotation_forward, rotation_adjoint = map(
        int, run_fresh(tmp_path, _ONE_REDUCTION))
    assert sine_forward > 0 and sine_adjoint > 0 and rotation_forward > 0 and rotation_adjoint > 0
    # LLVM may version the two loops differently (AMD Zen 3: the sine's loop has a vectorized
    # epilogue, the rotation's not); unfolded, the rotation would have four times the sine's.
    assert rotation_forward <= sine_forward and rotation_adjoint <= sine_adjoint
