"""Conformance tests for Tape mechanics (SPEC §1, §6 P0 "Tape mechanics" 1, 2, 4–8, 11, 12).

Numbers and error texts are Warp 1.19's (SPEC [V]/[T] values). Everything runs on the CPU.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import difftape as wp

# --------------------------------------------------------------------------- kernels


@wp.kernel
def mul_constant(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    tid = wp.tid()
    y[tid] = x[tid] * 2.0


@wp.kernel
def dot_product(x: wp.array(dtype=float), y: wp.array(dtype=float), z: wp.array(dtype=float)):
    tid = wp.tid()
    wp.atomic_add(z, 0, x[tid] * y[tid])


@wp.kernel
def square(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * x[i]


@wp.kernel
def sum_into(x: wp.array(dtype=float), total: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(total, 0, x[i])


@wp.kernel
def sum_into_2d_loss(x: wp.array(dtype=float), total: wp.array2d(dtype=float)):
    i = wp.tid()
    wp.atomic_add(total, 0, 0, x[i])


@wp.kernel
def sum_into_int(x: wp.array(dtype=wp.int32), total: wp.array(dtype=wp.int32)):
    i = wp.tid()
    wp.atomic_add(total, 0, x[i])


# Jacobi composite (SPEC §1.5 / §6 item 11): the solve runs unrecorded, a record_func callback
# provides its adjoint with kernels launched with record_tape=False.


@wp.kernel
def jacobi_step(A: wp.array2d(dtype=wp.float64), b: wp.array(dtype=wp.float64),
                x_in: wp.array(dtype=wp.float64), x_out: wp.array(dtype=wp.float64), n: int):
    i = wp.tid()
    s = b[i]
    for j in range(n):
        if j != i:
            s = s - A[i, j] * x_in[j]
    x_out[i] = s / A[i, i]


@wp.kernel
def jacobi_adjoint_step(A: wp.array2d(dtype=wp.float64), g_out: wp.array(dtype=wp.float64),
                        g_in: wp.array(dtype=wp.float64), b_grad: wp.array(dtype=wp.float64),
                        n: int):
    # x_out = D^-1 (b - R x_in): b_grad += D^-1 g_out, g_in = -R^T D^-1 g_out
    j = wp.tid()
    s = wp.float64(0.0)
    for i in range(n):
        if i != j:
            s = s - A[i, j] * g_out[i] / A[i, i]
    g_in[j] = s
    b_grad[j] = b_grad[j] + g_out[j] / A[j, j]


@wp.kernel
def scale_f64(p: wp.array(dtype=wp.float64), b: wp.array(dtype=wp.float64)):
    i = wp.tid()
    b[i] = p[i] * 2.0


@wp.kernel
def weighted_sum_f64(w: wp.array(dtype=wp.float64), x: wp.array(dtype=wp.float64),
                     loss: wp.array(dtype=wp.float64)):
    i = wp.tid()
    wp.atomic_add(loss, 0, w[i] * x[i])


def f32(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float32)


# --------------------------------------------------------------------------- §6 item 1, 2


def test_chain_of_16_launches_gives_65536():
    dim, iters = 8, 16
    tape = wp.Tape()
    with tape:
        x0 = wp.array(np.zeros(dim), dtype=wp.float32, requires_grad=True)
        x = x0
        for _ in range(iters):
            y = wp.empty_like(x, requires_grad=True)
            wp.launch(kernel=mul_constant, dim=dim, inputs=[x], outputs=[y])
            x = y
    x.grad = wp.array(np.ones(dim), dtype=wp.float32)
    tape.backward()
    np.testing.assert_allclose(tape.gradients[x0].numpy(), np.full(dim, 2.0**iters))
    assert len(tape.launches) == iters


def test_dot_product_atomic_loss():
    dim = 8
    tape = wp.Tape()
    with tape:
        x = wp.array(np.ones(dim) * 16.0, dtype=wp.float32, requires_grad=True)
        y = wp.array(np.ones(dim) * 32.0, dtype=wp.float32, requires_grad=True)
        z = wp.zeros(1, dtype=wp.float32, requires_grad=True)
        wp.launch(kernel=dot_product, dim=dim, inputs=[x, y], outputs=[z])
    np.testing.assert_allclose(z.numpy(), [16.0 * 32.0 * dim])
    tape.backward(loss=z)
    np.testing.assert_allclose(tape.gradients[x].numpy(), np.full(dim, 32.0))
    np.testing.assert_allclose(tape.gradients[y].numpy(), np.full(dim, 16.0))
    # atomic writes do not consume the seed
    np.testing.assert_allclose(z.grad.numpy(), [1.0])
    np.testing.assert_allclose(z.numpy(), [16.0 * 32.0 * dim])  # backward never writes outputs


# --------------------------------------------------------------------------- §6 item 4


def test_backward_twice_with_loss_accumulates_and_zero_resets():
    x = wp.array(f32([1, 2, 3]), dtype=float, requires_grad=True)
    y = wp.zeros(3, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square, dim=3, inputs=[x], outputs=[y])
        wp.launch(sum_into, dim=3, inputs=[y], outputs=[loss])
    np.testing.assert_allclose(loss.numpy(), [14.0])

    tape.backward(loss=loss)
    np.testing.assert_allclose(x.grad.numpy(), [2, 4, 6])
    np.testing.assert_allclose(y.grad.numpy(), [0, 0, 0])
    np.testing.assert_allclose(loss.grad.numpy(), [1])

    tape.backward(loss=loss)
    np.testing.assert_allclose(x.grad.numpy(), [4, 8, 12])
    np.testing.assert_allclose(y.grad.numpy(), [0, 0, 0])
    np.testing.assert_allclose(loss.grad.numpy(), [1])

    tape.zero()
    np.testing.assert_allclose(x.grad.numpy(), [0, 0, 0])
    np.testing.assert_allclose(y.grad.numpy(), [0, 0, 0])
    np.testing.assert_allclose(loss.grad.numpy(), [0])


# --------------------------------------------------------------------------- §6 item 5, §1.2


def test_nested_tape_raises_and_leaves_no_active_tape():
    x = wp.array(f32([1, 2, 3]), dtype=float, requires_grad=True)
    y = wp.zeros(3, dtype=float, requires_grad=True)
    outer = wp.Tape()
    with pytest.raises(RuntimeError, match="Warp: Error, entering a tape while one is already active"):
        with outer:
            with wp.Tape():
                pass
    # no tape is active any more: a launch records nowhere and a new tape can be entered
    wp.launch(square, dim=3, inputs=[x], outputs=[y])
    assert outer.launches == []
    fresh = wp.Tape()
    with fresh:
        wp.launch(square, dim=3, inputs=[x], outputs=[y])
    assert len(fresh.launches) == 1


def test_entering_same_tape_twice_raises():
    tape = wp.Tape()
    with pytest.raises(RuntimeError, match="entering a tape while one is already active"):
        with tape:
            with tape:
                pass
    with wp.Tape():  # no leftover active tape
        pass


def test_tape_enter_returns_itself():
    tape = wp.Tape()
    with tape as entered:
        assert entered is tape


def test_unbalanced_exit_raises():
    tape = wp.Tape()
    with pytest.raises(RuntimeError, match="Warp: Error, ended tape capture, but tape not present"):
        tape.__exit__(None, None, None)


def test_exception_inside_with_deactivates_tape():
    x = wp.array(f32([1, 2, 3]), dtype=float, requires_grad=True)
    y = wp.zeros(3, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with pytest.raises(ValueError, match="boom"):
        with tape:
            wp.launch(square, dim=3, inputs=[x], outputs=[y])
            raise ValueError("boom")
    assert len(tape.launches) == 1
    wp.launch(square, dim=3, inputs=[x], outputs=[y])  # not recorded: tape inactive
    assert len(tape.launches) == 1
    with wp.Tape() as other:  # entering works again
        wp.launch(square, dim=3, inputs=[x], outputs=[y])
    assert len(other.launches) == 1


def test_reentering_tape_appends_block_by_block():
    x = wp.array(f32([1, 2, 3]), dtype=float, requires_grad=True)
    y = wp.zeros(3, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square, dim=3, inputs=[x], outputs=[y])
    wp.launch(square, dim=3, inputs=[x], outputs=[y])  # between blocks: not recorded
    with tape:
        wp.launch(sum_into, dim=3, inputs=[y], outputs=[loss])
    assert len(tape.launches) == 2
    assert tape.launches[0][0] is square and tape.launches[1][0] is sum_into
    tape.backward(loss=loss)
    np.testing.assert_allclose(x.grad.numpy(), [2, 4, 6])


def test_loss_with_more_than_one_element_raises():
    tape = wp.Tape()
    big = wp.zeros(4, dtype=wp.float32, requires_grad=True)
    with pytest.raises(RuntimeError, match=r"Can only return gradients for scalar loss functions\."):
        tape.backward(loss=big)


def test_loss_without_requires_grad_raises():
    tape = wp.Tape()
    loss = wp.zeros(1, dtype=wp.float32)
    with pytest.raises(RuntimeError, match=r"Scalar loss arrays should have requires_grad=True set "
                                            r"before calling Tape\.backward\(\)"):
        tape.backward(loss=loss)


def test_int_loss_without_grad_raises_requires_grad_error():
    x = wp.array(np.array([1, 2, 3], dtype=np.int32), dtype=wp.int32)
    total = wp.zeros(1, dtype=wp.int32)
    tape = wp.Tape()
    with tape:
        wp.launch(sum_into_int, dim=3, inputs=[x], outputs=[total])
    with pytest.raises(RuntimeError, match=r"Scalar loss arrays should have requires_grad=True set "
                                            r"before calling Tape\.backward\(\)"):
        tape.backward(loss=total)


# --------------------------------------------------------------------------- §1.8


def test_loss_seed_overwrites_existing_loss_grad():
    x = wp.array(f32([1, 2, 3]), dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(sum_into, dim=3, inputs=[x], outputs=[loss])
    loss.grad.fill_(5.0)
    tape.backward(loss=loss)
    np.testing.assert_allclose(loss.grad.numpy(), [1.0])
    np.testing.assert_allclose(x.grad.numpy(), [1, 1, 1])


def test_zero_length_loss_is_silently_ignored():
    x = wp.array(f32([1, 2, 3]), dtype=float, requires_grad=True)
    y = wp.zeros(3, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square, dim=3, inputs=[x], outputs=[y])
    tape.backward(loss=wp.zeros(0, dtype=float, requires_grad=True))
    tape.backward(loss=wp.zeros(0, dtype=float))  # even without requires_grad: `if loss:` is False
    np.testing.assert_allclose(x.grad.numpy(), [0, 0, 0])


def test_loss_of_shape_1x1_is_accepted():
    x = wp.array(f32([1, 2, 3]), dtype=float, requires_grad=True)
    loss = wp.zeros((1, 1), dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(sum_into_2d_loss, dim=3, inputs=[x], outputs=[loss])
    np.testing.assert_allclose(loss.numpy(), [[6.0]])
    tape.backward(loss=loss)
    np.testing.assert_allclose(x.grad.numpy(), [1, 1, 1])
    np.testing.assert_allclose(loss.grad.numpy(), [[1.0]])


# --------------------------------------------------------------------------- §6 item 6


def test_grads_dict_aliases_seed_then_copies():
    x = wp.array(f32([1, 2, 3]), dtype=float, requires_grad=True)
    y = wp.zeros(3, dtype=float)  # no gradient buffer
    tape = wp.Tape()
    with tape:
        wp.launch(square, dim=3, inputs=[x], outputs=[y])

    seed = wp.ones(3, dtype=float)
    tape.backward(grads={y: seed})
    assert y.grad is seed
    assert y.requires_grad
    np.testing.assert_allclose(seed.numpy(), [0, 0, 0])  # consumed by the store adjoint
    np.testing.assert_allclose(x.grad.numpy(), [2, 4, 6])

    seed2 = wp.full(3, 2.0, dtype=float)
    tape.backward(grads={y: seed2})
    assert y.grad is seed  # the first seed stays the buffer; the new one is copied in
    np.testing.assert_allclose(seed2.numpy(), [2, 2, 2])
    np.testing.assert_allclose(x.grad.numpy(), [6, 12, 18])


def test_loss_and_grads_both_given():
    x = wp.array(f32([1, 2, 3]), dtype=float, requires_grad=True)
    y = wp.zeros(3, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square, dim=3, inputs=[x], outputs=[y])
        wp.launch(sum_into, dim=3, inputs=[y], outputs=[loss])
    # loss seed (1 per y element through the sum) plus a direct seed of 1 on y: 2 * 2x
    tape.backward(loss=loss, grads={y: wp.ones(3, dtype=float)})
    np.testing.assert_allclose(x.grad.numpy(), [4, 8, 12])


# --------------------------------------------------------------------------- §6 item 7, §1.9


def test_gradients_empty_before_backward_and_zero_is_noop():
    x = wp.array(f32([1, 2, 3]), dtype=float, requires_grad=True)
    y = wp.zeros(3, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square, dim=3, inputs=[x], outputs=[y])
    assert tape.gradients == {}
    x.grad.fill_(7.0)
    y.grad.fill_(1.0)
    tape.zero()
    np.testing.assert_allclose(x.grad.numpy(), [7, 7, 7])
    np.testing.assert_allclose(y.grad.numpy(), [1, 1, 1])
    tape.backward()
    assert tape.gradients[x] is x.grad and tape.gradients[y] is y.grad
    np.testing.assert_allclose(x.grad.numpy(), [9, 11, 13])
    tape.zero()
    np.testing.assert_allclose(x.grad.numpy(), [0, 0, 0])


def test_gradients_keyed_by_identity_and_only_arrays_with_grad():
    x = wp.array(f32([1, 2, 3]), dtype=float, requires_grad=True)
    y = wp.zeros(3, dtype=float)  # no grad: not registered, cuts the path
    tape = wp.Tape()
    with tape:
        wp.launch(square, dim=3, inputs=[x], outputs=[y])
    tape.backward()
    assert x in tape.gradients
    assert y not in tape.gradients
    np.testing.assert_allclose(x.grad.numpy(), [0, 0, 0])


# --------------------------------------------------------------------------- §1.10


def test_reset_keeps_gradients_dict_and_tape_is_reusable():
    x = wp.array(f32([1, 2, 3]), dtype=float, requires_grad=True)
    y = wp.zeros(3, dtype=float, requires_grad=True)
    loss = wp.zeros(1, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square, dim=3, inputs=[x], outputs=[y])
        wp.launch(sum_into, dim=3, inputs=[y], outputs=[loss])
        tape.record_scope_begin("s")
        wp.launch(square, dim=3, inputs=[x], outputs=[y])
        tape.record_scope_end()
    tape.backward(loss=loss)
    keys = set(map(id, tape.gradients))
    assert keys
    tape.reset()
    assert tape.launches == []
    assert tape.scopes == []
    assert set(map(id, tape.gradients)) == keys
    np.testing.assert_allclose(x.grad.numpy(), [0, 0, 0])
    np.testing.assert_allclose(loss.grad.numpy(), [0])

    # reuse
    loss.zero_()
    with tape:
        wp.launch(square, dim=3, inputs=[x], outputs=[y])
        wp.launch(sum_into, dim=3, inputs=[y], outputs=[loss])
    assert len(tape.launches) == 2
    tape.backward(loss=loss)
    np.testing.assert_allclose(x.grad.numpy(), [2, 4, 6])


# --------------------------------------------------------------------------- §1.3 records


def test_launch_record_layout_and_metadata():
    x = wp.array(f32([1, 2, 3]), dtype=float, requires_grad=True)
    y = wp.zeros(3, dtype=float, requires_grad=True)
    inputs, outputs = [x], [y]
    tape = wp.Tape()
    with tape:
        lineno = inspect.currentframe().f_lineno + 1
        wp.launch(square, dim=3, inputs=inputs, outputs=outputs)
    assert len(tape.launches) == 1
    rec = tape.launches[0]
    assert isinstance(rec, list) and len(rec) == 8
    kernel, dim, max_blocks, rec_inputs, rec_outputs, device, block_dim, metadata = rec
    assert kernel is square
    assert dim == (3,) and isinstance(dim, tuple)
    assert max_blocks == 0
    assert rec_inputs is inputs and rec_outputs is outputs  # the user's own objects
    assert device == "cpu"
    assert block_dim == 1
    assert metadata == {"caller": {"file": __file__, "lineno": lineno,
                                   "func": "test_launch_record_layout_and_metadata"}}
    # mutating the user's list changes the record; the record is a mutable list
    inputs.append("marker")
    assert tape.launches[0][3][-1] == "marker"
    rec[6] = 7
    assert tape.launches[0][6] == 7


def test_launch_record_keeps_tuples_and_normalizes_tuple_dim():
    x = wp.array(f32([1, 2, 3]), dtype=float, requires_grad=True)
    y = wp.zeros(3, dtype=float, requires_grad=True)
    inputs = (x, y)
    tape = wp.Tape()
    with tape:
        wp.launch(square, dim=(3,), inputs=inputs)
        wp.launch(square, dim=[3], inputs=[x, y])
    assert tape.launches[0][3] is inputs and isinstance(tape.launches[0][3], tuple)
    assert tape.launches[0][1] == (3,)
    assert tape.launches[1][1] == (3,) and isinstance(tape.launches[1][1], tuple)
    tape.backward(grads={y: wp.ones(3, dtype=float)})
    # final write wins: the second record consumes the seed, the first sees zero
    np.testing.assert_allclose(x.grad.numpy(), [2, 4, 6])


# --------------------------------------------------------------------------- §6 item 8


def test_record_tape_false_and_record_cmd_are_not_recorded_dim0_is():
    x = wp.array(f32([1, 2, 3]), dtype=float, requires_grad=True)
    y = wp.zeros(3, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.launch(square, dim=3, inputs=[x], outputs=[y], record_tape=False)
        assert tape.launches == []
        cmd = wp.launch(square, dim=3, inputs=[x], outputs=[y], record_cmd=True)
        assert isinstance(cmd, wp.Launch)
        assert tape.launches == []
        y.zero_()
        cmd.launch()
        assert tape.launches == []
        np.testing.assert_allclose(y.numpy(), [1, 4, 9])
        wp.launch(square, dim=0, inputs=[x], outputs=[y])
    assert len(tape.launches) == 1
    assert tape.launches[0][1] == (0,)
    tape.backward(grads={y: wp.ones(3, dtype=float)})  # a zero-thread adjoint does nothing
    np.testing.assert_allclose(x.grad.numpy(), [0, 0, 0])


def test_adjoint_launch_under_active_tape_is_recorded_as_forward_record():
    x = wp.array(f32([1, 2, 3]), dtype=float, requires_grad=True)
    y = wp.zeros(3, dtype=float, requires_grad=True)
    wp.launch(square, dim=3, inputs=[x], outputs=[y])
    y.grad.fill_(1.0)
    tape = wp.Tape()
    with tape:
        wp.launch(square, dim=3, inputs=[x], outputs=[y], adj_inputs=[None], adj_outputs=[None],
                  adjoint=True)
    np.testing.assert_allclose(x.grad.numpy(), [2, 4, 6])
    assert len(tape.launches) == 1
    rec = tape.launches[0]
    assert rec[0] is square and rec[3] == [x] and rec[4] == [y]


# --------------------------------------------------------------------------- §1.4 record_launch


def test_record_launch_keeps_dim_unnormalized_and_backpropagates():
    x = wp.array(f32([3, 4]), dtype=float, requires_grad=True)
    y = wp.zeros(2, dtype=float, requires_grad=True)
    wp.launch(square, dim=2, inputs=[x], outputs=[y])  # the forward, run unrecorded
    tape = wp.Tape()
    tape.record_launch(square, 2, 0, [x], [y], "cpu")  # no active tape needed
    rec = tape.launches[0]
    assert len(rec) == 8
    assert rec[1] == 2 and isinstance(rec[1], int)
    assert rec[5] == "cpu"
    assert rec[7] == {}
    tape.backward(grads={y: wp.ones(2, dtype=float)})
    np.testing.assert_allclose(x.grad.numpy(), [6, 8])


# --------------------------------------------------------------------------- §6 item 11 record_func


def test_record_func_runs_in_reverse_order_interleaved_with_kernels():
    x = wp.array(f32([1, 2, 3]), dtype=float, requires_grad=True)
    y = wp.zeros(3, dtype=float, requires_grad=True)
    z = wp.zeros(3, dtype=float, requires_grad=True)
    log = []
    tape = wp.Tape()
    with tape:
        wp.launch(mul_constant, dim=3, inputs=[x], outputs=[y])
        tape.record_func(lambda: log.append(("cb1", y.grad.numpy().copy(), x.grad.numpy().copy())),
                         [y])
        wp.launch(mul_constant, dim=3, inputs=[y], outputs=[z])
        tape.record_func(lambda: log.append(("cb2", z.grad.numpy().copy(), y.grad.numpy().copy())),
                         [z])
    assert len(tape.launches) == 4
    assert callable(tape.launches[1]) and callable(tape.launches[3])
    tape.backward(grads={z: wp.ones(3, dtype=float)})
    assert [entry[0] for entry in log] == ["cb2", "cb1"]
    # cb2 runs first: z's seed is still there, nothing reached y yet
    np.testing.assert_allclose(log[0][1], [1, 1, 1])
    np.testing.assert_allclose(log[0][2], [0, 0, 0])
    # cb1 runs after the y->z adjoint and before the x->y adjoint
    np.testing.assert_allclose(log[1][1], [2, 2, 2])
    np.testing.assert_allclose(log[1][2], [0, 0, 0])
    np.testing.assert_allclose(x.grad.numpy(), [4, 4, 4])


def test_record_func_registers_arrays_for_zero():
    a = wp.array(f32([1, 2]), dtype=float, requires_grad=True)
    b = wp.array(f32([1, 2]), dtype=float, requires_grad=True)
    called = []
    tape = wp.Tape()
    tape.record_func(lambda: called.append(True), [a, b])
    assert tape.launches[0] is not None and callable(tape.launches[0])
    assert tape.gradients[a] is a.grad and tape.gradients[b] is b.grad
    a.grad.fill_(3.0)
    b.grad.fill_(4.0)
    tape.zero()  # registered by record_func, so zeroed even before any backward
    np.testing.assert_allclose(a.grad.numpy(), [0, 0])
    np.testing.assert_allclose(b.grad.numpy(), [0, 0])
    tape.backward()
    assert called == [True]


def test_record_func_error_keeps_callback_and_earlier_arrays():
    ok = wp.array(f32([1, 2]), dtype=float, requires_grad=True)
    no_grad = wp.array(f32([1, 2]), dtype=float)
    never_checked = wp.array(f32([1, 2]), dtype=float, requires_grad=True)

    def callback():
        pass

    tape = wp.Tape()
    with pytest.raises(RuntimeError) as info:
        tape.record_func(callback, [ok, no_grad, never_checked])
    assert str(info.value) == (
        f"Array {no_grad} is not of type wp.array or is missing a gradient array. Set array "
        "parameter requires_grad=True during instantiation.")
    assert tape.launches == [callback]
    assert ok in tape.gradients
    assert no_grad not in tape.gradients
    assert never_checked not in tape.gradients


def test_record_func_rejects_non_arrays_and_empty_grads():
    tape = wp.Tape()
    with pytest.raises(RuntimeError, match="is not of type wp.array or is missing a gradient array"):
        tape.record_func(lambda: None, [np.ones(2)])
    empty = wp.zeros(0, dtype=float, requires_grad=True)  # len(grad) == 0 is falsy
    with pytest.raises(RuntimeError, match="is missing a gradient array"):
        tape.record_func(lambda: None, [empty])
    assert len(tape.launches) == 2


def _jacobi_matrix():
    return np.array([[4.0, 1.0, 0.5, 0.0],
                     [1.0, 5.0, 1.0, 0.5],
                     [0.5, 1.0, 6.0, 1.0],
                     [0.0, 0.5, 1.0, 4.0]])


def test_record_func_jacobi_composite():
    """FEM-Darcy-style composite: record, exit, record_func outside, re-enter and record more."""
    n, iters = 4, 60
    A_np = _jacobi_matrix()
    p_np = np.array([1.0, -2.0, 0.5, 3.0])
    w_np = np.array([0.3, -1.0, 2.0, 0.7])

    A = wp.array(A_np, dtype=wp.float64)
    p = wp.array(p_np, dtype=wp.float64, requires_grad=True)
    b = wp.zeros(n, dtype=wp.float64, requires_grad=True)
    x = wp.zeros(n, dtype=wp.float64, requires_grad=True)
    w = wp.array(w_np, dtype=wp.float64)
    loss = wp.zeros(1, dtype=wp.float64, requires_grad=True)
    bufs = [wp.zeros(n, dtype=wp.float64) for _ in range(2)]

    tape = wp.Tape()
    with tape:
        wp.launch(scale_f64, dim=n, inputs=[p], outputs=[b])

    # the solve is not recorded: Jacobi iterations with ping-pong buffers
    src, dst = bufs
    src.zero_()
    for _ in range(iters):
        wp.launch(jacobi_step, dim=n, inputs=[A, b, src, dst, n], record_tape=False)
        src, dst = dst, src
    x.assign(src)

    g_bufs = [wp.zeros(n, dtype=wp.float64) for _ in range(2)]

    def solve_adjoint():
        g_out, g_in = g_bufs
        g_out.assign(x.grad)
        for _ in range(iters):
            wp.launch(jacobi_adjoint_step, dim=n, inputs=[A, g_out, g_in, b.grad, n],
                      record_tape=False)
            g_out, g_in = g_in, g_out
        x.grad.zero_()  # the solve wrote x: consume its adjoint (final write wins)

    tape.record_func(solve_adjoint, arrays=[b, x])  # outside any `with`
    with tape:
        wp.launch(weighted_sum_f64, dim=n, inputs=[w, x], outputs=[loss])

    assert len(tape.launches) == 3
    x_ref = np.linalg.solve(A_np, 2.0 * p_np)
    np.testing.assert_allclose(x.numpy(), x_ref, rtol=1e-10)
    np.testing.assert_allclose(loss.numpy(), [w_np @ x_ref], rtol=1e-10)

    tape.backward(loss=loss)
    # d(w . A^-1 (2p)) / dp = 2 A^-T w
    np.testing.assert_allclose(p.grad.numpy(), 2.0 * np.linalg.solve(A_np.T, w_np), rtol=1e-9)
    np.testing.assert_allclose(x.grad.numpy(), np.zeros(n))
    np.testing.assert_allclose(b.grad.numpy(), np.zeros(n))  # consumed by the scale store adjoint

    tape.zero()
    for arr in (p, b, x, loss):
        np.testing.assert_allclose(arr.grad.numpy(), np.zeros(arr.shape))


# --------------------------------------------------------------------------- §6 item 12 scopes


def test_scope_begin_end_with_nothing_between_disappears():
    tape = wp.Tape()
    tape.record_scope_begin("empty")
    tape.record_scope_end()
    assert tape.scopes == []


def test_nested_nonempty_scopes():
    x = wp.array(f32([1, 2, 3]), dtype=float, requires_grad=True)
    y = wp.zeros(3, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        tape.record_scope_begin("outer")
        tape.record_scope_begin("inner")
        wp.launch(square, dim=3, inputs=[x], outputs=[y])
        tape.record_scope_end()
        tape.record_scope_end()
    assert tape.scopes == [(0, "outer", {}), (0, "inner", {}), (1, None, None), (1, None, None)]


def test_nested_empty_scopes_disappear():
    tape = wp.Tape()
    tape.record_scope_begin("outer")
    tape.record_scope_begin("inner")
    tape.record_scope_end()
    tape.record_scope_end()
    assert tape.scopes == []


def test_empty_scope_kept_with_remove_scope_if_empty_false():
    tape = wp.Tape()
    tape.record_scope_begin("empty2")
    tape.record_scope_end(remove_scope_if_empty=False)
    assert tape.scopes == [(0, "empty2", {}), (0, None, None)]


def test_scope_metadata_is_stored():
    tape = wp.Tape()
    tape.record_scope_begin("rep", {"type": "repeated"})
    tape.launches.append(lambda: None)
    tape.record_scope_end()
    assert tape.scopes == [(0, "rep", {"type": "repeated"}), (1, None, None)]


def test_scope_end_without_begin_raises():
    tape = wp.Tape()
    with pytest.raises(RuntimeError, match="Warp: Error, ended tape scope, but scope not present"):
        tape.record_scope_end()


def test_scope_end_twice_raises():
    tape = wp.Tape()
    tape.record_scope_begin("scope")
    tape.launches.append(lambda: None)
    tape.record_scope_end()
    with pytest.raises(RuntimeError, match="Warp: Error, ended tape scope, but scope not present"):
        tape.record_scope_end()
    tape2 = wp.Tape()
    tape2.record_scope_begin("scope")
    tape2.record_scope_end()  # popped as empty
    with pytest.raises(RuntimeError, match="ended tape scope, but scope not present"):
        tape2.record_scope_end()
