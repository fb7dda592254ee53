"""Conformance tests for gradient semantics (SPEC §2, §6 P0 13–20, 23; P1 24–29 scalar parts, 39).

Values are Warp 1.19's verified numbers (SPEC [V]/[T]). Everything runs on the CPU in float32.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

import difftape as wp

# --------------------------------------------------------------------------- kernels


@wp.kernel
def scale2(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i]


@wp.kernel
def scale3(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 3.0 * x[i]


@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def sum_into(x: wp.array(dtype=float), total: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(total, 0, x[i])


@wp.kernel
def assign_chain_kernel(x: wp.array(dtype=float), y: wp.array(dtype=float), z: wp.array(dtype=float)):
    tid = wp.tid()
    y[tid] = x[tid]
    z[tid] = y[tid]


@wp.kernel
def sub_inplace(a: wp.array(dtype=float), b: wp.array(dtype=float)):
    i = wp.tid()
    a[i] -= b[i]


@wp.kernel
def preserve_outputs(n: int, x: wp.array(dtype=float), c: wp.array(dtype=float),
                     s1: wp.array(dtype=float), s2: wp.array(dtype=float)):
    tid = wp.tid()
    c[tid] = x[tid] * 2.0
    wp.atomic_add(s1, 0, x[tid] * 3.0)
    wp.atomic_sub(s2, 0, x[tid] * 2.0)


@wp.kernel
def square_pow_kernel(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    tid = wp.tid()
    y[tid] = x[tid] ** 2.0


@wp.kernel
def square_slice_2d_kernel(x: wp.array2d(dtype=float), y: wp.array2d(dtype=float), row_idx: int):
    tid = wp.tid()
    x_slice = x[row_idx]
    y_slice = y[row_idx]
    y_slice[tid] = x_slice[tid] ** 2.0


@wp.kernel
def square_slice_3d_1d_kernel(x: wp.array3d(dtype=float), y: wp.array3d(dtype=float), slice_idx: int):
    i, j = wp.tid()
    x_slice = x[slice_idx]
    y_slice = y[slice_idx]
    y_slice[i, j] = x_slice[i, j] ** 2.0


@wp.kernel
def square_slice_3d_2d_kernel(x: wp.array3d(dtype=float), y: wp.array3d(dtype=float), slice_i: int,
                              slice_j: int):
    tid = wp.tid()
    x_slice = x[slice_i, slice_j]
    y_slice = y[slice_i, slice_j]
    y_slice[tid] = x_slice[tid] ** 2.0


@wp.kernel
def sum_sq_2d(a: wp.array2d(dtype=float), out: wp.array(dtype=float)):
    i, j = wp.tid()
    wp.atomic_add(out, i, a[i, j] * a[i][j])


@wp.kernel
def double_then_square(x: wp.array(dtype=float), y: wp.array(dtype=float), z: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 2.0 * x[i]
    z[i] = y[i] * y[i]


# builtin edge conventions: y[i] = f(x[i])


@wp.kernel
def k_abs(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.abs(x[i])


@wp.kernel
def k_sqrt(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.sqrt(x[i])


@wp.kernel
def k_recip(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = 1.0 / x[i]


@wp.kernel
def k_log(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.log(x[i])


@wp.kernel
def k_min_ties(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.min(x[i], 1.0) + 10.0 * wp.min(1.0, x[i])


@wp.kernel
def k_max_ties(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.max(x[i], 1.0) + 10.0 * wp.max(1.0, x[i])


@wp.kernel
def k_clamp(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.clamp(x[i], 0.0, 1.0)


@wp.kernel
def k_where(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    v = x[i]
    y[i] = wp.where(v > 0.0, v * v, 3.0 * v)


@wp.kernel
def k_ternary(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    v = x[i]
    y[i] = v * v if v > 0.0 else 3.0 * v


@wp.kernel
def k_ifelse(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    v = x[i]
    r = float(0.0)
    if v > 0.0:
        r = v * v
    else:
        r = 3.0 * v
    y[i] = r


@wp.kernel
def k_piecewise_const(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    v = x[i]
    y[i] = wp.floor(v) + wp.sign(v) + wp.round(v)


@wp.kernel
def k_mod(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.mod(x[i], 0.7)


@wp.kernel
def k_acos(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.acos(x[i])


@wp.kernel
def k_atan2_same(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.atan2(x[i], x[i])


@wp.kernel
def k_pow(x: wp.array(dtype=float), e: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = wp.pow(x[i], e[i])


@wp.kernel
def k_cube(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] ** 3.0


@wp.kernel
def k_tanh_exp_sin(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    v = x[i]
    y[i] = wp.tanh(v) + wp.exp(v) + wp.sin(v)


@wp.kernel
def k_int_cast(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    v = x[i]
    y[i] = float(int(v)) + v


@wp.kernel
def k_smooth_lerp(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    v = x[i]
    y[i] = wp.smoothstep(0.0, 1.0, v) + wp.lerp(0.0, 2.0, v)


@wp.kernel
def k_atomic_max(x: wp.array(dtype=float), m: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_max(m, 0, x[i])


@wp.kernel
def k_atomic_min(x: wp.array(dtype=float), m: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_min(m, 0, x[i])


@wp.kernel(enable_backward=False)
def no_backward_kernel(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


_NB_MODULE = "difftape_spec_tests.no_backward_module"
wp.set_module_options({"enable_backward": False}, module=_NB_MODULE)


@wp.kernel(module=_NB_MODULE)
def module_no_backward_kernel(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel(enable_backward=True, module=_NB_MODULE)
def module_off_kernel_on(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


def f32(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


def arr(values, **kwargs):
    return wp.array(f32(values), dtype=float, **kwargs)


def grad_of(kernel, xs) -> np.ndarray:
    """x.grad after a taped ``y[i] = f(x[i])`` with seed 1 on y."""
    x = arr(xs, requires_grad=True)
    y = wp.zeros(len(xs), dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(kernel, dim=len(xs), inputs=[x], outputs=[y])
    tape.backward(grads={y: wp.ones(len(xs), dtype=float)})
    return x.grad.numpy()


# --------------------------------------------------------------------------- §6 item 13, §2.6


def test_final_write_wins_across_launches():
    x1 = arr([1, 2, 3], requires_grad=True)
    x2 = arr([4, 5, 6], requires_grad=True)
    y = wp.zeros(3, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(scale2, dim=3, inputs=[x1], outputs=[y])
        wp.launch(scale3, dim=3, inputs=[x2], outputs=[y])
    y.grad.fill_(1.0)
    tape.backward()
    np.testing.assert_allclose(x1.grad.numpy(), [0, 0, 0])
    np.testing.assert_allclose(x2.grad.numpy(), [3, 3, 3])
    np.testing.assert_allclose(y.grad.numpy(), [0, 0, 0])


def test_same_kernel_recorded_twice_writing_y():
    x = arr([1, 2, 3], requires_grad=True)
    y = wp.zeros(3, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square, dim=3, inputs=[x], outputs=[y])
        wp.launch(square, dim=3, inputs=[x], outputs=[y])
    tape.backward(grads={y: wp.ones(3, dtype=float)})
    np.testing.assert_allclose(x.grad.numpy(), [2, 4, 6])  # 2x, not 4x


# --------------------------------------------------------------------------- §6 item 14


def test_zero_multiple_outputs():
    x = wp.array(np.arange(3), dtype=float, requires_grad=True)
    y = wp.zeros_like(x)
    z = wp.zeros_like(x)
    tape = wp.Tape()
    with tape:
        wp.launch(assign_chain_kernel, dim=3, inputs=[x, y, z])
    tape.backward(grads={y: wp.ones_like(x)})
    np.testing.assert_allclose(x.grad.numpy(), [1, 1, 1])
    tape.zero()
    tape.backward(grads={z: wp.ones_like(x)})
    np.testing.assert_allclose(x.grad.numpy(), [1, 1, 1])


# --------------------------------------------------------------------------- §6 item 15, 16


def test_retain_grad_keeps_intermediate_gradient():
    x = arr([1, 2, 3], requires_grad=True)
    y = wp.zeros(3, dtype=float, requires_grad=True, retain_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square, dim=3, inputs=[x], outputs=[y])
        wp.launch(sum_into, dim=3, inputs=[y], outputs=[loss])
    tape.backward(loss=loss)
    np.testing.assert_allclose(y.grad.numpy(), [1, 1, 1])
    np.testing.assert_allclose(x.grad.numpy(), [2, 4, 6])


def test_intermediate_without_requires_grad_cuts_gradient():
    x = arr([1, 2, 3], requires_grad=True)
    y = wp.zeros(3, dtype=float)  # no grad
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square, dim=3, inputs=[x], outputs=[y])
        wp.launch(sum_into, dim=3, inputs=[y], outputs=[loss])
    tape.backward(loss=loss)
    np.testing.assert_allclose(x.grad.numpy(), [0, 0, 0])
    assert y.grad is None


# --------------------------------------------------------------------------- §6 item 17


def test_inplace_sub_doc_example():
    a = wp.full(1, 10.0, dtype=float, requires_grad=True)
    b = wp.full(1, 2.0, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(sub_inplace, dim=1, inputs=[a, b])
    np.testing.assert_allclose(a.numpy(), [8.0])
    tape.backward(grads={a: wp.ones(1, dtype=float)})
    np.testing.assert_allclose(a.grad.numpy(), [1.0])
    np.testing.assert_allclose(b.grad.numpy(), [-1.0])


# --------------------------------------------------------------------------- §6 item 18


def test_preserve_outputs():
    n = 32
    val = np.ones(n, dtype=np.float32)
    x = wp.array(val, requires_grad=True)
    c = wp.zeros_like(x)
    s1 = wp.zeros(1, dtype=wp.float32, requires_grad=True)
    s2 = wp.zeros(1, dtype=wp.float32, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(preserve_outputs, dim=n, inputs=[n, x, c, s1, s2])

    def check_outputs():
        np.testing.assert_allclose(x.numpy(), val)
        np.testing.assert_allclose(c.numpy(), val * 2.0)
        np.testing.assert_allclose(s1.numpy(), [3.0 * n])
        np.testing.assert_allclose(s2.numpy(), [-2.0 * n])

    check_outputs()
    tape.backward(loss=s1)
    check_outputs()
    np.testing.assert_allclose(tape.gradients[x].numpy(), 3.0 * val)
    tape.zero()
    tape.backward(loss=s2)
    check_outputs()
    np.testing.assert_allclose(tape.gradients[x].numpy(), -2.0 * val)


# --------------------------------------------------------------------------- §6 item 19 (manual adjoints)


def test_manual_adjoint_falls_back_to_grad():
    a = arr([1, 2, 3], requires_grad=True)
    b = arr([0, 0, 0], requires_grad=True)
    wp.launch(square_pow_kernel, dim=a.size, inputs=[a, b])
    b.grad = arr([1, 1, 1])
    wp.launch(square_pow_kernel, dim=a.size, inputs=[a, b], adjoint=True, adj_inputs=[None, None])
    np.testing.assert_allclose(a.grad.numpy(), [2, 4, 6])
    np.testing.assert_allclose(b.grad.numpy(), [0, 0, 0])  # own .grad is consumed
    np.testing.assert_allclose(b.numpy(), [1, 4, 9])  # the adjoint never writes primal outputs


def test_manual_adjoint_external_buffers():
    a = arr([1, 2, 3])
    b = arr([0, 0, 0])
    wp.launch(square_pow_kernel, dim=a.size, inputs=[a, b])
    a_grad = arr([0, 0, 0])
    b_grad = arr([1, 1, 1])
    wp.launch(square_pow_kernel, dim=a.size, inputs=[a, b], adjoint=True, adj_inputs=[a_grad, b_grad])
    np.testing.assert_allclose(a_grad.numpy(), [2, 4, 6])


def test_manual_adjoint_explicit_buffer_takes_precedence():
    a = arr([1, 2, 3], requires_grad=True)
    b = arr([0, 0, 0], requires_grad=True)
    wp.launch(square_pow_kernel, dim=a.size, inputs=[a, b])
    a_grad = arr([0, 0, 0])
    b_grad = arr([1, 1, 1])
    wp.launch(square_pow_kernel, dim=a.size, inputs=[a, b], adjoint=True, adj_inputs=[a_grad, b_grad])
    np.testing.assert_allclose(a_grad.numpy(), [2, 4, 6])
    np.testing.assert_allclose(a.grad.numpy(), [0, 0, 0])


def test_manual_adjoint_external_output_adjoint_not_consumed():
    x = arr([1, 2, 3])
    y = arr([0, 0, 0])
    wp.launch(square, dim=3, inputs=[x], outputs=[y])
    adj_x = wp.full(3, 10.0, dtype=float)
    adj_y = wp.ones(3, dtype=float)
    wp.launch(square, dim=3, inputs=[x], outputs=[y], adj_inputs=[adj_x], adj_outputs=[adj_y],
              adjoint=True)
    np.testing.assert_allclose(adj_x.numpy(), [12, 14, 16])
    np.testing.assert_allclose(adj_y.numpy(), [1, 1, 1])


def test_manual_adjoint_row_view_of_2d_array():
    a = wp.array(f32([[1, 2], [3, 4], [5, 6]]), dtype=float, requires_grad=True)
    b = wp.zeros_like(a, requires_grad=False)
    b.grad = wp.ones_like(a, requires_grad=False)
    wp.launch(square_slice_2d_kernel, dim=a.shape[1], inputs=[a, b, 1])
    wp.launch(square_slice_2d_kernel, dim=a.shape[1], inputs=[a, b, 1], adjoint=True,
              adj_inputs=[None, None, 1])
    np.testing.assert_allclose(a.grad.numpy(), [[0, 0], [6, 8], [0, 0]])


_DATA_3D = [[[1, 2, 3], [4, 5, 6], [7, 8, 9]],
            [[11, 12, 13], [14, 15, 16], [17, 18, 19]],
            [[21, 22, 23], [24, 25, 26], [27, 28, 29]]]


def test_manual_adjoint_3d_slice_1d():
    a = wp.array(f32(_DATA_3D), dtype=float, requires_grad=True)
    b = wp.zeros_like(a, requires_grad=False)
    b.grad = wp.ones_like(a, requires_grad=False)
    wp.launch(square_slice_3d_1d_kernel, dim=a.shape[1:], inputs=[a, b, 1])
    wp.launch(square_slice_3d_1d_kernel, dim=a.shape[1:], inputs=[a, b, 1], adjoint=True,
              adj_inputs=[None, None, 1])
    expected = np.zeros((3, 3, 3), dtype=np.float32)
    expected[1] = 2.0 * f32(_DATA_3D)[1]
    np.testing.assert_allclose(a.grad.numpy(), expected)


def test_manual_adjoint_3d_slice_2d():
    a = wp.array(f32(_DATA_3D), dtype=float, requires_grad=True)
    b = wp.zeros_like(a, requires_grad=False)
    b.grad = wp.ones_like(a, requires_grad=False)
    wp.launch(square_slice_3d_2d_kernel, dim=a.shape[2], inputs=[a, b, 1, 1])
    wp.launch(square_slice_3d_2d_kernel, dim=a.shape[2], inputs=[a, b, 1, 1], adjoint=True,
              adj_inputs=[None, None, 1, 1])
    expected = np.zeros((3, 3, 3), dtype=np.float32)
    expected[1, 1] = [28, 30, 32]
    np.testing.assert_allclose(a.grad.numpy(), expected)


def test_manual_adjoint_needs_one_entry_per_parameter():
    x = arr([1, 2, 3], requires_grad=True)
    y = arr([0, 0, 0], requires_grad=True)
    with pytest.raises(RuntimeError):
        wp.launch(square, dim=3, inputs=[x], outputs=[y], adjoint=True)


# --------------------------------------------------------------------------- §6 item 20


def test_row_view_input_gradient_lands_in_base_row():
    base = wp.array(f32([[1, 2, 3], [3, 4, 5]]), dtype=float, requires_grad=True)
    row = base[1]
    y = wp.zeros(3, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square, dim=3, inputs=[row], outputs=[y])
    np.testing.assert_allclose(y.numpy(), [9, 16, 25])
    tape.backward(grads={y: wp.ones(3, dtype=float)})
    np.testing.assert_allclose(base.grad.numpy(), [[0, 0, 0], [6, 8, 10]])


def test_2d_index_and_chained_index_both_propagate():
    a = wp.array(np.arange(6, dtype=np.float32).reshape(2, 3), dtype=float, requires_grad=True)
    out = wp.zeros(2, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(sum_sq_2d, dim=(2, 3), inputs=[a], outputs=[out])
    np.testing.assert_allclose(out.numpy(), [5, 50])
    tape.backward(grads={out: arr([1, 10])})
    np.testing.assert_allclose(a.grad.numpy(), [[0, 2, 4], [60, 80, 100]])


# --------------------------------------------------------------------------- §6 item 23


def test_write_then_read_in_one_kernel():
    x = arr([1, 2, 3], requires_grad=True)
    y = wp.zeros(3, dtype=float, requires_grad=True)
    z = wp.zeros(3, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(double_then_square, dim=3, inputs=[x], outputs=[y, z])
    tape.backward(grads={z: wp.ones(3, dtype=float)})
    np.testing.assert_allclose(x.grad.numpy(), [8, 16, 24])


# --------------------------------------------------------------------------- §6 item 24


def test_abs_gradient_at_zero_is_plus_one():
    np.testing.assert_allclose(grad_of(k_abs, [-2, 0, 3]), [-1, 1, 1])


def test_sqrt_gradient():
    np.testing.assert_allclose(grad_of(k_sqrt, [0, 4]), [np.inf, 0.25])


def test_reciprocal_gradient():
    np.testing.assert_allclose(grad_of(k_recip, [0, 2]), [-np.inf, -0.25])


def test_log_gradient():
    np.testing.assert_allclose(grad_of(k_log, [0, 1]), [np.inf, 1])


# --------------------------------------------------------------------------- §6 item 25


def test_min_ties_go_to_second_argument():
    np.testing.assert_allclose(grad_of(k_min_ties, [0, 1, 2]), [11, 10, 0])


def test_max_ties_go_to_second_argument():
    np.testing.assert_allclose(grad_of(k_max_ties, [0, 1, 2]), [0, 10, 11])


def test_clamp_edges():
    np.testing.assert_allclose(grad_of(k_clamp, [-1, 0, 0.5, 1, 2]), [0, 1, 1, 0, 0])


# --------------------------------------------------------------------------- §6 item 26


@pytest.mark.parametrize("kernel", [k_where, k_ternary, k_ifelse], ids=["where", "ternary", "ifelse"])
def test_selected_branch_gets_gradient(kernel):
    np.testing.assert_allclose(grad_of(kernel, [-1, 0, 2]), [3, 3, 4])


# --------------------------------------------------------------------------- §6 item 27


def test_piecewise_constant_builtins_have_zero_gradient():
    np.testing.assert_allclose(grad_of(k_piecewise_const, [-1.3, 0.4, 2.7]), [0, 0, 0])


def test_mod_gradient_is_one():
    np.testing.assert_allclose(grad_of(k_mod, [0.5, 1.5, 2.3]), [1, 1, 1])


def test_acos_gradient_is_zero_at_plus_minus_one():
    np.testing.assert_allclose(grad_of(k_acos, [1, 0, -1]), [0, -1, 0])


def test_atan2_gradient_is_zero_at_origin():
    np.testing.assert_allclose(grad_of(k_atan2_same, [0]), [0])


# --------------------------------------------------------------------------- §6 item 28 (scalar parts)


def test_pow_gradients_wrt_base_and_exponent():
    x = arr([0, 2, -1], requires_grad=True)
    e = arr([2, 2, 2], requires_grad=True)
    y = wp.zeros(3, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(k_pow, dim=3, inputs=[x, e], outputs=[y])
    np.testing.assert_allclose(y.numpy(), [0, 4, 1])
    tape.backward(grads={y: wp.ones(3, dtype=float)})
    np.testing.assert_allclose(x.grad.numpy(), [0, 4, -2])
    np.testing.assert_allclose(e.grad.numpy(), [np.nan, 2.7725887, np.nan], rtol=1e-6)


def test_cube_at_negative_base():
    np.testing.assert_allclose(grad_of(k_cube, [-2]), [12])


def test_tanh_exp_sin_at_zero():
    np.testing.assert_allclose(grad_of(k_tanh_exp_sin, [0]), [3])


def test_int_cast_has_zero_gradient():
    np.testing.assert_allclose(grad_of(k_int_cast, [1.7, -2.2]), [1, 1])


def test_smoothstep_plus_lerp_at_half():
    np.testing.assert_allclose(grad_of(k_smooth_lerp, [0.5]), [3.5])


# --------------------------------------------------------------------------- §6 item 29


def test_atomic_max_ties_all_get_gradient():
    x = arr([1, 5, 3, 5], requires_grad=True)
    m = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(k_atomic_max, dim=4, inputs=[x], outputs=[m])
    np.testing.assert_allclose(m.numpy(), [5])
    tape.backward(loss=m)
    np.testing.assert_allclose(x.grad.numpy(), [0, 1, 0, 1])
    np.testing.assert_allclose(m.grad.numpy(), [1])


def test_atomic_min_that_never_wins_gives_zero():
    x = arr([1, 5, 3, 5], requires_grad=True)
    m = wp.full(1, -10.0, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(k_atomic_min, dim=4, inputs=[x], outputs=[m])
    np.testing.assert_allclose(m.numpy(), [-10])
    tape.backward(loss=m)
    np.testing.assert_allclose(x.grad.numpy(), [0, 0, 0, 0])
    np.testing.assert_allclose(m.grad.numpy(), [1])


# --------------------------------------------------------------------------- §2.2/§4.4, item 39


def test_enable_backward_false_kernel_is_skipped_with_warning():
    x = arr([1, 2, 3], requires_grad=True)
    y = wp.zeros(3, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(no_backward_kernel, dim=3, inputs=[x], outputs=[y])
    np.testing.assert_allclose(y.numpy(), [1, 4, 9])
    y.grad.fill_(1.0)
    expected = ("Running the tape backwards may produce incorrect gradients because recorded kernel "
                "no_backward_kernel is configured with the option 'enable_backward=False'.")
    with pytest.warns(UserWarning) as record:
        tape.backward()
    assert [str(w.message) for w in record] == [expected]
    np.testing.assert_allclose(x.grad.numpy(), [0, 0, 0])
    np.testing.assert_allclose(y.grad.numpy(), [1, 1, 1])


def test_module_enable_backward_false_is_skipped_with_warning():
    x = arr([1, 2, 3], requires_grad=True)
    y = wp.zeros(3, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(module_no_backward_kernel, dim=3, inputs=[x], outputs=[y])
    y.grad.fill_(1.0)
    expected = ("Running the tape backwards may produce incorrect gradients because recorded kernel "
                "module_no_backward_kernel is defined in a module with the option "
                "'enable_backward=False' set.")
    with pytest.warns(UserWarning) as record:
        tape.backward()
    assert [str(w.message) for w in record] == [expected]
    np.testing.assert_allclose(x.grad.numpy(), [0, 0, 0])
    np.testing.assert_allclose(y.grad.numpy(), [1, 1, 1])


def test_kernel_level_true_overrides_module_false():
    x = arr([1, 2, 3], requires_grad=True)
    y = wp.zeros(3, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(module_off_kernel_on, dim=3, inputs=[x], outputs=[y])
    tape.backward(grads={y: wp.ones(3, dtype=float)})
    np.testing.assert_allclose(x.grad.numpy(), [2, 4, 6])


def test_manual_adjoint_of_no_backward_kernel_raises():
    x = arr([1, 2, 3], requires_grad=True)
    y = wp.zeros(3, dtype=float, requires_grad=True)
    wp.launch(no_backward_kernel, dim=3, inputs=[x], outputs=[y])
    y.grad.fill_(1.0)
    with pytest.raises(RuntimeError,
                       match=r"Failed to find backward kernel 'no_backward_kernel' from module "
                             rf"'{re.escape(__name__)}' for device 'cpu'"):
        wp.launch(no_backward_kernel, dim=3, inputs=[x], outputs=[y], adj_inputs=[None],
                  adj_outputs=[None], adjoint=True)
