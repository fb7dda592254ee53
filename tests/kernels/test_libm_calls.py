"""Compiled kernels call the C library's math functions directly (``backends/cpu_libm.py``), not
Numba's bridges to them, and get the C library's results."""

import ctypes
import ctypes.util
import sys
import textwrap

import llvmlite.binding as llvm
import numpy as np
import pytest

import difftape as wp
from difftape._src.backends import cpu_libm
from tests.fresh_process import run_fresh

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"),
                                reason="the direct binding is made on Linux only")


@wp.kernel
def _libm_calls(x: wp.array(dtype=wp.float64), y: wp.array(dtype=wp.float64),
                out: wp.array2d(dtype=wp.float64)):
    i = wp.tid()
    out[i, 0] = wp.exp(x[i])
    out[i, 1] = wp.sin(x[i])
    out[i, 2] = wp.tanh(x[i])
    out[i, 3] = wp.atan2(x[i], y[i])
    out[i, 4] = wp.log(y[i])


def _libm(name):
    function = getattr(ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6"), name)
    function.restype = ctypes.c_double
    function.argtypes = [ctypes.c_double] * (2 if name == "atan2" else 1)
    return function


def test_kernels_get_the_c_librarys_results_bit_for_bit():
    rng = np.random.default_rng(3)
    x = rng.uniform(-3.0, 3.0, 300)
    y = rng.uniform(0.01, 5.0, 300)
    out = wp.zeros((300, 5), dtype=wp.float64)
    wp.launch(_libm_calls, dim=300, inputs=[wp.array(x, dtype=wp.float64),
                                            wp.array(y, dtype=wp.float64)], outputs=[out])
    got = out.numpy()
    expected = np.array([[_libm("exp")(a), _libm("sin")(a), _libm("tanh")(a), _libm("atan2")(a, b),
                          _libm("log")(b)] for a, b in zip(x, y)])
    np.testing.assert_array_equal(got, expected)


def test_numbas_math_names_are_bound_to_the_c_library():
    wp.launch(_libm_calls, dim=1, inputs=[wp.zeros(1, dtype=wp.float64),
                                          wp.ones(1, dtype=wp.float64)],
              outputs=[wp.zeros((1, 5), dtype=wp.float64)])
    addresses = cpu_libm._c_library_math()
    assert {"exp", "sin", "tanh", "atan2", "log", "expf"} <= addresses.keys()
    unbound = [name for name, address in addresses.items()
               if llvm.address_of_symbol(name) != address]
    assert unbound == []


_NUMBA_FIRST = textwrap.dedent("""
    import ctypes, math
    import llvmlite.binding as llvm
    from numba import njit

    @njit
    def f(x):
        return math.exp(x)

    f(1.0)  # Numba installs its bridges before difftape is imported
    bridge = llvm.address_of_symbol("exp")
    import difftape
    libm = ctypes.cast(ctypes.CDLL("libm.so.6").exp, ctypes.c_void_p).value
    print(bridge != libm, llvm.address_of_symbol("exp") == libm, f(1.0) == math.exp(1.0))
""")


def test_numba_set_up_before_difftape_is_bound_too(tmp_path):
    assert run_fresh(tmp_path, _NUMBA_FIRST) == ["True", "True", "True"]
