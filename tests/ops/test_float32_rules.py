"""Builtins called on float32 values compute in float32 (``cpu_symbols._float32_copy``).

Python float literals and module constants in a rule made Numba compute a float32 call in
float64: ``asin``'s clamp called libm's double ``asin`` (forward 0.81x warp-lang's), ``pow``'s
adjoint the double ``pow`` (0.73x), ``cbrt`` both (1.1x); now 1.15x, 1.06x and 2.3x. Every
record's float32 copy is checked against the Python result in ``test_rules.py`` (Tier B).
"""

import platform
import textwrap

import numpy as np
import pytest
from numba import njit

from difftape._src.backends import cpu_symbols
from tests.fresh_process import IR_OF, run_fresh

SCALE = 2.5


def _scaled(x, shift=0.5):
    def inner(y):
        return y * SCALE + shift + 1.0
    return inner(x) + 0.25


def _closure(offset):
    def f(x):
        return x + offset
    return f


def _return_type(fn, *args):
    """The Numba type ``fn`` returns for ``args`` (Numba boxes a float32 as a Python float)."""
    compiled = njit(fn)
    compiled(*args)
    return str(compiled.nopython_signatures[0].return_type)


def test_a_float32_copy_types_literals_defaults_closures_and_globals_float32():
    x = np.float32(1.0)
    assert _return_type(_scaled, x) == "float64"
    assert _return_type(cpu_symbols._float32_copy(_scaled), x) == "float32"
    assert njit(cpu_symbols._float32_copy(_scaled))(x) == 4.25
    assert _return_type(_closure(0.1), x) == "float64"
    assert _return_type(cpu_symbols._float32_copy(_closure(0.1)), x) == "float32"


def test_the_float32_copy_leaves_the_original_alone():
    copy = cpu_symbols._float32_copy(_scaled)
    assert _scaled(1.0) == 4.25 and type(_scaled(1.0)) is float
    assert copy.__qualname__.endswith("_f32") and SCALE == 2.5 and type(SCALE) is float


_SCRIPT = IR_OF + textwrap.dedent("""
    import re
    import numpy as np
    import difftape as wp

    @wp.kernel
    def mixed(x: wp.array(dtype=float), y: wp.array(dtype=float), out: wp.array(dtype=float)):
        i = wp.tid()
        out[i] = wp.asin(x[i]) + wp.smoothstep(0.0, 1.0, x[i]) + wp.cbrt(y[i]) + y[i] ** x[i]

    wp.config.cpu_parallel = "serial"
    n = 1024
    x = wp.array(np.linspace(0.05, 0.95, n, dtype=np.float32), dtype=float, requires_grad=True)
    y = wp.array(np.linspace(0.5, 2.0, n, dtype=np.float32), dtype=float, requires_grad=True)
    out = wp.zeros(n, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(mixed, dim=n, inputs=[x, y], outputs=[out])
    tape.backward(grads={out: wp.ones_like(out)})
    xs, ys = x.numpy().astype(np.float64), y.numpy().astype(np.float64)
    want = np.arcsin(xs) + xs * xs * (3 - 2 * xs) + np.cbrt(ys) + ys ** xs
    print(bool(np.allclose(out.numpy(), want, rtol=1e-6)))
    want_dy = 1 / (3 * np.cbrt(ys) ** 2) + xs * ys ** (xs - 1)
    print(bool(np.allclose(y.grad.numpy(), want_dy, rtol=1e-5)))
    forward, adjoint = ir_of(mixed), ir_of(mixed, adjoint=True)
    libm = r"@(asin|cbrt|pow|llvm\\.pow\\.f64|llvm\\.pow\\.v\\d+f64)\\("
    print(re.search(libm, forward) is None, re.search(libm, adjoint) is None)
    # asin is cpu_inverse_trig's branch-free float32 version: no libm call at all
    print("asinf" not in forward and "llvm.asin" not in forward)
""")


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                    reason="libm symbol names are checked as x86-64 Linux spells them")
def test_float32_calls_take_libm_float_functions(tmp_path):
    assert run_fresh(tmp_path, _SCRIPT) == ["True", "True", "True", "True", "True"]
