"""Float32 exp and tanh of the CPU backend (``backends/cpu_exp.py``): correctly rounded over the
float32 range, IEEE special values, the same in kernels as in Python scope, and vectorized."""

import math
import textwrap

import numpy as np
import pytest
from numba import njit

import difftape as wp
from difftape._src.backends.cpu_exp import exp32, tanh32
from tests.fresh_process import IR_OF, run_fresh


@njit(cache=False)
def _exps(x, out):
    for i in range(x.shape[0]):
        out[i] = exp32(x[i])


@njit(cache=False)
def _tanhs(x, out):
    for i in range(x.shape[0]):
        out[i] = tanh32(x[i])


_COMPILED = {"exp": _exps, "tanh": _tanhs}


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


@pytest.mark.parametrize("name", ["exp", "tanh"])
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
    e, t = np.empty_like(x), np.empty_like(x)
    _exps(x, e)
    _tanhs(x, t)
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(e, np.exp(x.astype(np.float64)).astype(np.float32))
    assert e[0] == e[1] == 1.0 and e[3] == 0.0 and np.isinf(e[2]) and np.isnan(e[4])
    assert t[0] == 0.0 and not np.signbit(t[0]) and t[1] == 0.0 and np.signbit(t[1])
    assert t[2] == 1.0 and t[3] == -1.0 and np.isnan(t[4])
    assert t[9] == x[9] and t[10] == x[10]  # tanh(x) = x for tiny x, subnormals included
    assert t[11] == 1.0 and t[12] == -1.0


@wp.kernel
def _exp_kernel(x: wp.array(dtype=float), e: wp.array(dtype=float), t: wp.array(dtype=float)):
    i = wp.tid()
    e[i] = wp.exp(x[i])
    t[i] = wp.tanh(x[i])


@wp.kernel
def _exp_kernel64(x: wp.array(dtype=wp.float64), e: wp.array(dtype=wp.float64),
                  t: wp.array(dtype=wp.float64)):
    i = wp.tid()
    e[i] = wp.exp(x[i])
    t[i] = wp.tanh(x[i])


def test_kernels_agree_with_python_scope_and_float64_keeps_libm():
    values = np.concatenate([np.linspace(-20.0, 20.0, 101), [88.7, -103.0, 1e-20, 1e30, -1e30]])
    x = wp.array(values.astype(np.float32), dtype=float)
    e, t = wp.zeros_like(x), wp.zeros_like(x)
    wp.launch(_exp_kernel, dim=len(values), inputs=[x], outputs=[e, t])
    for k, v in enumerate(x.numpy()):
        assert e.numpy()[k] == np.float32(wp.exp(wp.float32(v)))
        assert t.numpy()[k] == np.float32(wp.tanh(wp.float32(v)))
    x64 = wp.array(values, dtype=wp.float64)
    e64, t64 = wp.zeros_like(x64), wp.zeros_like(x64)
    wp.launch(_exp_kernel64, dim=len(values), inputs=[x64], outputs=[e64, t64])
    np.testing.assert_array_equal(e64.numpy(), [math.exp(v) if v < 709 else math.inf
                                                for v in values])
    np.testing.assert_array_equal(t64.numpy(), [math.tanh(v) for v in values])


_VECTORIZED = IR_OF + textwrap.dedent("""
    import re
    import difftape as wp

    @wp.kernel
    def softish(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = wp.exp(x[i]) * wp.tanh(x[i])

    x = wp.array([0.01 * k for k in range(64)], dtype=float, requires_grad=True)
    y = wp.zeros_like(x)
    tape = wp.Tape()
    with tape:
        wp.launch(softish, dim=64, inputs=[x], outputs=[y])
    tape.backward(grads={y: wp.ones_like(y)})
    for adjoint in (False, True):
        body = ir_of(softish, adjoint)
        print(bool(re.search(r"shl <\\d+ x i64>", body)), bool(re.search(r"expf|tanhf|llvm\\.exp", body)))
""")


def test_float32_exp_loops_vectorize(tmp_path):
    """Forward and adjoint loops over wp.exp and wp.tanh of a float32 array build 2**n in vector
    registers, with no libm call left (a fresh cache: Numba cannot inspect cached code)."""
    out = run_fresh(tmp_path, _VECTORIZED)
    assert out == ["True", "False", "True", "False"], out
