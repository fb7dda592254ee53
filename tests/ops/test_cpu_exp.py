"""Float32 exp, sinh, cosh and tanh of the CPU backend (``backends/cpu_exp.py``): correctly
rounded over the float32 range, IEEE special values, the same in kernels as in Python scope, and
vectorized."""

import math
import re
import textwrap

import numpy as np
import pytest
from numba import njit

import difftape as wp
from difftape._src.backends.cpu_exp import cosh32, exp32, sinh32, tanh32
from difftape._src.ops import exponential
from tests.fresh_process import IR_OF, run_fresh


def _loop(function):
    @njit(cache=False)
    def loop(x, out):
        for i in range(x.shape[0]):
            out[i] = function(x[i])

    return loop


_COMPILED = {"exp": _loop(exp32), "sinh": _loop(sinh32), "cosh": _loop(cosh32),
             "tanh": _loop(tanh32)}


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


def _ulp_errors(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    rounded = exact.astype(np.float32)
    ulp = np.spacing(np.abs(rounded)).astype(np.float64)
    errors = np.abs(got.astype(np.float64) - exact) / ulp
    overflow = np.isinf(rounded)
    errors[overflow] = np.where(got[overflow] == rounded[overflow], 0.0, np.inf)
    return errors


@pytest.mark.parametrize("name", ["exp", "sinh", "cosh", "tanh"])
def test_correctly_rounded_over_the_float32_range(name):
    x = _sample()
    got = np.empty_like(x)
    _COMPILED[name](x, got)
    with np.errstate(over="ignore", invalid="ignore"):  # float32 overflow: inf - inf
        exact = getattr(np, name)(x.astype(np.float64))
        errors = _ulp_errors(got, exact)
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

    for name, kernel in (("exp", scaled_exp), ("sinh", scaled_sinh), ("cosh", scaled_cosh),
                         ("tanh", scaled_tanh)):
        x = wp.array([0.01 * k for k in range(64)], dtype=float, requires_grad=True)
        y = wp.zeros_like(x)
        tape = wp.Tape()
        with tape:
            wp.launch(kernel, dim=64, inputs=[x], outputs=[y])
        tape.backward(grads={y: wp.ones_like(y)})
        for adjoint in (False, True):
            ir = ir_of(kernel, adjoint)
            vector = bool(re.search(r"shl <\\d+ x i64>", ir))
            libm = bool(re.search(r"expf|sinhf|coshf|tanhf|llvm\\.exp", ir))
            print(name, adjoint, vector, libm)
""")


def test_float32_exp_loops_vectorize(tmp_path):
    """Forward and adjoint loops over each of wp.exp, sinh, cosh and tanh of a float32 array
    build 2**n in vector registers, with no libm call left (a fresh cache: Numba cannot inspect
    cached code)."""
    out = run_fresh(tmp_path, _VECTORIZED)
    expected = [[name, str(adjoint), "True", "False"] for name in ("exp", "sinh", "cosh", "tanh")
                for adjoint in (False, True)]
    assert out == [word for line in expected for word in line], out


@pytest.mark.parametrize("name", _NAMES)
def test_helpers_vectorize_in_plain_numba_loops(name):
    """The helpers have no division-by-zero branch (``error_model="numpy"``): a plain Numba loop
    over each one is vectorized too, not only a kernel loop."""
    loop = _COMPILED[name]
    x = np.linspace(-1.0, 1.0, 16).astype(np.float32)
    loop(x, np.empty_like(x))
    ir = loop.inspect_llvm(loop.signatures[0])
    assert re.search(r"shl <\d+ x i64>", ir), name
