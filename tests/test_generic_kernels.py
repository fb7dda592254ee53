"""Generic kernels: ``typing.Any`` parameters specialise per launch (Warp's kernel overloads)."""

import typing

import numpy as np
import pytest

import difftape as wp


@wp.kernel
def scale(x: wp.array(dtype=typing.Any), s: typing.Any, y: wp.array(dtype=typing.Any)):
    i = wp.tid()
    y[i] = x[i] * s


@pytest.mark.parametrize("dtype, factor", [(wp.float32, wp.float32(2.0)),
                                           (wp.float64, wp.float64(3.0)),
                                           (wp.vec3, wp.float32(2.0))])
def test_generic_kernel_specialises_per_argument_types(dtype, factor):
    shape = (3, 3) if dtype is wp.vec3 else 3
    x = wp.array(np.full(shape, 1.5), dtype=dtype, requires_grad=True)
    y = wp.zeros(3, dtype=dtype, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(scale, 3, inputs=[x, factor, y])
    np.testing.assert_allclose(y.numpy(), np.full(shape, 1.5 * float(factor)))
    tape.backward(grads={y: wp.array(np.ones(shape), dtype=dtype)})
    np.testing.assert_allclose(x.grad.numpy(), np.full(shape, float(factor)))
    recorded = tape.launches[0][0]
    assert recorded is not scale and recorded.key == scale.key  # the resolved specialisation


def test_each_type_combination_compiles_once():
    x = wp.ones(2, dtype=wp.float64)
    y = wp.zeros(2, dtype=wp.float64)
    wp.launch(scale, 2, inputs=[x, wp.float64(1.0), y])
    first = scale.specialize([x, wp.float64(1.0), y])
    wp.launch(scale, 2, inputs=[x, wp.float64(2.0), y])
    assert scale.specialize([x, wp.float64(5.0), y]) is first
    assert scale.specialize([wp.ones(2, dtype=float), 1.0, wp.zeros(2, dtype=float)]) is not first


def test_mixed_generic_types_are_reported_at_the_kernel_line():
    x = wp.ones(2, dtype=wp.float64)
    y = wp.zeros(2, dtype=wp.float64)
    with pytest.raises(wp.KernelTypeError, match="operator \\* \\(mul\\) does not accept"):
        wp.launch(scale, 2, inputs=[x, 2.0, y])  # a Python float is float32, x is float64
