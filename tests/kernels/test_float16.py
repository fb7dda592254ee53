"""float16 in kernels: arrays are storage (elements compute as float32 and are rounded when
stored), and so are ``wp.float16(...)`` casts (docs/differences.md §8)."""

import numpy as np

import difftape as wp


@wp.kernel
def scale_half(x: wp.array(dtype=wp.float16), out: wp.array(dtype=wp.float16)):
    i = wp.tid()
    if i % 2 == 0:  # the odd elements keep what they held
        out[i] = x[i] * wp.float16(2.0) + wp.float16(0.1) + wp.float16(x[i])


def test_float16_casts_compute_as_float32_and_stores_round():
    x = np.linspace(-3.0, 3.0, 11).astype(np.float16)
    out = wp.array(np.full(11, 7.0, np.float16))
    before = x.copy()
    wp.launch(scale_half, 11, inputs=[wp.array(x)], outputs=[out])
    x32 = x.astype(np.float32)
    want = (x32 * 2 + np.float32(np.float16(0.1)) + x32).astype(np.float16)
    want[1::2] = 7.0
    np.testing.assert_array_equal(out.numpy(), want)
    np.testing.assert_array_equal(x, before)


def test_float16_gradients():
    x = wp.array(np.array([0.5, -1.25, 2.0], np.float16), requires_grad=True)
    out = wp.zeros(3, dtype=wp.float16, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(scale_half, 3, inputs=[x], outputs=[out])
    tape.backward(grads={out: wp.array(np.ones(3, np.float16))})
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 0.0, 3.0])  # d(2x + 0.1 + x)/dx


def test_a_float16_constant_out_of_half_range_is_infinite():
    @wp.kernel
    def big(out: wp.array(dtype=float)):
        out[0] = float(wp.float16(70000.0))
        out[1] = float(wp.float16(65504.0))  # the largest half

    out = wp.zeros(2, dtype=float)
    wp.launch(big, 1, outputs=[out])
    np.testing.assert_array_equal(out.numpy(), [np.inf, 65504.0])


def test_compiled_half_conversions_equal_numpys():
    from difftape._src.backends import cpu_half

    halves = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    widened = cpu_half.to_float32(halves)
    nan = np.isnan(halves)
    np.testing.assert_array_equal(widened[~nan].view(np.uint32),
                                  halves[~nan].astype(np.float32).view(np.uint32))
    assert np.isnan(widened[nan]).all()  # signaling NaNs come back quiet
    bits = np.arange(0, 1 << 32, 997, dtype=np.uint64).astype(np.uint32)  # every exponent
    floats = np.concatenate([bits.view(np.float32), widened[~nan],
                             widened[~nan] + np.float32(2.0 ** -25)]).astype(np.float32)
    narrowed = np.empty(floats.shape, np.float16)
    cpu_half.store_float32(narrowed, floats)
    with np.errstate(over="ignore"):
        want = floats.astype(np.float16)
    nan = np.isnan(floats)
    np.testing.assert_array_equal(narrowed[~nan].view(np.uint16), want[~nan].view(np.uint16))
    assert np.isnan(narrowed[nan]).all()
    strided = np.zeros((4, 6), np.float16)[:, ::2]  # not contiguous: NumPy does it
    cpu_half.store_float32(strided, np.full((4, 3), 1.5, np.float32))
    np.testing.assert_array_equal(cpu_half.to_float32(strided), np.full((4, 3), 1.5))
