"""Float32 atan, atan2, asin and acos of the CPU backend (``backends/cpu_inverse_trig.py``):
correctly rounded over the float32 range, C's special values, the same in kernels as in Python
scope, and vectorized."""

import math
import re
import textwrap

import numpy as np
import pytest
from numba import njit

import difftape as wp
from difftape._src.backends.cpu_inverse_trig import acos32, asin32, atan2_32, atan32
from difftape._src.ops import trig
from tests.fresh_process import IR_OF, run_fresh
from tests.ops.float32_accuracy import same_values, ulp_errors


def _loop(function):
    @njit(cache=False)
    def loop(x, out):
        for i in range(x.shape[0]):
            out[i] = function(x[i])

    return loop


@njit(cache=False)
def _atan2_loop(y, x, out):
    for i in range(y.shape[0]):
        out[i] = atan2_32(y[i], x[i])


_LOOPS = {"atan": _loop(atan32), "asin": _loop(asin32), "acos": _loop(acos32)}
_REFERENCE = {"atan": np.arctan, "asin": np.arcsin, "acos": np.arccos}


def _every_float32(n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return x[np.isfinite(x)]


def _sample(name: str) -> np.ndarray:
    rng = np.random.default_rng(21)
    if name == "atan":
        # the reduction's boundaries: tan(pi/12) and 1, where the series' argument jumps
        edges = np.float32([2.0 - math.sqrt(3.0), 1.0])
        near_edges = (edges[:, None] * (1 + np.arange(-2000, 2000) * 2.0**-23)).astype(
            np.float32).ravel()
        return np.concatenate([_every_float32(1_500_000, 22), near_edges, -near_edges,
                               rng.uniform(-8.0, 8.0, 500_000).astype(np.float32)])
    near_one = np.geomspace(2.0**-24, 1.0, 200_000)
    tiny = np.geomspace(1e-40, 1.0, 100_000)
    x = np.concatenate([rng.uniform(-1.0, 1.0, 1_000_000), 1 - near_one, -1 + near_one, tiny,
                        -tiny])
    return x.astype(np.float32)


@pytest.mark.parametrize("name", ["atan", "asin", "acos"])
def test_correctly_rounded(name):
    x = _sample(name)
    got = np.empty_like(x)
    _LOOPS[name](x, got)
    errors = ulp_errors(got, _REFERENCE[name](x.astype(np.float64)))
    worst = int(np.argmax(errors))
    assert errors[worst] <= 0.5 + 1e-6, (name, x[worst], got[worst])


def test_atan2_correctly_rounded_in_every_quadrant():
    rng = np.random.default_rng(23)
    y = np.concatenate([_every_float32(1_000_000, 24), rng.uniform(-3.0, 3.0, 500_000).astype(
        np.float32)])
    x = rng.permutation(y)
    diagonal = rng.uniform(-5.0, 5.0, 200_000).astype(np.float32)  # |y| = |x|: the swap's edge
    y = np.concatenate([y, diagonal, diagonal, np.nextafter(diagonal, np.float32(0))])
    x = np.concatenate([x, diagonal, -diagonal, diagonal])
    got = np.empty_like(y)
    _atan2_loop(y, x, got)
    errors = ulp_errors(got, np.arctan2(y.astype(np.float64), x.astype(np.float64)))
    worst = int(np.argmax(errors))
    assert errors[worst] <= 0.5 + 1e-6, (y[worst], x[worst], got[worst])


_SPECIALS = np.float32([0.0, -0.0, 1.0, -1.0, 0.5, -0.5, np.inf, -np.inf, np.nan, 1e-45, -1e-45,
                        3.4028235e38, -3.4028235e38])


def test_special_values_are_c_results():
    """Signed zeros, infinities, NaN and the domain's edges, as C's double functions give them
    rounded to float32 (glibc's atan2f(3e38, -1) is not correctly rounded; the double is)."""
    with np.errstate(invalid="ignore"):
        for name, loop in _LOOPS.items():
            got = np.empty_like(_SPECIALS)
            loop(_SPECIALS, got)
            expected = _REFERENCE[name](_SPECIALS.astype(np.float64)).astype(np.float32)
            assert same_values(got, expected).all(), (name, got, expected)
    y, x = (v.ravel() for v in np.meshgrid(_SPECIALS, _SPECIALS))
    got = np.empty_like(y)
    _atan2_loop(y, x, got)
    expected = np.arctan2(y.astype(np.float64), x.astype(np.float64)).astype(np.float32)
    bad = ~same_values(got, expected)
    assert not bad.any(), list(zip(y[bad], x[bad], got[bad], expected[bad]))
    assert got[(y == 0) & (x == 0) & np.signbit(x) & ~np.signbit(y)][0] == np.float32(math.pi)


@wp.kernel
def _inverse_kernel(x: wp.array(dtype=float), y: wp.array(dtype=float),
                    out: wp.array(dtype=float, ndim=2)):
    i = wp.tid()
    out[0, i] = wp.atan(x[i])
    out[1, i] = wp.asin(x[i])
    out[2, i] = wp.acos(x[i])
    out[3, i] = wp.atan2(y[i], x[i])


@wp.kernel
def _inverse_kernel64(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64),
                      out: wp.array(dtype=wp.float64, ndim=2)):
    i = wp.tid()
    out[0, i] = wp.atan(x[i])
    out[1, i] = wp.asin(x[i])
    out[2, i] = wp.acos(x[i])
    out[3, i] = wp.atan2(y[i], x[i])


def test_kernels_agree_with_python_scope_and_float64_keeps_libm():
    x_values = np.concatenate([np.linspace(-1.5, 1.5, 61), [0.0, -0.0, 20.0, -1e30, np.inf]])
    y_values = np.concatenate([np.linspace(2.0, -2.0, 61), [-0.0, 0.0, -np.inf, 3.0, 1.0]])
    names = ("atan", "asin", "acos")
    for dtype, kernel in ((np.float32, _inverse_kernel), (np.float64, _inverse_kernel64)):
        scalar = wp.float32 if dtype == np.float32 else wp.float64
        x = wp.array(x_values.astype(dtype), dtype=scalar)
        y = wp.array(y_values.astype(dtype), dtype=scalar)
        out = wp.zeros((4, len(x_values)), dtype=scalar)
        wp.launch(kernel, dim=len(x_values), inputs=[x, y], outputs=[out])
        got = out.numpy()
        for row, name in enumerate(names):  # asin/acos clamp their argument to [-1, 1]
            expected = [getattr(wp, name)(scalar(v)) for v in x.numpy()]
            assert same_values(got[row], np.array(expected, dtype)).all(), (dtype, name)
        expected = [wp.atan2(scalar(q), scalar(p)) for q, p in zip(y.numpy(), x.numpy())]
        assert same_values(got[3], np.array(expected, dtype)).all(), dtype
    # float64 is libm's (Python's math); the clamp first
    assert got[1][-3] == math.asin(1.0) and got[0][-1] == math.atan(math.inf)


_VECTORIZED = IR_OF + textwrap.dedent("""
    import re
    import difftape as wp

    @wp.kernel
    def scaled_atan(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = wp.atan(x[i]) * x[i]

    @wp.kernel
    def scaled_asin(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = wp.asin(x[i]) * x[i]

    @wp.kernel
    def scaled_acos(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = wp.acos(x[i]) * x[i]

    @wp.kernel
    def scaled_atan2(x: wp.array(dtype=float), y: wp.array(dtype=float)):
        i = wp.tid()
        y[i] = wp.atan2(x[i], x[i] - 0.5) * x[i]

    for name, kernel in (("atan", scaled_atan), ("asin", scaled_asin), ("acos", scaled_acos),
                         ("atan2", scaled_atan2)):
        x = wp.array([0.01 * k for k in range(64)], dtype=float, requires_grad=True)
        y = wp.zeros_like(x)
        tape = wp.Tape()
        with tape:
            wp.launch(kernel, dim=64, inputs=[x], outputs=[y])
        tape.backward(grads={y: wp.ones_like(y)})
        for adjoint in (False, True):
            ir = ir_of(kernel, adjoint)
            vector = bool(re.search(r"fdiv <\\d+ x double>", ir))
            libm = bool(re.search(r"@(atan|atan2|asin|acos)f?\\(", ir))
            print(name, adjoint, vector, libm)
""")


def test_float32_inverse_trig_loops_vectorize(tmp_path):
    """Forward loops over wp.atan, asin, acos and atan2 of a float32 array divide in vector
    registers, with no libm call left (a fresh cache: Numba cannot inspect cached code); the
    adjoints never called libm and vectorize too."""
    out = run_fresh(tmp_path, _VECTORIZED)
    expected = [[name, str(adjoint), "True", "False"] for name in ("atan", "asin", "acos", "atan2")
                for adjoint in (False, True)]
    assert out == [word for line in expected for word in line], out


@pytest.mark.parametrize("name", ["atan", "asin", "acos", "atan2"])
def test_helpers_vectorize_in_plain_numba_loops(name):
    x = np.linspace(-1.0, 1.0, 16).astype(np.float32)
    loop = _atan2_loop if name == "atan2" else _LOOPS[name]
    loop(*([x, x] if name == "atan2" else [x]), np.empty_like(x))
    assert re.search(r"fdiv <\d+ x double>", loop.inspect_llvm(loop.signatures[0])), name


def test_python_scope_helpers_are_math():
    assert trig.atan2(-0.0, -1.0) == -math.pi and trig.atan(math.inf) == math.pi / 2
    assert trig.asin(1.0) == math.pi / 2 and trig.acos(-1.0) == math.pi
