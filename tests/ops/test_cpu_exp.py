"""Float32 exp, sinh, cosh, tanh, log, log2, log10 and pow of the CPU backend
(``backends/cpu_exp.py``): correctly rounded over the float32 range, IEEE special values, the
same in kernels as in Python scope, and vectorized."""

import math
import re
import textwrap

import numpy as np
import pytest
from numba import njit

import difftape as wp
from difftape._src.backends.cpu_exp import (cosh32, exp32, log2_32, log10_32, log32, pow32,
                                            sinh32, tanh32)
from difftape._src.ops import exponential
from tests.fresh_process import IR_OF, run_fresh
from tests.ops.float32_accuracy import same_values, ulp_errors


def _loop(function):
    @njit(cache=False)
    def loop(x, out):
        for i in range(x.shape[0]):
            out[i] = function(x[i])

    return loop


@njit(cache=False)
def _pow_loop(a, b, out):
    for i in range(a.shape[0]):
        out[i] = pow32(a[i], b[i])


_COMPILED = {"exp": _loop(exp32), "sinh": _loop(sinh32), "cosh": _loop(cosh32),
             "tanh": _loop(tanh32), "log": _loop(log32), "log2": _loop(log2_32),
             "log10": _loop(log10_32)}


def _sample() -> np.ndarray:
    rng = np.random.default_rng(11)
    bits = rng.integers(0, 2**32, 1_000_000, dtype=np.uint64).astype(np.uint32)
    every_exponent = bits.view(np.float32)
    result_range = rng.uniform(-104.0, 89.0, 1_000_000).astype(np.float32)
    near_zero = np.geomspace(1e-30, 1.0, 200_000).astype(np.float32)
    # the reduction's boundaries, r = +-ln2/2, where n changes
    boundaries = ((np.arange(-150, 129) + 0.5) * math.log(2.0)).astype(np.float32)
    x = np.concatenate([every_exponent, result_range, near_zero, -near_zero, boundaries,
                        np.nextafter(boundaries, np.float32(np.inf))])
    return x[np.isfinite(x)]


def _positive_sample() -> np.ndarray:
    rng = np.random.default_rng(12)
    bits = rng.integers(0, 2**31, 1_500_000, dtype=np.uint64).astype(np.uint32)
    every_exponent = bits.view(np.float32)  # positive: subnormals to the largest float
    steps = np.arange(-30_000, 30_000, dtype=np.float32)
    near_one = np.concatenate([1 + steps * np.float32(2**-23), 1 + steps * np.float32(2**-24)])
    # the reduction's boundaries, mantissas either side of sqrt(2)
    boundaries = (np.float32(math.sqrt(2.0)) * np.exp2(np.arange(-149.0, 127.0))).astype(
        np.float32)
    x = np.concatenate([every_exponent, rng.uniform(0.5, 2.0, 500_000).astype(np.float32),
                        near_one, boundaries, np.nextafter(boundaries, np.float32(0)),
                        np.float32(10.0) ** np.arange(-37, 39, dtype=np.float32)])
    return x[np.isfinite(x) & (x > 0)]


@pytest.mark.parametrize("name", ["log", "log2", "log10"])
def test_logarithms_correctly_rounded_over_the_positive_float32s(name):
    x = _positive_sample()
    got = np.empty_like(x)
    _COMPILED[name](x, got)
    errors = ulp_errors(got, getattr(np, name)(x.astype(np.float64)))
    worst = int(np.argmax(errors))
    assert errors[worst] <= 0.5 + 1e-6, (name, x[worst], got[worst])
    if name != "log":  # exact where the result is an integer
        powers = np.float32(2.0 if name == "log2" else 10.0) ** np.arange(
            -10 if name == "log10" else -149, 11 if name == "log10" else 128, dtype=np.float32)
        exact = powers.astype(np.float64) == (2.0 if name == "log2" else 10.0) ** np.arange(
            -10 if name == "log10" else -149, 11 if name == "log10" else 128, dtype=np.float64)
        out = np.empty_like(powers)
        _COMPILED[name](powers, out)
        np.testing.assert_array_equal(out[exact], np.round(getattr(np, name)(
            powers[exact].astype(np.float64))))


def test_logarithm_special_values():
    x = np.array([0.0, -0.0, -1.0, -np.inf, np.inf, np.nan, 1.0, 1e-45, 3.4028235e38], np.float32)
    for name in ("log", "log2", "log10"):
        got = np.empty_like(x)
        _COMPILED[name](x, got)
        with np.errstate(divide="ignore", invalid="ignore"):
            np.testing.assert_array_equal(got, getattr(np, name)(x.astype(np.float64)).astype(
                np.float32), err_msg=name)
        assert got[0] == got[1] == -np.inf and np.isnan(got[2:4]).all() and got[6] == 0.0


def _pow_samples():
    rng = np.random.default_rng(13)
    n = 600_000
    every_base = rng.integers(0, 2**31, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    yield "every base", every_base, rng.uniform(-3.0, 3.0, n).astype(np.float32)
    yield "moderate", rng.uniform(0.0, 4.0, n).astype(np.float32), rng.uniform(
        -30.0, 30.0, n).astype(np.float32)
    yield "near 1, large exponents", rng.uniform(0.9, 1.1, n).astype(np.float32), rng.uniform(
        -1000.0, 1000.0, n).astype(np.float32)
    yield "negative base, integer exponents", -rng.uniform(0.0, 8.0, n).astype(
        np.float32), np.round(rng.uniform(-40.0, 40.0, n)).astype(np.float32)
    yield "over- and underflow edges", rng.uniform(2.0, 3.0, n).astype(np.float32), np.float32(
        128.0) / np.log2(rng.uniform(2.0, 3.0, n)).astype(np.float32) * rng.choice(
        np.float32([-1.17, -1.0, 1.0]), n)


def test_pow_correctly_rounded_but_for_rare_near_ties():
    for label, a, b in _pow_samples():
        keep = np.isfinite(a) & np.isfinite(b)
        a, b = a[keep], b[keep]
        got = np.empty_like(a)
        _pow_loop(a, b, got)
        with np.errstate(all="ignore"):
            exact = np.power(a.astype(np.float64), b.astype(np.float64))
            errors = ulp_errors(got, exact)
        worst = int(np.argmax(errors))
        # e**(b ln a) in double is within ~2**-38 relative: 0.5 ulp but a few in a million.
        assert errors[worst] <= 0.5 + 1e-4, (label, a[worst], b[worst], got[worst])
        assert np.mean(errors > 0.5 + 1e-6) < 1e-5, label


_POW_SPECIALS = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, -0.5, 3.0, -3.0, np.inf, -np.inf,
                          np.nan, 1e-45, -1e-45, 3.4028235e38, -3.4028235e38, 16777216.0, 127.5],
                         np.float32)


def test_pow_special_values_are_c_powf():
    """Equal to C's powf where either operand is special or the result is (0, inf, NaN, 1, -1);
    elsewhere within the rounding of the accuracy test (powf(3.4e38, 0.5) is a near-tie)."""
    a, b = (v.ravel() for v in np.meshgrid(_POW_SPECIALS, _POW_SPECIALS))
    got = np.empty_like(a)
    _pow_loop(a, b, got)
    with np.errstate(all="ignore"):
        c_powf = np.power(a, b)  # numpy's float32 power is C's powf
        exact = np.power(a.astype(np.float64), b.astype(np.float64))
    python_scope = np.array([exponential.pow(float(p), float(q)) for p, q in zip(a, b)])
    with np.errstate(over="ignore"):
        python_scope = python_scope.astype(np.float32)
    special = np.zeros(a.shape, bool)
    for v in (a, b, c_powf):
        special |= ~np.isfinite(v) | np.isin(v, np.float32([0.0, 1.0, -1.0]))
    for result in (got, python_scope):
        bad = special & ~same_values(result, c_powf)
        assert not bad.any(), list(zip(a[bad], b[bad], result[bad], c_powf[bad]))
        assert (ulp_errors(result[~special], exact[~special]) <= 0.5 + 1e-4).all()


def test_python_scope_pow_gives_c_results_where_math_pow_raises():
    assert math.isnan(exponential.pow(-2.0, 0.5))
    assert exponential.pow(-math.inf, 0.5) == math.inf  # not NaN: the base is not finite
    assert exponential.pow(0.0, -1.0) == math.inf and exponential.pow(-0.0, -3.0) == -math.inf
    assert exponential.pow(-0.0, -2.0) == math.inf and exponential.pow(-0.0, -0.5) == math.inf
    assert exponential.pow(10.0, 400.0) == math.inf
    assert exponential.pow(-10.0, 401.0) == -math.inf and exponential.pow(-10.0, 400.0) == math.inf
    assert exponential.pow(math.nan, 0.0) == 1.0 and exponential.pow(1.0, math.nan) == 1.0


@pytest.mark.parametrize("name", ["exp", "sinh", "cosh", "tanh"])
def test_correctly_rounded_over_the_float32_range(name):
    x = _sample()
    got = np.empty_like(x)
    _COMPILED[name](x, got)
    with np.errstate(over="ignore"):
        exact = getattr(np, name)(x.astype(np.float64))
    errors = ulp_errors(got, exact)
    worst = int(np.argmax(errors))
    # Correct rounding is 0.5 ulp; the float64 reference itself is off by up to 2**-53.
    assert errors[worst] <= 0.5 + 1e-6, (name, x[worst], got[worst], exact[worst])


def test_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 88.72283, 88.72284, -103.97208,
                  -103.98, 1e-45, -1e-45, 3.4028235e38, -3.4028235e38], np.float32)
    e, s, c, t = (np.empty_like(x) for _ in range(4))
    for name, out in (("exp", e), ("sinh", s), ("cosh", c), ("tanh", t)):
        _COMPILED[name](x, out)
    with np.errstate(over="ignore"):
        for got, reference in ((e, np.exp), (s, np.sinh), (c, np.cosh), (t, np.tanh)):
            np.testing.assert_array_equal(got, reference(x.astype(np.float64)).astype(np.float32))
    assert s[0] == 0.0 and not np.signbit(s[0]) and s[1] == 0.0 and np.signbit(s[1])
    assert s[2] == np.inf and s[3] == -np.inf and c[2] == c[3] == np.inf
    assert np.isnan(s[4]) and np.isnan(c[4]) and c[0] == c[1] == 1.0
    assert e[0] == e[1] == 1.0 and e[3] == 0.0 and np.isinf(e[2]) and np.isnan(e[4])
    assert t[0] == 0.0 and not np.signbit(t[0]) and t[1] == 0.0 and np.signbit(t[1])
    assert t[2] == 1.0 and t[3] == -1.0 and np.isnan(t[4])
    assert t[9] == x[9] and t[10] == x[10]  # tanh(x) = x for tiny x, subnormals included
    assert t[11] == 1.0 and t[12] == -1.0


@wp.kernel
def _exp_kernel(x: wp.array(dtype=float), out: wp.array(dtype=float, ndim=2)):
    i = wp.tid()
    out[0, i] = wp.exp(x[i])
    out[1, i] = wp.sinh(x[i])
    out[2, i] = wp.cosh(x[i])
    out[3, i] = wp.tanh(x[i])


@wp.kernel
def _exp_kernel64(x: wp.array(dtype=wp.float64), out: wp.array(dtype=wp.float64, ndim=2)):
    i = wp.tid()
    out[0, i] = wp.exp(x[i])
    out[1, i] = wp.sinh(x[i])
    out[2, i] = wp.cosh(x[i])
    out[3, i] = wp.tanh(x[i])


_NAMES = ("exp", "sinh", "cosh", "tanh")
_LOGARITHMS = ("log", "log2", "log10")


def test_kernels_agree_with_python_scope_and_float64_keeps_libm():
    values = np.concatenate([np.linspace(-20.0, 20.0, 101), [88.7, -103.0, 1e-20, 1e30, -1e30]])
    x = wp.array(values.astype(np.float32), dtype=float)
    out = wp.zeros((4, len(values)), dtype=float)
    wp.launch(_exp_kernel, dim=len(values), inputs=[x], outputs=[out])
    for row, name in enumerate(_NAMES):
        with np.errstate(over="ignore"):  # sinh(-103) is -inf in float32
            python_scope = [np.float32(getattr(wp, name)(wp.float32(v))) for v in x.numpy()]
        np.testing.assert_array_equal(out.numpy()[row], python_scope, err_msg=name)
    x64 = wp.array(values, dtype=wp.float64)
    out64 = wp.zeros((4, len(values)), dtype=wp.float64)
    wp.launch(_exp_kernel64, dim=len(values), inputs=[x64], outputs=[out64])
    for row, name in enumerate(_NAMES):  # Python's math calls libm's double functions
        libm = [getattr(exponential, name)(v) for v in values]
        np.testing.assert_array_equal(out64.numpy()[row], libm, err_msg=name)


@wp.kernel
def _log_pow_kernel(x: wp.array(dtype=float), y: wp.array(dtype=float),
                    out: wp.array(dtype=float, ndim=2)):
    i = wp.tid()
    out[0, i] = wp.log(x[i])
    out[1, i] = wp.log2(x[i])
    out[2, i] = wp.log10(x[i])
    out[3, i] = wp.pow(x[i], y[i])


@wp.kernel
def _log_pow_kernel64(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64),
                      out: wp.array(dtype=wp.float64, ndim=2)):
    i = wp.tid()
    out[0, i] = wp.log(x[i])
    out[1, i] = wp.log2(x[i])
    out[2, i] = wp.log10(x[i])
    out[3, i] = wp.pow(x[i], y[i])


def test_log_and_pow_kernels_agree_with_python_scope_and_float64_keeps_libm():
    x_values = np.concatenate([np.linspace(-3.0, 40.0, 87), [0.0, -0.0, 1e-30, 1e30, -2.0]])
    y_values = np.concatenate([np.linspace(-5.0, 5.0, 87), [-1.0, -3.0, 2.5, 3.0, 0.5]])
    for dtype, kernel in ((np.float32, _log_pow_kernel), (np.float64, _log_pow_kernel64)):
        scalar = wp.float32 if dtype == np.float32 else wp.float64
        x = wp.array(x_values.astype(dtype), dtype=scalar)
        y = wp.array(y_values.astype(dtype), dtype=scalar)
        out = wp.zeros((4, len(x_values)), dtype=scalar)
        wp.launch(kernel, dim=len(x_values), inputs=[x, y], outputs=[out])
        got = out.numpy()
        for row, name in enumerate(("log", "log2", "log10")):
            if dtype == np.float32:
                expected = [getattr(wp, name)(scalar(v)) for v in x.numpy()]
            else:  # Python's math calls libm's double functions
                expected = [getattr(exponential, name)(v) for v in x_values]
            assert same_values(got[row], np.array(expected, dtype)).all(), (dtype, name)
        if dtype == np.float32:
            with np.errstate(over="ignore"):
                expected = [np.float32(wp.pow(scalar(p), scalar(q)))
                            for p, q in zip(x.numpy(), y.numpy())]
        else:
            expected = [exponential.pow(p, q) for p, q in zip(x_values, y_values)]
        assert same_values(got[3], np.array(expected, dtype)).all(), (dtype, got[3], expected)


_VECTORIZED = IR_OF + textwrap.dedent("""
    import re
    import difftape as wp

    @wp.kernel
    def scaled_exp(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = wp.exp(x[i]) * x[i]

    @wp.kernel
    def scaled_sinh(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = wp.sinh(x[i]) * x[i]

    @wp.kernel
    def scaled_cosh(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = wp.cosh(x[i]) * x[i]

    @wp.kernel
    def scaled_tanh(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = wp.tanh(x[i]) * x[i]

    @wp.kernel
    def scaled_log(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = wp.log(x[i]) * x[i]

    @wp.kernel
    def scaled_log2(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = wp.log2(x[i]) * x[i]

    @wp.kernel
    def scaled_log10(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = wp.log10(x[i]) * x[i]

    @wp.kernel
    def scaled_pow(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = wp.pow(x[i], x[i] + 1.5) * x[i]

    for name, kernel in (("exp", scaled_exp), ("sinh", scaled_sinh), ("cosh", scaled_cosh),
                         ("tanh", scaled_tanh), ("log", scaled_log), ("log2", scaled_log2),
                         ("log10", scaled_log10), ("pow", scaled_pow)):
        x = wp.array([0.01 * k + 0.5 for k in range(64)], dtype=float, requires_grad=True)
        y = wp.zeros_like(x)
        tape = wp.Tape()
        with tape:
            wp.launch(kernel, dim=64, inputs=[x], outputs=[y])
        tape.backward(grads={y: wp.ones_like(y)})
        for adjoint in (False, True):
            ir = ir_of(kernel, adjoint)
            # 2**n built in vector registers (exp, pow) or the mantissa's bits masked (log)
            vector = bool(re.search(r"(shl|and) <\\d+ x i64>", ir))
            libm = bool(re.search(r"@(exp|sinh|cosh|tanh|log|log2|log10|pow)f?\\(|llvm\\.(exp|log|pow)", ir))
            print(name, adjoint, vector, libm)
""")


def test_float32_exp_log_and_pow_loops_vectorize(tmp_path):
    """Forward and adjoint loops over each of wp.exp, sinh, cosh, tanh, log, log2, log10 and pow
    of a float32 array compute in vector registers, with no libm call left (a fresh cache: Numba
    cannot inspect cached code)."""
    out = run_fresh(tmp_path, _VECTORIZED)
    expected = [[name, str(adjoint), "True", "False"] for name in _NAMES + _LOGARITHMS + ("pow",)
                for adjoint in (False, True)]
    assert out == [word for line in expected for word in line], out


@pytest.mark.parametrize("name", _NAMES + _LOGARITHMS + ("pow",))
def test_helpers_vectorize_in_plain_numba_loops(name):
    """The helpers have no division-by-zero branch (``error_model="numpy"``) and pow32 is always
    inlined: a plain Numba loop over each one is vectorized too, not only a kernel loop."""
    x = np.linspace(0.5, 1.5, 16).astype(np.float32)
    loop = _pow_loop if name == "pow" else _COMPILED[name]
    loop(*([x, x] if name == "pow" else [x]), np.empty_like(x))
    ir = loop.inspect_llvm(loop.signatures[0])
    assert re.search(r"(shl|and) <\d+ x i64>", ir), name
