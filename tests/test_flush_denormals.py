"""config.flush_denormals / the ``flush_denormals`` module option: x86 FTZ/DAZ while kernels run."""

import platform

import numpy as np
import pytest

import difftape as wp
from difftape._src.backends.cpu_runtime import FLUSH_DENORMALS, fp_control

STICKY_FLAGS = 0x3F  # MXCSR's exception flags: set by any code (numpy's too), never cleared


def fp_mode() -> int:
    """MXCSR without its sticky flags: what a launch must leave as it found it."""
    return fp_control() & ~STICKY_FLAGS

pytestmark = pytest.mark.skipif(platform.machine().lower() not in ("x86_64", "amd64"),
                                reason="MXCSR (FTZ/DAZ) is x86-only")


@wp.kernel
def shrink(x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = x[i] * wp.float32(1.0e-30)


@wp.kernel(module="test_flush_denormals_flushed")
def shrink_flushed(x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
    i = wp.tid()
    y[i] = x[i] * wp.float32(1.0e-30)


@pytest.mark.parametrize("mode", ["serial", "parallel", "replicate"])
def test_flush_denormals_zeroes_denormal_results_and_restores_the_fp_state(mode):
    saved = wp.config.cpu_parallel
    wp.config.cpu_parallel = mode
    try:
        before = fp_mode()
        assert not before & FLUSH_DENORMALS
        x = wp.array(np.full(1000, 1.0e-10, np.float32), requires_grad=True)
        y = wp.zeros(1000, dtype=wp.float32, requires_grad=True)
        wp.launch(shrink, 1000, inputs=[x, y])
        assert (y.numpy() > 0).all(), "IEEE by default: 1e-40 is a float32 denormal"
        wp.set_module_options({"flush_denormals": True}, "test_flush_denormals_flushed")
        tape = wp.Tape()
        with tape:
            wp.launch(shrink_flushed, 1000, inputs=[x, y])
        assert (y.numpy() == 0).all()
        assert fp_mode() == before, "the launch restores the caller's FP state"
        tape.backward(grads={y: wp.array(np.full(1000, 1.0e-10, np.float32))})
        assert (x.grad.numpy() == 0).all(), "the adjoint's 1e-40 flushes too"
        assert fp_mode() == before
    finally:
        wp.config.cpu_parallel = saved
        wp.set_module_options({"flush_denormals": False}, "test_flush_denormals_flushed")


def test_flush_denormals_as_a_kernel_option():
    @wp.kernel(flush_denormals=True)
    def shrink_option(x: wp.array(dtype=wp.float32), y: wp.array(dtype=wp.float32)):
        i = wp.tid()
        y[i] = x[i] * wp.float32(1.0e-30)

    x = wp.array(np.full(8, 1.0e-10, np.float32))
    y = wp.zeros(8, dtype=wp.float32)
    wp.launch(shrink_option, 8, inputs=[x, y])
    assert (y.numpy() == 0).all()
    wp.launch(shrink, 8, inputs=[x, y])
    assert (y.numpy() > 0).all()


def test_flushed_loops_keep_their_float32_products():
    """Loops widen decaying products to spare denormal assists (``interchange.widened``); with
    denormals flushed there are none to spare, and the products stay float32 ones, flushed."""
    @wp.kernel
    def powers(x: wp.array(dtype=wp.float32), n: int, y: wp.array(dtype=wp.float32)):
        i = wp.tid()
        p = wp.float32(1.0)
        for k in range(n):
            p = p * x[i]
        y[i] = p

    powers_flushed = wp.kernel(powers.func, flush_denormals=True)

    assert "rt_wide_p" in powers.source().split("_adjoint(")[0]
    assert "rt_wide_p" not in powers_flushed.source().split("_adjoint(")[0]
    x = wp.array(np.full(600, 0.25, np.float32))
    y = wp.zeros(600, dtype=wp.float32)
    wp.launch(powers_flushed, 600, inputs=[x, 66, y])
    assert (y.numpy() == 0).all(), "0.25**66 = 2**-132, a denormal, flushed"
    wp.launch(powers, 600, inputs=[x, 66, y])
    assert (y.numpy() == np.float32(2.0 ** -132)).all()
