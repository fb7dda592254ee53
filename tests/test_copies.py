"""Tape-recorded copies (SPEC §2.7, §6 items 21–22): ``wp.copy``, ``wp.clone``, ``array.assign``.

Values are Warp 1.19's (test_tape.py copy-adjoint tests): the adjoint accumulates into the source
window and consumes the destination window unless ``retain_grad``; unsupported patterns fall
back to the old overwrite with a once-only warning.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import difftape as wp
from difftape._src import copies

N = 4


@wp.kernel
def mul_constant(x: wp.array(dtype=float), y: wp.array(dtype=float)):
    i = wp.tid()
    y[i] = x[i] * 2.0


@wp.kernel
def sum_kernel(x: wp.array(dtype=float), total: wp.array(dtype=float)):
    i = wp.tid()
    wp.atomic_add(total, 0, x[i])


@wp.kernel
def sum_kernel_2d(x: wp.array2d(dtype=float), total: wp.array(dtype=float)):
    i, j = wp.tid()
    wp.atomic_add(total, 0, x[i, j])


@wp.kernel
def sum_kernel_4d(x: wp.array4d(dtype=float), total: wp.array(dtype=float)):
    i, j, k, m = wp.tid()
    wp.atomic_add(total, 0, x[i, j, k, m])


def ramp(n: int = N) -> wp.array:
    return wp.array(np.arange(1.0, n + 1), dtype=float, requires_grad=True)


def new_loss() -> wp.array:
    return wp.zeros(1, dtype=float, requires_grad=True)


@pytest.fixture
def fresh_fallback_warning():
    """The fallback warning is once per process; let each test see its own."""
    copies._warned.clear()
    yield
    copies._warned.clear()


# --------------------------------------------------------------------------- forward


def test_forward_copy_copies_grad_even_without_tape():
    a = wp.array([1.0, 2.0], dtype=float, requires_grad=True)
    b = wp.zeros(2, dtype=float, requires_grad=True)
    a.grad.fill_(7.0)
    wp.copy(b, a)
    assert b.numpy().tolist() == [1.0, 2.0]
    assert b.grad.numpy().tolist() == [7.0, 7.0]


def test_copy_is_recorded_only_when_both_sides_have_grad():
    x = ramp()
    plain = wp.zeros(N, dtype=float)
    tape = wp.Tape()
    with tape:
        wp.copy(plain, x)
        detached = wp.clone(x, requires_grad=False)
        wp.copy(wp.zeros(N, dtype=float, requires_grad=True), x)
    assert len(tape.launches) == 1 and callable(tape.launches[0])
    assert detached.numpy().tolist() == x.numpy().tolist()
    assert set(map(id, tape.gradients)) >= {id(x)}


# --------------------------------------------------------------------------- accumulation


def test_clone_adjoint_accumulates_with_kernel_read_of_source():
    x, loss = ramp(), new_loss()
    doubled = wp.zeros_like(x)
    tape = wp.Tape()
    with tape:
        cloned = wp.clone(x)
        wp.launch(mul_constant, dim=N, inputs=[x, doubled])
        wp.launch(sum_kernel, dim=N, inputs=[doubled], outputs=[loss])
        wp.launch(sum_kernel, dim=N, inputs=[cloned], outputs=[loss])
    tape.backward(loss)
    np.testing.assert_array_equal(x.grad.numpy(), np.full(N, 3.0))


def test_clone_then_overwrite_chain_gives_8():
    x, loss = ramp(), new_loss()
    tape = wp.Tape()
    with tape:
        q = x
        for _ in range(3):
            out = wp.clone(q)
            wp.launch(mul_constant, dim=N, inputs=[q, out])
            q = out
        wp.launch(sum_kernel, dim=N, inputs=[q], outputs=[loss])
    tape.backward(loss)
    np.testing.assert_array_equal(x.grad.numpy(), np.full(N, 8.0))


def test_assign_records_the_same_adjoint():
    x, loss = ramp(), new_loss()
    doubled, dst = wp.zeros_like(x), wp.zeros_like(x)
    tape = wp.Tape()
    with tape:
        dst.assign(x)
        wp.launch(mul_constant, dim=N, inputs=[x, doubled])
        wp.launch(sum_kernel, dim=N, inputs=[doubled], outputs=[loss])
        wp.launch(sum_kernel, dim=N, inputs=[dst], outputs=[loss])
    tape.backward(loss)
    np.testing.assert_array_equal(x.grad.numpy(), np.full(N, 3.0))


@pytest.mark.skipif(not hasattr(wp, "vec3"), reason="vec3 arrives with issue 3")
def test_vec3_copy_accumulates_to_2():
    @wp.kernel
    def sum_vec(x: wp.array(dtype=wp.vec3), total: wp.array(dtype=float)):
        i = wp.tid()
        v = x[i]
        wp.atomic_add(total, 0, v[0] + v[1] + v[2])

    xv = wp.array(np.ones((N, 3), np.float32), dtype=wp.vec3, requires_grad=True)
    dstv = wp.zeros(N, dtype=wp.vec3, requires_grad=True)
    loss = new_loss()
    tape = wp.Tape()
    with tape:
        wp.copy(dstv, xv)
        wp.launch(sum_vec, dim=N, inputs=[xv], outputs=[loss])
        wp.launch(sum_vec, dim=N, inputs=[dstv], outputs=[loss])
    tape.backward(loss)
    np.testing.assert_array_equal(xv.grad.numpy(), np.full((N, 3), 2.0))


# --------------------------------------------------------------------------- consumption


def test_copy_over_a_dead_kernel_write_consumes_it():
    x = wp.array(np.ones(N), dtype=float, requires_grad=True)
    s = wp.array(np.full(N, 5.0), dtype=float, requires_grad=True)
    y, loss = wp.zeros_like(x), new_loss()
    tape = wp.Tape()
    with tape:
        wp.launch(mul_constant, dim=N, inputs=[x], outputs=[y])
        wp.copy(y, s)
        wp.launch(sum_kernel, dim=N, inputs=[y], outputs=[loss])
    tape.backward(loss)
    np.testing.assert_array_equal(s.grad.numpy(), np.ones(N))
    np.testing.assert_array_equal(x.grad.numpy(), np.zeros(N))


def test_two_copies_into_one_destination_only_last_propagates():
    a = wp.array(np.ones(N), dtype=float, requires_grad=True)
    b = wp.array(np.full(N, 2.0), dtype=float, requires_grad=True)
    dst, loss = wp.zeros_like(a), new_loss()
    tape = wp.Tape()
    with tape:
        wp.copy(dst, a)
        wp.copy(dst, b)
        wp.launch(sum_kernel, dim=N, inputs=[dst], outputs=[loss])
    tape.backward(loss)
    np.testing.assert_array_equal(b.grad.numpy(), np.ones(N))
    np.testing.assert_array_equal(a.grad.numpy(), np.zeros(N))


def test_partial_copy_consumes_only_its_window():
    x = wp.array(np.ones(N), dtype=float, requires_grad=True)
    s2 = wp.array(np.full(2, 5.0), dtype=float, requires_grad=True)
    y, loss = wp.zeros_like(x), new_loss()
    tape = wp.Tape()
    with tape:
        wp.launch(mul_constant, dim=N, inputs=[x], outputs=[y])
        wp.copy(y, s2, dest_offset=1, src_offset=0, count=2)
        wp.launch(sum_kernel, dim=N, inputs=[y], outputs=[loss])
    tape.backward(loss)
    np.testing.assert_array_equal(s2.grad.numpy(), np.ones(2))
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 0.0, 0.0, 2.0])


def test_retain_grad_destination_is_not_consumed():
    x = wp.array(np.ones(N), dtype=float, requires_grad=True)
    s = wp.array(np.full(N, 5.0), dtype=float, requires_grad=True)
    y = wp.zeros(N, dtype=float, requires_grad=True, retain_grad=True)
    loss = new_loss()
    tape = wp.Tape()
    with tape:
        wp.launch(mul_constant, dim=N, inputs=[x], outputs=[y])
        wp.copy(y, s)
        wp.launch(sum_kernel, dim=N, inputs=[y], outputs=[loss])
    tape.backward(loss)
    np.testing.assert_array_equal(s.grad.numpy(), np.ones(N))
    np.testing.assert_array_equal(x.grad.numpy(), np.full(N, 2.0))


def test_retain_grad_is_read_at_backward_time():
    s = wp.array(np.full(N, 5.0), dtype=float, requires_grad=True)
    y = wp.zeros(N, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.copy(y, s)
    y.retain_grad = True
    tape.backward(grads={y: wp.ones(N)})
    np.testing.assert_array_equal(y.grad.numpy(), np.ones(N))
    np.testing.assert_array_equal(s.grad.numpy(), np.ones(N))


# --------------------------------------------------------------------------- windows and views


def test_offset_window_accumulates_only_the_copied_elements():
    x, loss = ramp(), new_loss()
    doubled = wp.zeros_like(x)
    window = wp.zeros(2, dtype=float, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.copy(window, x, dest_offset=0, src_offset=1, count=2)
        wp.launch(mul_constant, dim=N, inputs=[x, doubled])
        wp.launch(sum_kernel, dim=N, inputs=[doubled], outputs=[loss])
        wp.launch(sum_kernel, dim=2, inputs=[window], outputs=[loss])
    tape.backward(loss)
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 3.0, 3.0, 2.0])


def test_strided_column_source_and_destination():
    base = wp.array(np.ones((3, 4), np.float32), dtype=float, requires_grad=True)
    dst, loss = wp.zeros(2, dtype=float, requires_grad=True), new_loss()
    tape = wp.Tape()
    with tape:
        wp.copy(dst, base[:, 2], src_offset=1, count=2)
        wp.launch(sum_kernel, dim=2, inputs=[dst], outputs=[loss])
    tape.backward(loss)
    expected = np.zeros((3, 4), np.float32)
    expected[1:, 2] = 1.0
    np.testing.assert_array_equal(base.grad.numpy(), expected)

    base = wp.array(np.ones((3, 4), np.float32), dtype=float, requires_grad=True)
    src, loss = wp.array(np.ones(3, np.float32), dtype=float, requires_grad=True), new_loss()
    tape = wp.Tape()
    with tape:
        wp.copy(base[:, 2], src)
        wp.launch(sum_kernel_2d, dim=(3, 4), inputs=[base], outputs=[loss])
    tape.backward(loss)
    np.testing.assert_array_equal(src.grad.numpy(), np.ones(3))
    expected = np.ones((3, 4), np.float32)
    expected[:, 2] = 0.0
    np.testing.assert_array_equal(base.grad.numpy(), expected)


def test_clone_of_higher_rank_view_and_full_4d_copy():
    x = wp.array(np.ones((2, 3, 4)), dtype=wp.float64, requires_grad=True)
    tape = wp.Tape()
    with tape:
        cloned = wp.clone(x[:, 0:2, :])
    tape.backward(grads={cloned: wp.ones_like(cloned)})
    expected = np.zeros((2, 3, 4))
    expected[:, 0:2, :] = 1.0
    np.testing.assert_array_equal(x.grad.numpy(), expected)

    shape = (2, 2, 3, 4)
    x = wp.array(np.ones(shape, np.float32), dtype=float, requires_grad=True)
    dst, loss = wp.zeros_like(x), new_loss()
    tape = wp.Tape()
    with tape:
        wp.copy(dst, x)
        wp.launch(sum_kernel_4d, dim=shape, inputs=[x], outputs=[loss])
        wp.launch(sum_kernel_4d, dim=shape, inputs=[dst], outputs=[loss])
    tape.backward(loss)
    np.testing.assert_array_equal(x.grad.numpy(), np.full(shape, 2.0))
    np.testing.assert_array_equal(dst.grad.numpy(), np.zeros(shape))


# --------------------------------------------------------------------------- fallback


def test_overlapping_self_copy_falls_back_with_one_warning(fresh_fallback_warning):
    y, loss = ramp(), new_loss()
    tape = wp.Tape()
    with tape:
        wp.copy(y, y, dest_offset=1, src_offset=0, count=3)
        wp.launch(sum_kernel, dim=N, inputs=[y], outputs=[loss])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        tape.backward(loss)
        grad = y.grad.numpy().copy()
        tape.backward(loss)  # once only
    texts = [str(w.message) for w in caught]
    assert len(texts) == 1 and caught[0].category is UserWarning
    assert texts[0] == (
        "A tape-recorded wp.copy() encountered a copy pattern whose gradients cannot yet be "
        "fully tracked (overlapping copy). The backward pass may overwrite existing source "
        "gradients or fail to clear gradients from overwritten destination values.")
    assert caught[0].filename == __file__
    np.testing.assert_array_equal(grad, np.ones(N))


def test_interleaved_columns_fall_back_to_overwrite(fresh_fallback_warning):
    base = wp.array(np.ones((N, 2), np.float32), dtype=float, requires_grad=True)
    loss = new_loss()
    tape = wp.Tape()
    with tape:
        wp.copy(base[:, 1], base[:, 0])
        wp.launch(sum_kernel_2d, dim=(N, 2), inputs=[base], outputs=[loss])
    with pytest.warns(UserWarning, match="overlapping copy"):
        tape.backward(loss)
    np.testing.assert_array_equal(base.grad.numpy(), np.ones((N, 2)))


def test_bool_copy_falls_back_and_leaves_destination(fresh_fallback_warning):
    b = wp.zeros(N, dtype=wp.bool, requires_grad=True)
    tape = wp.Tape()
    with tape:
        cloned = wp.clone(b)
    cloned.grad.fill_(True)
    with pytest.warns(UserWarning, match="copy between unsupported gradient dtypes"):
        tape.backward()
    assert bool(np.all(b.grad.numpy())) and bool(np.all(cloned.grad.numpy()))


def test_reinterpreting_copy_moves_bytes(fresh_fallback_warning):
    a = wp.array(np.ones(N, np.float32), dtype=float, requires_grad=True)
    b = wp.zeros(N, dtype=wp.int32, requires_grad=True)
    tape = wp.Tape()
    with tape:
        wp.copy(b, a)
    b.grad.assign(np.ones(N, np.int32))
    with pytest.warns(UserWarning, match="unsupported gradient dtypes"):
        tape.backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.ones(N, np.int32).view(np.float32))
    np.testing.assert_array_equal(b.grad.numpy(), np.ones(N, np.int32))


def test_log_level_above_warning_silences_fallback(fresh_fallback_warning, monkeypatch):
    monkeypatch.setattr(wp.config, "log_level", wp.LOG_ERROR)
    y = ramp()
    tape = wp.Tape()
    with tape:
        wp.copy(y, y, dest_offset=1, src_offset=0, count=3)
    tape.backward(grads={y: wp.ones(N)})  # filterwarnings=error: any warning fails
